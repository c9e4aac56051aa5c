"""The incident summary as one typed tree: what ``build_summary`` returns, as dataclasses.

``build_summary`` keeps producing the JSON-ready dict (the ``--report json`` contract, DESIGN
3.2; redaction and inert text are applied to it); :meth:`Summary.from_dict` reads that dict
back into this tree, and :meth:`Summary.to_dict` gives the same dict again (a test checks the
round trip on every golden summary). Renderers take the tree, one pure function per section
(:mod:`gputriage.report.text`), so a renamed key is a type error, not a silent blank.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar


@dataclass(frozen=True)
class Tool:
    name: str
    version: str


@dataclass(frozen=True)
class TargetInfo:
    session: str  # where the evidence came from, without local paths ("bundle lost-xid79")
    context: str
    namespace: str
    pod: str
    uid: str
    node: str
    owner: str  # "Kind/name" or ""
    phase: str
    gpu_request: dict[str, Any]

    @property
    def title(self) -> str:
        if self.pod:
            return f"{self.namespace}/{self.pod}"
        return f"{self.namespace}/{self.owner}" if self.owner else self.session


@dataclass(frozen=True)
class Verdict:
    status: str  # finding | undetermined | waiting
    headline: str
    finding: str = ""
    severity: str = ""
    confidence: str = ""


@dataclass(frozen=True)
class WalkStatus:
    status: str  # confirmed | overridden | proposed
    words: str


@dataclass(frozen=True)
class XidLine:
    code: Any
    time: str
    line: str
    source: str


@dataclass(frozen=True)
class GpuInvolved:
    """A GPU a lost-card verdict is about: what an RMA or a ticket needs."""

    pci: str
    uuid: str
    serial: str
    name: str
    index: str
    xids: list[XidLine]
    lost: bool
    unhealthy: str


@dataclass(frozen=True)
class Ref:
    """A cited evidence line."""

    key: str
    source: str
    line: int
    text: str


@dataclass(frozen=True)
class CommandStep:
    """A fix command as data (see ``FixCommand``): ``command`` is "" when left out."""

    command: str
    run: str
    mutates: bool
    why: str
    order: int
    missing: list[str]


@dataclass(frozen=True)
class FixInfo:
    summary: str
    commands: list[str]
    steps: list[CommandStep] = field(default_factory=list)


@dataclass(frozen=True)
class FindingInfo:
    id: str
    severity: str
    title: str
    summary: str
    fix: FixInfo
    references: list[str]
    evidence: list[Ref]
    playbook: str
    step: str
    undetermined: bool
    collect_next: list[str]
    evidence_more: int = 0


@dataclass(frozen=True)
class AlternativeInfo:
    id: str
    title: str
    severity: str
    confidence: str
    because: str
    evidence: list[Ref]
    branch: str
    condition: str = ""


@dataclass(frozen=True)
class Differential:
    consistent: list[AlternativeInfo] = field(default_factory=list)
    ruled_out: list[AlternativeInfo] = field(default_factory=list)


@dataclass(frozen=True)
class VisitInfo:
    id: str
    title: str
    outcome: str
    target: str
    because: str
    condition: str
    proposed: str
    overridden: bool
    unknown_facts: list[str]
    citations: list[Ref]


@dataclass(frozen=True)
class ChoiceInfo:
    value: str
    label: str


@dataclass(frozen=True)
class QuestionInfo:
    ref: str
    prompt: str
    choices: list[ChoiceInfo]


@dataclass(frozen=True)
class NoteInfo:
    time: str
    step: str
    text: str


@dataclass(frozen=True)
class TimelineEntry:
    time: str  # "...Z" when zoned, else the node's local clock as printed
    zone: str  # "UTC" or summary.LOCAL_ZONE
    source: str
    text: str

    @property
    def utc(self) -> bool:
        return self.zone == "UTC"


@dataclass(frozen=True)
class SourceInfo:
    key: str
    what: str
    status: str
    detail: str
    source: str
    state: str = ""  # ok, not applicable, not collected, failed (report.source_states)


@dataclass(frozen=True)
class ExcerptLine:
    line: int
    text: str


@dataclass(frozen=True)
class Excerpt:
    source: str
    key: str
    lines: list[ExcerptLine]
    more: int = 0


@dataclass(frozen=True)
class Summary:
    tool: Tool
    generated_at: str
    target: TargetInfo
    verdict: Verdict
    walk_status: WalkStatus
    gpus: list[GpuInvolved]
    findings: list[FindingInfo]
    differential: Differential
    walk: list[VisitInfo]
    question: QuestionInfo | None
    notes: list[NoteInfo]
    timeline: list[TimelineEntry]
    sources: list[SourceInfo]
    excerpts: list[Excerpt]
    warnings: list[str]
    unreadable: list[SourceInfo]
    #: Which GPU each pod was given, and the pods on a faulty GPU (report/gpu_section.py).
    placement: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        return _build(cls, data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


T = TypeVar("T")


def _build(cls: type[T], data: Any) -> T:
    """``data`` (JSON-ready) as an instance of the dataclass ``cls``, recursively."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            kwargs[f.name] = _value(hints[f.name], data[f.name])
    return cls(**kwargs)


def _value(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        inner = next(a for a in typing.get_args(hint) if a is not type(None))
        return _value(inner, value)
    if origin is list:
        (inner,) = typing.get_args(hint)
        return [_value(inner, v) for v in value]
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _build(hint, value)
    return value
