"""Public OOM incidents (``corpus/k8s/cases/oom-*.yaml``) walked end to end.

Each case is rebuilt as a bundle from its verbatim text only (``tests/casebundle.py``, answer
fields never read), its facts are built, and the shipped playbooks are walked from the router
with no answers and no overrides. The FIRST finding must name the case's established root
cause, or be ``undetermined`` where the quoted evidence cannot decide (a walk that stops to ask
the SRE counts as undetermined: the tool did not guess).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gputriage.evidence.bundle import read_bundle
from gputriage.facts.build import build_facts
from gputriage.playbook.engine import walk
from gputriage.playbook.loader import load_playbooks
from gputriage.playbook.model import UNDETERMINED
from tests.casebundle import case_to_bundle

pytestmark = pytest.mark.corpus

#: case id prefix -> (expected first finding, why: the case's established root cause)
EXPECTED: dict[str, tuple[str, str]] = {
    "oom-001": (
        "oom.gpu-memory-held-by-another-process",
        "time-slicing gives no memory isolation: a co-located service held ~9 GiB while "
        "PyTorch itself held 4.4 GiB ('already allocated' << total - free)",
    ),
    "oom-003": (
        "oom.dev-shm-too-small",
        "/dev/shm is the runtime's 64 MB default; NCCL's shared-memory segments do not "
        "fit (posix_fallocate: No space left on device)",
    ),
    "oom-007": (
        UNDETERMINED,
        "the root cause (container memory limit too small, OOMKilled) is in the "
        "reporter's words only: the case quotes no pod status, no exit code and no "
        "memory error, just TensorFlow's device-init lines",
    ),
}


def _outcome(case: Path, tmp: Path) -> tuple[str, str]:
    facts = build_facts(read_bundle(case_to_bundle(case, tmp / case.stem)))
    tr = walk(load_playbooks(user_config=False), facts)
    path = " -> ".join(f"{v.ref}[{v.outcome.value}]" for v in tr.visits)
    if tr.question is not None and not tr.findings:
        return UNDETERMINED, f"{path} (asks: {tr.question.prompt})"
    assert tr.findings, f"no finding and no question; walk: {path}"
    first = tr.findings[0]
    return (UNDETERMINED if first.undetermined else first.id), path


def _cases(corpus_dir: Path) -> dict[str, Path]:
    return {
        "-".join(p.stem.split("-")[:2]): p
        for p in sorted((corpus_dir / "k8s" / "cases").glob("oom-*.yaml"))
    }


def test_every_oom_case_has_an_expectation(corpus_dir: Path) -> None:
    assert set(_cases(corpus_dir)) == set(EXPECTED)


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_oom_case_names_its_root_cause(key: str, corpus_dir: Path, tmp_path: Path) -> None:
    case = _cases(corpus_dir).get(key)
    if case is None:
        pytest.skip(f"{key} is not in this corpus")
    expected, why = EXPECTED[key]
    got, path = _outcome(case, tmp_path)
    assert got == expected, f"{key}: expected {expected} ({why}); got {got}; walk: {path}"
