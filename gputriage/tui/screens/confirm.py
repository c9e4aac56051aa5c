"""A yes/no modal: "copy a command that changes state?". Returns True only on ``y``/enter."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from gputriage.textsafe import inert, inert_line


class ConfirmScreen(ModalScreen[bool]):
    """Ask before doing ``what``; ``detail`` (cluster-derived text) is shown inert."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,enter", "answer(True)", "Yes, copy it"),
        Binding("n,escape", "answer(False)", "Cancel"),
    ]

    def __init__(self, title: str, command: str, detail: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.command = command
        self.detail = detail

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog", classes="dialog"):
            yield Static(Content.styled(self.title_text, "bold"), classes="dialog-title")
            yield Static(Content.styled(inert_line(self.command), "bold"), id="confirm-command")
            if self.detail:
                yield Static(Content.styled(inert(self.detail), "$text-muted"), id="confirm-detail")
            yield Static(Content.styled("y: copy it    n / esc: cancel", "$text-muted"))
        yield Footer()

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
