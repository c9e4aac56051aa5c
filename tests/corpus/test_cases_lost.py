"""Public lost-card incidents walked end to end, from a pod and from a node alone.

* ``corpus/k8s/cases/lost-*.yaml``: each case is rebuilt as a bundle from its verbatim text
  only (``tests/casebundle.py``, answer fields never read) and walked from the router with no
  answers or overrides. The FIRST finding must name the case's established root cause, or be
  ``undetermined`` where the quoted evidence cannot decide (a walk that stops to ask the SRE
  counts as undetermined: the tool did not guess).
* ``corpus/gpu/dmesg`` and ``corpus/gpu/nvidia-smi/errors``: real kernel logs and nvidia-smi
  failures walked the way ``gputriage node`` walks a node, with no pod at all: the lost-card
  playbook's route must take them, and no branch may need pod facts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputriage.evidence.bundle import read_bundle
from gputriage.evidence.model import Evidence, Key
from gputriage.facts.build import build_facts
from gputriage.playbook.engine import walk
from gputriage.playbook.loader import load_playbooks
from gputriage.playbook.model import UNDETERMINED
from gputriage.playbook.transcript import Transcript
from tests.casebundle import case_to_bundle

pytestmark = pytest.mark.corpus

#: case id prefix -> (expected first finding, why: the case's established root cause)
EXPECTED: dict[str, tuple[str, str]] = {
    "lost-001": (
        "lost.plugin-unhealthy-app-xid",
        "Xid 69 (an application-class error NVIDIA handles by restarting the app) is "
        "not in the device plugin's skip list, so the plugin marked the GPU unhealthy "
        "for good",
    ),
    "lost-003": (
        UNDETERMINED,
        "the maintainer's DBE explanation is not in the evidence: the case quotes only "
        "the reporter's paraphrase of the plugin log, no Xid and no plugin line",
    ),
    "lost-004": (
        "lost.gpu-unreachable",
        "one GPU is lost ('GPU is lost' in nvidia-smi and in the admission error), so "
        "the plugin's GetPreferredAllocation fails and every pod on the node is "
        "rejected at admission",
    ),
}

#: GPU corpus file -> first finding of a node walk (no pod) over it
NODE_WALKS: dict[str, str] = {
    "dmesg/xid79-sxid20034-hgx-fallen-off-bus-gpud-readme.log": "lost.gpu-fallen-off-bus",
    "dmesg/fallen-off-bus-multiline-no-xid-570-open.log": "lost.gpu-fallen-off-bus",
    "dmesg/xid79-rtx5080-open-no-precursor.log": "lost.gpu-fallen-off-bus",
    "dmesg/rminitadapter-failed-0x24-0x72-syslog-k8s-worker.log": "lost.gpu-init-failed",
    "dmesg/xid48-63-94-dbe-rowremap-contained-peermem-gpud.log": "lost.ecc-uncorrectable",
    "dmesg/sxid-xid64-lines-menthos-hf-dataset.txt": "lost.row-remap-failure",
    "dmesg/xid119-gsp-rpc-timeout-h100-xe9680-gpud.log": "lost.gsp-timeout",
    "dmesg/xid119-gsp-timeout-525-old-format.log": "lost.gsp-timeout",
    "dmesg/gsp-heartbeat-timeout-gh100-595.71.05.log": "lost.gsp-timeout",
    "dmesg/xid74-nvlink-fatal-gh200-nvsentinel-design-doc.txt": "lost.nvlink-error",
    "dmesg/xid45-caused-by-previous-xid145-149-590.log": "lost.nvlink-error",
    "dmesg/xid13-109-ctx-switch-timeout-peermem-ctime.log": "lost.xid-gpu-reset",
    "dmesg/xid13-43-sm-exception-dmesg-decode-gpud.log": "lost.application-xid",
    "nvidia-smi/errors/unable-device-handle-gpu-is-lost-linux.txt": "lost.gpu-unreachable",
    "nvidia-smi/errors/unable-device-handle-unknown-error-2080ti-fell-off-bus.txt": "lost.gpu-unreachable",
    # The driver, not a GPU: lost-card hands these to the node-onboarding checks.
    "nvidia-smi/errors/nvml-driver-library-version-mismatch-570.txt": "node.driver-library-mismatch",
    "nvidia-smi/errors/nvidia-smi-failed-communicate-driver-gpu-operator-exit9.txt": "node.nvidia-driver-not-loaded",
    "nvidia-smi/errors/no-devices-were-found-plain.txt": "lost.gpu-init-failed",
    "nvidia-smi/text/gpud-a10-535.129.03-q-remap-pending.txt": "lost.row-remap-pending",
}


def _first(tr: Transcript) -> str:
    if tr.question is not None and not tr.findings:
        return UNDETERMINED
    assert tr.findings, "no finding and no question"
    first = tr.findings[0]
    return UNDETERMINED if first.undetermined else first.id


def _path(tr: Transcript) -> str:
    return " -> ".join(f"{v.ref}[{v.outcome.value}]" for v in tr.visits)


def _cases(corpus_dir: Path) -> dict[str, Path]:
    return {
        "-".join(p.stem.split("-")[:2]): p
        for p in sorted((corpus_dir / "k8s" / "cases").glob("lost-*.yaml"))
    }


def test_every_lost_case_has_an_expectation(corpus_dir: Path) -> None:
    assert set(_cases(corpus_dir)) == set(EXPECTED)


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_lost_case_names_its_root_cause(key: str, corpus_dir: Path, tmp_path: Path) -> None:
    case = _cases(corpus_dir).get(key)
    if case is None:
        pytest.skip(f"{key} is not in this corpus")
    expected, why = EXPECTED[key]
    facts = build_facts(read_bundle(case_to_bundle(case, tmp_path / case.stem)))
    tr = walk(load_playbooks(user_config=False), facts)
    got = _first(tr)
    assert got == expected, f"{key}: expected {expected} ({why}); got {got}; walk: {_path(tr)}"


@pytest.mark.parametrize("name", sorted(NODE_WALKS))
def test_node_walk_without_a_pod(name: str, corpus_dir: Path, tmp_path: Path) -> None:
    source = corpus_dir / "gpu" / name
    if not source.is_file():
        pytest.skip(f"{name} is not in this corpus")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    # read_bundle insists on a pod file; the pod's evidence is dropped right after, which is
    # what `gputriage node` has: a node and its logs, no pod.
    (bundle / "pod.json").write_text(json.dumps({"kind": "Pod", "metadata": {"name": "x"}}))
    target = "dmesg.log" if name.startswith("dmesg/") else "nvidia-smi.txt"
    (bundle / target).write_bytes(source.read_bytes())
    evidence = read_bundle(bundle).with_evidence(Evidence.missing(Key.POD))
    facts = build_facts(evidence)
    assert not facts.groups["pod"].known
    tr = walk(load_playbooks(user_config=False), facts)
    assert tr.entry == "lost-card", f"{name}: entered {tr.entry!r} ({tr.entry_reason})"
    assert all(not v.ref.startswith("triage/") for v in tr.visits)
    got = _first(tr)
    assert got == NODE_WALKS[name], f"{name}: got {got}; walk: {_path(tr)}"
    if got != UNDETERMINED:
        cited = [c for v in tr.visits for c in v.citations]
        assert cited, f"{name}: {got} cites no evidence line"
