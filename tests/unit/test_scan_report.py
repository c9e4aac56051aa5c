"""The scan result: the fleet's bookkeeping over a generated cluster (no server), the JSON keys
reports promise, Markdown rows, and cluster text made inert."""

from __future__ import annotations

import json
import time
from typing import Any

from gputriage.evidence.model import Status
from gputriage.scan.classify import node_info, pod_info
from gputriage.scan.collect import Listing, Scope
from gputriage.scan.fleet import Fleet
from gputriage.scan.report import build_report, render_json, render_markdown
from tests.kubeapi import cluster as c
from tests.kubeapi.generate import generate

NOW = time.time()


def fleet_of(
    objects: dict[str, list[dict[str, Any]]], *, every_pod: bool = True, plugins_listed: bool = True
) -> Fleet:
    fleet = Fleet(NOW, 600)
    fleet.holders_complete = every_pod
    nodes, pods = objects["nodes"], objects["pods"]
    for start in range(0, max(len(nodes), len(pods)), 500):  # interleaved pages, as listed
        fleet.add_nodes(
            len(nodes[start : start + 500]),
            [n for n in map(node_info, nodes[start : start + 500]) if n],
        )
        fleet.add_pods(
            len(pods[start : start + 500]),
            [p for p in map(pod_info, pods[start : start + 500]) if p],
        )
    fleet.finish(plugins_listed=plugins_listed)
    return fleet


def listed(cluster: c.Cluster) -> dict[str, list[dict[str, Any]]]:
    pods = [
        p for p in cluster.objects[("", "pods")].values() if p["status"].get("phase") != "Succeeded"
    ]
    return {"nodes": list(cluster.objects[("", "nodes")].values()), "pods": pods}


def test_fleet_over_a_generated_cluster_finds_the_planted_set() -> None:
    cluster, planted = generate(120, 1500, seed=3, now=NOW)
    fleet = fleet_of(listed(cluster))
    pods = {
        (r.namespace, r.name): frozenset(r.troubles) for r in fleet.rows.values() if r.kind == "pod"
    }
    nodes = {r.name: frozenset(r.troubles) for r in fleet.rows.values() if r.kind == "node"}
    assert pods == planted.pods and nodes == planted.nodes
    rows = fleet.sorted_rows()
    assert [r.kind for r in rows[:17]] == ["node"] * 17 and rows[17].kind == "pod"
    first = [r for r in rows if r.troubles[0].value == "allocatable-below-capacity"]
    assert rows[:3] == first and "gpu-node-1" in {r.name for r in first}
    summary = fleet.summary()
    assert summary["gpu_nodes"] == 84 and summary["nodes_in_trouble"] == 17


def test_without_the_plugin_list_no_plugin_verdict() -> None:
    cluster, planted = generate(120, 600, seed=3, now=NOW)
    fleet = fleet_of(listed(cluster), plugins_listed=False)
    nodes = {r.name for r in fleet.rows.values() if r.kind == "node"}
    plugin_only = {
        n for n, t in planted.nodes.items() if all(x.startswith("device-plugin") for x in t)
    }
    assert plugin_only and nodes == set(planted.nodes) - plugin_only


def test_report_keys_rows_and_markdown() -> None:
    cluster, planted = generate(120, 600, seed=3, now=NOW)
    fleet = fleet_of(listed(cluster))
    listings = [
        Listing("nodes", "GET /api/v1/nodes", Status.OK, "", 120, 1),
        Listing(
            "pods", "GET /api/v1/pods", Status.FORBIDDEN, "needs `list` on `pods` (cluster-wide)"
        ),
    ]
    report = build_report(fleet, listings, Scope(), context="prod-eu", now=NOW)
    assert list(report) == [
        "tool",
        "generated_at",
        "context",
        "scope",
        "complete",
        "summary",
        "listings",
        "troubles",
        "inventory",
    ]
    assert report["complete"] is False
    row = next(t for t in report["troubles"] if t["name"] == "gpu-node-1")
    assert list(row) == [
        "kind",
        "namespace",
        "name",
        "node",
        "family",
        "troubles",
        "reason",
        "since",
        "age_s",
        "gpu_request",
        "gpu_capacity",
        "gpu_allocatable",
        "triage",
    ]
    assert json.loads(render_json(report)) == report
    text = render_markdown(report)
    assert text.startswith("# GPU scan: prod-eu (all namespaces)\n")
    assert "- pods: forbidden: needs `list` on `pods` (cluster-wide)" in text
    assert len([line for line in text.splitlines() if line.startswith("| pod |")]) == len(
        planted.pods
    )


def test_cluster_text_is_inert_in_every_format() -> None:
    hostile = "nvml error\x1b]52;c;cm0gLXJmIH4=\x07 | ok\x1b[2J"
    p = c.pod(
        "evil", node="gpu-a", gpus=1, statuses=[c.waiting("main", "CreateContainerError", hostile)]
    )
    fleet = fleet_of({"nodes": [c.gpu_node("gpu-a")], "pods": [p]})
    report = build_report(fleet, [], Scope(stuck_after=0), context="x", now=NOW)
    reason = report["troubles"][0]["reason"]
    assert reason == "main: CreateContainerError: nvml error | ok"
    text = render_markdown(report)
    assert "\x1b" not in text and "\x07" not in text
    assert "main: CreateContainerError: nvml error \\| ok" in text
