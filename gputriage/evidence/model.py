"""The evidence model shared by every source (bundle, Kubernetes API, SSH, local NVML).

An :class:`Evidence` is one thing gputriage tried to look at (a pod object, a kubelet journal,
``nvidia-smi -q -x``...). It always exists, even when the look failed: the status says how it
went and ``detail`` says why in words an SRE can act on. ``raw`` keeps the exact text that was
seen, so facts derived from it can cite ``source:line``.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

# LineRef lives beside FactSet (the engine cites lines without importing evidence); it is
# re-exported here for the sources that make citations.
from gputriage.facts.lineref import MAX_CITE_CHARS as MAX_CITE_CHARS
from gputriage.facts.lineref import LineRef as LineRef


class Status(enum.StrEnum):
    """How collecting one piece of evidence went."""

    OK = "ok"
    UNAVAILABLE = "unavailable"  # nobody could look (no SSH configured, file not in bundle)
    ERROR = "error"  # we looked and it failed (parse error, command failed, HTTP 500)
    TIMEOUT = "timeout"
    FORBIDDEN = "forbidden"  # 401/403, permission denied


class Key(enum.StrEnum):
    """Names of the evidence kinds. The value is the bundle file's stem (DESIGN 3.1)."""

    POD = "pod"
    EVENTS = "events"
    NODE = "node"
    NODES = "nodes"
    NODE_PODS = "node-pods"
    NODE_EVENTS = "node-events"
    QUOTA = "quota"
    OWNER_EVENTS = "owner-events"
    RUNTIME_CLASSES = "runtimeclasses"
    RESOURCE_CLAIMS = "resourceclaims"
    RESOURCE_SLICES = "resourceslices"
    DEVICE_CLASSES = "deviceclasses"
    DEVICE_PLUGIN_LOG = "device-plugin"
    CONTAINER_LOG = "container"
    CONTAINER_LOG_PREVIOUS = "container-previous"
    KUBELET_LOG = "kubelet"
    DMESG = "dmesg"
    NVIDIA_SMI = "nvidia-smi"
    LSMOD = "lsmod"
    DEV_NVIDIA = "dev-nvidia"
    CONTAINERD_CONFIG = "containerd-config"
    NVIDIA_TOPO = "nvidia-smi-topo"
    NVLINK = "nvidia-smi-nvlink"
    PROMETHEUS = "prometheus"
    #: For an unscheduled pod: the GPU nodes it could land on that show trouble, and their
    #: node-level evidence (``candidate-nodes.json`` plus ``nodes/<name>/``).
    CANDIDATES = "candidate-nodes"
    #: The kubelet's device-manager checkpoint: which device IDs (GPU UUIDs, MIG devices) each
    #: container of each pod on the node was given.
    DEVICE_CHECKPOINT = "device-checkpoint"
    #: The NVIDIA GPU Operator on the node: component pods, validator logs, ClusterPolicy.
    GPU_OPERATOR = "gpu-operator"
    #: For a distributed job target: every pod of the job, when and how each failed, and the
    #: tail of the failed ones' logs.
    JOB_PODS = "job-pods"


#: Bundle file names accepted for each key, in order of preference. The first one is what
#: ``gputriage collect`` writes.
BUNDLE_FILES: dict[Key, tuple[str, ...]] = {
    Key.POD: ("pod.json", "pod.yaml", "pod.describe.txt"),
    Key.EVENTS: ("events.json", "events.yaml"),
    Key.NODE: ("node.json", "node.yaml"),
    Key.NODES: ("nodes.json", "nodes.yaml"),
    Key.NODE_PODS: ("node-pods.json", "node-pods.yaml"),
    Key.NODE_EVENTS: ("node-events.json", "node-events.yaml"),
    Key.QUOTA: ("quota.json", "quota.yaml"),
    Key.OWNER_EVENTS: ("owner-events.json", "owner-events.yaml"),
    Key.RUNTIME_CLASSES: ("runtimeclasses.json", "runtimeclasses.yaml"),
    Key.RESOURCE_CLAIMS: ("resourceclaims.json", "resourceclaims.yaml"),
    Key.RESOURCE_SLICES: ("resourceslices.json", "resourceslices.yaml"),
    Key.DEVICE_CLASSES: ("deviceclasses.json", "deviceclasses.yaml"),
    Key.DEVICE_PLUGIN_LOG: ("device-plugin.log",),
    Key.CONTAINER_LOG: ("container.log",),
    Key.CONTAINER_LOG_PREVIOUS: ("container-previous.log",),
    Key.KUBELET_LOG: ("kubelet.log",),
    Key.DMESG: ("dmesg.log",),
    Key.NVIDIA_SMI: ("nvidia-smi.xml", "nvidia-smi.txt"),
    Key.LSMOD: ("lsmod.txt",),
    Key.DEV_NVIDIA: ("dev-nvidia.txt",),
    Key.CONTAINERD_CONFIG: ("containerd-config.toml",),
    Key.NVIDIA_TOPO: ("nvidia-smi-topo.txt",),
    Key.NVLINK: ("nvidia-smi-nvlink.txt",),
    Key.PROMETHEUS: ("prometheus.json",),
    Key.CANDIDATES: ("candidate-nodes.json",),
    Key.DEVICE_CHECKPOINT: ("kubelet_internal_checkpoint",),
    Key.GPU_OPERATOR: ("gpu-operator.json",),
    Key.JOB_PODS: ("job-pods.json",),
}

