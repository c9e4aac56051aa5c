"""Evidence from the Kubernetes API: the pod, its events, owners, node, logs, quota, DRA...

Requests go through :class:`gputriage.evidence.kube_client.KubeClient`; the JSON that comes back
is re-serialised the way ``kubectl get -o json`` prints it (items with kind and apiVersion, no
managedFields) and handed to :func:`gputriage.evidence.bundle.decode`, so a live pod and a
bundle's ``pod.json`` are parsed by the same code. Every failure becomes an Evidence whose
detail says what to do (:mod:`gputriage.evidence.kube_errors`).

Collectors are blocking and thread-safe; :mod:`gputriage.evidence.broker` runs them in threads.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gputriage.evidence.bundle import decode
from gputriage.evidence.kube_client import KubeClient, shown
from gputriage.evidence.kube_errors import Reply, failed, failure_status
from gputriage.evidence.model import DESCRIPTIONS, Evidence, Key, Status
from gputriage.evidence.nodes import node_address
from gputriage.evidence.sources import NodeQuery
from gputriage.options import DEFAULT_SINCE

#: Container and device-plugin logs: the newest lines matter most.
LOG_TAIL_LINES = 5000
LOG_LIMIT_BYTES = 4 * 1024 * 1024
#: The kubelet journal through the API's node log query.
NODE_LOG_TAIL_LINES = 20000

#: What the API source produces besides the pod, in the order the broker starts them.
CLUSTER_KEYS: tuple[Key, ...] = (
    Key.EVENTS,
    Key.NODE,
    Key.CONTAINER_LOG,
    Key.CONTAINER_LOG_PREVIOUS,
    Key.OWNER_EVENTS,
    Key.QUOTA,
    Key.NODE_EVENTS,
    Key.NODE_PODS,
    Key.DEVICE_PLUGIN_LOG,
    Key.NODES,
    Key.RUNTIME_CLASSES,
    Key.RESOURCE_CLAIMS,
    Key.RESOURCE_SLICES,
    Key.DEVICE_CLASSES,
    Key.GPU_OPERATOR,
    Key.JOB_PODS,
)

#: Labels NVIDIA's device plugin carries: GPU Operator, Helm chart, static manifest, GKE.
DEVICE_PLUGIN_SELECTORS: tuple[str, ...] = (
    "app=nvidia-device-plugin-daemonset",
    "app.kubernetes.io/name=nvidia-device-plugin",
    "name=nvidia-device-plugin-ds",
    "k8s-app=nvidia-gpu-device-plugin",
    "app=nvidia-device-plugin",
)

#: Where to GET an owner of each kind (namespace and name filled in).
OWNER_PATHS: dict[str, str] = {
    "ReplicaSet": "/apis/apps/v1/namespaces/{ns}/replicasets/{name}",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments/{name}",
    "StatefulSet": "/apis/apps/v1/namespaces/{ns}/statefulsets/{name}",
    "DaemonSet": "/apis/apps/v1/namespaces/{ns}/daemonsets/{name}",
    "Job": "/apis/batch/v1/namespaces/{ns}/jobs/{name}",
    "CronJob": "/apis/batch/v1/namespaces/{ns}/cronjobs/{name}",
}

#: Node labels kept in ``nodes.json``: GPU, NFD and placement labels (the rest is noise).
_NODE_LABEL = re.compile(
    r"nvidia\.com/|feature\.node\.kubernetes\.io/|gpu|accelerator|amd\.com/|"
    r"^node-role\.kubernetes\.io/|^kubernetes\.io/hostname$|^node\.kubernetes\.io/instance-type$|"
    r"^topology\.kubernetes\.io/"
)
_GPU_RESOURCE = re.compile(r"nvidia\.com/|amd\.com/gpu|gpu\.intel\.com/|/gpu$")

#: Pods that still hold what they requested: the scheduler counts every pod bound to a node
#: until it has finished.
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
#: What ``node-pods.json`` says about its own scope when gputriage lists GPU holders across the
#: cluster (for an unscheduled pod): the ``gputriage`` key of the PodList.
GPU_PODS_SCOPE = "cluster-gpu-pods"


# ---------------------------------------------------------------------------------------------
# Shaping objects like kubectl prints them


def _clean(obj: Any) -> Any:
    """Drop ``metadata.managedFields`` (kubectl hides them too)."""
    if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
        return {**obj, "metadata": meta}
    return obj


def kubectl_list(data: Mapping[str, Any], items: list[Any] | None = None) -> dict[str, Any]:
    """A list as ``kubectl get -o json`` prints it: every item with its kind and apiVersion."""
    list_kind = str(data.get("kind") or "List")
    item_kind = list_kind[: -len("List")] if list_kind.endswith("List") else ""
    api_version = str(data.get("apiVersion") or "v1")
    source = (data.get("items") or []) if items is None else items
    out = []
    for item in source:
        if isinstance(item, dict):
            out.append(
                {
                    "apiVersion": item.get("apiVersion", api_version),
                    "kind": item.get("kind", item_kind),
                    **_clean(item),
                }
            )
    return {
        "apiVersion": api_version,
        "kind": list_kind,
        "items": out,
        "metadata": {
            "resourceVersion": str((data.get("metadata") or {}).get("resourceVersion", ""))
        },
    }


def slim_node(node: Mapping[str, Any], keep_labels: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The GPU-relevant part of a node: GPU/NFD/placement labels (plus ``keep_labels``, the
    ones the pod's node selector and affinity name), taints, capacity, allocatable,
    conditions, addresses, nodeInfo (annotations and images dropped)."""
    meta, spec, status = (_mapping(node.get(k)) for k in ("metadata", "spec", "status"))
    labels = {
        k: v
        for k, v in _mapping(meta.get("labels")).items()
        if _NODE_LABEL.search(k) or k in keep_labels
    }
    slim_spec = {k: spec[k] for k in ("taints", "unschedulable") if k in spec}
    slim_status = {
        k: status[k]
        for k in ("capacity", "allocatable", "conditions", "addresses", "nodeInfo")
        if k in status
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            k: v
            for k, v in (
                ("name", meta.get("name")),
                ("uid", meta.get("uid")),
                ("creationTimestamp", meta.get("creationTimestamp")),
                ("labels", labels),
            )
            if v is not None
        },
        "spec": slim_spec,
        "status": slim_status,
    }


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def selector_labels(pod: Mapping[str, Any]) -> frozenset[str]:
    """Node label keys the pod's nodeSelector and required node affinity read."""
    spec = _mapping(pod.get("spec"))
    keys = {str(k) for k in _mapping(spec.get("nodeSelector"))}
    affinity = _mapping(
        _mapping(_mapping(spec.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    for term in _dicts(affinity.get("nodeSelectorTerms")):
        keys.update(str(e.get("key")) for e in _dicts(term.get("matchExpressions")) if e.get("key"))
    return frozenset(keys)


#: Device-plugin pod labels as (key, value) pairs, from :data:`DEVICE_PLUGIN_SELECTORS`.
_PLUGIN_LABELS = tuple((k, v) for k, _, v in (s.partition("=") for s in DEVICE_PLUGIN_SELECTORS))


def is_device_plugin(pod: Mapping[str, Any]) -> bool:
    labels = _mapping(_mapping(pod.get("metadata")).get("labels"))
    return any(labels.get(k) == v for k, v in _PLUGIN_LABELS)


def slim_gpu_pod(pod: Any) -> dict[str, Any] | None:
    """A bound pod requesting GPUs (or a device-plugin pod) trimmed to what the facts read:
    identity, deletion and finalizers, owners, labels, node, container resources, phase,
    conditions and container states. ``None`` for any other pod."""
    if not isinstance(pod, dict):
        return None
    meta, spec, status = (_mapping(pod.get(k)) for k in ("metadata", "spec", "status"))
    containers, inits = _dicts(spec.get("containers")), _dicts(spec.get("initContainers"))
    if not spec.get("nodeName") or not (
        any(requests_gpu(c) for c in (*containers, *inits)) or is_device_plugin(pod)
    ):
        return None
    slim_spec: dict[str, Any] = {
        "nodeName": spec["nodeName"],
        "containers": [{k: c[k] for k in ("name", "resources") if k in c} for c in containers],
    }
    if inits:
        slim_spec["initContainers"] = [
            {k: c[k] for k in ("name", "resources", "restartPolicy") if k in c} for c in inits
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            k: meta[k]
            for k in (
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "finalizers",
                "ownerReferences",
                "labels",
            )
            if k in meta
        },
        "spec": slim_spec,
        "status": {
            k: status[k]
            for k in ("phase", "conditions", "containerStatuses", "initContainerStatuses")
            if k in status
        },
    }


def has_gpu(node: Mapping[str, Any]) -> bool:
    status = node.get("status") or {}
    keys = set(status.get("capacity") or {}) | set(status.get("allocatable") or {})
    labels = (node.get("metadata") or {}).get("labels") or {}
    return any(_GPU_RESOURCE.search(k) for k in keys) or "nvidia.com/gpu.present" in labels


def requests_gpu(container: Mapping[str, Any]) -> bool:
    res = container.get("resources") or {}
    keys = set(res.get("limits") or {}) | set(res.get("requests") or {})
    return any(_GPU_RESOURCE.search(k) for k in keys)


def since_to_rfc3339(since: str, now: dt.datetime | None = None) -> str:
    """``2h``, ``90m``, ``1h30m``, ``1d`` -> an RFC 3339 time that long ago ("" if unreadable)."""
    parts = re.findall(r"(\d+)\s*([smhd])", since.strip().lstrip("-"))
    if not parts or re.sub(r"[\d\s smhd-]", "", since):
        return ""
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    seconds = sum(int(n) * unit[u] for n, u in parts)
    moment = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class PodView:
    """The fields of the pod the collectors need."""

    data: Mapping[str, Any]

    @classmethod
    def of(cls, pod: Evidence) -> PodView:
        return cls(pod.data if pod.ok and isinstance(pod.data, dict) else {})

    @property
    def meta(self) -> Mapping[str, Any]:
        return self.data.get("metadata") or {}

    @property
    def name(self) -> str:
        return str(self.meta.get("name") or "")

    @property
    def namespace(self) -> str:
        return str(self.meta.get("namespace") or "default")

    @property
    def uid(self) -> str:
        return str(self.meta.get("uid") or "")

    @property
    def node(self) -> str:
        return str((self.data.get("spec") or {}).get("nodeName") or "")

    def statuses(self, init: bool = False) -> list[Mapping[str, Any]]:
        field = "initContainerStatuses" if init else "containerStatuses"
        return [s for s in (self.data.get("status") or {}).get(field) or [] if isinstance(s, dict)]

    def controller(self) -> Mapping[str, Any] | None:
        return controller_of(self.data)


def controller_of(obj: Any) -> Mapping[str, Any] | None:
    """The owner reference marked ``controller`` (else the first one)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    owners = meta.get("ownerReferences") if isinstance(meta, dict) else None
    refs = (
        [r for r in owners if isinstance(r, dict) and r.get("kind") and r.get("name")]
        if isinstance(owners, list)
        else []
    )
    return next((r for r in refs if r.get("controller")), refs[0] if refs else None)


def _in_trouble(status: Mapping[str, Any]) -> bool:
    state = status.get("state") or {}
    waiting = state.get("waiting") or {}
    terminated = state.get("terminated") or {}
    return (
        (bool(waiting) and waiting.get("reason") not in ("ContainerCreating", "PodInitializing"))
        or bool((status.get("lastState") or {}).get("terminated"))
        or int(status.get("restartCount") or 0) > 0
        or (bool(terminated) and terminated.get("exitCode") not in (0, None))
    )


def log_container(pod: PodView) -> tuple[str, Mapping[str, Any]]:
    """The container whose log tells the most: a failing init container, else one in
    trouble, else one requesting GPUs, else the first. Returns (name, its status)."""
    for s in pod.statuses(init=True):
        if _in_trouble(s):
            return str(s.get("name")), s
    by_name = {str(s.get("name")): s for s in pod.statuses()}
    containers = [
        c
        for c in (pod.data.get("spec") or {}).get("containers") or []
        if isinstance(c, dict) and c.get("name")
    ]
    for c in containers:
        status = by_name.get(c["name"])
        if status and _in_trouble(status):
            return c["name"], status
    chosen = next((c for c in containers if requests_gpu(c)), containers[0] if containers else {})
    name = str(chosen.get("name") or "")
    return name, by_name.get(name, {})


# ---------------------------------------------------------------------------------------------
# The evidence source


class KubeSource:
    """Everything the API can tell about one pod. Implements the broker's ClusterSource."""

    name = "kube"

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        pod: str,
        *,
        pod_evidence: Evidence | None = None,
        node_overrides: Mapping[str, str] | None = None,
        since: str = DEFAULT_SINCE,
        node_max_bytes: int = 4 * 1024 * 1024,
        job_selector: str = "",
    ) -> None:
        self.client = client
        #: The label selector of every pod of a distributed job target ('' for one pod).
        self.job_selector = job_selector
        self.namespace = namespace
        self.pod_name = pod
        self.node_overrides = dict(node_overrides or {})
        self.since = since
        self.node_max_bytes = node_max_bytes
        self._prefetched = pod_evidence
        self._lock = threading.Lock()
        self._dra: tuple[str, Reply | None] | None = None
        self._handlers: dict[Key, Callable[[PodView], Evidence]] = {
            Key.EVENTS: self._events,
            Key.NODE: self._node,
            Key.NODES: self._nodes,
            Key.NODE_PODS: self._node_pods,
            Key.NODE_EVENTS: self._node_events,
            Key.QUOTA: self._quota,
            Key.OWNER_EVENTS: self._owner_events,
            Key.RUNTIME_CLASSES: self._runtime_classes,
            Key.RESOURCE_CLAIMS: lambda p: self._dra_list(
                Key.RESOURCE_CLAIMS, "resourceclaims", p.namespace or self.namespace
            ),
            Key.RESOURCE_SLICES: lambda p: self._dra_list(Key.RESOURCE_SLICES, "resourceslices"),
            Key.DEVICE_CLASSES: lambda p: self._dra_list(Key.DEVICE_CLASSES, "deviceclasses"),
            Key.DEVICE_PLUGIN_LOG: self._device_plugin_log,
            Key.GPU_OPERATOR: self._gpu_operator,
            Key.JOB_PODS: self._job_pods,
            Key.CONTAINER_LOG: lambda p: self._container_log(p, previous=False),
            Key.CONTAINER_LOG_PREVIOUS: lambda p: self._container_log(p, previous=True),
        }

    def keys(self) -> tuple[Key, ...]:
        return CLUSTER_KEYS

    def pod(self) -> Evidence:
        """The pod object (the one read while resolving the target, the first time)."""
        with self._lock:
            ready, self._prefetched = self._prefetched, None
        if ready is not None:
            return ready
        return fetch_pod(self.client, self.namespace, self.pod_name)[1]

    def collect(self, key: Key, pod: Evidence) -> Evidence:
        handler = self._handlers.get(key)
        if handler is None:
            return Evidence(
                key,
                Status.UNAVAILABLE,
                f"the Kubernetes API does not provide {DESCRIPTIONS[key]}",
                "",
                "kube",
            )
        view = PodView.of(pod)
        if not view.name and key not in (
            Key.NODES,
            Key.RUNTIME_CLASSES,
            Key.QUOTA,
            Key.RESOURCE_SLICES,
            Key.DEVICE_CLASSES,
        ):
            return Evidence(
                key,
                Status.UNAVAILABLE,
                f"needs the pod object, which could not be read: {pod.detail}",
                "",
                "kube",
            )
        return handler(view)

    def node_query(self, pod: Evidence, node: Evidence | None) -> NodeQuery | str:
        """Where and what to ask the pod's node, or why there is no node to ask."""
        view = PodView.of(pod)
        if not view.name:
            return f"needs the pod object, which could not be read: {pod.detail}"
        if not view.node:
            return "the pod is not scheduled to a node yet: there is no node to look at"
        node_obj: Mapping[str, Any] = (
            node.data
            if node is not None and node.ok and isinstance(node.data, dict)
            else {"metadata": {"name": view.node}}
        )
        return NodeQuery(
            view.node,
            node_address(node_obj, self.node_overrides),
            view.namespace,
            view.name,
            view.uid,
            self.since,
            self.node_max_bytes,
        )

    # -- helpers ---------------------------------------------------------------------------

    def _structured(self, key: Key, data: Any, source: str, note: str = "") -> Evidence:
        text = json.dumps(data, indent=4, ensure_ascii=False) + "\n"
        ev = decode(key, text.encode(), source=source)
        return replace(ev, detail=f"{ev.detail}; {note}") if note and ev.ok else ev

    def _list(
        self, key: Key, path: str, query: Mapping[str, object] | None = None, note: str = ""
    ) -> Evidence:
        reply, data = self.client.list_all(path, query)
        if data is None:
            return failed(key, reply)
        return self._structured(key, kubectl_list(data), reply.shown, note)

    @staticmethod
    def _unscheduled(key: Key) -> Evidence:
        return Evidence(
            key,
            Status.UNAVAILABLE,
            "the pod is not scheduled to a node yet (no spec.nodeName)",
            "",
            "kube",
        )

    # -- collectors ------------------------------------------------------------------------

    def _events(self, pod: PodView) -> Evidence:
        selector = f"involvedObject.name={pod.name},involvedObject.namespace={pod.namespace}"
        if pod.uid:
            selector += f",involvedObject.uid={pod.uid}"
        return self._list(
            Key.EVENTS, f"/api/v1/namespaces/{pod.namespace}/events", {"fieldSelector": selector}
        )

    def _node(self, pod: PodView) -> Evidence:
        if not pod.node:
            return self._unscheduled(Key.NODE)
        reply = self.client.get(f"/api/v1/nodes/{pod.node}")
        if reply.status == 404:
            return Evidence(
                Key.NODE,
                Status.UNAVAILABLE,
                f"node {pod.node} no longer exists (404 from the API): it was deleted or replaced",
                "",
                reply.shown,
            )
        if not reply.ok:
            return failed(Key.NODE, reply)
        return object_evidence(Key.NODE, reply)

    def _nodes(self, pod: PodView) -> Evidence:
        keep = selector_labels(pod.data)
        reply, data = self.client.list_all(
            "/api/v1/nodes", keep=lambda n: slim_node(n, keep) if isinstance(n, dict) else None
        )
        if data is None:
            return failed(Key.NODES, reply)
        nodes = data["items"]
        gpus = sum(1 for n in nodes if has_gpu(n))
        listing = {
            "apiVersion": "v1",
            "kind": "NodeList",
            "items": nodes,
            "metadata": {
                "resourceVersion": str((data.get("metadata") or {}).get("resourceVersion", ""))
            },
        }
        return self._structured(
            Key.NODES,
            listing,
            reply.shown,
            f"{gpus} of {len(nodes)} nodes have GPUs; GPU-relevant fields only",
        )

    def _node_pods(self, pod: PodView) -> Evidence:
        if not pod.node:
            return self._gpu_pods()
        return self._list(
            Key.NODE_PODS, "/api/v1/pods", {"fieldSelector": f"spec.nodeName={pod.node}"}
        )

    def _gpu_pods(self) -> Evidence:
        """For a pod no node was chosen for: the pods holding GPUs on every node (and the
        device-plugin pods), listed cluster-wide page by page and trimmed as each page
        arrives, so free GPUs are known for every GPU node."""
        reply, data = self.client.list_all(
            "/api/v1/pods", {"fieldSelector": ACTIVE_PODS}, keep=slim_gpu_pod
        )
        if data is None:
            return failed(Key.NODE_PODS, reply)
        listing = {
            **kubectl_list(
                {"apiVersion": "v1", "kind": "PodList", "metadata": data.get("metadata") or {}},
                data["items"],
            ),
            "gputriage": {"scope": GPU_PODS_SCOPE, "fieldSelector": ACTIVE_PODS},
        }
        pods = listing["items"]
        holders = [p for p in pods if not is_device_plugin(p)]
        nodes = {p["spec"]["nodeName"] for p in holders}
        return self._structured(
            Key.NODE_PODS,
            listing,
            reply.shown,
            f"the pod is not scheduled: {len(holders)} pods holding GPUs on {len(nodes)} nodes "
            f"and {len(pods) - len(holders)} device-plugin pods, cluster-wide; fields the facts "
            "read only",
        )

    def _node_events(self, pod: PodView) -> Evidence:
        if not pod.node:
            return self._unscheduled(Key.NODE_EVENTS)
        return self._list(
            Key.NODE_EVENTS,
            "/api/v1/events",
            {"fieldSelector": f"involvedObject.kind=Node,involvedObject.name={pod.node}"},
        )

    def _quota(self, pod: PodView) -> Evidence:
        ns = pod.namespace if pod.name else self.namespace
        return self._list(Key.QUOTA, f"/api/v1/namespaces/{ns}/resourcequotas")

    def _runtime_classes(self, pod: PodView) -> Evidence:
        return self._list(Key.RUNTIME_CLASSES, "/apis/node.k8s.io/v1/runtimeclasses")

    def _owner_events(self, pod: PodView) -> Evidence:
        chain, notes = self._owner_chain(pod)
        path = f"/api/v1/namespaces/{pod.namespace}/events"
        if not chain:
            empty = {
                "apiVersion": "v1",
                "kind": "EventList",
                "items": [],
                "metadata": {"resourceVersion": ""},
            }
            return self._structured(
                Key.OWNER_EVENTS, empty, shown(path), "the pod has no owner (a bare pod)"
            )
        items: list[Any] = []
        rv = ""
        for kind, name in chain:
            reply, data = self.client.list_all(
                path, {"fieldSelector": f"involvedObject.kind={kind},involvedObject.name={name}"}
            )
            if data is None:
                return failed(Key.OWNER_EVENTS, reply, f"events of {kind}/{name}: ")
            items.extend(data.get("items") or [])
            rv = str((data.get("metadata") or {}).get("resourceVersion", ""))
        owners = ", ".join(f"{k}/{n}" for k, n in chain)
        listing = kubectl_list(
            {"apiVersion": "v1", "kind": "EventList", "metadata": {"resourceVersion": rv}}, items
        )
        note = f"owners: {owners}" + (f"; {'; '.join(notes)}" if notes else "")
        return self._structured(
            Key.OWNER_EVENTS, listing, f"{shown(path)} (events of {owners})", note
        )

    def _owner_chain(self, pod: PodView) -> tuple[list[tuple[str, str]], list[str]]:
        """(kind, name) from the pod's controller upwards (ReplicaSet -> Deployment, Job ->
        CronJob), plus notes on owners that could not be read."""
        chain: list[tuple[str, str]] = []
        notes: list[str] = []
        ref = pod.controller()
        while ref is not None and len(chain) < 4:
            kind, name = str(ref["kind"]), str(ref["name"])
            chain.append((kind, name))
            template = OWNER_PATHS.get(kind)
            if template is None:
                break
            reply = self.client.get(template.format(ns=pod.namespace, name=name))
            if not reply.ok:
                notes.append(f"could not read {kind}/{name}: {failure_status(reply)[1]}")
                break
            ref = controller_of(reply.json())
        return chain, notes

    def _container_log(self, pod: PodView, *, previous: bool) -> Evidence:
        key = Key.CONTAINER_LOG_PREVIOUS if previous else Key.CONTAINER_LOG
        if not pod.node:
            return Evidence(
                key,
                Status.UNAVAILABLE,
                "the pod is not scheduled yet: no container has run",
                "",
                "kube",
            )
        name, status = log_container(pod)
        if not name:
            return Evidence(key, Status.UNAVAILABLE, "the pod has no containers", "", "kube")
        restarted = int(status.get("restartCount") or 0) > 0 or bool(
            (status.get("lastState") or {}).get("terminated")
        )
        if previous and not restarted:
            return Evidence(
                key,
                Status.UNAVAILABLE,
                f"container {name} has not restarted: there is no previous log",
                "",
                "kube",
            )
        return self._log(key, pod.namespace, pod.name, name, previous=previous)

    def _log(
        self,
        key: Key,
        namespace: str,
        pod: str,
        container: str,
        *,
        previous: bool = False,
        what: str = "",
    ) -> Evidence:
        query: dict[str, object] = {
            "container": container,
            "tailLines": LOG_TAIL_LINES,
            "limitBytes": LOG_LIMIT_BYTES,
        }
        if previous:
            query["previous"] = True
        # max_bytes: an API server (or proxy) that ignores limitBytes must not make us read a
        # huge log whole; the kept bytes are what limitBytes would have served.
        reply = self.client.get(
            f"/api/v1/namespaces/{namespace}/pods/{pod}/log", query, max_bytes=LOG_LIMIT_BYTES
        )
        label = what or f"container {container}"
        if reply.status == 400:  # waiting to start, no previous container...
            return Evidence(key, Status.UNAVAILABLE, f"{label}: {reply.message()}", "", reply.shown)
        if not reply.ok:
            return failed(key, reply, f"{label}: ")
        if not reply.body.strip():
            return Evidence(
                key, Status.UNAVAILABLE, f"{label} has written no log lines", "", reply.shown
            )
        ev = decode(key, reply.body, source=reply.shown)
        cut = (
            reply.truncated
            or len(reply.body) >= LOG_LIMIT_BYTES
            or reply.body.count(b"\n") >= LOG_TAIL_LINES
        )
        note = f"{label}" + (
            f", last {LOG_TAIL_LINES} lines / {LOG_LIMIT_BYTES >> 20} MiB" if cut else ""
        )
        return replace(ev, detail=f"{ev.detail}; {note}") if ev.ok else ev

    def _device_plugin_log(self, pod: PodView) -> Evidence:
        if not pod.node:
            return self._unscheduled(Key.DEVICE_PLUGIN_LOG)
        return self.device_plugin_log_on(pod.node)

    def _job_pods(self, pod: PodView) -> Evidence:
        if not self.job_selector:
            return Evidence(
                Key.JOB_PODS,
                Status.UNAVAILABLE,
                "the target is one pod, not a distributed job",
                "",
                "kube",
            )
        from gputriage.evidence.job_pods import collect_job_pods

        return collect_job_pods(self.client, pod.namespace, self.job_selector)

    def _gpu_operator(self, pod: PodView) -> Evidence:
        if not pod.node:
            return self._unscheduled(Key.GPU_OPERATOR)
        return self.gpu_operator_on(pod.node)

    def gpu_operator_on(self, node: str) -> Evidence:
        """The GPU Operator's component pods on ``node``, validator logs, ClusterPolicy."""
        from gputriage.evidence.operator import collect_operator

        return collect_operator(self.client, node)

    def device_plugin_log_on(self, node: str) -> Evidence:
        """The log of the device-plugin pod on ``node`` (any node: candidate nodes too)."""
        key = Key.DEVICE_PLUGIN_LOG
        found: Mapping[str, Any] | None = None
        for selector in DEVICE_PLUGIN_SELECTORS:
            reply, data = self.client.list_all(
                "/api/v1/pods",
                {"labelSelector": selector, "fieldSelector": f"spec.nodeName={node}"},
            )
            if data is None:
                return failed(key, reply, "finding the device-plugin pod: ")
            candidates = [p for p in data.get("items") or [] if isinstance(p, dict)]
            if candidates:
                running = [
                    p for p in candidates if (p.get("status") or {}).get("phase") == "Running"
                ]
                found = (running or candidates)[0]
                break
        if found is None:
            return Evidence(
                key,
                Status.UNAVAILABLE,
                f"no device-plugin pod runs on node {node} (looked for pods "
                f"labelled {', '.join(DEVICE_PLUGIN_SELECTORS)})",
                "",
                shown("/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}"}),
            )
        plugin = PodView(found)
        containers = [
            str(c.get("name"))
            for c in (found.get("spec") or {}).get("containers") or []
            if isinstance(c, dict) and c.get("name")
        ]
        container = next(
            (c for c in containers if "device-plugin" in c), containers[0] if containers else ""
        )
        what = f"device-plugin pod {plugin.namespace}/{plugin.name} (container {container})"
        ev = self._log(key, plugin.namespace, plugin.name, container, what=what)
        restarts = next(
            (
                int(s.get("restartCount") or 0)
                for s in plugin.statuses()
                if s.get("name") == container
            ),
            0,
        )
        if not ev.ok and ev.status is Status.UNAVAILABLE and restarts:
            previous = self._log(
                key,
                plugin.namespace,
                plugin.name,
                container,
                previous=True,
                what=f"{what}, previous run",
            )
            if previous.ok:
                return previous
        return ev

    def _dra_version(self) -> tuple[str, Reply | None]:
        """The served resource.k8s.io version ("" when not served) and the failed reply."""
        with self._lock:
            if self._dra is None:
                reply = self.client.get("/apis/resource.k8s.io")
                version = ""
                if reply.ok:
                    data = reply.json()
                    preferred = data.get("preferredVersion") if isinstance(data, dict) else None
                    version = str((preferred or {}).get("version") or "")
                self._dra = (version, None if reply.ok or reply.status == 404 else reply)
            return self._dra

    def _dra_list(self, key: Key, plural: str, namespace: str = "") -> Evidence:
        version, problem = self._dra_version()
        if problem is not None:
            return failed(key, problem, "DRA discovery: ")
        if not version:
            return Evidence(
                key,
                Status.UNAVAILABLE,
                "the API server does not serve resource.k8s.io: Dynamic Resource "
                "Allocation is not enabled on this cluster",
                "",
                "GET /apis/resource.k8s.io",
            )
        base = f"/apis/resource.k8s.io/{version}"
        path = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
        return self._list(key, path)


