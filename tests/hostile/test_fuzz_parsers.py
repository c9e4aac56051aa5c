"""Every parser, fed mutated real documents and random text: no exception, well-formed output.

Each property draws from :mod:`tests.hostile.strategies` (real corpus-shaped documents,
mutated; lines spliced from real documents; random text) and checks the parser's promise:
it never raises, and what it returns is plain data with line numbers inside the text,
non-negative counts and int64-sized integers (:mod:`tests.hostile.wellformed`).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputriage.evidence.bundle import EXPECTED_KIND, decode
from gputriage.evidence.model import DESCRIPTIONS, Evidence, Key, Status
from gputriage.parsers.container_log import scan_container_log
from gputriage.parsers.describe import parse_pod_describe
from gputriage.parsers.device_plugin import parse_device_plugin_log
from gputriage.parsers.host import parse_containerd_config, parse_dev_nvidia, parse_lsmod
from gputriage.parsers.journal import parse_kubelet_journal
from gputriage.parsers.kernel import MAX_LINE, Kind, parse_text
from gputriage.parsers.nvidia_smi import parse_nvidia_smi
from gputriage.parsers.scheduler import GENERATIONS, KINDS, parse_scheduler_message
from tests.hostile.budget import fuzz
from tests.hostile.seeds import DESCRIBE, SCHEDULER
from tests.hostile.strategies import hostile_bytes, hostile_text
from tests.hostile.wellformed import check_plain, line_count

SNAPSHOT_STATUSES = {
    "ok",
    "no_devices",
    "driver_unreachable",
    "gpu_lost",
    "nvml_mismatch",
    "unknown_error",
    "unparsed",
}
SNAPSHOT_FORMATS = {"", "xml", "text", "table", "list", "csv", "error", "nvml"}
PCI = re.compile(r"^[0-9A-F]{4,8}:[0-9A-F]{2}:[0-9A-F]{2}$")
PCI_FULL = re.compile(r"^[0-9A-F]{4,8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]$")


@fuzz()
@given(hostile_text(Key.DMESG.value))
def test_kernel_log(text: str) -> None:
    log = parse_text(text)
    check_plain(log, "kernel", max_line=line_count(text))
    assert 0 <= log.lines_scanned <= line_count(text)
    for r in log.records:
        assert isinstance(r.kind, Kind)
        assert 1 <= r.line <= max(r.end_line, r.line) <= line_count(text), r
        assert len(r.text) <= MAX_LINE
        assert r.code >= 0 and r.caused_by >= 0
        assert r.pci == "" or PCI.match(r.pci), r.pci


@fuzz()
@given(hostile_text(Key.NVIDIA_SMI.value))
def test_nvidia_smi_xml_and_text(text: str) -> None:
    snap = parse_nvidia_smi(text)
    check_plain(snap, "nvidia-smi")
    assert snap.status in SNAPSHOT_STATUSES
    assert snap.source_format in SNAPSHOT_FORMATS, snap.source_format
    assert snap.attached_gpus is None or snap.attached_gpus >= 0
    for pci in snap.lost_pci_ids:
        assert PCI_FULL.match(pci) or PCI.match(pci), pci
    for gpu in snap.gpus:
        assert gpu.index >= 0
        assert gpu.pci_bus_id == "" or gpu.pci_bus_id == gpu.pci_bus_id.upper()
        for name in (
            "memory_total_mib",
            "memory_used_mib",
            "ecc_volatile_sbe",
            "ecc_volatile_dbe",
            "ecc_aggregate_sbe",
            "ecc_aggregate_dbe",
            "retired_pages_sbe",
            "retired_pages_dbe",
            "remapped_rows_correctable",
            "remapped_rows_uncorrectable",
        ):
            value = getattr(gpu, name)
            assert value is None or value >= 0, f"{name} = {value}"


@fuzz()
@given(
    hostile_text(Key.KUBELET_LOG.value),
    st.sampled_from(["", "ml"]),
    st.sampled_from(["", "trainer-0", "case-pod", "[x]"]),
    st.sampled_from(["", "6b1f0a6e-2f8e-4b8a-9d53-0c4a4c6f1b2e"]),
)
def test_kubelet_journal(text: str, namespace: str, pod: str, uid: str) -> None:
    journal = parse_kubelet_journal(text, namespace=namespace, pod=pod, uid=uid)
    check_plain(journal, "kubelet", max_line=line_count(text))
    assert journal.lines_scanned <= line_count(text)


@fuzz()
@given(hostile_text(Key.DEVICE_PLUGIN_LOG.value))
def test_device_plugin_log(text: str) -> None:
    log = parse_device_plugin_log(text)
    check_plain(log, "device-plugin", max_line=line_count(text))
    assert all(x >= 0 for x in log.skipped_xids)
    assert all(d.xid >= 0 for d in log.unhealthy)


@fuzz()
@given(hostile_text(SCHEDULER))
def test_scheduler_message(text: str) -> None:
    msg = parse_scheduler_message(text)
    check_plain(msg, "scheduler")
    assert msg.raw == text
    assert msg.generation in ("", *GENERATIONS)
    assert msg.scheduler in ("", "kube-scheduler", "cluster-autoscaler", "kai-scheduler")
    for reason in msg.reasons:
        assert reason.kind in KINDS, reason
    assert all(n >= 0 for n in msg.insufficient().values())


@fuzz()
@given(hostile_text(DESCRIBE))
def test_pasted_describe_text(text: str) -> None:
    pod, events = parse_pod_describe(text)
    check_plain(pod, "pod", max_line=line_count(text))
    check_plain(events, "events", max_line=line_count(text))
    for event in events:
        assert 1 <= event["_line"] <= line_count(text)


@fuzz()
@given(hostile_text(Key.CONTAINER_LOG.value))
def test_container_log(text: str) -> None:
    scan = scan_container_log(text)
    check_plain(scan, "container-log", max_line=line_count(text))
    assert all(n >= 1 for n in scan.counts.values())
    assert sum(scan.counts.values()) >= len(scan.matches)
    assert all(len(m.text) <= 2000 for m in scan.matches)


@fuzz()
@given(
    hostile_text(Key.LSMOD.value),
    hostile_text(Key.DEV_NVIDIA.value),
    hostile_text(Key.CONTAINERD_CONFIG.value),
)
def test_host_files(lsmod: str, dev: str, toml: str) -> None:
    check_plain(parse_lsmod(lsmod), "lsmod")
    check_plain(parse_dev_nvidia(dev), "dev-nvidia")
    config = parse_containerd_config(toml)
    check_plain(config, "containerd")
    assert config.version is None or config.version >= 0


@pytest.mark.parametrize("key", list(Key), ids=lambda k: k.value)
def test_bundle_decode_every_key(key: Key) -> None:
    @fuzz(0.5)
    @given(hostile_bytes(key.value))
    def decode_is_total(blob: bytes) -> None:
        ev = decode(key, blob, source=f"fuzz/{key.value}")
        assert isinstance(ev, Evidence) and ev.key is key
        assert ev.status in (Status.OK, Status.ERROR), ev.status
        assert ev.detail and isinstance(ev.detail, str)
        assert ev.source == f"fuzz/{key.value}"
        if ev.status is Status.ERROR:
            return
        assert ev.raw, "OK evidence with no text"
        if key in EXPECTED_KIND:
            assert isinstance(ev.data, dict), type(ev.data)
            if EXPECTED_KIND[key].endswith("List"):
                assert isinstance(ev.data.get("items"), list)
                assert all(isinstance(i, dict) for i in ev.data["items"])
            elif ev.format != "describe":
                assert ev.data.get("kind") == EXPECTED_KIND[key]
        else:
            assert ev.data is None and ev.format in ("text", "xml")

    assert DESCRIPTIONS[key]
    decode_is_total()


@pytest.mark.parametrize(
    "nested", ["a = " + "[" * 5000 + "]" * 5000, "a = " + "{b = " * 5000 + "1" + "}" * 5000]
)
def test_containerd_config_nested_past_the_recursion_limit_is_a_named_problem(nested: str) -> None:
    config = parse_containerd_config(nested)
    assert config.problem.startswith("invalid TOML")
