"""Every wording of "why is this pod Pending" that gputriage parses, one real string per row.

Each ``message`` below is copied from the public source named in the comment beside it
(an issue thread that pasted the event, or the upstream file that prints it). The table pins
what :func:`gputriage.parsers.scheduler.parse_scheduler_message` must make of it: which
wording generation and scheduler it recognises and how many nodes it counts per kind. Parsing
rules are general (see the parser); nothing here is matched by a case's unique text.
"""

from __future__ import annotations

from typing import Any

import pytest

from gputriage.evidence.model import LineRef
from gputriage.facts.events import summarise
from gputriage.parsers.scheduler import GENERATIONS, parse_scheduler_message

# (id, message, expected) - expected keys: generation, scheduler, total, recognised, and
# per-kind node counts (insufficient:<resource>, taint, selector, unschedulable, too_many_pods,
# volume, other), taint (key, value) when printed, preemption_helpful.
VARIANTS: list[tuple[str, str, dict[str, Any]]] = [
    # --- k8s <= 1.5: "failed to fit in any node" ---------------------------------------------
    # kubernetes/kubernetes#41070 (title; k8s 1.5)
    (
        "fit-failure-summary",
        "pod failed to fit in any node\nfit failure summary on nodes : PodToleratesNodeTaints (1)",
        {"generation": "fit-failure", "taint": 1},
    ),
    # kubernetes/kubernetes#37232 (k8s 1.4, one line per node)
    (
        "fit-failure-per-node",
        "pod (jenkins-master-645022479-ov9ka) failed to fit in any node\n"
        "fit failure on node (gke-warpdrive-default-pool-eae1f3b0-spgr): Insufficient cpu\n"
        "fit failure on node (gke-warpdrive-default-pool-eae1f3b0-jitr): Insufficient cpu\n"
        "fit failure on node (gke-warpdrive-default-pool-eae1f3b0-3qqu): Insufficient cpu\n"
        "fit failure on node (gke-warpdrive-default-pool-eae1f3b0-530e): Insufficient cpu",
        {"generation": "fit-failure", "total": 4, "insufficient:cpu": 4},
    ),
    # --- k8s ~1.6-1.8: "No nodes are available that match all of the following predicates" ----
    # kubernetes/kubernetes#53465
    (
        "predicates-summary-resource",
        "No nodes are available that match all of the following predicates:: Insufficient cpu (4).",
        {"generation": "predicates-summary", "insufficient:cpu": 4},
    ),
    # kubernetes/kubernetes#49440 (title)
    (
        "predicates-summary-taint",
        "No nodes are available that match all of the following predicates:: "
        "PodFitsHostPorts (1), PodToleratesNodeTaints (1).",
        {"generation": "predicates-summary", "taint": 1, "other": 1},
    ),
    # --- 0/N envelope, predicate names (k8s ~1.9) ---------------------------------------------
    # NVIDIA/k8s-device-plugin#22 (via k8s-messages.md 2.2)
    (
        "predicate-names",
        "0/3 nodes are available: 1 PodToleratesNodeTaints, 3 Insufficient nvidia.com/gpu.",
        {"generation": "predicates", "total": 3, "taint": 1, "insufficient:nvidia.com/gpu": 3},
    ),
    # --- predicate descriptions (k8s ~1.10-1.17) ----------------------------------------------
    # kubernetes/kubernetes#49896 (k8s 1.12 condition message)
    (
        "didnt-match-node-selector",
        "0/10 nodes are available: 10 node(s) didn't match node selector, 4 Insufficient cpu.",
        {
            "generation": "predicate-descriptions",
            "total": 10,
            "selector": 10,
            "insufficient:cpu": 4,
        },
    ),
    # danisla/kubefunc#10
    (
        "had-taints-that-the-pod-didnt-tolerate",
        "0/23 nodes are available: 1 node(s) had taints that the pod didn't tolerate, "
        "22 node(s) didn't match node selector.",
        {"generation": "predicate-descriptions", "total": 23, "taint": 1, "selector": 22},
    ),
    # raffaelespazzoli/openshift-enablement-exam#22
    (
        "had-taints-with-insufficient",
        "0/8 nodes are available: 2 Insufficient cpu, 3 node(s) had taints that the pod didn't "
        "tolerate, 5 node(s) didn't match node selector.",
        {
            "generation": "predicate-descriptions",
            "total": 8,
            "insufficient:cpu": 2,
            "taint": 3,
            "selector": 5,
        },
    ),
    # kubernetes/kubernetes#107194 (k8s 1.17)
    (
        "were-unschedulable",
        "0/5 nodes are available: 2 node(s) were unschedulable, 3 Insufficient pods.",
        {"total": 5, "unschedulable": 2, "too_many_pods": 3},
    ),
    # --- framework, taint printed with key (k8s ~1.18-1.25) -----------------------------------
    # kubeedge/website#272 (review thread)
    (
        "had-taint-kv-that-the-pod-didnt-tolerate",
        "0/1 nodes are available: 1 node(s) had taint {node-role.kubernetes.io/control-plane: }, "
        "that the pod didn't tolerate.",
        {
            "generation": "taint-didnt-tolerate",
            "total": 1,
            "taint": 1,
            "taint_kv": ("node-role.kubernetes.io/control-plane", ""),
        },
    ),
    # Format string of kubernetes/kubernetes
    # pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go @007f7ae7 (1.18:
    # "node(s) had taint {%s: %s}, that the pod didn't tolerate"), instantiated with the GKE
    # GPU taint nvidia.com/gpu=present of vanvalenlab/kiosk-console#81.
    (
        "had-taint-kv-gpu",
        "0/2 nodes are available: 2 node(s) had taint {nvidia.com/gpu: present}, that the pod "
        "didn't tolerate.",
        {
            "generation": "taint-didnt-tolerate",
            "taint": 2,
            "taint_kv": ("nvidia.com/gpu", "present"),
        },
    ),
    # NVIDIA/k8s-device-plugin#33 (1.9-era title), #430 (preemption tail, double period)
    (
        "insufficient-gpu-preemption-victims",
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are "
        "available: 1 No preemption victims found for incoming pod..",
        {
            "generation": "framework",
            "total": 1,
            "insufficient:nvidia.com/gpu": 1,
            "preemption_helpful": True,
        },
    ),
    # awslabs/aws-virtual-gpu-device-plugin#26 (third-party GPU resource name)
    (
        "insufficient-vgpu",
        "0/8 nodes are available: 8 Insufficient k8s.amazonaws.com/vgpu.",
        {"total": 8, "insufficient:k8s.amazonaws.com/vgpu": 8},
    ),
    # --- untolerated taint with key (k8s ~1.26-1.33) ------------------------------------------
    # NVIDIA/k8s-device-plugin#421 (title)
    (
        "untolerated-taint-empty-value",
        "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: }. preemption: 0/1 nodes "
        "are available: 1 Preemption is not helpful for scheduling..",
        {
            "generation": "untolerated-taint",
            "taint": 1,
            "taint_kv": ("gpu", ""),
            "preemption_helpful": False,
        },
    ),
    # hystax/optscale#568
    (
        "untolerated-taint-unreachable",
        "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: "
        "}. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        {
            "generation": "untolerated-taint",
            "taint": 1,
            "taint_kv": ("node.kubernetes.io/unreachable", ""),
        },
    ),
    # --- untolerated taint(s), no key (k8s ~1.34+) --------------------------------------------
    # ErrReasonNotMatch of kubernetes/kubernetes
    # pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go (1.35 source,
    # k8s-messages.md 2.2); this line as pasted in public lab notes (no citable repo path)
    (
        "untolerated-taints-no-key",
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match "
        "Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not "
        "helpful for scheduling.",
        {
            "generation": "untolerated-taints",
            "total": 3,
            "taint": 1,
            "selector": 2,
            "preemption_helpful": False,
        },
    ),
    # --- third-party schedulers ---------------------------------------------------------------
    # volcano-sh/volcano#4511 (title: Volcano's envelope, HAMi vGPU device-sharing plugin)
    (
        "volcano-unavailable",
        "0/1 nodes are unavailable: 1 hami-vgpuDeviceSharing error.",
        {"generation": "volcano", "scheduler": "volcano", "total": 1, "other": 1},
    ),
    # Volcano gang texts name no node reason: attributed to Volcano, never a verdict.
    # volcano-sh/volcano#519 (before v0.3: "job is not ready")
    (
        "volcano-gang-job-not-ready",
        "10/6 tasks in gang unschedulable: job is not ready, 10 minAvailable, 6 Pending.",
        {"recognised": False, "scheduler": "volcano"},
    ),
    # volcano-sh/volcano#520 ("pod group is not ready")
    (
        "volcano-gang-pod-group",
        "10/6 tasks in gang unschedulable: pod group is not ready, 10 minAvailable, 6 Pending.",
        {"recognised": False, "scheduler": "volcano"},
    ),
    # volcano-sh/volcano#2416 (Pending reasons appended)
    (
        "volcano-gang-undetermined",
        "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; "
        "Pending: 1 Undetermined",
        {"recognised": False, "scheduler": "volcano"},
    ),
    # volcano-sh/volcano#4971 (no "tasks in gang" prefix)
    (
        "volcano-gang-no-prefix",
        "pod group is not ready, 1 minAvailable, 7 Running, 89 Pending; Pending: 89 Unschedulable",
        {"recognised": False, "scheduler": "volcano"},
    ),
    # volcano-sh/volcano#604 (PodGroup condition)
    (
        "volcano-gang-zero-nodes",
        "1/0 tasks in gang unschedulable: 0 nodes are available",
        {"recognised": False, "scheduler": "volcano"},
    ),
    # Project-HAMi/HAMi#602 (FilteringFailed event from hami-scheduler)
    (
        "hami-all-node-scores",
        "no available node, all node scores do not meet",
        {"generation": "hami", "scheduler": "hami-scheduler"},
    ),
    # Format of Project-HAMi/HAMi pkg/scheduler/scheduler.go FilteringFailed ("no available
    # node, %d nodes do not meet", k8s-messages.md 2.6), instantiated
    (
        "hami-n-nodes",
        "no available node, 3 nodes do not meet",
        {"generation": "hami", "scheduler": "hami-scheduler", "total": 3, "other": 3},
    ),
    # Format "%d nodes %s(%s)" with a reason code of Project-HAMi/HAMi pkg/device/common/
    # common.go (listed in Project-HAMi/website#767), instantiated
    (
        "hami-card-insufficient-memory",
        "1 nodes CardInsufficientMemory(node-a)",
        {"generation": "hami", "scheduler": "hami-scheduler", "insufficient:nvidia.com/gpumem": 1},
    ),
    # Project-HAMi/HAMi#1413 (hami-scheduler embeds kube-scheduler: the k8s envelope)
    (
        "hami-embedded-kube-scheduler",
        "0/1 nodes are available: 1 Insufficient huawei.com/Ascend910B3-memory. preemption: 0/1 "
        "nodes are available: 1 No preemption victims found for incoming pod.",
        {"generation": "framework", "insufficient:huawei.com/Ascend910B3-memory": 1},
    ),
    # kai-scheduler/KAI-Scheduler#39 (Unschedulable event from kai-scheduler)
    (
        "kai-gpus",
        "No nodes with enough resources were found: 2 node(s) didn't have enough resources: GPUs.",
        {"generation": "kai", "scheduler": "kai-scheduler", "insufficient:nvidia.com/gpu": 2},
    ),
    # kai-scheduler/KAI-Scheduler#256 (GPU-memory fraction on a node KAI sees no GPU on)
    (
        "kai-not-a-gpu-node",
        "no nodes with enough resources were found: 1 node is not a gpu node or the gpu memory "
        "count on the node was not synced yet, task: <default/gpu-memory>, node: <minikube>.",
        {"generation": "kai", "scheduler": "kai-scheduler", "other": 1},
    ),
    # kai-scheduler/KAI-Scheduler#577 (gang of DRA pods, PodGroup condition)
    (
        "kai-gang-dra",
        "PodSchedulingErrors: Resources were found for 5 pods while 17 are required for gang "
        "scheduling. Additional pods cannot be scheduled due to: no nodes with enough resources "
        "were found: 12 cannot allocate all claims.",
        {"generation": "kai", "scheduler": "kai-scheduler", "dra": 12},
    ),
    # KAI with a MIG profile and an RDMA resource (observed, k8s-messages.md 2.6)
    (
        "kai-mig-profile",
        "Resources were not found for pod ns/p due to: no nodes with enough resources were found: "
        "1 node(s) didn't have enough resources: rdma/shared_mlx5.\n6 node(s) didn't have enough "
        "of mig profile: nvidia.com/mig-1g.5gb.",
        {
            "generation": "kai",
            "scheduler": "kai-scheduler",
            "insufficient:rdma/shared_mlx5": 1,
            "insufficient:nvidia.com/mig-1g.5gb": 6,
        },
    ),
    # cluster-autoscaler NotTriggerScaleUp (k8s-messages.md 2.5)
    (
        "autoscaler",
        "pod didn't trigger scale-up: 1 max node group size reached, 2 node(s) didn't match Pod's "
        "node affinity/selector, 1 Insufficient nvidia.com/mig-1g.10gb",
        {
            "generation": "autoscaler",
            "scheduler": "cluster-autoscaler",
            "selector": 2,
            "insufficient:nvidia.com/mig-1g.10gb": 1,
        },
    ),
    # tkestack/gpu-manager#24 (tkestack gpu-admission extender reason inside the k8s envelope)
    (
        "tkestack-quota",
        "0/2 nodes are available: 2 ExceedsGPUQuota.",
        {"generation": "framework", "total": 2, "other": 2},
    ),
]

