"""Evidence tabs: events, scheduler reasons, GPU nodes, kubelet, Xids, nvidia-smi, plugin, logs.

What each tab holds is decided in :mod:`gputriage.tui.tables` (pure); this widget only draws
those tables, keeps the filter, and marks the rows the current step cites. Cells are rich
``Text`` objects, so nothing from the cluster is ever parsed as markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import DataTable, Input, Static, TabbedContent, TabPane

from gputriage.tui.tables import TABS, Row, TableData, cited_set
from gputriage.tui.view import TriageView

TONE_STYLES = {"ok": "green", "warning": "yellow", "error": "red", "": ""}
CITED_MARK = "▶ "


def row_cells(row: Row) -> list[Text]:
    style = "bold yellow" if row.cited else TONE_STYLES.get(row.tone, "")
    cells = [Text(c, style=style, no_wrap=True) for c in row.cells]
    if cells and row.cited:
        cells[0] = Text(CITED_MARK + row.cells[0], style=style, no_wrap=True)
    return cells


class EvidenceTable(DataTable[Text]):
    """One tab's rows."""


class EvidenceTabs(Vertical):
    """The tabbed evidence panels with a row filter (``/``)."""

    view: reactive[TriageView | None] = reactive(None, always_update=True)
    row_filter: reactive[str] = reactive("")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.shown: dict[str, TableData] = {}

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter rows in every tab (esc clears)", id="filter")
        with TabbedContent(id="tabs"):
            for spec in TABS:
                with TabPane(spec.title, id=f"tab-{spec.id}"):
                    yield Static(id=f"note-{spec.id}", classes="tab-note")
                    yield EvidenceTable(id=f"table-{spec.id}", cursor_type="row",
                                        zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False

    @property
    def filter_open(self) -> bool:
        return bool(self.query_one("#filter", Input).display)

    def open_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def close_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        self.row_filter = ""
        self.active_table().focus()

    def active_table(self) -> EvidenceTable:
        pane = self.query_one(TabbedContent).active or f"tab-{TABS[0].id}"
        return self.query_one(f"#{pane} EvidenceTable", EvidenceTable)

    def show_tab(self, tab_id: str) -> None:
        self.query_one(TabbedContent).active = f"tab-{tab_id}"

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.row_filter = event.value

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.active_table().focus()

    def watch_row_filter(self) -> None:
        self._redraw()

    def watch_view(self) -> None:
        self._redraw()

    def _redraw(self) -> None:
        view = self.view
        if view is None or not self.is_mounted:
            return
        cited = cited_set(view.citations())
        tabs = self.query_one(TabbedContent)
        for spec in TABS:
            data = spec.build(view.facts, view.evidence, view.pending, cited)
            data = data.filtered(self.row_filter)
            if self.shown.get(spec.id) == data:
                continue
            self.shown[spec.id] = data
            self.query_one(f"#note-{spec.id}", Static).update(Content(data.note))
            table = self.query_one(f"#table-{spec.id}", EvidenceTable)
            table.clear(columns=True)
            table.add_columns(*data.columns)
            table.add_rows(row_cells(r) for r in data.rows)
            first_cited = next((i for i, r in enumerate(data.rows) if r.cited), None)
            if first_cited is not None:
                table.move_cursor(row=first_cited)
            count = f" ({len(data.rows)})" if data.rows and spec.id != "sources" else ""
            tabs.get_tab(f"tab-{spec.id}").label = Content(spec.title + count)
