"""Public container-create incidents (corpus/k8s/cases/create-*.yaml) through the create playbook.

Each case is rebuilt as a bundle from its verbatim text only (``tests/casebundle.py``: no root
cause, fix or notes reach the bundle) and walked from the ``create`` playbook. The first finding
must name the case's established root cause, or be ``undetermined`` where the quoted evidence
cannot decide. The walk enters at ``create`` rather than the router because the rebuilt pods
carry only the status the incident quotes (no nodeName, no GPU limits), so the router cannot
tell they were scheduled; the router's own hand-over is covered by tests/playbook_cases/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gputriage.evidence.bundle import read_bundle
from gputriage.facts.build import build_facts
from gputriage.playbook.engine import walk
from gputriage.playbook.loader import load_playbooks
from tests.casebundle import case_to_bundle

pytestmark = pytest.mark.corpus

#: case id prefix -> (expected first finding, why: the case's established root cause in a line)
EXPECTED: dict[str, tuple[str, str]] = {
    "create-001": (
        "create.runtime-handler-not-ready-yet",
        "maintainer: 'no runtime for \"nvidia\"' is expected for 3-4 minutes until the driver "
        "and toolkit are set up; the one event quoted (count 1) is that young error",
    ),
    "create-006": (
        "node.runtimeclass-missing",
        "a webhook adds runtimeClassName nvidia but the RuntimeClass object never exists, so the "
        "API server rejects the pods ('RuntimeClass \"nvidia\" not found')",
    ),
    "create-009": (
        "create.cdi-spec-missing",
        "root cause: CDI specs not generated (toolkit started before the driver); the toolkit "
        "container's own log says 'unresolvable CDI devices management.nvidia.com/gpu=all' "
        "(container_log.cdi_unresolvable), which is exactly a CDI device no spec defines",
    ),
    "create-013": (
        "create.admission-before-plugin-registered",
        "root cause: pods re-admitted after a reboot before the plugin re-registered; the case "
        "quotes only 'no healthy devices present', which all-unhealthy devices produce too: the "
        "mechanism is concluded with its most common cause (confidence: likely), and the "
        "summary says what tells the causes apart",
    ),
    "create-019": (
        "create.nvml-device-cgroup-reset",
        "NVIDIA notice #48: daemon-reload with the systemd cgroup driver resets the device "
        "rules; the container log shows 'Failed to initialize NVML: Unknown Error'",
    ),
    "create-021": (
        "undetermined",
        "root cause: node driver too old for the CUDA 10 image; the case quotes only a Failed "
        "phase (the error string was in a screenshot), so nothing names the driver",
    ),
}


def _cases(corpus_dir: Path) -> dict[str, Path]:
    return {
        "-".join(p.stem.split("-")[:2]): p
        for p in sorted((corpus_dir / "k8s" / "cases").glob("create-*.yaml"))
    }


def test_every_create_case_has_an_expectation(corpus_dir: Path) -> None:
    assert set(_cases(corpus_dir)) == set(EXPECTED)


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_create_case_first_finding(key: str, corpus_dir: Path, tmp_path: Path) -> None:
    case = _cases(corpus_dir)[key]
    facts = build_facts(read_bundle(case_to_bundle(case, tmp_path / case.stem)))
    tr = walk(load_playbooks(user_config=False), facts)
    path = " -> ".join(f"{v.ref}[{v.outcome.value}]" for v in tr.visits)
    assert tr.findings, f"{key}: no finding; walk: {path}; question: {tr.question}"
    expected, why = EXPECTED[key]
    first = tr.findings[0]
    assert first.id == expected, f"{key}: got {first.id}, expected {expected} ({why}); {path}"
    if expected == "undetermined":
        assert first.undetermined and first.collect_next, f"{key}: says nothing to collect"
    else:
        cited = [c for v in tr.visits for c in v.citations] + list(first.evidence)
        assert cited, f"{key}: {first.id} cites no evidence line"
