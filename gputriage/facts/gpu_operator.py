"""Fact group ``gpu_operator``: the NVIDIA GPU Operator on the pod's node.

Built from ``gpu-operator.json`` (:mod:`gputriage.evidence.operator`): the Operator's component
pods on the node (driver, container toolkit, device plugin, validator, DCGM exporter, MIG
manager, GPU feature discovery) and their state, the logs of validator init containers that
have not succeeded, and the ClusterPolicy's ``status.state``. On an Operator node the driver is
containerized (nvidia-smi lives under /run/nvidia/driver) and the toolkit owns the runtime
configuration, so fixes there go through the Operator, not the host.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import EvidenceSet, Key, LineRef
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    reason_for,
    unknown,
)

#: Validator log lines worth citing: the failure, not the progress chatter.
_ERROR_WORDS = (
    "error",
    "failed",
    "fail",
    "unable",
    "cannot",
    "couldn't",
    "not found",
    "no such",
    "timed out",
)
MAX_LINES = 5

SPEC = GroupSpec(
    name="gpu_operator",
    doc="The NVIDIA GPU Operator on the node: its component pods and their state, the "
    "validator's failing init containers and their log lines, and the ClusterPolicy "
    "state. present is false on nodes the Operator does not manage.",
    sources=(Key.GPU_OPERATOR,),
    fields={
        "present": FieldSpec(
            "bool", False, "Operator component pods run on the node, or a ClusterPolicy exists."
        ),
        "cluster_policy_state": FieldSpec(
            "string",
            "",
            "status.state of the first ClusterPolicy (ready, notReady...; '' when none).",
        ),
        "components": FieldSpec(
            "list<map>",
            [],
            "One map per component pod on the node: component (driver, toolkit, "
            "device-plugin, validator, dcgm-exporter, dcgm, mig-manager, "
            "gpu-feature-discovery), pod, namespace, phase, ready (every container ready), "
            "waiting_reason ('' when none; Init:... reasons of init containers included), "
            "restarts, failed_inits (init containers that have not succeeded).",
        ),
        "not_ready": FieldSpec("list<string>", [], "Components whose pod is not ready."),
        "driver_containerized": FieldSpec(
            "bool",
            False,
            "The Operator's driver pod runs on "
            "the node: the driver lives in a "
            "container (/run/nvidia/driver).",
        ),
        "validator_failures": FieldSpec(
            "list<map>",
            [],
            "Validator init containers that have not succeeded: container "
            "(driver-validation, toolkit-validation, cuda-validation, plugin-validation...), "
            "pod, lines (the log's error lines, at most 5; the last lines when none looks like "
            "an error).",
        ),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    ev = evidence.get_or_missing(Key.GPU_OPERATOR)
    if not ev.ok or not isinstance(ev.data, dict):
        return unknown(SPEC, reason_for(ev) if not ev.ok else f"{ev.source}: not an object")
    data = ev.data
    components = [_component(p) for p in data.get("pods") or [] if isinstance(p, dict)]
    policies = [p for p in data.get("clusterPolicies") or [] if isinstance(p, dict)]
    failures = []
    cites: dict[str, list[LineRef]] = {}
    for entry in data.get("validatorLogs") or []:
        if not isinstance(entry, dict):
            continue
        lines = _error_lines(str(entry.get("log") or entry.get("error") or ""))
        failures.append(
            {
                "container": str(entry.get("container") or ""),
                "pod": str(entry.get("pod") or ""),
                "lines": lines,
            }
        )
        for line in lines:
            # The log sits JSON-escaped in gpu-operator.json: look for a run without quotes.
            ref = ev.find_line(max(re.split(r'["\\]', line), key=len)[:80].strip())
            if ref.line:
                cites.setdefault("validator_failures", []).append(ref)
    not_ready = sorted({c["component"] for c in components if not c["ready"]})
    for c in components:
        if not c["ready"]:
            ref = ev.find_line(f'"name": "{c["pod"]}"')
            if ref.line:
                cites.setdefault("not_ready", []).append(ref)
    return known(
        SPEC,
        {
            "present": bool(components or policies),
            "cluster_policy_state": str(policies[0].get("state") or "") if policies else "",
            "components": components,
            "not_ready": not_ready,
            "driver_containerized": any(c["component"] == "driver" for c in components),
            "validator_failures": failures,
        },
        cites,
    )


def _component(pod: Mapping[str, Any]) -> dict[str, Any]:
    inits = [s for s in pod.get("initContainerStatuses") or [] if isinstance(s, dict)]
    mains = [s for s in pod.get("containerStatuses") or [] if isinstance(s, dict)]
    waiting = ""
    for s in (*inits, *mains):
        reason = _m(_m(s.get("state")).get("waiting")).get("reason")
        if reason and reason not in ("PodInitializing",):
            waiting = str(reason)
            break
    failed_inits = [
        str(s.get("name"))
        for s in inits
        if _m(_m(s.get("state")).get("terminated")).get("exitCode") != 0
    ]
    return {
        "component": str(pod.get("component") or ""),
        "pod": str(pod.get("name") or ""),
        "namespace": str(pod.get("namespace") or ""),
        "phase": str(pod.get("phase") or ""),
        "ready": bool(mains) and all(s.get("ready") is True for s in mains),
        "waiting_reason": waiting,
        "restarts": sum(
            int(s.get("restartCount") or 0)
            for s in (*inits, *mains)
            if str(s.get("restartCount") or "0").isdigit()
        ),
        "failed_inits": failed_inits,
    }


def _error_lines(log: str) -> list[str]:
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    errors = [ln for ln in lines if any(w in ln.lower() for w in _ERROR_WORDS)]
    return (errors or lines)[-MAX_LINES:]


def _m(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}
