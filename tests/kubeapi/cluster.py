"""The object store behind the test API server, and builders for realistic objects.

Builders return plain dicts shaped like what kube-apiserver returns (status conditions,
container statuses, owner references, event sources), so code under test sees the same
structure as on a real cluster. Node addresses are private (10.x) and must never be dialled.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.kubeapi.resources import CORE, GROUPS, Resource, dra_resources

Obj = dict[str, Any]

#: The fixed clock of every fixture object.
T0 = dt.datetime(2026, 11, 2, 9, 0, 0, tzinfo=dt.UTC)


def ts(minutes: float = 0.0) -> str:
    return (T0 + dt.timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def uid_for(kind: str, namespace: str, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{namespace}/{name}"))


@dataclass
class Cluster:
    """Objects by resource, plus container logs and node journals.

    ``dra_version`` is the served ``resource.k8s.io`` version, or None when DRA is off.
    """

    kube_version: str = "v1.32.4"
    dra_version: str | None = "v1beta1"
    objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = field(default_factory=dict)
    #: (namespace, pod, container, previous) -> log text
    logs: dict[tuple[str, str, str, bool], str] = field(default_factory=dict)
    #: (node, service) -> journal text served by the node log query
    node_logs: dict[tuple[str, str], str] = field(default_factory=dict)
    #: (namespace, "name:port") -> the upstream base URL the service proxy forwards GETs to.
    service_upstreams: dict[tuple[str, str], str] = field(default_factory=dict)
    _sorted: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    _rv: int = 1000
    #: Every change after start-up, for watches: (resourceVersion, type, group, plural, object).
    changes: list[tuple[int, str, str, str, Obj]] = field(default_factory=list)
    #: Notified on every change, so a watch wakes at once.
    changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def resources(self) -> tuple[Resource, ...]:
        dra = dra_resources(self.dra_version) if self.dra_version else ()
        return (*CORE, *GROUPS, *dra)

    def resource(self, group: str, plural: str) -> Resource | None:
        return next((r for r in self.resources if r.group == group and r.plural == plural), None)

    def resource_for(self, obj: Mapping[str, Any]) -> Resource:
        api_version = str(obj.get("apiVersion", "v1"))
        group = api_version.split("/")[0] if "/" in api_version else ""
        kind = obj.get("kind")
        for r in (*CORE, *GROUPS, *dra_resources("v1")):
            if r.group == group and r.kind == kind:
                return r
        raise ValueError(f"the test API does not serve {api_version} {kind}")

    def add(self, *objs: Obj) -> Cluster:
        for obj in objs:
            r = self.resource_for(obj)
            meta = obj.setdefault("metadata", {})
            if r.namespaced:
                meta.setdefault("namespace", "default")
            ns = meta.get("namespace", "") if r.namespaced else ""
            meta.setdefault("uid", uid_for(r.kind, ns, meta["name"]))
            meta.setdefault("creationTimestamp", ts())
            with self.changed:
                self._rv += 1
                meta["resourceVersion"] = str(self._rv)
                store = self.objects.setdefault((r.group, r.plural), {})
                kind = "MODIFIED" if (ns, meta["name"]) in store else "ADDED"
                store[(ns, meta["name"])] = obj
                self._sorted.pop((r.group, r.plural), None)
                self.changes.append((self._rv, kind, r.group, r.plural, copy.deepcopy(obj)))
                self.changed.notify_all()
        return self

    def remove(self, obj: Obj) -> Cluster:
        r = self.resource_for(obj)
        meta = obj["metadata"]
        with self.changed:
            del self.objects[(r.group, r.plural)][(meta.get("namespace", ""), meta["name"])]
            self._sorted.pop((r.group, r.plural), None)
            self._rv += 1
            self.changes.append((self._rv, "DELETED", r.group, r.plural, copy.deepcopy(obj)))
            self.changed.notify_all()
        return self

    def get(self, group: str, plural: str, namespace: str, name: str) -> Obj | None:
        return self.objects.get((group, plural), {}).get((namespace, name))

    def keys(self, group: str, plural: str) -> list[tuple[str, str]]:
        """(namespace, name) of every object of a resource, in the apiserver's list order."""
        if (group, plural) not in self._sorted:
            self._sorted[(group, plural)] = sorted(self.objects.get((group, plural), {}))
        return self._sorted[(group, plural)]

    @property
    def resource_version(self) -> str:
        return str(self._rv)

    def add_log(
        self, pod: Obj, text: str, *, container: str = "", previous: bool = False
    ) -> Cluster:
        meta = pod["metadata"]
        name = container or pod["spec"]["containers"][0]["name"]
        self.logs[(meta["namespace"], meta["name"], name, previous)] = text
        return self

    def add_node_log(self, node: str, service: str, text: str) -> Cluster:
        self.node_logs[(node, service)] = text
        return self

    def add_service_proxy(self, namespace: str, name: str, port: int, upstream: str) -> Cluster:
        """Serve ``/api/v1/namespaces/NS/services/NAME:PORT/proxy/...`` from ``upstream``."""
        self.service_upstreams[(namespace, f"{name}:{port}")] = upstream.rstrip("/")
        return self


