"""Fact group ``container_log``: GPU failure signatures in the pod's container logs.

Built from ``Key.CONTAINER_LOG`` and ``Key.CONTAINER_LOG_PREVIOUS`` (``kubectl logs
--previous``: where a CrashLoopBackOff's last words are). Known when either was read; every
match says which log it came from. For CUDA out-of-memory the sizes in the message are kept,
and ``oom_other_process_mib`` estimates the memory held by other processes on the same GPU,
the signature of time-slicing without memory isolation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    reason_for,
    unknown,
)
from gputriage.parsers.container_log import (
    OOM_IDS,
    LogMatch,
    LogScan,
    cdi_devices,
    other_process_mib,
    scan_container_log,
)

MAX_CITES = 50

#: Which log each evidence key is, as the ``log`` value of a signature.
_LOGS = {Key.CONTAINER_LOG: "current", Key.CONTAINER_LOG_PREVIOUS: "previous"}

_OOM_KEYS = ("tried_mib", "total_mib", "free_mib", "allocated_mib", "reserved_mib", "process_mib")

#: Boolean facts and the signature ids that set them.
_FLAGS: dict[str, frozenset[str]] = {
    "cuda_oom": OOM_IDS,
    "nccl_shm": frozenset({"nccl_shm"}),
    "nccl_system_error": frozenset({"nccl_system_error"}),
    "nccl_timeout": frozenset({"nccl_timeout"}),
    "shm_bus_error": frozenset({"shm_bus_error"}),
    "driver_insufficient": frozenset({"driver_insufficient"}),
    "nvml_unknown_error": frozenset({"nvml_unknown_error"}),
    "nvml_insufficient_permissions": frozenset({"nvml_insufficient_permissions"}),
    "no_cuda_device": frozenset({"no_cuda_device", "no_nvidia_driver"}),
    "illegal_memory_access": frozenset({"illegal_memory_access"}),
    "ecc_uncorrectable": frozenset({"ecc_uncorrectable"}),
    "dataloader_killed": frozenset({"dataloader_killed"}),
    "cdi_unresolvable": frozenset({"cdi_unresolvable"}),
}

SPEC = GroupSpec(
    name="container_log",
    doc="GPU failure signatures in the container's current and previous logs: CUDA/PyTorch/"
    "TensorFlow/vLLM out of memory (with sizes), NCCL /dev/shm and timeouts, data-loader "
    "workers killed, NVML, driver and CDI errors.",
    sources=(Key.CONTAINER_LOG, Key.CONTAINER_LOG_PREVIOUS),
    fields={
        "logs_read": FieldSpec(
            "list<string>", [], "Which logs were read: current and/or previous."
        ),
        "cuda_oom": FieldSpec(
            "bool",
            False,
            "The GPU ran out of memory (PyTorch, TensorFlow, XLA, vLLM or a CUDA call).",
        ),
        "oom": FieldSpec(
            "map",
            {},
            "The most recent OOM message's numbers, {} when none: {signature, "
            "log, line, gpu, tried_mib, total_mib, free_mib, allocated_mib, "
            "reserved_mib, process_mib} (MiB, rounded; -1 when not printed).",
        ),
        "oom_other_process_mib": FieldSpec(
            "int",
            -1,
            "MiB held by other processes on that GPU: total - free - what this process holds "
            "(its own total when printed, else PyTorch's reserved). Large while this process "
            "holds little => a co-tenant owns the memory (time-slicing). -1 when unknown.",
        ),
        "nccl_shm": FieldSpec(
            "bool",
            False,
            "NCCL could not create a /dev/shm segment: the pod's /dev/shm "
            "(64 MB by default) is too small.",
        ),
        "nccl_system_error": FieldSpec(
            "bool",
            False,
            'NCCL "unhandled system error" (often /dev/shm; NCCL_DEBUG=INFO shows which).',
        ),
        "nccl_timeout": FieldSpec("bool", False, "A NCCL collective timed out (watchdog)."),
        "shm_bus_error": FieldSpec(
            "bool",
            False,
            'A process died with SIGBUS ("Bus error"), usually shared memory exhausted.',
        ),
        "driver_insufficient": FieldSpec(
            "bool",
            False,
            '"CUDA driver version is insufficient for CUDA '
            'runtime version": image CUDA newer than the '
            "node driver.",
        ),
        "nvml_unknown_error": FieldSpec(
            "bool",
            False,
            '"Failed to initialize NVML: Unknown Error": the '
            "container lost its device access (cgroup reset).",
        ),
        "nvml_insufficient_permissions": FieldSpec(
            "bool", False, '"Failed to initialize NVML: Insufficient Permissions".'
        ),
        "no_cuda_device": FieldSpec(
            "bool",
            False,
            'The container sees no GPU or no driver ("no '
            'CUDA-capable device is detected", "Found no NVIDIA '
            'driver").',
        ),
        "illegal_memory_access": FieldSpec(
            "bool",
            False,
            '"an illegal memory access was encountered" '
            "(app bug, or a GPU fault: compare kernel Xids).",
        ),
        "ecc_uncorrectable": FieldSpec("bool", False, "CUDA reported an uncorrectable ECC error."),
        "dataloader_killed": FieldSpec(
            "bool",
            False,
            '"DataLoader worker (pid N) is killed by signal: '
            'Killed": a PyTorch data-loader worker got SIGKILL, '
            "usually from the OOM killer at the container's memory "
            "limit (compare kernel.cgroup_oom_kills).",
        ),
        "cdi_unresolvable": FieldSpec(
            "bool",
            False,
            '"unresolvable CDI devices ...": the runtime found no '
            "CDI spec defining the container's devices (specs not "
            "generated yet, or for another driver root).",
        ),
        "cdi_devices": FieldSpec(
            "list<string>",
            [],
            "CDI device names those messages list, e.g. "
            "nvidia.com/gpu=all, management.nvidia.com/gpu=0.",
        ),
        "signature_ids": FieldSpec("list<string>", [], "Distinct signature ids found."),
        "signature_counts": FieldSpec(
            "map", {}, "Hits per signature id across both logs (all hits, also those not listed)."
        ),
        "signatures": FieldSpec(
            "list<map>",
            [],
            "Matches, {id, log, line, text, numbers} (numbers: doubles "
            "the line carries, sizes in MiB); at most 20 lines per id "
            "and log.",
        ),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    read: list[tuple[Evidence, LogScan]] = []
    for key in _LOGS:
        ev = evidence.get_or_missing(key)
        if ev.ok:
            read.append((ev, scan_container_log(ev.raw)))
    if not read:
        logs = [evidence.get_or_missing(k) for k in _LOGS]
        return unknown(SPEC, "; ".join(reason_for(e) for e in logs))
    return _facts(read)


def _facts(read: list[tuple[Evidence, LogScan]]) -> FactGroup:
    found: list[tuple[Evidence, LogMatch]] = [(ev, m) for ev, scan in read for m in scan.matches]
    counts: dict[str, int] = {}
    for _, scan in read:
        for sig_id, n in scan.counts.items():
            counts[sig_id] = counts.get(sig_id, 0) + n
    values: dict[str, Any] = {
        "logs_read": [_LOGS[ev.key] for ev, _ in read],
        "signature_ids": list(counts),
        "signature_counts": counts,
        "signatures": [
            {
                "id": m.id,
                "log": _LOGS[ev.key],
                "line": m.line,
                "text": m.text,
                "numbers": dict(m.numbers),
            }
            for ev, m in found
        ],
    }
    cites: dict[str, list[LineRef]] = {
        "signatures": [ev.cite(m.line, m.text) for ev, m in found][:MAX_CITES],
        "signature_ids": [ev.cite(m.line, m.text) for ev, m in found][:MAX_CITES],
    }
    for flag, ids in _FLAGS.items():
        hits = [ev.cite(m.line, m.text) for ev, m in found if m.id in ids]
        values[flag] = bool(hits)
        if hits:
            cites[flag] = hits[:MAX_CITES]
    cdi = [(ev, m) for ev, m in found if m.id == "cdi_unresolvable"]
    values["cdi_devices"] = list(dict.fromkeys(d for _, m in cdi for d in cdi_devices(m.text)))
    if values["cdi_devices"]:
        cites["cdi_devices"] = [ev.cite(m.line, m.text) for ev, m in cdi][:MAX_CITES]
    oom = _latest_oom(read)
    if oom is not None:
        ev, match = oom
        values["oom"] = _oom_map(ev, match)
        other = other_process_mib(match.numbers)
        if other is None and match.id == "vllm_free_memory_low":
            total, free = match.numbers.get("total_mib"), match.numbers.get("free_mib")
            other = total - free if total is not None and free is not None else None
        values["oom_other_process_mib"] = round(other) if other is not None else -1
        cites["oom"] = [ev.cite(match.line, match.text)]
        if other is not None:
            cites["oom_other_process_mib"] = [ev.cite(match.line, match.text)]
    return known(SPEC, values, cites)


def _latest_oom(read: list[tuple[Evidence, LogScan]]) -> tuple[Evidence, LogMatch] | None:
    """The most informative recent OOM: the last one carrying sizes, current log first."""
    ordered = sorted(read, key=lambda item: item[0].key is not Key.CONTAINER_LOG)
    fallback: tuple[Evidence, LogMatch] | None = None
    for ev, scan in ordered:
        with_numbers = [m for m in scan.matches if m.id in OOM_IDS and m.numbers]
        if with_numbers:
            return ev, with_numbers[-1]
        last = scan.last(*OOM_IDS)
        if last is not None and fallback is None:
            fallback = (ev, last)
    return fallback


def _oom_map(ev: Evidence, m: LogMatch) -> dict[str, Any]:
    out: dict[str, Any] = {
        "signature": m.id,
        "log": _LOGS[ev.key],
        "line": m.line,
        "gpu": round(m.numbers["gpu"]) if "gpu" in m.numbers else -1,
    }
    for key in _OOM_KEYS:
        out[key] = round(m.numbers[key]) if key in m.numbers else -1
    return out
