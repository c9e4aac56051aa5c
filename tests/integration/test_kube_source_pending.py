"""A Pending pod against the local HTTPS API: the GPU holders of every node are listed
cluster-wide (paginated, trimmed page by page), and the live facts equal the facts of the
bundle ``collect`` writes from them."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from gputriage.evidence.bundle import read_bundle
from gputriage.evidence.collect import write_bundle
from gputriage.evidence.kube import ACTIVE_PODS, GPU_PODS_SCOPE
from gputriage.evidence.model import EvidenceSet, Key
from gputriage.facts.build import build_facts
from tests.integration.conftest import node_overrides
from tests.kubeapi import Cluster, KubeAPI
from tests.kubeapi import cluster as c
from tests.live import open_live

pytestmark = pytest.mark.integration

Args = Callable[..., argparse.Namespace]
PODS_SHOWN = f"GET /api/v1/pods?fieldSelector={ACTIVE_PODS}"


def collect(args: argparse.Namespace) -> EvidenceSet:
    session = open_live(args)
    try:
        return session.collect_all()
    finally:
        session.close()


def add_holders(cl: Cluster) -> None:
    """A pod stuck Terminating on gpu-node-2 (deleted 10 minutes before the newest node
    heartbeat, held by a finalizer), finished GPU pods the field selector leaves out, and a
    pending sweep pod that asks for pool=train nodes."""
    stuck = c.pod(
        "sweep-old-0",
        "research",
        node="gpu-node-2",
        gpus=2,
        statuses=[c.running("main")],
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
    )
    stuck["metadata"].update(
        deletionTimestamp=c.ts(20),
        deletionGracePeriodSeconds=30,
        finalizers=["research.example.com/checkpoint"],
    )
    done = c.pod(
        "eval-done",
        "research",
        node="gpu-node-1",
        gpus=4,
        phase="Succeeded",
        statuses=[c.running("main")],
    )
    failed = c.pod(
        "eval-failed",
        "research",
        node="gpu-node-2",
        gpus=4,
        phase="Failed",
        statuses=[c.running("main")],
    )
    sweep = c.pod(
        "sweep-1",
        "research",
        gpus=2,
        unschedulable=(
            "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 "
            "Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 1 Preemption is "
            "not helpful for scheduling, 2 No preemption victims found for incoming pod."
        ),
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
    )
    sweep["spec"]["nodeSelector"] = {"pool": "train"}
    sweep["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "team", "operator": "NotIn", "values": ["inference"]}
                        ]
                    }
                ]
            }
        }
    }
    cl.add(c.namespace("research"), stuck, done, failed, sweep)
    node2 = cl.get("", "nodes", "", "gpu-node-2")
    assert node2 is not None
    node2["metadata"]["labels"].update({"pool": "train", "team": "research"})


def test_pending_pod_lists_gpu_holders_cluster_wide(
    kube_api: KubeAPI, kube_cluster: Cluster, live_args: Args
) -> None:
    add_holders(kube_cluster)
    ev = collect(live_args("sweep-1", "-n", "research"))
    pods = ev[Key.NODE_PODS]
    assert pods.ok and pods.source == PODS_SHOWN
    assert pods.data["gputriage"] == {"scope": GPU_PODS_SCOPE, "fieldSelector": ACTIVE_PODS}
    names = sorted(p["metadata"]["name"] for p in pods.data["items"])
    # GPU pods bound to a node, and the device plugins; no pending, finished or CPU-only pod
    assert names == [
        "finetune-x8k2p",
        "llm-serve-6d5f7c9b8-2xkqp",
        "llm-serve-6d5f7c9b8-7hfzc",
        "nvidia-device-plugin-7q2lk",
        "nvidia-device-plugin-daemonset-4e7f7",
        "sweep-old-0",
        "trainer-0",
    ]
    assert pods.detail.endswith(
        "the pod is not scheduled: 5 pods holding GPUs on 2 nodes and 2 "
        "device-plugin pods, cluster-wide; fields the facts read only"
    )
    stuck = next(p for p in pods.data["items"] if p["metadata"]["name"] == "sweep-old-0")
    assert set(stuck) == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert set(stuck["metadata"]) == {
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "finalizers",
        "labels",
    }
    assert stuck["spec"] == {
        "nodeName": "gpu-node-2",
        "containers": [
            {
                "name": "main",
                "resources": {
                    "limits": {"nvidia.com/gpu": "2"},
                    "requests": {"cpu": "4", "nvidia.com/gpu": "2"},
                },
            }
        ],
    }
    assert set(stuck["status"]) == {"phase", "conditions", "containerStatuses"}
    listed = [
        r
        for r in kube_api.requests
        if r.path == "/api/v1/pods" and r.param("fieldSelector") == ACTIVE_PODS
    ]
    assert [(r.param("limit"), r.status) for r in listed] == [("500", 200)]
    # nodes.json keeps the labels the pod's selector and affinity read, not the others
    node2 = next(n for n in ev[Key.NODES].data["items"] if n["metadata"]["name"] == "gpu-node-2")
    assert {"pool", "team"} <= set(node2["metadata"]["labels"])
    assert "kubernetes.io/os" not in node2["metadata"]["labels"]

    cluster = build_facts(ev)["cluster"].values
    assert (cluster["node_pods_known"], cluster["holders_cluster_wide"]) == (True, True)
    nodes = {n["name"]: n for n in cluster["gpu_nodes"]}
    assert (nodes["gpu-node-1"]["requested"], nodes["gpu-node-1"]["free"]) == (
        {"nvidia.com/gpu": 10},
        {"nvidia.com/gpu": -3},
    )
    assert (
        nodes["gpu-node-2"]["requested"],
        nodes["gpu-node-2"]["free"],
        nodes["gpu-node-2"]["free_if_terminating_gone"],
    ) == ({"nvidia.com/gpu": 3}, {"nvidia.com/gpu": 5}, {"nvidia.com/gpu": 7})
    assert [n["matches_selector"] for n in cluster["gpu_nodes"]] == [False, True]
    assert cluster["gpu_nodes_matching_selector"] == 1
    holder = next(h for h in cluster["holders"] if h["name"] == "sweep-old-0")
    assert (
        holder["terminating"],
        holder["deletion_timestamp"],
        holder["terminating_for_s"],
        holder["finalizers"],
    ) == (True, c.ts(20), 600, ["research.example.com/checkpoint"])
    assert cluster["reference_time"] == c.ts(30)  # the nodes' last heartbeat
    assert (cluster["terminating_holders"], cluster["gpus_held_by_terminating"]) == (1, 2)
    device_plugin = build_facts(ev)["device_plugin"].values
    assert (device_plugin["pod_known"], device_plugin["pod_found"]) == (True, True)


def test_live_facts_equal_the_collected_bundle(
    kube_api: KubeAPI, kube_cluster: Cluster, live_args: Args, tmp_path: Path
) -> None:
    add_holders(kube_cluster)
    live = collect(live_args("sweep-1", "-n", "research"))
    write_bundle(live, tmp_path / "b")
    replay = read_bundle(tmp_path / "b")
    for key in (Key.NODE_PODS, Key.NODES, Key.POD, Key.EVENTS):
        assert (replay[key].status, replay[key].raw, replay[key].data) == (
            live[key].status,
            live[key].raw,
            live[key].data,
        ), key
    live_facts, replay_facts = build_facts(live), build_facts(replay)
    assert replay_facts.to_context() == live_facts.to_context()
    cluster = replay_facts["cluster"].values
    assert (cluster["holders_cluster_wide"], cluster["gpus_held_by_terminating"]) == (True, 2)
    assert [h["terminating_for_s"] for h in cluster["holders"] if h["terminating"]] == [600]
    assert replay_facts["pod"].values["scheduler_name"] == "default-scheduler"


def test_gpu_holders_are_listed_page_by_page(tmp_path: Path) -> None:
    from gputriage.cli import build_parser

    cl = c.gpu_cluster()
    for i in range(1100):  # one GPU pod in three; the rest hold no GPU
        cl.add(
            c.pod(
                f"batch-{i:04d}",
                "ml",
                node=f"gpu-node-{1 + i % 2}",
                gpus=int(i % 3 == 0),
                statuses=[c.running("main")],
            )
        )
    with KubeAPI(cl) as api:
        config = api.write_kubeconfig(tmp_path / "kc")
        argv = [
            "triage",
            "trainer-0",
            "-n",
            "ml-dev",
            "--kubeconfig",
            str(config),
            "--ssh",
            "off",
            *node_overrides(cl),
        ]
        ev = collect(build_parser().parse_args(argv))
        pages = [
            r
            for r in api.requests
            if r.path == "/api/v1/pods" and r.param("fieldSelector") == ACTIVE_PODS
        ]
        assert [r.param("limit") for r in pages] == ["500", "500", "500"]
        assert [bool(r.param("continue")) for r in pages] == [False, True, True]
        items = ev[Key.NODE_PODS].data["items"]
        assert len(items) == 367 + 6  # batch pods with a GPU, plus the fixture's holders
        gpu_node_1 = next(
            n for n in build_facts(ev)["cluster"].values["gpu_nodes"] if n["name"] == "gpu-node-1"
        )
        assert gpu_node_1["requested"] == {"nvidia.com/gpu": 10 + 184}

        api.clear_requests()
        api.expire_continue_tokens(1)  # the list changed too much between pages: start over
        again = collect(build_parser().parse_args(argv))
        names = [p["metadata"]["name"] for p in again[Key.NODE_PODS].data["items"]]
        assert len(names) == len(set(names)) == 373
        statuses = [
            r.status
            for r in api.requests
            if r.path == "/api/v1/pods" and r.param("fieldSelector") == ACTIVE_PODS
        ]
        assert statuses == [200, 410, 200, 200, 200]
