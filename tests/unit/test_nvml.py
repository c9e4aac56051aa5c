"""NVML -> GpuSnapshot through the adapter seam (a fake adapter here; the real one on GPUs)."""

from __future__ import annotations

import ctypes.util
import json
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from gputriage.evidence.model import Key, Status
from gputriage.evidence.nvml import (
    NvmlAdapter,
    NvmlError,
    PynvmlAdapter,
    normalise_pci,
    nvml_evidence,
    read_snapshot,
)
from gputriage.parsers.gpu_record import GpuSnapshot

GIB = 1024**3
MIB = 1024**2


@dataclass
class FakeGpu:
    pci: str
    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    memory: tuple[int, int] = (80 * GIB, 1 * GIB)
    ecc: bool | None = True  # None: not supported
    ecc_counts: dict[tuple[bool, bool], int] = field(default_factory=dict)
    retired: tuple[int, int] | None = (0, 0)
    retired_pending: bool | None = False
    rows: tuple[int, int, bool, bool] | None = (0, 0, False, False)
    mig: bool | None = False
    migs: list[dict[str, Any]] = field(default_factory=list)
    procs: list[dict[str, Any]] = field(default_factory=list)
    #: method name -> NvmlError kind raised when it is called for this GPU
    fail: dict[str, str] = field(default_factory=dict)


class FakeNvml:
    """Implements :class:`NvmlAdapter` from plain data."""

    def __init__(
        self,
        gpus: list[FakeGpu],
        *,
        fail: dict[str, str] | None = None,
        names: dict[int, str] | None = None,
    ) -> None:
        self.gpus = gpus
        self.fail = fail or {}
        self.names = names or {}
        self.calls: list[str] = []

    def _check(self, what: str, gpu: FakeGpu | None = None) -> None:
        self.calls.append(what)
        kind = (gpu.fail if gpu else self.fail).get(what)
        if kind:
            raise NvmlError(
                kind,
                {
                    "gpu_is_lost": "GPU is lost",
                    "unknown": "Unknown Error",
                    "not_supported": "Not Supported",
                }.get(kind, kind),
            )

    def init(self) -> None:
        self._check("init")

    def shutdown(self) -> None:
        self._check("shutdown")

    def driver_version(self) -> str:
        self._check("driver_version")
        return "550.90.07"

    def cuda_driver_version(self) -> int:
        self._check("cuda_driver_version")
        return 12040

    def device_count(self) -> int:
        self._check("device_count")
        return len(self.gpus)

    def handle(self, index: int) -> Any:
        self._check(f"handle{index}")
        return self.gpus[index]

    def uuid(self, h: Any) -> str:
        if isinstance(h, dict):
            return str(h["uuid"])
        self._check("uuid", h)
        return str(h.uuid)

    def pci_bus_id(self, h: FakeGpu) -> str:
        self._check("pci_bus_id", h)
        return h.pci

    def name(self, h: Any) -> str:
        if isinstance(h, dict):
            return str(h["name"])
        self._check("name", h)
        return h.name

    def serial(self, h: FakeGpu) -> str:
        self._check("serial", h)
        return "1652923017935"

    def memory(self, h: Any) -> tuple[int, int]:
        if isinstance(h, dict):
            return h["memory"]  # type: ignore[no-any-return]
        self._check("memory", h)
        return h.memory

    def ecc_enabled(self, h: FakeGpu) -> bool:
        self._check("ecc_enabled", h)
        if h.ecc is None:
            raise NvmlError("not_supported", "Not Supported")
        return h.ecc

    def ecc_errors(self, h: FakeGpu, *, uncorrected: bool, aggregate: bool) -> int:
        self._check("ecc_errors", h)
        return h.ecc_counts.get((uncorrected, aggregate), 0)

    def retired_pages(self, h: FakeGpu, *, double_bit: bool) -> int:
        self._check("retired_pages", h)
        if h.retired is None:
            raise NvmlError("not_supported", "Not Supported")
        return h.retired[1 if double_bit else 0]

    def retired_pages_pending(self, h: FakeGpu) -> bool:
        if h.retired_pending is None:
            raise NvmlError("not_supported", "Not Supported")
        return h.retired_pending

    def remapped_rows(self, h: FakeGpu) -> tuple[int, int, bool, bool]:
        self._check("remapped_rows", h)
        if h.rows is None:
            raise NvmlError("not_supported", "Not Supported")
        return h.rows

    def mig_enabled(self, h: FakeGpu) -> bool:
        if h.mig is None:
            raise NvmlError("not_supported", "Not Supported")
        return h.mig

    def mig_devices(self, h: FakeGpu) -> list[Any]:
        return h.migs

    def mig_ids(self, mh: dict[str, Any]) -> tuple[int, int]:
        return mh["gi"], mh["ci"]

    def processes(self, h: FakeGpu) -> list[dict[str, Any]]:
        self._check("processes", h)
        return h.procs

    def process_name(self, pid: int) -> str:
        if pid not in self.names:
            raise NvmlError("not_found", "Not Found")
        return self.names[pid]


