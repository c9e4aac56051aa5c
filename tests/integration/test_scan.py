"""``gputriage scan`` against the HTTPS test API serving a generated cluster of 2,000 nodes and
20,000 pods (tests/kubeapi/generate.py): exactly the planted troubles, only paginated GETs,
RBAC and token failures worded, expired continue tokens survived, namespaces and selectors."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kubeapi import KubeAPI, KubeContext
from tests.kubeapi import cluster as c
from tests.kubeapi.cluster import Cluster
from tests.kubeapi.generate import Planted, generate

pytestmark = pytest.mark.integration

NODES, PODS = 2000, 20000


@pytest.fixture(scope="module")
def big() -> Iterator[tuple[KubeAPI, Planted]]:
    cluster, planted = generate(NODES, PODS, seed=7, now=time.time())
    with KubeAPI(cluster) as api:
        yield api, planted
        assert not api.mutations()


def scan(
    api: KubeAPI, tmp_path: Path, *argv: str, context: KubeContext | None = None
) -> subprocess.CompletedProcess[str]:
    config = api.write_kubeconfig(tmp_path / "kubeconfig", [context] if context else ())
    return subprocess.run(
        [sys.executable, "-m", "gputriage", "scan", *argv, "--kubeconfig", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def found(
    report: dict[str, Any],
) -> tuple[dict[tuple[str, str], frozenset[str]], dict[str, frozenset[str]]]:
    pods = {
        (t["namespace"], t["name"]): frozenset(t["troubles"])
        for t in report["troubles"]
        if t["kind"] == "pod"
    }
    nodes = {t["name"]: frozenset(t["troubles"]) for t in report["troubles"] if t["kind"] == "node"}
    return pods, nodes


def test_all_namespaces_finds_exactly_the_planted_troubles(
    big: tuple[KubeAPI, Planted], tmp_path: Path
) -> None:
    api, planted = big
    api.clear_requests()
    result = scan(api, tmp_path, "-A", "--report", "json")
    assert result.returncode == 3, result.stderr
    report = json.loads(result.stdout)
    pods, nodes = found(report)
    assert pods == planted.pods
    assert nodes == planted.nodes
    assert len(pods) == 19 and len(nodes) == 17
    assert report["complete"] is True
    assert report["scope"] == {
        "namespace": "",
        "all_namespaces": True,
        "selector": "",
        "stuck_after_s": 600,
    }
    summary = report["summary"]
    assert summary["nodes_listed"] == NODES and summary["gpu_nodes"] == 1400
    assert summary["pods_in_trouble"] == 19 and summary["nodes_in_trouble"] == 17

    rows = {(t["kind"], t["name"]): t for t in report["troubles"]}
    lost = rows[("node", "gpu-node-1")]
    assert lost["family"] == "lost" and lost["gpu_capacity"] == {"nvidia.com/gpu": 8}
    assert lost["gpu_allocatable"] == {"nvidia.com/gpu": 7}
    assert lost["reason"] == "nvidia.com/gpu: allocatable 7 of capacity 8"
    assert lost["triage"] == "gputriage node gpu-node-1"
    creating = [t for t in report["troubles"] if t["troubles"] == ["creating"]]
    assert len(creating) == 3 and all(t["family"] == "create" for t in creating)
    assert all(1790 <= t["age_s"] <= 1900 for t in creating)
    oom = [t for t in report["troubles"] if "oom-killed" in t["troubles"]]
    assert {t["family"] for t in oom} == {"oom"} and len(oom) == 3
    assert all(t["gpu_request"] for t in report["troubles"] if t["kind"] == "pod")
    inventory = {i["node"]: i for i in report["inventory"]}
    assert inventory["gpu-node-1"]["product"] == "NVIDIA-H100-80GB-HBM3"
    assert inventory["gpu-node-1"]["free"] == {"nvidia.com/gpu": 7}
    assert set(inventory) == {t["node"] for t in report["troubles"] if t["node"]}

    requests = api.requests
    assert {r.method for r in requests} == {"GET"}
    lists = [r for r in requests if r.path in ("/api/v1/pods", "/api/v1/nodes")]
    assert len(lists) == len(requests)  # nothing but the two lists
    assert all(r.param("limit") == "500" for r in lists)
    assert {r.agent.split(" ")[0].split("/")[0] for r in lists} == {"gputriage"}
    listings = {ls["what"]: ls for ls in report["listings"]}
    pod_pages = [r for r in lists if r.path == "/api/v1/pods"]
    assert len(pod_pages) == listings["pods"]["pages"] == math.ceil(listings["pods"]["items"] / 500)
    assert sum(1 for r in pod_pages if r.param("continue")) == len(pod_pages) - 1
    assert all(r.param("fieldSelector") == "status.phase!=Succeeded" for r in pod_pages)
    assert listings["nodes"]["items"] == NODES and listings["nodes"]["pages"] == 4


def test_namespace_scope_lists_plugins_by_label(
    big: tuple[KubeAPI, Planted], tmp_path: Path
) -> None:
    api, planted = big
    namespace = sorted({ns for ns, _ in planted.pods})[0]
    api.clear_requests()
    result = scan(api, tmp_path, "-n", namespace, "--report", "json")
    assert result.returncode == 3, result.stderr
    pods, nodes = found(json.loads(result.stdout))
    assert pods == {k: v for k, v in planted.pods.items() if k[0] == namespace}
    assert nodes == planted.nodes  # nodes are cluster-wide; plugins listed by their labels
    paths = {(r.path, r.param("labelSelector")) for r in api.requests}
    assert (f"/api/v1/namespaces/{namespace}/pods", "") in paths
    assert ("/api/v1/pods", "app in (nvidia-device-plugin-daemonset,nvidia-device-plugin)") in paths
    assert not any(p == "/api/v1/pods" and not sel for p, sel in paths)
    assert all(r.param("limit") == "500" for r in api.requests)


def test_label_selector_and_bad_duration(big: tuple[KubeAPI, Planted], tmp_path: Path) -> None:
    api, planted = big
    namespace = sorted({ns for ns, _ in planted.pods})[0]
    api.clear_requests()
    result = scan(api, tmp_path, "-n", namespace, "-l", "app=gpu-job", "--report", "json")
    assert result.returncode == 3, result.stderr  # the planted nodes are still in trouble
    pods, nodes = found(json.loads(result.stdout))
    assert pods == {} and nodes == planted.nodes
    pod_lists = [r for r in api.requests if r.path == f"/api/v1/namespaces/{namespace}/pods"]
    assert pod_lists and {r.param("labelSelector") for r in pod_lists} == {"app=gpu-job"}

    result = scan(api, tmp_path, "-A", "--stuck-after", "soon", "--report", "json")
    assert result.returncode == 2 and "--stuck-after wants a duration" in result.stderr


def test_expired_continue_token_restarts_the_list(
    big: tuple[KubeAPI, Planted], tmp_path: Path
) -> None:
    api, planted = big
    namespace = sorted({ns for ns, _ in planted.pods})[-1]
    api.clear_requests()
    api.expire_continue_tokens(1)
    result = scan(api, tmp_path, "-n", namespace, "--report", "json")
    assert result.returncode == 3, result.stderr
    assert found(json.loads(result.stdout)) == (
        {k: v for k, v in planted.pods.items() if k[0] == namespace},
        planted.nodes,
    )
    assert [r.status for r in api.requests].count(410) == 1


def test_forbidden_nodes_are_named_and_pods_still_scanned(
    big: tuple[KubeAPI, Planted], tmp_path: Path
) -> None:
    api, planted = big
    token = api.add_user(
        "pod-reader", rules=[{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    )
    namespace = sorted({ns for ns, _ in planted.pods})[0]
    result = scan(
        api,
        tmp_path,
        "-n",
        namespace,
        "--report",
        "json",
        context=KubeContext("reader", token=token),
    )
    assert result.returncode == 3, result.stderr
    report = json.loads(result.stdout)
    pods, nodes = found(report)
    assert pods == {k: v for k, v in planted.pods.items() if k[0] == namespace}
    assert pods and nodes == {}
    assert report["complete"] is False
    listing = next(ls for ls in report["listings"] if ls["what"] == "nodes")
    assert listing["status"] == "forbidden"
    assert listing["detail"].startswith(
        "needs `list` on `nodes` (cluster-wide): add it to the ClusterRole, see deploy/rbac.yaml"
    )
    assert "warning: could not list nodes: needs `list` on `nodes`" in result.stderr


def test_refused_token_fails_with_advice(big: tuple[KubeAPI, Planted], tmp_path: Path) -> None:
    api, _ = big
    result = scan(
        api,
        tmp_path,
        "-A",
        "--report",
        "json",
        context=KubeContext("expired", token="expired-token"),
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert (
        "scan failed: cannot list pods: the API server refused our credentials (401 "
        "Unauthorized)" in result.stderr
    )


def test_a_healthy_cluster_exits_zero(tmp_path: Path) -> None:
    cluster = Cluster(dra_version=None)
    node = c.gpu_node("gpu-a")
    cluster.add(
        c.namespace("ml"),
        node,
        c.device_plugin_pod("gpu-a"),
        c.pod("trainer-0", node="gpu-a", gpus=8, statuses=[c.running("main")]),
        c.pod(
            "web",
            node="gpu-a",
            gpus=0,
            statuses=[
                c.waiting(
                    "main", "CrashLoopBackOff", restarts=5, last=c.terminated("OOMKilled", 137)
                )
            ],
        ),
    )
    with KubeAPI(cluster) as api:
        result = scan(api, tmp_path, "-A", "--report", "json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["troubles"] == [] and report["inventory"] == []
    assert report["summary"]["gpu_pods"] == 1 and report["summary"]["pods_listed"] == 3
