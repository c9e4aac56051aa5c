"""The walk so far: one entry per step with the branch taken, overrides marked, then the verdict.

Steps past the cursor are the engine's proposal, drawn dim until the SRE follows them. The
highlight always shows the cursor; keys and clicks only *ask* to move it (``StepChosen``), the
app decides and hands the new view back down.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from gputriage.playbook.transcript import Outcome, Transcript, Visit
from gputriage.textsafe import inert_line
from gputriage.tui import walkstate
from gputriage.tui.view import TriageView

#: One glyph per outcome, so the path reads at a glance (and without colour).
GLYPHS: dict[Outcome, str] = {
    Outcome.CONDITION: "●",
    Outcome.OTHERWISE: "○",
    Outcome.ANSWER: "✎",
    Outcome.OVERRIDE: "↷",
    Outcome.UNKNOWN: "?",
    Outcome.WAITING: "…",
}


def branch_words(visit: Visit) -> str:
    where = walkstate.short_target(visit.target)
    if visit.outcome is Outcome.OVERRIDE:
        return f"↷ {where}  (override)"
    if visit.outcome is Outcome.WAITING:
        return "waiting for your answer (a)"
    if visit.outcome is Outcome.UNKNOWN:
        return f"could not decide → {where}"
    taken = walkstate.taken_choice(visit)
    if visit.outcome is Outcome.ANSWER and taken is not None:
        return f"you answered {taken.label} → {where}"
    return f"→ {where}"


#: Columns before a step's text ("12 ● "): wrapped lines of the step start under its text.
STEP_INDENT = 5
#: Columns before a finding id under the verdict.
FINDING_INDENT = 3
#: Below this many columns for the text, wrapping under it would leave too little room.
MIN_TEXT_WIDTH = 8


def hanging(head: Content, body: Content, width: int | None) -> Content:
    """``head`` then ``body``, with every wrapped line of ``body`` starting under its first
    character (not at column 0); a blank ``head`` narrows rather than cut a word in two.
    ``width``: the cells a line may take (None: not laid out yet, let the widget wrap)."""
    if width is None or width - head.cell_length < MIN_TEXT_WIDTH:
        return head + body
    longest = max((cell_len(word) for word in body.plain.split()), default=0)
    if not head.plain.strip() and longest > width - head.cell_length:
        # A blank indent gives way (down to one cell) before a word would be cut in two.
        head = Content(" " * max(1, width - longest))
    lines = body.wrap(width - head.cell_length) or [Content("")]
    pad = Content(" " * head.cell_length)
    return Content("\n").join([head + lines[0], *(pad + line for line in lines[1:])])


def visit_option(index: int, visit: Visit, ahead: bool, width: int | None = None) -> Option:
    style = "$text-muted" if ahead else ""
    glyph_style = "bold $warning" if visit.outcome is Outcome.OVERRIDE else "bold $accent"
    head = Content.assemble(
        (f"{index + 1:>2} ", style),
        (GLYPHS[visit.outcome], "$text-muted" if ahead else glyph_style),
        " ",
    )
    prompt = Content.styled(inert_line(visit.prompt or visit.ref), style or "bold")
    branch = Content.styled(inert_line(branch_words(visit)), "$text-muted" if ahead else "italic")
    return Option(
        Content("\n").join(
            [hanging(head, prompt, width), hanging(Content(" " * STEP_INDENT), branch, width)]
        ),
        id=f"step-{index}",
    )


def verdict_option(transcript: Transcript, ahead: bool, width: int | None = None) -> Option:
    label = "undetermined" if transcript.undetermined else "verdict"
    lines = [
        Content.assemble(
            ("   ⚑ ", "$text-muted" if ahead else "bold $error"),
            (label, "$text-muted" if ahead else "bold"),
        )
    ]
    for f in transcript.findings:  # one per line: finding ids are long
        lines.append(
            hanging(
                Content(" " * FINDING_INDENT),
                Content.styled(inert_line(f.id), "$text-muted" if ahead else "bold $error"),
                width,
            )
        )
    return Option(Content("\n").join(lines), id="verdict")


class WalkPath(OptionList, inherit_bindings=False):
    """The path of the walk; the highlight is the cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "step(-1)", "Previous step", show=False),
        Binding("down,j", "step(1)", "Next step", show=False),
        Binding("home", "step_to(0)", "First step", show=False),
    ]

    @dataclass
    class StepChosen(Message):
        """The SRE asked to look at step ``index`` (one past the last visit = the verdict)."""

        index: int

    view: reactive[TriageView | None] = reactive(None, always_update=True)
    _laid_out_for: int | None = None

    def watch_view(self, view: TriageView | None) -> None:
        if view is not None:
            self._show(view)

    def on_resize(self) -> None:
        # Wrapped lines are indented for one width: lay them out again for the new one.
        if self.view is not None and self._text_width() != self._laid_out_for:
            self._show(self.view)

    def _text_width(self) -> int | None:
        """Cells an option's line may take; a scrollbar's room is kept whether or not one
        shows (else a scrollbar appearing would re-wrap lines at column 0)."""
        padding = self.get_component_styles("option-list--option").padding.width
        width = self.content_region.width - self.styles.scrollbar_size_vertical - padding
        return width if width > 0 else None

    def _show(self, view: TriageView) -> None:
        width = self._laid_out_for = self._text_width()
        t = view.transcript
        options: list[Option] = []
        if t is not None:
            options = [visit_option(i, v, i > view.cursor, width) for i, v in enumerate(t.visits)]
            if t.findings and t.question is None:
                options.append(verdict_option(t, view.cursor < len(t.visits), width))
        if not options:
            options = [
                Option(Content(inert_line(view.walk_status) or "no walk yet"), disabled=True)
            ]
        self.set_options(options)
        if t is not None and options and not options[0].disabled:
            self.highlighted = min(view.cursor, len(options) - 1)

    def action_step(self, delta: int) -> None:
        if self.highlighted is not None:
            self.post_message(self.StepChosen(self.highlighted + delta))

    def action_step_to(self, index: int) -> None:
        self.post_message(self.StepChosen(index))

    def _on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.StepChosen(event.option_index))