def h100(i: int, **kw: Any) -> FakeGpu:
    return FakeGpu(
        pci=f"00000000:{0x18 + i * 0x23:02X}:00.0",
        uuid=f"GPU-{i}1b7c2e-9d3f-5e6a-8b0c-1d2e3f4a5b6c",
        **kw,
    )


def test_fake_implements_the_protocol() -> None:
    adapter: NvmlAdapter = FakeNvml([])  # mypy checks the seam
    assert adapter.device_count() == 0


def test_healthy_node_with_ecc_rows_processes_and_mig() -> None:
    migs = [
        {
            "gi": 1,
            "ci": 0,
            "name": "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
            "memory": (40 * GIB, 2 * GIB),
            "uuid": "MIG-aaaa",
        },
        {
            "gi": 2,
            "ci": 0,
            "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
            "memory": (10 * GIB, 0),
            "uuid": "MIG-bbbb",
        },
    ]
    nvml = FakeNvml(
        [
            h100(
                0,
                ecc_counts={(False, False): 3, (True, True): 1},
                rows=(1, 2, True, False),
                procs=[
                    {
                        "pid": 4242,
                        "used_memory_bytes": 30 * GIB,
                        "gpu_instance": None,
                        "compute_instance": None,
                    }
                ],
            ),
            h100(
                1,
                mig=True,
                migs=migs,
                procs=[
                    {"pid": 77, "used_memory_bytes": None, "gpu_instance": 1, "compute_instance": 0}
                ],
            ),
        ],
        names={4242: "python3"},
    )
    snap = read_snapshot(nvml)
    assert (
        snap.status,
        snap.driver_version,
        snap.cuda_version,
        snap.attached_gpus,
        snap.source_format,
    ) == ("ok", "550.90.07", "12.4", 2, "nvml")
    g0, g1 = snap.gpus
    assert (g0.index, g0.pci_bus_id, g0.uuid, g0.serial) == (
        0,
        "0000:18:00.0",
        "GPU-01b7c2e-9d3f-5e6a-8b0c-1d2e3f4a5b6c",
        "1652923017935",
    )
    assert (g0.memory_total_mib, g0.memory_used_mib, g0.ecc_mode) == (81920, 1024, "Enabled")
    assert (
        g0.ecc_volatile_sbe,
        g0.ecc_volatile_dbe,
        g0.ecc_aggregate_sbe,
        g0.ecc_aggregate_dbe,
    ) == (3, 0, 0, 1)
    assert (
        g0.remapped_rows_correctable,
        g0.remapped_rows_uncorrectable,
        g0.remapped_rows_pending,
        g0.remapped_rows_failure,
    ) == (1, 2, True, False)
    assert (g0.retired_pages_sbe, g0.retired_pages_dbe, g0.retired_pages_pending) == (0, 0, False)
    assert g0.processes == [
        {
            "pid": 4242,
            "name": "python3",
            "type": "C",
            "used_memory_mib": 30720,
            "gpu_instance": None,
            "compute_instance": None,
        }
    ]
    assert g0.mig_mode == "Disabled" and g0.mig_devices == []
    assert g1.pci_bus_id == "0000:3B:00.0" and g1.mig_mode == "Enabled"
    assert g1.mig_devices == [
        {
            "gpu_instance": 1,
            "compute_instance": 0,
            "profile": "3g.40gb",
            "memory_total_mib": 40960,
            "memory_used_mib": 2048,
            "uuid": "MIG-aaaa",
        },
        {
            "gpu_instance": 2,
            "compute_instance": 0,
            "profile": "1g.10gb",
            "memory_total_mib": 10240,
            "memory_used_mib": 0,
            "uuid": "MIG-bbbb",
        },
    ]
    # A process NVML cannot name still counts; the failed name lookup is recorded.
    assert g1.processes[0]["name"] == "" and g1.processes[0]["used_memory_mib"] is None
    assert g1.errors == ["Not Found"] and g0.errors == []
    assert nvml.calls[-1] == "shutdown"


def test_evidence_carries_the_snapshot_as_data_and_json() -> None:
    ev = nvml_evidence(FakeNvml([h100(0)]))
    assert (ev.key, ev.status, ev.format, ev.source) == (
        Key.NVIDIA_SMI,
        Status.OK,
        "nvml",
        "local: NVML",
    )
    assert ev.detail == "1 GPUs via NVML, driver 550.90.07"
    assert json.loads(ev.raw) == ev.data
    again = GpuSnapshot.from_dict(ev.data)
    assert again.gpus[0].pci_bus_id == "0000:18:00.0" and again.to_dict() == ev.data
    assert ev.find_line('"pci_bus_id": "0000:18:00.0"').line > 0


def test_not_supported_fields_are_none_not_errors() -> None:
    consumer = h100(
        0,
        name="NVIDIA GeForce RTX 4090",
        ecc=None,
        retired=None,
        retired_pending=None,
        rows=None,
        mig=None,
    )
    (gpu,) = read_snapshot(FakeNvml([consumer])).gpus
    assert gpu.ecc_mode is None and gpu.ecc_volatile_dbe is None
    assert gpu.retired_pages_sbe is None and gpu.retired_pages_pending is None
    assert gpu.remapped_rows_uncorrectable is None and gpu.mig_mode is None
    assert gpu.errors == []


