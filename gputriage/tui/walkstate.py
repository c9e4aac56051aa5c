"""The guided walk as the SRE moves through it: pure rules, no Textual.

The engine recomputes the whole walk from facts, answers and overrides (``Transcript``). The TUI
adds one thing of its own: a *cursor*, the step the SRE is looking at. Position ``i`` is
``transcript.visits[i]``; one past the last visit is the verdict, reachable only when the walk
concluded. These rules live here, apart from the app, so they are tested without a terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gputriage.facts.model import FactSet
from gputriage.playbook.transcript import Choice, Outcome, Transcript, Visit

#: ``(facts, answers, overrides) -> Transcript``: the engine with its playbooks bound.
Walker = Callable[[FactSet, Mapping[str, str], Mapping[str, str]], Transcript]

FINDING_PREFIX = "finding:"


def last_position(transcript: Transcript | None) -> int:
    """The furthest the cursor may go: the verdict when concluded, else the last visit."""
    if transcript is None:
        return 0
    n = len(transcript.visits)
    if transcript.findings and transcript.question is None:
        return n
    return max(0, n - 1)


def clamp(cursor: int, transcript: Transcript | None) -> int:
    return max(0, min(cursor, last_position(transcript)))


def at_verdict(cursor: int, transcript: Transcript | None) -> bool:
    return (
        transcript is not None
        and bool(transcript.findings)
        and transcript.question is None
        and cursor >= len(transcript.visits)
    )


def visit_at(cursor: int, transcript: Transcript | None) -> Visit | None:
    if transcript is None or not 0 <= cursor < len(transcript.visits):
        return None
    return transcript.visits[cursor]


def question_position(transcript: Transcript | None) -> int | None:
    """Where the step waiting for an answer is, if the walk waits for one."""
    if transcript is None or transcript.question is None:
        return None
    ref = transcript.question.ref
    return next(
        (i for i in range(len(transcript.visits) - 1, -1, -1) if transcript.visits[i].ref == ref),
        None,
    )


def is_ask(visit: Visit) -> bool:
    """An ``ask`` step: the SRE answers it rather than overriding it."""
    return visit.outcome in (Outcome.ANSWER, Outcome.WAITING)


def engine_target(visit: Visit) -> str:
    """Where the engine itself would have gone from this step (before any override)."""
    return visit.proposed if visit.outcome is Outcome.OVERRIDE else visit.target


def choice_index(visit: Visit, target: str) -> int | None:
    """The first branch of ``visit`` leading to ``target`` (several may lead there)."""
    return next((i for i, c in enumerate(visit.choices) if c.target == target), None)


def taken_choice(visit: Visit) -> Choice | None:
    index = choice_index(visit, visit.target)
    return visit.choices[index] if index is not None else None


def with_choice(overrides: Mapping[str, str], visit: Visit, choice: Choice) -> dict[str, str]:
    """The overrides after the SRE picks ``choice`` at ``visit``.

    Picking the branch the engine proposed removes the override instead of recording one, so a
    walk the SRE changed back reads as the engine's own again (no ``override`` mark).
    """
    updated = dict(overrides)
    if choice.target == engine_target(visit):
        updated.pop(visit.ref, None)
    else:
        updated[visit.ref] = choice.value
    return updated


@dataclass(frozen=True)
class Step:
    """What ``follow`` should do from the cursor."""

    kind: str  # "advance" | "ask" | "done" | "wait"
    cursor: int


def follow(cursor: int, transcript: Transcript | None) -> Step:
    """Take the proposed branch: move one step on, open the question, or say we are done."""
    if transcript is None:
        return Step("wait", 0)
    visit = visit_at(cursor, transcript)
    if visit is not None and visit.outcome is Outcome.WAITING:
        return Step("ask", cursor)
    if at_verdict(cursor, transcript):
        return Step("done", cursor)
    nxt = clamp(cursor + 1, transcript)
    return Step("advance", nxt) if nxt != cursor else Step("wait", cursor)


def short_target(target: str) -> str:
    """``finding pending.x`` or the step ref: where a branch leads, in one short phrase."""
    if target.startswith(FINDING_PREFIX):
        return "finding " + target[len(FINDING_PREFIX) :]
    return target or "-"


def describe_target(target: str, transcript: Transcript | None) -> str:
    """Words for a branch target: the next step's prompt, or the finding's title."""
    if not target:
        return "waiting for your answer"
    if target.startswith(FINDING_PREFIX):
        fid = target[len(FINDING_PREFIX) :]
        if transcript is not None:
            for f in transcript.findings:
                if f.id == fid:
                    return f"finding {fid}: {f.title}"
        return f"finding {fid}"
    if transcript is not None:
        for v in transcript.visits:
            if v.ref == target:
                return f"{target}: {v.prompt}"
    return target
