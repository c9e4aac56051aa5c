"""Candidate nodes of an unscheduled pod, and node-level evidence from the few that matter.

A Pending pod has no node, so the pod's own node evidence (kernel log, nvidia-smi, kubelet
journal, device-plugin log) says nothing. The nodes it *could* land on do: a GPU that fell off
the bus on the only matching node is why it waits. :func:`select_candidates` works out those
nodes from the pod and the node list (GPU resource, nodeSelector and required node affinity,
taints it does not tolerate, cordon) with the same fact code the playbooks read
(:mod:`gputriage.facts.cluster`), and ranks the ones that show trouble from the API: capacity
above allocatable (devices taken out of service), NotReady, a device-plugin pod that is not
running, or a GPU node advertising none of the resource. :func:`collect_candidates` then reads
at most ``limit`` of them, concurrently, each key under the same per-source timeout as the
pod's own node: kernel log, nvidia-smi and kubelet journal through the node sources (SSH,
local), the device-plugin log through the API.

The result is one :class:`Evidence` for :data:`Key.CANDIDATES`: ``raw`` is the JSON document
``collect`` writes as ``candidate-nodes.json`` (which nodes were examined and why, which were
not, how every source went); ``data`` is that document plus, under :data:`NODE_EVIDENCE`, the
per-node :class:`Evidence` objects (in memory only; a bundle keeps them under
``nodes/<name>/``, :mod:`gputriage.evidence.candidate_bundle`); the shape is in
:mod:`gputriage.evidence.candidate_model`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from gputriage.evidence.candidate_model import (
    API_VERSION,
    KIND,
    NODE_EVIDENCE,
    NODE_KEYS,
    node_evidence,
    source_record,
)
from gputriage.evidence.model import DESCRIPTIONS, Evidence, EvidenceSet, Key, Status
from gputriage.evidence.nodes import node_address
from gputriage.evidence.sources import NodeQuery, NodeSource
from gputriage.options import DEFAULT_CANDIDATE_NODES, DEFAULT_REQUEST_TIMEOUT, DEFAULT_SINCE

__all__ = [
    "API_VERSION",
    "KIND",
    "NODE_EVIDENCE",
    "Candidate",
    "Selection",
    "candidates_document",
    "collect_candidates",
    "node_evidence",
    "select_candidates",
]

#: How many troubled candidate nodes are read by default (``--nodes K``).
DEFAULT_LIMIT = DEFAULT_CANDIDATE_NODES
#: Taints a node gets for its conditions (not-ready, unreachable...): they say the node is
#: in trouble, they do not make it a node the pod was never meant for.
_CONDITION_TAINT = "node.kubernetes.io/"


@dataclass(frozen=True)
class Candidate:
    """A GPU node the pod could land on, and what the API shows wrong with it."""

    name: str
    node: Mapping[str, Any]
    reasons: tuple[str, ...]
    weight: int  # how strongly the reasons point at the node (higher first)


@dataclass
class Selection:
    """The outcome of :func:`select_candidates`."""

    examine: list[Candidate] = field(default_factory=list)
    #: ``{"name", "why"}`` for candidates and GPU nodes not examined.
    skipped: list[dict[str, str]] = field(default_factory=list)
    considered: int = 0  # GPU nodes looked at
    candidates: int = 0  # of those, nodes the pod could land on
    problem: str = ""  # why no selection could be made ("" when one was)


def select_candidates(
    pod: Evidence, nodes: Evidence, node_pods: Evidence | None = None, *, limit: int = DEFAULT_LIMIT
) -> Selection:
    """The GPU nodes ``pod`` could land on, the troubled ones first, at most ``limit`` of
    them to examine. Pure: reads only the evidence given."""
    from gputriage.facts import cluster
    from gputriage.facts import pod as pod_facts
    from gputriage.facts.build import target_of

    if not nodes.ok:
        return Selection(problem=f"{DESCRIPTIONS[Key.NODES]}: {nodes.status.value}: {nodes.detail}")
    items = [pod, nodes] + ([node_pods] if node_pods is not None else [])
    evidence = EvidenceSet(items)
    target = target_of(evidence)
    pod_group = pod_facts.build(evidence, target, {})
    if not pod_group.known:
        return Selection(problem=f"the pod could not be read: {pod_group.reason}")
    request: dict[str, int] = dict(pod_group.values["gpu_resources"])
    if not request:
        return Selection(problem="the pod requests no GPU resource")
    group = cluster.build(evidence, target, {"pod": pod_group})
    node_objects = {_name(n): n for n in _items(nodes)}
    plugins = _plugin_pods(node_pods)
    selection = Selection()
    ranked: list[Candidate] = []
    for gn in group.values["gpu_nodes"]:
        selection.considered += 1
        name = str(gn["name"])
        why_not = _not_a_candidate(gn, request)
        if why_not:
            selection.skipped.append({"name": name, "why": why_not})
            continue
        selection.candidates += 1
        reasons, weight = _trouble(gn, request, plugins.get(name))
        if not reasons:
            selection.skipped.append(
                {"name": name, "why": "a candidate, but the API shows no trouble on it"}
            )
            continue
        ranked.append(
            Candidate(
                name, node_objects.get(name, {"metadata": {"name": name}}), tuple(reasons), weight
            )
        )
    ranked.sort(key=lambda c: (-c.weight, c.name))
    selection.examine = ranked[: max(0, limit)]
    for c in ranked[max(0, limit) :]:
        selection.skipped.append(
            {"name": c.name, "why": f"beyond --nodes {limit}: {'; '.join(c.reasons)}"}
        )
    return selection


def _not_a_candidate(gn: Mapping[str, Any], request: Mapping[str, int]) -> str:
    if not gn.get("matches_selector"):
        return "does not match the pod's nodeSelector / required node affinity"
    taints = [
        t
        for t in gn.get("untolerated_taints") or []
        if not str(t.get("key", "")).startswith(_CONDITION_TAINT)
    ]
    if taints:
        shown = ", ".join(
            f"{t.get('key')}={t.get('value')}:{t.get('effect')}"
            if t.get("value")
            else f"{t.get('key')}:{t.get('effect')}"
            for t in taints
        )
        return f"has taints the pod does not tolerate ({shown})"
    if gn.get("unschedulable"):
        return "cordoned (spec.unschedulable)"
    capacity = gn.get("capacity") or {}
    if not any(r in capacity for r in request) and not gn.get("gpu_present_label"):
        return f"has none of {', '.join(sorted(request))}"
    return ""


def _trouble(
    gn: Mapping[str, Any], request: Mapping[str, int], plugin: Mapping[str, Any] | None
) -> tuple[list[str], int]:
    reasons: list[str] = []
    weight = 0
    capacity, allocatable = gn.get("capacity") or {}, gn.get("allocatable") or {}
    for r in sorted(request):
        cap, alloc = int(capacity.get(r, 0)), int(allocatable.get(r, 0))
        if r in capacity and alloc < cap:
            reasons.append(
                f"{r} capacity {cap} > allocatable {alloc}: {cap - alloc} device(s) "
                "taken out of service"
            )
            weight += 4
    if not gn.get("ready"):
        reasons.append("NotReady")
        weight += 3
    if gn.get("gpu_present_label") and not any(r in capacity for r in request):
        reasons.append(
            f"labelled as a GPU node but advertises no {', '.join(sorted(request))} "
            "(device plugin not registered)"
        )
        weight += 3
    if plugin is not None:
        trouble = _plugin_trouble(plugin)
        if trouble:
            reasons.append(trouble)
            weight += 2
    return reasons, weight


def _plugin_trouble(pod: Mapping[str, Any]) -> str:
    meta, status = _mapping(pod.get("metadata")), _mapping(pod.get("status"))
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    phase = str(status.get("phase") or "")
    statuses = [s for s in status.get("containerStatuses") or [] if isinstance(s, dict)]
    restarts = sum(
        int(s.get("restartCount") or 0)
        for s in statuses
        if str(s.get("restartCount") or "0").isdigit()
    )
    waiting = next(
        (
            str(_mapping(_mapping(s.get("state")).get("waiting")).get("reason") or "")
            for s in statuses
            if _mapping(s.get("state")).get("waiting")
        ),
        "",
    )
    if phase != "Running" or waiting:
        return f"device-plugin pod {name} is {waiting or phase or 'not running'}"
    if restarts:
        return f"device-plugin pod {name} restarted {restarts} time(s)"
    return ""


def _plugin_pods(node_pods: Evidence | None) -> dict[str, Mapping[str, Any]]:
    from gputriage.evidence.kube import is_device_plugin

    found: dict[str, Mapping[str, Any]] = {}
    if node_pods is None or not node_pods.ok:
        return found
    for p in _items(node_pods):
        node = str(_mapping(p.get("spec")).get("nodeName") or "")
        if node and is_device_plugin(p):
            found.setdefault(node, p)
    return found


def _items(ev: Evidence) -> list[Mapping[str, Any]]:
    data = ev.data if isinstance(ev.data, dict) else {}
    return [i for i in data.get("items") or [] if isinstance(i, dict)]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _name(obj: Mapping[str, Any]) -> str:
    return str(_mapping(obj.get("metadata")).get("name") or "")


# ---------------------------------------------------------------------------------------------
# Collection

#: ``plugin_log(node, timeout)``: the device-plugin log on a node, through the API.
PluginLog = Callable[[str], Evidence]


def unavailable(detail: str, source: str = "") -> Evidence:
    """The CANDIDATES evidence when there is nothing to examine, with the reason."""
    return Evidence(Key.CANDIDATES, Status.UNAVAILABLE, detail, "", source)


def collect_candidates(
    pod: Evidence,
    nodes: Evidence,
    node_pods: Evidence | None,
    *,
    node_sources: Sequence[NodeSource],
    plugin_log: PluginLog | None,
    operator: PluginLog | None = None,
    overrides: Mapping[str, str],
    since: str = DEFAULT_SINCE,
    limit: int = DEFAULT_LIMIT,
    timeout: float = DEFAULT_REQUEST_TIMEOUT,
    max_bytes: int = 4 * 1024 * 1024,
) -> Evidence:
    """Select the candidate nodes of an unscheduled ``pod`` and read the troubled ones.

    Blocking; every node key runs in its own thread under ``timeout`` (plus a second of
    grace); never raises."""
    spec = _mapping(pod.data.get("spec")) if pod.ok and isinstance(pod.data, dict) else {}
    if not pod.ok:
        return unavailable(f"needs the pod object, which could not be read: {pod.detail}")
    if spec.get("nodeName"):
        return unavailable(
            f"the pod is on node {spec['nodeName']}: candidate nodes are for pods not scheduled yet"
        )
    if limit <= 0:
        return unavailable("candidate nodes are not examined (--nodes 0)")
    selection = select_candidates(pod, nodes, node_pods, limit=limit)
    if selection.problem:
        return unavailable(f"cannot work out candidate nodes: {selection.problem}")
    per_node: dict[str, dict[str, Evidence]] = {c.name: {} for c in selection.examine}
    jobs: list[tuple[str, Key, Callable[[], Evidence]]] = []
    for cand in selection.examine:
        query = NodeQuery(
            cand.name, node_address(cand.node, overrides), since=since, max_bytes=max_bytes
        )
        for key in NODE_KEYS:
            jobs.append((cand.name, key, _node_job(key, query, node_sources, timeout)))
        if plugin_log is not None:
            jobs.append((cand.name, Key.DEVICE_PLUGIN_LOG, lambda name=cand.name: plugin_log(name)))  # type: ignore[misc]
        if operator is not None:
            jobs.append((cand.name, Key.GPU_OPERATOR, lambda name=cand.name: operator(name)))  # type: ignore[misc]
    started = time.monotonic()
    if jobs:
        pool = ThreadPoolExecutor(
            max_workers=min(16, len(jobs)), thread_name_prefix="gputriage-candidates"
        )
        try:
            futures = [(n, k, pool.submit(_never_raises, k, fn)) for n, k, fn in jobs]
            deadline = started + (len(node_sources) or 1) * (timeout + 1.0) + timeout
            for name, key, fut in futures:
                try:
                    ev = fut.result(timeout=max(0.0, deadline - time.monotonic()))
                except FutureTimeout:
                    ev = Evidence(
                        key,
                        Status.TIMEOUT,
                        f"no answer from {name} in time for {DESCRIPTIONS[key]}",
                    )
                per_node[name][key.value] = ev
        finally:
            # Sources bound their own calls; a straggler is not waited for.
            pool.shutdown(wait=False, cancel_futures=True)
    document = candidates_document(selection, per_node, limit)
    raw = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    examined = ", ".join(c.name for c in selection.examine) or "none"
    detail = (
        f"{selection.candidates} candidate nodes of {selection.considered} GPU nodes; "
        f"examined {len(selection.examine)} (at most {limit}): {examined}"
    )
    return Evidence(
        Key.CANDIDATES,
        Status.OK,
        detail,
        raw,
        "candidate nodes",
        {**document, NODE_EVIDENCE: per_node},
        "json",
        elapsed_s=round(time.monotonic() - started, 3),
    )


def candidates_document(
    selection: Selection, per_node: Mapping[str, Mapping[str, Evidence]], limit: int
) -> dict[str, Any]:
    """``candidate-nodes.json``: what was examined and why, and how each source went."""
    items = []
    for cand in selection.examine:
        evs = per_node.get(cand.name, {})
        items.append(
            {
                "name": cand.name,
                "reasons": list(cand.reasons),
                "sources": {k: source_record(ev) for k, ev in evs.items()},
            }
        )
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "limit": limit,
        "considered": selection.considered,
        "candidates": selection.candidates,
        "items": items,
        "notExamined": selection.skipped,
    }


def _node_job(
    key: Key, query: NodeQuery, sources: Sequence[NodeSource], timeout: float
) -> Callable[[], Evidence]:
    def run() -> Evidence:
        from gputriage.evidence.broker import most_informative

        if not sources:
            return Evidence(
                key,
                Status.UNAVAILABLE,
                f"no node access configured for {query.node}: use SSH to read {DESCRIPTIONS[key]}",
            )
        attempts: list[tuple[str, Evidence]] = []
        for src in sources:
            name = str(getattr(src, "name", type(src).__name__))
            ev = _never_raises(key, lambda s=src: s.collect(key, query, timeout))  # type: ignore[misc]
            if ev.ok:
                return ev
            attempts.append((name, ev))
        return most_informative(attempts)

    return run


def _never_raises(key: Key, fn: Callable[[], Evidence]) -> Evidence:
    try:
        ev = fn()
    except Exception as exc:  # a source broke its promise not to raise
        return Evidence(
            key,
            Status.ERROR,
            f"internal error while collecting {DESCRIPTIONS[key]}: {type(exc).__name__}: {exc}",
        )
    if not isinstance(ev, Evidence):
        return Evidence(
            key, Status.ERROR, f"internal error: the source answered {type(ev).__name__}"
        )
    return ev
