"""The source status bar: a spinner per key still collecting, then how each one went.

Keys that came back ``ok`` are counted, not listed; every other status is named with its key
so the SRE sees at once what is missing and why (the Sources tab has the full reasons). The
spinner runs only while something is pending, so a settled screen is still.
"""

from __future__ import annotations

import time

from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Static

from gputriage.evidence.model import Status
from gputriage.report.source_states import SourceState, reading
from gputriage.textsafe import inert_line
from gputriage.tui.view import TriageView

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

STATUS_MARKS: dict[Status, tuple[str, str]] = {
    Status.OK: ("✓", "$success"),
    Status.UNAVAILABLE: ("–", "$text-muted"),
    Status.ERROR: ("✗", "$error"),
    Status.TIMEOUT: ("⏱", "$warning"),
    Status.FORBIDDEN: ("⊘", "$error"),
}

#: The longest reason shown inline; the Sources tab shows it whole.
MAX_REASON = 48
#: Up to this many uncollected keys are named; more are counted (the Sources tab lists them).
MAX_NAMED = 4


def status_content(view: TriageView, frame: int) -> Content:
    spin = SPINNER[frame % len(SPINNER)]
    ok = sum(
        1 for e in view.evidence.values() if e.status is Status.OK and e.key not in view.pending
    )
    total = len(set(view.evidence) | view.pending)
    parts: list[str | tuple[str, str]] = [("Sources ", "bold"), (f"{ok}/{total} ok", "bold")]
    for key in sorted(view.pending):
        parts += ["  ", (f"{spin} {key.value}", "$accent")]
    failed = False
    unavailable: list[str] = []
    not_applicable: list[str] = []
    for key, ev in view.evidence.items():
        if key in view.pending or ev.status is Status.OK:
            continue
        state = reading(ev, view.facts)
        if state.state is SourceState.NOT_APPLICABLE:
            not_applicable.append(key.value)
            continue
        if state.state is SourceState.NOT_COLLECTED:
            unavailable.append(key.value)
            continue
        failed = True
        mark, style = STATUS_MARKS[ev.status]
        reason = inert_line(ev.detail)
        if len(reason) > MAX_REASON:
            reason = reason[: MAX_REASON - 1] + "…"
        parts += [
            "  ",
            (f"{mark} {key.value}", style),
            (
                f" (failed: {ev.status.value}: {reason})"
                if reason
                else f" (failed: {ev.status.value})",
                "$text-muted",
            ),
        ]
    for label, names in (("not applicable", not_applicable), ("not collected", unavailable)):
        if names:
            mark, style = STATUS_MARKS[Status.UNAVAILABLE]
            shown = ", ".join(names) if len(names) <= MAX_NAMED else f"{len(names)} sources"
            parts += ["  ", (f"{mark} {label}: {shown}", style)]
    if view.live:
        parts += ["  ", ("● live", "bold $success")]
        if view.changed:
            stamps = ", ".join(
                f"{key.value} {time.strftime('%H:%M:%S', time.localtime(when))}"
                for key, when in sorted(view.changed.items(), key=lambda kv: kv[1])
            )
            parts += [("  changed since launch: ", "$text-muted"), (stamps, "bold $warning")]
    if failed and not view.pending:
        parts += ["  ", ("r (or a click here) retries", "bold $accent")]
    return Content.assemble(*parts)


class SourceStatus(Static):
    """One or two lines at the bottom; a click on it asks to collect everything again."""

    class RetryRequested(Message):
        """The SRE clicked the status bar: re-collect every source."""

    view: reactive[TriageView | None] = reactive(None, always_update=True)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._frame = 0
        self._timer: Timer | None = None

    def watch_view(self, view: TriageView | None) -> None:
        if view is None:
            return
        if view.pending and self._timer is None:
            self._timer = self.set_interval(0.1, self._tick)
        elif not view.pending and self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.update(status_content(view, self._frame))

    def on_click(self) -> None:
        self.post_message(self.RetryRequested())

    def _tick(self) -> None:
        self._frame += 1
        if self.view is not None:
            self.update(status_content(self.view, self._frame))
