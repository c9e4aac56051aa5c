"""Facts about the pod under triage: phase, containers, GPU requests, placement constraints.

Built from ``pod.json`` / ``pod.yaml`` or the dict :mod:`gputriage.parsers.describe` makes
from pasted ``kubectl describe pod`` text; both have the same shape, so one builder serves all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts.gpu_resources import (
    NVIDIA_GPU,
    container_gpus,
    is_mig_resource,
    is_shared_resource,
    pod_gpu_request,
)
from gputriage.facts.gpu_stack import involvement, stack_component, visible_devices
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
from gputriage.parsers.quantity import to_bytes, to_millis
from gputriage.textsafe import clean

SPEC = GroupSpec(
    name="pod",
    doc="The pod under triage: phase, containers and their states, GPU requests, placement "
    "constraints (tolerations, node selector, affinity), runtime class and /dev/shm.",
    sources=(Key.POD,),
    fields={
        "name": FieldSpec("string", "", "Pod name."),
        "namespace": FieldSpec("string", "", "Pod namespace."),
        "uid": FieldSpec("string", "", "Pod UID (empty for describe text, which omits it)."),
        "phase": FieldSpec(
            "string",
            "",
            "status.phase: Pending, Running, Succeeded, Failed, "
            "Unknown (empty when describe showed Terminating).",
        ),
        "reason": FieldSpec(
            "string",
            "",
            "status.reason, e.g. UnexpectedAdmissionError, OutOfnvidia.com/gpu, Evicted.",
        ),
        "message": FieldSpec("string", "", "status.message, e.g. 'Pod was rejected: ...'."),
        "node": FieldSpec("string", "", "spec.nodeName; empty while unscheduled."),
        "qos_class": FieldSpec("string", "", "status.qosClass: Guaranteed, Burstable, BestEffort."),
        "priority_class": FieldSpec("string", "", "spec.priorityClassName."),
        "scheduler_name": FieldSpec(
            "string",
            "default-scheduler",
            "spec.schedulerName: the scheduler that must place the pod "
            "(default-scheduler, volcano, kai-scheduler, "
            "hami-scheduler...).",
        ),
        "created": FieldSpec(
            "string",
            "",
            "metadata.creationTimestamp (RFC 3339), or status.startTime when that is all there is.",
        ),
        "deleting": FieldSpec("bool", False, "metadata.deletionTimestamp is set (Terminating)."),
        "conditions": FieldSpec(
            "list<map>", [], "status.conditions as maps with type, status, reason, message."
        ),
        "scheduled": FieldSpec("bool", False, "PodScheduled=True or a node is assigned."),
        "containers": FieldSpec(
            "list<map>",
            [],
            "Init containers then app containers, each a map: name, init, sidecar, image, "
            "state (running|waiting|terminated|''), ready, waiting_reason, waiting_message, "
            "terminated_reason, terminated_message, exit_code (-1 if not terminated), "
            "last_terminated_reason, last_terminated_message, last_exit_code (-1 if none), "
            "restart_count, gpu_requests {resource: n}, gpu_limits {resource: n}, "
            "memory_limit_bytes, memory_request_bytes, cpu_limit_millis, cpu_request_millis "
            "(0 when unset).",
        ),
        "gpu_resources": FieldSpec(
            "map",
            {},
            "GPU resource -> count the scheduler needs: limit "
            "(= request) summed over app containers, or the "
            "largest init container when that is bigger.",
        ),
        "gpu_total": FieldSpec("int", 0, "gpu_resources['nvidia.com/gpu'] (0 when not requested)."),
        "requests_gpu": FieldSpec("bool", False, "The pod asks for any GPU resource."),
        "gpu_involved": FieldSpec(
            "bool",
            False,
            "The pod reaches GPUs some way: a GPU resource "
            "(sharing layers included), a DRA claim, an "
            "NVIDIA RuntimeClass, NVIDIA_VISIBLE_DEVICES "
            "in its env, or it is a pod of the GPU stack "
            "(see facts/gpu_stack.py).",
        ),
        "gpu_involvement": FieldSpec("list", [], "Why the pod counts as GPU-involved, in words."),
        "gpu_stack_component": FieldSpec(
            "string",
            "",
            "The GPU-stack component the pod belongs "
            "to (nvidia-device-plugin, "
            "gpu-operator-validator, dcgm-exporter, "
            "...), '' when it is not one.",
        ),
        "visible_devices": FieldSpec(
            "string",
            "",
            "NVIDIA_VISIBLE_DEVICES set in a container's env ('' when unset, void or none).",
        ),
        "uses_dra": FieldSpec("bool", False, "spec.resourceClaims is not empty."),
        "requests_without_limits": FieldSpec(
            "list",
            [],
            "GPU resources set in a container's "
            "requests but not its limits (a spec "
            "the API server rejects).",
        ),
        "mig_resources": FieldSpec(
            "list", [], "Requested MIG resources (nvidia.com/mig-1g.10gb...)."
        ),
        "shared_gpu": FieldSpec(
            "bool",
            False,
            "A shared-GPU resource is requested (nvidia.com/gpu.shared, HAMi gpumem/gpucores).",
        ),
        "tolerations": FieldSpec(
            "list<map>",
            [],
            "spec.tolerations as maps: key, operator "
            "(Equal|Exists|Lt|Gt), value, effect, "
            "seconds (-1 when unset).",
        ),
        "node_selector": FieldSpec("map", {}, "spec.nodeSelector."),
        "affinity_terms": FieldSpec(
            "list<map>",
            [],
            "Required node-affinity expressions as maps: term (index of the ORed "
            "nodeSelectorTerm), key, operator, values (list), field (matchFields).",
        ),
        "runtime_class": FieldSpec("string", "", "spec.runtimeClassName."),
        "shm": FieldSpec(
            "map",
            {
                "present": False,
                "volume": "",
                "volume_type": "",
                "medium": "",
                "size_limit_bytes": 0,
            },
            "The volume mounted at /dev/shm: present, volume (name), volume_type "
            "(emptyDir, hostPath...), medium (Memory for RAM-backed), "
            "size_limit_bytes (0 = unset). Absent = the runtime's 64 MB default.",
        ),
        "owner_kind": FieldSpec("string", "", "Controller kind (ReplicaSet, Job, StatefulSet)."),
        "owner_name": FieldSpec("string", "", "Controller name."),
        "any_oom_killed": FieldSpec(
            "bool",
            False,
            "A container's current or last termination reason is OOMKilled (cgroup memory limit).",
        ),
        "crash_loop": FieldSpec("bool", False, "A container is waiting in CrashLoopBackOff."),
        "exit_137_not_oom": FieldSpec(
            "bool",
            False,
            "A container was SIGKILLed (exit 137) without OOMKilled: not a cgroup OOM.",
        ),
        "start_errors": FieldSpec(
            "list",
            [],
            "Messages of containers that failed to start: "
            "StartError / exit 128 terminations and "
            "CreateContainer*/RunContainerError waits.",
        ),
        "admission_rejected": FieldSpec(
            "bool",
            False,
            "The kubelet rejected the pod at "
            "admission (phase Failed with "
            "UnexpectedAdmissionError / OutOf* / "
            "'Pod was rejected').",
        ),
        "evicted": FieldSpec("bool", False, "status.reason is Evicted."),
    },
)

_START_WAIT_REASONS = (
    "CreateContainerError",
    "CreateContainerConfigError",
    "RunContainerError",
    "StartError",
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    ev = evidence.get_or_missing(Key.POD)
    if not ev.ok:
        return unknown_from(SPEC, ev)
    pod = obj(ev)
    if pod.get("kind") not in (None, "Pod") or not pod:
        return unknown(SPEC, f"{ev.source}: expected a Pod object, got {pod.get('kind')!r}")
    if not text(mapping(pod.get("metadata")).get("name")):
        return unknown(SPEC, f"{ev.source}: holds no pod (no metadata.name)")
    return _facts(ev, pod)


def _facts(ev: Evidence, pod: dict[str, Any]) -> FactGroup:
    meta, spec, status = (
        mapping(pod.get("metadata")),
        mapping(pod.get("spec")),
        mapping(pod.get("status")),
    )
    cites: dict[str, list[LineRef]] = {}

    def cite(name: str, ref: LineRef) -> None:
        if ref.line:
            # A compact pod.json is one line holding every env value: the cited text is
            # redacted here, at the fact level, so no path (TUI, export) can show a secret.
            cites.setdefault(name, []).append(replace(ref, text=clean(ref.text)))

    conditions = [
        {
            "type": text(c.get("type")),
            "status": text(c.get("status")),
            "reason": text(c.get("reason")),
            "message": text(c.get("message")),
        }
        for c in dict_list(status.get("conditions"))
    ]
    containers = _containers(spec, status)
    gpu = pod_gpu_request(spec)
    owner = _owner(meta)
    values: dict[str, Any] = {
        "name": text(meta.get("name")),
        "namespace": text(meta.get("namespace")),
        "uid": text(meta.get("uid")),
        "phase": text(status.get("phase")),
        "reason": text(status.get("reason")),
        "message": text(status.get("message")),
        "node": text(spec.get("nodeName")),
        "qos_class": text(status.get("qosClass")),
        "priority_class": text(spec.get("priorityClassName")),
        "scheduler_name": text(spec.get("schedulerName")) or "default-scheduler",
        "created": text(meta.get("creationTimestamp")) or text(status.get("startTime")),
        "deleting": bool(meta.get("deletionTimestamp")),
        "conditions": conditions,
        "scheduled": bool(spec.get("nodeName"))
        or any(c["type"] == "PodScheduled" and c["status"] == "True" for c in conditions),
        "containers": containers,
        "gpu_resources": gpu,
        "gpu_total": gpu.get(NVIDIA_GPU, 0),
        "requests_gpu": bool(gpu),
        "requests_without_limits": _requests_without_limits(spec),
        "mig_resources": [r for r in gpu if is_mig_resource(r)],
        "shared_gpu": any(is_shared_resource(r) for r in gpu),
        "tolerations": _tolerations(spec),
        "node_selector": {str(k): text(v) for k, v in mapping(spec.get("nodeSelector")).items()},
        "affinity_terms": _affinity_terms(spec),
        "runtime_class": text(spec.get("runtimeClassName")),
        "shm": _shm(spec),
        "owner_kind": owner[0],
        "owner_name": owner[1],
        "any_oom_killed": any(
            "OOMKilled" in (c["terminated_reason"], c["last_terminated_reason"]) for c in containers
        ),
        "crash_loop": any(c["waiting_reason"] == "CrashLoopBackOff" for c in containers),
        "exit_137_not_oom": any(
            (c["exit_code"] == 137 and c["terminated_reason"] != "OOMKilled")
            or (c["last_exit_code"] == 137 and c["last_terminated_reason"] != "OOMKilled")
            for c in containers
        ),
        "start_errors": _start_errors(containers),
        "evicted": text(status.get("reason")) == "Evicted",
    }
    component = stack_component(meta, spec, owner[1])
    visible = visible_devices(spec)
    uses_dra = bool(spec.get("resourceClaims"))
    values["gpu_stack_component"] = component
    values["visible_devices"] = visible
    values["uses_dra"] = uses_dra
    values["gpu_involvement"] = involvement(
        gpu_resources=gpu,
        dra=uses_dra,
        runtime_class=values["runtime_class"],
        visible=visible,
        component=component,
    )
    values["gpu_involved"] = bool(values["gpu_involvement"])
    values["admission_rejected"] = values["phase"] == "Failed" and (
        values["reason"] == "UnexpectedAdmissionError"
        or values["reason"].startswith("OutOf")
        or values["message"].startswith(("Pod was rejected", "Pod Allocate failed"))
    )

    if visible:
        cite("visible_devices", cite_text(ev, "NVIDIA_VISIBLE_DEVICES"))
    for name in (
        "phase",
        "reason",
        "node",
        "runtime_class",
        "qos_class",
        "priority_class",
        "scheduler_name",
    ):
        if values[name]:
            key = {
                "node": "nodeName",
                "runtime_class": "runtimeClassName",
                "qos_class": "qosClass",
                "priority_class": "priorityClassName",
                "scheduler_name": "schedulerName",
            }.get(name, name)
            cite(name, cite_field(ev, key, values[name]))
    if values["message"]:
        cite("message", cite_text(ev, values["message"]))
    for c in containers:
        for resource, amount in {**c["gpu_requests"], **c["gpu_limits"]}.items():
            ref = cite_field(ev, resource, amount)
            cite("gpu_resources", ref)
            if resource == NVIDIA_GPU:
                cite("gpu_total", ref)
            if resource in values["requests_without_limits"]:
                cite("requests_without_limits", ref)
    for flag, needle in (("any_oom_killed", "OOMKilled"), ("crash_loop", "CrashLoopBackOff")):
        if values[flag]:
            cite(flag, cite_text(ev, needle))
    if values["exit_137_not_oom"]:
        cite("exit_137_not_oom", cite_text(ev, "137"))
    for message in values["start_errors"]:
        cite("start_errors", cite_text(ev, message))
    for c in containers:
        for reason in (c["waiting_reason"], c["terminated_reason"], c["last_terminated_reason"]):
            if reason:
                cite("containers", cite_text(ev, reason))
    for t in values["tolerations"]:
        if t["key"]:
            ref = cite_field(ev, "key", t["key"])
            # describe prints "key=value:Effect"; the key alone would hit resource lines first
            shown = f"{t['key']}={t['value']}" if t["value"] else t["key"]
            cite(
                "tolerations",
                ref
                if ref.text.startswith(("key", '"key"'))
                else cite_text(ev, f"{shown}:{t['effect']}" if t["effect"] else shown),
            )
    for key, value in values["node_selector"].items():
        ref = cite_field(ev, key, value)
        cite("node_selector", ref if ref.line else cite_text(ev, f"{key}={value}"))
    if values["shm"]["present"]:
        cite("shm", cite_text(ev, "/dev/shm"))
    for c in conditions:
        if c["status"] != "True" and c["type"]:
            cite("conditions", cite_text(ev, c["message"] or c["type"]))
    if values["gpu_involved"]:
        for ref in cites.get("gpu_resources", []):
            cite("gpu_involvement", ref)
        if values["runtime_class"]:
            cite("gpu_involvement", cite_field(ev, "runtimeClassName", values["runtime_class"]))
    return known(SPEC, values, cites)


def _containers(spec: dict[str, Any], status: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for init, spec_key, status_key in (
        (True, "initContainers", "initContainerStatuses"),
        (False, "containers", "containerStatuses"),
    ):
        statuses = {text(s.get("name")): s for s in dict_list(status.get(status_key))}
        for c in dict_list(spec.get(spec_key)):
            out.append(_container(c, statuses.get(text(c.get("name")), {}), init))
    return out


def _container(c: dict[str, Any], st: dict[str, Any], init: bool) -> dict[str, Any]:
    state, last = mapping(st.get("state")), mapping(st.get("lastState"))
    kind = next((k for k in ("running", "waiting", "terminated") if k in state), "")
    waiting, term = mapping(state.get("waiting")), mapping(state.get("terminated"))
    last_term = mapping(last.get("terminated"))
    requests, limits = container_gpus(c)
    resources = mapping(c.get("resources"))
    res_limits, res_requests = mapping(resources.get("limits")), mapping(resources.get("requests"))
    return {
        "name": text(c.get("name")),
        "init": init,
        "sidecar": init and c.get("restartPolicy") == "Always",
        "image": text(c.get("image")),
        "state": kind,
        "ready": st.get("ready") is True,
        "waiting_reason": text(waiting.get("reason")),
        "waiting_message": text(waiting.get("message")),
        "terminated_reason": text(term.get("reason")),
        "terminated_message": text(term.get("message")),
        "exit_code": integer(term.get("exitCode"), -1) if term else -1,
        "last_terminated_reason": text(last_term.get("reason")),
        "last_terminated_message": text(last_term.get("message")),
        "last_exit_code": integer(last_term.get("exitCode"), -1) if last_term else -1,
        "restart_count": integer(st.get("restartCount")),
        "gpu_requests": requests,
        "gpu_limits": limits,
        "memory_limit_bytes": to_bytes(res_limits.get("memory")) or 0,
        "memory_request_bytes": to_bytes(res_requests.get("memory")) or 0,
        "cpu_limit_millis": to_millis(res_limits.get("cpu")) or 0,
        "cpu_request_millis": to_millis(res_requests.get("cpu")) or 0,
    }


def _requests_without_limits(spec: dict[str, Any]) -> list[str]:
    missing: set[str] = set()
    for c in dict_list(spec.get("initContainers")) + dict_list(spec.get("containers")):
        requests, limits = container_gpus(c)
        missing.update(r for r in requests if r not in limits)
    return sorted(missing)


def _tolerations(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "key": text(t.get("key")),
            "operator": text(t.get("operator")) or "Equal",
            "value": text(t.get("value")),
            "effect": text(t.get("effect")),
            "seconds": integer(t.get("tolerationSeconds"), -1),
        }
        for t in dict_list(spec.get("tolerations"))
    ]


def _affinity_terms(spec: dict[str, Any]) -> list[dict[str, Any]]:
    node_affinity = mapping(mapping(spec.get("affinity")).get("nodeAffinity"))
    required = mapping(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    out = []
    for index, term in enumerate(dict_list(required.get("nodeSelectorTerms"))):
        for field, key in ((False, "matchExpressions"), (True, "matchFields")):
            for expr in dict_list(term.get(key)):
                values = expr.get("values")
                out.append(
                    {
                        "term": index,
                        "key": text(expr.get("key")),
                        "operator": text(expr.get("operator")),
                        "values": [text(v) for v in values] if isinstance(values, list) else [],
                        "field": field,
                    }
                )
    return out


def _shm(spec: dict[str, Any]) -> dict[str, Any]:
    shm: dict[str, Any] = {
        "present": False,
        "volume": "",
        "volume_type": "",
        "medium": "",
        "size_limit_bytes": 0,
    }
    mounts = [
        m
        for c in dict_list(spec.get("containers")) + dict_list(spec.get("initContainers"))
        for m in dict_list(c.get("volumeMounts"))
    ]
    mount = next((m for m in mounts if text(m.get("mountPath")).rstrip("/") == "/dev/shm"), None)
    if mount is None:
        return shm
    name = text(mount.get("name"))
    volume = next((v for v in dict_list(spec.get("volumes")) if text(v.get("name")) == name), {})
    volume_type = next((k for k in volume if k != "name"), "")
    source = mapping(volume.get(volume_type))
    shm.update(
        present=True,
        volume=name,
        volume_type=volume_type,
        medium=text(source.get("medium")),
        size_limit_bytes=to_bytes(source.get("sizeLimit")) or 0,
    )
    return shm


def _owner(meta: dict[str, Any]) -> tuple[str, str]:
    owners = dict_list(meta.get("ownerReferences"))
    owner = next((o for o in owners if o.get("controller") is True), owners[0] if owners else {})
    return text(owner.get("kind")), text(owner.get("name"))


def _start_errors(containers: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for c in containers:
        for reason, code, message in (
            (c["terminated_reason"], c["exit_code"], c["terminated_message"]),
            (c["last_terminated_reason"], c["last_exit_code"], c["last_terminated_message"]),
        ):
            if message and (reason == "StartError" or code == 128) and message not in out:
                out.append(message)
        if c["waiting_reason"] in _START_WAIT_REASONS and c["waiting_message"]:
            out.append(c["waiting_message"])
    return out
