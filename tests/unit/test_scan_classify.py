"""Pure classification of pods and nodes into trouble rows: every class, its family, its words
and its age, the decoys that must stay quiet, and odd objects that must not raise."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from gputriage.scan.classify import (
    node_info,
    node_row,
    plugin_expected,
    plugin_row,
    pod_info,
    pod_row,
)
from gputriage.scan.model import Family, Row, Trouble, merge, parse_duration, short_age
from tests.kubeapi import cluster as c

NOW = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC).timestamp()  # 3 h after the fixture T0
STUCK = 600


def iso(seconds_ago: float) -> str:
    return dt.datetime.fromtimestamp(NOW - seconds_ago, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def row_of(obj: dict[str, Any]) -> Row | None:
    info = pod_info(obj)
    assert info is not None
    return pod_row(info, NOW, STUCK)


def troubles(row: Row | None) -> list[str]:
    assert row is not None
    return [t.value for t in row.troubles]


# -- pods ----------------------------------------------------------------------------------------


def test_unschedulable_gpu_pod_is_pending_at_once() -> None:
    p = c.pod("trainer-0", gpus=8, unschedulable=c.UNSCHEDULABLE)
    p["metadata"]["creationTimestamp"] = iso(30)
    row = row_of(p)
    assert troubles(row) == ["pending"] and row is not None and row.family is Family.PENDING
    assert row.reason == f"Pending: {c.UNSCHEDULABLE}"
    assert row.gpu_request == {"nvidia.com/gpu": 8} and row.node == ""
    assert row.since == c.ts(1) and row.age_s(NOW) == 3 * 3600 - 60
    assert row.triage_command == "gputriage trainer-0 -n ml"


def test_pending_without_a_verdict_waits_for_the_threshold() -> None:
    young = c.pod("queued", gpus=1)
    young["metadata"]["creationTimestamp"] = iso(STUCK - 5)
    assert row_of(young) is None
    old = c.pod("queued", gpus=1)
    old["metadata"]["creationTimestamp"] = iso(STUCK + 5)
    row = row_of(old)
    assert troubles(row) == ["pending"] and row is not None
    assert row.reason == "Pending: not scheduled yet" and row.age_s(NOW) == STUCK + 5


def _scheduled(p: dict[str, Any], seconds_ago: float) -> dict[str, Any]:
    for cond in p["status"]["conditions"]:
        cond["lastTransitionTime"] = iso(seconds_ago)
    return p


def test_container_creating_only_after_the_threshold() -> None:
    assert row_of(_scheduled(c.pod("job", node="gpu-1", gpus=2), STUCK - 1)) is None
    row = row_of(_scheduled(c.pod("job", node="gpu-1", gpus=2), 1800))
    assert troubles(row) == ["creating"] and row is not None and row.family is Family.CREATE
    assert row.reason == "main: ContainerCreating" and row.age_s(NOW) == 1800
    assert row.node == "gpu-1"


def test_create_container_error_after_the_threshold() -> None:
    message = "nvidia-container-cli: initialization error: nvml error: driver not loaded"
    p = c.pod(
        "job", node="gpu-1", gpus=1, statuses=[c.waiting("main", "CreateContainerError", message)]
    )
    assert row_of(_scheduled(p, 60)) is None
    row = row_of(_scheduled(p, 900))
    assert troubles(row) == ["create-error"]
    assert row is not None and row.reason == f"main: CreateContainerError: {message}"


def test_crash_loop_with_an_oom_kill_is_oom_family() -> None:
    p = c.pod(
        "llm",
        node="gpu-1",
        gpus=1,
        statuses=[
            c.waiting(
                "main",
                "CrashLoopBackOff",
                restarts=6,
                last=c.terminated("OOMKilled", 137, minutes=20),
            )
        ],
    )
    row = row_of(p)
    assert troubles(row) == ["oom-killed", "crash-loop"]
    assert row is not None and row.family is Family.OOM
    assert row.reason == (
        "main: last OOMKilled (exit 137); main: CrashLoopBackOff, 6 restarts, "
        "last exit 137 (OOMKilled)"
    )
    assert row.since == c.ts(20)


def test_crash_loop_exit_1_and_sigkill_without_oom() -> None:
    crash = c.pod(
        "x",
        node="gpu-1",
        gpus=1,
        statuses=[c.waiting("main", "CrashLoopBackOff", restarts=9, last=c.terminated("Error", 1))],
    )
    assert troubles(row_of(crash)) == ["crash-loop"]
    killed = c.pod(
        "y",
        node="gpu-1",
        gpus=1,
        statuses=[c.running("main", restarts=2, last=c.terminated("Error", 137))],
    )
    row = row_of(killed)
    assert troubles(row) == ["exit-137"]
    assert row is not None and row.reason == "main: last exit 137 (Error), not OOMKilled"


def test_admission_rejections() -> None:
    for reason, message in (
        (
            "UnexpectedAdmissionError",
            "Pod was rejected: Allocate failed due to no healthy "
            "devices present; cannot allocate unhealthy devices "
            "nvidia.com/gpu, which is unexpected",
        ),
        (
            "OutOfnvidia.com/gpu",
            "Pod was rejected: Node didn't have enough resource: "
            "nvidia.com/gpu, requested: 8, used: 0, capacity: 7",
        ),
    ):
        p = c.pod("r", node="gpu-1", gpus=8, phase="Failed")
        p["status"].update(reason=reason, message=message)
        row = row_of(p)
        assert troubles(row) == ["admission-rejected"]
        assert row is not None and row.family is Family.LOST
        assert row.reason == f"{reason}: {message}"


def test_decoys_stay_quiet() -> None:
    healthy = c.pod("ok", node="gpu-1", gpus=1, statuses=[c.running("main")])
    clean_restart = c.pod(
        "nb",
        node="gpu-1",
        gpus=1,
        statuses=[c.running("main", restarts=1, last=c.terminated("Completed", 0))],
    )
    done = c.pod(
        "done", node="gpu-1", gpus=1, phase="Succeeded", statuses=[c.running("main", restarts=0)]
    )
    for p in (healthy, clean_restart, done):
        assert row_of(p) is None
    cpu = c.pod(
        "web",
        node="cpu-1",
        gpus=0,
        statuses=[
            c.waiting("main", "CrashLoopBackOff", restarts=5, last=c.terminated("OOMKilled", 137))
        ],
    )
    assert pod_info(cpu) is None  # not a GPU pod: not even kept


def test_gpu_requests_follow_the_scheduler_rule() -> None:
    p = c.pod(
        "mig",
        node="gpu-1",
        containers=[
            c.container("a", gpus=1, gpu_resource="nvidia.com/mig-1g.10gb"),
            c.container("b", gpus=2, gpu_resource="nvidia.com/mig-1g.10gb"),
        ],
        statuses=[c.running("a"), c.running("b")],
    )
    info = pod_info(p)
    assert info is not None and dict(info.gpu) == {"nvidia.com/mig-1g.10gb": 3}


@pytest.mark.parametrize(
    "obj",
    [
        None,
        {},
        [],
        "pod",
        {"spec": "x", "status": 3},
        {"metadata": {"name": 5}, "spec": {"containers": "nope"}},
        {"status": {"containerStatuses": [None, 3, {"state": "x"}]}},
    ],
)
def test_odd_objects_never_raise(obj: Any) -> None:
    assert pod_info(obj) is None
    assert node_info(obj) is None


def test_odd_container_status_is_read_as_empty() -> None:
    p = c.pod("x", node="gpu-1", gpus=1, statuses=[c.running("main")])
    p["status"]["containerStatuses"] = [
        {"name": 3, "state": {"waiting": "no"}, "restartCount": "many"},
        "junk",
    ]
    info = pod_info(p)
    assert info is not None and len(info.containers) == 1
    assert info.containers[0].restarts == 0 and info.containers[0].waiting == ""


# -- nodes ---------------------------------------------------------------------------------------


def node(**kw: Any) -> Row | None:
    info = node_info(c.gpu_node("gpu-1", annotations=False, **kw))
    assert info is not None
    return node_row(info)


def test_healthy_gpu_node_and_cpu_node() -> None:
    assert node() is None
    assert node(taints=[c.taint("nvidia.com/gpu", value="present")]) is None  # dedicated pool
    assert node_info(c.cpu_node("cpu-1", ready=False)) is None


def test_allocatable_below_capacity_is_lost_family() -> None:
    row = node(allocatable=7)
    assert troubles(row) == ["allocatable-below-capacity"]
    assert row is not None and row.family is Family.LOST and row.kind == "node"
    assert row.reason == "nvidia.com/gpu: allocatable 7 of capacity 8"
    assert row.gpu_capacity == {"nvidia.com/gpu": 8}
    assert row.gpu_allocatable == {"nvidia.com/gpu": 7}
    assert row.triage_command == "gputriage node gpu-1"


def test_fewer_gpus_than_the_label_counts() -> None:
    row = node(gpus=6, labels={"nvidia.com/gpu.count": "8"})
    assert troubles(row) == ["gpus-below-label"]
    assert row is not None and row.reason == ("advertises 6 GPUs, label nvidia.com/gpu.count=8")
    # time-slicing: 32 replicas of 8 GPUs is 8 GPUs
    sliced = c.gpu_node("gpu-2", labels={"nvidia.com/gpu.replicas": "4"})
    sliced["status"]["capacity"]["nvidia.com/gpu"] = "32"
    sliced["status"]["allocatable"]["nvidia.com/gpu"] = "32"
    info = node_info(sliced)
    assert info is not None and node_row(info) is None
    # MIG mixed: no nvidia.com/gpu at all, MIG profiles instead
    mixed = c.gpu_node("gpu-3", labels={"nvidia.com/mig.strategy": "mixed"})
    for key in ("capacity", "allocatable"):
        mixed["status"][key].update({"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56"})
    info = node_info(mixed)
    assert info is not None and node_row(info) is None


def test_gpu_hardware_without_a_gpu_resource() -> None:
    row = node(gpus=0, labels={"nvidia.com/gpu.count": "8"})
    assert troubles(row) == ["gpu-resource-missing"]
    assert row is not None and row.family is Family.NODE
    assert row.reason.startswith("no GPU resource advertised (nvidia.com/gpu.count=8)")


def test_not_ready_cordoned_and_gpu_taints() -> None:
    row = node(ready=False)
    assert troubles(row) == ["not-ready"]
    assert row is not None and row.reason == (
        "Ready=Unknown (NodeStatusUnknown): Kubelet stopped posting node status."
    )
    assert row.since == c.ts(-600)
    assert troubles(node(unschedulable=True)) == ["cordoned"]
    tainted = node(
        taints=[
            {
                "key": "nvidia.com/gpu.health",
                "value": "unhealthy",
                "effect": "NoExecute",
                "timeAdded": c.ts(3),
            },
            {"key": "example.com/gpu-drain", "effect": "PreferNoSchedule"},
        ]
    )
    assert troubles(tainted) == ["gpu-taint"]
    assert (
        tainted is not None and tainted.reason == "taint nvidia.com/gpu.health=unhealthy:NoExecute"
    )
    many = node(allocatable=6, ready=False, unschedulable=True)
    assert troubles(many) == ["allocatable-below-capacity", "not-ready", "cordoned"]
    assert many is not None and many.family is Family.LOST


def test_device_plugin_rows() -> None:
    def plugin(**kw: Any) -> Any:
        p = c.device_plugin_pod("gpu-1")
        if kw:
            p["status"]["containerStatuses"][0] = (
                c.waiting(
                    "nvidia-device-plugin",
                    "CrashLoopBackOff",
                    restarts=7,
                    last=c.terminated("Error", 1),
                )
                if kw.get("crash")
                else c.running(
                    "nvidia-device-plugin", restarts=kw["restarts"], last=c.terminated("Error", 1)
                )
            )
        info = pod_info(p)
        assert info is not None and info.plugin
        return info

    assert plugin_row("gpu-1", [plugin()], expected=True) is None
    assert plugin_row("gpu-1", [plugin(restarts=2)], expected=True) is None
    assert troubles(plugin_row("gpu-1", [plugin(restarts=3)], expected=True)) == [
        "device-plugin-restarting"
    ]
    crash = plugin_row("gpu-1", [plugin(crash=True)], expected=True)
    assert troubles(crash) == ["device-plugin-not-running", "device-plugin-restarting"]
    assert crash is not None and crash.reason.startswith(
        "device-plugin pod gpu-operator/nvidia-device-plugin-daemonset-"
    )
    # a healthy replacement next to a crashing one: the node is fine
    assert plugin_row("gpu-1", [plugin(crash=True), plugin()], expected=True) is None
    assert troubles(plugin_row("gpu-1", [], expected=True)) == ["device-plugin-missing"]
    assert plugin_row("gpu-1", [], expected=False) is None
    off = node_info(c.gpu_node("gpu-9", labels={"nvidia.com/gpu.deploy.device-plugin": "false"}))
    assert off is not None and not plugin_expected(off)


def test_merge_keeps_order_and_earliest_since() -> None:
    a = Row("node", "", "n", "n", (Trouble.CORDONED,), "cordoned", "2026-11-02T10:00:00Z")
    b = Row(
        "node", "", "n", "n", (Trouble.ALLOCATABLE_BELOW_CAPACITY,), "alloc", "2026-11-02T09:00:00Z"
    )
    m = merge(a, b)
    assert m.troubles == (Trouble.ALLOCATABLE_BELOW_CAPACITY, Trouble.CORDONED)
    assert m.reason == "cordoned; alloc" and m.since == "2026-11-02T09:00:00Z"
    assert merge(m, b) is m


def test_durations_and_ages() -> None:
    assert parse_duration("10m") == 600 and parse_duration("1h30m") == 5400
    assert parse_duration("90") == 90 and parse_duration("2d") == 172800
    assert parse_duration("soon") is None and parse_duration("10m later") is None
    assert [short_age(s) for s in (-1, 45, 600, 7200, 3 * 86400)] == ["-", "45s", "10m", "2h", "3d"]
