"""Kernel log parser: one test per line format, with lines as the driver prints them.

Lines are verbatim from the public corpus (docs/xid-catalog.md section 9 names their sources)
unless a comment says the line was built from the driver's printf format.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputriage.parsers.kernel import (
    MAX_LINE,
    KernelLogReader,
    KernelRecord,
    Kind,
    iter_lines,
    iter_records,
    normalize_pci,
    parse_line,
    parse_text,
    pod_of_cgroup,
)


def one(line: str) -> KernelRecord:
    rec = parse_line(line)
    assert rec is not None, line
    return rec


# --- Xid lines ------------------------------------------------------------------------------


def test_modern_xid_with_pid_and_name_and_dmesg_T_time() -> None:
    rec = one(
        "[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, "
        "name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU4 GSP! "
        "Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4)."
    )
    assert rec.kind is Kind.XID
    assert (rec.code, rec.pci, rec.pid, rec.process) == (119, "0000:9B:00", "2024380", "nvidia-smi")
    assert rec.message.startswith("Timeout after 6s of waiting for RPC response from GPU4 GSP!")
    assert rec.timestamp == "Sun Feb 23 16:24:18 2025"
    assert rec.time == "2025-02-23T16:24:18"
    assert rec.line == 1 and rec.end_line == 1


def test_unknown_pid_is_unquoted() -> None:
    rec = one(
        "[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, "
        "GPU has fallen off the bus."
    )
    assert (rec.code, rec.pci, rec.pid, rec.process) == (79, "0000:91:00", "<unknown>", "<unknown>")
    assert rec.message == "GPU has fallen off the bus."
    assert rec.timestamp == "6781741.548779" and rec.time == ""


def test_unquoted_unknown_pid_form() -> None:
    # AWS documentation prints pid=<unknown> without quotes.
    rec = one(
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=<unknown>, name=<unknown>, GPU has fallen off the bus."
    )
    assert (rec.pid, rec.process, rec.message) == (
        "<unknown>",
        "<unknown>",
        "GPU has fallen off the bus.",
    )


def test_legacy_id_without_pci_prefix_in_syslog() -> None:
    rec = one(
        "Jan 18 11:38:05 localhost kernel: [ 269.517039] NVRM: Xid (0000:01:00): 3, "
        "C 00000005 SC 00000007 M 00001ffc Data ffffffff"
    )
    assert (rec.code, rec.pci, rec.pid, rec.process) == (3, "0000:01:00", "", "")
    assert rec.message == "C 00000005 SC 00000007 M 00001ffc Data ffffffff"
    assert rec.timestamp == "Jan 18 11:38:05" and rec.time == ""


def test_nvidia_doc_example_old_id_form() -> None:
    rec = one("NVRM: Xid (0000:03:00): 14, Channel 00000001")
    assert (rec.code, rec.pci, rec.message) == (14, "0000:03:00", "Channel 00000001")


def test_pid_without_name() -> None:
    rec = one(
        "NVRM: Xid (PCI:0000:0c:00): 31, pid=11461, Ch 00000053, intr 10000000. MMU Fault: "
        "ENGINE GRAPHICS GPCCLIENT_T1_2 faulted @ 0x0_00000000. Fault is of type FAULT_PDE "
        "ACCESS_TYPE_READ"
    )
    assert (rec.code, rec.pid, rec.process, rec.unit) == (31, "11461", "", "GRAPHICS")
    assert rec.message.startswith("Ch 00000053, intr 10000000.")


def test_no_pid_2015_format() -> None:
    rec = one("[24128.828315] NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000000 intr 00004000")
    assert (rec.code, rec.pid, rec.message) == (32, "", "Channel ID 00000000 intr 00004000")


def test_lowercase_channel_format() -> None:
    rec = one(
        "[1231741.378609] NVRM: Xid (PCI:0009:01:00): 43, pid=3188489, name=trigger_xid, "
        "channel 0x0b00000a"
    )
    assert (rec.code, rec.pci, rec.pid, rec.process, rec.message) == (
        43,
        "0009:01:00",
        "3188489",
        "trigger_xid",
        "channel 0x0b00000a",
    )


def test_process_name_with_brackets_and_colon() -> None:
    rec = one(
        "kernel: [16450076.435595] NVRM: Xid (PCI:0002:00:00): 119, pid=1582259, "
        "name=nvc:[driver], Timeout after 6s of waiting for RPC response from GPU1 GSP! "
        "Expected function 76 (GSP_RM_CONTROL) (0x20802a02 0x8)."
    )
    assert (rec.pci, rec.pid, rec.process) == ("0002:00:00", "1582259", "nvc:[driver]")
    assert rec.timestamp == "16450076.435595"


def test_process_name_with_comma_space() -> None:
    # Built from the driver's format "pid=%s, name=%s, %s" with a comm containing ", ".
    rec = one("NVRM: Xid (PCI:0000:19:00): 94, pid=42, name=a, b, Ch 00000008")
    assert (rec.process, rec.message) == ("a, b", "Ch 00000008")
    rec = one(
        "NVRM: Xid (PCI:0008:01:00): 145, pid=876767, name=ray::WorkerDict, RLW_RXPIPE "
        "Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 "
        "0x00000004)"
    )
    assert rec.process == "ray::WorkerDict"


@pytest.mark.parametrize(
    ("line", "gi", "ci"),
    [
        # Built from kernel_rc.c: "NVRM: Xid (PCI:%04x:%02x:%02x GPU-I:%02u GPU-CI:%02u): %d, ..."
        (
            "NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 43, pid=1234, name=python3, Ch 00000008",
            1,
            2,
        ),
        ("NVRM: Xid (PCI:0000:3b:00 GPU-I:07): 31, pid=1234, name=python3, Ch 00000008", 7, -1),
        ("NVRM: Xid (PCI:0000:3b:00): 31, pid=1234, name=python3, Ch 00000008", -1, -1),
    ],
)
def test_mig_instances(line: str, gi: int, ci: int) -> None:
    rec = one(line)
    assert (rec.pci, rec.gpu_instance, rec.compute_instance, rec.process) == (
        "0000:3B:00",
        gi,
        ci,
        "python3",
    )


def test_nvlink5_fields_with_double_spaces() -> None:
    rec = one(
        "NVRM: Xid (PCI:0008:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 14 "
        "(0x0215c5c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"
    )
    assert (rec.code, rec.pci, rec.unit, rec.severity, rec.link) == (
        149,
        "0008:01:00",
        "NETIR_LINK_EVT",
        "fatal",
        14,
    )
    assert rec.registers == (
        "0x0215c5c6",
        "0x00000000",
        "0x00000000",
        "0x00000000",
        "0x00000000",
        "0x00000000",
    )
    assert rec.pid == ""


def test_nvlink5_with_pid_and_link_minus_one() -> None:
    rec = one(
        "NVRM: Xid (PCI:0008:01:00): 145, pid=11436, name=cache_mgr_main, RLW_SRC_TRACK "
        "Nonfatal XC1 i0 Link 03 (0x040868e2 0x00000008 0x00000000 0x00000000 0x00000000 "
        "0x00000000)"
    )
    assert (rec.pid, rec.process, rec.unit, rec.severity, rec.link) == (
        "11436",
        "cache_mgr_main",
        "RLW_SRC_TRACK",
        "nonfatal",
        3,
    )
    rec = one(
        "NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 "
        "0x00000000 0x00000000 0x00000000 0x00000000)"
    )
    assert (rec.unit, rec.link, rec.registers[0]) == ("NETIR", -1, "0x000fe406")


@pytest.mark.parametrize(
    ("line", "before", "after", "codes"),
    [
        (
            "NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 "
            "(Drain and Reset)",
            "None",
            "Drain and Reset",
            (0, 4),
        ),
        (
            "NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x4 (Drain and Reset) to "
            "0x1 (GPU Reset Required)",
            "Drain and Reset",
            "GPU Reset Required",
            (4, 1),
        ),
        (
            "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 "
            "(Node Reboot Required)",
            "None",
            "Node Reboot Required",
            (0, 2),
        ),
    ],
)
def test_xid154_recovery_actions(
    line: str, before: str, after: str, codes: tuple[int, int]
) -> None:
    rec = one(line)
    assert rec.code == 154
    assert (rec.recovery_from_name, rec.recovery_to_name) == (before, after)
    assert (rec.recovery_from, rec.recovery_to) == codes


def test_xid45_root_cause_suffix() -> None:
    rec = one(
        "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 "
        "caused by previous Xid 149"
    )
    assert (rec.code, rec.pci, rec.caused_by, rec.process) == (45, "0000:DC:00", 149, "python3")


def test_xid13_gpc_tpc_sm_and_dmesg_x_iso_prefix() -> None:
    rec = one(
        "kern  :warn  : 2025-01-21T04:41:44,284616+00:00 NVRM: Xid (PCI:0000:38:00): 13, "
        "pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 10, TPC 1, "
        "SM 1): Out Of Range Address"
    )
    assert (rec.code, rec.gpc, rec.tpc, rec.sm) == (13, 10, 1, 1)
    assert rec.time == "2025-01-21T04:41:44.284616+00:00"
    assert rec.timestamp == "2025-01-21T04:41:44,284616+00:00"


def test_xid74_nvlink_registers() -> None:
    rec = one(
        "[449410.332316] NVRM: Xid (PCI:0003:00:00): 74, pid='<unknown>', name=<unknown>, "
        "NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"
    )
    assert (rec.code, rec.pci, rec.link, rec.severity) == (74, "0003:00:00", 14, "fatal")
    assert rec.registers == ("0x0", "0x0", "0x10000", "0x0", "0x0", "0x0", "0x0")


def test_xid94_contained_unit_and_xid48_63_64_messages() -> None:
    rec = one(
        "[Fri Aug  9 13:32:56 2024] NVRM: Xid (PCI:0000:00:08): 94, pid='<unknown>', "
        "name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No"
    )
    assert (rec.code, rec.unit, rec.time) == (94, "SM", "2024-08-09T13:32:56")
    rec = one(
        "2024-11-15T12:02:03,470068+00:00 NVRM: Xid (PCI:0000:19:00): 48, pid='<unknown>', "
        "name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in "
        "the framebuffer at physAddr 0x12bac1c3e0 partition 2, subpartition 1."
    )
    assert rec.code == 48 and rec.message.startswith("An uncorrectable double bit error")
    rec = one(
        "NVRM: Xid (PCI:0000:0f:00): 64, pid=57530, Row Remapper Error: (0x00000005d28c03a0)"
        " - All reserved rows for bank are remapped"
    )
    assert (rec.code, rec.pid, rec.process) == (64, "57530", "")


def test_legacy_page_retirement_form() -> None:
    # NVIDIA's pre-A100 documentation form "XID 48 ... GPU (<id>)".
    rec = one(
        "XID 48 An uncorrectable double bit error (DBE) has been detected on GPU (0000:01:00)"
    )
    assert (rec.kind, rec.code, rec.pci) == (Kind.XID, 48, "0000:01:00")


def test_device_plugin_nvml_event_line() -> None:
    rec = one(
        "2020/08/10 19:09:42 XidCriticalError: Xid=69 on Device=GPU-7540a9b3-eeb9-1214-1526-"
        "f93c9ea826a8, the device will go unhealthy."
    )
    assert (rec.kind, rec.code, rec.origin) == (Kind.XID, 69, "device-plugin")
    assert rec.device == "GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8"


# --- SXid and Fabric Manager ------------------------------------------------------------------


def test_sxid_fatal_with_link() -> None:
    rec = one(
        "[6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 "
        "LTSSM Fault Up"
    )
    assert (rec.kind, rec.code, rec.pci, rec.device) == (
        Kind.SXID,
        20034,
        "0000:06:00",
        "nvidia-nvswitch1",
    )
    assert (rec.severity, rec.link, rec.detail, rec.first) == ("fatal", 48, "LTSSM Fault Up", False)


def test_sxid_first_flag_and_nonfatal() -> None:
    rec = one(
        "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress "
        "non-posted PRIV error (First)"
    )
    assert (rec.severity, rec.link, rec.detail, rec.first) == (
        "nonfatal",
        32,
        "egress non-posted PRIV error",
        True,
    )


@pytest.mark.parametrize(
    "line",
    [
        "[6781753.404848] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine "
        "instance 60 Sub-engine instance 00",
        "nvidia-nvswitch0: SXid (PCI:0000:a9:00.0): 20034, Data {0x50610002, 0x10100030}",
        "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALT data[0] = 0x               0",
    ],
)
def test_sxid_detail_lines(line: str) -> None:
    rec = one(line)
    assert rec.kind is Kind.SXID_DETAIL and rec.code in (20034, 26006)


def test_sxid_without_link_and_truncated() -> None:
    rec = one("nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALTED")
    assert (rec.kind, rec.pci, rec.severity, rec.link, rec.detail) == (
        Kind.SXID,
        "0004:00:00",
        "",
        -1,
        "SOE HALTED",
    )
    rec = one("[38889.018130] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Li")
    assert (rec.kind, rec.code, rec.severity, rec.link) == (Kind.SXID, 20009, "nonfatal", -1)


def test_fabric_manager_sxid() -> None:
    rec = one(
        "[Dec 19 2024 19:17:49] [ERROR] [tid 1374] detected NVSwitch non-fatal error 12028 "
        "on fid 0 on NVSwitch pci bus id 00000000:83:00.0 physical id 0 port 34"
    )
    assert (rec.kind, rec.code, rec.pci, rec.link, rec.severity, rec.origin) == (
        Kind.SXID,
        12028,
        "0000:83:00",
        34,
        "nonfatal",
        "fabricmanager",
    )
    assert rec.device == "NVSwitch physical id 0"
    assert (rec.timestamp, rec.time) == ("Dec 19 2024 19:17:49", "2024-12-19T19:17:49")


# --- lost GPUs, init failures, GSP, driver loading --------------------------------------------


def test_fallen_off_bus_companion_and_legacy() -> None:
    rec = one("May 18 19:02:39 kernel: NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.")
    assert (rec.kind, rec.pci, rec.timestamp) == (
        Kind.FALLEN_OFF_BUS,
        "0000:2B:00",
        "May 18 19:02:39",
    )
    rec = one(
        "Jan 18 11:38:05 localhost kernel: [ 269.516977] NVRM: GPU at 0000:01:00.0 has "
        "fallen off the bus."
    )
    assert (rec.kind, rec.pci) == (Kind.FALLEN_OFF_BUS, "0000:01:00")


def test_fallen_off_bus_multiline_probe_message_is_one_record() -> None:
    log = parse_text(
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "               NVRM: fallen off the bus and is not responding to commands.\n"
        "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
    )
    lost, probe = log.records
    assert (lost.kind, lost.pci, lost.detail, lost.line, lost.end_line) == (
        Kind.FALLEN_OFF_BUS,
        "0000:B3:00",
        "10de:26b5",
        1,
        3,
    )
    assert lost.message == (
        "The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this "
        "system has fallen off the bus and is not responding to commands."
    )
    assert (probe.kind, probe.line) == (Kind.DRIVER_LOAD, 4)
    assert probe.detail == "the NVIDIA probe routine failed for 1 device(s)"


def test_fallen_off_bus_probe_message_split_into_journal_records() -> None:
    # journalctl prints each printk line with its own prefix: the PCI id comes from line 1.
    log = parse_text(
        "Mar 05 10:11:12 gpu-7 kernel: NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "Mar 05 10:11:12 gpu-7 kernel: NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "Mar 05 10:11:12 gpu-7 kernel: NVRM: fallen off the bus and is not responding to "
        "commands.\n"
    )
    lost = [r for r in log.records if r.kind is Kind.FALLEN_OFF_BUS]
    assert [(r.pci, r.line) for r in lost] == [("0000:B3:00", 3)]


def test_rm_init_adapter_failures() -> None:
    rec = one("[  903.610907] NVRM: GPU 0000:98:00.0: RmInitAdapter failed! (0x62:0x65:1792)")
    assert (rec.kind, rec.pci, rec.detail) == (Kind.RM_INIT_ADAPTER, "0000:98:00", "0x62:0x65:1792")
    rec = one(
        "Dec  2 11:49:53 worker4 kernel: [  885.242457] NVRM: GPU 0000:0a:00.0: "
        "rm_init_adapter failed, device minor number 5"
    )
    assert (rec.kind, rec.pci, rec.detail, rec.timestamp) == (
        Kind.RM_INIT_ADAPTER,
        "0000:0A:00",
        "device minor number 5",
        "Dec 2 11:49:53",
    )
    rec = one("[  903.609564] NVRM: RmInitAdapter: Cannot initialize GSP firmware RM")
    assert (rec.kind, rec.detail) == (Kind.RM_INIT_ADAPTER, "Cannot initialize GSP firmware RM")


@pytest.mark.parametrize(
    ("line", "device", "pci"),
    [
        (
            "[   24.302465] NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs "
            "812751949 heartbeat 1899482 heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200",
            "GPU6",
            "",
        ),
        (
            "Mar 21 21:42:01 kernel: NVRM: GPU0 _kgspRpcRecvPoll: GSP RM heartbeat timed out",
            "GPU0",
            "",
        ),
        (
            "[   84.300488] NVRM: GPU6 _kgspLogRpcTimeout: ********************************* GSP Timeout "
            "**********************************",
            "GPU6",
            "",
        ),
        (
            "[Sun Feb 23 16:24:36 2025] NVRM: Rate limiting GSP RPC error prints for GPU at "
            "PCI:0000:9b:00 (printing 1 of every 30).  The GPU likely needs to be reset.",
            "",
            "0000:9B:00",
        ),
    ],
)
def test_gsp_timeouts(line: str, device: str, pci: str) -> None:
    rec = one(line)
    assert (rec.kind, rec.device, rec.pci) == (Kind.GSP_TIMEOUT, device, pci)


@pytest.mark.parametrize(
    ("line", "detail"),
    [
        ("NVRM: No NVIDIA GPU found.", "no NVIDIA GPU found"),
        ("[  441.170986] NVRM: No NVIDIA graphics adapter found!", "no NVIDIA GPU found"),
        (
            "[  441.171021] NVRM: NVIDIA init module failed!",
            "the nvidia kernel module failed to initialise",
        ),
        (
            "[188549.976351] NVRM: The NVIDIA probe routine was not called for 3 device(s).",
            "the NVIDIA probe routine was not called for 3 device(s): another driver (nouveau?) owns "
            "them",
        ),
        (
            "[ 12.3] nvidia: disagrees about version of symbol module_layout",
            "the nvidia kernel module does not match the running kernel",
        ),
    ],
)
def test_driver_load_errors(line: str, detail: str) -> None:
    rec = one(line)
    assert (rec.kind, rec.detail) == (Kind.DRIVER_LOAD, detail)


def test_nouveau_conflict_continuation_lines_without_timestamps() -> None:
    log = parse_text(
        "[188549.977053] NVRM: This can occur when a driver such as: \n"
        "NVRM: nouveau, rivafb, nvidiafb or rivatv \n"
        "NVRM: was loaded and obtained ownership of the NVIDIA device(s).\n"
        "[188549.978961] NVRM: Try unloading the conflicting kernel module (and/or\n"
        "NVRM: reconfigure your kernel without the conflicting\n"
        "NVRM: driver(s)), then try loading the NVIDIA kernel module\n"
        "NVRM: again.\n"
    )
    assert [(r.kind, r.line, r.end_line) for r in log.records] == [
        (Kind.DRIVER_LOAD, 1, 3),
        (Kind.DRIVER_LOAD, 4, 7),
    ]
    assert log.records[0].detail == (
        "a conflicting driver (nouveau, rivafb, nvidiafb or rivatv) owns the GPU"
    )


def test_api_mismatch_multiline() -> None:
    # The driver's multi-line message (nv.c), as dmesg indents its continuation lines.
    log = parse_text(
        "[ 1234.567890] NVRM: API mismatch: the client has the version 535.129.03, but\n"
        "               NVRM: this kernel module has the version 535.104.12.  Please\n"
        "               NVRM: make sure that this kernel module and all NVIDIA driver\n"
        "               NVRM: components have the same version.\n"
    )
    (rec,) = log.records
    assert rec.kind is Kind.DRIVER_LOAD
    assert rec.detail == (
        "API mismatch between the NVIDIA user-space driver and the kernel module "
        "(client 535.129.03, kernel module 535.104.12)"
    )


def test_open_module_refuses_gpu_without_gsp() -> None:
    log = parse_text(
        "[ 1157.046099] NVRM: The NVIDIA GPU 0000:af:00.0 (PCI ID: 10de:1db5)\n"
        "               NVRM: installed in this system is not supported by open\n"
        "               NVRM: nvidia.ko because it does not include the required GPU\n"
        "               NVRM: System Processor (GSP).\n"
    )
    (rec,) = log.records
    assert (rec.kind, rec.end_line) == (Kind.DRIVER_LOAD, 4)
    assert rec.detail == (
        "GPU 0000:AF:00 is not supported by the open nvidia.ko (no GSP): use the proprietary module"
    )


@pytest.mark.parametrize(
    ("line", "version", "flavour"),
    [
        (
            "[ 1843.439669] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release "
            "Build  (dvs-builder@U22-I3-B10-02-5)  Mon Jun  2 13:13:04 UTC 2025",
            "570.158.01",
            "open",
        ),
        (
            "[Sun Jul 28 09:15:27 2024] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun "
            "May 12 19:39:15 UTC 2024",
            "535.183.01",
            "proprietary",
        ),
        (
            "[ 3793.421343] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  331.113  Mon Dec  1 21:08:13 "
            "PST 2014",
            "331.113",
            "proprietary",
        ),
    ],
)
def test_driver_banner(line: str, version: str, flavour: str) -> None:
    rec = one(line)
    assert (rec.kind, rec.detail, rec.unit) == (Kind.DRIVER_VERSION, version, flavour)


def test_gpu_identity_lines() -> None:
    rec = one(
        "[6781741.548768] NVRM: GPU at PCI:0000:91:00: GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b"
    )
    assert (rec.kind, rec.pci, rec.device) == (
        Kind.GPU_IDENTITY,
        "0000:91:00",
        "GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b",
    )
    rec = one("[6781741.548776] NVRM: GPU Board Serial Number: 1653723052734")
    assert (rec.kind, rec.pci, rec.detail) == (Kind.GPU_IDENTITY, "", "1653723052734")
    rec = one("[6781741.548786] NVRM: GPU 0000:91:00.0: GPU serial number is 1653723052734.")
    assert (rec.pci, rec.detail) == ("0000:91:00", "1653723052734")


def test_peermem_invalid_context() -> None:
    rec = one(
        "2025-01-17T17:39:30+0000 exp03-ft-896z-1-lan.exp03-ft-896z-job-svc kernel: "
        "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, "
        "skipping further processing"
    )
    assert rec.kind is Kind.PEERMEM
    assert (rec.timestamp, rec.time) == ("2025-01-17T17:39:30+0000", "2025-01-17T17:39:30+00:00")
    assert rec.message.startswith("nvidia-peermem nv_get_p2p_free_callback:127 ERROR")


# --- prefixes ------------------------------------------------------------------------------------

_XID = "NVRM: Xid (PCI:0000:3b:00): 43, pid=7, name=x, Ch 00000008"


@pytest.mark.parametrize(
    ("prefix", "timestamp", "time"),
    [
        ("", "", ""),
        ("[ 1843.308145] ", "1843.308145", ""),
        ("[123] ", "123", ""),
        ("[Tue Mar  5 10:11:12 2024] ", "Tue Mar 5 10:11:12 2024", "2024-03-05T10:11:12"),
        (
            "2024-03-05T10:11:12,470068+00:00 ",
            "2024-03-05T10:11:12,470068+00:00",
            "2024-03-05T10:11:12.470068+00:00",
        ),
        ("2024-03-05T10:11:12Z ", "2024-03-05T10:11:12Z", "2024-03-05T10:11:12+00:00"),
        ("kern  :warn  : [ 12.5] ", "12.5", ""),
        ("Mar 05 10:11:12 gpu-node-7 kernel: ", "Mar 05 10:11:12", ""),
        ("Mar  5 10:11:12.123456 gpu-node-7 kernel: [  12.000001] ", "Mar 5 10:11:12.123456", ""),
        (
            "2025-01-17T17:39:30+0000 gpu-node-7 kernel: ",
            "2025-01-17T17:39:30+0000",
            "2025-01-17T17:39:30+00:00",
        ),
        (
            "Tue 2024-03-05 10:11:12 UTC gpu-node-7 kernel: ",
            "Tue 2024-03-05 10:11:12 UTC",
            "2024-03-05T10:11:12+00:00",
        ),
        ("6,3964,206764307,-;", "206.764307", ""),
        ("kernel: ", "", ""),
    ],
)
def test_timestamp_prefixes(prefix: str, timestamp: str, time: str) -> None:
    rec = one(prefix + _XID)
    assert (rec.code, rec.pci, rec.pid, rec.message) == (43, "0000:3B:00", "7", "Ch 00000008")
    assert (rec.timestamp, rec.time) == (timestamp, time)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0000:3b:00", "0000:3B:00"),
        ("PCI:0000:3b:00", "0000:3B:00"),
        ("0000:3b:00.0", "0000:3B:00"),
        ("00000000:3B:00.0", "0000:3B:00"),
        ("3b:00.0", "0000:3B:00"),
        ("10000:01:00.0", "10000:01:00"),
        ("GPU-1234", ""),
        ("", ""),
    ],
)
def test_normalize_pci(text: str, expected: str) -> None:
    assert normalize_pci(text) == expected


# --- what is not a record, and bad input ---------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "6,3964,206764307,-;nvidia-nvswitch2: open (major=510)",
        "I1025 02:19:08.002792       1 health.go:151] Skipping non-nvmlEventTypeXidCriticalError "
        "event: {Device:{Handle:0x7f0dcf40bdf8} EventType:2 EventData:0 GpuInstanceId:4294967295 "
        "ComputeInstanceId:4294967295}",
        "[ 3794.409463] nvidia_uvm: Loaded the UVM driver, major device number 251",
        "[ 1114.993489] IPv6: ADDRCONF(NETDEV_UP): dddd1c3ccc54a5b: link is not ready",
        "[ 12.1] nvme nvme0: 8/0/0 default/read/poll queues; NVMe ready",
    ],
)
def test_lines_that_are_not_gpu_records(line: str) -> None:
    assert parse_line(line) is None


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("", []),
        ("\n\n\n", []),
        ("\x00\x01\x02NVRM\x00Xid\xff", [Kind.OTHER_NVRM]),
        ("NVRM: Xid (PCI:0000:3b:0", [Kind.OTHER_NVRM]),
        ("NVRM: Xid (PCI:0000:3b:00): ", [Kind.OTHER_NVRM]),
        ("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): ", []),
        ("NVRM: GPU 0000:98:00.0: RmInitAdapter failed! (0x62:0x6", [Kind.RM_INIT_ADAPTER]),
        ("NVRM: Xid (PCI:0000:3b:00): 7", [Kind.XID]),
    ],
)
def test_bad_input_never_raises(text: str, kinds: list[Kind]) -> None:
    log = parse_text(text)
    assert log.lines_scanned == len(text.splitlines())
    assert [r.kind for r in log.records] == kinds


def test_truncated_154_line_keeps_the_xid_without_a_recovery_action() -> None:
    rec = one("NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x")
    assert (rec.kind, rec.code, rec.recovery_to) == (Kind.XID, 154, -1)


def test_oversized_line_is_read_through_its_first_max_line_characters() -> None:
    line = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, " + "x" * 1_000_000
    rec = one(line)
    assert rec.code == 79 and len(rec.text) == MAX_LINE


def test_million_junk_lines_stream_to_nothing() -> None:
    junk = "[12.5] IPv6: ADDRCONF(NETDEV_CHANGE): cali0f0e2a5ff4c: link becomes ready\n"
    reader = KernelLogReader()
    found = list(reader.records(junk for _ in range(1_000_000)))
    assert found == [] and reader.lines_scanned == 1_000_000


def test_records_stream_from_any_iterable_of_lines() -> None:
    lines = iter(
        [
            "noise",
            "[ 1.0] NVRM: Xid (PCI:0000:01:00): 31, Ch 00000009, engmask 00000101, intr 10000000",
            "noise",
        ]
    )
    assert [(r.code, r.line) for r in iter_records(lines)] == [(31, 2)]


_SEPARATORS = st.sampled_from(
    ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "x", "NVRM: ", " "]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_SEPARATORS, max_size=40).map("".join))
def test_iter_lines_numbers_lines_like_splitlines(text: str) -> None:
    assert list(iter_lines(text)) == text.splitlines()


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_parse_text_never_raises_on_arbitrary_text(text: str) -> None:
    log = parse_text(text)
    assert log.lines_scanned == len(text.splitlines())
    assert all(0 < r.line <= log.lines_scanned for r in log.records)


# --- the kernel OOM killer (only with oom_kills=True) -------------------------------------------
# Lines built from mm/oom_kill.c's printk formats (dump_oom_summary, __oom_kill_process; the
# "Kill process ... or sacrifice child" wording is from kernels before 4.19).

UID = "0b4f6e1c-6a3e-4c55-9d1e-0123456789ab"
CID = "3fc28fa1c647ceede9f6b340d0b16c9f1f663698972d22a52e296f291638e014"
MEMCG_SYSTEMD = (
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
    f"{UID.replace('-', '_')}.slice/cri-containerd-{CID}.scope"
)
OOM_LOG = f"""\
[Tue Mar  4 02:11:09 2025] python invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=-997
[Tue Mar  4 02:11:09 2025] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=cri-containerd-{CID}.scope,mems_allowed=0-1,oom_memcg={MEMCG_SYSTEMD},task_memcg={MEMCG_SYSTEMD},task=pt_data_worker,pid=4242,uid=0
[Tue Mar  4 02:11:09 2025] Memory cgroup out of memory: Killed process 4242 (pt_data_worker) total-vm:35624912kB, anon-rss:16745684kB, file-rss:76420kB, shmem-rss:12kB, UID:0 pgtables:33460kB oom_score_adj:-997
[Tue Mar  4 02:11:10 2025] oom_reaper: reaped process 4242 (pt_data_worker), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB
[Tue Mar  4 03:00:00 2025] Out of memory: Kill process 7007 (python3) score 1990 or sacrifice child
[Tue Mar  4 03:00:00 2025] Killed process 7007 (python3) total-vm:22872336kB, anon-rss:8124016kB, file-rss:0kB, shmem-rss:0kB
"""


def oom_records(text: str) -> list[KernelRecord]:
    return [
        r
        for r in KernelLogReader(oom_kills=True).records(iter_lines(text))
        if r.kind is Kind.OOM_KILL
    ]


def test_oom_killer_lines_are_records_only_when_asked() -> None:
    assert [r for r in parse_text(OOM_LOG).records if r.kind is Kind.OOM_KILL] == []
    recs = oom_records(OOM_LOG)
    assert [(r.line, r.unit, r.pid, r.process, r.detail, r.rss_kb) for r in recs] == [
        (2, "cgroup", "4242", "pt_data_worker", "CONSTRAINT_MEMCG", -1),
        (3, "cgroup", "4242", "pt_data_worker", "", 16745684),
        (5, "node", "7007", "python3", "", -1),
        (6, "", "7007", "python3", "", 8124016),
    ]
    assert recs[0].cgroup == MEMCG_SYSTEMD and recs[0].time == "2025-03-04T02:11:09"


@pytest.mark.parametrize(
    ("line", "unit", "pid", "process"),
    [
        ("Out of memory: Killed process 123, UID 48, (httpd).", "node", "123", "httpd"),
        (
            "Memory cgroup out of memory: Killed process 9 (sd-pam (x)) total-vm:1kB",
            "cgroup",
            "9",
            "sd-pam (x)",
        ),
        (
            "Out of memory (oom_kill_allocating_task): Killed process 55 (java) total-vm:10kB",
            "node",
            "55",
            "java",
        ),
        (
            "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
            "task_memcg=/kubepods/besteffort/pod"
            + UID
            + "/"
            + CID
            + ",task=python,pid=77,uid=1000",
            "node",
            "77",
            "python",
        ),
        ("oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),", "cgroup", "", ""),
    ],
)
def test_oom_kill_line_forms(line: str, unit: str, pid: str, process: str) -> None:
    (rec,) = oom_records(f"[ 1843.308145] {line}")
    assert (rec.unit, rec.pid, rec.process) == (unit, pid, process)


@pytest.mark.parametrize(
    "line",
    [
        "oom-kill:constraint=OTHER_CONSTRAINT",
        "oom_reaper: reaped process 345646 (vector), now anon-rss:0kB, file-rss:0kB, shmem-rss:0",
        "python invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
        "systemd[1]: Killed process tree of session 4.",
    ],
)
def test_lines_that_are_not_oom_kills(line: str) -> None:
    assert oom_records(line) == []


@pytest.mark.parametrize(
    ("path", "uid", "cid"),
    [
        (MEMCG_SYSTEMD, UID, CID),
        (f"/kubepods/burstable/pod{UID}/{CID}", UID, CID),
        (f"/kubepods/pod{UID.upper()}/crio-{CID}.scope", UID, CID),
        (f"/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice", UID, ""),
        ("/system.slice/containerd.service", "", ""),
        ("", "", ""),
    ],
)
def test_pod_and_container_of_a_cgroup(path: str, uid: str, cid: str) -> None:
    assert pod_of_cgroup(path) == (uid, cid)
