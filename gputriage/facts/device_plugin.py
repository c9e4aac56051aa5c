"""Fact group ``device_plugin``: the NVIDIA device plugin's log and its pod on the node.

Two independent parts, each with its own ``*_known`` flag: what the plugin logged
(``Key.DEVICE_PLUGIN_LOG``: registration, NVML start-up, devices it marked unhealthy, its config)
and the state of its pod (found in ``Key.NODE_PODS`` by the labels NVIDIA's manifests, Helm
chart, GPU Operator and GKE put on it). The group is known when either part is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts.model import FactGroup, FieldSpec, GroupSpec, Target, known, reason_for
from gputriage.facts.model import unknown as unknown_group
from gputriage.parsers.device_plugin import (
    DevicePluginLog,
    UnhealthyDevice,
    parse_device_plugin_log,
)
from gputriage.xid import catalog

#: (label, value) pairs that mark the device-plugin pod, most specific first.
PLUGIN_POD_LABELS: tuple[tuple[str, str], ...] = (
    ("app", "nvidia-device-plugin-daemonset"),  # GPU Operator
    ("app.kubernetes.io/name", "nvidia-device-plugin"),  # Helm chart
    ("name", "nvidia-device-plugin-ds"),  # static manifest
    ("k8s-app", "nvidia-gpu-device-plugin"),  # GKE
    ("k8s-app", "nvidia-device-plugin-daemonset"),
    ("app", "nvidia-device-plugin"),
)
#: Pod-name prefixes used when no label matches.
PLUGIN_POD_PREFIXES: tuple[str, ...] = ("nvidia-device-plugin", "nvidia-gpu-device-plugin")
#: Pods that carry the plugin's name but are something else.
NOT_THE_PLUGIN: tuple[str, ...] = ("validator", "mps-control-daemon")

#: How many lines one field cites at most (a flapping plugin can log thousands).
MAX_CITES = 50

_CONFIG_DEFAULT: dict[str, Any] = {
    "printed": False,
    "mig_strategy": "",
    "sharing": "",
    "replicas": 0,
    "shared_resources": [],
    "rename_by_default": False,
    "fail_on_init_error": False,
    "device_list_strategy": [],
    "device_id_strategy": "",
    "resources": [],
}

SPEC = GroupSpec(
    name="device_plugin",
    doc="The NVIDIA device plugin on the pod's node: what its log says (registration with the "
    "kubelet, NVML start-up, devices marked unhealthy and why, its config) and the state of "
    "its pod. Known when either the log or the node's pod list was read; `log_known` and "
    "`pod_known` say which.",
    sources=(Key.DEVICE_PLUGIN_LOG, Key.NODE_PODS),
    fields={
        "log_known": FieldSpec("bool", False, "The device-plugin log was read."),
        "log_reason": FieldSpec("string", "", "Why the log is unknown (empty when read)."),
        "pod_known": FieldSpec(
            "bool",
            False,
            "The node's pod list was read (it may be partial: see pod_list_complete).",
        ),
        "pod_list_complete": FieldSpec(
            "bool",
            False,
            "The node's pod list was read and is complete (collected "
            "by gputriage, not pasted), so a missing device-plugin "
            "pod is really absent.",
        ),
        "pod_reason": FieldSpec("string", "", "Why the pod list is unknown (empty when read)."),
        "registered": FieldSpec(
            "bool",
            False,
            "The log says the plugin registered with the kubelet "
            "(\"Registered device plugin for 'nvidia.com/gpu' with "
            'Kubelet").',
        ),
        "resources_registered": FieldSpec(
            "list<string>",
            [],
            "Resource names registered, e.g. nvidia.com/gpu, "
            "nvidia.com/gpu.shared, nvidia.com/mig-1g.10gb.",
        ),
        "registration_errors": FieldSpec(
            "list<string>",
            [],
            '"Could not register device plugin: ..." / "Could '
            'not contact Kubelet" messages (API skew, kubelet '
            "socket not served).",
        ),
        "nvml_init_failed": FieldSpec(
            "bool",
            False,
            'The plugin could not initialise NVML ("Failed to '
            'initialize NVML: could not load NVML library", '
            "ERROR_LIBRARY_NOT_FOUND...): driver libraries not "
            "injected into the plugin container.",
        ),
        "nvml_error": FieldSpec("string", "", "The first NVML error text, verbatim."),
        "runtime_hint": FieldSpec(
            "bool",
            False,
            'The plugin printed its "did you set the docker default '
            'runtime to `nvidia`?" / "did you configure the NVIDIA '
            'Container Toolkit?" hint.',
        ),
        "no_devices_found": FieldSpec("bool", False, '"No devices found. Waiting indefinitely."'),
        "unhealthy_devices": FieldSpec(
            "list<map>",
            [],
            "Devices the plugin marked unhealthy: {uuid, xid (0 when not an Xid), resource, "
            "reason (xid | nvml_error | too_old | no_handle | placement_unknown | "
            "events_unsupported | event_wait_failed), line, xid_klass and "
            "xid_immediate_action (that Xid's class and NVIDIA's immediate-action bucket in the "
            "Xid catalog, e.g. application / RESTART_APP; '' when not an Xid or not "
            'catalogued)}. uuid is "all" for "All devices will go unhealthy". The plugin '
            "never marks them healthy again until it restarts.",
        ),
        "unhealthy_xids": FieldSpec(
            "list<int>", [], "Sorted unique Xid codes that made the plugin mark a device unhealthy."
        ),
        "all_unhealthy": FieldSpec(
            "bool", False, "The plugin marked every device unhealthy at once."
        ),
        "skipped_xids": FieldSpec(
            "list<int>",
            [],
            "Xid events the plugin saw and ignored (its application-Xid "
            "skip list or DP_DISABLE_HEALTHCHECKS).",
        ),
        "skipped_events": FieldSpec(
            "list<map>",
            [],
            "NVML events the plugin skipped: {type, kind (double_bit_ecc, xid...), xid, line}.",
        ),
        "ignored_xids": FieldSpec(
            "list<int>", [], "Xids the plugin said it ignores for health checks."
        ),
        "healthcheck_disabled": FieldSpec(
            "bool",
            False,
            "Health checks are off (DP_DISABLE_HEALTHCHECKS=all, "
            "or NVML failed with failOnInitError=false).",
        ),
        "config": FieldSpec(
            "map",
            dict(_CONFIG_DEFAULT),
            'From "Running with config:": {printed, mig_strategy, sharing '
            '("" | time-slicing | mps), replicas, shared_resources, '
            "rename_by_default, fail_on_init_error, device_list_strategy, "
            "device_id_strategy, resources}.",
        ),
        "shared": FieldSpec(
            "bool",
            False,
            "GPUs are shared (time-slicing or MPS with replicas > 1, or a "
            "*.shared resource registered): no memory isolation between pods.",
        ),
        "errors": FieldSpec("list<map>", [], "Distinct error lines: {message, line, count}."),
        "version": FieldSpec("string", "", "Plugin version when it printed one."),
        "starts": FieldSpec("int", 0, "How many times the plugin started within the log."),
        "restarts": FieldSpec(
            "int",
            0,
            "In-process restarts logged (kubelet.sock re-created => kubelet "
            "restarted; SIGHUP; GKE GPU-count change).",
        ),
        "pod_found": FieldSpec("bool", False, "A device-plugin pod runs on the node."),
        "pod_name": FieldSpec("string", "", "Its name."),
        "pod_namespace": FieldSpec("string", "", "Its namespace."),
        "pod_phase": FieldSpec("string", "", "Its phase (Running, Pending...)."),
        "pod_ready": FieldSpec("bool", False, "Its Ready condition is True."),
        "pod_deleting": FieldSpec("bool", False, "It has a deletionTimestamp."),
        "restart_count": FieldSpec("int", 0, "Sum of its containers' restart counts."),
        "waiting_reason": FieldSpec(
            "string",
            "",
            "Waiting reason of its first waiting container "
            "(CrashLoopBackOff, ImagePullBackOff, "
            'CreateContainerError...), "Init:<reason>" for init '
            "containers.",
        ),
        "last_terminated_reason": FieldSpec(
            "string", "", "Reason of its last container termination (Error, OOMKilled...)."
        ),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    log_ev = _plugin_log(evidence, earlier)
    pods_ev = evidence.get_or_missing(Key.NODE_PODS)
    if not log_ev.ok and not pods_ev.ok:
        return unknown_group(SPEC, f"{reason_for(log_ev)}; {reason_for(pods_ev)}")
    values: dict[str, Any] = {}
    cites: dict[str, list[LineRef]] = {}
    if log_ev.ok:
        values["log_known"] = True
        _from_log(parse_device_plugin_log(log_ev.raw), log_ev, values, cites)
    else:
        values["log_reason"] = reason_for(log_ev)
    if pods_ev.ok:
        values["pod_known"] = True
        values["pod_list_complete"] = pods_ev.complete
        _from_pods(pods_ev, target, values, cites)
    else:
        values["pod_reason"] = reason_for(pods_ev)
    return known(SPEC, values, cites)


#: GPU-stack components whose own container log is a device-plugin log.
_PLUGIN_COMPONENTS = (
    "nvidia-device-plugin",
    "hami",
    "volcano-device-plugin",
    "kubevirt-gpu-device-plugin",
)


def _plugin_log(evidence: EvidenceSet, earlier: Mapping[str, FactGroup]) -> Evidence:
    """The device plugin's log: ``device-plugin.log``, or, when the pod under triage is the
    device plugin itself, its own container log (the previous one first: a crash-looping
    plugin says why in the run that died)."""
    log_ev = evidence.get_or_missing(Key.DEVICE_PLUGIN_LOG)
    pod = earlier.get("pod")
    if log_ev.ok or pod is None or not pod.known:
        return log_ev
    if pod.values.get("gpu_stack_component") not in _PLUGIN_COMPONENTS:
        return log_ev
    for key in (Key.CONTAINER_LOG_PREVIOUS, Key.CONTAINER_LOG):
        own = evidence.get_or_missing(key)
        if own.ok and own.raw.strip():
            return own
    return log_ev


def _refs(ev: Evidence, lines: list[int]) -> list[LineRef]:
    return [ev.cite(n) for n in sorted(set(lines))[:MAX_CITES]]


def _from_log(
    log: DevicePluginLog, ev: Evidence, values: dict[str, Any], cites: dict[str, list[LineRef]]
) -> None:
    unhealthy = [_unhealthy_fact(d) for d in log.unhealthy]
    unhealthy_lines = [n for d in log.unhealthy for n in d.lines]
    config = log.config.to_fact()
    registered = [r for r, _ in log.registered]
    shared = (config["sharing"] != "" and config["replicas"] > 1) or any(
        r.endswith(".shared") for r in registered
    )
    values.update(
        {
            "registered": bool(log.registered),
            "resources_registered": registered,
            "registration_errors": [m.text for m in log.registration_errors],
            "nvml_init_failed": bool(log.nvml_errors),
            "nvml_error": log.nvml_errors[0].text if log.nvml_errors else "",
            "runtime_hint": bool(log.runtime_hint),
            "no_devices_found": bool(log.no_devices),
            "unhealthy_devices": unhealthy,
            "unhealthy_xids": sorted({d["xid"] for d in unhealthy if d["xid"]}),
            "all_unhealthy": bool(log.all_unhealthy),
            "skipped_xids": log.skipped_xids,
            "skipped_events": [dict(e) for e in log.skipped_events],
            "ignored_xids": list(log.ignored_xids),
            "healthcheck_disabled": bool(log.healthcheck_disabled),
            "config": config,
            "shared": shared,
            "errors": [{"message": m.text, "line": m.line, "count": m.count} for m in log.errors],
            "version": log.version,
            "starts": len(log.starts),
            "restarts": sum(m.count for m in log.restarts),
        }
    )
    line_sets: dict[str, list[int]] = {
        "registered": [n for _, n in log.registered],
        "resources_registered": [n for _, n in log.registered],
        "registration_errors": [n for m in log.registration_errors for n in m.lines],
        "nvml_init_failed": [n for m in log.nvml_errors for n in m.lines],
        "nvml_error": [n for m in log.nvml_errors for n in m.lines],
        "runtime_hint": log.runtime_hint,
        "no_devices_found": log.no_devices,
        "unhealthy_devices": unhealthy_lines,
        "unhealthy_xids": [d.line for d in log.unhealthy if d.xid],
        "all_unhealthy": [n for m in log.all_unhealthy for n in m.lines],
        "skipped_xids": [e["line"] for e in log.skipped_events if e["xid"]],
        "skipped_events": [e["line"] for e in log.skipped_events],
        "ignored_xids": [log.ignored_xids_line] if log.ignored_xids_line else [],
        "healthcheck_disabled": log.healthcheck_disabled,
        "config": [log.config.line] if log.config.line else [],
        "shared": ([log.config.line] if log.config.line and shared else [])
        + [n for r, n in log.registered if r.endswith(".shared")],
        "errors": [n for m in log.errors for n in m.lines],
        "version": [log.version_line] if log.version_line else [],
        "starts": log.starts,
        "restarts": [n for m in log.restarts for n in m.lines],
    }
    for name, lines in line_sets.items():
        if lines:
            cites[name] = _refs(ev, lines)


def _unhealthy_fact(device: UnhealthyDevice) -> dict[str, Any]:
    """One ``unhealthy_devices`` entry, with what NVIDIA's catalog says about its Xid."""
    info = catalog.lookup(device.xid) if device.xid else None
    return {
        **device.to_fact(),
        "xid_klass": info.klass if info else "",
        "xid_immediate_action": info.immediate if info else "",
    }


