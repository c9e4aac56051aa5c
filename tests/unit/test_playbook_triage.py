"""The shipped router (``playbooks/triage.yaml``) against facts built by the real builders from
pod objects shaped like ``kubectl get pod -o json`` (and, for the shared ``signature`` step, the
container log and node evidence next to them): each symptom is handed to its family playbook,
and what the family makes of the pod alone is what it concludes or asks for."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gputriage.evidence.bundle import decode
from gputriage.evidence.model import Evidence, EvidenceSet, Key
from gputriage.facts.build import build_facts
from gputriage.facts.model import FactGroup, FactSet
from gputriage.facts.registry import known_paths
from gputriage.playbook.engine import walk
from gputriage.playbook.loader import load_playbooks
from gputriage.playbook.model import UNDETERMINED, PlaybookSet
from gputriage.playbook.transcript import Outcome, Transcript

UID = "0b4f6e1c-6a3e-4c55-9d1e-3a7f5c2e8b14"
POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer-0", "namespace": "ml", "uid": UID},
    "spec": {
        "nodeName": "gpu-node-7",
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "resources": {
                    "limits": {"nvidia.com/gpu": "2", "memory": "64Gi"},
                    "requests": {"nvidia.com/gpu": "2", "memory": "64Gi"},
                },
            }
        ],
    },
    "status": {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [
            {
                "name": "main",
                "ready": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": "2025-03-04T02:00:00Z"}},
            }
        ],
    },
}

ROUTER_STEPS = [
    "gpu-request",
    "phase",
    "partial-pod",
    "signature",
    "no-signature",
    "unexplained",
    "symptom",
]


@pytest.fixture(scope="module")
def books() -> PlaybookSet:
    result = load_playbooks(user_config=False)
    assert [str(p) for p in result.problems] == []
    assert "triage" in result.playbooks
    return result


def pod_blob(
    status: dict[str, Any] | None = None,
    *,
    spec: dict[str, Any] | None = None,
    node: str | None = "gpu-node-7",
) -> bytes:
    pod = copy.deepcopy(POD)
    if status is not None:
        pod["status"] = status
    if spec is not None:
        pod["spec"].update(spec)
    if node is None:
        del pod["spec"]["nodeName"]
    return json.dumps(pod, indent=2).encode()


def pod_facts(
    status: dict[str, Any] | None = None,
    *,
    spec: dict[str, Any] | None = None,
    node: str | None = "gpu-node-7",
    extra: tuple[Evidence, ...] = (),
) -> FactSet:
    pod = decode(Key.POD, pod_blob(status, spec=spec, node=node), source="bundle/pod.json")
    return build_facts(EvidenceSet([pod, *extra]))


def router(books: PlaybookSet, facts: FactSet, **kw: Any) -> Transcript:
    return walk(books, facts, entry="triage", **kw)


def refs(t: Transcript) -> list[str]:
    return [v.ref for v in t.visits]


def container(**state: Any) -> dict[str, Any]:
    return {"name": "main", "ready": False, "restartCount": state.pop("restarts", 0), **state}


def test_shipped_router_is_valid_against_the_registered_fact_fields() -> None:
    result = load_playbooks(user_config=False, known_facts=known_paths())
    assert result.problems == ()
    book = result.playbooks["triage"]
    assert book.shipped and book.maturity == "beta"
    assert list(book.steps) == ROUTER_STEPS
    assert sorted(book.findings) == [
        "triage.crash-looping",
        "triage.gpu-errors-in-log",
        "triage.no-gpu-requested",
    ]
    # Every other way out of the router is a hand-off to a family playbook.
    handoffs = {
        t.playbook
        for s in book.steps.values()
        for t in s.targets()
        if not t.conclude and t.playbook != "triage"
    }
    assert handoffs == {
        "create",
        "lost-card",
        "oom",
        "pending",
        "pending-admission",
        "pending-device-plugin",
        "slow",
    }


def test_the_signature_branches_are_written_once(books: PlaybookSet) -> None:
    book = books.playbooks["triage"]
    conditions = [b.when.source for s in book.steps.values() for b in s.branches]
    assert len(conditions) == len(set(conditions))
    assert len(book.steps["signature"].branches) == 9
    assert sum("kernel.xid_codes" in c for c in conditions) == 1


def test_unscheduled_pending_pod_goes_to_pending(books: PlaybookSet) -> None:
    facts = pod_facts(
        {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
                }
            ],
        },
        node=None,
    )
    t = router(books, facts)
    assert [(v.ref, v.outcome) for v in t.visits[:3]] == [
        ("triage/gpu-request", Outcome.CONDITION),
        ("triage/phase", Outcome.CONDITION),
        ("pending/scheduler", Outcome.CONDITION),
    ]
    assert t.visits[0].because == "the pod requests nvidia.com/gpu=2"
    assert t.visits[1].target == "pending/scheduler"
    # The visit cites the pod.json line behind pod.phase, and (`cite:`) the condition message.
    assert [(r.source, r.text) for r in t.visits[1].citations] == [
        ("bundle/pod.json", '"phase": "Pending",'),
        ("bundle/pod.json", '"message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."'),
    ]
    # With only the pod object, the pending family says what it needs to decide.
    (finding,) = t.findings
    assert finding.id == UNDETERMINED and finding.undetermined
    assert [c.split(":")[0] for c in finding.collect_next] == ["cluster", "device_plugin", "node"]


def test_admission_rejected_pod_from_a_real_case(books: PlaybookSet, corpus_dir: Path) -> None:
    case = yaml.safe_load(
        (
            corpus_dir / "k8s" / "cases" / "lost-004-k8sdp-231-gpu-is-lost-blocks-whole-node.yaml"
        ).read_text()
    )
    status = case["pod_status"]
    facts = pod_facts(
        {"phase": status["phase"], "reason": status["reason"], "message": status["message"]}
    )
    t = router(books, facts)
    assert refs(t) == [
        "triage/gpu-request",
        "triage/phase",
        "create/symptom",
        "create/admission",
        "create/lost-gpu",
    ]
    assert t.visits[1].because == (
        "the kubelet on gpu-node-7 rejected the pod at admission (UnexpectedAdmissionError)"
    )
    assert "GPU is lost" in t.visits[3].because
    (finding,) = t.findings
    assert finding.id == "lost.gpu-unreachable" and finding.severity == "critical"
    assert any(
        r.source == "bundle/pod.json" and "GPU is lost" in r.text
        for v in t.visits
        for r in v.citations
    )


@pytest.mark.parametrize(
    ("status", "path", "verdict"),
    [
        (
            {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [
                    container(state={"waiting": {"reason": "ContainerCreating"}})
                ],
            },
            ["triage/phase", "create/symptom"],
            UNDETERMINED,
        ),
        (
            {
                "phase": "Running",
                "containerStatuses": [
                    container(
                        restarts=6,
                        state={"waiting": {"reason": "CrashLoopBackOff"}},
                        lastState={
                            "terminated": {
                                "reason": "StartError",
                                "exitCode": 128,
                                "message": "failed to create containerd task: ... nvidia-container-cli: initialization "
                                "error: load library failed: libnvidia-ml.so.1",
                            }
                        },
                    )
                ],
            },
            [
                "triage/phase",
                "create/symptom",
                "create/hook-error",
                "create/hook-node",
                "node-onboarding/driver",
            ],
            "node.driver-libraries-missing",
        ),
        (
            {
                "phase": "Running",
                "containerStatuses": [
                    container(
                        restarts=3,
                        state={"waiting": {"reason": "CrashLoopBackOff"}},
                        lastState={"terminated": {"reason": "OOMKilled", "exitCode": 137}},
                    )
                ],
            },
            ["triage/phase", "oom/what-failed", "oom/host-oom"],
            "oom.container-memory-limit-exceeded",
        ),
        (
            {
                "phase": "Running",
                "containerStatuses": [
                    container(
                        restarts=2,
                        state={"running": {}},
                        lastState={"terminated": {"reason": "Error", "exitCode": 137}},
                    )
                ],
            },
            ["triage/phase", "oom/sigkill"],
            "question:oom/sigkill",
        ),
        (
            {
                "phase": "Running",
                "containerStatuses": [
                    container(
                        restarts=9,
                        state={"waiting": {"reason": "CrashLoopBackOff"}},
                        lastState={"terminated": {"reason": "Error", "exitCode": 1}},
                    )
                ],
            },
            ["triage/phase", "triage/signature", "triage/no-signature", "triage/unexplained"],
            UNDETERMINED,
        ),
        (
            {
                "phase": "Failed",
                "reason": "Evicted",
                "message": "The node was low on resource: memory. ",
            },
            ["triage/phase", "oom/eviction"],
            "oom.node-out-of-memory",
        ),
    ],
    ids=["creating", "hook-error", "oom-killed", "sigkill", "crash-loop", "evicted"],
)
def test_each_symptom_reaches_its_family(
    books: PlaybookSet, status: dict[str, Any], path: list[str], verdict: str
) -> None:
    t = router(books, pod_facts(status))
    assert refs(t) == ["triage/gpu-request", *path]
    assert t.visits[1].outcome is Outcome.CONDITION
    if verdict.startswith("question:"):
        assert not t.findings and t.question is not None
        assert t.question.ref == verdict.removeprefix("question:")
    else:
        assert [f.id for f in t.findings] == [verdict]
    assert t.warnings == ()


# The shared `signature` step, reached from every pod state whose status names no cause: each
# failure signature sends the walk to the same family step whichever way the pod came in.
CRASH_LOOP = {
    "phase": "Running",
    "containerStatuses": [
        container(
            restarts=4,
            state={"waiting": {"reason": "CrashLoopBackOff"}},
            lastState={"terminated": {"reason": "Error", "exitCode": 1}},
        )
    ],
}
FAILED = {
    "phase": "Failed",
    "containerStatuses": [container(state={"terminated": {"reason": "Error", "exitCode": 2}})],
}
RUNNING = POD["status"]
PARTIAL = {"containerStatuses": [container(state={"waiting": {"reason": "CrashLoopBackOff"}})]}

MEMCG = (
    f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
    f"{UID.replace('-', '_')}.slice/cri-containerd-{'c0ffee' * 10}abcd.scope"
)
SIGNATURES: dict[str, tuple[Key, str, str]] = {
    "cuda-oom": (
        Key.CONTAINER_LOG_PREVIOUS,
        "torch.OutOfMemoryError: CUDA out of memory. Tried "
        "to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)",
        "oom/what-failed",
    ),
    "dataloader": (
        Key.CONTAINER_LOG_PREVIOUS,
        "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.",
        "oom/what-failed",
    ),
    "cgroup-oom": (
        Key.DMESG,
        f"[ 912.4] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),"
        f"oom_memcg={MEMCG},task_memcg={MEMCG},task=python,pid=4242,uid=0",
        "oom/what-failed",
    ),
    "nvml": (Key.CONTAINER_LOG, "Failed to initialize NVML: Unknown Error", "create/in-container"),
    "cdi": (
        Key.CONTAINER_LOG_PREVIOUS,
        "unresolvable CDI devices nvidia.com/gpu=all: unknown",
        "create/symptom",
    ),
    "xid": (
        Key.DMESG,
        "[ 912.4] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
        "name=<unknown>, GPU has fallen off the bus.",
        "lost-card/reachable",
    ),
    "smi": (
        Key.NVIDIA_SMI,
        "Unable to determine the device handle for GPU 0000:3B:00.0: GPU is "
        "lost.  Reboot the system to recover this GPU",
        "lost-card/reachable",
    ),
    "plugin": (
        Key.DEVICE_PLUGIN_LOG,
        "I0304 02:00:01.000000 1 health.go:1] XidCriticalError: "
        "Xid=48 on Device=GPU-5f2d3c9e-8a41-7b6e-92c1-4d0e8f7a6b13, the device will go "
        "unhealthy.",
        "lost-card/reachable",
    ),
}


@pytest.mark.parametrize("signature", sorted(SIGNATURES))
@pytest.mark.parametrize(
    ("status", "node", "before"),
    [
        (CRASH_LOOP, "gpu-node-7", ["triage/gpu-request", "triage/phase"]),
        (FAILED, "gpu-node-7", ["triage/gpu-request", "triage/phase"]),
        (RUNNING, "gpu-node-7", ["triage/gpu-request", "triage/phase"]),
        (PARTIAL, None, ["triage/gpu-request", "triage/partial-pod", "triage/phase"]),
    ],
    ids=["crash-loop", "failed", "running", "partial-pod"],
)
def test_every_signature_is_read_in_one_step(
    books: PlaybookSet, signature: str, status: dict[str, Any], node: str | None, before: list[str]
) -> None:
    key, line, family_step = SIGNATURES[signature]
    spec = {"containers": [{"name": "main"}]} if status is PARTIAL else None
    source = f"bundle/{key.value}.log"
    facts = pod_facts(
        status, spec=spec, node=node, extra=(decode(key, f"{line}\n".encode(), source=source),)
    )
    t = router(books, facts)
    assert refs(t)[: len(before) + 2] == [*before, "triage/signature", family_step]
    visit = t.visits[len(before)]
    assert visit.outcome is Outcome.CONDITION and visit.target == family_step
    assert any(r.source == source for r in visit.citations), visit.citations
    assert t.warnings == ()


@pytest.mark.parametrize(
    ("status", "node", "spec", "after"),
    [
        (PARTIAL, None, {"containers": [{"name": "main"}]}, "pending/scheduler"),
        (CRASH_LOOP, "gpu-node-7", None, "triage/unexplained"),
        (FAILED, "gpu-node-7", None, "triage/unexplained"),
        (RUNNING, "gpu-node-7", None, "triage/symptom"),
    ],
    ids=["partial-pod", "crash-loop", "failed", "running"],
)
def test_without_a_signature_the_status_decides(
    books: PlaybookSet,
    status: dict[str, Any],
    node: str | None,
    spec: dict[str, Any] | None,
    after: str,
) -> None:
    log = decode(Key.CONTAINER_LOG, b"epoch 3 step 1200 loss 0.41\n", source="bundle/c.log")
    t = router(books, pod_facts(status, spec=spec, node=node, extra=(log,)))
    ref = refs(t)
    at = ref.index("triage/no-signature")
    assert ref[at - 1] == "triage/signature" and ref[at + 1] == after
    assert t.visits[at - 1].outcome is Outcome.OTHERWISE
    assert len(ref) == len(set(ref)) and t.warnings == ()
    if after == "triage/unexplained" and status is CRASH_LOOP:
        assert [f.id for f in t.findings] == ["triage.crash-looping"]


def test_running_pod_asks_what_is_wrong(books: PlaybookSet) -> None:
    facts = pod_facts()
    t = router(books, facts)
    assert t.question is not None and t.question.ref == "triage/symptom"
    assert [c.value for c in t.question.choices] == ["hangs", "slow", "gpu-errors"]
    assert [c.target for c in t.question.choices] == [
        "lost-card/reachable",
        "slow/admission",
        "finding:triage.gpu-errors-in-log",
    ]
    t = router(books, facts, answers={"triage/symptom": "gpu-errors"})
    (finding,) = t.findings
    assert finding.id == "triage.gpu-errors-in-log"
    assert finding.fix.commands == (
        "kubectl -n ml logs trainer-0 --tail=200",
        "ssh gpu-node-7 journalctl -k --since -2h --no-pager --grep NVRM",
        "ssh gpu-node-7 nvidia-smi",
    )
    t = router(books, facts, answers={"triage/symptom": "hangs"})
    assert refs(t)[-1] == "lost-card/healthy" and t.undetermined


def _with_dra(facts: FactSet, uses_dra: bool) -> FactSet:
    dra = FactGroup("dra", True, "", {**facts["dra"].values, "pod_uses_dra": uses_dra})
    return FactSet(facts.target, {**facts.groups, "dra": dra})


def test_pod_without_gpu_request(books: PlaybookSet) -> None:
    no_gpu = {
        "containers": [
            {"name": "main", "image": "pytorch", "resources": {"limits": {"memory": "8Gi"}}}
        ]
    }
    # No GPU asked for is only a verdict when the failure is a container that sees no GPU.
    no_device = decode(
        Key.CONTAINER_LOG,
        b"RuntimeError: CUDA error: no CUDA-capable device is detected\n",
        source="bundle/container.log",
    )
    facts = pod_facts(spec=no_gpu, extra=(no_device,))
    t = router(books, _with_dra(facts, False))
    assert [f.id for f in t.findings] == ["triage.no-gpu-requested"]
    t = router(books, _with_dra(facts, True))
    assert t.visits[0].outcome is Outcome.OTHERWISE
    assert t.visits[0].target == "triage/phase"
    # Without that failure, the walk reads the pod's status instead of blaming the spec.
    t = router(books, _with_dra(pod_facts(spec=no_gpu), False))
    assert t.visits[0].target == "triage/phase"
    assert "triage.no-gpu-requested" not in [f.id for f in t.findings]
    # A pod of the GPU stack requests no GPU but runs with the NVIDIA runtime: GPU-involved.
    stack = {**no_gpu, "runtimeClassName": "nvidia"}
    facts = pod_facts(spec=stack, extra=(no_device,))
    assert facts["pod"].values["gpu_involved"]
    t = router(books, _with_dra(facts, False))
    assert t.visits[0].target == "triage/phase"
    # A pod without a GPU limit whose log asks for CDI devices is a GPU pod all the same.
    cdi = decode(
        Key.CONTAINER_LOG_PREVIOUS,
        b"unresolvable CDI devices management.nvidia.com/gpu=all: unknown\n",
        source="bundle/container-previous.log",
    )
    t = router(books, _with_dra(pod_facts(spec=no_gpu, extra=(cdi,)), False))
    assert t.visits[0].target == "triage/phase"


def test_pod_facts_unknown_is_undetermined(books: PlaybookSet) -> None:
    facts = pod_facts()
    pod = facts["pod"]
    unknown_pod = FactGroup(
        "pod",
        False,
        'the pod object (kubectl get pod -o json): forbidden: pods "trainer-0" is forbidden',
        pod.values,
    )
    t = router(books, FactSet(facts.target, {**facts.groups, "pod": unknown_pod}))
    assert t.undetermined
    # The router reads the failure before the spec: the walk stops at the first step that
    # cannot go on without the pod object, and says to collect it.
    assert t.findings[0].collect_next[0] == (
        'pod: the pod object (kubectl get pod -o json): forbidden: pods "trainer-0" is forbidden'
    )
    assert t.visits[-1].outcome is Outcome.UNKNOWN