# ---------------------------------------------------------------------------------------------
# Builders


def namespace(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def owner_ref(obj: Mapping[str, Any], *, controller: bool = True) -> Obj:
    meta = obj["metadata"]
    ns = meta.get("namespace", "")
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta.get("uid") or uid_for(obj["kind"], ns, meta["name"]),
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def gpu_node(
    name: str,
    *,
    gpus: int = 8,
    allocatable: int | None = None,
    resource: str = "nvidia.com/gpu",
    taints: Sequence[Obj] = (),
    labels: Mapping[str, str] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    address: str = "10.0.0.7",
    product: str = "NVIDIA-H100-80GB-HBM3",
    annotations: bool = True,
) -> Obj:
    """A GPU node as the GPU Operator and NFD label it. ``gpus=0`` drops the resource key."""
    node_labels = {
        "beta.kubernetes.io/arch": "amd64",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "topology.kubernetes.io/zone": "eu-west-1a",
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/gpu.deploy.device-plugin": "true",
    }
    node_labels.update(labels or {})
    capacity = {
        "cpu": "192",
        "memory": "2097152000Ki",
        "pods": "110",
        "ephemeral-storage": "3906250000Ki",
        "hugepages-1Gi": "0",
    }
    alloc = {
        "cpu": "191500m",
        "memory": "2090000000Ki",
        "pods": "110",
        "ephemeral-storage": "3600000000Ki",
        "hugepages-1Gi": "0",
    }
    if gpus:
        capacity[resource] = str(gpus)
        alloc[resource] = str(gpus if allocatable is None else allocatable)
    node: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": {"providerID": f"aws:///eu-west-1a/i-{_hex(name, 17)}"},
        "status": {
            "capacity": capacity,
            "allocatable": alloc,
            "conditions": _node_conditions(ready),
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "containerRuntimeVersion": "containerd://1.7.20",
                "kernelVersion": "6.8.0-1015-aws",
                "kubeletVersion": "v1.32.4",
                "kubeProxyVersion": "v1.32.4",
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.4 LTS",
                "machineID": _hex(name, 32),
                "systemUUID": _hex(name + "s", 32),
                "bootID": _hex(name + "b", 32),
            },
        },
    }
    if annotations:
        node["metadata"]["annotations"] = {
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            "nfd.node.kubernetes.io/feature-labels": "pci-10de.present",
        }
    if taints:
        node["spec"]["taints"] = list(taints)
    if unschedulable:
        node["spec"]["unschedulable"] = True
        node["spec"].setdefault("taints", []).append(
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": ts()}
        )
    return node


def cpu_node(name: str, *, address: str = "10.0.1.5", ready: bool = True) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m6i.4xlarge",
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"providerID": f"aws:///eu-west-1a/i-{_hex(name, 17)}"},
        "status": {
            "capacity": {"cpu": "16", "memory": "65000000Ki", "pods": "110"},
            "allocatable": {"cpu": "15890m", "memory": "64000000Ki", "pods": "110"},
            "conditions": _node_conditions(ready),
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.32.4",
                "osImage": "Ubuntu 22.04.4 LTS",
                "containerRuntimeVersion": "containerd://1.7.20",
                "kernelVersion": "6.8.0-1015-aws",
                "architecture": "amd64",
                "operatingSystem": "linux",
            },
        },
    }


def taint(key: str, effect: str = "NoSchedule", value: str = "") -> Obj:
    t = {"key": key, "effect": effect}
    if value:
        t["value"] = value
    return t


