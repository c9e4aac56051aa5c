"""nvidia-smi parsing: format detection, error forms, hostile input (no corpus needed)."""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputriage.parsers.gpu_record import GpuSnapshot
from gputriage.parsers.nvidia_smi import parse_nvidia_smi
from gputriage.parsers.nvidia_smi_values import normalize_pci, to_bool, to_mib, to_version

STATUSES = {
    "ok",
    "gpu_lost",
    "unknown_error",
    "nvml_mismatch",
    "driver_unreachable",
    "no_devices",
    "unparsed",
}

# A v12-schema dump of one degraded A100: remap pending, DBEs, a recovery action, one process.
DEGRADED_XML = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
    <driver_version>535.161.08</driver_version>
    <cuda_version>12.2</cuda_version>
    <attached_gpus>2</attached_gpus>
    <gpu id="00000000:3b:00.0">
        <product_name>NVIDIA A100-SXM4-80GB</product_name>
        <mig_mode><current_mig>Disabled</current_mig><pending_mig>Disabled</pending_mig></mig_mode>
        <uuid>GPU-aaaaaaaa-1111-2222-3333-444444444444</uuid>
        <gpu_recovery_action>Drain and Reset</gpu_recovery_action>
        <pci><pci_bus_id>00000000:3B:00.0</pci_bus_id></pci>
        <fb_memory_usage><total>81920 MiB</total><used>80512 MiB</used></fb_memory_usage>
        <ecc_mode><current_ecc>Enabled</current_ecc></ecc_mode>
        <ecc_errors>
            <volatile>
                <sram_correctable>0</sram_correctable>
                <sram_uncorrectable>0</sram_uncorrectable>
                <dram_correctable>12</dram_correctable>
                <dram_uncorrectable>2</dram_uncorrectable>
            </volatile>
            <aggregate>
                <sram_correctable>1</sram_correctable>
                <sram_uncorrectable_parity>0</sram_uncorrectable_parity>
                <sram_uncorrectable_secded>1</sram_uncorrectable_secded>
                <dram_correctable>40</dram_correctable>
                <dram_uncorrectable>6</dram_uncorrectable>
            </aggregate>
        </ecc_errors>
        <retired_pages>
            <multiple_single_bit_retirement><retired_count>N/A</retired_count>
            </multiple_single_bit_retirement>
            <double_bit_retirement><retired_count>N/A</retired_count></double_bit_retirement>
            <pending_blacklist>N/A</pending_blacklist>
            <pending_retirement>N/A</pending_retirement>
        </retired_pages>
        <remapped_rows>
            <remapped_row_corr>3</remapped_row_corr>
            <remapped_row_corr_inactive>9</remapped_row_corr_inactive>
            <remapped_row_unc>5</remapped_row_unc>
            <remapped_row_unc_inactive>7</remapped_row_unc_inactive>
            <remapped_row_pending>Yes</remapped_row_pending>
            <remapped_row_failure>Yes</remapped_row_failure>
        </remapped_rows>
        <addressing_mode>Unknown Error</addressing_mode>
        <processes>
            <process_info>
                <gpu_instance_id>N/A</gpu_instance_id>
                <compute_instance_id>N/A</compute_instance_id>
                <pid>4242</pid>
                <type>C</type>
                <process_name>python3</process_name>
                <used_memory>80000 MiB</used_memory>
            </process_info>
        </processes>
    </gpu>
    <gpu id="00000000:5E:00.0">
        <product_name>NVIDIA A100-SXM4-80GB</product_name>
        <uuid>GPU-bbbbbbbb-1111-2222-3333-444444444444</uuid>
        <fb_memory_usage><total>81920 MiB</total><used>4 MiB</used></fb_memory_usage>
        <retired_pages><pending_retirement>Yes</pending_retirement></retired_pages>
        <remapped_rows>N/A</remapped_rows>
        <processes></processes>
    </gpu>
