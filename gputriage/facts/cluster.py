"""Cluster-wide GPU facts: which nodes have GPUs, how many are free, who holds them.

Three pieces of evidence, each optional, each with its own ``*_known`` flag:

* ``nodes.json``: every GPU node (by GPU resources or GPU hardware labels, so a node whose
  device plugin never registered still shows up) with capacity and allocatable;
* ``node-pods.json``: pods bound to the pod's node (or more): GPUs requested per node, and the
  pods holding them, terminating ones included (they keep devices until their containers stop);
* ``runtimeclasses.json``: whether the RuntimeClass the pod (or a rejected create) names exists.

``free`` is allocatable minus the GPU requests of non-terminal pods on the node, the way the
scheduler counts; it is known only for nodes that node-pods covers (null elsewhere).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts.gpu_resources import pod_gpu_request
from gputriage.facts.kube_objects import cite_field, items, mapping, text
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    reason_for,
    unknown,
)
from gputriage.facts.node import node_values

_TERMINAL = ("Succeeded", "Failed")
#: Citations per field: each one scans the file, and nodes.json can hold 5,000 nodes.
MAX_CITES = 20

SPEC = GroupSpec(
    name="cluster",
    doc="GPU capacity across the cluster (nodes.json), GPUs held on the pod's node "
        "(node-pods.json) and RuntimeClasses (runtimeclasses.json).",
    sources=(Key.NODES, Key.NODE_PODS, Key.RUNTIME_CLASSES),
    fields={
        "nodes_known": FieldSpec("bool", False, "nodes.json was read."),
        "node_count": FieldSpec("int", 0, "Nodes in the cluster."),
        "gpu_nodes": FieldSpec(
            "list<map>", [],
            "Nodes with GPU resources or GPU hardware labels, as maps: name, ready, "
            "unschedulable, taints (key/value/effect), untolerated_taints (for the pod), "
            "gpu_present_label, capacity, allocatable, requested (map, null when node-pods "
            "does not cover the node), free (map or null), fits (bool or null: free covers the "
            "pod's GPU request)."),
        "gpu_node_count": FieldSpec("int", 0, "len(gpu_nodes)."),
        "resources_advertised": FieldSpec("list", [], "Every GPU resource some node has in "
                                                      "capacity."),
        "resource_advertised": FieldSpec("bool", False, "Every GPU resource the pod requests "
                                                        "has allocatable > 0 on some node "
                                                        "(true when it requests none)."),
        "missing_resources": FieldSpec("list", [], "GPU resources the pod requests that no "
                                                   "node has allocatable."),
        "total_capacity": FieldSpec("map", {}, "Resource -> sum of capacity over nodes."),
        "total_allocatable": FieldSpec("map", {}, "Resource -> sum of allocatable."),
        "total_free": FieldSpec("map", {}, "Resource -> sum of free over nodes whose free is "
                                           "known."),
        "nodes_with_enough_allocatable": FieldSpec("int", 0, "Usable nodes (Ready, not cordoned, "
                                                             "no untolerated NoSchedule/"
                                                             "NoExecute taint) whose allocatable "
                                                             "covers the pod's request, ignoring "
                                                             "other pods."),
        "nodes_with_enough_free": FieldSpec("int", 0, "Usable nodes whose known free covers the "
                                                      "pod's request."),
        "node_pods_known": FieldSpec("bool", False, "node-pods.json was read."),
        "holders": FieldSpec("list<map>", [], "Other non-terminal pods holding GPUs: namespace, "
                                              "name, node, phase, terminating, gpus (total), "
                                              "resources (map)."),
        "gpus_held": FieldSpec("int", 0, "GPUs held by those pods."),
        "terminating_holders": FieldSpec("int", 0, "Holders with a deletionTimestamp."),
        "gpus_held_by_terminating": FieldSpec("int", 0, "GPUs those terminating pods hold."),
        "runtime_classes_known": FieldSpec("bool", False, "runtimeclasses.json was read."),
        "runtime_classes": FieldSpec("list", [], "RuntimeClass names."),
        "runtime_handlers": FieldSpec("map", {}, "RuntimeClass name -> handler."),
        "runtime_class": FieldSpec("string", "", "The RuntimeClass in question: the pod's "
                                                 "runtimeClassName, else the one a rejected "
                                                 "create named."),
        "runtime_class_exists": FieldSpec("bool|null", None, "Whether it exists; null when no "
                                                             "class is in question or "
                                                             "RuntimeClasses are unknown."),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    nodes_ev = evidence.get_or_missing(Key.NODES)
    pods_ev = evidence.get_or_missing(Key.NODE_PODS)
    rc_ev = evidence.get_or_missing(Key.RUNTIME_CLASSES)
    if not (nodes_ev.ok or pods_ev.ok or rc_ev.ok):
        return unknown(SPEC, "; ".join(reason_for(e) for e in (nodes_ev, pods_ev, rc_ev)))
    pod = earlier.get("pod")
    pod_known = pod if pod and pod.known else None
    request: dict[str, int] = dict(pod_known.values["gpu_resources"]) if pod_known else {}
    values: dict[str, Any] = {}
    cites: dict[str, list[LineRef]] = {}

    requested: dict[str, dict[str, int]] = {}
    if pods_ev.ok:
        requested, holders = _node_pods(items(pods_ev), target)
        if target.node:
            requested.setdefault(target.node, {})
        values.update(node_pods_known=True, holders=holders,
                      gpus_held=sum(h["gpus"] for h in holders),
                      terminating_holders=sum(1 for h in holders if h["terminating"]),
                      gpus_held_by_terminating=sum(h["gpus"] for h in holders
                                                   if h["terminating"]))
        # Each citation scans the file: cite the first few, the rest are in `holders`.
        for h in holders[:MAX_CITES]:
            ref = cite_field(pods_ev, "name", h["name"])
            if ref.line:
                cites.setdefault("holders", []).append(ref)
                if h["terminating"]:
                    cites.setdefault("terminating_holders", []).append(ref)
    if nodes_ev.ok:
        values.update(_nodes(nodes_ev, pod_known, request, requested, cites))
    if rc_ev.ok:
        values.update(_runtime_classes(items(rc_ev)))
    owner = earlier.get("owner_events")
    rc_name = (pod_known.values["runtime_class"] if pod_known else "") or (
        owner.values["runtime_class_missing"] if owner and owner.known else "")
    values["runtime_class"] = rc_name
    if rc_name and rc_ev.ok:
        values["runtime_class_exists"] = rc_name in values["runtime_classes"]
        ref = cite_field(rc_ev, "name", rc_name)
        if ref.line:
            cites["runtime_class_exists"] = [ref]
    return known(SPEC, values, cites)


def _node_pods(pods: list[dict[str, Any]], target: Target
               ) -> tuple[dict[str, dict[str, int]], list[dict[str, Any]]]:
    requested: dict[str, dict[str, int]] = {}
    holders = []
    for p in pods:
        meta, spec, status = (mapping(p.get(k)) for k in ("metadata", "spec", "status"))
        node, phase = text(spec.get("nodeName")), text(status.get("phase"))
        if not node or phase in _TERMINAL:
            continue
        gpus = pod_gpu_request(spec)
        per_node = requested.setdefault(node, {})
        for resource, n in gpus.items():
            per_node[resource] = per_node.get(resource, 0) + n
        name, namespace = text(meta.get("name")), text(meta.get("namespace"))
        if gpus and not (name == target.pod and namespace in ("", target.namespace)):
            holders.append({"namespace": namespace, "name": name, "node": node, "phase": phase,
                            "terminating": bool(meta.get("deletionTimestamp")),
                            "gpus": sum(gpus.values()), "resources": gpus})
    return requested, holders


def _nodes(ev: Evidence, pod: FactGroup | None, request: dict[str, int],
           requested: dict[str, dict[str, int]], cites: dict[str, list[LineRef]]
           ) -> dict[str, Any]:
    all_nodes = [n for n in items(ev) if text(n.get("kind")) in ("", "Node")]
    gpu_nodes = []
    totals: dict[str, dict[str, int]] = {"capacity": {}, "allocatable": {}, "free": {}}
    enough_alloc = enough_free = 0
    for node in all_nodes:
        v = node_values(node, pod)
        if not (v["capacity"] or v["allocatable"] or v["gpu_present_label"]):
            continue
        used = requested.get(v["name"])
        free = None if used is None else {
            r: n - used.get(r, 0) for r, n in v["allocatable"].items()}
        fits = None if free is None else all(free.get(r, 0) >= n for r, n in request.items())
        usable = v["ready"] and not v["unschedulable"] and not v["gpu_taints_untolerated"]
        if request and usable and all(v["allocatable"].get(r, 0) >= n
                                      for r, n in request.items()):
            enough_alloc += 1
        if request and usable and fits:
            enough_free += 1
        for name, amounts in (("capacity", v["capacity"]), ("allocatable", v["allocatable"]),
                              ("free", free or {})):
            for r, n in amounts.items():
                totals[name][r] = totals[name].get(r, 0) + n
        gpu_nodes.append({
            "name": v["name"], "ready": v["ready"], "unschedulable": v["unschedulable"],
            "taints": v["taints"], "untolerated_taints": v["gpu_taints_untolerated"],
            "gpu_present_label": v["gpu_present_label"], "capacity": v["capacity"],
            "allocatable": v["allocatable"], "requested": used, "free": free, "fits": fits,
        })
        if len(cites.get("gpu_nodes", ())) < MAX_CITES:
            ref = cite_field(ev, "name", v["name"])
            if ref.line:
                cites.setdefault("gpu_nodes", []).append(ref)
    advertised = sorted(totals["capacity"])
    missing = sorted(r for r in request
                     if not any(n["allocatable"].get(r, 0) > 0 for n in gpu_nodes))
    for r in advertised:
        ref = cite_field(ev, r, next(n["capacity"][r] for n in gpu_nodes if r in n["capacity"]))
        if ref.line:
            cites.setdefault("resources_advertised", []).append(ref)
    return {
        "nodes_known": True, "node_count": len(all_nodes), "gpu_nodes": gpu_nodes,
        "gpu_node_count": len(gpu_nodes), "resources_advertised": advertised,
        "resource_advertised": not missing, "missing_resources": missing,
        "total_capacity": totals["capacity"], "total_allocatable": totals["allocatable"],
        "total_free": totals["free"], "nodes_with_enough_allocatable": enough_alloc,
        "nodes_with_enough_free": enough_free,
    }


def _runtime_classes(classes: list[dict[str, Any]]) -> dict[str, Any]:
    handlers = {text(mapping(c.get("metadata")).get("name")): text(c.get("handler"))
                for c in classes}
    handlers.pop("", None)
    return {"runtime_classes_known": True, "runtime_classes": sorted(handlers),
            "runtime_handlers": handlers}
