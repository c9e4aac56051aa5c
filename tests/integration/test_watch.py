"""Live updates against the local HTTPS API: watches are GETs, and a change is re-collected."""

from __future__ import annotations

import argparse
import queue
from collections.abc import Callable

from gputriage.evidence.model import Evidence, Key
from tests.kubeapi import KubeAPI
from tests.kubeapi.cluster import Cluster, event
from tests.live import open_live

pytestmark = __import__("pytest").mark.integration


def test_watch_recollects_events_pod_and_node(
    kube_api: KubeAPI, kube_cluster: Cluster, live_args: Callable[..., argparse.Namespace]
) -> None:
    session = open_live(live_args("trainer-0", "-n", "ml"))
    got: queue.Queue[Evidence] = queue.Queue()
    try:
        pod = session.broker.cluster.pod()  # type: ignore[attr-defined]
        stop = session.watch(got.put, pod)
        # Wait for every watch to be open before changing anything.
        for _ in range(100):
            watching = {r.path for r in kube_api.requests if r.query.get("watch") == ("true",)}
            if {
                "/api/v1/namespaces/ml/events",
                "/api/v1/namespaces/ml/pods",
                "/api/v1/nodes",
            } <= watching:
                break
            __import__("time").sleep(0.05)
        obj = kube_cluster.get("", "pods", "ml", "trainer-0")
        assert obj is not None
        kube_cluster.add(event(obj, "FailedMount", "watch-marker-1", minutes=0))
        changed = got.get(timeout=10)
        assert changed.key is Key.EVENTS and changed.ok and "watch-marker-1" in changed.raw
        obj["status"]["phase"] = "Failed"
        kube_cluster.add(obj)
        changed = got.get(timeout=10)
        assert changed.key is Key.POD and '"Failed"' in changed.raw
        node = kube_cluster.get("", "nodes", "", obj["spec"]["nodeName"])
        assert node is not None
        node["spec"]["unschedulable"] = True
        kube_cluster.add(node)
        changed = got.get(timeout=10)
        assert changed.key is Key.NODE and "unschedulable" in changed.raw
        stop()
    finally:
        session.close()
    watches = [r for r in kube_api.requests if r.query.get("watch") == ("true",)]
    assert watches and all(r.method == "GET" for r in kube_api.requests)
    assert all(r.query.get("resourceVersion") for r in watches)  # no ADDED replay on start
