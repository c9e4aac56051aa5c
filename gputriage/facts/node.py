"""Facts about the pod's node: readiness, cordon, taints, GPU labels, capacity vs allocatable.

The capacity/allocatable comparison encodes k8s-messages.md rule 9.1: a GPU resource key that
is **absent** means no device plugin ever registered it; **0 with capacity 0** means the plugin's
endpoint went away; **allocatable < capacity** means the plugin marked devices unhealthy.
``resource_state`` names those cases per resource so a playbook does not have to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts.events import normalise
from gputriage.facts.gpu_resources import NVIDIA_GPU, gpu_quantities
from gputriage.facts.kube_objects import (
    cite_field,
    cite_text,
    dict_list,
    integer,
    mapping,
    obj,
    text,
)
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    unknown,
    unknown_from,
)
from gputriage.facts.tolerations import untolerated

#: Labels worth showing for a GPU node, besides every ``nvidia.com/*`` one.
_GPU_LABELS = frozenset(
    {
        "feature.node.kubernetes.io/pci-10de.present",
        "cloud.google.com/gke-accelerator",
        "k8s.amazonaws.com/accelerator",
        "node.kubernetes.io/instance-type",
        "kubernetes.azure.com/accelerator",
    }
)
_PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")

SPEC = GroupSpec(
    name="node",
    doc="The pod's node: Ready and pressure conditions, cordon, taints the pod does not "
    "tolerate, GPU labels from GPU feature discovery, GPU capacity vs allocatable, and the "
    "node's recent events.",
    sources=(Key.NODE, Key.NODE_EVENTS),
    fields={
        "name": FieldSpec("string", "", "Node name."),
        "is_pod_node": FieldSpec("bool", False, "This is the node the pod is bound to."),
        "ready": FieldSpec("bool", False, "Ready condition is True."),
        "ready_reason": FieldSpec("string", "", "Ready condition reason (KubeletNotReady...)."),
        "ready_message": FieldSpec("string", "", "Ready condition message."),
        "conditions": FieldSpec(
            "list<map>", [], "status.conditions: type, status, reason, message."
        ),
        "pressure": FieldSpec(
            "list",
            [],
            "Pressure conditions that are True (MemoryPressure, "
            "DiskPressure, PIDPressure, NetworkUnavailable).",
        ),
        "unschedulable": FieldSpec("bool", False, "spec.unschedulable: cordoned."),
        "taints": FieldSpec("list<map>", [], "spec.taints: key, value, effect."),
        "gpu_taints_untolerated": FieldSpec(
            "list<map>",
            [],
            "NoSchedule/NoExecute taints (key, value, effect) that no toleration of the pod "
            "covers (scheduler rules: Exists, empty key, effect, Lt/Gt).",
        ),
        "tolerations_known": FieldSpec(
            "bool",
            False,
            "The pod's tolerations were known when gpu_taints_untolerated was computed.",
        ),
        "labels": FieldSpec(
            "map",
            {},
            "GPU-relevant labels only: nvidia.com/*, NFD "
            "pci-10de.present, cloud accelerator labels.",
        ),
        "gpu_present_label": FieldSpec(
            "bool",
            False,
            "nvidia.com/gpu.present=true or NFD pci-10de.present=true: GPU hardware is there.",
        ),
        "gpu_product": FieldSpec("string", "", "nvidia.com/gpu.product label."),
        "gpu_count_label": FieldSpec("int", 0, "nvidia.com/gpu.count label (0 when absent)."),
        "gpu_memory_label": FieldSpec(
            "int", 0, "nvidia.com/gpu.memory label in MiB (0 when absent)."
        ),
        "mig_strategy": FieldSpec(
            "string", "", "nvidia.com/mig.strategy label (none|single|mixed)."
        ),
        "mig_config_state": FieldSpec(
            "string", "", "nvidia.com/mig.config.state label (success|pending|rebooting|failed)."
        ),
        "sharing_strategy": FieldSpec(
            "string", "", "nvidia.com/gpu.sharing-strategy label (none|time-slicing|mps)."
        ),
        "gpu_replicas": FieldSpec(
            "int",
            0,
            "nvidia.com/gpu.replicas label (time-slicing/MPS replicas per GPU, 0 when absent).",
        ),
        "capacity": FieldSpec("map", {}, "GPU resources in status.capacity (resource -> n)."),
        "allocatable": FieldSpec("map", {}, "GPU resources in status.allocatable."),
        "capacity_gt_allocatable": FieldSpec(
            "list",
            [],
            "GPU resources whose allocatable is below capacity: devices marked unhealthy.",
        ),
        "advertises": FieldSpec("list", [], "GPU resources present in capacity (even at 0)."),
        "resource_state": FieldSpec(
            "map",
            {},
            "For nvidia.com/gpu and each GPU resource the pod requests: 'absent' (no plugin "
            "registered it), 'zero' (capacity 0: plugin endpoint gone), 'degraded' "
            "(allocatable < capacity: unhealthy devices), 'ok'.",
        ),
        "internal_ip": FieldSpec("string", "", "InternalIP address (never dialled by facts)."),
        "hostname": FieldSpec("string", "", "Hostname address."),
        "kernel_version": FieldSpec("string", "", "status.nodeInfo.kernelVersion."),
        "os_image": FieldSpec("string", "", "status.nodeInfo.osImage."),
        "container_runtime_version": FieldSpec(
            "string",
            "",
            "status.nodeInfo.containerRuntimeVersion (containerd://1.7.x, cri-o://...).",
        ),
        "container_runtime": FieldSpec(
            "string", "", "The runtime's name from it: containerd, cri-o, docker."
        ),
        "kubelet_version": FieldSpec("string", "", "status.nodeInfo.kubeletVersion."),
        "events_known": FieldSpec("bool", False, "The node's events were read."),
        "event_reasons": FieldSpec("list", [], "Unique reasons of the node's events."),
        "warning_events": FieldSpec(
            "list<map>", [], "The node's Warning events: reason, message, count, last, line."
        ),
        "rebooted": FieldSpec("bool", False, "A Rebooted event exists for the node."),
        "not_ready_events": FieldSpec("int", 0, "NodeNotReady events."),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    ev = evidence.get_or_missing(Key.NODE)
    if not ev.ok:
        return unknown_from(SPEC, ev)
    node = obj(ev)
    if node.get("kind") not in (None, "Node") or not node:
        return unknown(SPEC, f"{ev.source}: expected a Node object, got {node.get('kind')!r}")
    pod = earlier.get("pod")
    values = node_values(node, pod if pod and pod.known else None)
    cites = _cites(ev, values)
    values["is_pod_node"] = bool(target.node) and values["name"] == target.node
    _add_events(evidence.get_or_missing(Key.NODE_EVENTS), values["name"], values, cites)
    return known(SPEC, values, {k: v for k, v in cites.items() if v})


def node_values(node: dict[str, Any], pod: FactGroup | None) -> dict[str, Any]:
    """Values of one Node object (also used by the cluster group for every GPU node)."""
    meta, spec, status = (mapping(node.get(k)) for k in ("metadata", "spec", "status"))
    conditions = [
        {
            "type": text(c.get("type")),
            "status": text(c.get("status")),
            "reason": text(c.get("reason")),
            "message": text(c.get("message")),
        }
        for c in dict_list(status.get("conditions"))
    ]
    ready = next((c for c in conditions if c["type"] == "Ready"), None)
    taints = [
        {"key": text(t.get("key")), "value": text(t.get("value")), "effect": text(t.get("effect"))}
        for t in dict_list(spec.get("taints"))
    ]
    tolerations = pod.values["tolerations"] if pod else []
    labels = {
        str(k): text(v)
        for k, v in mapping(meta.get("labels")).items()
        if str(k).startswith("nvidia.com/") or str(k) in _GPU_LABELS
    }
    capacity = gpu_quantities(status.get("capacity"))
    allocatable = gpu_quantities(status.get("allocatable"))
    addresses = {
        text(a.get("type")): text(a.get("address")) for a in dict_list(status.get("addresses"))
    }
    info = mapping(status.get("nodeInfo"))
    runtime = text(info.get("containerRuntimeVersion"))
    wanted = [NVIDIA_GPU, *(pod.values["gpu_resources"] if pod else {})]
    values: dict[str, Any] = {
        "name": text(meta.get("name")),
        "ready": bool(ready and ready["status"] == "True"),
        "ready_reason": ready["reason"] if ready else "",
        "ready_message": ready["message"] if ready else "",
        "conditions": conditions,
        "pressure": [
            c["type"] for c in conditions if c["type"] in _PRESSURE and c["status"] == "True"
        ],
        "unschedulable": spec.get("unschedulable") is True,
        "taints": taints,
        "gpu_taints_untolerated": untolerated(taints, tolerations),
        "tolerations_known": pod is not None,
        "labels": labels,
        "gpu_present_label": labels.get("nvidia.com/gpu.present") == "true"
        or labels.get("feature.node.kubernetes.io/pci-10de.present") == "true",
        "gpu_product": labels.get("nvidia.com/gpu.product", ""),
        "gpu_count_label": integer(labels.get("nvidia.com/gpu.count")),
        "gpu_memory_label": integer(labels.get("nvidia.com/gpu.memory")),
        "mig_strategy": labels.get("nvidia.com/mig.strategy", ""),
        "mig_config_state": labels.get("nvidia.com/mig.config.state", ""),
        "sharing_strategy": labels.get("nvidia.com/gpu.sharing-strategy", ""),
        "gpu_replicas": integer(labels.get("nvidia.com/gpu.replicas")),
        "capacity": capacity,
        "allocatable": allocatable,
        "capacity_gt_allocatable": sorted(
            r for r, n in capacity.items() if allocatable.get(r, 0) < n
        ),
        "advertises": sorted(capacity),
        "resource_state": {r: resource_state(r, capacity, allocatable) for r in wanted},
        "internal_ip": addresses.get("InternalIP", ""),
        "hostname": addresses.get("Hostname", ""),
        "kernel_version": text(info.get("kernelVersion")),
        "os_image": text(info.get("osImage")),
        "container_runtime_version": runtime,
        "container_runtime": runtime.split("://", 1)[0] if "://" in runtime else "",
        "kubelet_version": text(info.get("kubeletVersion")),
    }
    return values


def _cites(ev: Evidence, values: dict[str, Any]) -> dict[str, list[LineRef]]:
    cites: dict[str, list[LineRef]] = {}
    capacity, allocatable = values["capacity"], values["allocatable"]
    ready = next((c for c in values["conditions"] if c["type"] == "Ready"), None)

    def cite(name: str, ref: LineRef) -> None:
        if ref.line:
            cites.setdefault(name, []).append(ref)

    if ready:
        cite("ready", cite_text(ev, ready["message"] or ready["reason"] or "Ready"))
    if values["unschedulable"]:
        cite("unschedulable", cite_field(ev, "unschedulable", True))
    for t in values["taints"]:
        ref = cite_field(ev, "key", t["key"])
        cite("taints", ref)
        if t in values["gpu_taints_untolerated"]:
            cite("gpu_taints_untolerated", ref)
    for resource in sorted(set(capacity) | set(allocatable)):
        cap_ref = cite_field(ev, resource, capacity.get(resource, ""))
        alloc_ref = cite_field(ev, resource, allocatable.get(resource, ""))
        for name, ref in (
            ("capacity", cap_ref),
            ("advertises", cap_ref),
            ("allocatable", alloc_ref),
            ("resource_state", cap_ref),
            ("resource_state", alloc_ref),
        ):
            cite(name, ref)
        if resource in values["capacity_gt_allocatable"]:
            cite("capacity_gt_allocatable", cap_ref)
            cite("capacity_gt_allocatable", alloc_ref)
    for label in values["labels"]:
        cite("labels", cite_text(ev, label))
    return cites


def resource_state(
    resource: str, capacity: Mapping[str, int], allocatable: Mapping[str, int]
) -> str:
    """absent | zero | degraded | ok (rule 9.1 of k8s-messages.md)."""
    if resource not in capacity and resource not in allocatable:
        return "absent"
    if capacity.get(resource, 0) == 0:
        return "zero"
    if allocatable.get(resource, 0) < capacity[resource]:
        return "degraded"
    return "ok"


def _add_events(
    ev: Evidence, node: str, values: dict[str, Any], cites: dict[str, list[LineRef]]
) -> None:
    if not ev.ok or not isinstance(ev.data, dict):
        return
    records = normalise(ev, kind="Node", name=node)
    reasons: list[str] = []
    warnings = []
    for record, ref in records:
        if record["reason"] and record["reason"] not in reasons:
            reasons.append(record["reason"])
        if record["type"] == "Warning":
            warnings.append({k: record[k] for k in ("reason", "message", "count", "last", "line")})
            if ref.line:
                cites.setdefault("warning_events", []).append(ref)
        if record["reason"] == "Rebooted" and ref.line:
            cites.setdefault("rebooted", []).append(ref)
    values.update(
        events_known=True,
        event_reasons=reasons,
        warning_events=warnings,
        rebooted="Rebooted" in reasons,
        not_ready_events=sum(1 for r, _ in records if r["reason"] == "NodeNotReady"),
    )
