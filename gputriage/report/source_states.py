"""How each evidence source stands, in the words an SRE reads at a glance (pure, no Textual).

Four states, and only one of them is red:

* ``ok``: collected.
* ``not applicable``: there is nothing to collect *for this pod*, and that is expected: the
  container log of a pod whose containers never started, the node-side evidence of a pod that
  is not scheduled, the candidate nodes of a pod that is, the job's pods of a pod no job owns.
  Saying "failed" there sends the SRE chasing a non-problem; the TUI's status bar and the
  reports' "could not see" list leave these out.
* ``not collected``: nobody looked (no SSH configured, not in the bundle).
* ``failed``: we looked and it went wrong (error, timeout, forbidden): the only red state.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gputriage.evidence.job_target import JOB_KINDS
from gputriage.evidence.model import Evidence, Key, Status
from gputriage.evidence.sources import NODE_KEYS
from gputriage.facts.model import FactSet


class SourceState(enum.StrEnum):
    OK = "ok"
    COLLECTING = "collecting"
    NOT_APPLICABLE = "not applicable"
    NOT_COLLECTED = "not collected"
    FAILED = "failed"


#: Evidence that lives on (or is about) the pod's node: nothing to fetch before scheduling.
NODE_SIDE: frozenset[Key] = frozenset(
    {Key.NODE, Key.NODE_PODS, Key.NODE_EVENTS, Key.DEVICE_PLUGIN_LOG, *NODE_KEYS}
)


@dataclass(frozen=True)
class SourceReading:
    state: SourceState
    why: str = ""  # the reason, in words ("" for ok)


def _pod(facts: FactSet | None) -> Mapping[str, Any] | None:
    group = facts.groups.get("pod") if facts is not None else None
    return group.values if group is not None and group.known else None


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = pod.get("containers")
    return [c for c in items if isinstance(c, Mapping)] if isinstance(items, list) else []


def not_applicable_because(key: Key, facts: FactSet | None) -> str:
    """Why ``key`` has nothing to collect for this pod, or "" when it should have something."""
    pod = _pod(facts)
    if pod is None:
        return ""
    if key in NODE_SIDE and not pod.get("node"):
        return "the pod is not scheduled to a node yet"
    if key is Key.CANDIDATES and pod.get("node"):
        return f"the pod is on node {pod['node']}: candidate nodes are for pods not scheduled yet"
    if key is Key.JOB_PODS and str(pod.get("owner_kind") or "") not in JOB_KINDS:
        return "no job owns the pod (a Job, PyTorchJob, MPIJob, JobSet...)"
    containers = _containers(pod)
    if (
        key is Key.CONTAINER_LOG
        and containers
        and all(
            c.get("state") in ("waiting", "")
            and not c.get("restart_count")
            and c.get("last_exit_code", -1) == -1
            for c in containers
        )
    ):
        reason = next(
            (str(c.get("waiting_reason")) for c in containers if c.get("waiting_reason")), ""
        )
        return "no container has started yet" + (f" ({reason})" if reason else "")
    if (
        key is Key.CONTAINER_LOG_PREVIOUS
        and containers
        and not any(c.get("restart_count") or c.get("last_exit_code", -1) != -1 for c in containers)
    ):
        return "no container has restarted, so there is no previous log"
    return ""


def reading(ev: Evidence, facts: FactSet | None, pending: bool = False) -> SourceReading:
    """The state of one source, given what the pod facts say about it."""
    if pending:
        return SourceReading(SourceState.COLLECTING)
    if ev.status is Status.OK:
        return SourceReading(SourceState.OK)
    expected = not_applicable_because(ev.key, facts)
    if expected:
        return SourceReading(SourceState.NOT_APPLICABLE, expected)
    if ev.status is Status.UNAVAILABLE:
        return SourceReading(SourceState.NOT_COLLECTED, ev.detail)
    return SourceReading(
        SourceState.FAILED, f"{ev.status.value}: {ev.detail}" if ev.detail else ev.status.value
    )
