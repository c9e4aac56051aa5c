"""GPU inventory of a node: what its labels, resources, pods and (when reachable) nvidia-smi say.

Labels come from GPU feature discovery / NFD (``nvidia.com/gpu.product``, ``gpu.memory``,
``gpu.count``, ``mig.strategy``, ``mig.config``, ``gpu.replicas``, ``gpu.sharing-strategy``,
``mig-<profile>.count``); resources from the node's capacity and allocatable; holders from the
GPU pods bound to the node (non-terminal ones, the way the scheduler counts); per-GPU state and
processes from the ``gpus`` fact group when nvidia-smi or NVML could be read (node view).
Kubernetes does not say which GPU a pod holds: holders are per node, processes per GPU.

The result is plain data with stable keys, shared by the scan and node views and reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gputriage.facts.gpu_resources import is_mig_resource
from gputriage.facts.kube_objects import integer
from gputriage.scan.classify import NodeInfo, PodInfo, advertised_gpus


@dataclass(frozen=True, slots=True)
class Holder:
    """A non-terminal pod holding GPUs on a node."""

    namespace: str
    name: str
    phase: str
    gpu: Mapping[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "phase": self.phase,
            "gpus": dict(self.gpu),
        }


def holder_of(pod: PodInfo) -> Holder | None:
    """The pod as a GPU holder, or None (no node, no GPUs, or finished)."""
    if not pod.node or not pod.gpu or pod.terminal:
        return None
    return Holder(pod.namespace, pod.name, pod.phase, pod.gpu)


def node_inventory(
    node: NodeInfo, holders: Iterable[Holder] | None = None, gpus: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The inventory of ``node``. ``holders=None``: the node's pods were not listed (requested
    and free are then null). ``gpus``: the known ``gpus`` fact group's values, if any."""
    labels = node.labels
    held = sorted(holders, key=lambda h: (h.namespace, h.name)) if holders is not None else None
    requested: dict[str, int] | None = None
    free: dict[str, int] | None = None
    if held is not None:
        requested = {}
        for h in held:
            for resource, n in h.gpu.items():
                requested[resource] = requested.get(resource, 0) + n
        free = {r: n - requested.get(r, 0) for r, n in sorted(node.allocatable.items())}
    profiles = {
        r.removeprefix("nvidia.com/"): n
        for r, n in sorted(node.capacity.items())
        if is_mig_resource(r)
    }
    for profile, n in node.mig_labels.items():
        profiles.setdefault(profile, n)
    smi = _per_gpu(gpus)
    product = labels.get("nvidia.com/gpu.product", "")
    if not product and gpus:
        product = ", ".join(gpus.get("models") or [])
    memory = integer(labels.get("nvidia.com/gpu.memory"))
    if not memory and gpus and int(gpus.get("max_memory_mib", -1)) > 0:
        memory = int(gpus["max_memory_mib"])
    return {
        "node": node.name,
        "product": product,
        "memory_mib": memory,
        "count_label": integer(labels.get("nvidia.com/gpu.count")),
        "advertised_gpus": advertised_gpus(node),
        "capacity": dict(sorted(node.capacity.items())),
        "allocatable": dict(sorted(node.allocatable.items())),
        "driver": labels.get("nvidia.com/cuda.driver-version.full", "")
        or str((gpus or {}).get("driver_version") or ""),
        "mig": {
            "strategy": labels.get("nvidia.com/mig.strategy", ""),
            "config": labels.get("nvidia.com/mig.config", ""),
            "config_state": labels.get("nvidia.com/mig.config.state", ""),
            "profiles": profiles,
            "enabled_on_gpus": sum(1 for g in smi if g["mig_enabled"]),
        },
        "sharing": {
            "strategy": labels.get("nvidia.com/gpu.sharing-strategy", ""),
            "replicas": integer(labels.get("nvidia.com/gpu.replicas")),
        },
        "requested": requested,
        "free": free,
        "holders": [h.to_dict() for h in held] if held is not None else [],
        "gpus": smi,
        "gpus_source": str((gpus or {}).get("source_format") or ""),
        "gpus_status": str((gpus or {}).get("status") or ""),
        "gpus_message": str((gpus or {}).get("message") or ""),
    }


