"""Known failure signatures in a container's log (``kubectl logs [--previous]``).

Each signature is one exact message family from CUDA, NVML, NCCL, PyTorch, TensorFlow/XLA or
vLLM (formats in docs k8s-messages.md sections 5.4 and 8). :func:`scan_container_log` reports
every matching line with its number and the numbers the message carries; for CUDA out-of-memory
messages those are the sizes in MiB that tell "this process needed more" apart from "another
process holds the memory" (time-slicing neighbours).

Scanning is one regex pass per signature over the whole text (no per-line loop), so a 16 MB log
costs tens of milliseconds. Never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputriage.parsers import runtime_errors

_SIZE = r"(\d+(?:\.\d+)?)\s*([KMGT]i?B|bytes|[KMGT])\b"


@dataclass(frozen=True)
class Signature:
    """One message family: a stable id, what it means, and the pattern that finds it."""

    id: str
    meaning: str
    pattern: re.Pattern[str]


def _sig(id_: str, meaning: str, pattern: str, flags: int = 0) -> Signature:
    return Signature(id_, meaning, re.compile(pattern, flags))


#: In priority order: when one line matches several, the first listed names it.
SIGNATURES: tuple[Signature, ...] = (
    _sig("torch_cuda_oom", "PyTorch could not allocate GPU memory", r"CUDA out of memory"),
    _sig(
        "vllm_free_memory_low",
        "vLLM found less free GPU memory than it was told to use",
        r"Free memory on device(?: \S+)? \([\d.]+/[\d.]+ GiB\) on startup is less than desired",
    ),
    _sig(
        "vllm_no_cache_memory",
        "vLLM had no GPU memory left for its KV cache",
        r"No available memory for the cache blocks",
    ),
    _sig(
        "vllm_kv_cache_too_small",
        "vLLM's KV cache cannot hold the model's max sequence length",
        r"larger than the maximum number of tokens that can be stored in KV cache"
        r"|KV cache is needed, which is larger than the available KV cache memory",
    ),
    _sig(
        "tf_oom",
        "TensorFlow ran out of GPU memory",
        r"OOM when allocating tensor|ResourceExhaustedError"
        r"|failed to allocate \S+ \(\d+ bytes\) from device: CUDA_ERROR_OUT_OF_MEMORY",
    ),
    _sig(
        "xla_oom",
        "JAX/XLA ran out of GPU memory",
        r"RESOURCE_EXHAUSTED: Out of memory while trying to allocate",
    ),
    _sig(
        "cuda_error_oom",
        "a CUDA call failed with out of memory",
        r"CUDA error: out of memory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation",
    ),
    _sig(
        "nccl_shm",
        "NCCL could not create its /dev/shm segment (the pod's /dev/shm is full)",
        r"NCCL WARN Error: failed to extend /dev/shm/\S+ to \d+ bytes"
        r"|NCCL WARN Call to posix_fallocate failed"
        r"|NCCL WARN Error while creating shared memory segment",
    ),
    _sig(
        "nccl_system_error",
        "NCCL reported an unhandled system error (often /dev/shm; rerun with NCCL_DEBUG=INFO)",
        r"unhandled system error",
    ),
    _sig(
        "cuda_launch_failure",
        "a CUDA kernel launch failed (unspecified launch failure): "
        "a GPU fault (check the node's kernel log for an Xid) or an application bug",
        r"CUDA error: unspecified launch failure|cudaErrorLaunchFailure"
        r"|CUDA_ERROR_LAUNCH_FAILED",
    ),
    _sig(
        "nccl_timeout",
        "a NCCL collective timed out (the watchdog killed the process group)",
        r"Watchdog caught collective operation timeout|watchdog thread terminated with "
        r"exception(?!: CUDA error)|NCCL (?:communicator|operation) (?:was aborted|timed out)",
    ),
    _sig(
        "shm_bus_error",
        "a process died with SIGBUS, typically shared memory (/dev/shm) full",
        r"\bBus error\b|bus error encountered in worker|insufficient shared memory \(shm\)",
    ),
    _sig(
        "dataloader_killed",
        "a PyTorch DataLoader worker was SIGKILLed, usually by the "
        "kernel's OOM killer at the container's memory limit",
        r"DataLoader worker \(pid\(?s?\)? [\d, ]+\) is killed by signal: Killed",
    ),
    _sig(
        "cdi_unresolvable",
        "the container runtime could not resolve the container's CDI "
        "devices: no CDI spec on the node defines them",
        r"unresolvable CDI devices?\b",
    ),
    _sig(
        "driver_insufficient",
        "the image's CUDA runtime is newer than the node's driver",
        r"CUDA driver version is insufficient for CUDA runtime version"
        r"|cudaErrorInsufficientDriver|The NVIDIA driver on your system is too old",
    ),
    _sig(
        "nvml_unknown_error",
        "NVML lost access to the device nodes (cgroup device rules "
        "reset, e.g. systemctl daemon-reload)",
        r"Failed to initialize NVML: Unknown Error",
    ),
    _sig(
        "nvml_insufficient_permissions",
        "NVML cannot open the device nodes",
        r"Failed to initialize NVML: Insufficient Permissions",
    ),
    _sig(
        "nvml_driver_mismatch",
        "the NVML library in the container does not match the driver",
        r"Failed to initialize NVML: Driver/library version mismatch",
    ),
    _sig(
        "no_nvidia_driver",
        "the container sees no NVIDIA driver (no GPU was injected)",
        r"Found no NVIDIA driver on your system"
        r"|NVIDIA-SMI has failed because it couldn.t communicate with the NVIDIA driver",
    ),
    _sig(
        "no_cuda_device",
        "the container sees no GPU",
        r"no CUDA-capable device is detected|cudaErrorNoDevice|CUDA_ERROR_NO_DEVICE",
    ),
    _sig(
        "illegal_memory_access",
        "a kernel touched invalid GPU memory (application bug, or a "
        "GPU fault: check the node's Xid lines)",
        r"an illegal memory access was encountered|CUDA_ERROR_ILLEGAL_ADDRESS"
        r"|cudaErrorIllegalAddress",
    ),
    _sig(
        "ecc_uncorrectable",
        "CUDA reported an uncorrectable ECC error on the GPU",
        r"uncorrectable ECC error encountered|CUDA_ERROR_ECC_UNCORRECTABLE",
    ),
    _sig(
        "cuda_system_not_ready",
        "CUDA error 802, system not yet initialized: on NVSwitch "
        "systems the Fabric Manager has not registered the GPUs",
        r"system not yet initialized|cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY",
    ),
)

#: Signature ids that mean "the GPU ran out of memory".
OOM_IDS = frozenset(
    {
        "torch_cuda_oom",
        "vllm_free_memory_low",
        "vllm_no_cache_memory",
        "vllm_kv_cache_too_small",
        "tf_oom",
        "xla_oom",
        "cuda_error_oom",
    }
)

_MAX_LINE = 2000


def cdi_devices(line: str) -> list[str]:
    """The CDI device names (``vendor/class=name``) an ``unresolvable CDI devices`` line lists."""
    return runtime_errors.cdi_devices(line)


@dataclass(frozen=True)
class LogMatch:
    """One line that matched a signature."""

    id: str
    line: int  # 1-based
    text: str  # the line, stripped and capped at 2000 characters
    numbers: dict[str, float] = field(default_factory=dict)


@dataclass
class LogScan:
    """Every signature found in one log."""

    matches: list[LogMatch] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # all hits, including unkept ones

    def last(self, *ids: str) -> LogMatch | None:
        return next((m for m in reversed(self.matches) if m.id in ids), None)


def scan_container_log(text: str, *, keep_per_signature: int = 20) -> LogScan:
    """Find every signature in ``text``; keep the first ``keep_per_signature`` lines of each.

    Counts cover every hit. A line is reported once, under its highest-priority signature.
    """
    scan = LogScan()
    if not text:
        return scan
    hits: dict[int, tuple[int, str]] = {}  # line start offset -> (priority, signature id)
    for priority, sig in enumerate(SIGNATURES):
        for m in sig.pattern.finditer(text):
            start = text.rfind("\n", 0, m.start()) + 1
            if start not in hits or hits[start][0] > priority:
                hits[start] = (priority, sig.id)
    line, cursor = 1, 0
    for start in sorted(hits):
        line += text.count("\n", cursor, start)
        cursor = start
        sig_id = hits[start][1]
        scan.counts[sig_id] = scan.counts.get(sig_id, 0) + 1
        if scan.counts[sig_id] > keep_per_signature:
            continue
        end = text.find("\n", start)
        body = text[start : end if end >= 0 else len(text)].strip()[:_MAX_LINE]
        scan.matches.append(LogMatch(sig_id, line, body, extract_numbers(sig_id, body)))
    return scan


def extract_numbers(sig_id: str, line: str) -> dict[str, float]:
    """The numbers a matched line carries, sizes in MiB (empty when it carries none)."""
    if sig_id == "torch_cuda_oom":
        return parse_torch_oom(line)
    if sig_id == "vllm_free_memory_low":
        m = re.search(
            r"\(([\d.]+)/([\d.]+) GiB\) on startup is less than desired GPU memory "
            r"utilization \(([\d.]+), ([\d.]+) GiB\)",
            line,
        )
        if m:
            return {
                "free_mib": _mib(m[1], "GiB"),
                "total_mib": _mib(m[2], "GiB"),
                "utilization": float(m[3]),
                "requested_mib": _mib(m[4], "GiB"),
            }
    if sig_id == "tf_oom":
        m = re.search(r"failed to allocate \S+ \((\d+) bytes\)", line)
        if m:
            return {"tried_mib": _mib(m[1], "bytes")}
    if sig_id == "xla_oom":
        m = re.search(rf"trying to allocate {_SIZE}", line)
        if m:
            return {"tried_mib": _mib(m[1], m[2])}
    if sig_id in ("nccl_shm", "nccl_system_error"):
        m = re.search(r"to (\d+) bytes|\(size (\d+)\)", line)
        if m:
            return {"shm_request_mib": _mib(m[1] or m[2], "bytes")}
    if sig_id == "dataloader_killed":
        m = re.search(r"\(pid\(?s?\)? (\d+)", line)
        if m:
            return {"pid": float(m[1])}
    if sig_id == "nccl_timeout":
        m = re.search(r"Timeout\(ms\)=(\d+)", line)
        if m:
            return {"timeout_ms": float(m[1])}
    return {}


def parse_torch_oom(line: str) -> dict[str, float]:
    """Sizes from a PyTorch CUDA OOM message, old (<=2.0) or new (>=2.1) wording, in MiB.

    Keys (each only when printed): ``gpu``, ``tried_mib``, ``total_mib``, ``free_mib``,
    ``allocated_mib`` (by PyTorch in this process), ``reserved_mib`` (reserved by PyTorch in
    this process, allocated or not), ``process_mib`` (this process including non-PyTorch
    memory) and ``other_process_mib`` (memory this process does not hold, see
    :func:`other_process_mib`).
    """
    out: dict[str, float] = {}
    patterns = {
        "tried_mib": rf"Tried to allocate {_SIZE}",
        "total_mib": rf"{_SIZE} total capacity|total capacity of {_SIZE}",
        "free_mib": rf"; {_SIZE} free|of which {_SIZE} is free",
        "allocated_mib": rf"{_SIZE} already allocated|{_SIZE} is allocated by PyTorch",
        "reserved_mib": rf"{_SIZE} reserved in total by PyTorch",
        "process_mib": rf"this process has {_SIZE} memory in use",
    }
    for key, pattern in patterns.items():
        m = re.search(pattern, line)
        if m:
            number, unit = [g for g in m.groups() if g is not None][:2]
            out[key] = _mib(number, unit)
    gpu = re.search(r"\(GPU (\d+);|GPU (\d+) has a total capacity", line)
    if gpu:
        out["gpu"] = float(gpu[1] or gpu[2])
    unallocated = re.search(rf"{_SIZE} is reserved by PyTorch but unallocated", line)
    if "reserved_mib" not in out and unallocated and "allocated_mib" in out:
        out["reserved_mib"] = round(out["allocated_mib"] + _mib(unallocated[1], unallocated[2]), 2)
    other = other_process_mib(out)
    if other is not None:
        out["other_process_mib"] = other
    return out


def other_process_mib(numbers: dict[str, float]) -> float | None:
    """Estimated MiB held by other processes on the same GPU: total - free - this process.

    "This process" is what the message says it holds in all (``process_mib``), else what
    PyTorch reserved (``reserved_mib``). A large result while this process holds little is the
    time-slicing signature: a neighbour owns the memory. None when the message lacks numbers.
    """
    total, free = numbers.get("total_mib"), numbers.get("free_mib")
    if total is None or free is None:
        return None
    mine = numbers.get("process_mib", numbers.get("reserved_mib"))
    if mine is None:
        return None
    return max(0.0, round(total - free - mine, 2))


def _mib(number: str, unit: str) -> float:
    scale = {
        "bytes": 1 / 2**20,
        "k": 1 / 1024,
        "kb": 1 / 1024,
        "kib": 1 / 1024,
        "m": 1,
        "mb": 1,
        "mib": 1,
        "g": 1024,
        "gb": 1024,
        "gib": 1024,
        "t": 1024**2,
        "tb": 1024**2,
        "tib": 1024**2,
    }
    return round(float(number) * scale.get(unit.lower(), 1), 2)