def object_evidence(key: Key, reply: Reply) -> Evidence:
    """A single object from a 2xx reply, printed like ``kubectl get -o json``."""
    data = reply.json()
    if not isinstance(data, dict):
        return Evidence(
            key,
            Status.ERROR,
            f"the API answered with something that is not JSON ({reply.message()[:80]!r})",
            "",
            reply.shown,
        )
    text = json.dumps(_clean(data), indent=4, ensure_ascii=False) + "\n"
    return decode(key, text.encode(), source=reply.shown)


def fetch_pod(client: KubeClient, namespace: str, name: str) -> tuple[Reply, Evidence]:
    """GET the pod; the Evidence holds it as ``kubectl get pod -o json`` prints it."""
    reply = client.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    if not reply.ok:
        return reply, failed(Key.POD, reply)
    return reply, object_evidence(Key.POD, reply)


class KubeNodeLogSource:
    """The kubelet journal through the API's node log query, a read-only fallback when the
    node cannot be reached over SSH (needs ``get`` on ``nodes/proxy`` and a kubelet with the
    NodeLogQuery feature and ``enableSystemLogQuery``)."""

    name = "kube-node-log"

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    def collect(self, key: Key, query: NodeQuery, timeout: float) -> Evidence:
        path = f"/api/v1/nodes/{query.node}/proxy/logs/"
        if key is not Key.KUBELET_LOG:
            return Evidence(
                key,
                Status.UNAVAILABLE,
                f"the API's node log query only serves the kubelet journal; "
                f"{DESCRIPTIONS[key]} needs node access (SSH or --local)",
                "",
                f"GET {path}",
            )
        params: dict[str, object] = {"query": "kubelet", "tailLines": NODE_LOG_TAIL_LINES}
        since = since_to_rfc3339(query.since)
        if since:
            params["sinceTime"] = since
        reply = self.client.get(path, params, max_bytes=query.max_bytes, timeout=timeout)
        if reply.status == 404:
            return Evidence(
                key,
                Status.UNAVAILABLE,
                f"node {query.node}'s kubelet does not serve the node log query "
                "(it needs the NodeLogQuery feature gate and enableSystemLogQuery)",
                "",
                reply.shown,
            )
        if not reply.ok:
            return failed(key, reply, "node log query: ")
        if not reply.body.strip():
            return Evidence(
                key,
                Status.UNAVAILABLE,
                f"the kubelet journal on {query.node} has no lines since {since or query.since}",
                "",
                reply.shown,
            )
        ev = decode(key, reply.body, source=reply.shown)
        if ev.ok and reply.truncated:
            ev = replace(ev, detail=f"{ev.detail}; cut at {query.max_bytes} bytes")
        return ev

    def close(self) -> None:
        """The API client is shared with the session, which closes it."""
