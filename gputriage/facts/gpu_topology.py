"""Fact group ``gpu_topology``: how the node's GPUs connect (NUMA, PCIe/SMP, NVLink).

Built from ``Key.NVIDIA_TOPO`` (``nvidia-smi topo -m``) and ``Key.NVLINK`` (``nvidia-smi
nvlink -s``); known when either was read. The pod's GPUs are the ones the DCGM exporter's pod
labels name (``metrics.pod_gpu_indexes``), or every GPU of the node when the pod requests as
many GPUs as the node has; otherwise ``pod_gpus_known`` is false and ``numa_split`` stays false.
"""

from __future__ import annotations

from collections.abc import Mapping

from gputriage.evidence.model import EvidenceSet, Key, LineRef
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    reason_for,
    unknown,
)
from gputriage.parsers.nvidia_smi_perf import parse_nvlink, parse_topo

SPEC = GroupSpec(
    name="gpu_topology",
    doc="GPU topology of the node: NUMA affinity per GPU (nvidia-smi topo -m), the pod's GPUs "
    "spread over NUMA nodes, GPU pairs crossing the CPU interconnect (SYS), and NVLink "
    "links reported inactive (nvidia-smi nvlink -s).",
    sources=(Key.NVIDIA_TOPO, Key.NVLINK),
    fields={
        "topo_known": FieldSpec("bool", False, "nvidia-smi topo -m was read."),
        "nvlink_known": FieldSpec("bool", False, "nvidia-smi nvlink -s was read."),
        "gpus": FieldSpec("list<map>", [], "{name, index, cpu_affinity, numa_affinity (-1 N/A)}."),
        "links": FieldSpec(
            "list<map>", [], "{a, b, link}: X/NV#/PIX/PXB/PHB/NODE/SYS between GPU a and GPU b."
        ),
        "pod_gpus": FieldSpec("list<int>", [], "Indexes of the pod's GPUs (see pod_gpus_known)."),
        "pod_gpus_known": FieldSpec(
            "bool",
            False,
            "The pod's GPUs are known (exporter pod labels, or the pod holds every GPU).",
        ),
        "pod_numa_nodes": FieldSpec("list<int>", [], "NUMA nodes of the pod's GPUs."),
        "numa_split": FieldSpec("bool", False, "The pod's GPUs sit on two or more NUMA nodes."),
        "sys_pairs": FieldSpec(
            "list<map>",
            [],
            "{a, b}: pod GPU pairs whose traffic crosses the SMP interconnect (SYS).",
        ),
        "nvlink_gpus": FieldSpec("int", 0, "GPUs listed by nvidia-smi nvlink -s."),
        "nvlink_inactive": FieldSpec(
            "list<map>", [], "{index, uuid, links, inactive}: GPUs with inactive NVLink links."
        ),
        "any_nvlink_inactive": FieldSpec(
            "bool", False, "Some GPU has an inactive NVLink link while others are up."
        ),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    topo_ev = evidence.get_or_missing(Key.NVIDIA_TOPO)
    nvl_ev = evidence.get_or_missing(Key.NVLINK)
    topo = parse_topo(topo_ev.raw) if topo_ev.ok else {}
    nvl = parse_nvlink(nvl_ev.raw) if nvl_ev.ok else []
    if not topo and not nvl:
        return unknown(SPEC, "; ".join(reason_for(e) for e in (topo_ev, nvl_ev)))
    cites: dict[str, list[LineRef]] = {}
    gpus = topo.get("gpus", [])
    metrics = earlier.get("metrics")
    pod = earlier.get("pod")
    pod_gpus: list[int] = []
    if metrics and metrics.known and metrics.values.get("pod_gpus_from_labels"):
        pod_gpus = list(metrics.values.get("pod_gpu_indexes") or [])
    elif pod and pod.known and gpus and pod.values.get("gpu_total") == len(gpus):
        pod_gpus = [g["index"] for g in gpus]
    mine = [g for g in gpus if g["index"] in pod_gpus]
    numa = sorted({g["numa_affinity"] for g in mine if g["numa_affinity"] >= 0})
    sys_pairs = [
        {"a": lk["a"], "b": lk["b"]}
        for lk in topo.get("links", [])
        if lk["link"] == "SYS" and lk["a"] in pod_gpus and lk["b"] in pod_gpus
    ]
    if mine:
        cites["numa_split"] = [topo_ev.cite(g["line"]) for g in mine]
        cites["pod_numa_nodes"] = cites["numa_split"]
        cites["sys_pairs"] = cites["numa_split"]
    inactive = [
        {"index": g["index"], "uuid": g["uuid"], "links": g["links"], "inactive": g["inactive"]}
        for g in nvl
        if g["inactive"]
    ]
    any_active = any(g["active"] for g in nvl)
    cites["nvlink_inactive"] = [
        nvl_ev.cite(n) for g in nvl for n in [g["line"], *g["inactive_lines"]] if g["inactive"]
    ]
    cites["any_nvlink_inactive"] = cites["nvlink_inactive"]
    values = {
        "topo_known": bool(topo),
        "nvlink_known": bool(nvl),
        "gpus": [
            {k: g[k] for k in ("name", "index", "cpu_affinity", "numa_affinity")} for g in gpus
        ],
        "links": topo.get("links", []),
        "pod_gpus": pod_gpus,
        "pod_gpus_known": bool(mine),
        "pod_numa_nodes": numa,
        "numa_split": len(numa) > 1,
        "sys_pairs": sys_pairs,
        "nvlink_gpus": len(nvl),
        "nvlink_inactive": inactive,
        # All links inactive on every GPU is a PCIe-only system (or NVLink not in use).
        "any_nvlink_inactive": bool(inactive) and any_active,
    }
    return known(SPEC, values, cites)
