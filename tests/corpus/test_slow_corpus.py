"""The slow family's nvidia-smi readings on real outputs (corpus/gpu/nvidia-smi, see its
MANIFEST): PCIe links trained below their maximum, clock event reasons, fabric state, topo -m
and nvlink -s. Bundles are written at test time; corpus text never enters the repo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gputriage.parsers.nvidia_smi_perf import parse_nvlink, parse_perf, parse_topo

pytestmark = pytest.mark.corpus

SMI = Path("gpu") / "nvidia-smi"
H100_CAPTURE = "captures/nvidia_gpu_exporter-linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt"


def _text(corpus_dir: Path, rel: str) -> str:
    return (corpus_dir / SMI / rel).read_text(encoding="utf-8", errors="replace")


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train-0", "namespace": "ml", "uid": "u-1"},
        "spec": {
            "nodeName": "gpu-1",
            "containers": [
                {
                    "name": "main",
                    "image": "train:1",
                    "resources": {"limits": {"cpu": "16", "nvidia.com/gpu": "1"}},
                }
            ],
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": True,
                    "restartCount": 0,
                    "image": "train:1",
                    "state": {"running": {}},
                }
            ],
        },
    }


def _walk(tmp_path: Path, files: dict[str, str]) -> tuple[Any, Any]:
    from gputriage.evidence.bundle import read_bundle
    from gputriage.facts.build import build_facts
    from gputriage.playbook.engine import walk
    from gputriage.playbook.loader import load_playbooks

    (tmp_path / "pod.json").write_text(json.dumps(_pod()))
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    facts = build_facts(read_bundle(tmp_path))
    return facts, walk(load_playbooks(), facts, {}, {})


def test_every_xml_and_q_text_reads_link_and_reasons(corpus_dir: Path) -> None:
    files = sorted((corpus_dir / SMI / "xml").glob("*.xml"))
    files += sorted((corpus_dir / SMI / "text").glob("*-q*.txt"))
    read = 0
    for path in files:
        gpus = parse_perf(path.read_text(encoding="utf-8", errors="replace"))
        for g in gpus:
            assert g["pcie_width_current"] <= g["pcie_width_max"] or g["pcie_width_max"] < 0
            assert all(r.islower() for r in g["reasons"]), path
        read += bool(gpus and gpus[0]["pcie_width_max"] > 0)
    assert read >= 25  # trimmed fragments and vGPU guests print no link info


def test_t4_at_x8_is_downtrained_even_when_idle(corpus_dir: Path, tmp_path: Path) -> None:
    facts, t = _walk(tmp_path, {"nvidia-smi.xml": _text(corpus_dir, "xml/telegraf-tesla-t4.xml")})
    perf = facts["gpu_perf"].values
    [down] = perf["pcie_downtrained"]
    assert (down["width_current"], down["width_max"], down["why"]) == (8, 16, "x8 of x16")
    assert t.findings[0].id == "slow.pcie-link-downtrained"
    assert any("x8 of x16" in c.text for v in t.visits for c in v.citations)


def test_idle_gen1_links_are_not_downtrained(corpus_dir: Path, tmp_path: Path) -> None:
    for rel in (
        "xml/telegraf-rtx-3090-v12.xml",
        "xml/telegraf-rtx-3080-v12.xml",
        "xml/telegraf-a100-sxm4-v12.xml",
    ):
        gpus = parse_perf(_text(corpus_dir, rel))
        assert gpus and all(g["pcie_width_current"] == g["pcie_width_max"] for g in gpus), rel
    idle = parse_perf(_text(corpus_dir, "xml/telegraf-rtx-3090-v12.xml"))[0]
    assert idle["pcie_gen_current"] == 1 and idle["pcie_gen_max"] == 4
    assert "gpu_idle" in idle["reasons"]
    facts, t = _walk(
        tmp_path, {"nvidia-smi.xml": _text(corpus_dir, "xml/telegraf-rtx-3090-v12.xml")}
    )
    assert not facts["gpu_perf"].values["any_pcie_downtrained"]
    assert not t.findings  # a running pod with nothing slowing it: the router asks the SRE
    assert t.question is not None and t.question.ref == "triage/symptom"


def test_hgx_h100_power_brake_from_q_text(corpus_dir: Path, tmp_path: Path) -> None:
    text = _text(corpus_dir, "text/gpud-8x-h100-535.161.08-q.txt")
    gpus = parse_perf(text)
    assert len(gpus) == 8 and {g["fabric_state"] for g in gpus} == {"Completed"}
    braked = [g for g in gpus if "hw_power_brake_slowdown" in g["reasons"]]
    assert braked and all("hw_slowdown" in g["reasons"] for g in braked)
    facts, t = _walk(tmp_path, {"nvidia-smi.txt": text})
    perf = facts["gpu_perf"].values
    assert perf["power_throttling"] and perf["hw_slowdown"] and not perf["fabric_pending"]
    assert t.findings[0].id == "slow.gpu-power-throttling"


def test_topo_and_nvlink_of_real_captures(corpus_dir: Path) -> None:
    capture = _text(corpus_dir, H100_CAPTURE)
    section = capture.split("# $ nvidia-smi topo -m", 1)[1].split("\n####", 2)[1]
    topo = parse_topo(section)
    assert topo["gpus"] == [
        {
            "name": "GPU0",
            "index": 0,
            "line": topo["gpus"][0]["line"],
            "cpu_affinity": "0-19",
            "numa_affinity": 0,
        }
    ]
    nvl = parse_nvlink(_text(corpus_dir, "text/gpud-a100-nvlink-status.txt"))
    assert len(nvl) == 8 and all(g["links"] == 12 and not g["inactive"] for g in nvl)