def test_gpu_lost_mid_read() -> None:
    lost = h100(1, fail={"memory": "gpu_is_lost"})
    snap = read_snapshot(FakeNvml([h100(0), lost]))
    assert snap.status == "gpu_lost"
    assert snap.lost_pci_ids == ["0000:3B:00.0"]
    assert snap.message == (
        "Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost"
    )
    assert snap.gpus[1].errors == ["GPU is lost"] and snap.gpus[1].memory_total_mib is None
    assert snap.gpus[0].memory_total_mib == 81920


def test_handle_failures() -> None:
    snap = read_snapshot(FakeNvml([h100(0), h100(1)], fail={"handle1": "gpu_is_lost"}))
    assert snap.status == "gpu_lost" and snap.gpus[1].errors == ["handle: GPU is lost"]
    assert snap.message == "Unable to determine the device handle for GPU 1: GPU is lost"
    snap = read_snapshot(FakeNvml([h100(0)], fail={"handle0": "unknown"}))
    assert (snap.status, snap.message) == (
        "unknown_error",
        "Unable to determine the device handle for GPU 0: Unknown Error",
    )


def test_field_level_unknown_error_is_recorded_on_the_gpu() -> None:
    snap = read_snapshot(FakeNvml([h100(0, fail={"remapped_rows": "unknown"})]))
    assert snap.status == "ok" and snap.gpus[0].errors == ["Unknown Error"]
    assert snap.gpus[0].remapped_rows_pending is None


@pytest.mark.parametrize(
    ("kind", "status", "snapshot", "words"),
    [
        ("library_not_found", Status.UNAVAILABLE, None, "no NVIDIA driver/NVML on this machine"),
        ("no_permission", Status.FORBIDDEN, None, "NVML refused access"),
        (
            "driver_not_loaded",
            Status.OK,
            "driver_unreachable",
            "couldn't communicate with the NVIDIA driver",
        ),
        ("lib_rm_version_mismatch", Status.OK, "nvml_mismatch", "Driver/library version mismatch"),
        ("unknown", Status.OK, "unknown_error", "Unknown Error"),
        ("gpu_is_lost", Status.OK, "gpu_lost", "GPU is lost"),
        ("irq_issue", Status.ERROR, None, "NVML failed: irq_issue"),
    ],
)
def test_init_failures(kind: str, status: Status, snapshot: str | None, words: str) -> None:
    ev = nvml_evidence(FakeNvml([], fail={"init": kind}))
    assert ev.status is status and words in ev.detail
    if snapshot:
        assert ev.data["status"] == snapshot and words in ev.data["message"]
        assert ev.data["gpus"] == []


def test_no_devices_and_count_failure() -> None:
    assert read_snapshot(FakeNvml([])).status == "no_devices"
    snap = read_snapshot(FakeNvml([h100(0)], fail={"device_count": "unknown"}))
    assert snap.status == "unknown_error" and snap.driver_version == "550.90.07"


def test_hung_nvml_times_out() -> None:
    class Hung(FakeNvml):
        def init(self) -> None:
            time.sleep(2)

    started = time.monotonic()
    ev = nvml_evidence(Hung([]), timeout=0.2)
    assert ev.status is Status.TIMEOUT and "NVML did not answer within" in ev.detail
    assert time.monotonic() - started < 1


def test_normalise_pci() -> None:
    assert normalise_pci("00000000:3b:00.0") == "0000:3B:00.0"
    assert normalise_pci("0000:3B:00.0") == "0000:3B:00.0"
    assert normalise_pci("00000008:01:00.0") == "0008:01:00.0"
    assert normalise_pci("garbage") == "GARBAGE"


def test_real_pynvml_errors_translate_to_kinds() -> None:
    import pynvml

    adapter = PynvmlAdapter()
    for value, kind in [
        (pynvml.NVML_ERROR_GPU_IS_LOST, "gpu_is_lost"),
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "library_not_found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver_not_loaded"),
        (pynvml.NVML_ERROR_NOT_SUPPORTED, "not_supported"),
        (pynvml.NVML_ERROR_UNKNOWN, "unknown"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "lib_rm_version_mismatch"),
    ]:
        exc = pynvml.NVMLError(value)  # pynvml returns the NVMLError_* subclass
        assert adapter.translate(exc).kind == kind


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None,
    reason="this machine has libnvidia-ml: tests/gpu covers it",
)
def test_real_pynvml_without_a_gpu_is_cleanly_unavailable() -> None:
    ev = nvml_evidence()
    assert (ev.status, ev.source, ev.raw, ev.data) == (Status.UNAVAILABLE, "local: NVML", "", None)
    assert ev.detail == "no NVIDIA driver/NVML on this machine (NVML Shared Library Not Found)"
