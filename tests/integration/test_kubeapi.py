"""The test API server answers like kube-apiserver: checked with kubectl and with raw HTTPS."""

from __future__ import annotations

import http.client
import json
import os
import ssl
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from tests.conftest import require_tool
from tests.kubeapi import Cluster, KubeAPI, KubeContext
from tests.kubeapi import cluster as c

pytestmark = pytest.mark.integration


def connect(api: KubeAPI) -> http.client.HTTPSConnection:
    ctx = ssl.create_default_context(cadata=api.ca_pem.decode())
    return http.client.HTTPSConnection("127.0.0.1", api.port, context=ctx, timeout=10)


def get(
    api: KubeAPI,
    path: str,
    query: dict[str, Any] | None = None,
    *,
    token: str | None = None,
    method: str = "GET",
) -> tuple[int, Any]:
    conn = connect(api)
    headers = {} if token == "" else {"Authorization": f"Bearer {token or api.token}"}
    url = path + (f"?{urlencode(query)}" if query else "")
    conn.request(method, url, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    if resp.getheader("Content-Type", "").startswith("application/json"):
        return resp.status, json.loads(body)
    return resp.status, body.decode()


def names(listing: dict[str, Any]) -> list[str]:
    return [i["metadata"]["name"] for i in listing["items"]]


# -- kubectl ---------------------------------------------------------------------------------


def kubectl(
    kubeconfig: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    exe = require_tool("kubectl")
    cache = kubeconfig.parent / "kubecache"
    return subprocess.run(
        [exe, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KUBECACHEDIR": str(cache), **(env or {})},
    )


def test_kubectl_get_pod_json_returns_the_stored_pod(kube_api: KubeAPI, kubeconfig: Path) -> None:
    out = kubectl(kubeconfig, "get", "pod", "trainer-0", "-o", "json")
    assert out.returncode == 0, out.stderr
    pod = json.loads(out.stdout)
    assert pod["kind"] == "Pod" and pod["apiVersion"] == "v1"
    assert pod["metadata"]["namespace"] == "ml"  # from the context's namespace
    assert pod["spec"]["nodeName"] == "gpu-node-1"
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 2
    # kubectl read /version first (the dispatcher), then discovery, then the pod.
    paths = [r.path for r in kube_api.requests]
    assert paths[0] == "/version"
    assert "/api/v1/namespaces/ml/pods/trainer-0" in paths


def test_kubectl_describe_pod_shows_the_scheduler_event(
    kube_api: KubeAPI, kubeconfig: Path
) -> None:
    out = kubectl(kubeconfig, "describe", "pod", "llm-serve-6d5f7c9b8-q9wrt")
    assert out.returncode == 0, out.stderr
    assert "Status:           Pending" in out.stdout
    assert "FailedScheduling" in out.stdout
    assert "0/3 nodes are available: 1 Insufficient nvidia.com/gpu" in out.stdout
    events = [r for r in kube_api.requests if r.path == "/api/v1/namespaces/ml/events"]
    assert len(events) == 1
    selector = events[0].param("fieldSelector")
    assert "involvedObject.name=llm-serve-6d5f7c9b8-q9wrt" in selector
    assert "involvedObject.uid=" in selector


def test_kubectl_describe_node_and_logs(kube_api: KubeAPI, kubeconfig: Path) -> None:
    node = kubectl(kubeconfig, "describe", "node", "gpu-node-2")
    assert node.returncode == 0, node.stderr
    assert "nvidia.com/gpu=present:NoSchedule" in node.stdout
    assert "finetune-x8k2p" in node.stdout  # non-terminated pods on the node
    logs = kubectl(kubeconfig, "logs", "trainer-0", "-c", "trainer", "--previous", "--tail=2")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.splitlines() == [
        "RuntimeError: CUDA error: unspecified launch failure",
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.",
    ]


def test_kubectl_sees_401_403_404_like_a_real_cluster(kube_api: KubeAPI, tmp_path: Path) -> None:
    viewer = kube_api.add_user(
        "viewer", rules=[{"apiGroups": [""], "resources": ["events"], "verbs": ["list"]}]
    )
    config = kube_api.write_kubeconfig(
        tmp_path / "kc",
        [
            KubeContext("bad", token="wrong-token", namespace="ml"),
            KubeContext("viewer", token=viewer, namespace="ml"),
            KubeContext("admin", namespace="ml-dev"),
        ],
        current="bad",
    )
    unauthorized = kubectl(config, "get", "pod", "trainer-0", "-o", "json")
    assert unauthorized.returncode != 0
    assert "error: You must be logged in to the server" in unauthorized.stderr
    forbidden = kubectl(config, "--context", "viewer", "get", "pod", "trainer-0")
    assert (
        'pods "trainer-0" is forbidden: User "viewer" cannot get resource "pods" in API '
        'group "" in the namespace "ml"'
    ) in forbidden.stderr
    missing = kubectl(config, "--context", "admin", "get", "pod", "nope", "-o", "json")
    assert 'pods "nope" not found' in missing.stderr
    other_ns = kubectl(config, "--context", "admin", "get", "pod", "trainer-0", "-o", "json")
    assert json.loads(other_ns.stdout)["status"]["phase"] == "Pending"  # ml-dev/trainer-0


# -- raw HTTPS -------------------------------------------------------------------------------


def test_discovery_documents(kube_api: KubeAPI) -> None:
    status, version = get(kube_api, "/version", token="")  # public, like system:public-info
    assert status == 200 and version["minor"] == "32"
    _, core = get(kube_api, "/api/v1")
    pods = next(r for r in core["resources"] if r["name"] == "pods")
    assert pods["shortNames"] == ["po"] and pods["namespaced"] is True
    assert {"pods/log", "nodes/proxy"} <= {r["name"] for r in core["resources"]}
    _, groups = get(kube_api, "/apis")
    served = {g["name"]: g["preferredVersion"]["version"] for g in groups["groups"]}
    assert served == {
        "apps": "v1",
        "batch": "v1",
        "node.k8s.io": "v1",
        "coordination.k8s.io": "v1",
        "resource.k8s.io": "v1beta1",
        "nvidia.com": "v1",
        "kubeflow.org": "v1",
    }
    _, apps = get(kube_api, "/apis/apps/v1")
    assert {r["name"] for r in apps["resources"]} == {
        "deployments",
        "replicasets",
        "statefulsets",
        "daemonsets",
    }
    assert get(kube_api, "/apis/resource.k8s.io/v1")[0] == 404


def test_dra_can_be_off_or_v1() -> None:
    with KubeAPI(Cluster(dra_version=None)) as off:
        assert get(off, "/apis/resource.k8s.io")[0] == 404
    with KubeAPI(Cluster(dra_version="v1")) as on:
        status, group = get(on, "/apis/resource.k8s.io")
        assert status == 200 and group["preferredVersion"]["groupVersion"] == "resource.k8s.io/v1"


def test_status_objects_for_401_403_404_and_405(kube_api: KubeAPI) -> None:
    status, body = get(kube_api, "/api/v1/namespaces/ml/pods", token="")
    assert status == 401 and body["kind"] == "Status" and body["reason"] == "Unauthorized"
    assert get(kube_api, "/api/v1/namespaces/ml/pods", token="nope")[0] == 401
    viewer = kube_api.add_user(
        "ml-viewer",
        rules=[{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
        namespaces=["ml"],
    )
    assert get(kube_api, "/api/v1/namespaces/ml/pods", token=viewer)[0] == 200
    status, body = get(kube_api, "/api/v1/pods", token=viewer)
    assert status == 403
    assert body["message"] == (
        'pods is forbidden: User "ml-viewer" cannot list resource "pods" '
        'in API group "" at the cluster scope'
    )
    status, body = get(kube_api, "/apis/apps/v1/namespaces/ml/deployments/llm-serve", token=viewer)
    assert status == 403
    assert body["message"].startswith(
        'deployments.apps "llm-serve" is forbidden: User '
        '"ml-viewer" cannot get resource "deployments" in API '
        'group "apps" in the namespace "ml"'
    )
    assert body["details"] == {"kind": "deployments", "name": "llm-serve", "group": "apps"}
    status, body = get(kube_api, "/api/v1/namespaces/ml/pods/trainer-0/log", token=viewer)
    assert status == 403 and 'cannot get resource "pods/log"' in body["message"]
    status, body = get(kube_api, "/api/v1/namespaces/ml/pods/ghost")
    assert (status, body["reason"], body["message"]) == (404, "NotFound", 'pods "ghost" not found')


def test_writes_are_refused_and_recorded() -> None:
    with KubeAPI(c.gpu_cluster(), global_log=False) as api:
        for method in ("DELETE", "PATCH", "POST"):
            status, body = get(api, "/api/v1/namespaces/ml/pods/trainer-0", method=method)
            assert (status, body["reason"]) == (405, "MethodNotAllowed")
        assert [r.method for r in api.mutations()] == ["DELETE", "PATCH", "POST"]
        assert get(api, "/api/v1/namespaces/ml/pods/trainer-0")[0] == 200  # still served


def test_field_selectors(kube_api: KubeAPI) -> None:
    _, on_node = get(kube_api, "/api/v1/pods", {"fieldSelector": "spec.nodeName=gpu-node-1"})
    assert names(on_node) == [
        "nvidia-device-plugin-daemonset-4e7f7",
        "node-exporter-8fj2k",
        "llm-serve-6d5f7c9b8-2xkqp",
        "llm-serve-6d5f7c9b8-7hfzc",
        "trainer-0",
    ]
    assert on_node["kind"] == "PodList" and "kind" not in on_node["items"][0]
    _, pending = get(
        kube_api, "/api/v1/pods", {"fieldSelector": "status.phase!=Running,status.phase!=Succeeded"}
    )
    assert names(pending) == ["finetune-x8k2p", "llm-serve-6d5f7c9b8-q9wrt", "trainer-0"]
    assert [i["metadata"]["namespace"] for i in pending["items"]] == ["ml", "ml", "ml-dev"]
    _, events = get(
        kube_api,
        "/api/v1/namespaces/ml/events",
        {
            "fieldSelector": "involvedObject.kind=ReplicaSet,involvedObject.name="
            "quota-demo-654649bb45"
        },
    )
    assert [e["reason"] for e in events["items"]] == ["FailedCreate"]
    _, node_events = get(
        kube_api,
        "/api/v1/events",
        {"fieldSelector": "involvedObject.kind=Node,involvedObject.name=gpu-node-1"},
    )
    assert [e["reason"] for e in node_events["items"]] == ["SystemOOM"]
    assert node_events["items"][0]["metadata"]["namespace"] == "default"
    _, by_name = get(kube_api, "/api/v1/pods", {"fieldSelector": "metadata.name=trainer-0"})
    assert sorted(i["metadata"]["namespace"] for i in by_name["items"]) == ["ml", "ml-dev"]
    status, body = get(kube_api, "/api/v1/pods", {"fieldSelector": "spec.hostname=x"})
    assert status == 400 and "field label not supported: spec.hostname" in body["message"]


def test_label_selectors(kube_api: KubeAPI) -> None:
    def pods(selector: str) -> list[str]:
        status, body = get(kube_api, "/api/v1/namespaces/ml/pods", {"labelSelector": selector})
        assert status == 200, body
        return names(body)

    serve = ["llm-serve-6d5f7c9b8-2xkqp", "llm-serve-6d5f7c9b8-7hfzc", "llm-serve-6d5f7c9b8-q9wrt"]
    assert pods("app=llm-serve") == serve
    assert pods("app==trainer") == ["trainer-0"]
    assert pods("app in (trainer, llm-serve)") == [*serve, "trainer-0"]
    assert pods("app notin (llm-serve)") == ["finetune-x8k2p", "trainer-0"]  # unlabelled too
    assert pods("app!=llm-serve,app") == ["trainer-0"]
    assert pods("batch.kubernetes.io/job-name") == ["finetune-x8k2p"]
    assert pods("!app,!batch.kubernetes.io/job-name") == []
    status, body = get(kube_api, "/api/v1/pods", {"labelSelector": "app in (a"})
    assert status == 400 and "unable to parse requirement" in body["message"]


def test_pagination_with_limit_and_continue() -> None:
    cl = Cluster().add(*c.many_nodes(1234))
    with KubeAPI(cl) as api:
        seen: list[str] = []
        token, pages = "", 0
        while True:
            query: dict[str, Any] = {"limit": 500}
            if token:
                query["continue"] = token
            status, page = get(api, "/api/v1/nodes", query)
            assert status == 200
            pages += 1
            seen += names(page)
            token = page["metadata"].get("continue", "")
            if pages == 1:
                assert page["metadata"]["remainingItemCount"] == 734
            if not token:
                break
        assert pages == 3 and len(seen) == 1234 and len(set(seen)) == 1234
        assert seen == sorted(seen)
        _, filtered = get(
            api, "/api/v1/nodes", {"limit": 100, "labelSelector": "nvidia.com/gpu.present=true"}
        )
        assert len(filtered["items"]) == 100 and "remainingItemCount" not in filtered["metadata"]
        assert get(api, "/api/v1/nodes", {"limit": 10, "continue": "garbage"})[0] == 400


def test_pod_logs_options(kube_api: KubeAPI) -> None:
    base = "/api/v1/namespaces/ml/pods/trainer-0/log"
    status, body = get(kube_api, base)
    assert status == 400
    assert body["message"] == (
        "a container name must be specified for pod trainer-0, choose one of: [trainer metrics]"
    )
    _, text = get(kube_api, base, {"container": "trainer", "previous": "true", "tailLines": 2})
    assert text.splitlines()[0] == "RuntimeError: CUDA error: unspecified launch failure"
    _, text = get(kube_api, base, {"container": "trainer", "limitBytes": 9})
    assert text == "step 4100"
    status, body = get(kube_api, base, {"container": "metrics", "previous": "true"})
    assert status == 400
    assert body["message"] == (
        'previous terminated container "metrics" in pod "trainer-0" not found'
    )
    status, body = get(kube_api, "/api/v1/namespaces/ml/pods/finetune-x8k2p/log")
    assert (status, body["message"]) == (
        400,
        'container "main" in pod "finetune-x8k2p" is waiting to start: ContainerCreating',
    )


def test_node_log_query(kube_api: KubeAPI) -> None:
    path = "/api/v1/nodes/gpu-node-1/proxy/logs/"
    status, text = get(kube_api, path, {"query": "kubelet", "pattern": "device", "tailLines": 5})
    assert status == 200
    assert text.splitlines() == [
        "Nov 02 09:41:08 gpu-node-1 kubelet[2211]: I1102 09:41:08.000000    2211 "
        'manager.go:286] "Updated device health" resource="nvidia.com/gpu" healthy=7 '
        "unhealthy=1"
    ]
    assert get(kube_api, path, {"query": "containerd"})[0] == 404
    assert get(kube_api, "/api/v1/nodes/ghost/proxy/logs/", {"query": "kubelet"})[0] == 404


def test_injected_latency_and_request_log(kube_api: KubeAPI) -> None:
    kube_api.delay(r"/resourcequotas$", 0.4)
    started = time.monotonic()
    assert get(kube_api, "/api/v1/namespaces/ml/resourcequotas")[0] == 200
    slow = time.monotonic() - started
    started = time.monotonic()
    assert get(kube_api, "/api/v1/namespaces/ml/pods/trainer-0")[0] == 200
    fast = time.monotonic() - started
    assert slow >= 0.4 > fast
    last = kube_api.requests[-1]
    assert (last.method, last.path, last.user, last.status) == (
        "GET",
        "/api/v1/namespaces/ml/pods/trainer-0",
        "kubernetes-admin",
        200,
    )


def test_keepalive_responses_are_not_held_by_nagle(kube_api: KubeAPI) -> None:
    """Headers and body in one write on a TCP_NODELAY socket: no 40 ms delayed-ACK stall."""
    conn = connect(kube_api)
    durations = []
    for _ in range(30):
        started = time.perf_counter()
        conn.request(
            "GET", "/api/v1/nodes/gpu-node-1", headers={"Authorization": f"Bearer {kube_api.token}"}
        )
        resp = conn.getresponse()
        assert resp.status == 200
        resp.read()
        durations.append(time.perf_counter() - started)
    conn.close()
    assert statistics.median(durations) < 0.02, durations


def test_percent_encoded_names_are_decoded_when_routing() -> None:
    name, ns = "odd name;$(x)", "ns/with slash"
    cluster = Cluster().add(
        c.namespace(ns),
        c.pod(name, ns, containers=[c.container("main")], statuses=[c.running("main")]),
    )
    cluster.logs[(ns, name, "main", False)] = "hello\n"
    with KubeAPI(cluster) as api:
        q = lambda s: quote(s, safe="")  # noqa: E731
        status, body = get(api, f"/api/v1/namespaces/{q(ns)}/pods/{q(name)}")
        assert status == 200, body
        assert body["metadata"]["name"] == name
        status, text = get(
            api, f"/api/v1/namespaces/{q(ns)}/pods/{q(name)}/log", {"container": "main"}
        )
        assert (status, text) == (200, "hello\n")
        assert api.requests[0].path == f"/api/v1/namespaces/{q(ns)}/pods/{q(name)}"
