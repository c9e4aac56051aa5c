"""The ``gpus`` fact group: values, unknowns, citations, and CEL over real evidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gputriage.evidence.bundle import decode
from gputriage.evidence.model import Evidence, EvidenceSet, Key, Status
from gputriage.facts import gpus
from gputriage.facts.model import FactGroup, FactSet, Target
from gputriage.parsers.gpu_record import GpuRecord, GpuSnapshot

XML = b"""<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
    <driver_version>550.54.15</driver_version>
    <cuda_version>12.4</cuda_version>
    <attached_gpus>3</attached_gpus>
    <gpu id="00000000:1B:00.0">
        <product_name>NVIDIA H100 80GB HBM3</product_name>
        <uuid>GPU-11111111-0000-0000-0000-000000000000</uuid>
        <fb_memory_usage><total>81559 MiB</total><used>512 MiB</used></fb_memory_usage>
        <ecc_errors>
            <volatile><dram_uncorrectable>0</dram_uncorrectable></volatile>
            <aggregate><dram_uncorrectable>2</dram_uncorrectable></aggregate>
        </ecc_errors>
        <remapped_rows>
            <remapped_row_corr>0</remapped_row_corr>
            <remapped_row_unc>2</remapped_row_unc>
            <remapped_row_pending>Yes</remapped_row_pending>
            <remapped_row_failure>No</remapped_row_failure>
        </remapped_rows>
        <gpu_recovery_action>Reset</gpu_recovery_action>
    </gpu>
    <gpu id="00000000:43:00.0">
        <product_name>NVIDIA H100 80GB HBM3</product_name>
        <uuid>GPU-22222222-0000-0000-0000-000000000000</uuid>
        <fb_memory_usage><total>81559 MiB</total><used>N/A</used></fb_memory_usage>
        <ecc_errors><volatile><dram_uncorrectable>N/A</dram_uncorrectable></volatile></ecc_errors>
        <remapped_rows>N/A</remapped_rows>
        <gpu_recovery_action>None</gpu_recovery_action>
    </gpu>
