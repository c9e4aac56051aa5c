"""Golden incident summaries (Markdown, plain text, JSON) for each built-in demo scenario.

The whole pipeline runs: bundle -> facts -> walk over the shipped playbooks -> summary ->
renderers, at a fixed clock. A change to a playbook text, a fix command or a renderer shows up
here as a diff to review by eye; regenerate with::

    GPUTRIAGE_REGEN_GOLDEN=1 python -m pytest tests/test_golden_summaries.py

The checks below the comparison hold whatever the golden files say: the lost-card summary
names the GPU's UUID, PCI id and serial and keeps node-local times apart from UTC; no summary
holds a local path, a ``<placeholder>`` or Markdown backslash noise in its text form.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from gputriage.scenarios import scenario_path

GOLDEN = Path(__file__).parent / "golden"
SCENARIOS = (
    "lost-xid79",
    "oom-time-sliced",
    "create-nvidia-uvm-missing",
    "pending-insufficient-gpu",
)
NOW = 1_764_547_200.0  # 2025-12-01T00:00:00Z
FORMATS = {"md": "md", "text": "txt", "json": "json"}


def _summary(name: str) -> dict[str, Any]:
    from gputriage.evidence.bundle import read_bundle
    from gputriage.facts.build import build_facts
    from gputriage.playbook.engine import walk
    from gputriage.playbook.loader import load_playbooks
    from gputriage.report.summary import build_summary

    evidence = read_bundle(Path(str(scenario_path(name))))
    facts = build_facts(evidence)
    transcript = walk(load_playbooks(user_config=False), facts)
    summary = build_summary(
        session=f"bundle {scenario_path(name)}",
        context="",
        evidence=evidence,
        facts=facts,
        transcript=transcript,
        now=NOW,
    )
    summary["tool"]["version"] = "VERSION"  # a release bump is not a content change
    return summary


def _render(fmt: str, summary: dict[str, Any]) -> str:
    from gputriage.report.json import render_json
    from gputriage.report.markdown import render_markdown
    from gputriage.report.model import Summary
    from gputriage.report.text import render_text

    if fmt == "text":
        return render_text(Summary.from_dict(summary))
    return {"md": render_markdown, "json": render_json}[fmt](summary)


@pytest.fixture(scope="module")
def summaries() -> dict[str, dict[str, Any]]:
    return {name: _summary(name) for name in SCENARIOS}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", SCENARIOS)
def test_summary_matches_golden(summaries: dict[str, dict[str, Any]], name: str, fmt: str) -> None:
    text = _render(fmt, summaries[name])
    path = GOLDEN / f"{name}.{FORMATS[fmt]}"
    if os.environ.get("GPUTRIAGE_REGEN_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"regenerate {path.name} (see docstring)"


@pytest.mark.parametrize("name", SCENARIOS)
def test_summary_is_ticket_ready(summaries: dict[str, dict[str, Any]], name: str) -> None:
    s = summaries[name]
    for fmt in FORMATS:
        text = _render(fmt, s)
        assert str(Path(__file__).resolve().parent.parent) not in text  # no install path
        assert "site-packages" not in text
        assert not re.search(r"<[a-z_]+\.[a-z_.0-9]+>|\{\{", text)  # no unfilled template
    plain = _render("text", s)
    assert not re.search(r"\\[(){}_*#\[\]<>]", plain)  # plain text carries no escapes
    assert s["target"]["session"] == f"bundle {name}"
    assert s["walk_status"]["status"] == "proposed"  # nobody confirmed a headless walk
    assert all(e["zone"] in ("UTC", "node local time, offset unknown") for e in s["timeline"])


def test_lost_card_summary_names_the_gpu_for_an_rma(summaries: dict[str, dict[str, Any]]) -> None:
    s = summaries["lost-xid79"]
    [gpu] = s["gpus"]
    assert gpu["pci"] == "0000:3b:00"
    assert gpu["uuid"] == "GPU-5f2d3c9e-8a41-7b6e-92c1-4d0e8f7a6b13"
    assert gpu["serial"] == "1652923031875"
    assert [x["code"] for x in gpu["xids"]] == [79]
    assert "GPU has fallen off the bus" in gpu["xids"][0]["line"]
    md, plain = _render("md", s), _render("text", s)
    for text in (md, plain):
        assert "GPU-5f2d3c9e-8a41-7b6e-92c1-4d0e8f7a6b13" in text and "1652923031875" in text
    # dmesg -T prints the node's local time: never passed off as UTC
    kernel = [e for e in s["timeline"] if e["source"] == "kernel"]
    assert kernel and all(e["zone"] != "UTC" and not e["time"].endswith("Z") for e in kernel)
    events = [e for e in s["timeline"] if e["source"] == "events"]
    assert events and all(e["zone"] == "UTC" and e["time"].endswith("Z") for e in events)
    assert any(e["source"] == "pod" and "ended" in e["text"] for e in s["timeline"])
    assert "2024-08-13T10:41:07 local" in md
    # the fix is safe in order: cordon and drain before the reboot, uncordon last
    cmds = s["findings"][0]["fix"]["commands"]
    order = [
        next(i for i, c in enumerate(cmds) if c.startswith(p))
        for p in (
            "kubectl cordon",
            "kubectl drain",
            "ssh gpu-h100-07 sudo reboot",
            "kubectl uncordon",
        )
    ]
    assert order == sorted(order)
    assert json.loads(_render("json", s))["findings"][0]["fix"]["steps"][0]["run"] == "cluster"


def test_other_verdicts_do_not_list_gpus(summaries: dict[str, dict[str, Any]]) -> None:
    assert summaries["pending-insufficient-gpu"]["gpus"] == []


@pytest.mark.parametrize("name", SCENARIOS)
def test_typed_summary_round_trips(summaries: dict[str, dict[str, Any]], name: str) -> None:
    """The typed tree holds every key of the JSON summary: nothing lost, nothing invented."""
    from gputriage.report.model import Summary

    typed = Summary.from_dict(summaries[name])
    assert typed.to_dict() == summaries[name]
    assert typed.target.session == f"bundle {name}"
