"""Pure helpers of the Kubernetes source: RBAC words, transport errors, durations, pod state."""

from __future__ import annotations

import datetime as dt
import json
import socket
from collections.abc import Callable

import pytest

from gputriage.evidence.kube import PodView, log_container, since_to_rfc3339, slim_node
from gputriage.evidence.kube_errors import Access, Reply, access_of, describe_exception, failed
from gputriage.evidence.kube_target import label_selector, pod_state
from gputriage.evidence.model import Key, Status
from tests.kubeapi import cluster as c


@pytest.mark.parametrize(
    ("path", "access"),
    [
        ("/api/v1/namespaces/ml/events", Access("list", "events", "", "ml")),
        ("/api/v1/namespaces/ml/pods/x/log", Access("get", "pods/log", "", "ml")),
        ("/api/v1/nodes", Access("list", "nodes")),
        ("/api/v1/nodes/gpu-7/proxy/logs/", Access("get", "nodes/proxy")),
        (
            "/apis/apps/v1/namespaces/ml/replicasets/rs-1",
            Access("get", "replicasets", "apps", "ml"),
        ),
        (
            "/apis/resource.k8s.io/v1beta1/resourceslices",
            Access("list", "resourceslices", "resource.k8s.io"),
        ),
    ],
)
def test_access_of_paths(path: str, access: Access) -> None:
    assert access_of(path) == access


def test_forbidden_words_come_from_the_path_when_the_message_is_custom() -> None:
    body = json.dumps(
        {
            "kind": "Status",
            "code": 403,
            "reason": "Forbidden",
            "message": "denied by corp-authz webhook",
        }
    ).encode()
    ev = failed(Key.QUOTA, Reply(403, body, "GET /api/v1/namespaces/ml/resourcequotas"))
    assert ev.status is Status.FORBIDDEN
    assert ev.detail == (
        "needs `list` on `resourcequotas` in namespace ml: add it to the "
        "ClusterRole, see deploy/rbac.yaml (denied by corp-authz webhook)"
    )


def _raised(call: Callable[[], object]) -> BaseException:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("no exception")


def test_transport_errors_are_named() -> None:
    import urllib3

    pool = urllib3.PoolManager(retries=urllib3.Retry(total=0))
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    refused = _raised(lambda: pool.request("GET", f"http://127.0.0.1:{port}/api"))
    assert describe_exception(refused) == ("connection refused", False)
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/api"
        stuck = _raised(lambda: pool.request("GET", url, timeout=0.2))
    assert describe_exception(stuck)[1] is True
    text, timed_out = describe_exception(socket.gaierror(-2, "Name or service not known"))
    assert (text, timed_out) == ("the server name does not resolve (DNS)", False)


def test_since_durations() -> None:
    now = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC)
    assert since_to_rfc3339("2h", now) == "2026-11-02T10:00:00Z"
    assert since_to_rfc3339("-1h30m", now) == "2026-11-02T10:30:00Z"
    assert since_to_rfc3339("1d", now) == "2026-11-01T12:00:00Z"
    assert since_to_rfc3339("yesterday", now) == ""
    assert since_to_rfc3339("", now) == ""


def test_slim_node_keeps_gpu_fields_only() -> None:
    slim = slim_node(c.gpu_node("g", gpus=4, taints=[c.taint("nvidia.com/gpu")]))
    assert set(slim["metadata"]) == {"name", "labels"}
    assert "nvidia.com/gpu.count" in slim["metadata"]["labels"]
    assert "beta.kubernetes.io/arch" not in slim["metadata"]["labels"]
    assert slim["status"]["capacity"]["nvidia.com/gpu"] == "4"
    assert slim["spec"] == {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}
    empty = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"labels": {}},
        "spec": {},
        "status": {},
    }
    assert slim_node({}) == empty
    assert slim_node({"metadata": "garbage", "spec": [], "status": None}) == empty


def test_pod_state_ranks_failing_then_pending() -> None:
    crash = c.pod("a", node="n", statuses=[c.waiting("main", "CrashLoopBackOff", restarts=3)])
    pending = c.pod("b", unschedulable="0/3 nodes are available")
    creating = c.pod("b2", node="n")
    restarted = c.pod(
        "c", node="n", statuses=[c.running("main", restarts=2, last=c.terminated("OOMKilled", 137))]
    )
    healthy = c.pod("d", node="n", statuses=[c.running("main")])
    assert pod_state(crash) == (0, "CrashLoopBackOff")
    assert pod_state(pending) == (1, "Pending, Unschedulable")
    assert pod_state(creating) == (1, "Pending, ContainerCreating")
    assert pod_state(restarted) == (2, "Running, 2 restarts, last OOMKilled")
    assert pod_state(healthy) == (3, "Running")
    assert pod_state({}) == (1, "Unknown")


def test_label_selector_from_workload_spec() -> None:
    assert (
        label_selector(
            {
                "matchLabels": {"b": "2", "a": "1"},
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["gpu", "cpu"]},
                    {"key": "canary", "operator": "DoesNotExist"},
                ],
            }
        )
        == "a=1,b=2,tier in (gpu,cpu),!canary"
    )
    assert label_selector(None) == ""


def test_log_container_prefers_failing_init_then_trouble_then_gpu() -> None:
    init = c.pod(
        "p",
        node="n",
        containers=[c.container("main", gpus=1)],
        init_containers=[c.container("fetch")],
        init_statuses=[c.waiting("fetch", "CrashLoopBackOff", restarts=2)],
        statuses=[c.waiting("main", "PodInitializing")],
    )
    assert log_container(PodView(init))[0] == "fetch"
    gpu = c.pod(
        "p",
        node="n",
        containers=[c.container("sidecar"), c.container("train", gpus=8)],
        statuses=[c.running("sidecar"), c.running("train")],
    )
    assert log_container(PodView(gpu))[0] == "train"
    assert log_container(PodView({}))[0] == ""
