"""The Kubernetes evidence source against the local HTTPS API: every key of the bundle
contract, shaped like kubectl prints it, with real selectors, pagination and timeouts."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gputriage.evidence.broker import Broker
from gputriage.evidence.bundle import read_file
from gputriage.evidence.kube import CLUSTER_KEYS, KubeNodeLogSource, KubeSource
from gputriage.evidence.kube_client import KubeClient, load_config
from gputriage.evidence.kube_target import resolve_target
from gputriage.evidence.live import LiveSession
from gputriage.evidence.model import BUNDLE_FILES, Evidence, EvidenceSet, Key, Status
from gputriage.evidence.sources import NODE_KEYS, NodeQuery
from tests.conftest import require_tool
from tests.kubeapi import Cluster, KubeAPI
from tests.kubeapi import cluster as c
from tests.live import open_live

pytestmark = pytest.mark.integration

Args = Callable[..., argparse.Namespace]


def collect(live_args: Args, *argv: str) -> tuple[LiveSession, EvidenceSet]:
    session = open_live(live_args(*argv))
    try:
        return session, session.collect_all()
    finally:
        session.close()


class FileNodeSource:
    """Node evidence from files in a directory (named as in a bundle), recording the queries."""

    name = "files"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.queries: list[tuple[Key, NodeQuery, float]] = []

    def collect(self, key: Key, query: NodeQuery, timeout: float) -> Evidence:
        self.queries.append((key, query, timeout))
        for name in BUNDLE_FILES[key]:
            if (self.directory / name).is_file():
                return read_file(key, self.directory / name, source=f"files/{name}")
        return Evidence(key, Status.UNAVAILABLE, f"no {BUNDLE_FILES[key][0]} here")

    def close(self) -> None:
        """Nothing to close."""


def test_every_key_for_a_restarting_gpu_pod(live_args: Args) -> None:
    session, ev = collect(live_args, "trainer-0")
    assert session.description == "context test (ml/trainer-0)"
    assert set(ev) == set(Key)
    statuses = {k: e.status for k, e in ev.items()}
    # job-pods is only for a distributed job target (pytorchjob/NAME...), not one pod.
    assert all(
        statuses[k] is Status.OK for k in (Key.POD, *CLUSTER_KEYS) if k is not Key.JOB_PODS
    ), statuses
    assert statuses[Key.JOB_PODS] is Status.UNAVAILABLE
    assert ev[Key.KUBELET_LOG].ok  # through the node log query, SSH being off

    assert ev[Key.POD].data["metadata"]["uid"] == c.uid_for("Pod", "ml", "trainer-0")
    assert sorted(e["reason"] for e in ev[Key.EVENTS].data["items"]) == ["BackOff", "Scheduled"]
    assert ev[Key.NODE].data["metadata"]["name"] == "gpu-node-1"
    assert ev[Key.NODE].data["status"]["allocatable"]["nvidia.com/gpu"] == "7"
    node_pods = ev[Key.NODE_PODS].data["items"]
    assert len(node_pods) == 5 and {p["kind"] for p in node_pods} == {"Pod"}
    assert [e["reason"] for e in ev[Key.NODE_EVENTS].data["items"]] == ["SystemOOM"]
    assert ev[Key.QUOTA].data["items"][0]["status"]["used"] == {"requests.nvidia.com/gpu": "11"}
    assert "owners: StatefulSet/trainer" in ev[Key.OWNER_EVENTS].detail
    assert [r["handler"] for r in ev[Key.RUNTIME_CLASSES].data["items"]] == ["nvidia"]
    assert ev[Key.RESOURCE_CLAIMS].data["items"][0]["metadata"]["name"] == "trainer-gpus"
    assert ev[Key.RESOURCE_SLICES].data["items"][0]["spec"]["nodeName"] == "gpu-node-1"
    assert ev[Key.DEVICE_CLASSES].data["items"][0]["metadata"]["name"] == "gpu.nvidia.com"

    # Two containers: the log is the one that restarted (trainer), not the first listed.
    assert ev[Key.CONTAINER_LOG].raw == "step 4100 loss 1.92\nstep 4200 loss 1.90\n"
    assert "container=trainer" in ev[Key.CONTAINER_LOG].source
    assert ev[Key.CONTAINER_LOG_PREVIOUS].lines()[1] == (
        "RuntimeError: CUDA error: unspecified launch failure"
    )
    plugin = ev[Key.DEVICE_PLUGIN_LOG]
    assert "gpu-operator/nvidia-device-plugin-daemonset-4e7f7" in plugin.detail
    assert plugin.find_line("Xid=79").line == 6
    assert "NodeLogQuery" not in ev[Key.KUBELET_LOG].detail
    assert ev[Key.KUBELET_LOG].find_line("Registered plugin").line == 2
    for key in NODE_KEYS[1:]:
        assert ev[key].status is Status.UNAVAILABLE
        assert "only serves the kubelet journal" in ev[key].detail


def test_nodes_are_trimmed_to_gpu_fields(live_args: Args) -> None:
    _, ev = collect(live_args, "trainer-0")
    nodes = {n["metadata"]["name"]: n for n in ev[Key.NODES].data["items"]}
    assert sorted(nodes) == ["cpu-node-1", "gpu-node-1", "gpu-node-2"]
    gpu = nodes["gpu-node-2"]
    assert "annotations" not in gpu["metadata"]
    assert gpu["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert "feature.node.kubernetes.io/pci-10de.present" in gpu["metadata"]["labels"]
    assert "kubernetes.io/os" not in gpu["metadata"]["labels"]
    assert gpu["spec"] == {
        "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule", "value": "present"}]
    }
    assert set(gpu["status"]) == {"capacity", "allocatable", "conditions", "addresses", "nodeInfo"}
    assert "2 of 3 nodes have GPUs" in ev[Key.NODES].detail


def test_raw_matches_what_kubectl_prints(
    kube_api: KubeAPI, kubeconfig: Path, live_args: Args
) -> None:
    _, ev = collect(live_args, "trainer-0")
    exe = require_tool("kubectl")
    env = {**os.environ, "KUBECACHEDIR": str(kubeconfig.parent / "cache")}

    def kubectl(*args: str) -> object:
        out = subprocess.run(
            [exe, "--kubeconfig", str(kubeconfig), *args, "-o", "json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        return json.loads(out.stdout)

    assert json.loads(ev[Key.POD].raw) == kubectl("get", "pod", "trainer-0")
    events = kubectl("get", "events", "--field-selector", "involvedObject.name=trainer-0")
    assert isinstance(events, dict)
    assert json.loads(ev[Key.EVENTS].raw)["items"] == events["items"]
    on_node = kubectl("get", "pods", "-A", "--field-selector", "spec.nodeName=gpu-node-1")
    assert isinstance(on_node, dict)
    assert ev[Key.NODE_PODS].data["items"] == on_node["items"]


def test_workload_chain_and_owner_events(live_args: Args) -> None:
    session, ev = collect(live_args, "deploy/llm-serve")
    assert session.pod == "llm-serve-6d5f7c9b8-7hfzc"
    owner = ev[Key.OWNER_EVENTS]
    assert "owners: ReplicaSet/llm-serve-6d5f7c9b8, Deployment/llm-serve" in owner.detail
    assert [e["reason"] for e in owner.data["items"]] == ["SuccessfulCreate", "ScalingReplicaSet"]
    assert owner.find_line("Scaled up replica set").line > 0
    # CrashLoopBackOff after an OOM kill: the previous container's log is there.
    assert ev[Key.CONTAINER_LOG_PREVIOUS].raw == "Loading model weights...\n"


def test_pending_pod_has_no_node_evidence(live_args: Args) -> None:
    _, ev = collect(live_args, "trainer-0", "-n", "ml-dev")
    assert ev[Key.POD].data["status"]["phase"] == "Pending"
    for key in (Key.NODE, Key.NODE_EVENTS, Key.DEVICE_PLUGIN_LOG):
        assert ev[key].status is Status.UNAVAILABLE
        assert "not scheduled" in ev[key].detail
    # no node of its own: the pods holding GPUs on every node instead
    assert (
        ev[Key.NODE_PODS].ok and ev[Key.NODE_PODS].data["gputriage"]["scope"] == "cluster-gpu-pods"
    )
    assert len(ev[Key.NODE_PODS].data["items"]) == 6
    for key in NODE_KEYS:
        assert ev[key].detail == (
            "the pod is not scheduled to a node yet: there is no node to look at"
        )
    assert ev[Key.CONTAINER_LOG].detail == "the pod is not scheduled yet: no container has run"
    assert ev[Key.NODES].ok and ev[Key.QUOTA].ok


def test_container_waiting_to_start_and_plugin_found_by_helm_labels(live_args: Args) -> None:
    _, ev = collect(live_args, "job/finetune")
    assert ev[Key.CONTAINER_LOG].status is Status.UNAVAILABLE
    assert ev[Key.CONTAINER_LOG].detail == (
        'container main: container "main" in pod '
        '"finetune-x8k2p" is waiting to start: '
        "ContainerCreating"
    )
    assert ev[Key.CONTAINER_LOG_PREVIOUS].detail == (
        "container main has not restarted: there is no previous log"
    )
    plugin = ev[Key.DEVICE_PLUGIN_LOG]
    assert (
        "kube-system/nvidia-device-plugin-7q2lk (container nvidia-device-plugin-ctr)"
        in plugin.detail
    )
    assert ev[Key.EVENTS].data["items"][0]["reason"] == "FailedCreatePodSandBox"
    kubelet = ev[Key.KUBELET_LOG]
    assert kubelet.status is Status.UNAVAILABLE
    assert "does not serve the node log query" in kubelet.detail


def test_no_device_plugin_on_the_node(kube_cluster: Cluster, live_args: Args) -> None:
    plugin_pod = kube_cluster.get(
        "", "pods", "gpu-operator", "nvidia-device-plugin-daemonset-4e7f7"
    )
    assert plugin_pod is not None
    kube_cluster.remove(plugin_pod)
    _, ev = collect(live_args, "trainer-0")
    plugin = ev[Key.DEVICE_PLUGIN_LOG]
    assert plugin.status is Status.UNAVAILABLE
    assert plugin.detail.startswith("no device-plugin pod runs on node gpu-node-1")
    assert "k8s-app=nvidia-gpu-device-plugin" in plugin.detail


def test_dra_not_served_and_served_as_v1(tmp_path: Path) -> None:
    from gputriage.cli import build_parser

    for version, expected in ((None, Status.UNAVAILABLE), ("v1", Status.OK)):
        with KubeAPI(c.gpu_cluster(dra_version=version)) as api:
            config = api.write_kubeconfig(tmp_path / f"kc-{version}")
            args = build_parser().parse_args(
                ["triage", "trainer-0", "--kubeconfig", str(config), "--ssh", "off"]
            )
            session = open_live(args)
            ev = session.collect_all()
            session.close()
            for key in (Key.RESOURCE_CLAIMS, Key.RESOURCE_SLICES, Key.DEVICE_CLASSES):
                assert ev[key].status is expected
            if version is None:
                assert "does not serve resource.k8s.io" in ev[Key.DEVICE_CLASSES].detail
            else:
                assert ev[Key.DEVICE_CLASSES].source == "GET /apis/resource.k8s.io/v1/deviceclasses"
            discovery = [r for r in api.requests if r.path == "/apis/resource.k8s.io"]
            assert len(discovery) == 1  # asked once, shared by the three DRA keys


def test_nodes_are_listed_page_by_page(tmp_path: Path) -> None:
    from gputriage.cli import build_parser

    cl = c.gpu_cluster().add(*c.many_nodes(1200))
    with KubeAPI(cl) as api:
        config = api.write_kubeconfig(tmp_path / "kc")
        session = open_live(
            build_parser().parse_args(
                [
                    "triage",
                    "trainer-0",
                    "--kubeconfig",
                    str(config),
                    "--ssh",
                    "off",
                    "--node-address",
                    "gpu-node-1=127.0.0.1",
                ]
            )
        )
        ev = session.collect_all()
        session.close()
        assert len(ev[Key.NODES].data["items"]) == 1203
        assert "602 of 1203 nodes have GPUs" in ev[Key.NODES].detail
        pages = [r for r in api.requests if r.path == "/api/v1/nodes"]
        assert [r.param("limit") for r in pages] == ["500", "500", "500"]
        assert [bool(r.param("continue")) for r in pages] == [False, True, True]

        api.clear_requests()
        api.expire_continue_tokens(1)  # compaction between two pages: start the list over
        session = open_live(
            build_parser().parse_args(
                [
                    "triage",
                    "trainer-0",
                    "--kubeconfig",
                    str(config),
                    "--ssh",
                    "off",
                    "--node-address",
                    "gpu-node-1=127.0.0.1",
                ]
            )
        )
        ev = session.collect_all()
        session.close()
        names = [n["metadata"]["name"] for n in ev[Key.NODES].data["items"]]
        assert len(names) == len(set(names)) == 1203
        statuses = [r.status for r in api.requests if r.path == "/api/v1/nodes"]
        assert statuses == [200, 410, 200, 200, 200]


def test_a_slow_endpoint_times_out_alone(kube_api: KubeAPI, live_args: Args) -> None:
    # A 2 s timeout leaves room for the other calls on a loaded 2-core CI machine.
    kube_api.delay(r"/resourcequotas$", 6.0)
    kube_api.delay(r"/runtimeclasses$", 0.6)
    kube_api.delay(r"/deviceclasses$", 0.6)
    kube_api.delay(r"/proxy/logs/$", 0.6)
    started = time.monotonic()
    _, ev = collect(live_args, "trainer-0", "--request-timeout", "2")
    took = time.monotonic() - started
    quota = ev[Key.QUOTA]
    assert quota.status is Status.TIMEOUT
    assert quota.detail.startswith("the API server did not answer within 2 s")
    assert all(ev[k].ok for k in CLUSTER_KEYS if k not in (Key.QUOTA, Key.JOB_PODS))
    assert ev[Key.RUNTIME_CLASSES].elapsed_s >= 0.6
    # Three 0.6 s delays and a 2 s timeout ran side by side: far less than their sum (3.8 s),
    # and the 6 s endpoint was not waited for.
    assert took < 3.6, took


def test_node_sources_get_the_node_address_and_first_ok_wins(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    (tmp_path / "dmesg.log").write_text(
        "[Mon Nov  2 09:41:07 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, name=, GPU has "
        "fallen off the bus.\n"
    )
    files = FileNodeSource(tmp_path)
    client = KubeClient(load_config(str(kubeconfig)), timeout=5)
    target = resolve_target(client, "ml", "trainer-0")
    source = KubeSource(
        client,
        "ml",
        "trainer-0",
        pod_evidence=target.pod_evidence,
        node_overrides={"gpu-node-1": "127.0.0.1"},
        since="30m",
    )
    ev = EvidenceSet(
        [e for e in _run(Broker(source, [files, KubeNodeLogSource(client)], timeout=5))]
    )
    client.close()
    assert ev[Key.DMESG].ok and ev[Key.DMESG].source == "files/dmesg.log"
    assert ev[Key.KUBELET_LOG].ok and "proxy/logs" in ev[Key.KUBELET_LOG].source
    queried = {key: q for key, q, _ in files.queries}
    assert set(queried) == set(NODE_KEYS)
    q = queried[Key.DMESG]
    assert (q.node, q.address, q.namespace, q.pod, q.since) == (
        "gpu-node-1",
        "127.0.0.1",
        "ml",
        "trainer-0",
        "30m",
    )
    assert q.pod_uid == c.uid_for("Pod", "ml", "trainer-0")
    lsmod = ev[Key.LSMOD]
    assert lsmod.status is Status.UNAVAILABLE
    assert lsmod.detail.startswith(
        "files: no lsmod.txt here (also tried kube-node-log: unavailable:"
    )
    since = [r.param("sinceTime") for r in kube_api.requests if r.path.endswith("/logs/")]
    assert len(since) == 1 and since[0].endswith("Z")


def _run(broker: Broker) -> list[Evidence]:
    import asyncio

    async def gather() -> list[Evidence]:
        return [e async for e in broker.stream()]

    return asyncio.run(gather())


def test_stream_yields_the_resolved_pod_first_without_reading_it_again(
    kube_api: KubeAPI, live_args: Args
) -> None:
    import asyncio

    session = open_live(live_args("trainer-0"))
    kube_api.clear_requests()

    async def first_two() -> list[Evidence]:
        got = []
        async for e in session.stream():
            got.append(e)
            if len(got) == 2:
                break
        return got

    got = asyncio.run(first_two())
    session.close()
    assert got[0].key is Key.POD and got[0].ok
    assert got[1].key is not Key.POD
    assert "/api/v1/namespaces/ml/pods/trainer-0" not in [r.path for r in kube_api.requests]
    assert session.keys()[0] is Key.POD and len(session.keys()) == len(Key)


def test_server_errors_and_garbage_become_named_errors(kube_api: KubeAPI, live_args: Args) -> None:
    kube_api.fail(
        r"/namespaces/ml/events$",
        500,
        json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "code": 500,
                "reason": "InternalError",
                "message": "etcdserver: request timed out",
            }
        ),
    )
    kube_api.fail(r"^/api/v1/nodes/gpu-node-1$", 200, "<html>proxy login</html>", "text/html")
    kube_api.fail(
        r"/resourcequotas$",
        429,
        json.dumps(
            {
                "kind": "Status",
                "code": 429,
                "reason": "TooManyRequests",
                "message": "too many requests, please try again later",
            }
        ),
    )
    kube_api.fail(r"^/api/v1/pods$", 200, '{"kind": "PodList", "items": [{"metadata"')
    _, ev = collect(live_args, "trainer-0")
    events = ev[Key.EVENTS]
    assert events.status is Status.ERROR
    assert events.detail.startswith(
        "HTTP 500: etcdserver: request timed out (GET /api/v1/namespaces/ml/events?fieldSelector="
    )
    node = ev[Key.NODE]
    assert (node.status, node.detail) == (
        Status.ERROR,
        "the API answered with something that is not JSON ('<html>proxy login</html>')",
    )
    assert ev[Key.QUOTA].detail.startswith("the API server is throttling us (429): too many")
    assert ev[Key.NODE_PODS].detail.startswith(
        "HTTP 502: the API answered with something that is not a list"
    )
    # A broken node object still leaves an address for node sources: the node's name.
    assert ev[Key.KUBELET_LOG].ok
    assert ev[Key.CONTAINER_LOG].ok and ev[Key.OWNER_EVENTS].status is Status.ERROR


def test_a_pod_answer_that_is_not_a_pod_stops_before_the_walk(
    kube_api: KubeAPI, live_args: Args
) -> None:
    from gputriage.errors import GputriageError

    kube_api.fail(r"/pods/trainer-0$", 200, json.dumps({"kind": "Status", "code": 200}))
    with pytest.raises(GputriageError) as info:
        open_live(live_args("trainer-0"))
    assert info.value.title == "API server error"
    assert "with something that is not a pod" in info.value.message
    assert "expected kind Pod, got 'Status'" in info.value.message


def test_a_log_bigger_than_limit_bytes_is_cut_by_the_client(
    kube_api: KubeAPI, live_args: Args
) -> None:
    """An API (or proxy) that ignores limitBytes: the client still reads at most that much."""
    from gputriage.evidence.kube import LOG_LIMIT_BYTES

    kube_api.fail(
        r"/pods/trainer-0/log$",
        200,
        b"step 1 loss 2.0\n" * (LOG_LIMIT_BYTES // 4),
        content_type="text/plain",
    )
    _, ev = collect(live_args, "trainer-0")
    log = ev[Key.CONTAINER_LOG]
    assert log.ok, log.detail
    assert len(log.raw.encode()) <= LOG_LIMIT_BYTES
    assert f"{LOG_LIMIT_BYTES >> 20} MiB" in log.detail