def _node_conditions(ready: bool) -> list[Obj]:
    conds = [
        {
            "type": t,
            "status": "False",
            "reason": r,
            "message": m,
            "lastHeartbeatTime": ts(30),
            "lastTransitionTime": ts(-600),
        }
        for t, r, m in (
            ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory"),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    conds.append(
        {
            "type": "Ready",
            "status": "True" if ready else "Unknown",
            "reason": "KubeletReady" if ready else "NodeStatusUnknown",
            "message": "kubelet is posting ready status"
            if ready
            else "Kubelet stopped posting node status.",
            "lastHeartbeatTime": ts(30),
            "lastTransitionTime": ts(-600),
        }
    )
    return conds


def container(
    name: str,
    *,
    image: str = "nvcr.io/nvidia/pytorch:24.05-py3",
    gpus: int = 0,
    gpu_resource: str = "nvidia.com/gpu",
    memory: str = "",
    command: Sequence[str] = (),
) -> Obj:
    limits: dict[str, str] = {}
    requests: dict[str, str] = {"cpu": "4"}
    if gpus:
        limits[gpu_resource] = str(gpus)
        requests[gpu_resource] = str(gpus)
    if memory:
        limits["memory"] = memory
        requests["memory"] = memory
    c: Obj = {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"limits": limits, "requests": requests} if limits else {"requests": requests},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    if command:
        c["command"] = list(command)
    return c


def waiting(
    name: str,
    reason: str,
    message: str = "",
    *,
    restarts: int = 0,
    last: Obj | None = None,
    image: str = "nvcr.io/nvidia/pytorch:24.05-py3",
) -> Obj:
    state: Obj = {"reason": reason}
    if message:
        state["message"] = message
    return _status(name, {"waiting": state}, restarts, last, image, ready=False)


def running(
    name: str,
    *,
    restarts: int = 0,
    last: Obj | None = None,
    ready: bool = True,
    image: str = "nvcr.io/nvidia/pytorch:24.05-py3",
) -> Obj:
    return _status(name, {"running": {"startedAt": ts(5)}}, restarts, last, image, ready=ready)


def terminated(reason: str, exit_code: int, *, message: str = "", minutes: float = 4) -> Obj:
    t: Obj = {
        "containerID": f"containerd://{_hex(reason + str(minutes), 64)}",
        "exitCode": exit_code,
        "reason": reason,
        "startedAt": ts(minutes - 2),
        "finishedAt": ts(minutes),
    }
    if message:
        t["message"] = message
    return {"terminated": t}


def _status(
    name: str, state: Obj, restarts: int, last: Obj | None, image: str, *, ready: bool
) -> Obj:
    s: Obj = {
        "name": name,
        "state": state,
        "lastState": last or {},
        "ready": ready,
        "restartCount": restarts,
        "image": image,
        "imageID": "",
        "started": "running" in state,
    }
    if "running" in state or restarts:
        s["containerID"] = f"containerd://{_hex(name + str(restarts), 64)}"
        s["imageID"] = f"{image.split(':')[0]}@sha256:{_hex(image, 64)}"
    return s


def pod(
    name: str,
    namespace: str = "ml",
    *,
    node: str = "",
    gpus: int = 1,
    containers: Sequence[Obj] | None = None,
    statuses: Sequence[Obj] | None = None,
    init_containers: Sequence[Obj] = (),
    init_statuses: Sequence[Obj] = (),
    phase: str = "",
    owner: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    unschedulable: str = "",
    runtime_class: str = "",
    resource_claims: Sequence[Obj] = (),
    tolerations: Sequence[Obj] = (),
    host_ip: str = "",
) -> Obj:
    """A pod with a consistent status: unscheduled Pending when neither ``node`` nor
    ``statuses`` are given, otherwise scheduled on ``node``."""
    spec_containers = list(containers or [container("main", gpus=gpus)])
    meta: Obj = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if owner is not None:
        meta["ownerReferences"] = [owner_ref(owner)]
    spec: Obj = {
        "containers": spec_containers,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            *tolerations,
        ],
    }
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    if resource_claims:
        spec["resourceClaims"] = list(resource_claims)
    status: Obj = {"qosClass": "Burstable"}
    if not node:
        status["phase"] = phase or "Pending"
        if unschedulable:
            status["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": unschedulable,
                    "lastProbeTime": None,
                    "lastTransitionTime": ts(1),
                }
            ]
    else:
        spec["nodeName"] = node
        st = list(statuses or [waiting(c["name"], "ContainerCreating") for c in spec_containers])
        all_ready = all(s.get("ready") for s in st)
        started = any("running" in s["state"] or s["restartCount"] for s in st)
        status["phase"] = phase or ("Running" if started else "Pending")
        status["hostIP"] = host_ip or "10.0.0.7"
        status["hostIPs"] = [{"ip": status["hostIP"]}]
        if started:
            status["podIP"] = "192.168.14.7"
            status["podIPs"] = [{"ip": "192.168.14.7"}]
        status["startTime"] = ts(1)
        status["conditions"] = [
            {
                "type": "PodReadyToStartContainers",
                "status": "True" if started else "False",
                "lastProbeTime": None,
                "lastTransitionTime": ts(2),
            },
            {
                "type": "Initialized",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": ts(1),
            },
            {
                "type": "Ready",
                "status": "True" if all_ready else "False",
                "lastProbeTime": None,
                "lastTransitionTime": ts(3),
                **({} if all_ready else {"reason": "ContainersNotReady"}),
            },
            {
                "type": "ContainersReady",
                "status": "True" if all_ready else "False",
                "lastProbeTime": None,
                "lastTransitionTime": ts(3),
            },
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": ts(1),
            },
        ]
        status["containerStatuses"] = st
        if init_statuses:
            status["initContainerStatuses"] = list(init_statuses)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def event(
    obj: Mapping[str, Any],
    reason: str,
    message: str,
    *,
    type: str = "Warning",
    count: int = 1,
    component: str = "default-scheduler",
    host: str = "",
    minutes: float = 2,
    namespace: str = "",
) -> Obj:
    """An events.v1 core Event about ``obj``. Node events live in ``default`` like kubelet's."""
    meta = obj["metadata"]
    ns = namespace or meta.get("namespace") or "default"
    involved = {
        "kind": obj["kind"],
        "name": meta["name"],
        "apiVersion": obj["apiVersion"],
        "uid": meta.get("uid") or uid_for(obj["kind"], meta.get("namespace", ""), meta["name"]),
    }
    if meta.get("namespace"):
        involved["namespace"] = meta["namespace"]
    if obj["kind"] == "Node":
        involved["uid"] = meta["name"]  # kubelet records node events with UID = node name
    source: Obj = {"component": component}
    if host:
        source["host"] = host
    name = f"{meta['name']}.{_hex(reason + message + str(minutes), 16)}"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": type,
        "count": count,
        "source": source,
        "firstTimestamp": ts(minutes - 1),
        "lastTimestamp": ts(minutes),
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": host,
    }


