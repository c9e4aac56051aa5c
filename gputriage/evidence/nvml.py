"""GPU state through NVML (``nvidia-ml-py``) when gputriage runs on the node itself.

Two halves, so the logic is testable without a GPU:

* :class:`NvmlAdapter` is the seam: the dozen NVML calls used, each returning plain Python
  values and raising :class:`NvmlError` (with a stable ``kind``) instead of pynvml's
  exception zoo. :class:`PynvmlAdapter` is the real one; tests pass a fake.
* :func:`read_snapshot` turns adapter answers into the same
  :class:`~gputriage.parsers.gpu_record.GpuSnapshot` the nvidia-smi parser produces, mapping
  NVML failures to snapshot statuses the way nvidia-smi would print them.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from gputriage.evidence.model import Evidence, Key, Status
from gputriage.parsers.gpu_record import GpuRecord, GpuSnapshot

SOURCE = "local: NVML"
_MIB = 1024 * 1024


class NvmlError(Exception):
    """An NVML call failed. ``kind`` is the NVML return code's name in snake case
    (``library_not_found``, ``driver_not_loaded``, ``gpu_is_lost``, ``not_supported``,
    ``no_permission``, ``lib_rm_version_mismatch``, ``unknown``...)."""

    def __init__(self, kind: str, message: str = "") -> None:
        super().__init__(message or kind)
        self.kind = kind
        self.message = message or kind


class NvmlAdapter(Protocol):
    """The NVML calls gputriage uses. ``handle`` values are opaque to the caller."""

    def init(self) -> None: ...
    def shutdown(self) -> None: ...
    def driver_version(self) -> str: ...
    def cuda_driver_version(self) -> int: ...  # 12020 for CUDA 12.2
    def device_count(self) -> int: ...
    def handle(self, index: int) -> Any: ...
    def uuid(self, handle: Any) -> str: ...
    def pci_bus_id(self, handle: Any) -> str: ...  # as NVML prints it: 00000000:3B:00.0
    def name(self, handle: Any) -> str: ...
    def serial(self, handle: Any) -> str: ...
    def memory(self, handle: Any) -> tuple[int, int]: ...  # (total, used) bytes
    def ecc_enabled(self, handle: Any) -> bool: ...  # current mode
    def ecc_errors(self, handle: Any, *, uncorrected: bool, aggregate: bool) -> int: ...
    def retired_pages(self, handle: Any, *, double_bit: bool) -> int: ...  # page count
    def retired_pages_pending(self, handle: Any) -> bool: ...
    def remapped_rows(self, handle: Any) -> tuple[int, int, bool, bool]: ...
    # (correctable, uncorrectable, pending, failure)
    def mig_enabled(self, handle: Any) -> bool: ...  # current mode
    def mig_devices(self, handle: Any) -> list[Any]: ...  # MIG device handles
    def mig_ids(self, mig_handle: Any) -> tuple[int, int]: ...  # (GPU instance, compute instance)
    def processes(self, handle: Any) -> list[dict[str, Any]]: ...
    # [{pid, used_memory_bytes (None when NVML can't say), gpu_instance, compute_instance}]
    def process_name(self, pid: int) -> str: ...


class PynvmlAdapter:
    """:class:`NvmlAdapter` on ``pynvml`` (the module the nvidia-ml-py package provides)."""

    def __init__(self) -> None:
        import pynvml

        self._nv = pynvml
        self._kinds = {
            getattr(pynvml, name): name[len("NVML_ERROR_") :].lower()
            for name in dir(pynvml)
            if name.startswith("NVML_ERROR_")
        }

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self._nv.NVMLError as exc:
            raise self.translate(exc) from exc

    def translate(self, exc: Exception) -> NvmlError:
        """pynvml's ``NVMLError_GpuIsLost`` & co -> ``NvmlError("gpu_is_lost", ...)``."""
        value = getattr(exc, "value", None)
        return NvmlError(self._kinds.get(value, "unknown"), str(exc))

    def init(self) -> None:
        self._call(self._nv.nvmlInit)

    def shutdown(self) -> None:
        self._call(self._nv.nvmlShutdown)

    def driver_version(self) -> str:
        return _text(self._call(self._nv.nvmlSystemGetDriverVersion))

    def cuda_driver_version(self) -> int:
        return int(self._call(self._nv.nvmlSystemGetCudaDriverVersion))

    def device_count(self) -> int:
        return int(self._call(self._nv.nvmlDeviceGetCount))

    def handle(self, index: int) -> Any:
        return self._call(self._nv.nvmlDeviceGetHandleByIndex, index)

    def uuid(self, handle: Any) -> str:
        return _text(self._call(self._nv.nvmlDeviceGetUUID, handle))

    def pci_bus_id(self, handle: Any) -> str:
        return _text(self._call(self._nv.nvmlDeviceGetPciInfo, handle).busId)

    def name(self, handle: Any) -> str:
        return _text(self._call(self._nv.nvmlDeviceGetName, handle))

    def serial(self, handle: Any) -> str:
        return _text(self._call(self._nv.nvmlDeviceGetSerial, handle))

    def memory(self, handle: Any) -> tuple[int, int]:
        info = self._call(self._nv.nvmlDeviceGetMemoryInfo, handle)
        return int(info.total), int(info.used)

    def ecc_enabled(self, handle: Any) -> bool:
        current, _pending = self._call(self._nv.nvmlDeviceGetEccMode, handle)
        return bool(current)

    def ecc_errors(self, handle: Any, *, uncorrected: bool, aggregate: bool) -> int:
        nv = self._nv
        kind = (
            nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
            if uncorrected
            else nv.NVML_MEMORY_ERROR_TYPE_CORRECTED
        )
        counter = nv.NVML_AGGREGATE_ECC if aggregate else nv.NVML_VOLATILE_ECC
        return int(self._call(nv.nvmlDeviceGetTotalEccErrors, handle, kind, counter))

    def retired_pages(self, handle: Any, *, double_bit: bool) -> int:
        nv = self._nv
        cause = (
            nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
            if double_bit
            else nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
        )
        return len(self._call(nv.nvmlDeviceGetRetiredPages, handle, cause))

    def retired_pages_pending(self, handle: Any) -> bool:
        return bool(self._call(self._nv.nvmlDeviceGetRetiredPagesPendingStatus, handle))

    def remapped_rows(self, handle: Any) -> tuple[int, int, bool, bool]:
        corr, unc, pending, failure = self._call(self._nv.nvmlDeviceGetRemappedRows, handle)
        return int(corr), int(unc), bool(pending), bool(failure)

    def mig_enabled(self, handle: Any) -> bool:
        current, _pending = self._call(self._nv.nvmlDeviceGetMigMode, handle)
        return bool(current == self._nv.NVML_DEVICE_MIG_ENABLE)

    def mig_devices(self, handle: Any) -> list[Any]:
        found = []
        for i in range(int(self._call(self._nv.nvmlDeviceGetMaxMigDeviceCount, handle))):
            try:
                found.append(self._call(self._nv.nvmlDeviceGetMigDeviceHandleByIndex, handle, i))
            except NvmlError as exc:
                if exc.kind != "not_found":  # an unused slot
                    raise
        return found

    def mig_ids(self, mig_handle: Any) -> tuple[int, int]:
        return (
            int(self._call(self._nv.nvmlDeviceGetGpuInstanceId, mig_handle)),
            int(self._call(self._nv.nvmlDeviceGetComputeInstanceId, mig_handle)),
        )

    def processes(self, handle: Any) -> list[dict[str, Any]]:
        found = []
        for p in self._call(self._nv.nvmlDeviceGetComputeRunningProcesses, handle):
            used = getattr(p, "usedGpuMemory", None)
            if used is not None and used >= 2**63:  # NVML_VALUE_NOT_AVAILABLE
                used = None
            found.append(
                {
                    "pid": int(p.pid),
                    "used_memory_bytes": used,
                    "gpu_instance": _instance(getattr(p, "gpuInstanceId", None)),
                    "compute_instance": _instance(getattr(p, "computeInstanceId", None)),
                }
            )
        return found

    def process_name(self, pid: int) -> str:
        return _text(self._call(self._nv.nvmlSystemGetProcessName, pid))


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _instance(value: Any) -> int | None:
    # NVML reports 0xFFFFFFFF for "not a MIG process".
    return None if value is None or value >= 0xFFFFFFFF else int(value)


