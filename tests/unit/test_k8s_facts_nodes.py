"""Node and cluster facts, and taint/toleration matching."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gputriage.evidence.model import EvidenceSet, Key
from gputriage.facts.build import target_of
from gputriage.facts.node import resource_state
from gputriage.facts.tolerations import tolerates, untolerated
from tests.unit.k8s_evidence import fixture, groups, text

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "value": "present"}, GPU_TAINT, True),  # empty operator = Equal
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "operator": "Equal"}, GPU_TAINT, False),  # value "" != present
        (
            {"key": "nvidia.com/gpu", "operator": "Equal"},
            {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
            True,
        ),
        ({"operator": "Exists"}, GPU_TAINT, True),  # empty key + Exists tolerates everything
        ({"operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),
        ({"key": "other", "operator": "Exists"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "operator": "Bogus"}, GPU_TAINT, False),
        (
            {"key": "gpu-xid", "operator": "Lt", "value": "100"},
            {"key": "gpu-xid", "value": "79", "effect": "NoSchedule"},
            True,
        ),
        (
            {"key": "gpu-xid", "operator": "Lt", "value": "79"},
            {"key": "gpu-xid", "value": "79", "effect": "NoSchedule"},
            False,
        ),
        (
            {"key": "gpu-xid", "operator": "Gt", "value": "13"},
            {"key": "gpu-xid", "value": "79", "effect": "NoSchedule"},
            True,
        ),
        (
            {"key": "gpu-xid", "operator": "Gt", "value": "013"},  # leading zeros are not integers
            {"key": "gpu-xid", "value": "79", "effect": "NoSchedule"},
            False,
        ),
        (
            {"key": "gpu-xid", "operator": "Gt", "value": "1"},
            {"key": "gpu-xid", "value": "high", "effect": "NoSchedule"},
            False,
        ),
    ],
)
def test_toleration_matching(
    toleration: dict[str, Any], taint: dict[str, Any], expected: bool
) -> None:
    assert tolerates(toleration, taint) is expected


def test_untolerated_ignores_prefer_no_schedule() -> None:
    taints = [
        GPU_TAINT,
        {"key": "soft", "effect": "PreferNoSchedule"},
        {"key": "maintenance", "value": "planned", "effect": "NoExecute"},
        "junk",
    ]
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists"}, None]
    assert untolerated(taints, tolerations) == [  # type: ignore[arg-type]
        {"key": "maintenance", "value": "planned", "effect": "NoExecute"}
    ]
    assert untolerated(taints, [{"operator": "Exists"}]) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("capacity", "allocatable", "state"),
    [
        ({}, {}, "absent"),
        ({"nvidia.com/gpu": 0}, {"nvidia.com/gpu": 0}, "zero"),
        ({"nvidia.com/gpu": 8}, {"nvidia.com/gpu": 7}, "degraded"),
        ({"nvidia.com/gpu": 8}, {"nvidia.com/gpu": 8}, "ok"),
    ],
)
def test_resource_state_rule(
    capacity: dict[str, int], allocatable: dict[str, int], state: str
) -> None:
    assert resource_state("nvidia.com/gpu", capacity, allocatable) == state


def test_node_facts() -> None:
    built = groups(
        fixture(Key.POD, "running/pod.yaml"),
        fixture(Key.NODE, "running/node.json"),
        fixture(Key.NODE_EVENTS, "running/node-events.json"),
    )
    node = built["node"]
    v = node.values
    assert node.known
    assert (v["name"], v["is_pod_node"], v["ready"], v["unschedulable"]) == (
        "gpu-node-7",
        True,
        True,
        True,
    )
    assert v["ready_reason"] == "KubeletReady"
    assert v["pressure"] == []
    assert len(v["taints"]) == 4
    assert v["tolerations_known"] is True
    # nvidia.com/gpu is tolerated, PreferNoSchedule never blocks
    assert v["gpu_taints_untolerated"] == [
        {"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"},
        {"key": "maintenance", "value": "planned", "effect": "NoExecute"},
    ]
    assert (v["capacity"], v["allocatable"]) == ({"nvidia.com/gpu": 8}, {"nvidia.com/gpu": 7})
    assert v["capacity_gt_allocatable"] == ["nvidia.com/gpu"]
    assert v["advertises"] == ["nvidia.com/gpu"]
    assert v["resource_state"] == {"nvidia.com/gpu": "degraded"}
    assert (
        v["gpu_present_label"],
        v["gpu_product"],
        v["gpu_count_label"],
        v["gpu_memory_label"],
    ) == (True, "NVIDIA-H100-80GB-HBM3", 8, 81559)
    assert (v["mig_strategy"], v["mig_config_state"], v["sharing_strategy"], v["gpu_replicas"]) == (
        "single",
        "success",
        "none",
        1,
    )
    assert "kubernetes.io/hostname" not in v["labels"]
    assert v["labels"]["feature.node.kubernetes.io/pci-10de.present"] == "true"
    assert (v["internal_ip"], v["hostname"]) == ("10.0.12.7", "gpu-node-7")
    assert (v["container_runtime"], v["container_runtime_version"], v["kubelet_version"]) == (
        "containerd",
        "containerd://1.7.13",
        "v1.29.4",
    )
    assert (v["kernel_version"], v["os_image"]) == ("5.15.0-107-generic", "Ubuntu 22.04.4 LTS")
    assert (v["events_known"], v["rebooted"], v["not_ready_events"]) == (True, True, 1)
    assert v["event_reasons"] == ["Rebooted", "NodeNotReady", "NodeReady"]
    assert [w["reason"] for w in v["warning_events"]] == ["Rebooted"]
    assert [r.text for r in node.cites["capacity_gt_allocatable"]] == [
        '"nvidia.com/gpu": "8"',
        '"nvidia.com/gpu": "7"',
    ]
    assert [r.text for r in node.cites["gpu_taints_untolerated"]] == [
        '"key": "node.kubernetes.io/unschedulable",',
        '"key": "maintenance",',
    ]
    assert node.cites["unschedulable"][0].text == '"unschedulable": true'


def test_node_without_pod_tolerations_lists_every_hard_taint() -> None:
    node = groups(fixture(Key.NODE, "running/node.json"))["node"]
    assert node.values["tolerations_known"] is False
    assert [t["key"] for t in node.values["gpu_taints_untolerated"]] == [
        "nvidia.com/gpu",
        "node.kubernetes.io/unschedulable",
        "maintenance",
    ]
    # without a pod, the node is the pod's node only if the target says so (gputriage node)
    target = target_of(EvidenceSet([fixture(Key.NODE, "running/node.json")]))
    assert node.values["is_pod_node"] is (target.node == "gpu-node-7")
    assert node.values["events_known"] is False


def test_node_wrong_kind_and_missing() -> None:
    wrong = groups(fixture(Key.NODE, "pending/pod.json"))["node"]
    assert not wrong.known
    assert "expected kind Node, got 'Pod'" in wrong.reason
    assert wrong.values["taints"] == []
    missing = groups()["node"]
    assert missing.reason.startswith("the pod's node object: unavailable")


def test_not_ready_node_and_pressure() -> None:
    node = {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": "n1"},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "True"},
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "KubeletNotReady",
                    "message": "PLEG is not healthy",
                },
            ],
            "capacity": {"nvidia.com/gpu": "0"},
            "allocatable": {"nvidia.com/gpu": "0"},
        },
    }
    v = groups(text(Key.NODE, json.dumps(node)))["node"].values
    assert (v["ready"], v["ready_reason"], v["ready_message"]) == (
        False,
        "KubeletNotReady",
        "PLEG is not healthy",
    )
    assert v["pressure"] == ["MemoryPressure"]
    assert v["resource_state"] == {"nvidia.com/gpu": "zero"}
    assert v["capacity_gt_allocatable"] == []


def test_cluster_capacity_and_holders() -> None:
    cluster = groups(
        fixture(Key.POD, "pending/pod.json"),
        fixture(Key.NODES, "pending/nodes.json"),
        fixture(Key.NODE_PODS, "pending/node-pods.json"),
        fixture(Key.RUNTIME_CLASSES, "pending/runtimeclasses.json"),
    )["cluster"]
    v = cluster.values
    assert cluster.known
    assert (v["nodes_known"], v["node_count"], v["gpu_node_count"]) == (True, 6, 5)
    nodes = {n["name"]: n for n in v["gpu_nodes"]}
    assert list(nodes) == ["gpu-a", "gpu-b", "gpu-c", "gpu-d", "gpu-e"]
    assert (nodes["gpu-a"]["requested"], nodes["gpu-a"]["free"], nodes["gpu-a"]["fits"]) == (
        {"nvidia.com/gpu": 8},
        {"nvidia.com/gpu": 0},
        False,
    )  # terminating pod still counts
    assert (nodes["gpu-b"]["free"], nodes["gpu-b"]["fits"]) == ({"nvidia.com/gpu": 3}, False)
    assert (nodes["gpu-c"]["requested"], nodes["gpu-c"]["free"], nodes["gpu-c"]["fits"]) == (
        None,
        None,
        None,
    )
    assert nodes["gpu-d"]["untolerated_taints"] == [
        {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}
    ]
    assert (nodes["gpu-e"]["capacity"], nodes["gpu-e"]["gpu_present_label"]) == ({}, True)
    assert v["resources_advertised"] == ["nvidia.com/gpu"]
    assert (v["resource_advertised"], v["missing_resources"]) == (True, [])
    assert v["total_capacity"] == {"nvidia.com/gpu": 32}
    assert v["total_allocatable"] == {"nvidia.com/gpu": 31}
    assert v["total_free"] == {"nvidia.com/gpu": 3}
    assert (v["nodes_with_enough_allocatable"], v["nodes_with_enough_free"]) == (2, 0)
    assert [(h["name"], h["gpus"], h["terminating"]) for h in v["holders"]] == [
        ("job-1-abcde", 4, False),
        ("job-2-fghij", 2, False),
        ("old-job-klmno", 2, True),
        ("infer-1-uvwxy", 4, False),
    ]
    assert (v["gpus_held"], v["terminating_holders"], v["gpus_held_by_terminating"]) == (12, 1, 2)
    assert v["runtime_classes"] == ["nvidia", "nvidia-cdi"]
    assert v["runtime_handlers"] == {"nvidia": "nvidia", "nvidia-cdi": "nvidia-cdi"}
    assert (v["runtime_class"], v["runtime_class_exists"]) == ("", None)
    assert cluster.cites["terminating_holders"][0].text == '"name": "old-job-klmno",'
    assert cluster.cites["resources_advertised"][0].text == '"nvidia.com/gpu": "8"'


def test_cluster_on_the_pods_node() -> None:
    cluster = groups(
        fixture(Key.POD, "running/pod.yaml"),
        fixture(Key.NODE_PODS, "running/node-pods.json"),
        fixture(Key.RUNTIME_CLASSES, "running/runtimeclasses.json"),
    )["cluster"]
    v = cluster.values
    assert (v["nodes_known"], v["node_pods_known"]) == (False, True)
    # the pod itself is not its own holder
    assert [h["name"] for h in v["holders"]] == ["train-big-0", "train-old-0"]
    assert (v["gpus_held"], v["gpus_held_by_terminating"]) == (6, 2)
    assert (v["runtime_class"], v["runtime_class_exists"]) == ("nvidia", True)
    assert cluster.cites["runtime_class_exists"][0].text == '"name": "nvidia",'


def test_runtime_class_named_by_a_rejected_create() -> None:
    rcs = json.dumps(
        {
            "kind": "RuntimeClassList",
            "apiVersion": "node.k8s.io/v1",
            "items": [{"kind": "RuntimeClass", "handler": "runc", "metadata": {"name": "runc"}}],
        }
    )
    cluster = groups(
        fixture(Key.OWNER_EVENTS, "owner/owner-events.json"), text(Key.RUNTIME_CLASSES, rcs)
    )["cluster"]
    assert (cluster.values["runtime_class"], cluster.values["runtime_class_exists"]) == (
        "nvidia",
        False,
    )


def test_resource_nobody_advertises() -> None:
    pod = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}}]
        },
    }
    cluster = groups(text(Key.POD, json.dumps(pod)), fixture(Key.NODES, "pending/nodes.json"))[
        "cluster"
    ]
    assert cluster.values["resource_advertised"] is False
    assert cluster.values["missing_resources"] == ["nvidia.com/mig-1g.10gb"]
    assert cluster.values["nodes_with_enough_allocatable"] == 0


def test_cluster_unknown_when_nothing_was_read() -> None:
    cluster = groups()["cluster"]
    assert not cluster.known
    assert "all nodes (cluster GPU capacity): unavailable" in cluster.reason
    assert cluster.values["runtime_class_exists"] is None
    bad = groups(text(Key.NODES, b'{"kind": "NodeList", "items": [1, 2]}'))["cluster"]
    assert not bad.known
    assert "NodeList.items is not a list of objects" in bad.reason
