"""Declarative end-to-end cases for the shipped playbooks (sqlfluff-style YAML cases).

Each ``tests/playbook_cases/*.yaml`` holds::

    cases:
      - name: all GPUs busy                       # unique within the file
        expect: pending.insufficient-gpu          # id of the FIRST finding
        expect_undetermined: false                # optional
        expect_visits: [triage/start, ...]        # optional: step refs that must be visited
        answers: {"oom-cuda/params": "7e9"}       # optional, as --answer
        overrides: {}                             # optional, as --override
        extends: pending-insufficient-gpu         # optional: start from a demo scenario bundle
        remove: [dmesg.log]                       # optional: drop files from the base
        bundle:                                   # bundle files (DESIGN 3.1)
          pod.json: {kind: Pod, ...}              # a mapping is written as JSON
          kubelet.log: |                          # a string is written verbatim
            Nov 29 03:10:00 gpu-7 kubelet[1]: ...

The whole pipeline runs for real: files -> read_bundle -> build_facts -> walk. A last test
checks that every finding of every shipped playbook is expected by at least one case.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

CASES_DIR = Path(__file__).parent / "playbook_cases"


def _load_cases() -> list[tuple[str, dict[str, Any]]]:
    cases = []
    for file in sorted(CASES_DIR.glob("*.yaml")):
        data = yaml.safe_load(file.read_text()) or {}
        names = set()
        for case in data.get("cases", []):
            assert case["name"] not in names, f"{file.name}: duplicate case {case['name']!r}"
            names.add(case["name"])
            cases.append((f"{file.stem}: {case['name']}", case))
    return cases


CASES = _load_cases()


def write_case_bundle(case: dict[str, Any], out: Path) -> Path:
    """Materialise a case's bundle in ``out`` (used by this test and by the benchmarks)."""
    out.mkdir(parents=True, exist_ok=True)
    if case.get("extends"):
        from gputriage.scenarios import scenario_path

        base = Path(str(scenario_path(case["extends"])))
        for f in base.iterdir():
            if f.is_file() and f.name != "scenario.json":
                shutil.copy(f, out / f.name)
    for name in case.get("remove", []):
        (out / name).unlink(missing_ok=True)
    for name, content in (case.get("bundle") or {}).items():
        text = content if isinstance(content, str) else json.dumps(content, indent=2)
        (out / name).write_text(text, encoding="utf-8")
    if not (out / "meta.json").exists() and not case.get("hand_assembled"):
        # Cases stand for bundles `gputriage collect` wrote: their lists are complete.
        (out / "meta.json").write_text(json.dumps({"tool": "gputriage"}), encoding="utf-8")
    return out


def run_case(case: dict[str, Any], tmp: Path):  # type: ignore[no-untyped-def]
    from gputriage.evidence.bundle import read_bundle
    from gputriage.facts.build import build_facts
    from gputriage.playbook.engine import walk
    from gputriage.playbook.loader import load_playbooks

    evidence = read_bundle(write_case_bundle(case, tmp / "bundle"))
    facts = build_facts(evidence)
    return walk(load_playbooks(), facts, case.get("answers") or {}, case.get("overrides") or {})


@pytest.mark.parametrize(("label", "case"), CASES, ids=[c[0] for c in CASES])
def test_case(label: str, case: dict[str, Any], tmp_path: Path) -> None:
    tr = run_case(case, tmp_path)
    path = " -> ".join(f"{v.ref}[{v.outcome.value}]" for v in tr.visits)
    assert tr.findings, f"{label}: no finding; walk: {path}; question: {tr.question}"
    first = tr.findings[0]
    assert first.id == case["expect"], f"{label}: got {first.id}; walk: {path}"
    if "expect_undetermined" in case:
        assert first.undetermined == case["expect_undetermined"]
    refs = {v.ref for v in tr.visits}
    for ref in case.get("expect_visits", []):
        assert ref in refs, f"{label}: {ref} not visited; walk: {path}"
    # Every verdict that is not undetermined must cite evidence.
    if not first.undetermined:
        cited = [c for v in tr.visits for c in v.citations] + list(first.evidence)
        assert cited, f"{label}: finding {first.id} cites no evidence line"


def test_every_shipped_finding_is_reached_by_a_case() -> None:
    from gputriage.playbook.loader import load_playbooks

    pbs = load_playbooks()
    defined = {fid for pb in pbs.playbooks.values() for fid in pb.findings}
    expected = {case["expect"] for _, case in CASES}
    missing = sorted(defined - expected)
    assert not missing, f"findings no case reaches: {missing}"