</nvidia_smi_log>
"""


def build(ev: Evidence) -> FactGroup:
    return gpus.build(EvidenceSet([ev]), Target(), {})


def smi(blob: bytes, name: str = "nvidia-smi.xml") -> Evidence:
    return decode(Key.NVIDIA_SMI, blob, source=f"bundle/{name}")


def test_xml_values_are_cel_safe_and_derived_flags_set() -> None:
    group = build(smi(XML))
    v = group.values
    assert group.known and v["status"] == "ok" and v["source_format"] == "xml"
    assert (v["count"], v["attached"], v["missing_gpus"]) == (2, 3, 1)
    assert v["pci_ids"] == ["0000:1B:00.0", "0000:43:00.0"]
    assert v["pci_slots"] == ["0000:1B:00", "0000:43:00"]
    assert (v["any_remap_pending"], v["any_dbe"], v["any_reset_required"]) == (True, True, True)
    assert v["any_remap_failure"] is False
    assert v["recovery_actions"] == ["Reset"]
    assert v["models"] == ["NVIDIA H100 80GB HBM3"] and v["max_memory_mib"] == 81559
    second = v["gpus"][1]
    # N/A is -1 / "" / false, never None, so CEL comparisons cannot fail on a null.
    assert (second["memory_used_mib"], second["ecc_volatile_dbe"]) == (-1, -1)
    assert (second["remapped_rows_pending"], second["reset_required"]) == (False, False)
    assert second["recovery_action"] == "None"
    assert all(value is not None for g in v["gpus"] for value in g.values())


def test_citations_point_at_the_lines_behind_each_flag() -> None:
    group = build(smi(XML))
    facts = FactSet(Target(), {"gpus": group})
    pending = [(r.line, r.text.strip()) for r in facts.citations("gpus.any_remap_pending")]
    assert pending == [
        (7, '<gpu id="00000000:1B:00.0">'),
        (18, "<remapped_row_pending>Yes</remapped_row_pending>"),
    ]
    reset = [r.line for r in facts.citations("gpus.any_reset_required")]
    assert reset == [7, 18, 21]  # header, pending remap, <gpu_recovery_action>Reset
    assert [r.line for r in facts.citations("gpus.attached")] == [6]
    assert str(facts.citations("gpus.driver_version")[0]) == (
        "bundle/nvidia-smi.xml:4: <driver_version>550.54.15</driver_version>"
    )


def test_cel_conditions_over_the_facts() -> None:
    import cel

    ctx = cel.Context()
    group = build(smi(XML))
    ctx.add_variable("gpus", group.to_context())
    assert (
        cel.evaluate(
            "gpus.known && gpus.gpus.exists(g, g.remapped_rows_uncorrectable == 2 "
            "&& g.remapped_rows_pending)",
            ctx,
        )
        is True
    )
    assert cel.evaluate("gpus.gpus.exists(g, g.memory_used_mib > 1000)", ctx) is False
    assert cel.evaluate("gpus.missing_gpus > 0 && '0000:1B:00' in gpus.pci_slots", ctx) is True


def test_gpu_lost_error_text(tmp_path: Path) -> None:
    text = (
        b"$ nvidia-smi\nUnable to determine the device handle for GPU 0000:C1:00.0: GPU is "
        b"lost.  Reboot the system to recover this GPU\n"
    )
    group = build(smi(text, "nvidia-smi.txt"))
    v = group.values
    assert group.known
    assert (v["status"], v["gpu_lost"], v["lost_pci_ids"], v["count"]) == (
        "gpu_lost",
        True,
        ["0000:C1:00.0"],
        0,
    )
    assert [r.line for r in group.cites["lost_pci_ids"]] == [2]
    assert [r.line for r in group.cites["status"]] == [2]


def test_unavailable_and_unreadable_evidence_is_unknown() -> None:
    missing = build(Evidence.missing(Key.NVIDIA_SMI, "no SSH access to gpu-7"))
    assert not missing.known
    assert missing.reason == "nvidia-smi -q -x on the node: unavailable: no SSH access to gpu-7"
    assert missing.values["gpus"] == [] and missing.values["attached"] == -1
    junk = build(smi(b"Permission denied (publickey).\n", "nvidia-smi.txt"))
    assert not junk.known
    assert "could not be read" in junk.reason and "Permission denied" in junk.reason


def test_nvml_snapshot_from_the_local_adapter() -> None:
    snap = GpuSnapshot(
        driver_version="550.54.15",
        attached_gpus=1,
        source_format="nvml",
        gpus=[
            GpuRecord(
                index=0,
                uuid="GPU-33333333-0000-0000-0000-000000000000",
                pci_bus_id="0000:9B:00.0",
                name="NVIDIA H200",
                memory_total_mib=143771,
                mig_mode="Enabled",
                remapped_rows_pending=True,
                mig_devices=[
                    {
                        "gpu_instance": 1,
                        "compute_instance": 0,
                        "profile": "3g.71gb",
                        "memory_total_mib": 71424,
                        "memory_used_mib": 10,
                        "uuid": "MIG-1",
                    }
                ],
            )
        ],
    )
    raw = json.dumps(snap.to_dict(), indent=2, sort_keys=True) + "\n"  # as evidence.nvml does
    ev = Evidence(Key.NVIDIA_SMI, Status.OK, "NVML", raw, "local: NVML", snap.to_dict(), "nvml")
    group = build(ev)
    v = group.values
    assert (v["source_format"], v["count"], v["mig_enabled"]) == ("nvml", 1, True)
    assert [r.text for r in group.cites["any_remap_pending"]] == [
        '"pci_bus_id": "0000:9B:00.0",',
        '"remapped_rows_pending": true,',
    ]
    assert (v["mig_profiles"], v["mig_device_count"]) == (["3g.71gb"], 1)
    assert v["gpus"][0]["mig_devices"][0]["memory_total_mib"] == 71424
    broken = Evidence(
        Key.NVIDIA_SMI, Status.OK, "NVML", "", "local: NVML", {"gpus": [{"uuid": "GPU-x"}]}, "nvml"
    )  # no index: malformed
    group = build(broken)
    assert not group.known and "NVML snapshot is malformed" in group.reason


def test_every_field_is_declared_with_a_doc() -> None:
    assert all(spec.doc for spec in gpus.SPEC.fields.values())
    values: dict[str, Any] = build(smi(XML)).values
    assert set(values) == set(gpus.SPEC.fields)


@pytest.mark.corpus
def test_a10_remap_pending_from_the_corpus(corpus_dir: Path) -> None:
    path = corpus_dir / "gpu/nvidia-smi/text/gpud-a10-535.129.03-q-remap-pending.txt"
    group = build(decode(Key.NVIDIA_SMI, path.read_bytes(), source="bundle/nvidia-smi.txt"))
    v = group.values
    assert (v["any_remap_pending"], v["any_reset_required"], v["any_dbe"]) == (True, True, False)
    assert v["gpus"][0]["remapped_rows_uncorrectable"] == 4
    assert [(r.line, r.text.split()[0]) for r in group.cites["any_remap_pending"]] == [
        (8, "GPU"),
        (142, "Pending"),
    ]


@pytest.mark.corpus
def test_mig_capture_from_the_corpus(corpus_dir: Path) -> None:
    path = (
        corpus_dir / "gpu/nvidia-smi/captures/"
        "nvidia_gpu_exporter-linux-x86_64__nvidia-h100-mig__590.48.01.txt"
    )
    group = build(decode(Key.NVIDIA_SMI, path.read_bytes(), source="bundle/nvidia-smi.txt"))
    v = group.values
    assert (v["mig_enabled"], v["mig_device_count"], v["process_count"]) == (True, 4, 3)
    assert v["mig_profiles"] == ["1g.10gb", "2g.20gb", "3g.40gb"]
    assert group.cites["gpus"][0].line == 1946  # the newest -q block's GPU header
