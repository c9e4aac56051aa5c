"""One evidence row, whole: its citation, the full source line and every cell, wrapped.

Everything here came from the cluster, so it is shown as plain ``Content`` (never markup) and
was made inert when the table was built. ``w`` toggles wrapping for lines that read better
unwrapped (a JSON line, a long klog line); the dialog then scrolls sideways.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from gputriage.tui.tables import RowDetail


def detail_content(detail: RowDetail) -> Content:
    parts: list[str | tuple[str, str]] = []
    if detail.citation:
        parts += [("from  ", "bold"), (detail.citation, "$text-muted"), "\n"]
    if detail.line:
        parts += ["\n", ("line", "bold underline"), "\n", detail.line, "\n"]
    if detail.fields:
        parts += ["\n", ("cells", "bold underline")]
        width = max(len(name) for name, _ in detail.fields)
        for name, value in detail.fields:
            parts += ["\n", (f"{name:<{width}}  ", "bold"), value]
    return Content.assemble(*parts)


class RowDetailScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,v,space", "close", "Close"),
        Binding("w", "toggle_wrap", "Wrap"),
    ]

    def __init__(self, detail: RowDetail) -> None:
        super().__init__()
        self.detail = detail

    def compose(self) -> ComposeResult:
        with ScrollableContainer(id="row-detail", classes="dialog"):
            yield Static(Content.styled(self.detail.title, "bold"), classes="dialog-title")
            yield Static(detail_content(self.detail), id="row-detail-text")
        yield Footer()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_toggle_wrap(self) -> None:
        text = self.query_one("#row-detail-text", Static)
        wrapped = text.styles.text_wrap != "nowrap"
        text.styles.text_wrap = "nowrap" if wrapped else "wrap"
        text.styles.width = "auto" if wrapped else "1fr"
        self.notify("off: scroll sideways" if wrapped else "on", title="wrap")
