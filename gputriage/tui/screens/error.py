"""The one place background failures end up (harlequin's funnel): a modal with the reason."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from gputriage.textsafe import inert


class ErrorScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,enter", "close", "Close"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, title: str, message: str) -> None:
        super().__init__()
        self.title_text = title
        self.message = message

    def compose(self) -> ComposeResult:
        with Vertical(id="error-dialog", classes="dialog"):
            yield Static(
                Content.styled(inert(self.title_text), "bold $error"), classes="dialog-title"
            )
            yield Static(Content(inert(self.message)), id="error-message")
        yield Footer()

    def action_close(self) -> None:
        self.dismiss(None)