_KINDS = ("taint", "selector", "unschedulable", "too_many_pods", "volume", "dra", "other")


@pytest.mark.parametrize(
    ("message", "expected"), [(m, e) for _, m, e in VARIANTS], ids=[i for i, _, _ in VARIANTS]
)
def test_scheduler_wording_variant(message: str, expected: dict[str, Any]) -> None:
    parsed = parse_scheduler_message(message)
    assert parsed.recognised is expected.get("recognised", True)
    if "generation" in expected:
        assert parsed.generation == expected["generation"]
        assert parsed.generation in GENERATIONS
    assert parsed.scheduler == expected.get("scheduler", "kube-scheduler")
    if "total" in expected:
        assert parsed.total_nodes == expected["total"]
    insufficient = parsed.insufficient()
    for key, count in expected.items():
        if key.startswith("insufficient:"):
            assert insufficient.get(key.split(":", 1)[1]) == count, insufficient
        elif key in _KINDS:
            assert parsed.count(key) == count, [r.to_dict() for r in parsed.reasons]
    if "taint_kv" in expected:
        taints = [(r.taint_key, r.taint_value) for r in parsed.reasons if r.kind == "taint"]
        assert expected["taint_kv"] in taints
    if "preemption_helpful" in expected:
        assert parsed.preemption is not None
        assert parsed.preemption.helpful is expected["preemption_helpful"]


