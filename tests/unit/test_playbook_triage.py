"""The shipped router (``playbooks/triage.yaml``) against facts built by the real builders from
pod objects shaped like ``kubectl get pod -o json``: each symptom reaches its finding."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gputriage.evidence.bundle import decode
from gputriage.evidence.model import EvidenceSet, Key
from gputriage.facts.build import build_facts
from gputriage.facts.model import FactGroup, FactSet
from gputriage.facts.registry import known_paths
from gputriage.playbook.engine import walk
from gputriage.playbook.loader import load_playbooks
from gputriage.playbook.model import PlaybookSet
from gputriage.playbook.transcript import Outcome, Transcript

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer-0", "namespace": "ml", "uid": "0b4f6e1c-6a3e-4c55-9d1e"},
    "spec": {
        "nodeName": "gpu-node-7",
        "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                        "resources": {"limits": {"nvidia.com/gpu": "2", "memory": "64Gi"},
                                      "requests": {"nvidia.com/gpu": "2", "memory": "64Gi"}}}],
    },
    "status": {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0,
                               "state": {"running": {"startedAt": "2025-03-04T02:00:00Z"}}}]},
}


@pytest.fixture(scope="module")
def books() -> PlaybookSet:
    result = load_playbooks(user_config=False)
    assert [str(p) for p in result.problems] == []
    assert "triage" in result.playbooks
    return result


def pod_facts(status: dict[str, Any] | None = None, *, spec: dict[str, Any] | None = None,
              node: str | None = "gpu-node-7") -> FactSet:
    pod = copy.deepcopy(POD)
    if status is not None:
        pod["status"] = status
    if spec is not None:
        pod["spec"].update(spec)
    if node is None:
        del pod["spec"]["nodeName"]
    blob = json.dumps(pod, indent=2).encode()
    return build_facts(EvidenceSet([decode(Key.POD, blob, source="bundle/pod.json")]))


def router(books: PlaybookSet, facts: FactSet, **kw: Any) -> Transcript:
    return walk(books, facts, entry="triage", **kw)


def container(**state: Any) -> dict[str, Any]:
    return {"name": "main", "ready": False, "restartCount": state.pop("restarts", 0), **state}


def test_shipped_router_is_valid_against_the_registered_fact_fields() -> None:
    result = load_playbooks(user_config=False, known_facts=known_paths())
    assert result.problems == ()
    book = result.playbooks["triage"]
    assert book.shipped and book.maturity == "beta"
    assert list(book.steps) == ["gpu-request", "phase", "symptom"]
    assert len(book.findings) == 10


def test_unscheduled_pending_pod(books: PlaybookSet) -> None:
    facts = pod_facts({"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}]}, node=None)
    t = router(books, facts)
    assert [(v.step, v.outcome) for v in t.visits] == [
        ("gpu-request", Outcome.CONDITION), ("phase", Outcome.CONDITION)]
    assert t.visits[0].because == "the pod requests nvidia.com/gpu=2"
    (finding,) = t.findings
    assert finding.id == "triage.not-scheduled"
    assert finding.fix.commands[:2] == (
        "kubectl -n ml describe pod trainer-0",
        "kubectl -n ml get events --field-selector involvedObject.name=trainer-0")
    # The visit cites the pod.json line behind pod.phase, and (`cite:`) the condition message.
    assert [(r.source, r.text) for r in t.visits[1].citations] == [
        ("bundle/pod.json", '"phase": "Pending",'),
        ("bundle/pod.json",
         '"message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."')]


def test_admission_rejected_pod_from_a_real_case(books: PlaybookSet, corpus_dir: Path) -> None:
    case = yaml.safe_load((corpus_dir / "k8s" / "cases" /
                           "lost-004-k8sdp-231-gpu-is-lost-blocks-whole-node.yaml").read_text())
    status = case["pod_status"]
    facts = pod_facts({"phase": status["phase"], "reason": status["reason"],
                       "message": status["message"]})
    t = router(books, facts)
    (finding,) = t.findings
    assert finding.id == "triage.admission-rejected"
    assert t.visits[-1].because == ("the kubelet on gpu-node-7 rejected the pod at admission "
                                    "(UnexpectedAdmissionError)")
    assert "kubectl describe node gpu-node-7" in finding.fix.commands


@pytest.mark.parametrize(("status", "finding"), [
    ({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
      "containerStatuses": [container(state={"waiting": {"reason": "ContainerCreating"}})]},
     "triage.stuck-creating"),
    ({"phase": "Running", "containerStatuses": [container(
        restarts=6, state={"waiting": {"reason": "CrashLoopBackOff"}},
        lastState={"terminated": {"reason": "StartError", "exitCode": 128, "message":
                   "failed to create containerd task: ... nvidia-container-cli: initialization "
                   "error: load library failed: libnvidia-ml.so.1"}})]},
     "triage.stuck-creating"),
    ({"phase": "Running", "containerStatuses": [container(
        restarts=3, state={"waiting": {"reason": "CrashLoopBackOff"}},
        lastState={"terminated": {"reason": "OOMKilled", "exitCode": 137}})]},
     "triage.oom-killed"),
    ({"phase": "Running", "containerStatuses": [container(
        restarts=2, state={"running": {}},
        lastState={"terminated": {"reason": "Error", "exitCode": 137}})]},
     "triage.sigkill-not-oom"),
    ({"phase": "Running", "containerStatuses": [container(
        restarts=9, state={"waiting": {"reason": "CrashLoopBackOff"}},
        lastState={"terminated": {"reason": "Error", "exitCode": 1}})]},
     "triage.crash-looping"),
    ({"phase": "Failed", "reason": "Evicted",
      "message": "The node was low on resource: memory. "},
     "triage.evicted"),
])
def test_each_symptom_reaches_its_family(books: PlaybookSet, status: dict[str, Any],
                                         finding: str) -> None:
    t = router(books, pod_facts(status))
    assert [f.id for f in t.findings] == [finding]
    assert t.visits[-1].outcome is Outcome.CONDITION
    assert t.warnings == ()


def test_running_pod_asks_what_is_wrong(books: PlaybookSet) -> None:
    facts = pod_facts()
    t = router(books, facts)
    assert t.question is not None and t.question.ref == "triage/symptom"
    assert [c.value for c in t.question.choices] == ["hangs", "gpu-errors"]
    t = router(books, facts, answers={"triage/symptom": "gpu-errors"})
    (finding,) = t.findings
    assert finding.id == "triage.gpu-errors-in-log"
    assert finding.fix.commands == (
        "kubectl -n ml logs trainer-0 --tail=200",
        "ssh gpu-node-7 journalctl -k --since -2h --no-pager --grep NVRM",
        "ssh gpu-node-7 nvidia-smi")


def _with_dra(facts: FactSet, uses_dra: bool) -> FactSet:
    dra = FactGroup("dra", True, "", {**facts["dra"].values, "pod_uses_dra": uses_dra})
    return FactSet(facts.target, {**facts.groups, "dra": dra})


def test_pod_without_gpu_request(books: PlaybookSet) -> None:
    no_gpu = {"containers": [{"name": "main", "image": "pytorch",
                              "resources": {"limits": {"memory": "8Gi"}}}]}
    facts = pod_facts(spec=no_gpu)
    t = router(books, _with_dra(facts, False))
    assert [f.id for f in t.findings] == ["triage.no-gpu-requested"]
    t = router(books, _with_dra(facts, True))
    assert t.visits[0].outcome is Outcome.OTHERWISE
    assert t.visits[0].target == "triage/phase"


def test_pod_facts_unknown_is_undetermined(books: PlaybookSet) -> None:
    facts = pod_facts()
    pod = facts["pod"]
    unknown_pod = FactGroup("pod", False, "the pod object (kubectl get pod -o json): forbidden: "
                                          "pods \"trainer-0\" is forbidden", pod.values)
    t = router(books, FactSet(facts.target, {**facts.groups, "pod": unknown_pod}))
    assert t.undetermined
    assert t.findings[0].collect_next == (
        "pod: the pod object (kubectl get pod -o json): forbidden: pods \"trainer-0\" is "
        "forbidden",)
    assert t.visits[0].step == "gpu-request" and t.visits[0].outcome is Outcome.UNKNOWN
