"""A modal that asks the SRE to pick one branch: answering a question, or overriding a step.

Returns the chosen :class:`~gputriage.playbook.transcript.Choice` (``None`` when dismissed).
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from gputriage.playbook.transcript import Choice
from gputriage.textsafe import inert, inert_line
from gputriage.tui import walkstate


class ChoiceScreen(ModalScreen[Choice | None]):
    """Pick one of ``choices``; the branch taken now and the engine's are marked.

    ``taken`` and ``proposed`` are indexes into ``choices`` (several branches may lead to the
    same target, so targets alone cannot say which one fired).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_none", "Cancel"),
    ]

    def __init__(
        self,
        title: str,
        prompt: str,
        choices: tuple[Choice, ...],
        *,
        taken: int | None = None,
        proposed: int | None = None,
        help: str = "",
    ) -> None:
        super().__init__()
        self.title_text = title
        self.prompt = prompt
        self.choices = choices
        self.taken = taken
        self.proposed = proposed
        self.help = help

    def compose(self) -> ComposeResult:
        with Vertical(id="choice-dialog", classes="dialog"):
            yield Static(Content.styled(self.title_text, "bold"), classes="dialog-title")
            yield Static(Content(inert(self.prompt)), id="choice-prompt")
            if self.help:
                yield Static(Content.styled(inert(self.help), "$text-muted"), id="choice-help")
            yield OptionList(
                *[self._option(i, c) for i, c in enumerate(self.choices)], id="choice-list"
            )
        yield Footer()

    def _option(self, index: int, choice: Choice) -> Option:
        marks = [
            word for word, at in (("taken", self.taken), ("engine", self.proposed)) if at == index
        ]
        return Option(
            Content.assemble(
                (inert_line(choice.label), "bold"),
                ("  → " + inert_line(walkstate.short_target(choice.target)), "$text-muted"),
                (f"  ({', '.join(marks)})" if marks else "", "$accent"),
            ),
            id=f"choice-{index}",
        )

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = self.taken or 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.choices[event.option_index])

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