def _workload(
    api_version: str,
    kind: str,
    name: str,
    namespace: str,
    match_labels: Mapping[str, str],
    spec: Obj,
    status: Obj,
    owner: Mapping[str, Any] | None = None,
) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "labels": dict(match_labels)}
    if owner is not None:
        meta["ownerReferences"] = [owner_ref(owner)]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": dict(match_labels)},
            "template": {
                "metadata": {"labels": dict(match_labels)},
                "spec": {"containers": [container("main", gpus=1)]},
            },
            **spec,
        },
        "status": status,
    }


def deployment(
    name: str,
    namespace: str = "ml",
    *,
    replicas: int = 1,
    ready: int = 0,
    labels: Mapping[str, str] | None = None,
) -> Obj:
    return _workload(
        "apps/v1",
        "Deployment",
        name,
        namespace,
        labels or {"app": name},
        {"replicas": replicas, "strategy": {"type": "RollingUpdate"}},
        {"replicas": replicas, "readyReplicas": ready, "unavailableReplicas": replicas - ready},
    )


def replicaset(
    name: str,
    namespace: str = "ml",
    *,
    owner: Mapping[str, Any] | None = None,
    replicas: int = 1,
    labels: Mapping[str, str] | None = None,
) -> Obj:
    return _workload(
        "apps/v1",
        "ReplicaSet",
        name,
        namespace,
        labels or {"app": name},
        {"replicas": replicas},
        {"replicas": replicas, "readyReplicas": 0},
        owner,
    )


def statefulset(
    name: str, namespace: str = "ml", *, replicas: int = 1, labels: Mapping[str, str] | None = None
) -> Obj:
    return _workload(
        "apps/v1",
        "StatefulSet",
        name,
        namespace,
        labels or {"app": name},
        {"replicas": replicas, "serviceName": name},
        {"replicas": replicas, "readyReplicas": 0},
    )


