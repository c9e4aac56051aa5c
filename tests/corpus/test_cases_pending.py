"""Public Pending-pod incidents walked end to end from the router.

Each ``corpus/k8s/cases/pending-*.yaml`` is rebuilt as a bundle from its verbatim text only
(``tests/casebundle.py``; the answer fields are never read) and walked with the shipped
playbooks, no answers and no overrides. The FIRST finding must name the case's established
root cause, or be ``undetermined`` where the quoted evidence cannot decide (a walk that stops
to ask the SRE counts as undetermined: the tool did not guess).

The rebuilt pod has no GPU request (the cases quote statuses, not specs) and often no phase;
the router must still send a pod without a node to the pending family.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gputriage.evidence.bundle import read_bundle
from gputriage.facts.build import build_facts
from gputriage.playbook.engine import walk
from gputriage.playbook.loader import load_playbooks
from gputriage.playbook.model import UNDETERMINED
from gputriage.playbook.transcript import Transcript
from tests.casebundle import case_to_bundle

pytestmark = pytest.mark.corpus

#: case id prefix -> (expected first finding, why: the case's established root cause)
EXPECTED: dict[str, tuple[str, str]] = {
    "pending-003": (
        "pending.no-device-plugin",
        "the device-plugin DaemonSet did not tolerate the GPU nodes' taint, so no "
        "plugin ran there and nvidia.com/gpu was never registered (the node shows "
        "only the legacy alpha.kubernetes.io/nvidia-gpu)",
    ),
    "pending-007": (
        "pending.insufficient-gpu",
        "the cluster's only GPU is allocated to a long-running pod; allocatable is "
        "not decremented by allocations, so Allocatable=1 is the normal busy state",
    ),
    "pending-008": (
        "pending.no-device-plugin",
        "the NVIDIA driver/device-plugin DaemonSet was removed, so the GPU node pool "
        "advertises no nvidia.com/gpu at all (key absent, not 0)",
    ),
    "pending-010": (
        "pending.device-plugin-nvml-init-failed",
        "Docker's default runtime was not nvidia, so the plugin container had no "
        "libnvidia-ml and could not load NVML",
    ),
    "pending-016": (
        "pending.healthcheck-unsupported",
        "the plugin could not register NVML health events for the old GPU and, in "
        "that version, marked it unhealthy: capacity without allocatable",
    ),
    "pending-018": (
        UNDETERMINED,
        "the quickstart claims named a ResourceClass that was never created, but the "
        "case quotes only `kubectl get po` (Pending): no claim, class or event to "
        "read",
    ),
    "pending-021": (
        "pending.gpu-quota-exceeded",
        "ResourceQuota inference-gpu-quota allows requests.nvidia.com/gpu=4 with 3 "
        "used; the new pod asks 2, so admission rejects the ReplicaSet's creates",
    ),
}


def _cases(corpus_dir: Path) -> list[Path]:
    return sorted((corpus_dir / "k8s" / "cases").glob("pending-*.yaml"))


def _first(tr: Transcript) -> str:
    if tr.question is not None and not tr.findings:
        return UNDETERMINED
    assert tr.findings, "no finding and no question"
    first = tr.findings[0]
    return UNDETERMINED if first.undetermined else first.id


def test_every_pending_case_has_an_expected_verdict(corpus_dir: Path) -> None:
    keys = {"-".join(c.stem.split("-")[:2]) for c in _cases(corpus_dir)}
    assert keys, "no pending-* cases in the corpus"
    assert keys == set(EXPECTED), (
        f"unmapped: {sorted(keys - set(EXPECTED))}, gone: {sorted(set(EXPECTED) - keys)}"
    )


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_case_first_finding_names_the_root_cause(
    key: str, corpus_dir: Path, tmp_path: Path
) -> None:
    [case] = [c for c in _cases(corpus_dir) if c.stem.startswith(key + "-")]
    bundle = case_to_bundle(case, tmp_path / case.stem)
    tr = walk(load_playbooks(user_config=False), build_facts(read_bundle(bundle)))
    expected, why = EXPECTED[key]
    path = " -> ".join(f"{v.ref}[{v.outcome.value}]" for v in tr.visits)
    assert _first(tr) == expected, f"{case.stem}: expected {expected} ({why}); walk: {path}"
    assert any(v.playbook.startswith("pending") for v in tr.visits), path
    if expected != UNDETERMINED:
        cited = [c for v in tr.visits for c in v.citations] + list(tr.findings[0].evidence)
        assert cited, f"{case.stem}: {expected} cites no evidence line"
