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
  Tabs     events, scheduler, GPU nodes, kubelet, Xids, nvidia-smi, plugin, logs (1-9)
  Sources  how collecting each piece of evidence went; r (or a click) collects again"""


#: Keys that help shows as one row (the tab keys) rather than one row each.
_MERGED = {"app.next_tab(1)", "app.next_tab(-1)"}
#: Width of one column of keys (two columns side by side, so help fits 80x24 with a scroll).
_COLUMN = 37


def help_content() -> Content:
    parts: list[str | tuple[str, str]] = [
        ("Keys", "bold underline"),
        ("  (: the palette lists them with more words)", "$text-muted"),
        "\n",
    ]
    rows = [
        (b.key_display or b.key, b.description)
        for b in TRIAGE_BINDINGS
        if isinstance(b, Binding) and b.action not in _MERGED
    ]
    rows += [
        ("[ ]", "Previous / next tab"),
        ("↑/↓ j/k", "Move along the walk"),
        ("enter", "Open an evidence row"),
        ("w", "Wrap in a row"),
        ("ctrl+s", "Save a note"),
        ("esc", "Close a dialog"),
    ]
    for i in range(0, len(rows), 2):
        for keys, what in rows[i : i + 2]:
            parts += [(f"  {keys:<9}", "bold $accent"), f"{what:<{_COLUMN - 11}}"]
        parts.append("\n")
    parts += ["\n", ("Walk path", "bold underline"), "\n"]
    legend = [*((glyph, outcome.value) for outcome, glyph in GLYPHS.items()), ("⚑", "the verdict")]
    for glyph, meaning in legend:
        parts += [(f"  {glyph:<3}", "bold $accent"), f"{meaning:<14}"]
    parts += ["\n\n", ("Panels", "bold underline"), "\n", PANELS]
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