def test_every_generation_has_a_real_variant() -> None:
    """A generation nobody can show a real string for is dead code; one with no row is untested."""
    seen = {e["generation"] for _, _, e in VARIANTS if "generation" in e}
    seen |= {parse_scheduler_message(m).generation for _, m, _ in VARIANTS}
    assert set(GENERATIONS) <= seen, set(GENERATIONS) - seen


def test_taint_only_fragment_without_envelope() -> None:
    """vllm-project/aibrix#909 pasted the reason without its envelope: not recognised as a
    scheduler message, but the taint it names is still read."""
    parsed = parse_scheduler_message("1 node(s) had untolerated taint {nvidia.com/gpu: present}")
    assert not parsed.recognised
    assert [(r.kind, r.taint_key, r.taint_value) for r in parsed.reasons] == [
        ("taint", "nvidia.com/gpu", "present")
    ]


# Scheduling-failure events of each scheduler: (id, reason, component, message)
EVENT_VARIANTS: list[tuple[str, str, str, str]] = [
    # kai-scheduler/KAI-Scheduler#39 ("Warning  Unschedulable  kai-scheduler  ...")
    (
        "kai-unschedulable",
        "Unschedulable",
        "kai-scheduler",
        "No nodes with enough resources were found: 2 node(s) didn't have enough resources: GPUs.",
    ),
    # Project-HAMi/HAMi#602 (event recorder log: reason="FilteringFailed")
    (
        "hami-filtering-failed",
        "FilteringFailed",
        "hami-scheduler",
        "no available node, all node scores do not meet",
    ),
    # volcano-sh/volcano#2416 ("FailedScheduling ... volcano")
    (
        "volcano-failed-scheduling",
        "FailedScheduling",
        "volcano",
        "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; "
        "Pending: 1 Undetermined",
    ),
    # Project-HAMi/HAMi#1413 (hami-scheduler speaking kube-scheduler's envelope)
    (
        "hami-kube-envelope",
        "FailedScheduling",
        "hami-scheduler",
        "0/1 nodes are available: 1 Insufficient huawei.com/Ascend910B3-memory. preemption: 0/1 "
        "nodes are available: 1 No preemption victims found for incoming pod.",
    ),
]


@pytest.mark.parametrize(
    ("reason", "component", "message"),
    [(r, c, m) for _, r, c, m in EVENT_VARIANTS],
    ids=[i for i, *_ in EVENT_VARIANTS],
)
def test_scheduling_failure_event_of_every_scheduler(
    reason: str, component: str, message: str
) -> None:
    record = {
        "type": "Warning",
        "reason": reason,
        "message": message,
        "count": 1,
        "first": "",
        "last": "",
        "age": "",
        "source": component,
        "line": 3,
    }
    values, cites = summarise([(record, LineRef("events", "events.json", 3, message))])
    assert values["failed_scheduling"] == message
    assert values["failed_scheduling_source"] == component
    assert values["failed_scheduling_reason"] == reason
    assert cites["failed_scheduling"][0].line == 3
    assert values["admission_errors"] == []
