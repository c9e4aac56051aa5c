"""What a walk produced: the contract between the engine, the report and the TUI.

The engine is a pure function (see ``gputriage.playbook.engine.walk``)::

    walk(playbooks, facts, answers={step_ref: choice}, overrides={step_ref: target})
        -> Transcript

It is recomputed from scratch whenever facts, answers or overrides change (milliseconds), so
callers never hold engine state. ``step_ref`` is ``"<playbook-id>/<step-id>"``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from gputriage.facts.lineref import LineRef


class Outcome(enum.StrEnum):
    """Why the walk left a step the way it did."""

    CONDITION = "condition"  # a CEL condition fired
    OTHERWISE = "otherwise"  # no condition fired; the step's `otherwise` was taken
    ANSWER = "answer"  # the SRE answered an `ask` step
    OVERRIDE = "override"  # the SRE chose another branch than the engine proposed
    UNKNOWN = "unknown"  # evidence needed to decide was unavailable
    WAITING = "waiting"  # an `ask` step with no answer yet: the walk stops here


@dataclass(frozen=True)
class Choice:
    """One branch the SRE may take from a step (for override menus and ask modals)."""

    value: str  # what goes into answers/overrides
    label: str  # words for the SRE
    target: str  # step ref or "finding:<id>"


@dataclass(frozen=True)
class Visit:
    """One step of the walk."""

    ref: str  # "<playbook>/<step>"
    playbook: str
    step: str
    prompt: str  # the SRE-facing question this step answers
    outcome: Outcome
    target: str  # where the walk went: a step ref, or "finding:<id>", or "" when waiting
    because: str = ""  # the fired branch's reason in plain words
    condition: str = ""  # the CEL source of the condition that fired (if any)
    proposed: str = ""  # for OVERRIDE: the target the engine had proposed
    citations: tuple[LineRef, ...] = ()
    unknown_facts: tuple[str, ...] = ()  # fact groups that were unknown when deciding
    choices: tuple[Choice, ...] = ()  # every branch the SRE could take instead


@dataclass(frozen=True)
class FixCommand:
    """One fix command, rendered: ``text`` is what the SRE pastes (``ssh NODE ...`` added for
    ``run: node``), the rest is the playbook's record of it."""

    text: str
    run: str = "local"  # local | node | cluster
    mutates: bool = False
    why: str = ""
    order: int = 0
    missing: tuple[str, ...] = ()  # facts it needed that were unknown (then ``text`` is "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.text,
            "run": self.run,
            "mutates": self.mutates,
            "why": self.why,
            "order": self.order,
            "missing": list(self.missing),
        }


@dataclass(frozen=True)
class Fix:
    """What to do about a finding. Commands are already templated with facts.

    ``commands`` is the text of every command that could be rendered, in order (what a
    "copy all" copies); ``records`` holds the same commands as data (where each runs, whether
    it mutates, why), plus those left out because a fact they need is unknown.
    """

    summary: str
    commands: tuple[str, ...] = ()
    records: tuple[FixCommand, ...] = ()

    def command_records(self) -> tuple[FixCommand, ...]:
        """``records``, or plain read-only records for a Fix built with strings only."""
        return self.records or tuple(FixCommand(c, order=i) for i, c in enumerate(self.commands))

    def read_only(self) -> tuple[str, ...]:
        """The commands that change nothing: safe to copy in one go."""
        return tuple(r.text for r in self.command_records() if r.text and not r.mutates)

    def to_dict(self) -> dict[str, Any]:
        """``summary``, ``commands`` (texts) and ``steps`` (the records; docs/report-json.md)."""
        return {
            "summary": self.summary,
            "commands": list(self.commands),
            "steps": [r.to_dict() for r in self.command_records()],
        }


@dataclass(frozen=True)
class Finding:
    """A conclusion of the walk (a root cause), or the explicit ``undetermined`` one."""

    id: str
    severity: str  # critical | high | medium | low | info
    title: str
    summary: str  # the explanation for the on-call reader
    fix: Fix
    references: tuple[str, ...] = ()
    evidence: tuple[LineRef, ...] = ()
    playbook: str = ""
    step: str = ""
    undetermined: bool = False
    collect_next: tuple[str, ...] = ()  # for undetermined: what to gather to decide

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "title": self.title,
            "summary": self.summary,
            "fix": self.fix.to_dict(),
            "references": list(self.references),
            "evidence": [r.to_dict() for r in self.evidence],
            "playbook": self.playbook,
            "step": self.step,
            "undetermined": self.undetermined,
            "collect_next": list(self.collect_next),
        }


@dataclass(frozen=True)
class Alternative:
    """A finding weighed by the differential check beside the walk's verdict.

    In ``Transcript.consistent`` the finding's ``requires`` holds and nothing rules it out;
    in ``Transcript.ruled_out`` its ``ruled_out_by`` fired (``because`` says which evidence).
    """

    id: str
    title: str
    severity: str
    confidence: str  # certain | likely | possible ("" for ruled-out findings)
    because: str  # why it is consistent with the evidence, or why it is ruled out
    evidence: tuple[LineRef, ...] = ()
    branch: str = ""  # the "playbook/step" whose override reaches it, when one does
    condition: str = ""  # the CEL that held (requires) or fired (ruled_out_by)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "severity": self.severity,
            "confidence": self.confidence,
            "because": self.because,
            "evidence": [r.to_dict() for r in self.evidence],
            "branch": self.branch,
            "condition": self.condition,
        }


@dataclass(frozen=True)
class Question:
    """An ``ask`` step waiting for the SRE."""

    ref: str
    prompt: str
    choices: tuple[Choice, ...]
    help: str = ""


@dataclass(frozen=True)
class Transcript:
    """The whole walk for one facts snapshot."""

    entry: str  # the playbook the walk started in
    visits: tuple[Visit, ...] = ()
    findings: tuple[Finding, ...] = ()
    question: Question | None = None  # set when the walk waits for an answer
    warnings: tuple[str, ...] = field(default_factory=tuple)
    entry_reason: str = ""  # why the walk started where it did (the route's `because`)
    confidence: str = ""  # of the verdict: certain | likely | possible ("" when undetermined)
    consistent: tuple[Alternative, ...] = ()  # other findings the evidence supports, best first
    ruled_out: tuple[Alternative, ...] = ()  # findings the evidence rules out, with why

    @property
    def concluded(self) -> bool:
        return bool(self.findings) and self.question is None

    @property
    def undetermined(self) -> bool:
        return bool(self.findings) and all(f.undetermined for f in self.findings)
