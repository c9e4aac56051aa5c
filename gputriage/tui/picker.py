"""``gputriage demo`` without a name: pick one of the built-in scenarios."""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from gputriage.textsafe import inert_line

#: The picker's keys in words, under the title (the footer lists them too).
HINT = "enter opens a scenario  ·  ↑↓ or j/k move  ·  q quits"


class ScenarioList(OptionList):
    """The scenarios; its keys are shown in the footer (OptionList hides its own)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select", "Open"),
        Binding("down,j", "cursor_down", "Move", key_display="↑↓ j/k"),
        Binding("up,k", "cursor_up", "Up", show=False),
    ]


class ScenarioPicker(App[str]):
    TITLE = "gputriage demo"
    CSS = """
    Screen { align: center middle; }
    #picker { width: 100; max-width: 95%; height: auto; border: thick $primary; padding: 1 2; }
    #picker-keys { color: $text-muted; }
    OptionList { height: auto; max-height: 20; margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q,escape", "quit", "Quit")]

    def __init__(self, choices: list[tuple[str, str]]) -> None:
        super().__init__()
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static(
                Content.styled("gputriage demo: pick a scenario (no cluster needed)", "bold")
            )
            yield Static(Content(HINT), id="picker-keys")
            yield ScenarioList(
                *[
                    Option(
                        Content.assemble(
                            (inert_line(name), "bold"), "\n  ", (inert_line(about), "$text-muted")
                        ),
                        id=name,
                    )
                    for name, about in self.choices
                ]
            )
        yield Footer()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.exit(self.choices[event.option_index][0])