#: Keys whose content is a Kubernetes object or list (JSON or YAML).
STRUCTURED_KEYS: frozenset[Key] = frozenset(
    k
    for k, names in BUNDLE_FILES.items()
    if names[0].endswith(".json") and k is not Key.PROMETHEUS  # query results, not an object
)

#: One line of words per key, for source status bars and "what to collect next" advice.
DESCRIPTIONS: dict[Key, str] = {
    Key.POD: "the pod object (kubectl get pod -o json)",
    Key.EVENTS: "the pod's events",
    Key.NODE: "the pod's node object",
    Key.NODES: "all nodes (cluster GPU capacity)",
    Key.NODE_PODS: "pods on the pod's node",
    Key.NODE_EVENTS: "the node's events",
    Key.QUOTA: "resource quotas in the namespace",
    Key.OWNER_EVENTS: "events of the pod's owner (ReplicaSet/Job)",
    Key.RUNTIME_CLASSES: "RuntimeClass objects",
    Key.RESOURCE_CLAIMS: "DRA ResourceClaims",
    Key.RESOURCE_SLICES: "DRA ResourceSlices",
    Key.DEVICE_CLASSES: "DRA DeviceClasses",
    Key.DEVICE_PLUGIN_LOG: "the device-plugin log on the node",
    Key.CONTAINER_LOG: "the container log",
    Key.CONTAINER_LOG_PREVIOUS: "the previous container's log (--previous)",
    Key.KUBELET_LOG: "the kubelet journal on the node",
    Key.DMESG: "the node's kernel log (dmesg / journalctl -k)",
    Key.NVIDIA_SMI: "nvidia-smi -q -x on the node",
    Key.LSMOD: "loaded kernel modules (lsmod)",
    Key.DEV_NVIDIA: "device nodes (ls -l /dev/nvidia*)",
    Key.CONTAINERD_CONFIG: "containerd configuration",
    Key.NVIDIA_TOPO: "GPU/CPU/NUMA topology (nvidia-smi topo -m)",
    Key.NVLINK: "NVLink link status (nvidia-smi nvlink -s)",
    Key.PROMETHEUS: "GPU metrics history from Prometheus (DCGM exporter)",
    Key.CANDIDATES: "candidate nodes of an unscheduled pod, with their node-level evidence",
    Key.DEVICE_CHECKPOINT: "the kubelet's device-plugin checkpoint on the node "
    "(/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint)",
    Key.GPU_OPERATOR: "the GPU Operator on the node (component pods, validator logs, "
    "ClusterPolicy)",
    Key.JOB_PODS: "the pods of the distributed job (pytorchjob/, jobset/, job/...) and their "
    "failures",
}


@dataclass(frozen=True)
class Evidence:
    """One piece of evidence and how collecting it went.

    ``source`` names where it came from so a reader can go and look: a bundle path
    (``bundle/kubelet.log``), an API path (``GET /api/v1/namespaces/ml/pods/x``) or a node
    command (``ssh gpu-7: journalctl -u kubelet``). ``data`` holds the parsed JSON/YAML object
    for structured keys; ``raw`` always holds the text as seen.
    """

    key: Key
    status: Status
    detail: str = ""
    raw: str = ""
    source: str = ""
    data: Any = None
    format: str = ""  # json | yaml | describe | text | xml
    collected_at: float = field(default_factory=time.time)
    elapsed_s: float = 0.0
    #: For lists: every item the source holds is here, so a missing item is absent. A list
    #: pasted into a hand-assembled bundle is partial: a missing item is unknown.
    complete: bool = True

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def lines(self) -> list[str]:
        return self.raw.splitlines()

    def cite(self, line: int, text: str | None = None) -> LineRef:
        """A reference to 1-based ``line`` of ``raw`` (text taken from raw when not given)."""
        if text is None:
            lines = self.lines()
            text = lines[line - 1] if 0 < line <= len(lines) else ""
        return LineRef(self.key.value, self.source, line, text)

    def find_line(self, needle: str) -> LineRef:
        """Cite the first raw line containing ``needle`` (line 0 when not found).

        Used to give JSON-derived facts (an event message, a taint) a line number in the file
        the SRE can open.
        """
        if needle:
            for i, text in enumerate(self.lines(), 1):
                if needle in text:
                    return LineRef(self.key.value, self.source, i, text.strip())
        return LineRef(self.key.value, self.source, 0, needle)

    def with_status(self, status: Status, detail: str) -> Evidence:
        return replace(self, status=status, detail=detail)

    @classmethod
    def missing(cls, key: Key, detail: str = "", source: str = "") -> Evidence:
        return cls(
            key, Status.UNAVAILABLE, detail or f"not collected: {DESCRIPTIONS[key]}", "", source
        )


class EvidenceSet(Mapping[Key, Evidence]):
    """An immutable snapshot of everything collected so far, keyed by :class:`Key`.

    Looking up a key that was never collected yields an ``unavailable`` Evidence rather than
    raising: "we never looked" is information too.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[Evidence] = ()) -> None:
        self._items: dict[Key, Evidence] = {e.key: e for e in items}

    def __getitem__(self, key: Key) -> Evidence:
        return self._items[key]

    def __iter__(self) -> Iterator[Key]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def get_or_missing(self, key: Key) -> Evidence:
        return self._items.get(key) or Evidence.missing(key)

    def with_evidence(self, *items: Evidence) -> EvidenceSet:
        merged = dict(self._items)
        for e in items:
            merged[e.key] = e
        return EvidenceSet(merged.values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{k.value}={e.status.value}" for k, e in self._items.items())
        return f"EvidenceSet({inner})"
