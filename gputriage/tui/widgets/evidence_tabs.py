"""Evidence tabs: events, scheduler reasons, GPU nodes, kubelet, Xids, nvidia-smi, plugin, logs.

What each tab holds is decided in :mod:`gputriage.tui.tables` (pure); this widget only draws
those tables, keeps the filter, and marks the rows the current step cites. Cells are rich
``Text`` objects, so nothing from the cluster is ever parsed as markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable, Input, Static, TabbedContent, TabPane

from gputriage.tui.tables import TABS, Cited, Row, RowDetail, TableData, cited_set, row_detail
from gputriage.tui.view import TriageView

TONE_STYLES = {"ok": "green", "warning": "yellow", "error": "red", "": ""}
CITED_MARK = "▶ "


def row_cells(row: Row) -> list[Text]:
    style = "bold yellow" if row.cited else TONE_STYLES.get(row.tone, "")
    cells = [Text(c, style=style, no_wrap=True) for c in row.cells]
    if cells and row.cited:
        cells[0] = Text(CITED_MARK + row.cells[0], style=style, no_wrap=True)
    return cells


def column_widths(labels: Sequence[str], rows: Sequence[Sequence[Text]]) -> list[int]:
    """Each column's width: its widest cell or label, as DataTable's auto width measures it.

    Given to the table rather than left to its auto width, which it measures later, when
    idle: a table refilled in between (a watched event arriving) kept its label widths."""
    widths = [cell_len(label) for label in labels]
    for row in rows:
        for i, cell in enumerate(row[: len(widths)]):
            widths[i] = max(widths[i], max(cell_len(line) for line in cell.plain.split("\n")))
    return widths


class EvidenceTable(DataTable[Text]):
    """One tab's rows; ``enter`` or ``space`` opens the highlighted row whole."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "select_cursor", "Open row", show=False),
    ]


class EvidenceTabs(Vertical):
    """The tabbed evidence panels with a row filter (``/``)."""

    @dataclass
    class RowOpened(Message):
        """The SRE asked to read a row whole (``enter``/``space`` on it, or ``v``)."""

        detail: RowDetail

    view: reactive[TriageView | None] = reactive(None, always_update=True)
    row_filter: reactive[str] = reactive("")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.shown: dict[str, TableData] = {}
        #: The citations the tabs last followed: a new step or verdict brings up its tab once,
        #: after which the SRE's own choice of tab stands.
        self._followed: Cited = frozenset()

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter rows in every tab (esc clears)", id="filter")
        with TabbedContent(id="tabs"):
            for spec in TABS:
                with TabPane(spec.title, id=f"tab-{spec.id}"):
                    yield Static(id=f"note-{spec.id}", classes="tab-note")
                    yield EvidenceTable(
                        id=f"table-{spec.id}", cursor_type="row", zebra_stripes=True
                    )

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

    def active_id(self) -> str:
        pane = self.query_one(TabbedContent).active or f"tab-{TABS[0].id}"
        return pane.removeprefix("tab-")

    def show_tab_number(self, number: int) -> None:
        """``1`` is the first tab; numbers past the last tab do nothing."""
        if 1 <= number <= len(TABS):
            self.show_tab(TABS[number - 1].id)

    def next_tab(self, delta: int) -> None:
        ids = [spec.id for spec in TABS]
        self.show_tab(ids[(ids.index(self.active_id()) + delta) % len(ids)])

    def highlighted_detail(self) -> RowDetail | None:
        """The active tab's highlighted row, whole (None when the tab has no rows)."""
        tab = self.active_id()
        data = self.shown.get(tab)
        table = self.active_table()
        if data is None or not data.rows or self.view is None:
            return None
        index = min(max(table.cursor_row, 0), len(data.rows) - 1)
        return self._detail(tab, data, index)

    def _detail(self, tab: str, data: TableData, index: int) -> RowDetail:
        title = next(spec.title for spec in TABS if spec.id == tab)
        evidence = self.view.evidence if self.view is not None else None
        assert evidence is not None
        return row_detail(
            f"{title}: row {index + 1} of {len(data.rows)}",
            data.columns,
            data.rows[index],
            evidence,
        )

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        tab = self.active_id()
        data = self.shown.get(tab)
        if data is not None and 0 <= event.cursor_row < len(data.rows) and self.view:
            self.post_message(self.RowOpened(self._detail(tab, data, event.cursor_row)))

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
            rows = [row_cells(r) for r in data.rows]
            table.clear(columns=True)
            for label, width in zip(data.columns, column_widths(data.columns, rows), strict=True):
                table.add_column(label, width=width)
            table.add_rows(rows)
            first_cited = next((i for i, r in enumerate(data.rows) if r.cited), None)
            if first_cited is not None:
                table.move_cursor(row=first_cited)
            count = f" ({len(data.rows)})" if data.rows and spec.id != "sources" else ""
            tabs.get_tab(f"tab-{spec.id}").label = Content(spec.title + count)
        self._follow(cited)

    def _follow(self, cited: Cited) -> None:
        """Bring up the first tab holding a cited row, when the citations changed."""
        if not cited or cited == self._followed:
            return
        self._followed = cited
        for spec in TABS:
            data = self.shown.get(spec.id)
            if data is not None and any(r.cited for r in data.rows):
                self.show_tab(spec.id)
                return
