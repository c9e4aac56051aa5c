"""The fix: what to do about the walk's finding, with its commands ready to copy.

Until the SRE reaches the verdict the panel shows the fix of the finding the walk currently
ends in, marked as proposed. The highlighted command is the one ``c`` copies; clicking a
command copies it too. A command that changes state (``mutates`` in the playbook) is marked
``!`` instead of ``$`` and is only copied after a confirmation; ``C`` copies every read-only
command of the fix at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from gputriage.playbook.transcript import Finding, FixCommand
from gputriage.textsafe import inert, inert_line
from gputriage.tui.view import TriageView


class CommandList(OptionList, inherit_bindings=False):
    """Fix commands; ``enter`` is left to the app (it follows the walk)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor_up", "Up", show=False),
        Binding("down,j", "cursor_down", "Down", show=False),
    ]


class FixPanel(Vertical):
    """Fix summary and commands of every finding of the walk."""

    ALLOW_MAXIMIZE = True  # ``f`` / ``z``: the whole screen for it

    @dataclass
    class CommandChosen(Message):
        """The SRE clicked a command: copy it."""

        command: str
        mutates: bool = False
        why: str = ""

    view: reactive[TriageView | None] = reactive(None, always_update=True)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.commands: tuple[str, ...] = ()
        self.records: tuple[FixCommand, ...] = ()  # one per command, same order

    def compose(self) -> ComposeResult:
        # Commands first: they are what the SRE came for, and never scroll out of sight.
        yield Static(id="fix-head")
        yield CommandList(id="fix-commands")
        yield Static(id="fix-text")

    @property
    def selected_command(self) -> str:
        """The highlighted command, else the first one ("" when there is none)."""
        index = self.query_one(CommandList).highlighted
        if not self.commands:
            return ""
        return self.commands[index if index is not None else 0]

    @property
    def selected_record(self) -> FixCommand | None:
        """The highlighted command as data (where it runs, whether it mutates, why)."""
        index = self.query_one(CommandList).highlighted
        if not self.records:
            return None
        return self.records[index if index is not None else 0]

    @property
    def read_only_commands(self) -> tuple[str, ...]:
        """Every command shown that changes nothing: what ``C`` copies."""
        return tuple(c for c, r in zip(self.commands, self.records, strict=True) if not r.mutates)

    def watch_view(self, view: TriageView | None) -> None:
        if view is None or not self.is_mounted:
            return
        findings = [f for f in view.findings if f.fix.summary or f.fix.commands]
        head = self.query_one("#fix-head", Static)
        text = self.query_one("#fix-text", Static)
        # Copied text is what was shown: a command templated from cluster data stays inert.
        records = tuple(r for f in findings for r in f.fix.command_records() if r.text)
        commands = tuple(inert_line(r.text) for r in records)
        if not findings:
            head.update(Content.styled("Fix: reach a verdict to see what to do.", "$text-muted"))
            text.update("")
        else:
            label = "Fix" if view.at_verdict else "Fix (proposed: follow the walk to confirm)"
            head.update(
                Content.assemble((label, "bold"), (_commands_hint(len(commands)), "$text-muted"))
            )
            text.update(Content.assemble(*_summaries(findings)[1:]))
        if commands != self.commands or records != self.records:
            self.commands = commands
            self.records = records
            options = self.query_one(CommandList)
            options.set_options(
                [
                    Option(
                        Content.assemble(
                            ("! ", "bold $warning") if r.mutates else ("$ ", "$text-muted"),
                            (c, "bold $warning" if r.mutates else "bold"),
                        )
                    )
                    for c, r in zip(commands, records, strict=True)
                ]
            )
            options.display = bool(commands)
            if commands:
                options.highlighted = 0

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        record = self.records[event.option_index]
        self.post_message(
            self.CommandChosen(self.commands[event.option_index], record.mutates, record.why)
        )


def _summaries(findings: list[Finding]) -> list[str | tuple[str, str]]:
    parts: list[str | tuple[str, str]] = []
    for f in findings:
        parts += ["\n", (f"{inert_line(f.id)}: ", "$text-muted"), inert(f.fix.summary)]
    return parts


def _commands_hint(count: int) -> str:
    if not count:
        return ""
    what = "1 command" if count == 1 else f"{count} commands"
    return f"  {what}: c copies the highlighted one, f shows them all"