def _per_gpu(gpus: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if not gpus:
        return []
    out = []
    for g in gpus.get("gpus") or []:
        if not isinstance(g, Mapping):
            continue
        out.append(
            {
                "index": g.get("index", -1),
                "pci": g.get("pci", ""),
                "uuid": g.get("uuid", ""),
                "name": g.get("name", ""),
                "memory_total_mib": g.get("memory_total_mib", -1),
                "memory_used_mib": g.get("memory_used_mib", -1),
                "mig_enabled": bool(g.get("mig_enabled")),
                "mig_devices": [
                    d.get("profile", "")
                    for d in g.get("mig_devices") or []
                    if isinstance(d, Mapping)
                ],
                "processes": [
                    {
                        "pid": p.get("pid", -1),
                        "name": p.get("name", ""),
                        "used_memory_mib": p.get("used_memory_mib", -1),
                    }
                    for p in g.get("processes") or []
                    if isinstance(p, Mapping)
                ],
            }
        )
    return out


def inventory_lines(inv: Mapping[str, Any]) -> list[str]:
    """The inventory as a few lines of words, for the TUI panel and Markdown."""
    mem = f", {inv['memory_mib'] // 1024} GiB" if inv.get("memory_mib", 0) >= 1024 else ""
    lines = [
        f"{inv['node']}: {inv['product'] or 'unknown GPU model'}{mem}; "
        f"label count {inv['count_label'] or '-'}, advertised {inv['advertised_gpus']}"
    ]
    res = ", ".join(f"{r} {inv['allocatable'].get(r, 0)}/{n}" for r, n in inv["capacity"].items())
    lines.append(f"allocatable/capacity: {res or 'no GPU resource'}")
    mig = inv["mig"]
    if mig["profiles"] or mig["config"] or mig["strategy"] == "mixed":
        profiles = ", ".join(f"{p}={n}" for p, n in mig["profiles"].items()) or "none"
        lines.append(
            f"MIG: strategy {mig['strategy'] or '-'}, config {mig['config'] or '-'} "
            f"({mig['config_state'] or '-'}), profiles {profiles}"
        )
    sharing = inv["sharing"]
    if sharing["strategy"] or sharing["replicas"] > 1:
        lines.append(
            f"sharing: {sharing['strategy'] or '-'}, {sharing['replicas']} replicas per GPU"
        )
    if inv["requested"] is None:
        lines.append("pods holding GPUs: not listed (scan with -A to count them)")
    else:
        free = ", ".join(f"{r} {n}" for r, n in (inv["free"] or {}).items()) or "-"
        lines.append(f"pods holding GPUs: {len(inv['holders'])}; free: {free}")
        for h in inv["holders"][:20]:
            gpus = ", ".join(f"{r}={n}" for r, n in h["gpus"].items())
            lines.append(f"  {h['namespace']}/{h['name']} ({h['phase']}): {gpus}")
        if len(inv["holders"]) > 20:
            lines.append(f"  ... and {len(inv['holders']) - 20} more")
    if inv["gpus_status"] and inv["gpus_status"] != "ok":
        lines.append(f"nvidia-smi: {inv['gpus_status']}: {inv['gpus_message'] or '-'}")
    for g in inv["gpus"]:
        used = (
            f"{g['memory_used_mib']}/{g['memory_total_mib']} MiB"
            if g["memory_total_mib"] >= 0
            else "memory ?"
        )
        procs = (
            ", ".join(
                f"{p['name'] or '?'} (pid {p['pid']}, {p['used_memory_mib']} MiB)"
                for p in g["processes"]
            )
            or "no processes"
        )
        mig_note = f", MIG {'/'.join(g['mig_devices'])}" if g["mig_enabled"] else ""
        lines.append(f"GPU {g['index']} {g['pci']} {g['name']}: {used}{mig_note}; {procs}")
    return lines
