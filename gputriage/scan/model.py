"""What a scan finds: trouble classes, their families, and the rows the views show.

A :class:`Row` is one pod or one node in trouble, with every trouble class found on it (most
telling first), the diagnosis family the triage walk is expected to take (``pending``,
``create``, ``oom``, ``lost``, ``node``), the words that explain it and since when. Rows are
small and immutable: a scan over 100,000 pods keeps only these, never the objects.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class Family(enum.StrEnum):
    """The playbook family a row's triage is expected to walk into."""

    PENDING = "pending"
    CREATE = "create"
    OOM = "oom"
    LOST = "lost"
    NODE = "node"


class Trouble(enum.StrEnum):
    """One kind of trouble. The value is the stable name reports and filters use."""

    # pods (GPU pods only)
    ADMISSION_REJECTED = "admission-rejected"  # Failed: UnexpectedAdmissionError, OutOf<gpu>
    PENDING = "pending"  # not scheduled (Unschedulable, or older than --stuck-after)
    CREATE_ERROR = "create-error"  # CreateContainerError... for longer than --stuck-after
    CREATING = "creating"  # ContainerCreating for longer than --stuck-after
    OOM_KILLED = "oom-killed"  # a container's current or last termination is OOMKilled
    EXIT_137 = "exit-137"  # SIGKILLed without OOMKilled
    CRASH_LOOP = "crash-loop"  # CrashLoopBackOff
    # nodes (GPU nodes only)
    ALLOCATABLE_BELOW_CAPACITY = "allocatable-below-capacity"
    GPUS_BELOW_LABEL = "gpus-below-label"  # fewer GPUs advertised than nvidia.com/gpu.count
    GPU_RESOURCE_MISSING = "gpu-resource-missing"  # GPU hardware labels, no GPU resource
    NOT_READY = "not-ready"
    DEVICE_PLUGIN_MISSING = "device-plugin-missing"
    DEVICE_PLUGIN_DOWN = "device-plugin-not-running"
    DEVICE_PLUGIN_RESTARTING = "device-plugin-restarting"
    CORDONED = "cordoned"
    GPU_TAINT = "gpu-taint"


FAMILY_OF: dict[Trouble, Family] = {
    Trouble.ADMISSION_REJECTED: Family.LOST,
    Trouble.PENDING: Family.PENDING,
    Trouble.CREATE_ERROR: Family.CREATE,
    Trouble.CREATING: Family.CREATE,
    Trouble.OOM_KILLED: Family.OOM,
    Trouble.EXIT_137: Family.OOM,
    Trouble.CRASH_LOOP: Family.OOM,
    Trouble.ALLOCATABLE_BELOW_CAPACITY: Family.LOST,
    Trouble.GPUS_BELOW_LABEL: Family.LOST,
    Trouble.GPU_RESOURCE_MISSING: Family.NODE,
    Trouble.NOT_READY: Family.NODE,
    Trouble.DEVICE_PLUGIN_MISSING: Family.NODE,
    Trouble.DEVICE_PLUGIN_DOWN: Family.NODE,
    Trouble.DEVICE_PLUGIN_RESTARTING: Family.NODE,
    Trouble.CORDONED: Family.NODE,
    Trouble.GPU_TAINT: Family.NODE,
}

#: Order of the trouble classes, most telling first (the enum's declaration order).
RANK: dict[Trouble, int] = {t: i for i, t in enumerate(Trouble)}

POD = "pod"
NODE = "node"


@dataclass(frozen=True, slots=True)
class Row:
    """One pod or node in trouble."""

    kind: str  # "pod" | "node"
    namespace: str  # "" for nodes
    name: str
    node: str  # the pod's node ("" while unscheduled); the node's own name for nodes
    troubles: tuple[Trouble, ...]  # most telling first, never empty
    reason: str  # words: what the object's status says
    since: str = ""  # RFC 3339: when the trouble began, as far as the object tells ("" unknown)
    gpu_request: Mapping[str, int] = field(default_factory=dict)  # pods
    gpu_capacity: Mapping[str, int] = field(default_factory=dict)  # nodes
    gpu_allocatable: Mapping[str, int] = field(default_factory=dict)  # nodes

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)

    @property
    def family(self) -> Family:
        """The family of the most telling trouble; a node with any lost-card sign is ``lost``."""
        families = [FAMILY_OF[t] for t in self.troubles]
        if self.kind == NODE and Family.LOST in families:
            return Family.LOST
        return families[0]

    @property
    def triage_command(self) -> str:
        """The command that triages this row."""
        if self.kind == NODE:
            return f"gputriage node {self.name}"
        return f"gputriage {self.name} -n {self.namespace}"

    def age_s(self, now: float) -> int:
        """Seconds since :attr:`since` (-1 when unknown)."""
        when = parse_time(self.since)
        return -1 if when is None else max(0, int(now - when))

    def to_dict(self, now: float) -> dict[str, Any]:
        """Plain data with stable keys (the ``--report json`` row)."""
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "node": self.node,
            "family": self.family.value,
            "troubles": [t.value for t in self.troubles],
            "reason": self.reason,
            "since": self.since,
            "age_s": self.age_s(now),
            "gpu_request": dict(self.gpu_request),
            "gpu_capacity": dict(self.gpu_capacity),
            "gpu_allocatable": dict(self.gpu_allocatable),
            "triage": self.triage_command,
        }


def merge(row: Row, more: Row) -> Row:
    """``row`` with the troubles of ``more`` added (same object; reason joined)."""
    troubles = tuple(sorted(set(row.troubles) | set(more.troubles), key=RANK.__getitem__))
    if troubles == row.troubles:
        return row
    reasons = [r for r in (row.reason, more.reason) if r]
    since = min((s for s in (row.since, more.since) if s), default="")
    return Row(
        row.kind,
        row.namespace,
        row.name,
        row.node,
        troubles,
        "; ".join(reasons),
        since,
        row.gpu_request or more.gpu_request,
        row.gpu_capacity or more.gpu_capacity,
        row.gpu_allocatable or more.gpu_allocatable,
    )


# ---------------------------------------------------------------------------------------------
# Times and durations

_DURATION = re.compile(r"(\d+)\s*([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> int | None:
    """``10m``, ``90s``, ``1h30m``, ``2d``, or plain seconds -> seconds; None if unreadable."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    parts = _DURATION.findall(text)
    if not parts or _DURATION.sub("", text).strip():
        return None
    return sum(int(n) * _UNIT[u] for n, u in parts)


def parse_time(value: Any) -> float | None:
    """An RFC 3339 timestamp as epoch seconds (None when absent or unreadable)."""
    if not isinstance(value, str) or len(value) < 19:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.timestamp() if when.tzinfo else None


def short_age(seconds: int) -> str:
    """Age the way kubectl prints it: ``45s``, ``12m``, ``5h``, ``3d`` (``-`` when unknown)."""
    if seconds < 0:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