def normalise_pci(bus_id: str) -> str:
    """``00000000:3b:00.0`` -> ``0000:3B:00.0`` (the form nvidia-smi parsing also produces)."""
    bus_id = bus_id.strip()
    domain, sep, rest = bus_id.partition(":")
    if not sep:
        return bus_id.upper()
    return f"{domain[-4:].rjust(4, '0')}:{rest}".upper()


#: Device-level NVML failures -> GpuSnapshot.status (the words nvidia-smi would print).
_SNAPSHOT_STATUS = {
    "driver_not_loaded": (
        "driver_unreachable",
        "NVIDIA-SMI has failed because it couldn't "
        "communicate with the NVIDIA driver (NVML: Driver Not Loaded)",
    ),
    "lib_rm_version_mismatch": (
        "nvml_mismatch",
        "Failed to initialize NVML: Driver/library version mismatch",
    ),
    "gpu_is_lost": ("gpu_lost", "GPU is lost"),
    "unknown": ("unknown_error", "Unknown Error"),
}


class _GpuLost(Exception):
    pass


def read_snapshot(nvml: NvmlAdapter) -> GpuSnapshot:
    """Everything NVML says about this machine's GPUs. Raises :class:`NvmlError` only for
    failures that are not evidence about the GPUs (no library, no permission)."""
    snap = GpuSnapshot(source_format="nvml")
    try:
        nvml.init()
    except NvmlError as exc:
        return _failed_snapshot(snap, exc)
    try:
        snap.driver_version = _optional(nvml.driver_version)
        cuda = _optional(nvml.cuda_driver_version)
        snap.cuda_version = f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None
        count = nvml.device_count()
        snap.attached_gpus = count
        if count == 0:
            snap.status, snap.message = "no_devices", "No devices were found"
        for index in range(count):
            _read_gpu(nvml, index, snap)
    except NvmlError as exc:
        return _failed_snapshot(snap, exc)
    finally:
        with contextlib.suppress(NvmlError):  # a failed shutdown changes nothing we report
            nvml.shutdown()
    lost = [
        g.pci_bus_id or str(g.index) for g in snap.gpus if any("GPU is lost" in e for e in g.errors)
    ]
    if lost:
        snap.status = "gpu_lost"
        snap.message = "; ".join(
            f"Unable to determine the device handle for GPU {gpu}: GPU is lost" for gpu in lost
        )
    return snap


