"""nvidia-smi parsers against every real output in corpus/gpu/nvidia-smi (see its MANIFEST)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputriage.parsers.gpu_record import GpuSnapshot
from gputriage.parsers.nvidia_smi import parse_nvidia_smi

pytestmark = pytest.mark.corpus

STATUSES = {
    "ok",
    "gpu_lost",
    "unknown_error",
    "nvml_mismatch",
    "driver_unreachable",
    "no_devices",
    "unparsed",
}


def parse(corpus_dir: Path, rel: str) -> GpuSnapshot:
    path = corpus_dir / "gpu" / "nvidia-smi" / rel
    return parse_nvidia_smi(path.read_text(encoding="utf-8", errors="replace"))


def test_every_corpus_file_parses_to_a_named_status(corpus_dir: Path) -> None:
    files = sorted(p for p in (corpus_dir / "gpu" / "nvidia-smi").rglob("*") if p.is_file())
    assert len(files) == 65  # 26 xml + 12 text + 14 errors + 3 list + 10 captures
    statuses: dict[str, str] = {}
    for path in files:
        snap = parse_nvidia_smi(path.read_text(encoding="utf-8", errors="replace"))
        assert snap.status in STATUSES, path
        assert "internal" not in snap.message, (path, snap.message)
        statuses[path.name] = snap.status
    # Only the --help-query-gpu field reference is not an nvidia-smi report.
    assert [n for n, s in statuses.items() if s == "unparsed"] == ["netdata-help-query-gpu.txt"]
    xml = [p for p in files if p.suffix == ".xml"]
    assert len(xml) == 26
    for path in xml:
        snap = parse_nvidia_smi(path.read_text(encoding="utf-8"))
        assert snap.source_format == "xml" and snap.status == "ok", path
        assert all(g.pci_bus_id and g.uuid.startswith("GPU-") for g in snap.gpus), path


# --- XML -------------------------------------------------------------------------------------


def test_xml_mig_a100(corpus_dir: Path) -> None:
    snap = parse(corpus_dir, "xml/netdata-a100-sxm4-mig.xml")
    assert (snap.driver_version, snap.cuda_version, snap.attached_gpus) == ("510.47.03", "11.6", 1)
    (gpu,) = snap.gpus
    assert gpu.pci_bus_id == "0000:00:04.0"
    assert gpu.name == "NVIDIA A100-SXM4-40GB"
    assert gpu.memory_total_mib == 40960 and gpu.memory_used_mib == 38
    assert gpu.mig_mode == "Enabled"
    assert [
        (m["gpu_instance"], m["compute_instance"], m["memory_total_mib"]) for m in gpu.mig_devices
    ] == [(1, 0, 19968), (2, 0, 19968)]
    assert gpu.ecc_volatile_sbe is None  # printed N/A, never 0
    assert (gpu.ecc_aggregate_sbe, gpu.ecc_aggregate_dbe) == (0, 0)
    assert gpu.remapped_rows_pending is None  # <remapped_rows>N/A</remapped_rows>


def test_xml_trimmed_a100_reports_fewer_gpus_than_attached(corpus_dir: Path) -> None:
    snap = parse(corpus_dir, "xml/telegraf-a100-sxm4-v12.xml")
    assert snap.status == "ok"
    assert snap.attached_gpus == 4 and len(snap.gpus) == 1
    assert "describes 1 of 4 attached GPUs" in snap.message
    assert len(snap.gpus[0].mig_devices) == 4
    assert [m["gpu_instance"] for m in snap.gpus[0].mig_devices] == [3, 4, 5, 6]


def test_xml_old_ecc_layout_counts_aggregate_single_bit(corpus_dir: Path) -> None:
    (gpu,) = parse(corpus_dir, "xml/netdata-tesla-p100.xml").gpus
    assert gpu.name == "Tesla P100-PCIE-16GB"
    assert (gpu.ecc_volatile_sbe, gpu.ecc_volatile_dbe) == (0, 0)
    assert (gpu.ecc_aggregate_sbe, gpu.ecc_aggregate_dbe) == (3, 0)
    assert (gpu.retired_pages_sbe, gpu.retired_pages_dbe, gpu.retired_pages_pending) == (
        0,
        0,
        False,
    )


def test_xml_v13_remapped_rows_with_inactive_counters(corpus_dir: Path) -> None:
    snap = parse(corpus_dir, "xml/telegraf-rtx-4000-sff-ada-v13.xml")
    (gpu,) = snap.gpus
    assert snap.driver_version == "595.84"
    assert gpu.pci_bus_id == "0000:06:00.0"
    assert (gpu.remapped_rows_correctable, gpu.remapped_rows_uncorrectable) == (0, 0)
    assert (gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (False, False)
    assert gpu.recovery_action == "None"
    assert gpu.ecc_mode == "Disabled"
    assert len(gpu.processes) == 4
    assert gpu.processes[0] == {
        "pid": 1842,
        "name": "cosmic-comp",
        "type": "G",
        "used_memory_mib": 410,
        "gpu_instance": None,
        "compute_instance": None,
    }
    assert gpu.processes[2]["type"] == "C" and gpu.processes[2]["name"] == "python"


def test_xml_reset_status_maps_to_recovery_action(corpus_dir: Path) -> None:
    # R535 printed <gpu_reset_status> (reset_required No) before <gpu_recovery_action> existed.
    (gpu,) = parse(corpus_dir, "xml/netdata-rtx-4090-driver-535.xml").gpus
    assert gpu.recovery_action == "None"
    assert gpu.pci_bus_id == "0000:84:00.0"


def test_xml_dual_gpu_and_vgpu_and_windows(corpus_dir: Path) -> None:
    dual = parse(corpus_dir, "xml/telegraf-dual_a5000-v13.xml")
    assert [g.pci_bus_id for g in dual.gpus] == ["0000:81:00.0", "0000:C1:00.0"]
    assert [g.index for g in dual.gpus] == [0, 1]
    assert {g.ecc_mode for g in dual.gpus} == {"Disabled"}
    vgpu = parse(corpus_dir, "xml/telegraf-tesla_p4.xml")
    (gpu,) = vgpu.gpus
    assert gpu.name == "GRID P4-1Q" and gpu.memory_total_mib == 1024
    assert len(gpu.processes) == 13
    assert all(p["used_memory_mib"] is None for p in gpu.processes)  # WDDM: N/A
    windows = parse(corpus_dir, "xml/netdata-rtx-2080-win.xml")
    assert len(windows.gpus[0].processes) == 26


def test_xml_fragments_without_prolog_or_header_fields(corpus_dir: Path) -> None:
    old = parse(corpus_dir, "xml/telegraf-gtx-1070-ti.xml")  # v10 trimmed fragment
    assert old.status == "ok" and old.driver_version is None and old.attached_gpus is None
    assert old.gpus[0].name == "GeForce GTX 1070 Ti"
    assert (old.gpus[0].memory_total_mib, old.gpus[0].memory_used_mib) == (4096, 42)
    bare = parse(corpus_dir, "xml/netdata-rtx-pro-6000-driver-580.xml")  # no <?xml, no DOCTYPE
    assert bare.gpus[0].uuid == "GPU-11111111-2222-3333-4444-555555555555"
    assert bare.gpus[0].pci_bus_id == "0000:01:00.0"
    assert parse(corpus_dir, "xml/telegraf-gtx-1660-ti.xml").gpus[0].name == "Graphics Device"


# --- -q text ---------------------------------------------------------------------------------


def test_text_a10_remap_pending(corpus_dir: Path) -> None:
    snap = parse(corpus_dir, "text/gpud-a10-535.129.03-q-remap-pending.txt")
    assert (snap.status, snap.source_format) == ("ok", "text")
    assert (snap.driver_version, snap.cuda_version, snap.attached_gpus) == ("535.129.03", "12.2", 1)
    (gpu,) = snap.gpus
    assert gpu.name == "NVIDIA A10"
    assert gpu.uuid == "GPU-73d12ef7-f589-f867-4259-c7090ab44736"
    assert gpu.pci_bus_id == "0000:07:00.0"
    assert (gpu.memory_total_mib, gpu.memory_used_mib) == (23028, 4)
    assert gpu.remapped_rows_pending is True
    assert (gpu.remapped_rows_correctable, gpu.remapped_rows_uncorrectable) == (0, 4)
    assert gpu.remapped_rows_failure is False
    assert (gpu.ecc_volatile_dbe, gpu.ecc_aggregate_dbe) == (0, 0)  # counters read 0
    assert gpu.recovery_action == "None"  # Reset Required: No, Drain and Reset: N/A
    assert gpu.processes == []


def test_text_8x_h100(corpus_dir: Path) -> None:
    snap = parse(corpus_dir, "text/gpud-8x-h100-535.161.08-q.txt")
    assert snap.attached_gpus == 8 and len(snap.gpus) == 8
    assert [g.pci_bus_id for g in snap.gpus] == [
        "0000:19:00.0",
        "0000:3B:00.0",
        "0000:4C:00.0",
        "0000:5D:00.0",
        "0000:9B:00.0",
        "0000:BB:00.0",
        "0000:CB:00.0",
        "0000:DB:00.0",
    ]
    assert {g.name for g in snap.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert {g.memory_total_mib for g in snap.gpus} == {81559}
    assert {g.mig_mode for g in snap.gpus} == {"Disabled"}
    assert {g.remapped_rows_pending for g in snap.gpus} == {False}
    assert snap.message == ""


def test_text_field_level_unknown_error(corpus_dir: Path) -> None:
    snap = parse(corpus_dir, "text/gpud-8x-rtx4090-535.154.05-q-addressing-mode-unknown-error.txt")
    assert snap.status == "ok" and len(snap.gpus) == 8
    assert all(g.errors == ["Addressing Mode: Unknown Error"] for g in snap.gpus)


def test_text_truncated_dump_says_how_much_is_missing(corpus_dir: Path) -> None:
    snap = parse(corpus_dir, "text/gpud-h100-535.183.01-q-truncated-invalid.txt")
    assert snap.attached_gpus == 8 and len(snap.gpus) == 1
    assert snap.gpus[0].pci_bus_id == "0000:53:00.0"
    assert snap.message == "the output describes 1 of 8 attached GPUs (truncated, or GPUs missing)"


def test_text_processes_and_old_ecc_layout(corpus_dir: Path) -> None:
    (gpu,) = parse(corpus_dir, "text/gpud-titanv-560.35.03-q.txt").gpus
    assert gpu.name == "NVIDIA TITAN V"
    assert [(p["pid"], p["type"], p["name"], p["used_memory_mib"]) for p in gpu.processes] == [
        (100607, "G", "/usr/lib/xorg/Xorg", 142),
        (100838, "G", "/usr/bin/gnome-shell", 33),
        (101815, "G", "/opt/test", 111),
    ]
    assert gpu.ecc_volatile_sbe is None  # Single Bit Total: N/A


# --- captures (several commands concatenated) ------------------------------------------------

CAPTURES = "captures/nvidia_gpu_exporter-linux-x86_64__"


def test_capture_takes_the_newest_q_block_and_mig_profiles_from_list(corpus_dir: Path) -> None:
    snap = parse(corpus_dir, CAPTURES + "nvidia-h100-mig__590.48.01.txt")
    assert (snap.source_format, snap.driver_version, snap.cuda_version) == (
        "text",
        "590.48.01",
        "13.1",
    )
    (gpu,) = snap.gpus
    assert gpu.pci_bus_id == "0000:00:09.0"
    assert gpu.memory_used_mib == 11125  # the "load" -q block, not "idle"
    assert gpu.recovery_action == "None"
    assert [(m["gpu_instance"], m["profile"], m["memory_total_mib"]) for m in gpu.mig_devices] == [
        (2, "3g.40gb", 40448),
        (3, "2g.20gb", 20096),
        (9, "1g.10gb", 9984),
        (10, "1g.10gb", 9984),
    ]
    assert gpu.mig_devices[1]["uuid"] == "MIG-00000001-0000-0000-0000-000000000001"
    assert [
        (p["pid"], p["name"], p["used_memory_mib"], p["gpu_instance"]) for p in gpu.processes
    ] == [
        (21180, "/root/tools/memhog", 2296, 2),
        (21181, "/root/tools/memhog", 1272, 2),
        (21198, "./gpu_burn", 7484, 2),
    ]


def test_capture_h200_mig_compute_instance_profiles(corpus_dir: Path) -> None:
    (gpu,) = parse(corpus_dir, CAPTURES + "nvidia-h200-mig__590.48.01.txt").gpus
    assert gpu.name == "NVIDIA H200" and gpu.memory_total_mib == 143771
    assert [m["profile"] for m in gpu.mig_devices] == [
        "1c.3g.71gb",
        "2c.3g.71gb",
        "2g.35gb",
        "1g.18gb",
        "1g.18gb",
    ]
    assert [m["compute_instance"] for m in gpu.mig_devices] == [0, 1, 0, 0, 0]


def test_capture_610_driver_reports_kmd_version(corpus_dir: Path) -> None:
    snap = parse(corpus_dir, CAPTURES + "nvidia-geforce-rtx-2080-super__610.57.04.txt")
    assert (snap.driver_version, snap.cuda_version) == ("610.57.04", "13.3")


def test_capture_remapped_rows_na_under_mig_and_windows_processes(corpus_dir: Path) -> None:
    (h100,) = parse(corpus_dir, CAPTURES + "nvidia-h100-80gb-hbm3__590.48.01.txt").gpus
    assert (h100.remapped_rows_pending, h100.ecc_mode) == (False, "Enabled")
    win = parse(
        corpus_dir,
        "captures/nvidia_gpu_exporter-windows-x86_64__nvidia-geforce-rtx-2080-super__591.86.txt",
    )
    assert win.gpus[0].pci_bus_id == "0000:0C:00.0"
    assert win.gpus[0].processes[0]["name"] == "C:\\Windows\\System32\\dwm.exe"


# --- table, list, csv ------------------------------------------------------------------------


def test_table_err_in_fan_column(corpus_dir: Path) -> None:
    snap = parse(corpus_dir, "text/gpud-rtx-525.125.06-table-fan-err.txt")
    assert (snap.source_format, snap.driver_version, snap.cuda_version) == (
        "table",
        "525.125.06",
        "12.0",
    )
    (gpu,) = snap.gpus
    assert gpu.errors == ["Fan: ERR!"]
    assert (gpu.memory_used_mib, gpu.memory_total_mib) == (2021, 23028)
    assert gpu.pci_bus_id == "0000:01:00.0" and gpu.ecc_volatile_dbe == 0


def test_table_550_layout(corpus_dir: Path) -> None:
    snap = parse(corpus_dir, "text/gpud-8x-h100-550.90.07-table.txt")
    assert len(snap.gpus) == 8 and snap.gpus[7].pci_bus_id == "0000:DB:00.0"
    assert snap.gpus[3].name == "NVIDIA H100 80GB HBM3"
    assert all(g.processes == [] for g in snap.gpus)


def test_list_forms(corpus_dir: Path) -> None:
    mixed = parse(corpus_dir, "list/4x-a100-one-mig-4x1g.20gb-telegraf-issue.txt")
    assert [len(g.mig_devices) for g in mixed.gpus] == [4, 0, 0, 0]
    assert mixed.gpus[0].mig_devices[3] == {
        "gpu_instance": None,
        "compute_instance": None,
        "profile": "1g.20gb",
        "memory_total_mib": None,
        "memory_used_mib": None,
        "uuid": "MIG-930574a9-d43a-5d2b-95da-3e68384c8d6b",
    }
    seven = parse(corpus_dir, "list/a100-mig-7x1g.10gb-535.216.01-datadog.txt")
    assert {m["profile"] for m in seven.gpus[0].mig_devices} == {"1g.10gb"}
    assert len(seven.gpus[0].mig_devices) == 7
    one_line = parse(corpus_dir, "list/4x-rtx2080ti-open-gpu-kernel-modules-387.txt")
    assert [g.uuid for g in one_line.gpus] == [
        "GPU-67a571b1-79ee-1016-8ea3-c1fff3f1c1d2",
        "GPU-3e34e62f-d88e-f448-415e-be2cbf2c6178",
        "GPU-2d540dd6-583b-cf11-80dd-cc28edc1dd62",
        "GPU-80be5c9a-eb7d-2388-ad7c-7d3ee8f87235",
    ]
    assert {g.name for g in one_line.gpus} == {"NVIDIA GeForce RTX 2080 Ti"}


def test_query_gpu_csv(corpus_dir: Path) -> None:
    snap = parse(corpus_dir, "text/netdata-tesla-p100-query-gpu.csv")
    assert snap.source_format == "csv"
    (gpu,) = snap.gpus
    assert gpu.name == "Tesla P100-PCIE-16GB"
    assert gpu.uuid == "GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6"
    assert gpu.memory_used_mib == 0


# --- error outputs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "status", "lost"),
    [
        ("errors/unable-device-handle-gpu-is-lost-linux.txt", "gpu_lost", ["0000:02:00.0"]),
        (
            "errors/unable-device-handle-gpu-is-lost-windows-wrapped.txt",
            "gpu_lost",
            ["0000:03:00.0"],
        ),
        ("errors/unable-device-handle-no-space-tesla-p4.txt", "unknown_error", ["0000:07:00.0"]),
        ("errors/unable-device-handle-unknown-error-2015.txt", "unknown_error", ["0000:0B:00.0"]),
        (
            "errors/unable-device-handle-unknown-error-2080ti-fell-off-bus.txt",
            "unknown_error",
            ["0000:0B:00.0"],
        ),
        (
            "errors/unable-to-determine-device-handle-unknown-error-gpud-readme.txt",
            "unknown_error",
            ["0000:91:00.0"],
        ),
        ("errors/nvml-driver-library-version-mismatch-570.txt", "nvml_mismatch", []),
        ("errors/nvml-version-mismatch-with-proc-driver-version-580.txt", "nvml_mismatch", []),
        ("errors/nvidia-smi-nvml-version-mismatch-warning.txt", "nvml_mismatch", []),
        (
            "errors/nvidia-smi-failed-communicate-driver-gpu-operator-exit9.txt",
            "driver_unreachable",
            [],
        ),
        ("errors/no-devices-were-found-plain.txt", "no_devices", []),
        ("errors/no-devices-found-rtx5090-with-syslog-rminitadapter.txt", "no_devices", []),
        (
            "errors/nvdebugdump-a10-nvmlDeviceGetHandleByIndex-unknown-error.txt",
            "unknown_error",
            [],
        ),
        (
            "errors/container-toolkit-nvml-unknown-error-after-xid79-gpud-readme.txt",
            "unknown_error",
            [],
        ),
    ],
)
def test_error_outputs(corpus_dir: Path, rel: str, status: str, lost: list[str]) -> None:
    snap = parse(corpus_dir, rel)
    assert (snap.status, snap.lost_pci_ids, snap.gpus) == (status, lost, [])
    assert snap.source_format == "error"
    assert snap.message


def test_error_messages_are_nvidia_smis_own_words(corpus_dir: Path) -> None:
    wrapped = parse(corpus_dir, "errors/unable-device-handle-gpu-is-lost-windows-wrapped.txt")
    assert wrapped.message == (
        "Unable to determine the device handle for GPU 0000:03:00.0: GPU "
        "is lost. Reboot the system to recover this GPU"
    )
    mismatch = parse(corpus_dir, "errors/nvml-driver-library-version-mismatch-570.txt")
    assert mismatch.message == "Failed to initialize NVML: Driver/library version mismatch"
