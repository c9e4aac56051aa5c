"""Pod, events, owner-events and scheduler facts from JSON, YAML and describe evidence."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gputriage.evidence.model import Evidence, Key
from gputriage.facts.gpu_resources import is_gpu_resource, pod_gpu_request
from tests.unit.k8s_evidence import K8S, fixture, groups, text


def line_of(path: str, needle: str) -> int:
    for n, line in enumerate((K8S / path).read_text(encoding="utf-8").splitlines(), 1):
        if needle in line:
            return n
    raise AssertionError(f"{needle!r} not in {path}")


def pod_json(spec: dict[str, Any], status: dict[str, Any] | None = None, **meta: Any) -> Evidence:
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml", **meta},
        "spec": spec,
        "status": status or {"phase": "Pending"},
    }
    return text(Key.POD, json.dumps(obj, indent=4), "pod.json")


def gpu(
    n: int | str, resource: str = "nvidia.com/gpu", *, limits: bool = True, **extra: Any
) -> dict[str, Any]:
    res: dict[str, Any] = {"requests": {resource: str(n)}}
    if limits:
        res["limits"] = {resource: str(n)}
    return {"name": f"c{n}{resource[-3:]}", "image": "cuda", "resources": res, **extra}


# -- pod ------------------------------------------------------------------------------------


def test_pending_pod_from_json() -> None:
    pod = groups(fixture(Key.POD, "pending/pod.json"))["pod"]
    v = pod.values
    assert pod.known and pod.reason == ""
    assert (v["name"], v["namespace"], v["phase"], v["node"]) == (
        "trainer-0-8xk2m",
        "ml",
        "Pending",
        "",
    )
    assert v["scheduled"] is False
    assert v["uid"] == "6f1c2d3e-4b5a-4c69-8d7e-9f0a1b2c3d4e"
    assert v["gpu_resources"] == {"nvidia.com/gpu": 4}  # init container's 1 < app's 4
    assert (v["gpu_total"], v["requests_gpu"]) == (4, True)
    assert [c["name"] for c in v["containers"]] == ["warmup", "trainer", "log-shipper"]
    assert [c["init"] for c in v["containers"]] == [True, False, False]
    trainer = v["containers"][1]
    assert trainer["memory_limit_bytes"] == 128 * 2**30
    assert trainer["memory_request_bytes"] == 96 * 2**30
    assert (trainer["cpu_request_millis"], trainer["cpu_limit_millis"]) == (16000, 0)
    assert (trainer["state"], trainer["exit_code"], trainer["last_exit_code"]) == ("", -1, -1)
    assert v["containers"][2]["cpu_limit_millis"] == 200
    assert v["shm"] == {
        "present": True,
        "volume": "dshm",
        "volume_type": "emptyDir",
        "medium": "Memory",
        "size_limit_bytes": 8 * 2**30,
    }
    assert v["affinity_terms"] == [
        {
            "term": 0,
            "key": "nvidia.com/gpu.count",
            "operator": "Gt",
            "values": ["3"],
            "field": False,
        },
        {
            "term": 1,
            "key": "nvidia.com/gpu.product",
            "operator": "In",
            "values": ["NVIDIA-H100-80GB-HBM3"],
            "field": False,
        },
        {
            "term": 1,
            "key": "metadata.name",
            "operator": "NotIn",
            "values": ["gpu-e"],
            "field": True,
        },
    ]
    assert v["node_selector"] == {"nvidia.com/gpu.present": "true"}
    assert v["tolerations"][0] == {
        "key": "nvidia.com/gpu",
        "operator": "Exists",
        "value": "",
        "effect": "NoSchedule",
        "seconds": -1,
    }
    assert v["tolerations"][1]["seconds"] == 300
    assert (v["owner_kind"], v["owner_name"]) == ("Job", "trainer-0")
    assert (v["priority_class"], v["qos_class"], v["created"]) == (
        "gpu-batch",
        "Burstable",
        "2024-06-10T09:40:02Z",
    )
    assert v["conditions"][0]["reason"] == "Unschedulable"
    # the init container's line and the app container's line
    assert [(r.source, r.line, r.text) for r in pod.cites["gpu_total"]] == [
        (
            "bundle/pod.json",
            line_of("pending/pod.json", '"nvidia.com/gpu": "1"'),
            '"nvidia.com/gpu": "1"',
        ),
        (
            "bundle/pod.json",
            line_of("pending/pod.json", '"nvidia.com/gpu": "4"'),
            '"nvidia.com/gpu": "4"',
        ),
    ]
    assert pod.cites["phase"][0].text == '"phase": "Pending",'
    assert pod.cites["tolerations"][0].text == '"key": "nvidia.com/gpu",'


def test_running_pod_from_yaml_with_oom() -> None:
    pod = groups(fixture(Key.POD, "running/pod.yaml"))["pod"]
    v = pod.values
    assert (v["phase"], v["node"], v["runtime_class"], v["scheduled"]) == (
        "Running",
        "gpu-node-7",
        "nvidia",
        True,
    )
    server = v["containers"][0]
    assert (server["state"], server["waiting_reason"]) == ("waiting", "CrashLoopBackOff")
    assert (server["last_terminated_reason"], server["last_exit_code"]) == ("OOMKilled", 137)
    assert server["restart_count"] == 6
    assert (v["any_oom_killed"], v["crash_loop"], v["exit_137_not_oom"]) == (True, True, False)
    assert v["shm"]["size_limit_bytes"] == 0  # Memory-backed, no limit
    assert pod.cites["any_oom_killed"][0].text == "reason: OOMKilled"
    assert pod.cites["any_oom_killed"][0].line == line_of("running/pod.yaml", "OOMKilled")
    assert pod.cites["runtime_class"][0].text == "runtimeClassName: nvidia"


def test_pods_from_describe_text() -> None:
    start = groups(fixture(Key.POD, "describe/start-error.txt"))["pod"]
    assert start.known
    assert start.values["crash_loop"] is True
    assert len(start.values["start_errors"]) == 1
    assert start.values["start_errors"][0].endswith("nvml error: driver not loaded: unknown")
    assert start.values["containers"][0]["last_exit_code"] == 128
    assert start.cites["start_errors"][0].line == line_of(
        "describe/start-error.txt", "Message:   failed to create"
    )

    rejected = groups(fixture(Key.POD, "describe/admission-old-kubectl.txt"))["pod"]
    assert (rejected.values["phase"], rejected.values["admission_rejected"]) == ("Failed", True)
    assert rejected.values["reason"] == "UnexpectedAdmissionError"
    assert rejected.values["gpu_total"] == 1
    assert rejected.cites["gpu_total"][0].text == "nvidia.com/gpu:  1"

    pending = groups(fixture(Key.POD, "describe/pending-insufficient.txt"))["pod"]
    assert pending.values["shm"]["size_limit_bytes"] == 16 * 2**30
    assert pending.values["node_selector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert pending.cites["tolerations"][-1].text.endswith("nvidia.com/gpu:NoSchedule op=Exists")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": [gpu(2), gpu(1)], "initContainers": [gpu(4)]}, {"nvidia.com/gpu": 4}),
        ({"containers": [gpu(2), gpu(1)], "initContainers": [gpu(1)]}, {"nvidia.com/gpu": 3}),
        # sidecar (restartable init) runs beside the app: 2 + 1; a later init sees 3 + 1
        (
            {"containers": [gpu(2)], "initContainers": [gpu(1, restartPolicy="Always"), gpu(3)]},
            {"nvidia.com/gpu": 4},
        ),
        (
            {"containers": [gpu(2)], "initContainers": [gpu(1, restartPolicy="Always")]},
            {"nvidia.com/gpu": 3},
        ),
        (
            {"containers": [gpu(1, "nvidia.com/mig-1g.10gb"), gpu(2, "nvidia.com/gpu.shared")]},
            {"nvidia.com/gpu.shared": 2, "nvidia.com/mig-1g.10gb": 1},
        ),
        ({"containers": [gpu("bad")]}, {}),
        ({"containers": "nonsense"}, {}),
    ],
)
def test_effective_gpu_request_follows_the_scheduler(
    spec: dict[str, Any], expected: dict[str, int]
) -> None:
    assert pod_gpu_request(spec) == expected


@pytest.mark.parametrize(
    ("name", "is_gpu"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/gpu.shared", True),
        ("nvidia.com/mig-3g.40gb", True),
        ("nvidia.com/gpumem", True),
        ("amd.com/gpu", True),
        ("gpu.intel.com/i915", True),
        ("alpha.kubernetes.io/nvidia-gpu", True),
        ("nvidia.com/hostdev", False),
        ("nvidia.com/rdma_shared_device_a", False),
        ("memory", False),
        ("cpu", False),
    ],
)
def test_gpu_resource_names(name: str, is_gpu: bool) -> None:
    assert is_gpu_resource(name) is is_gpu


def test_spec_mistakes_and_sharing() -> None:
    ev = pod_json(
        {
            "containers": [
                gpu(2, limits=False),
                gpu(1, "nvidia.com/mig-1g.10gb"),
                gpu(1, "nvidia.com/gpu.shared"),
            ]
        }
    )
    pod = groups(ev)["pod"]
    assert pod.values["requests_without_limits"] == ["nvidia.com/gpu"]
    assert pod.values["gpu_resources"] == {
        "nvidia.com/gpu": 2,
        "nvidia.com/gpu.shared": 1,
        "nvidia.com/mig-1g.10gb": 1,
    }
    assert pod.values["mig_resources"] == ["nvidia.com/mig-1g.10gb"]
    assert pod.values["shared_gpu"] is True
    assert pod.cites["requests_without_limits"][0].text == '"nvidia.com/gpu": "2"'


def test_sigkill_without_oom_and_eviction() -> None:
    status = {
        "phase": "Failed",
        "reason": "Evicted",
        "message": "The node was low on resource: memory. ",
        "containerStatuses": [
            {
                "name": "c1gpu",
                "restartCount": 3,
                "state": {"terminated": {"exitCode": 137, "reason": "Error"}},
            }
        ],
    }
    pod = groups(pod_json({"containers": [gpu(1)]}, status))["pod"]
    assert pod.values["exit_137_not_oom"] is True
    assert pod.values["any_oom_killed"] is False
    assert pod.values["evicted"] is True
    assert pod.values["admission_rejected"] is False
    assert pod.values["containers"][0]["state"] == "terminated"


def test_terminating_pod() -> None:
    pod = groups(
        pod_json({"containers": []}, {"phase": "Running"}, deletionTimestamp="2024-06-10T10:00:00Z")
    )["pod"]
    assert pod.values["deleting"] is True
    assert pod.values["requests_gpu"] is False


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "pod.json is empty"),
        (b"\x00\x01\x02\x03" * 100, "looks binary"),
        (b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"', "truncated JSON"),
        (
            b'{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}',
            "expected kind Pod, got 'Node'",
        ),
        (b"- just\n- a list\n", "expected a Pod object, got list"),
    ],
)
def test_bad_pod_evidence_is_unknown_with_reason(content: bytes, why: str) -> None:
    built = groups(text(Key.POD, content, "pod.json"))
    assert not built["pod"].known
    assert why in built["pod"].reason
    assert built["pod"].values["gpu_resources"] == {}  # defaults, never missing keys
    assert not built["scheduler"].known


def test_missing_pod_is_unknown() -> None:
    pod = groups()["pod"]
    assert not pod.known
    assert pod.reason.startswith("the pod object (kubectl get pod -o json): unavailable")


# -- events ---------------------------------------------------------------------------------


def test_pod_events_newest_last() -> None:
    built = groups(fixture(Key.POD, "pending/pod.json"), fixture(Key.EVENTS, "pending/events.json"))
    ev = built["events"]
    items = ev.values["items"]
    assert len(items) == 3  # the other pod's event is dropped
    assert [(i["reason"], i["count"]) for i in items] == [
        ("FailedScheduling", 1),
        ("NotTriggerScaleUp", 30),
        ("FailedScheduling", 12),
    ]
    assert items[-1]["last"] == "2024-06-10T10:02:44Z"
    assert ev.values["reasons"] == ["FailedScheduling", "NotTriggerScaleUp"]
    assert ev.values["warnings"] == 2
    assert ev.values["failed_scheduling"].startswith(
        "0/6 nodes are available: 1 node(s) didn't match Pod's node affinity/selector"
    )
    assert ev.values["failed_scheduling_source"] == "default-scheduler"
    assert ev.values["not_triggered_scale_up"].startswith("pod didn't trigger scale-up")
    cite = ev.cites["failed_scheduling"]
    assert len(cite) == 1
    assert cite[0].line == line_of("pending/events.json", "3 Insufficient nvidia.com/gpu.")
    assert items[-1]["line"] == cite[0].line


def test_describe_events_cite_their_rows() -> None:
    built = groups(*_describe_bundle("describe/runtime-handler.txt"))
    ev = built["events"]
    assert ev.values["runtime_handler_missing"] is True
    assert ev.values["runtime_handler"] == "nvidia"
    assert ev.values["sandbox_errors"] == [
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox "
        'runtime: no runtime for "nvidia" is configured'
    ]
    assert ev.values["items"][1]["age"] == "2s"
    ref = ev.cites["runtime_handler_missing"][0]
    assert ref.line == 54
    assert ref.text.startswith("  Warning  FailedCreatePodSandBox  2s (x17 over 3m40s)")


def test_container_start_failures_from_describe() -> None:
    ev = groups(*_describe_bundle("describe/start-error.txt"))["events"]
    assert len(ev.values["container_errors"]) == 1
    assert ev.values["container_errors"][0].startswith("Error: failed to create containerd task")
    assert ev.values["container_errors"][0].endswith("driver not loaded: unknown")
    assert ev.values["backoff"] is True
    assert ev.values["image_errors"] == []


def _describe_bundle(path: str) -> list[Evidence]:
    pod = fixture(Key.POD, path)
    event_list = {"kind": "EventList", "apiVersion": "v1", "items": pod.data["_describe_events"]}
    return [pod, Evidence(Key.EVENTS, pod.status, "", pod.raw, pod.source, event_list, "describe")]


def _event(reason: str, message: str, etype: str = "Warning", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "type": etype,
        "reason": reason,
        "message": message,
        "involvedObject": {"kind": "Pod", "name": "p"},
        **extra,
    }


def test_every_convenience_field() -> None:
    items = [
        _event(
            "FailedCreatePodSandBox",
            "Failed to create pod sandbox: rpc error: code = "
            "Unknown desc = failed to find runtime handler nvidia from runtime list map[crun:"
            "&{...}]",
            firstTimestamp="2024-06-10T10:00:01Z",
        ),
        _event(
            "UnexpectedAdmissionError",
            "Allocate failed due to no healthy devices present; "
            "cannot allocate unhealthy devices nvidia.com/gpu, which is unexpected",
            firstTimestamp="2024-06-10T10:00:02Z",
        ),
        _event(
            "OutOfnvidia.com/gpu",
            "Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 8, capacity: 8",
            firstTimestamp="2024-06-10T10:00:03Z",
        ),
        _event(
            "FailedPrepareDynamicResources",
            "Failed to prepare dynamic resources: prepare "
            "dynamic resources: DRA driver compute-domain.nvidia.com is not registered",
            firstTimestamp="2024-06-10T10:00:04Z",
        ),
        _event(
            "FailedMount",
            'MountVolume.SetUp failed for volume "data" : not found',
            firstTimestamp="2024-06-10T10:00:05Z",
        ),
        _event(
            "Failed",
            'Failed to pull image "nvcr.io/x": unauthorized',
            firstTimestamp="2024-06-10T10:00:06Z",
        ),
        _event(
            "Evicted",
            "The node was low on resource: memory. Threshold quantity: 100Mi.",
            firstTimestamp="2024-06-10T10:00:07Z",
        ),
        _event(
            "Preempted",
            "Preempted by pod 5c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f on node gpu-a",
            etype="Normal",
            firstTimestamp="2024-06-10T10:00:08Z",
        ),
        # events.k8s.io/v1 shape: note, regarding, series, reportingController, eventTime
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "type": "Warning",
            "reason": "SystemOOM",
            "note": "System OOM encountered, victim process: python",
            "regarding": {"kind": "Pod", "name": "p"},
            "reportingController": "kubelet",
            "eventTime": "2024-06-10T10:00:09.000001Z",
            "series": {"count": 4, "lastObservedTime": "2024-06-10T10:05:00.000000Z"},
        },
    ]
    ev = groups(
        text(
            Key.EVENTS,
            json.dumps({"kind": "EventList", "apiVersion": "v1", "items": items}, indent=2),
        )
    )["events"]
    v = ev.values
    assert (v["runtime_handler_missing"], v["runtime_handler"]) == (True, "nvidia")
    assert len(v["admission_errors"]) == 2
    assert v["dra_errors"][0].endswith("compute-domain.nvidia.com is not registered")
    assert v["failed_mount"] == ['MountVolume.SetUp failed for volume "data" : not found']
    assert v["image_errors"] == ['Failed to pull image "nvcr.io/x": unauthorized']
    assert v["container_errors"] == []
    assert (v["evicted"], v["eviction_message"]) == (
        True,
        "The node was low on resource: memory. Threshold quantity: 100Mi.",
    )
    assert (v["preempted"], v["oom_killing"]) == (True, True)
    last = v["items"][-1]
    assert (last["reason"], last["count"], last["source"]) == ("SystemOOM", 4, "kubelet")
    assert last["message"] == "System OOM encountered, victim process: python"
    assert v["warnings"] == 8
    assert ev.cites["dra_errors"][0].text.startswith('"message": "Failed to prepare dynamic')


def test_events_wrong_kind_is_unknown() -> None:
    ev = groups(text(Key.EVENTS, '{"kind": "PodList", "apiVersion": "v1", "items": []}'))
    assert not ev["events"].known
    assert "expected kind EventList (or List), got 'PodList'" in ev["events"].reason
    assert ev["events"].values["items"] == []


# -- owner events ---------------------------------------------------------------------------


def test_owner_rejections() -> None:
    owner = groups(fixture(Key.OWNER_EVENTS, "owner/owner-events.json"))["owner_events"]
    v = owner.values
    assert owner.known
    assert len(v["failed_create"]) == 3
    assert v["failed_create_quota"] is True
    assert len(v["quota_messages"]) == 2
    assert (v["runtime_class_rejected"], v["runtime_class_missing"]) == (True, "nvidia")
    assert v["webhook_denials"] == []
    assert v["warnings"] == 3
    assert owner.cites["runtime_class_rejected"][0].line == line_of(
        "owner/owner-events.json", 'RuntimeClass \\"nvidia\\" not found'
    )
    assert [r.line for r in owner.cites["quota_messages"]] == [
        line_of("owner/owner-events.json", "vlrj8"),
        line_of("owner/owner-events.json", "b7fv6"),
    ]


def test_webhook_denial() -> None:
    items = [
        _event(
            "FailedCreate",
            'Error creating: admission webhook "validation.gatekeeper.sh"'
            " denied the request: GPU pods need a team label",
            involvedObject={"kind": "Job", "name": "j"},
        )
    ]
    owner = groups(text(Key.OWNER_EVENTS, json.dumps({"kind": "EventList", "items": items})))
    assert owner["owner_events"].values["webhook_denials"] == [items[0]["message"]]
    assert owner["owner_events"].values["failed_create_quota"] is False


# -- scheduler ------------------------------------------------------------------------------


def test_scheduler_reads_the_condition_first() -> None:
    sched = groups(
        fixture(Key.POD, "pending/pod.json"), fixture(Key.EVENTS, "pending/events.json")
    )["scheduler"]
    v = sched.values
    assert (v["found"], v["source"], v["scheduler"], v["generation"]) == (
        True,
        "condition",
        "kube-scheduler",
        "untolerated-taint",
    )
    assert v["total_nodes"] == 6
    assert v["insufficient"] == {"nvidia.com/gpu": 3}
    assert (
        v["insufficient_gpu"],
        v["taint_nodes"],
        v["selector_mismatch"],
        v["unschedulable_nodes"],
    ) == (3, 1, 1, 1)
    assert v["untolerated_taints"] == [{"key": "dedicated", "value": "inference"}]
    assert v["preemption_helpful"] is True
    assert v["preemption"] == {"total_nodes": 6, "not_helpful": 3, "no_victims": 3}
    assert [r["kind"] for r in v["reasons"]] == [
        "selector",
        "taint",
        "unschedulable",
        "insufficient",
    ]
    assert v["autoscaler_reasons"][1] == {
        "count": 1,
        "kind": "insufficient",
        "text": "Insufficient nvidia.com/gpu",
        "resource": "nvidia.com/gpu",
        "taint_key": "",
        "taint_value": "",
        "prefilter": False,
    }
    ref = sched.cites["insufficient_gpu"][0]
    assert (ref.source, ref.line) == (
        "bundle/pod.json",
        line_of("pending/pod.json", "0/6 nodes are available"),
    )


def test_scheduler_from_describe_event() -> None:
    sched = groups(*_describe_bundle("describe/pending-insufficient.txt"))["scheduler"]
    v = sched.values
    assert (v["source"], v["scheduler"], v["total_nodes"]) == ("event", "kube-scheduler", 5)
    assert v["untolerated_taints"] == [
        {"key": "node-role.kubernetes.io/control-plane", "value": ""}
    ]
    assert (v["insufficient_gpu"], v["selector_mismatch"]) == (2, 2)
    assert v["preemption"] == {"total_nodes": 5, "not_helpful": 3, "no_victims": 2}
    assert sched.cites["message"][0].line == 56


def test_scheduler_from_events_alone() -> None:
    sched = groups(fixture(Key.EVENTS, "pending/events.json"))["scheduler"]
    assert sched.known
    assert sched.values["source"] == "event"
    assert sched.values["insufficient_gpu"] == 3


def test_scheduled_pod_has_no_current_scheduler_reason() -> None:
    sched = groups(
        fixture(Key.POD, "running/pod.yaml"), fixture(Key.EVENTS, "pending/events.json")
    )["scheduler"]
    assert sched.known
    assert (sched.values["found"], sched.values["message"], sched.values["reasons"]) == (
        False,
        "",
        [],
    )
    assert sched.values["preemption_helpful"] is None


def test_scheduler_unknown_without_pod_or_events() -> None:
    sched = groups()["scheduler"]
    assert not sched.known
    assert "the pod object (kubectl get pod -o json): unavailable" in sched.reason
    assert "the pod's events: unavailable" in sched.reason