</nvidia_smi_log>
"""


def test_xml_degraded_gpu_fields() -> None:
    snap = parse_nvidia_smi(DEGRADED_XML)
    assert (snap.status, snap.source_format, snap.driver_version) == ("ok", "xml", "535.161.08")
    bad, other = snap.gpus
    assert bad.pci_bus_id == "0000:3B:00.0" and other.pci_bus_id == "0000:5E:00.0"
    assert (bad.ecc_volatile_sbe, bad.ecc_volatile_dbe) == (12, 2)
    assert (bad.ecc_aggregate_sbe, bad.ecc_aggregate_dbe) == (41, 7)  # SRAM + DRAM
    # The *_inactive counters are separate fields and must not leak into the active ones.
    assert (bad.remapped_rows_correctable, bad.remapped_rows_uncorrectable) == (3, 5)
    assert (bad.remapped_rows_pending, bad.remapped_rows_failure) == (True, True)
    assert bad.recovery_action == "Drain and Reset"
    assert bad.mig_mode == "Disabled" and bad.ecc_mode == "Enabled"
    assert bad.errors == ["addressing_mode: Unknown Error"]
    assert bad.processes == [
        {
            "pid": 4242,
            "name": "python3",
            "type": "C",
            "used_memory_mib": 80000,
            "gpu_instance": None,
            "compute_instance": None,
        }
    ]
    assert other.retired_pages_pending is True
    assert other.remapped_rows_pending is None and other.recovery_action is None


def test_snapshot_survives_the_nvml_dict_round_trip() -> None:
    snap = parse_nvidia_smi(DEGRADED_XML)
    again = GpuSnapshot.from_dict(snap.to_dict())
    assert again == snap


def test_xml_truncated_keeps_complete_gpus() -> None:
    cut = DEGRADED_XML[: DEGRADED_XML.index('<gpu id="00000000:5E') + 60]
    snap = parse_nvidia_smi(cut)
    assert snap.status == "unparsed"
    assert [g.pci_bus_id for g in snap.gpus] == ["0000:3B:00.0"]
    assert "truncated or malformed" in snap.message and "1 complete <gpu>" in snap.message
    assert snap.driver_version == "535.161.08"


def test_xml_with_entities_is_refused() -> None:
    bomb = (
        '<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [\n <!ENTITY a "aaaaaaaaaa">\n'
        ' <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">\n <!ENTITY c "&b;&b;&b;&b;&b;&b;">\n'
        "]>\n<nvidia_smi_log><driver_version>&c;</driver_version></nvidia_smi_log>"
    )
    snap = parse_nvidia_smi(bomb)
    assert snap.status == "unparsed"
    assert "<!ENTITY" in snap.message
    assert snap.driver_version is None


def test_xml_after_a_shell_prompt_and_with_trailing_noise() -> None:
    text = "root@gpu-7:~# nvidia-smi -q -x\n" + DEGRADED_XML + "root@gpu-7:~# exit\n"
    snap = parse_nvidia_smi(text)
    assert snap.status == "ok" and len(snap.gpus) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty output"),
        ("   \n\t\n", "empty output"),
        ("\x00\x01\x02ELF\x00" * 200, "binary data, not nvidia-smi output"),
    ],
)
def test_empty_and_binary(text: str, message: str) -> None:
    snap = parse_nvidia_smi(text)
    assert (snap.status, snap.message, snap.gpus) == ("unparsed", message, [])


@pytest.mark.timeout(120)
def test_fifty_megabytes_of_junk_is_unparsed_not_slow() -> None:
    rnd = random.Random(7)
    alphabet = string.ascii_letters + string.digits + " :|\n"
    block = "".join(rnd.choice(alphabet) for _ in range(1 << 20))
    junk = block * 50
    assert len(junk) == 50 * (1 << 20)
    snap = parse_nvidia_smi(junk)
    assert snap.status == "unparsed"
    assert snap.message.startswith("not recognisable nvidia-smi output")


@pytest.mark.timeout(120)
def test_fifty_megabytes_of_near_misses() -> None:
    # Lines that start like real formats but never complete one.
    junk = "GPU 0: NVIDIA (UUID: \n| NVIDIA-SMI x |\n<nvidia_smi_lo\n" * 900_000
    snap = parse_nvidia_smi(junk)
    assert snap.status == "unparsed" and snap.gpus == []


LOST_LINE = (
    "Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  Reboot "
    "the system to recover this GPU\n"
)
LOST_TABLE = (
    LOST_LINE
    + """\
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.129.03             Driver Version: 535.129.03   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |                    0 |
| N/A   33C    P0              61W / 400W |  52011MiB / 81920MiB |     94%      Default |
|                                         |                      |             Disabled |
+-----------------------------------------+----------------------+----------------------+

