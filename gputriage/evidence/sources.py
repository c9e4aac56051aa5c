"""Interfaces between the broker and the things that fetch evidence.

Node evidence (kubelet journal, kernel log, nvidia-smi, modules, device nodes, containerd
config) comes through one small interface, :class:`NodeSource`, with several transports: SSH
(``evidence.ssh``), local (``evidence.local``, NVML plus local commands) and bundle files.
Every method is blocking, bounded by its own timeout, and never raises: failures come back as
an :class:`Evidence` with a status and a reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gputriage.evidence.model import Evidence, Key
from gputriage.options import DEFAULT_SINCE

#: Evidence that only the node itself can provide.
NODE_KEYS: tuple[Key, ...] = (
    Key.KUBELET_LOG,
    Key.DMESG,
    Key.NVIDIA_SMI,
    Key.LSMOD,
    Key.DEV_NVIDIA,
    Key.CONTAINERD_CONFIG,
    Key.NVIDIA_TOPO,
    Key.NVLINK,
    Key.DEVICE_CHECKPOINT,
)
#: What the API tells about a node without a pod (``gputriage node``), in the order a broker
#: starts them.
NODE_API_KEYS: tuple[Key, ...] = (
    Key.NODE,
    Key.NODE_EVENTS,
    Key.NODE_PODS,
    Key.DEVICE_PLUGIN_LOG,
    Key.RUNTIME_CLASSES,
)


@dataclass(frozen=True)
class NodeQuery:
    """What to fetch from a node, and how to filter it on the node before transfer."""

    node: str  # the Kubernetes node name
    address: str  # where to connect (InternalIP, hostname, or a --node-address override)
    namespace: str = ""
    pod: str = ""
    pod_uid: str = ""
    since: str = DEFAULT_SINCE  # journal/kernel window, journalctl --since syntax ("2h" -> "-2h")
    max_bytes: int = 4 * 1024 * 1024  # per command, enforced on the node (head -c / tail -c)


class NodeSource(Protocol):
    """A transport to one node's evidence.

    Optional: ``prepare(query, timeout)``, which the broker calls (looked up with
    ``getattr``) as soon as the pod names its node, so a transport can start connecting. It may
    return a ``threading.Event`` set once connecting is under way: the broker asks the API for
    the rest only then (at most :data:`gputriage.evidence.broker.NODE_HEAD_START_S` later).
    """

    name: str  # "ssh", "local"

    def collect(self, key: Key, query: NodeQuery, timeout: float) -> Evidence:
        """Fetch one NODE_KEYS item. Blocking; bounded by ``timeout``; never raises."""
        ...

    def close(self) -> None: ...
