"""Facts the Pending playbooks need: who holds GPUs and since when, what each GPU node would
offer once Terminating pods are gone, selector/affinity and taint fit per node, and scheduling
failures from schedulers other than kube-scheduler (KAI, Volcano, HAMi)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gputriage.evidence.kube import GPU_PODS_SCOPE
from gputriage.evidence.model import Evidence, EvidenceSet, Key
from gputriage.facts.cluster import CLUSTER_GPU_PODS
from gputriage.facts.evidence_clock import parse_time, reference_time, rfc3339
from gputriage.facts.node_affinity import matches
from tests.unit.k8s_evidence import groups, text

A100 = "NVIDIA-A100-SXM4-80GB"
HEARTBEAT = "2026-03-02T09:00:00Z"


def as_json(key: Key, obj: Any, name: str) -> Evidence:
    return text(key, json.dumps(obj, indent=4), name)


def pending_pod(
    *,
    gpus: int = 2,
    scheduler: str | None = None,
    selector: dict[str, str] | None = None,
    terms: list[list[dict[str, Any]]] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
) -> Evidence:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "train",
                "image": "cuda",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ],
        "tolerations": tolerations
        if tolerations is not None
        else [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    if selector:
        spec["nodeSelector"] = selector
    if terms is not None:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
                }
            }
        }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-0",
            "namespace": "ml",
            "creationTimestamp": "2026-03-02T08:00:00Z",
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }
    return as_json(Key.POD, pod, "pod.json")


def node(
    name: str,
    *,
    gpus: int = 8,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": A100,
                "nvidia.com/gpu.count": str(gpus),
                **(labels or {}),
            },
        },
        "spec": {
            **({"taints": taints} if taints else {}),
            **({"unschedulable": True} if unschedulable else {}),
        },
        "status": {
            "capacity": {"nvidia.com/gpu": str(gpus)},
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastHeartbeatTime": HEARTBEAT,
                    "lastTransitionTime": "2026-03-01T00:00:00Z",
                }
            ],
        },
    }


def nodes(*items: dict[str, Any]) -> Evidence:
    return as_json(
        Key.NODES, {"apiVersion": "v1", "kind": "NodeList", "items": list(items)}, "nodes.json"
    )


def holder(
    name: str,
    on: str,
    gpus: int,
    *,
    deleted: str = "",
    phase: str = "Running",
    finalizers: list[str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "research",
        "creationTimestamp": "2026-03-01T12:00:00Z",
    }
    if deleted:
        meta["deletionTimestamp"] = deleted
    if finalizers:
        meta["finalizers"] = finalizers
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": on,
            "containers": [
                {"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
            ],
        },
        "status": {"phase": phase},
    }


def node_pods(*items: dict[str, Any], cluster_wide: bool = False) -> Evidence:
    listing: dict[str, Any] = {"apiVersion": "v1", "kind": "PodList", "items": list(items)}
    if cluster_wide:
        listing["gputriage"] = {"scope": CLUSTER_GPU_PODS}
    return as_json(Key.NODE_PODS, listing, "node-pods.json")


# -- the pod's scheduler -------------------------------------------------------------------


def test_scheduler_name_defaults_like_the_api_server() -> None:
    assert groups(pending_pod())["pod"].values["scheduler_name"] == "default-scheduler"
    pod = groups(pending_pod(scheduler="volcano"))["pod"]
    assert pod.values["scheduler_name"] == "volcano"
    assert pod.cites["scheduler_name"][0].text == '"schedulerName": "volcano"'


# -- holders, Terminating pods and the evidence's clock -------------------------------------


def test_holders_say_since_when_they_are_terminating() -> None:
    built = groups(
        pending_pod(),
        nodes(node("gpu-a")),
        node_pods(
            holder("job-1", "gpu-a", 4),
            holder(
                "stuck-1",
                "gpu-a",
                2,
                deleted="2026-03-02T08:50:00Z",
                finalizers=["example.com/checkpoint", "batch.kubernetes.io/job-tracking"],
            ),
            # deleted 30 s before the heartbeat with a 60 s grace period: not overdue yet
            holder("leaving-1", "gpu-a", 1, deleted="2026-03-02T09:00:30Z"),
            holder("done-1", "gpu-a", 8, phase="Succeeded"),
        ),
    )
    cluster = built["cluster"]
    by_name = {h["name"]: h for h in cluster.values["holders"]}
    assert list(by_name) == ["job-1", "stuck-1", "leaving-1"]
    assert (
        by_name["job-1"]["terminating"],
        by_name["job-1"]["deletion_timestamp"],
        by_name["job-1"]["terminating_for_s"],
        by_name["job-1"]["finalizers"],
    ) == (False, "", 0, [])
    stuck = by_name["stuck-1"]
    assert (stuck["terminating"], stuck["deletion_timestamp"], stuck["terminating_for_s"]) == (
        True,
        "2026-03-02T08:50:00Z",
        600,
    )
    assert stuck["finalizers"] == ["example.com/checkpoint", "batch.kubernetes.io/job-tracking"]
    assert by_name["leaving-1"]["terminating_for_s"] == 0
    # the node heartbeat is the newest time; a future deletionTimestamp never is
    assert cluster.values["reference_time"] == HEARTBEAT
    assert (cluster.values["terminating_holders"], cluster.values["gpus_held_by_terminating"]) == (
        2,
        3,
    )
    assert [r.text for r in cluster.cites["gpus_held_by_terminating"]] == [
        '"name": "stuck-1",',
        '"name": "leaving-1",',
    ]


def test_reference_time_reads_every_kind_of_timestamp() -> None:
    event = {
        "type": "Warning",
        "reason": "FailedScheduling",
        "message": "m",
        "involvedObject": {"kind": "Pod", "name": "train-0"},
        "lastTimestamp": "2026-03-02T09:10:00Z",
    }
    started = holder("job-1", "gpu-a", 1)
    started["status"]["containerStatuses"] = [
        {"name": "main", "state": {"running": {"startedAt": "2026-03-02T09:20:00.5Z"}}}
    ]
    evidence = EvidenceSet([pending_pod(), nodes(node("gpu-a"))])
    assert rfc3339(reference_time(evidence)) == HEARTBEAT
    with_event = evidence.with_evidence(
        as_json(Key.EVENTS, {"kind": "EventList", "items": [event]}, "events.json")
    )
    assert rfc3339(reference_time(with_event)) == "2026-03-02T09:10:00Z"
    with_pods = with_event.with_evidence(node_pods(started))
    assert reference_time(with_pods) == parse_time("2026-03-02T09:20:00.5Z")
    assert reference_time(EvidenceSet()) is None
    assert (parse_time("yesterday"), parse_time(None), parse_time("2026-03-02T09:00:00")) == (
        None,
        None,
        parse_time(HEARTBEAT),
    )  # no zone: UTC, as the API always means


def test_free_gpus_if_terminating_pods_were_gone() -> None:
    built = groups(
        pending_pod(gpus=2),
        nodes(
            node("gpu-a"),
            node(
                "gpu-b", taints=[{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}]
            ),
            node("gpu-c", unschedulable=True),
            node("gpu-d"),
        ),
        node_pods(
            holder("job-1", "gpu-a", 6),
            holder("stuck-1", "gpu-a", 2, deleted="2026-03-02T08:00:00Z"),
            holder("job-2", "gpu-b", 6),
            holder("stuck-2", "gpu-b", 2, deleted="2026-03-02T08:00:00Z"),
            holder("stuck-3", "gpu-c", 8, deleted="2026-03-02T08:00:00Z"),
        ),
    )
    v = built["cluster"].values
    by_name = {n["name"]: n for n in v["gpu_nodes"]}
    assert (by_name["gpu-a"]["free"], by_name["gpu-a"]["free_if_terminating_gone"]) == (
        {"nvidia.com/gpu": 0},
        {"nvidia.com/gpu": 2},
    )
    assert by_name["gpu-b"]["free_if_terminating_gone"] == {"nvidia.com/gpu": 2}
    assert by_name["gpu-c"]["free_if_terminating_gone"] == {"nvidia.com/gpu": 8}
    # a hand-made list covers only the nodes its pods are on
    assert (
        by_name["gpu-d"]["requested"],
        by_name["gpu-d"]["free"],
        by_name["gpu-d"]["free_if_terminating_gone"],
    ) == (None, None, None)
    assert v["holders_cluster_wide"] is False
    # gpu-b is tainted against the pod and gpu-c cordoned: only gpu-a would take it
    assert v["nodes_fit_if_terminating_gone"] == 1
    assert v["nodes_with_enough_free"] == 0
    assert v["gpu_nodes_untolerated_taints"] == [
        {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}
    ]
    assert built["cluster"].cites["nodes_fit_if_terminating_gone"][0].text == '"name": "stuck-1",'


def test_a_cluster_wide_holder_list_covers_every_gpu_node() -> None:
    evidence = (pending_pod(gpus=4), nodes(node("gpu-a"), node("gpu-d"), node("gpu-e", gpus=4)))
    pods = (
        holder("job-1", "gpu-a", 6),
        holder("stuck-1", "gpu-a", 2, deleted="2026-03-02T08:00:00Z"),
    )
    v = groups(*evidence, node_pods(*pods, cluster_wide=True))["cluster"].values
    by_name = {n["name"]: n for n in v["gpu_nodes"]}
    assert v["holders_cluster_wide"] is True
    assert (by_name["gpu-d"]["requested"], by_name["gpu-d"]["free"], by_name["gpu-d"]["fits"]) == (
        {},
        {"nvidia.com/gpu": 8},
        True,
    )
    assert by_name["gpu-e"]["free_if_terminating_gone"] == {"nvidia.com/gpu": 4}
    assert v["total_free"] == {"nvidia.com/gpu": 12}
    assert (v["nodes_with_enough_free"], v["nodes_fit_if_terminating_gone"]) == (2, 0)
    # the same pods without the marker leave gpu-d and gpu-e unknown
    plain = groups(*evidence, node_pods(*pods))["cluster"].values
    assert [n["free"] for n in plain["gpu_nodes"]] == [{"nvidia.com/gpu": 0}, None, None]
    assert GPU_PODS_SCOPE == CLUSTER_GPU_PODS  # what the collector writes is what facts read


# -- node selector and affinity --------------------------------------------------------------

LABELS = {"pool": "train", "nvidia.com/gpu.count": "8", "zone": "a"}


@pytest.mark.parametrize(
    ("selector", "terms", "expected"),
    [
        ({}, [], True),
        ({"pool": "train"}, [], True),
        ({"pool": "infer"}, [], False),
        ({"missing": ""}, [], False),
        ({}, [[("pool", "In", ["train", "batch"])]], True),
        ({}, [[("pool", "In", ["batch"])]], False),
        ({}, [[("pool", "NotIn", ["batch"])]], True),
        ({}, [[("other", "NotIn", ["x"])]], True),  # NotIn matches a missing label
        ({}, [[("pool", "Exists", [])]], True),
        ({}, [[("other", "Exists", [])]], False),
        ({}, [[("other", "DoesNotExist", [])]], True),
        ({}, [[("pool", "DoesNotExist", [])]], False),
        ({}, [[("nvidia.com/gpu.count", "Gt", ["4"])]], True),
        ({}, [[("nvidia.com/gpu.count", "Gt", ["8"])]], False),
        ({}, [[("nvidia.com/gpu.count", "Lt", ["16"])]], True),
        ({}, [[("nvidia.com/gpu.count", "Lt", ["8"])]], False),
        ({}, [[("pool", "Gt", ["1"])]], False),  # not an integer
        ({}, [[("nvidia.com/gpu.count", "Lt", ["9" * 5000])]], False),  # not a 64-bit integer
        ({}, [[("nvidia.com/gpu.count", "Gt", ["1", "2"])]], False),  # Gt takes one value
        ({}, [[("pool", "Bogus", ["train"])]], False),
        # terms are ORed, expressions inside a term ANDed
        ({}, [[("pool", "In", ["batch"])], [("zone", "In", ["a"])]], True),
        ({}, [[("pool", "In", ["train"]), ("zone", "In", ["b"])]], False),
        ({"pool": "train"}, [[("zone", "In", ["b"])]], False),
    ],
)
def test_selector_and_affinity_matching(
    selector: dict[str, str], terms: list[list[tuple[str, str, list[str]]]], expected: bool
) -> None:
    exprs = [
        {"term": i, "key": k, "operator": op, "values": vals, "field": False}
        for i, term in enumerate(terms)
        for k, op, vals in term
    ]
    assert matches(LABELS, "gpu-a", selector, exprs) is expected


def test_match_fields_on_the_node_name() -> None:
    field = {
        "term": 0,
        "key": "metadata.name",
        "operator": "In",
        "values": ["gpu-a"],
        "field": True,
    }
    assert matches(LABELS, "gpu-a", {}, [field]) is True
    assert matches(LABELS, "gpu-b", {}, [field]) is False
    assert matches(LABELS, "gpu-b", {}, [{**field, "operator": "NotIn"}]) is True
    assert matches(LABELS, "gpu-a", {}, [{**field, "key": "spec.other"}]) is False


def test_gpu_nodes_matching_the_pod_selector() -> None:
    built = groups(
        pending_pod(
            selector={"nvidia.com/gpu.product": A100},
            terms=[
                [
                    {"key": "pool", "operator": "In", "values": ["train", "batch"]},
                    {"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["4"]},
                ]
            ],
        ),
        nodes(
            node("gpu-a", labels={"pool": "train"}),
            node("gpu-b", labels={"pool": "infer"}),
            node("gpu-c", labels={"pool": "batch", "nvidia.com/gpu.product": "NVIDIA-H100"}),
            node("gpu-d", gpus=4, labels={"pool": "batch"}),
            node("gpu-e", labels={"pool": "batch"}),
        ),
    )
    cluster = built["cluster"]
    assert [n["matches_selector"] for n in cluster.values["gpu_nodes"]] == [
        True,
        False,
        False,
        False,
        True,
    ]
    assert cluster.values["gpu_nodes_matching_selector"] == 2
    assert (
        cluster.cites["gpu_nodes_matching_selector"][0].text
        == f'"nvidia.com/gpu.product": "{A100}",'
    )
    # without a pod nothing constrains the nodes
    alone = groups(nodes(node("gpu-a"), node("gpu-b")))["cluster"].values
    assert alone["gpu_nodes_matching_selector"] == 2


def test_untolerated_taints_across_gpu_nodes_are_unique() -> None:
    dedicated = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    soft = {"key": "soft", "value": "", "effect": "PreferNoSchedule"}
    drain = {"key": "drain", "value": "", "effect": "NoExecute"}
    gpu_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    cluster = groups(
        pending_pod(),
        nodes(
            node("gpu-a", taints=[dedicated, gpu_taint]),
            node("gpu-b", taints=[dedicated, soft]),
            node("gpu-c", taints=[drain]),
        ),
    )["cluster"]
    assert cluster.values["gpu_nodes_untolerated_taints"] == [dedicated, drain]
    assert [r.text for r in cluster.cites["gpu_nodes_untolerated_taints"]] == [
        '"key": "dedicated",',
        '"key": "drain",',
    ]


# -- scheduling failures from other schedulers ------------------------------------------------


def event(reason: str, message: str, component: str, minute: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "type": "Warning",
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "involvedObject": {"kind": "Pod", "name": "train-0", "namespace": "ml"},
        "lastTimestamp": f"2026-03-02T09:{minute:02d}:00Z",
    }


def events(*items: dict[str, Any]) -> Evidence:
    return as_json(
        Key.EVENTS, {"apiVersion": "v1", "kind": "EventList", "items": list(items)}, "events.json"
    )


KAI = (
    "Resources were not found for pod ml/train-0 due to: no nodes with enough resources "
    "were found: 2 node(s) didn't have enough resources: GPUs."
)
VOLCANO = "0/3 nodes are unavailable: 1 node(s) pod number exceeded, 2 Insufficient nvidia.com/gpu."
HAMI = "3 nodes CardInsufficientMemory(gpu-a,gpu-b,gpu-c)"


@pytest.mark.parametrize(
    ("reason", "message", "component", "scheduler", "generation", "gpu"),
    [
        ("Unschedulable", KAI, "kai-scheduler", "kai-scheduler", "kai", 2),
        ("FailedScheduling", VOLCANO, "volcano", "volcano", "volcano", 2),
        ("Unschedulable", VOLCANO, "volcano", "volcano", "volcano", 2),
        ("FilteringFailed", HAMI, "hami-scheduler", "hami-scheduler", "hami", 3),
        (
            "FailedScheduling",
            "0/4 nodes are available: 1 node unregistered, 3 Insufficient nvidia.com/gpu.",
            "hami-scheduler",
            "hami-scheduler",
            "framework",
            3,
        ),
        (
            "FailedScheduling",
            "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
            "default-scheduler",
            "kube-scheduler",
            "framework",
            4,
        ),
    ],
)
def test_each_scheduler_failure_is_read_and_named(
    reason: str, message: str, component: str, scheduler: str, generation: str, gpu: int
) -> None:
    built = groups(pending_pod(), events(event(reason, message, component, 5)))
    ev = built["events"].values
    assert (
        ev["failed_scheduling"],
        ev["failed_scheduling_source"],
        ev["failed_scheduling_reason"],
    ) == (message, component, reason)
    sched = built["scheduler"].values
    assert (sched["found"], sched["source"], sched["scheduler"], sched["event_reason"]) == (
        True,
        "event",
        scheduler,
        reason,
    )
    assert (sched["recognised"], sched["generation"], sched["insufficient_gpu"]) == (
        True,
        generation,
        gpu,
    )
    assert built["scheduler"].cites["message"][0].text == f'"message": "{message}",'


def test_the_newest_scheduling_failure_wins_and_hami_noise_is_ignored() -> None:
    built = groups(
        pending_pod(scheduler="hami-scheduler"),
        events(
            event(
                "FailedScheduling",
                "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
                "hami-scheduler",
                1,
            ),
            event("FilteringFailed", HAMI, "hami-scheduler", 7),
            event("FilteringFailed", "does not request any resource", "hami-scheduler", 9),
            event(
                "NotTriggerScaleUp",
                "pod didn't trigger scale-up: 1 max node group size reached",
                "cluster-autoscaler",
                8,
            ),
        ),
    )
    ev = built["events"].values
    assert (ev["failed_scheduling"], ev["failed_scheduling_reason"]) == (HAMI, "FilteringFailed")
    assert ev["not_triggered_scale_up"].startswith("pod didn't trigger scale-up")
    sched = built["scheduler"].values
    assert sched["insufficient"] == {"nvidia.com/gpumem": 3}
    assert sched["autoscaler_message"] == ev["not_triggered_scale_up"]


def test_volcano_gang_message_is_volcano_speaking_without_a_verdict() -> None:
    gang = (
        "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; "
        "Pending: 1 Unschedulable"
    )
    sched = groups(
        pending_pod(scheduler="volcano"), events(event("Unschedulable", gang, "volcano", 3))
    )["scheduler"].values
    assert (sched["found"], sched["recognised"], sched["scheduler"]) == (True, False, "volcano")
    assert (sched["unschedulable_nodes"], sched["reasons"]) == (0, [])


def test_condition_is_attributed_to_the_pods_scheduler() -> None:
    pod = json.loads(pending_pod(scheduler="volcano").raw)
    pod["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": VOLCANO}
    ]
    kai = json.loads(pending_pod(scheduler="kai-scheduler").raw)
    kai["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
        }
    ]
    default = json.loads(pending_pod().raw)
    default["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "binding rejected",
        }
    ]
    got = [groups(as_json(Key.POD, p, "pod.json"))["scheduler"].values for p in (pod, kai, default)]
    assert [(s["source"], s["scheduler"], s["event_reason"]) for s in got] == [
        ("condition", "volcano", ""),
        ("condition", "kai-scheduler", ""),
        ("condition", "kube-scheduler", ""),
    ]
    assert (got[0]["generation"], got[0]["total_nodes"]) == ("volcano", 3)
    assert got[2]["recognised"] is False