+---------------------------------------------------------------------------------------+
| Processes:                                                                            |
|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |
|        ID   ID                                                             Usage      |
|=======================================================================================|
|    0   N/A  N/A   1866331      C   python train.py --epochs 10               52002MiB |
+---------------------------------------------------------------------------------------+
"""
)


def test_lost_gpu_next_to_a_healthy_table() -> None:
    snap = parse_nvidia_smi(LOST_TABLE)
    assert snap.status == "gpu_lost"
    assert snap.lost_pci_ids == ["0000:3B:00.0"]
    assert [g.pci_bus_id for g in snap.gpus] == ["0000:07:00.0"]
    assert snap.gpus[0].processes == [
        {
            "pid": 1866331,
            "name": "python train.py --epochs 10",
            "type": "C",
            "used_memory_mib": 52002,
            "gpu_instance": None,
            "compute_instance": None,
        }
    ]
    assert "GPU 0000:3B:00.0: GPU is lost" in snap.message


def test_table_with_err_everywhere_and_old_process_columns() -> None:
    table = """\
| NVIDIA-SMI 418.87.01    Driver Version: 418.87.01    CUDA Version: 10.1     |
|===============================+======================+======================|
|   0  ERR!                ERR!  | 00000000:3B:00.0 ERR! |                 ERR! |
|ERR!  ERR! ERR!    ERR! / ERR! |    ERR!MiB /  ERR!MiB |    ERR!      Default |
+-------------------------------+----------------------+----------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
|    0     31337      C   /usr/bin/python                            1234MiB |
+-----------------------------------------------------------------------------+
"""
    snap = parse_nvidia_smi(table)
    (gpu,) = snap.gpus
    assert gpu.pci_bus_id == "0000:3B:00.0"
    assert "Fan: ERR!" in gpu.errors and "Volatile Uncorr. ECC: ERR!" in gpu.errors
    assert "Memory-Usage: ERR!" in gpu.errors
    assert gpu.memory_total_mib is None and gpu.ecc_volatile_dbe is None
    assert gpu.processes[0]["pid"] == 31337 and gpu.processes[0]["used_memory_mib"] == 1234


def test_query_with_zero_gpus_is_no_devices() -> None:
    text = (
        "==============NVSMI LOG==============\n\nDriver Version : 550.54.15\n"
        "CUDA Version : 12.4\n\nAttached GPUs : 0\n"
    )
    snap = parse_nvidia_smi(text)
    assert (snap.status, snap.driver_version, snap.gpus) == ("no_devices", "550.54.15", [])


def test_query_text_and_list_pasted_together_fill_mig_profiles() -> None:
    text = """\
$ nvidia-smi -L
GPU 0: NVIDIA A30 (UUID: GPU-12121212-3434-5656-7878-909090909090)
  MIG 2g.12gb     Device  0: (UUID: MIG-aaaa0000-0000-0000-0000-000000000000)
  MIG 1g.6gb      Device  1: (UUID: MIG-bbbb0000-0000-0000-0000-000000000000)
$ nvidia-smi -q

==============NVSMI LOG==============

Driver Version                            : 550.90.07
Attached GPUs                             : 1
GPU 00000000:41:00.0
    Product Name                          : NVIDIA A30
    MIG Mode
        Current                           : Enabled
        Pending                           : Enabled
    MIG Device
        Index                             : 0
        GPU Instance ID                   : 1
        Compute Instance ID               : 0
        Shared FB Memory Usage
            Total                         : 11968 MiB
            Used                          : 13 MiB
    MIG Device
        Index                             : 1
        GPU Instance ID                   : 5
        Compute Instance ID               : 0
        Shared FB Memory Usage
            Total                         : 5952 MiB
            Used                          : 7 MiB
    GPU UUID                              : GPU-12121212-3434-5656-7878-909090909090
    Remapped Rows                         : N/A
    GPU Recovery Action                   : Reset
    Processes                             : None