def daemonset(name: str, namespace: str, *, labels: Mapping[str, str] | None = None) -> Obj:
    return _workload(
        "apps/v1",
        "DaemonSet",
        name,
        namespace,
        labels or {"app": name},
        {},
        {"desiredNumberScheduled": 2, "numberReady": 1},
    )


def job(name: str, namespace: str = "ml", *, labels: Mapping[str, str] | None = None) -> Obj:
    selector = dict(labels or {"batch.kubernetes.io/job-name": name})
    return _workload(
        "batch/v1",
        "Job",
        name,
        namespace,
        selector,
        {"backoffLimit": 6, "completions": 1, "parallelism": 1},
        {"active": 1, "startTime": ts(1)},
    )


def quota(name: str, namespace: str, hard: Mapping[str, str], used: Mapping[str, str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"hard": dict(hard)},
        "status": {"hard": dict(hard), "used": dict(used)},
    }


def runtime_class(name: str, handler: str = "") -> Obj:
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": name},
        "handler": handler or name,
    }


def device_plugin_pod(
    node: str,
    *,
    namespace: str = "gpu-operator",
    labels: Mapping[str, str] | None = None,
    name: str = "",
    container_name: str = "nvidia-device-plugin",
    owner: Mapping[str, Any] | None = None,
) -> Obj:
    """The GPU Operator's device-plugin pod (label ``app=nvidia-device-plugin-daemonset``)
    with its config-manager sidecar."""
    plugin_labels = dict(
        labels
        or {"app": "nvidia-device-plugin-daemonset", "app.kubernetes.io/part-of": "nvidia-gpu"}
    )
    p = pod(
        name or f"nvidia-device-plugin-daemonset-{_hex(node, 5)}",
        namespace,
        node=node,
        gpus=0,
        labels=plugin_labels,
        owner=owner,
        containers=[
            container(container_name, image="nvcr.io/nvidia/k8s-device-plugin:v0.17.0"),
            container("config-manager", image="nvcr.io/nvidia/k8s-device-plugin:v0.17.0"),
        ],
        statuses=[running(container_name), running("config-manager")],
    )
    p["spec"]["priorityClassName"] = "system-node-critical"
    return p


def device_class(name: str = "gpu.nvidia.com", api_version: str = "resource.k8s.io/v1beta1") -> Obj:
    return {
        "apiVersion": api_version,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{name}'"}}]},
    }


def resource_slice(
    node: str,
    *,
    driver: str = "gpu.nvidia.com",
    devices: int = 2,
    api_version: str = "resource.k8s.io/v1beta1",
) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}-{_hex(node, 5)}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "basic": {"attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}}},
                }
                for i in range(devices)
            ],
        },
    }


def resource_claim(
    name: str,
    namespace: str = "ml",
    *,
    device_class_name: str = "gpu.nvidia.com",
    api_version: str = "resource.k8s.io/v1beta1",
) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": device_class_name}]}},
        "status": {},
    }


def many_nodes(count: int, *, gpu_every: int = 2) -> Iterable[Obj]:
    """``count`` nodes, every ``gpu_every``-th one a GPU node (for pagination tests)."""
    for i in range(count):
        name = f"node-{i:05d}"
        address = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
        if i % gpu_every == 0:
            yield gpu_node(name, address=address, annotations=False)
        else:
            yield cpu_node(name, address=address)


def _hex(seed: str, n: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:n]


# ---------------------------------------------------------------------------------------------
# A small GPU cluster with one of each trouble, used across the integration tests.

