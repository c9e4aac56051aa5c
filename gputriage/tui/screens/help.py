"""Keys, the glyphs of the walk path, and what the panels show."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from gputriage.tui.screens.triage import TRIAGE_BINDINGS
from gputriage.tui.widgets.walk_path import GLYPHS

PANELS = """\
  Walk     the path so far; dim steps ahead are the engine's proposal
  Step     the question, the branch the engine chose and why, the cited lines
  Fix      what to do about the finding, with commands to copy
  Tabs     events, scheduler reasons, GPU nodes, kubelet, Xids, nvidia-smi, plugin, logs
  Sources  how collecting each piece of evidence went; r (or a click) collects again"""


def help_content() -> Content:
    parts: list[str | tuple[str, str]] = [("Keys", "bold underline"), "\n"]
    rows = [(b.key_display or b.key, b.description, b.tooltip)
            for b in TRIAGE_BINDINGS if isinstance(b, Binding)]
    rows += [("↑/↓", "Move", "Along the walk path; click a step, a tab or a command"),
             ("ctrl+s", "Save", "Save a note (esc cancels any dialog)")]
    for keys, what, why in rows:
        parts += [(f"  {keys:<9}", "bold $accent"), f"{what:<12}{why}\n"]
    parts += ["\n", ("Walk path", "bold underline"), "\n"]
    legend = [*((glyph, outcome.value) for outcome, glyph in GLYPHS.items()),
              ("⚑", "the verdict")]
    for glyph, meaning in legend:
        parts += [(f"  {glyph:<9}", "bold $accent"), f"{meaning}\n"]
    parts += ["\n", ("Panels", "bold underline"), "\n", PANELS]
    return Content.assemble(*parts)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-dialog", classes="dialog"):
            yield Static(Content.styled("gputriage help", "bold"), classes="dialog-title")
            yield Static(help_content(), id="help-text")
        yield Footer()

    def action_close(self) -> None:
        self.dismiss(None)
