"""Cluster-wide GPU facts: which nodes have GPUs, how many are free, who holds them.

Three pieces of evidence, each optional, each with its own ``*_known`` flag:

* ``nodes.json``: every GPU node (by GPU resources or GPU hardware labels, so a node whose
  device plugin never registered still shows up) with capacity and allocatable;
* ``node-pods.json``: pods bound to the pod's node (or more): GPUs requested per node, and the
  pods holding them, terminating ones included (they keep devices until their containers stop);
* ``runtimeclasses.json``: whether the RuntimeClass the pod (or a rejected create) names exists.

``free`` is allocatable minus the GPU requests of non-terminal pods on the node, the way the
scheduler counts; it is known only for nodes that node-pods covers (null elsewhere). For a pod
no node was chosen for, ``gputriage collect`` lists the GPU-holding pods of the whole cluster
and marks the list ``"gputriage": {"scope": "cluster-gpu-pods"}``: then every GPU node is
covered, including those where no pod holds a GPU (all free). A hand-made ``node-pods.json``
covers the nodes its pods are bound to.

Durations (``terminating_for_s``) are measured against the newest timestamp in the evidence
(:mod:`gputriage.facts.evidence_clock`), so a replayed bundle gives the same facts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts import node_affinity
from gputriage.facts.evidence_clock import parse_time, reference_time, rfc3339
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
#: ``node-pods.json``'s ``gputriage.scope`` when it lists the GPU holders of every node
#: (written by :mod:`gputriage.evidence.kube` for an unscheduled pod).
CLUSTER_GPU_PODS = "cluster-gpu-pods"

SPEC = GroupSpec(
    name="cluster",
    doc="GPU capacity across the cluster (nodes.json), GPUs held on the pod's node, or on "
    "every GPU node for an unscheduled pod (node-pods.json), and RuntimeClasses "
    "(runtimeclasses.json).",
    sources=(Key.NODES, Key.NODE_PODS, Key.RUNTIME_CLASSES),
    fields={
        "nodes_known": FieldSpec("bool", False, "nodes.json was read."),
        "node_count": FieldSpec("int", 0, "Nodes in the cluster."),
        "gpu_nodes": FieldSpec(
            "list<map>",
            [],
            "Nodes with GPU resources or GPU hardware labels, as maps: name, ready, "
            "unschedulable, taints (key/value/effect), untolerated_taints (NoSchedule/NoExecute "
            "taints the pod does not tolerate), matches_selector (the node satisfies the pod's "
            "nodeSelector and required node affinity; true when the pod sets none), "
            "gpu_present_label, capacity, allocatable, requested (map, null when node-pods "
            "does not cover the node), free (map or null), free_if_terminating_gone (free plus "
            "the GPUs Terminating pods hold there; map or null), fits (bool or null: free "
            "covers the pod's GPU request).",
        ),
        "gpu_node_count": FieldSpec("int", 0, "len(gpu_nodes)."),
        "resources_advertised": FieldSpec(
            "list", [], "Every GPU resource some node has in capacity."
        ),
        "resource_advertised": FieldSpec(
            "bool",
            False,
            "Every GPU resource the pod requests "
            "has allocatable > 0 on some node "
            "(true when it requests none).",
        ),
        "missing_resources": FieldSpec(
            "list", [], "GPU resources the pod requests that no node has allocatable."
        ),
        "total_capacity": FieldSpec("map", {}, "Resource -> sum of capacity over nodes."),
        "total_allocatable": FieldSpec("map", {}, "Resource -> sum of allocatable."),
        "total_free": FieldSpec(
            "map", {}, "Resource -> sum of free over nodes whose free is known."
        ),
        "nodes_with_enough_allocatable": FieldSpec(
            "int",
            0,
            "Usable nodes (Ready, not cordoned, "
            "no untolerated NoSchedule/"
            "NoExecute taint) whose allocatable "
            "covers the pod's request, ignoring "
            "other pods.",
        ),
        "nodes_with_enough_free": FieldSpec(
            "int", 0, "Usable nodes whose known free covers the pod's request."
        ),
        "nodes_fit_if_terminating_gone": FieldSpec(
            "int",
            0,
            "Usable GPU nodes matching the pod's selector where the pod does not fit now but "
            "would once the Terminating pods there are gone (free_if_terminating_gone covers "
            "the request).",
        ),
        "gpu_nodes_untolerated_taints": FieldSpec(
            "list<map>",
            [],
            "Unique NoSchedule/NoExecute taints (key, value, effect) across the GPU nodes that "
            "the pod does not tolerate.",
        ),
        "gpu_nodes_matching_selector": FieldSpec(
            "int",
            0,
            "GPU nodes that satisfy the pod's "
            "nodeSelector and required node "
            "affinity (all of them when it sets "
            "none).",
        ),
        "node_pods_known": FieldSpec("bool", False, "node-pods.json was read."),
        "holders_cluster_wide": FieldSpec(
            "bool",
            False,
            "node-pods.json lists the GPU-holding "
            "pods of every node (collected for an "
            "unscheduled pod), so requested and "
            "free are known for every GPU node.",
        ),
        "holders": FieldSpec(
            "list<map>",
            [],
            "Other non-terminal pods holding GPUs: namespace, name, node, phase, terminating, "
            "deletion_timestamp ('' when not deleted), terminating_for_s (seconds from its "
            "deletionTimestamp, the end of its grace period, to reference_time; 0 while "
            "within it or not terminating), finalizers (list), gpus (total), resources (map).",
        ),
        "gpus_held": FieldSpec("int", 0, "GPUs held by those pods."),
        "terminating_holders": FieldSpec("int", 0, "Holders with a deletionTimestamp."),
        "gpus_held_by_terminating": FieldSpec("int", 0, "GPUs those terminating pods hold."),
        "reference_time": FieldSpec(
            "string",
            "",
            "The newest timestamp in the evidence (RFC "
            "3339), the 'now' terminating_for_s counts "
            "to; '' when node-pods is unknown or no "
            "object carries a time.",
        ),
        "runtime_classes_known": FieldSpec("bool", False, "runtimeclasses.json was read."),
        "runtime_classes": FieldSpec("list", [], "RuntimeClass names."),
        "runtime_handlers": FieldSpec("map", {}, "RuntimeClass name -> handler."),
        "runtime_class": FieldSpec(
            "string",
            "",
            "The RuntimeClass in question: the pod's "
            "runtimeClassName, else the one a rejected "
            "create named.",
        ),
        "runtime_class_exists": FieldSpec(
            "bool|null",
            None,
            "Whether it exists; null when no class is in question or RuntimeClasses are unknown.",
        ),
    },
)


@dataclass
class _Holdings:
    """What node-pods says about GPUs held per node."""

    cluster_wide: bool
    requested: dict[str, dict[str, int]] = field(default_factory=dict)
    #: node -> resource -> GPUs held there by Terminating pods
    terminating: dict[str, dict[str, int]] = field(default_factory=dict)
    holders: list[dict[str, Any]] = field(default_factory=list)
    terminating_refs: list[LineRef] = field(default_factory=list)

    def requested_on(self, node: str) -> dict[str, int] | None:
        """GPUs requested on ``node``; None when the list does not cover it."""
        used = self.requested.get(node)
        return {} if used is None and self.cluster_wide else used


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

    holdings: _Holdings | None = None
    if pods_ev.ok:
        now = reference_time(evidence)
        holdings = _node_pods(pods_ev, target, now)
        if target.node:
            holdings.requested.setdefault(target.node, {})
        holders = holdings.holders
        values.update(
            node_pods_known=True,
            holders_cluster_wide=holdings.cluster_wide,
            holders=holders,
            reference_time=rfc3339(now),
            gpus_held=sum(h["gpus"] for h in holders),
            terminating_holders=sum(1 for h in holders if h["terminating"]),
            gpus_held_by_terminating=sum(h["gpus"] for h in holders if h["terminating"]),
        )
        _cite_holders(pods_ev, holdings, cites)
    if nodes_ev.ok:
        values.update(_nodes(nodes_ev, pod_known, request, holdings, cites))
    if rc_ev.ok:
        values.update(_runtime_classes(items(rc_ev)))
    owner = earlier.get("owner_events")
    rc_name = (pod_known.values["runtime_class"] if pod_known else "") or (
        owner.values["runtime_class_missing"] if owner and owner.known else ""
    )
    values["runtime_class"] = rc_name
    if rc_name and rc_ev.ok:
        values["runtime_class_exists"] = rc_name in values["runtime_classes"]
        ref = cite_field(rc_ev, "name", rc_name)
        if ref.line:
            cites["runtime_class_exists"] = [ref]
    return known(SPEC, values, cites)


def _node_pods(ev: Evidence, target: Target, now: float | None) -> _Holdings:
    scope = mapping(mapping(ev.data).get("gputriage")).get("scope")
    holdings = _Holdings(cluster_wide=scope == CLUSTER_GPU_PODS)
    for p in items(ev):
        meta, spec, status = (mapping(p.get(k)) for k in ("metadata", "spec", "status"))
        node, phase = text(spec.get("nodeName")), text(status.get("phase"))
        if not node or phase in _TERMINAL:
            continue
        gpus = pod_gpu_request(spec)
        _add(holdings.requested.setdefault(node, {}), gpus)
        name, namespace = text(meta.get("name")), text(meta.get("namespace"))
        if not gpus or (name == target.pod and namespace in ("", target.namespace)):
            continue
        deleted = text(meta.get("deletionTimestamp"))
        if deleted:
            _add(holdings.terminating.setdefault(node, {}), gpus)
        finalizers = meta.get("finalizers")
        holdings.holders.append(
            {
                "namespace": namespace,
                "name": name,
                "node": node,
                "phase": phase,
                "terminating": bool(deleted),
                "deletion_timestamp": deleted,
                "terminating_for_s": _seconds_since(deleted, now),
                "finalizers": [text(f) for f in finalizers] if isinstance(finalizers, list) else [],
                "gpus": sum(gpus.values()),
                "resources": gpus,
            }
        )
    return holdings


def _seconds_since(timestamp: str, now: float | None) -> int:
    """Whole seconds from ``timestamp`` to ``now``; 0 when either is unknown or it is later."""
    then = parse_time(timestamp)
    return max(0, int(now - then)) if then is not None and now is not None else 0


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for resource, n in more.items():
        into[resource] = into.get(resource, 0) + n


def _cite_holders(ev: Evidence, holdings: _Holdings, cites: dict[str, list[LineRef]]) -> None:
    # Each citation scans the file: cite the first few, the rest are in `holders`.
    for h in holdings.holders[:MAX_CITES]:
        ref = cite_field(ev, "name", h["name"])
        if ref.line:
            cites.setdefault("holders", []).append(ref)
            if h["terminating"]:
                cites.setdefault("terminating_holders", []).append(ref)
                holdings.terminating_refs.append(ref)
    if holdings.terminating_refs:
        cites["gpus_held_by_terminating"] = list(holdings.terminating_refs)


def _covers(amounts: Mapping[str, int] | None, request: Mapping[str, int]) -> bool | None:
    if amounts is None:
        return None
    return all(amounts.get(r, 0) >= n for r, n in request.items())


def _nodes(
    ev: Evidence,
    pod: FactGroup | None,
    request: dict[str, int],
    holdings: _Holdings | None,
    cites: dict[str, list[LineRef]],
) -> dict[str, Any]:
    all_nodes = [n for n in items(ev) if text(n.get("kind")) in ("", "Node")]
    selector: Mapping[str, str] = pod.values["node_selector"] if pod else {}
    affinity: list[Mapping[str, Any]] = pod.values["affinity_terms"] if pod else []
    gpu_nodes = []
    totals: dict[str, dict[str, int]] = {"capacity": {}, "allocatable": {}, "free": {}}
    enough_alloc = enough_free = fit_if_gone = matching = 0
    untolerated: list[dict[str, str]] = []
    for node in all_nodes:
        v = node_values(node, pod)
        if not (v["capacity"] or v["allocatable"] or v["gpu_present_label"]):
            continue
        used = holdings.requested_on(v["name"]) if holdings else None
        free = (
            None if used is None else {r: n - used.get(r, 0) for r, n in v["allocatable"].items()}
        )
        held = holdings.terminating.get(v["name"], {}) if holdings else {}
        free_gone = None if free is None else {r: n + held.get(r, 0) for r, n in free.items()}
        labels = {
            str(k): text(val)
            for k, val in mapping(mapping(node.get("metadata")).get("labels")).items()
        }
        matches = node_affinity.matches(labels, v["name"], selector, affinity)
        fits = _covers(free, request)
        usable = v["ready"] and not v["unschedulable"] and not v["gpu_taints_untolerated"]
        if request and usable and _covers(v["allocatable"], request):
            enough_alloc += 1
        if request and usable and fits:
            enough_free += 1
        if request and usable and matches and fits is False and _covers(free_gone, request):
            fit_if_gone += 1
        matching += matches
        untolerated.extend(t for t in v["gpu_taints_untolerated"] if t not in untolerated)
        for name, amounts in (
            ("capacity", v["capacity"]),
            ("allocatable", v["allocatable"]),
            ("free", free or {}),
        ):
            for r, n in amounts.items():
                totals[name][r] = totals[name].get(r, 0) + n
        gpu_nodes.append(
            {
                "name": v["name"],
                "ready": v["ready"],
                "unschedulable": v["unschedulable"],
                "taints": v["taints"],
                "untolerated_taints": v["gpu_taints_untolerated"],
                "matches_selector": matches,
                "gpu_present_label": v["gpu_present_label"],
                "capacity": v["capacity"],
                "allocatable": v["allocatable"],
                "requested": used,
                "free": free,
                "free_if_terminating_gone": free_gone,
                "fits": fits,
            }
        )
        if len(cites.get("gpu_nodes", ())) < MAX_CITES:
            ref = cite_field(ev, "name", v["name"])
            if ref.line:
                cites.setdefault("gpu_nodes", []).append(ref)
    advertised = sorted(totals["capacity"])
    missing = sorted(
        r for r in request if not any(n["allocatable"].get(r, 0) > 0 for n in gpu_nodes)
    )
    for r in advertised:
        ref = cite_field(ev, r, next(n["capacity"][r] for n in gpu_nodes if r in n["capacity"]))
        if ref.line:
            cites.setdefault("resources_advertised", []).append(ref)
    _cite_placement(ev, untolerated, selector, cites)
    if fit_if_gone and holdings and holdings.terminating_refs:
        cites["nodes_fit_if_terminating_gone"] = list(holdings.terminating_refs)
    return {
        "nodes_known": True,
        "node_count": len(all_nodes),
        "gpu_nodes": gpu_nodes,
        "gpu_node_count": len(gpu_nodes),
        "resources_advertised": advertised,
        "resource_advertised": not missing,
        "missing_resources": missing,
        "total_capacity": totals["capacity"],
        "total_allocatable": totals["allocatable"],
        "total_free": totals["free"],
        "nodes_with_enough_allocatable": enough_alloc,
        "nodes_with_enough_free": enough_free,
        "nodes_fit_if_terminating_gone": fit_if_gone,
        "gpu_nodes_untolerated_taints": untolerated,
        "gpu_nodes_matching_selector": matching,
    }


def _cite_placement(
    ev: Evidence,
    untolerated: list[dict[str, str]],
    selector: Mapping[str, str],
    cites: dict[str, list[LineRef]],
) -> None:
    """Cite the taint lines the pod does not tolerate and the node labels its selector asks
    for (where some node carries them)."""
    for name, refs in (
        (
            "gpu_nodes_untolerated_taints",
            [cite_field(ev, "key", t["key"]) for t in untolerated[:MAX_CITES]],
        ),
        (
            "gpu_nodes_matching_selector",
            [cite_field(ev, k, v) for k, v in list(selector.items())[:MAX_CITES]],
        ),
    ):
        found = [r for r in refs if r.line]
        if found:
            cites[name] = found


def _runtime_classes(classes: list[dict[str, Any]]) -> dict[str, Any]:
    handlers = {
        text(mapping(c.get("metadata")).get("name")): text(c.get("handler")) for c in classes
    }
    handlers.pop("", None)
    return {
        "runtime_classes_known": True,
        "runtime_classes": sorted(handlers),
        "runtime_handlers": handlers,
    }