UNSCHEDULABLE = (
    "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node "
    "affinity/selector, 1 node(s) had untolerated taint {nvidia.com/gpu: present}. preemption: "
    "0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is "
    "not helpful for scheduling."
)
QUOTA_REJECTION = (
    'Error creating: pods "quota-demo-654649bb45-vlrj8" is forbidden: exceeded quota: '
    "gpu-quota, requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=11, "
    "limited: requests.nvidia.com/gpu=12"
)
XID_PLUGIN_LOG = (
    'I1102 09:00:01.000000       1 main.go:317] "Starting NVIDIA Device Plugin" version=<\n'
    "I1102 09:00:01.200000       1 server.go:165] Starting GRPC server for 'nvidia.com/gpu'\n"
    "I1102 09:00:01.300000       1 server.go:117] Starting to serve 'nvidia.com/gpu' on "
    "/var/lib/kubelet/device-plugins/nvidia-gpu.sock\n"
    "I1102 09:00:01.400000       1 server.go:125] Registered device plugin for "
    "'nvidia.com/gpu' with Kubelet\n"
    "I1102 09:41:07.123456       1 health.go:151] Processing event {Device:{Handle:0xc0001} "
    "EventType:8 EventData:79 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n"
    "I1102 09:41:07.123500       1 health.go:177] XidCriticalError: Xid=79 on "
    "Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8; marking device as unhealthy.\n"
    "I1102 09:41:07.123600       1 server.go:276] 'nvidia.com/gpu' device marked unhealthy: "
    "GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8\n"
)
KUBELET_JOURNAL = (
    "Nov 02 09:00:00 gpu-node-1 kubelet[2211]: I1102 09:00:00.100000    2211 server.go:484] "
    '"Kubelet version" kubeletVersion="v1.32.4"\n'
    "Nov 02 09:00:01 gpu-node-1 kubelet[2211]: I1102 09:00:01.410000    2211 "
    'client.go:90] "Registered plugin" resource="nvidia.com/gpu"\n'
    "Nov 02 09:41:08 gpu-node-1 kubelet[2211]: I1102 09:41:08.000000    2211 "
    'manager.go:286] "Updated device health" resource="nvidia.com/gpu" healthy=7 unhealthy=1\n'
)