"""
    snap = parse_nvidia_smi(text)
    (gpu,) = snap.gpus
    assert snap.source_format == "text"
    assert [(m["gpu_instance"], m["profile"], m["memory_total_mib"]) for m in gpu.mig_devices] == [
        (1, "2g.12gb", 11968),
        (5, "1g.6gb", 5952),
    ]
    assert gpu.mig_devices[1]["uuid"] == "MIG-bbbb0000-0000-0000-0000-000000000000"
    assert gpu.recovery_action == "Reset" and gpu.processes == []
    assert gpu.remapped_rows_pending is None


def test_csv_with_units_and_missing_values() -> None:
    csv_text = (
        "index, name, pci.bus_id, memory.total [MiB], memory.used [MiB], "
        "remapped_rows.pending, gpu_recovery_action, driver_version\n"
        "0, NVIDIA H100 80GB HBM3, 00000000:1B:00.0, 81559 MiB, 40000 MiB, Yes, Reset, "
        "550.54.15\n"
        "1, NVIDIA H100 80GB HBM3, 00000000:43:00.0, 81559 MiB, [N/A], No, None, "
        "550.54.15\n"
    )
    snap = parse_nvidia_smi(csv_text)
    assert snap.source_format == "csv" and snap.driver_version == "550.54.15"
    first, second = snap.gpus
    assert (first.index, first.pci_bus_id, first.memory_used_mib) == (0, "0000:1B:00.0", 40000)
    assert (first.remapped_rows_pending, first.recovery_action) == (True, "Reset")
    assert (second.index, second.memory_used_mib, second.remapped_rows_pending) == (1, None, False)


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("Failed to initialize NVML: Unknown Error", "unknown_error"),
        ("Failed to initialize NVML: Insufficient Permissions", "unknown_error"),
        (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
            "that the latest NVIDIA driver is installed and running.",
            "driver_unreachable",
        ),
        (
            "nvidia-container-cli: initialization error: nvml error: driver not loaded",
            "driver_unreachable",
        ),
        ("No devices were found", "no_devices"),
        (
            "Unable to determine the device handle for GPU 0000:C1:00.0: GPU is lost.  Reboot the "
            "system to recover this GPU\nUnable to determine the device handle for GPU 0000:C2:00.0: "
            "Unknown Error",
            "gpu_lost",
        ),
        ("bash: nvidia-smi: command not found", "unparsed"),
        ("| NVIDIA-SMI 535.54.03   Driver Version: 535.54.03   CUDA Version: 12.2 |\n", "unparsed"),
    ],
)
def test_error_texts(text: str, status: str) -> None:
    assert parse_nvidia_smi(text).status == status


def test_several_lost_gpus_are_all_named() -> None:
    text = (
        "Unable to determine the device handle for GPU 0000:C1:00.0: GPU is lost.\n"
        "Unable to determine the device handle for GPU0000:c2:00.0: Unknown Error\n"
        "Unable to determine the device handle for GPU 0000:C1:00.0: GPU is lost.\n"
    )
    snap = parse_nvidia_smi(text)
    assert snap.lost_pci_ids == ["0000:C1:00.0", "0000:C2:00.0"]
    assert snap.status == "gpu_lost"


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("00000000:3b:00.0", "0000:3B:00.0"),
        ("0000:3B:00.0", "0000:3B:00.0"),
        ("3b:00.0", "0000:3B:00.0"),
        ("00000008:01:00.0", "0008:01:00.0"),
        ("0001000A:01:00.0", "0001000A:01:00.0"),
        ("not-a-pci-id", "NOT-A-PCI-ID"),
        ("", ""),
    ],
)
def test_normalize_pci(raw: str, norm: str) -> None:
    assert normalize_pci(raw) == norm


def test_value_helpers() -> None:
    assert to_mib("1.5 GiB") == 1536 and to_mib("2021MiB") == 2021 and to_mib("[N/A]") is None
    assert to_mib("Requested functionality has been deprecated") is None
    assert (to_bool("Yes"), to_bool("No"), to_bool("N/A")) == (True, False, None)
    assert to_version("610.57.04 [Deprecated; will be removed in CUDA 14.0.]") == "610.57.04"


_FRAGMENTS = [
    "GPU 0: ",
    "(UUID: GPU-",
    ")",
    "<nvidia_smi_log>",
    "</nvidia_smi_log>",
    '<gpu id="',
    '">',
    "</gpu>",
    "NVSMI LOG",
    "| NVIDIA-SMI 1.2 Driver Version: 3.4 |",
    "Unable to determine the device handle for GPU ",
    "0000:3B:00.0",
    ": ",
    "\n",
    "    ",
    " : ",
    "MiB",
    "Yes",
    "N/A",
    "ERR!",
    "|",
    "Unknown Error",
    "MIG 1g.5gb ",
    "Device 0: ",
    "Attached GPUs",
    "Process ID",
    "Remapped Rows",
    "Pending",
    "x",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=80).map("".join))
def test_parser_never_raises(text: str) -> None:
    snap = parse_nvidia_smi(text)
    assert snap.status in STATUSES
    assert "internal" not in snap.message
