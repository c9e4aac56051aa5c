"""The Xid/SXid catalog shipped as package data, checked against NVIDIA's catalog."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gputriage.xid import catalog
from gputriage.xid.decode import device_plugin_behaviour, explain_xid


def test_codes_1_to_172_are_all_present_in_order() -> None:
    codes = [x.code for x in catalog.all()]
    assert codes == list(range(1, 173))
    assert catalog.lookup(0) is None
    assert catalog.lookup(173) is None
    assert catalog.lookup(999) is None  # NVML has reported it; not a catalog code


def _doc_rows(shared_dir: Path) -> dict[int, list[str]]:
    text = (shared_dir / "docs" / "xid-catalog.md").read_text(encoding="utf-8")
    table = text.split("## 4. Full Xid table")[1].split("Trigger-condition notes")[0]
    rows = {}
    for line in table.splitlines():
        if re.match(r"^\| \d+ \|", line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[int(cells[0])] = cells
    return rows


def test_every_code_the_research_notes_list_matches_nvidia(shared_dir: Path) -> None:
    rows = _doc_rows(shared_dir)
    assert len(rows) == 172
    for code, cells in rows.items():
        info = catalog.lookup(code)
        assert info is not None, code
        assert info.mnemonic == cells[1], code
        assert info.immediate == (cells[6] if cells[6] != "-" else ""), code
        assert info.xid154_since == cells[8], code


@pytest.mark.parametrize(
    ("code", "mnemonic", "klass", "immediate", "skips"),
    [
        (
            13,
            "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY",
            "application",
            "RESTART_APP",
            True,
        ),
        (31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "application", "RESTART_APP", True),
        (43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "application", "IGNORE", True),
        (45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "sympathetic", "WORKFLOW_XID_45", True),
        (48, "ROBUST_CHANNEL_GPU_ECC_DBE", "memory", "WORKFLOW_XID_48", False),
        (63, "INFOROM_DRAM_RETIREMENT_EVENT", "memory", "IGNORE", False),
        (64, "INFOROM_DRAM_RETIREMENT_FAILURE", "memory", "RESET_GPU", False),
        (74, "NVLINK_ERROR", "nvlink", "WORKFLOW_NVLINK_ERR", False),
        (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "hardware", "RESTART_BM", False),
        (92, "EXCESSIVE_SBE_INTERRUPTS", "memory", "IGNORE", False),
        (94, "ROBUST_CHANNEL_CONTAINED_ERROR", "memory", "RESTART_APP", False),
        (95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "memory", "RESET_GPU", False),
        (119, "GSP_RPC_TIMEOUT", "firmware", "RESET_GPU", False),
        (154, "GPU_RECOVERY_ACTION_CHANGED", "informational", "XID_154", False),
    ],
)
def test_spot_checks(code: int, mnemonic: str, klass: str, immediate: str, skips: bool) -> None:
    info = catalog.lookup(code)
    assert info is not None
    assert (info.mnemonic, info.klass, info.immediate, info.plugin_skips) == (
        mnemonic,
        klass,
        immediate,
        skips,
    )
    assert info.action and info.source.startswith("NV-cat")


def test_xid45_follows_nvidia_not_the_pcie_prefetch_myth() -> None:
    info = catalog.lookup(45)
    assert info is not None
    assert info.description.startswith("Preemptive cleanup, due to previous errors")
    assert "fabricmanager" in info.action
    words = " ".join([info.description, info.action, info.reading]).lower()
    assert "prefetch" not in words and "pcie" not in words


def test_details_of_key_codes() -> None:
    x79, x74, x119, x48 = (catalog.lookup(c) for c in (79, 74, 119, 48))
    assert x79 and x74 and x119 and x48
    assert x79.investigatory == "CONTACT_SUPPORT" and x79.xid154_since == "R565"
    assert "hardware" in x79.legacy_causes and x79.hardware
    assert x74.applies_to == ("A100", "H100")
    assert x119.investigatory == "INVESTIGATE_SW" and not x119.hardware
    assert "525.105.17" in x119.action
    assert x48.legacy_causes == ("hardware",)
    nvl5 = catalog.lookup(149)
    assert nvl5 is not None and nvl5.klass == "nvlink" and "NETIR_LINK_EVT" in nvl5.notes


def test_device_plugin_skip_list() -> None:
    assert catalog.plugin_skipped_xids() == (13, 31, 43, 45, 68, 109)
    assert [x.code for x in catalog.all() if x.plugin_skips] == [13, 31, 43, 45, 68, 109]
    assert device_plugin_behaviour(13).startswith("ignored")
    assert "DP_ENABLE_HEALTHCHECKS=13" in device_plugin_behaviour(13)
    assert device_plugin_behaviour(94).startswith("marks the GPU")
    assert "DP_DISABLE_HEALTHCHECKS=94" in device_plugin_behaviour(94)


def test_every_class_is_declared_and_hardware_classes_are_a_subset() -> None:
    classes = {x.klass for x in catalog.all()}
    assert classes <= set(catalog.CLASSES)
    assert set(catalog.HARDWARE_CLASSES) == {"hardware", "memory", "nvlink"}
    unused = [x.code for x in catalog.all() if x.klass == "unused"]
    assert 1 in unused and 33 in unused and 61 in unused and 79 not in unused


def test_buckets_used_as_single_names_are_explained() -> None:
    for x in catalog.all():
        for bucket in (x.immediate, x.investigatory):
            if re.fullmatch(r"[A-Z0-9_/]+(?: \(sympathetic\))?", bucket):
                assert catalog.bucket_meaning(bucket), (x.code, bucket)
    assert catalog.bucket_meaning("RESTART_BM") == "restart the bare-metal node"
    assert catalog.bucket_meaning("NOT_A_BUCKET") == ""


def test_explain_xid_joins_catalog_and_buckets() -> None:
    x = explain_xid(79)
    assert x is not None
    assert x["immediate_meaning"] == "restart the bare-metal node"
    assert x["class_meaning"] == catalog.CLASSES["hardware"]
    assert x["hardware"] is True
    assert explain_xid(500) is None


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (0, "None"),
        (1, "GPU Reset Required"),
        (2, "Node Reboot Required"),
        (3, "Drain P2P"),
        (4, "Drain and Reset"),
        (99, ""),
    ],
)
def test_recovery_action_names(value: int, name: str) -> None:
    assert catalog.recovery_action_name(value) == name


@pytest.mark.parametrize(
    ("code", "klass", "fatal"),
    [
        (20034, "potentially-fatal", False),
        (12028, "non-fatal", False),
        (20009, "non-fatal", False),
        (24007, "potentially-fatal", False),
        (12020, "always-fatal", True),
        (22003, "always-fatal", True),
        (23017, "always-fatal", True),
        (19084, "always-fatal", True),
    ],
)
def test_sxid_classes(code: int, klass: str, fatal: bool) -> None:
    info = catalog.lookup_sxid(code)
    assert info is not None
    assert (info.klass, info.fatal) == (klass, fatal)
    assert info.action


def test_sxid_lookup_misses_and_names() -> None:
    assert catalog.lookup_sxid(26006) is None  # SOE HALTED: not classed by the guide
    assert catalog.lookup_sxid(79) is None
    sx = catalog.lookup_sxid(20034)
    assert sx is not None and sx.name.startswith("LTSSM Fault Up")
    assert len(catalog.all_sxids()) == len({s.code for s in catalog.all_sxids()})


def test_sources_name_every_tag_used() -> None:
    tags = {t.strip() for x in catalog.all() for t in x.source.split(",")}
    assert tags <= set(catalog.sources())
    assert "docs.nvidia.com" in catalog.sources()["NV-cat"]
