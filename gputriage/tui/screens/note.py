"""A modal to write a note about the incident; the app saves it at once (autosave)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, Static, TextArea

from gputriage.textsafe import inert_line


class NoteScreen(ModalScreen[str | None]):
    """Returns the note's text (``None`` when cancelled or empty)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save note", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, step: str = "") -> None:
        super().__init__()
        self.step = step

    def compose(self) -> ComposeResult:
        with Vertical(id="note-dialog", classes="dialog"):
            about = f" about {inert_line(self.step)}" if self.step else ""
            yield Static(Content.styled(f"Note{about}", "bold"), classes="dialog-title")
            yield TextArea(id="note-text", soft_wrap=True, show_line_numbers=False)
            yield Static(
                Content.styled(
                    "ctrl+s saves · esc cancels · notes go into the exported summary", "$text-muted"
                )
            )
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def action_save(self) -> None:
        text = self.query_one(TextArea).text.strip()
        self.dismiss(text or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