def gpu_cluster(*, dra_version: str | None = "v1beta1") -> Cluster:
    """Three nodes and the troubles gputriage walks: a restarting trainer, a Deployment with a
    crashing, a pending and a healthy pod, a Deployment blocked by quota, a Job stuck in
    ContainerCreating, device plugins with an Xid, DRA objects and a kubelet journal."""
    cl = Cluster(dra_version=dra_version)
    gv = f"resource.k8s.io/{dra_version or 'v1beta1'}"
    n1 = gpu_node("gpu-node-1", allocatable=7, address="10.0.0.7")
    n2 = gpu_node(
        "gpu-node-2", address="10.0.0.8", taints=[taint("nvidia.com/gpu", value="present")]
    )
    n3 = cpu_node("cpu-node-1", address="10.0.1.5")
    cl.add(
        *(namespace(n) for n in ("default", "kube-system", "gpu-operator", "ml", "ml-dev")),
        n1,
        n2,
        n3,
    )

    trainer = statefulset("trainer", labels={"app": "trainer"})
    t0 = pod(
        "trainer-0",
        owner=trainer,
        node="gpu-node-1",
        labels={"app": "trainer"},
        containers=[
            container("trainer", gpus=8, memory="512Gi"),
            container("metrics", image="prom/statsd-exporter:v0.26.0"),
        ],
        statuses=[
            running("trainer", restarts=2, last=terminated("Error", 1, minutes=20)),
            running("metrics"),
        ],
        runtime_class="nvidia",
        resource_claims=[{"name": "gpus", "resourceClaimName": "trainer-gpus"}],
    )
    cl.add(
        trainer,
        t0,
        event(
            t0,
            "Scheduled",
            "Successfully assigned ml/trainer-0 to gpu-node-1",
            type="Normal",
            minutes=1,
        ),
        event(
            t0,
            "BackOff",
            "Back-off restarting failed container trainer in pod "
            f"trainer-0_ml({uid_for('Pod', 'ml', 'trainer-0')})",
            component="kubelet",
            host="gpu-node-1",
            count=4,
            minutes=21,
        ),
        pod("trainer-0", "ml-dev", gpus=1, unschedulable=UNSCHEDULABLE),
    )
    cl.add_log(t0, "step 4100 loss 1.92\nstep 4200 loss 1.90\n", container="trainer")
    cl.add_log(
        t0,
        "step 9000 loss 1.71\nRuntimeError: CUDA error: unspecified launch failure\n"
        "CUDA kernel errors might be asynchronously reported at some other API "
        "call, so the stacktrace below might be incorrect.\n",
        container="trainer",
        previous=True,
    )
    cl.add_log(t0, "metrics up\n", container="metrics")

    serve = deployment("llm-serve", replicas=3, ready=1)
    rs = replicaset("llm-serve-6d5f7c9b8", owner=serve, replicas=3, labels={"app": "llm-serve"})
    ok = pod(
        "llm-serve-6d5f7c9b8-2xkqp",
        owner=rs,
        node="gpu-node-1",
        labels={"app": "llm-serve"},
        statuses=[running("main")],
    )
    crash = pod(
        "llm-serve-6d5f7c9b8-7hfzc",
        owner=rs,
        node="gpu-node-1",
        labels={"app": "llm-serve"},
        statuses=[
            waiting(
                "main",
                "CrashLoopBackOff",
                "back-off 5m0s restarting failed container=main pod=llm-serve-6d5f7c9b8-7hfzc_ml",
                restarts=6,
                last=terminated("OOMKilled", 137),
            )
        ],
    )
    pending = pod(
        "llm-serve-6d5f7c9b8-q9wrt",
        owner=rs,
        labels={"app": "llm-serve"},
        unschedulable=UNSCHEDULABLE,
    )
    cl.add(
        serve,
        rs,
        ok,
        crash,
        pending,
        event(pending, "FailedScheduling", UNSCHEDULABLE, count=12, minutes=30),
        event(
            rs,
            "SuccessfulCreate",
            "Created pod: llm-serve-6d5f7c9b8-q9wrt",
            type="Normal",
            component="replicaset-controller",
        ),
        event(
            serve,
            "ScalingReplicaSet",
            "Scaled up replica set llm-serve-6d5f7c9b8 from 0 to 3",
            type="Normal",
            component="deployment-controller",
        ),
    )
    cl.add_log(crash, "Loading model weights...\n", container="main", previous=True)
    cl.add_log(crash, "Loading model weights...\n", container="main")

    qd = deployment("quota-demo", replicas=1)
    qrs = replicaset("quota-demo-654649bb45", owner=qd, labels={"app": "quota-demo"})
    cl.add(
        qd,
        qrs,
        event(
            qrs,
            "FailedCreate",
            QUOTA_REJECTION,
            component="replicaset-controller",
            count=7,
            minutes=10,
        ),
        quota(
            "gpu-quota", "ml", {"requests.nvidia.com/gpu": "12"}, {"requests.nvidia.com/gpu": "11"}
        ),
        runtime_class("nvidia"),
    )

    ft = job("finetune")
    fpod = pod(
        "finetune-x8k2p",
        owner=ft,
        node="gpu-node-2",
        labels={"batch.kubernetes.io/job-name": "finetune"},
        runtime_class="nvidia",
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    cl.add(
        ft,
        fpod,
        event(
            fpod,
            "FailedCreatePodSandBox",
            "Failed to create pod sandbox: rpc error: code = Unknown desc = "
            'failed to get sandbox runtime: no runtime for "nvidia" is '
            "configured",
            component="kubelet",
            host="gpu-node-2",
            count=9,
        ),
    )

    ds = daemonset(
        "nvidia-device-plugin-daemonset",
        "gpu-operator",
        labels={"app": "nvidia-device-plugin-daemonset"},
    )
    plugin1 = device_plugin_pod("gpu-node-1", owner=ds)
    plugin2 = device_plugin_pod(
        "gpu-node-2",
        namespace="kube-system",
        name="nvidia-device-plugin-7q2lk",
        labels={
            "app.kubernetes.io/name": "nvidia-device-plugin",
            "app.kubernetes.io/instance": "nvdp",
        },
        container_name="nvidia-device-plugin-ctr",
    )
    agent = pod(
        "node-exporter-8fj2k", "kube-system", gpus=0, node="gpu-node-1", statuses=[running("main")]
    )
    cl.add(
        ds,
        plugin1,
        plugin2,
        agent,
        event(
            n1,
            "SystemOOM",
            "System OOM encountered, victim process: python, pid: 41234",
            component="kubelet",
            host="gpu-node-1",
            minutes=25,
        ),
    )
    cl.add_log(plugin1, XID_PLUGIN_LOG, container="nvidia-device-plugin")
    cl.add_log(
        plugin2,
        'I1102 09:00:02.000000       1 main.go:317] "Starting NVIDIA Device Plugin"\n',
        container="nvidia-device-plugin-ctr",
    )
    cl.add_node_log("gpu-node-1", "kubelet", KUBELET_JOURNAL)

    if dra_version:
        cl.add(
            device_class(api_version=gv),
            resource_slice("gpu-node-1", api_version=gv),
            resource_claim("trainer-gpus", api_version=gv),
        )
    return cl