def find_plugin_pod(items: list[Any], node: str = "") -> dict[str, Any] | None:
    """The device-plugin pod among ``items`` (a PodList's items), preferring a live one."""
    candidates: list[dict[str, Any]] = []
    for pod in items:
        if not isinstance(pod, dict):
            continue
        meta, spec = _map(pod.get("metadata")), _map(pod.get("spec"))
        name = str(meta.get("name") or "")
        if any(word in name for word in NOT_THE_PLUGIN):
            continue
        on = str(spec.get("nodeName") or "")
        if node and on and on != node:
            continue
        labels = _map(meta.get("labels"))
        by_label = any(labels.get(k) == v for k, v in PLUGIN_POD_LABELS)
        if by_label or name.startswith(PLUGIN_POD_PREFIXES):
            candidates.append(pod)
    if not candidates:
        return None

    def rank(pod: dict[str, Any]) -> tuple[int, int]:
        meta, status = _map(pod.get("metadata")), _map(pod.get("status"))
        deleting = 1 if meta.get("deletionTimestamp") else 0
        running = 0 if status.get("phase") == "Running" else 1
        return deleting, running

    return sorted(candidates, key=rank)[0]


def _from_pods(
    ev: Evidence, target: Target, values: dict[str, Any], cites: dict[str, list[LineRef]]
) -> None:
    items = ev.data.get("items") if isinstance(ev.data, dict) else None
    pod = find_plugin_pod(items if isinstance(items, list) else [], target.node)
    if pod is None:
        return
    meta, status = _map(pod.get("metadata")), _map(pod.get("status"))
    name = str(meta.get("name") or "")
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    statuses = [s for s in status.get("containerStatuses") or [] if isinstance(s, dict)]
    inits = [s for s in status.get("initContainerStatuses") or [] if isinstance(s, dict)]
    waiting = next(
        (
            f"Init:{r}"
            for s in inits
            if (r := _reason(s, "state", "waiting")) and r != "PodInitializing"
        ),
        "",
    )
    waiting = waiting or next((r for s in statuses if (r := _reason(s, "state", "waiting"))), "")
    last = next(
        (r for s in [*statuses, *inits] if (r := _reason(s, "lastState", "terminated"))), ""
    )
    restarts = sum(
        s["restartCount"] for s in [*statuses, *inits] if isinstance(s.get("restartCount"), int)
    )
    values.update(
        {
            "pod_found": True,
            "pod_name": name,
            "pod_namespace": str(meta.get("namespace") or ""),
            "pod_phase": str(status.get("phase") or ""),
            "pod_ready": ready,
            "pod_deleting": bool(meta.get("deletionTimestamp")),
            "restart_count": restarts,
            "waiting_reason": waiting,
            "last_terminated_reason": last,
        }
    )
    ref = ev.find_line(f'"{name}"') if ev.format == "json" else ev.find_line(name)
    for field_name in (
        "pod_found",
        "pod_name",
        "pod_phase",
        "pod_ready",
        "restart_count",
        "waiting_reason",
        "last_terminated_reason",
    ):
        cites[field_name] = [ref]


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _reason(container_status: dict[str, Any], state: str, kind: str) -> str:
    """``status.<state>.<kind>.reason`` of one container status ("" when absent)."""
    return str(_map(_map(container_status.get(state)).get(kind)).get("reason") or "")
