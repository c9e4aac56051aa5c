"""The immutable snapshot the app hands down to the triage screen (attributes down).

The app is the only writer of state. After every change (evidence arrived, walk recomputed,
cursor moved) it builds a new :class:`TriageView` and assigns it to the screen, which passes it
to its widgets. Widgets never fetch anything and never mutate the view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gputriage.evidence.model import EvidenceSet, Key, LineRef
from gputriage.facts.model import FactSet
from gputriage.playbook.transcript import Finding, Transcript, Visit
from gputriage.tui import walkstate


@dataclass(frozen=True)
class TriageView:
    session: str  # "context prod-eu" / "bundle ./b": where the evidence comes from
    evidence: EvidenceSet = field(default_factory=EvidenceSet)
    pending: frozenset[Key] = frozenset()
    facts: FactSet | None = None
    transcript: Transcript | None = None
    cursor: int = 0
    walk_status: str = "loading playbooks…"  # why there is no walk yet ("" once there is)
    target_hint: str = ""  # "ns/pod" as asked for, shown until the pod's facts arrive
    differential_open: bool = False  # the verdict's alternatives shown with their evidence
    live: bool = False  # a watch follows the pod, its events and its node
    changed: dict[Key, float] = field(default_factory=dict)  # key -> when a watch updated it

    @property
    def visit(self) -> Visit | None:
        return walkstate.visit_at(self.cursor, self.transcript)

    @property
    def at_verdict(self) -> bool:
        return walkstate.at_verdict(self.cursor, self.transcript)

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.transcript.findings if self.transcript is not None else ()

    def citations(self) -> tuple[LineRef, ...]:
        """What the screen highlights: the current step's lines, or the verdict's evidence."""
        if self.at_verdict:
            return tuple(r for f in self.findings for r in f.evidence)
        visit = self.visit
        return visit.citations if visit is not None else ()

    def pod_value(self, name: str) -> Any:
        group = self.facts.groups.get("pod") if self.facts is not None else None
        return group.values.get(name) if group is not None and group.known else None


#: Container reasons named in the header; more are counted (the Pod tab lists them all).
MAX_STATE_REASONS = 2


def pod_state_words(
    phase: str, reason: str, containers: Any, deleting: bool = False, conditions: Any = ()
) -> str:
    """The pod's state as an SRE reads it: ``Pending · ContainerCreating``,
    ``Running · CrashLoopBackOff``, ``Failed · UnexpectedAdmissionError``.

    The phase, then what says more than the phase (kubectl's STATUS column, from the same
    fields): the pod's own ``status.reason``, else its containers' waiting reasons (an init
    container's as ``Init:<reason>``), else the reasons of containers that ended in error;
    for a pod not scheduled, why (``Pending · Unschedulable``, from its PodScheduled
    condition); ``Terminating`` once the pod is being deleted."""
    details: list[str] = []
    if reason:
        details.append(reason)
    else:
        rows = (
            [c for c in containers if isinstance(c, Mapping)]
            if isinstance(containers, list)
            else []
        )
        for c in rows:
            waiting = str(c.get("waiting_reason") or "")
            if waiting and waiting != "PodInitializing":
                details.append(
                    f"Init:{waiting}" if c.get("init") and not c.get("sidecar") else waiting
                )
        if not details:
            for c in rows:
                ended, code = str(c.get("terminated_reason") or ""), c.get("exit_code")
                if (ended and ended != "Completed") or (isinstance(code, int) and code > 0):
                    details.append(ended or f"ExitCode:{code}")
    if not details and isinstance(conditions, list | tuple):
        details += [
            str(c.get("reason") or "not scheduled")
            for c in conditions
            if isinstance(c, Mapping)
            and c.get("type") == "PodScheduled"
            and c.get("status") == "False"
        ]
    distinct = list(dict.fromkeys(details))  # in container order
    if len(distinct) > MAX_STATE_REASONS:
        distinct = [*distinct[:MAX_STATE_REASONS], f"+{len(distinct) - MAX_STATE_REASONS} more"]
    words = [phase or "…", *distinct]
    if deleting:
        words.append("Terminating")
    return " · ".join(words)


def gpu_request(resources: Any) -> str:
    """``nvidia.com/gpu×2`` from the pod group's ``gpu_resources`` map."""
    if not isinstance(resources, Mapping) or not resources:
        return "no GPU request"
    return ", ".join(f"{k}×{v}" for k, v in sorted(resources.items()))