def _failed_snapshot(snap: GpuSnapshot, exc: NvmlError) -> GpuSnapshot:
    if exc.kind not in _SNAPSHOT_STATUS:
        raise exc
    snap.status, words = _SNAPSHOT_STATUS[exc.kind]
    snap.message = f"{words} [{exc.message}]" if exc.message not in words else words
    return snap


def _read_gpu(nvml: NvmlAdapter, index: int, snap: GpuSnapshot) -> None:
    record = GpuRecord(index=index)
    snap.gpus.append(record)
    try:
        handle = nvml.handle(index)
    except NvmlError as exc:
        if exc.kind == "no_permission":
            raise
        words = _SNAPSHOT_STATUS.get(exc.kind, ("", exc.message))[1]
        record.errors.append(f"handle: {words}")
        if exc.kind != "gpu_is_lost" and snap.status == "ok":
            snap.status = "unknown_error"
            snap.message = f"Unable to determine the device handle for GPU {index}: {words}"
        return
    try:
        record.pci_bus_id = normalise_pci(_field(lambda: nvml.pci_bus_id(handle), record) or "")
        record.uuid = _field(lambda: nvml.uuid(handle), record) or ""
        record.name = _field(lambda: nvml.name(handle), record) or ""
        record.serial = _field(lambda: nvml.serial(handle), record) or ""
        memory = _field(lambda: nvml.memory(handle), record)
        if memory:
            record.memory_total_mib, record.memory_used_mib = (memory[0] // _MIB, memory[1] // _MIB)
        _read_memory_health(nvml, handle, record)
        _read_mig(nvml, handle, record)
        _read_processes(nvml, handle, record)
    except _GpuLost:
        record.errors.append("GPU is lost")
        if record.pci_bus_id:
            snap.lost_pci_ids.append(record.pci_bus_id)


def _read_memory_health(nvml: NvmlAdapter, h: Any, record: GpuRecord) -> None:
    ecc = _field(lambda: nvml.ecc_enabled(h), record)
    record.ecc_mode = None if ecc is None else ("Enabled" if ecc else "Disabled")
    if ecc:
        record.ecc_volatile_sbe = _field(
            lambda: nvml.ecc_errors(h, uncorrected=False, aggregate=False), record
        )
        record.ecc_volatile_dbe = _field(
            lambda: nvml.ecc_errors(h, uncorrected=True, aggregate=False), record
        )
        record.ecc_aggregate_sbe = _field(
            lambda: nvml.ecc_errors(h, uncorrected=False, aggregate=True), record
        )
        record.ecc_aggregate_dbe = _field(
            lambda: nvml.ecc_errors(h, uncorrected=True, aggregate=True), record
        )
    record.retired_pages_sbe = _field(lambda: nvml.retired_pages(h, double_bit=False), record)
    record.retired_pages_dbe = _field(lambda: nvml.retired_pages(h, double_bit=True), record)
    record.retired_pages_pending = _field(lambda: nvml.retired_pages_pending(h), record)
    rows = _field(lambda: nvml.remapped_rows(h), record)
    if rows is not None:
        (
            record.remapped_rows_correctable,
            record.remapped_rows_uncorrectable,
            record.remapped_rows_pending,
            record.remapped_rows_failure,
        ) = rows


def _read_mig(nvml: NvmlAdapter, h: Any, record: GpuRecord) -> None:
    mig = _field(lambda: nvml.mig_enabled(h), record)
    record.mig_mode = None if mig is None else ("Enabled" if mig else "Disabled")
    if not mig:
        return
    for mh in _field(lambda: nvml.mig_devices(h), record) or []:
        ids = _field(partial(nvml.mig_ids, mh), record) or (None, None)
        memory = _field(partial(nvml.memory, mh), record)
        name = _field(partial(nvml.name, mh), record) or ""
        record.mig_devices.append(
            {
                "gpu_instance": ids[0],
                "compute_instance": ids[1],
                # NVML names MIG devices "NVIDIA A100-SXM4-40GB MIG 1g.5gb": keep the profile.
                "profile": name.rsplit(" MIG ", 1)[-1] if " MIG " in name else name,
                "memory_total_mib": memory[0] // _MIB if memory else None,
                "memory_used_mib": memory[1] // _MIB if memory else None,
                "uuid": _field(partial(nvml.uuid, mh), record) or "",
            }
        )


def _read_processes(nvml: NvmlAdapter, h: Any, record: GpuRecord) -> None:
    for p in _field(lambda: nvml.processes(h), record) or []:
        used = p.get("used_memory_bytes")
        record.processes.append(
            {
                "pid": p["pid"],
                "name": _field(partial(nvml.process_name, p["pid"]), record) or "",
                "type": "C",
                "used_memory_mib": used // _MIB if isinstance(used, int) else None,
                "gpu_instance": p.get("gpu_instance"),
                "compute_instance": p.get("compute_instance"),
            }
        )


def _field(read: Callable[[], Any], record: GpuRecord | None) -> Any:
    """One NVML field: None when not supported; a lost GPU aborts the rest of this GPU."""
    try:
        return read()
    except NvmlError as exc:
        if exc.kind == "gpu_is_lost":
            raise _GpuLost() from exc
        if exc.kind != "not_supported" and record is not None:
            record.errors.append(exc.message)
        return None


def _optional(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except NvmlError:
        return None


def nvml_evidence(nvml: NvmlAdapter | None = None, *, timeout: float = 10.0) -> Evidence:
    """``Key.NVIDIA_SMI`` read through NVML; never raises. ``data`` is ``GpuSnapshot.to_dict()``.

    NVML calls cannot be interrupted (a hung GPU can block them for minutes), so the read runs
    in a daemon thread and a late answer is reported as a timeout.
    """
    started = time.monotonic()
    result: list[Evidence] = []
    worker = threading.Thread(
        target=lambda: result.append(_evidence(nvml)), daemon=True, name="gputriage-nvml"
    )
    worker.start()
    worker.join(timeout)
    if not result:
        return Evidence(
            Key.NVIDIA_SMI,
            Status.TIMEOUT,
            f"NVML did not answer within {timeout:.0f} s (a hung GPU or driver)",
            "",
            SOURCE,
            elapsed_s=time.monotonic() - started,
        )
    evidence = result[0]
    return Evidence(
        evidence.key,
        evidence.status,
        evidence.detail,
        evidence.raw,
        evidence.source,
        evidence.data,
        evidence.format,
        elapsed_s=time.monotonic() - started,
    )


def _evidence(nvml: NvmlAdapter | None) -> Evidence:
    try:
        adapter = nvml if nvml is not None else PynvmlAdapter()
        snap = read_snapshot(adapter)
    except ImportError:
        return Evidence(
            Key.NVIDIA_SMI, Status.UNAVAILABLE, "nvidia-ml-py (pynvml) is not installed", "", SOURCE
        )
    except NvmlError as exc:
        if exc.kind == "library_not_found":
            return Evidence(
                Key.NVIDIA_SMI,
                Status.UNAVAILABLE,
                f"no NVIDIA driver/NVML on this machine ({exc.message})",
                "",
                SOURCE,
            )
        if exc.kind == "no_permission":
            return Evidence(
                Key.NVIDIA_SMI,
                Status.FORBIDDEN,
                f"NVML refused access ({exc.message}); run as a user that can open /dev/nvidia*",
                "",
                SOURCE,
            )
        return Evidence(
            Key.NVIDIA_SMI, Status.ERROR, f"NVML failed: {exc.kind}: {exc.message}", "", SOURCE
        )
    except Exception as exc:  # an unexpected binding error must not crash a triage
        return Evidence(
            Key.NVIDIA_SMI, Status.ERROR, f"NVML failed: {type(exc).__name__}: {exc}", "", SOURCE
        )
    data = snap.to_dict()
    raw = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if snap.status == "ok":
        detail = f"{len(snap.gpus)} GPUs via NVML, driver {snap.driver_version}"
    else:
        detail = f"NVML: {snap.status}: {snap.message}"
    return Evidence(Key.NVIDIA_SMI, Status.OK, detail, raw, SOURCE, data, "nvml")
