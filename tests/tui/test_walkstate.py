"""The cursor and override rules of the guided walk, without a terminal."""

from __future__ import annotations

from pathlib import Path

from gputriage.facts.model import FactSet, Target
from gputriage.playbook.transcript import Outcome, Transcript
from gputriage.tui import walkstate
from tests.tui.bundles import INSUFFICIENT, HandWalker

FACTS = FactSet(Target(namespace="ml", pod="trainer-0"), {})


def walk(
    bundle: Path, answers: dict[str, str] | None = None, overrides: dict[str, str] | None = None
) -> Transcript:
    return HandWalker(bundle)(FACTS, answers or {}, overrides or {})


def test_concluded_walk_allows_the_verdict_position(bundle: Path) -> None:
    t = walk(bundle)
    assert len(t.visits) == 2 and t.concluded
    assert walkstate.last_position(t) == 2
    assert walkstate.clamp(7, t) == 2 and walkstate.clamp(-3, t) == 0
    assert walkstate.at_verdict(2, t) and not walkstate.at_verdict(1, t)
    assert walkstate.visit_at(1, t) is t.visits[1] and walkstate.visit_at(2, t) is None


def test_follow_advances_then_reports_done(bundle: Path) -> None:
    t = walk(bundle)
    assert walkstate.follow(0, t) == walkstate.Step("advance", 1)
    assert walkstate.follow(1, t) == walkstate.Step("advance", 2)
    assert walkstate.follow(2, t) == walkstate.Step("done", 2)
    assert walkstate.follow(0, None) == walkstate.Step("wait", 0)


def test_a_waiting_walk_stops_at_the_question(bundle: Path) -> None:
    t = walk(bundle, overrides={"pending/scheduler": "taints"})
    assert t.question is not None and t.visits[-1].outcome is Outcome.WAITING
    assert walkstate.last_position(t) == 2  # the ask step, never past it
    assert walkstate.follow(1, t) == walkstate.Step("advance", 2)
    assert walkstate.follow(2, t) == walkstate.Step("ask", 2)
    assert walkstate.is_ask(t.visits[2]) and not walkstate.is_ask(t.visits[1])
    assert walkstate.question_position(t) == 2
    assert walkstate.question_position(walk(bundle)) is None
    assert walkstate.question_position(None) is None


def test_choosing_another_branch_records_an_override(bundle: Path) -> None:
    visit = walk(bundle).visits[1]
    taints = visit.choices[1]
    overrides = walkstate.with_choice({}, visit, taints)
    assert overrides == {"pending/scheduler": "taints"}
    overridden = walk(bundle, overrides=overrides).visits[1]
    assert overridden.outcome is Outcome.OVERRIDE
    assert walkstate.engine_target(overridden) == "finding:pending.insufficient-gpu"
    assert walkstate.taken_choice(overridden) == taints


def test_choosing_the_engines_branch_again_removes_the_override(bundle: Path) -> None:
    overridden = walk(bundle, overrides={"pending/scheduler": "taints"}).visits[1]
    back = walkstate.with_choice(
        {"pending/scheduler": "taints", "x/y": "z"}, overridden, overridden.choices[0]
    )
    assert back == {"x/y": "z"}


def test_targets_are_described_in_words(bundle: Path) -> None:
    t = walk(bundle)
    assert walkstate.describe_target("finding:" + INSUFFICIENT.id, t) == (
        "finding pending.insufficient-gpu: No schedulable node has 2 free nvidia.com/gpu"
    )
    assert walkstate.describe_target("pending/scheduler", t) == (
        "pending/scheduler: Does the scheduler say there is no free GPU?"
    )
    assert walkstate.describe_target("finding:other", None) == "finding other"
    assert walkstate.describe_target("", t) == "waiting for your answer"
    assert walkstate.short_target("finding:pending.x") == "finding pending.x"
    assert walkstate.short_target("pending/taints") == "pending/taints"
    assert walkstate.short_target("") == "-"


def test_an_empty_walk_has_only_position_zero() -> None:
    t = Transcript("", findings=(INSUFFICIENT,))
    assert walkstate.last_position(t) == 0 and walkstate.at_verdict(0, t)
    assert walkstate.last_position(Transcript("")) == 0
    assert walkstate.follow(0, Transcript("")) == walkstate.Step("wait", 0)
