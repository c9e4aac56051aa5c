"""Facts from the pod's events: what the scheduler, kubelet and runtime said about it.

Events are normalised from core/v1 ``Event`` (``kubectl get events -o json``), events.k8s.io/v1
(``note``/``regarding``/``series``) and describe-derived dicts (``_line``, ages instead of
timestamps), sorted newest last. Convenience fields pick out the messages the playbooks of the
four families branch on (k8s-messages.md sections 1-4). :mod:`gputriage.facts.owner_events`
reuses this module for the owning controller's events.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts.kube_objects import cite_event, integer, items, mapping, text
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    unknown,
    unknown_from,
)
from gputriage.parsers.runtime_errors import (
    container_cli_errors,
    hook_errors,
    missing_runtime_handler,
)

#: Event reasons with which a scheduler says it cannot place the pod: kube-scheduler and
#: Volcano (``FailedScheduling``), KAI-scheduler and Volcano (``Unschedulable``), HAMi's
#: scheduler extender (``FilteringFailed``). k8s-messages.md sections 2.1 and 2.6.
SCHEDULING_FAILURES = frozenset({"FailedScheduling", "Unschedulable", "FilteringFailed"})
#: HAMi records this FilteringFailed for pods that ask for no device it manages: not a failure.
_HAMI_NOT_MINE = "does not request any resource"

#: Kubelet admission rejections by reason (k8s-messages.md 4.1): the device manager's
#: UnexpectedAdmissionError, the Topology Manager's TopologyAffinityError (k8s 1.16 printed the
#: reason as "Topology Affinity Error"), and OutOf<resource> from the general predicates.
_ADMISSION_REASONS = frozenset(
    {"UnexpectedAdmissionError", "TopologyAffinityError", "Topology Affinity Error"}
)
#: Admission texts in any event: "Allocate failed due to" (k8s >= 1.17) and its predecessor
#: "Update plugin resources failed due to", the Topology Manager's message, "Pod was rejected".
_ADMISSION_TEXT = re.compile(
    r"(?:allocate|update plugin resources) failed due to|"
    r"resources cannot be allocated with topology locality"
)

#: Fields shared by ``events`` and ``owner_events``.
COMMON_FIELDS: dict[str, FieldSpec] = {
    "items": FieldSpec(
        "list<map>",
        [],
        "Every event, newest last, as maps: type, reason, message, count, first, last "
        "(RFC 3339 or ''), age (describe's age column, else ''), source (component), line "
        "(line in the events file, 0 if not found).",
    ),
    "reasons": FieldSpec("list", [], "Unique event reasons, in order of first appearance."),
    "warnings": FieldSpec("int", 0, "Number of Warning events."),
    "latest_warning": FieldSpec("string", "", "Message of the newest Warning event."),
    "failed_scheduling": FieldSpec(
        "string",
        "",
        "Message of the newest event in which a "
        "scheduler says it cannot place the pod: "
        "FailedScheduling (kube-scheduler, Volcano), "
        "Unschedulable (KAI-scheduler, Volcano), "
        "FilteringFailed (HAMi); '' when none.",
    ),
    "failed_scheduling_source": FieldSpec(
        "string",
        "",
        "Component that wrote it (default-scheduler, kai-scheduler, volcano, hami-scheduler...).",
    ),
    "failed_scheduling_reason": FieldSpec(
        "string", "", "Its event reason (FailedScheduling, Unschedulable, FilteringFailed)."
    ),
    "not_triggered_scale_up": FieldSpec(
        "string", "", "Newest cluster-autoscaler NotTriggerScaleUp message."
    ),
    "sandbox_errors": FieldSpec("list", [], "FailedCreatePodSandBox messages."),
    "runtime_handler_missing": FieldSpec(
        "bool",
        False,
        "A sandbox error says the runtime "
        "handler does not exist ('no runtime for "
        '"nvidia" is configured\', CRI-O '
        "'failed to find runtime handler').",
    ),
    "runtime_handler": FieldSpec("string", "", "The missing handler's name (e.g. nvidia)."),
    "admission_errors": FieldSpec(
        "list",
        [],
        "Kubelet admission rejections: "
        "UnexpectedAdmissionError, TopologyAffinityError, "
        "OutOf<resource>, 'Allocate failed ...' (older: "
        "'Update plugin resources failed ...').",
    ),
    "nvidia_container_cli_errors": FieldSpec(
        "list<map>",
        [],
        "nvidia-container-cli errors quoted by any event (container create/start failures, "
        "sandbox errors), as maps kind, message; kind is the class the tool printed "
        "(initialization | detection | device | requirement | mount | permission | ...) and "
        'message is "nvidia-container-cli: <kind> error: <detail>" whatever the runtime\'s '
        "wrapping (containerd, CRI-O, Docker; runc hook wording of any version).",
    ),
    "oci_hook_errors": FieldSpec(
        "list<map>",
        [],
        "OCI hooks that failed while the runtime created a container, quoted by any event "
        "(NVIDIA's nvidia-container-runtime-hook, nvidia-ctk / nvidia-cdi-hook "
        "create-symlinks...), as maps stage, message; stage is what runc named (prestart, "
        "createContainer...; '' when not named) and message is what the hook printed (its "
        "logged msg, or its stderr).",
    ),
    "dra_errors": FieldSpec("list", [], "FailedPrepareDynamicResources messages."),
    "container_errors": FieldSpec(
        "list",
        [],
        "Container create/start failures (reason Failed "
        "'Error: ...', CreateContainerError...), image "
        "pulls excluded.",
    ),
    "image_errors": FieldSpec(
        "list",
        [],
        "Image pull failures (Failed to pull image, ErrImagePull, Back-off pulling image).",
    ),
    "failed_mount": FieldSpec("list", [], "FailedMount / FailedAttachVolume messages."),
    "backoff": FieldSpec("bool", False, "'Back-off restarting failed container' was reported."),
    "evicted": FieldSpec("bool", False, "An Evicted event exists."),
    "eviction_message": FieldSpec(
        "string", "", "Its message (e.g. 'The node was low on resource: memory.')."
    ),
    "oom_killing": FieldSpec(
        "bool", False, "An OOM event (OOMKilling, SystemOOM, 'OOMKilled') exists."
    ),
    "preempted": FieldSpec("bool", False, "The pod was preempted by a higher-priority pod."),
}

SPEC = GroupSpec(
    name="events",
    doc="The pod's events (kubectl get events --field-selector involvedObject.name=POD), "
    "newest last, with the messages each family's playbook branches on.",
    sources=(Key.EVENTS,),
    fields=COMMON_FIELDS,
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    ev = evidence.get_or_missing(Key.EVENTS)
    if not ev.ok:
        return unknown_from(SPEC, ev)
    if not isinstance(ev.data, dict):
        return unknown(SPEC, f"{ev.source}: not an event list")
    records = normalise(ev, kind="Pod", name=target.pod)
    values, cites = summarise(records)
    return known(SPEC, values, cites)


def normalise(
    ev: Evidence, *, kind: str = "", name: str = ""
) -> list[tuple[dict[str, Any], LineRef]]:
    """Events as plain maps with their cited line, newest last.

    Events about another object of ``kind`` than ``name`` are dropped (a hand-made bundle may
    hold the whole namespace's events).
    """
    out = []
    for order, item in enumerate(items(ev)):
        involved = mapping(item.get("involvedObject")) or mapping(item.get("regarding"))
        if (
            name
            and kind
            and text(involved.get("kind")) == kind
            and text(involved.get("name")) not in ("", name)
        ):
            continue
        series = mapping(item.get("series"))
        first = (
            text(item.get("firstTimestamp"))
            or text(item.get("deprecatedFirstTimestamp"))
            or text(item.get("eventTime"))
        )
        last = (
            text(series.get("lastObservedTime"))
            or text(item.get("lastTimestamp"))
            or text(item.get("deprecatedLastTimestamp"))
            or text(item.get("eventTime"))
            or first
        )
        source = mapping(item.get("source"))
        count = (
            integer(series.get("count"))
            or integer(item.get("count"))
            or integer(item.get("deprecatedCount"))
            or 1
        )
        ref = cite_event(ev, item)
        record = {
            "type": text(item.get("type")),
            "reason": text(item.get("reason")),
            "message": (text(item.get("message")) or text(item.get("note"))).strip(),
            "count": count,
            "first": first,
            "last": last,
            "age": text(item.get("_age")),
            "source": (
                text(source.get("component"))
                or text(item.get("reportingComponent"))
                or text(item.get("reportingController"))
            ),
            "line": ref.line,
        }
        out.append((order, _sort_key(last), record, ref))
    out.sort(key=lambda r: (r[1], r[0]))
    return [(record, ref) for _, _, record, ref in out]


def summarise(
    records: list[tuple[dict[str, Any], LineRef]],
) -> tuple[dict[str, Any], dict[str, list[LineRef]]]:
    """The common field values and their citations."""
    cites: dict[str, list[LineRef]] = {}
    values: dict[str, Any] = {name: spec.default for name, spec in COMMON_FIELDS.items()}
    values["nvidia_container_cli_errors"] = []
    values["oci_hook_errors"] = []
    lists: dict[str, list[str]] = {
        k: []
        for k in (
            "sandbox_errors",
            "admission_errors",
            "dra_errors",
            "container_errors",
            "image_errors",
            "failed_mount",
        )
    }
    reasons: list[str] = []

    def note(name: str, ref: LineRef) -> None:
        if ref.line:
            cites.setdefault(name, []).append(ref)

    for record, ref in records:
        reason, message, warning = record["reason"], record["message"], record["type"] == "Warning"
        if reason and reason not in reasons:
            reasons.append(reason)
        if warning:
            values["warnings"] += 1
            values["latest_warning"] = message
        for field in _classify(reason, message):
            if field in lists:
                if message not in lists[field]:
                    lists[field].append(message)
            elif field == "failed_scheduling":
                values["failed_scheduling"] = message
                values["failed_scheduling_source"] = record["source"]
                values["failed_scheduling_reason"] = reason
                cites["failed_scheduling"] = []
            elif field == "not_triggered_scale_up":
                values["not_triggered_scale_up"] = message
                cites["not_triggered_scale_up"] = []
            elif field == "evicted":
                values["evicted"], values["eviction_message"] = True, message
            else:
                values[field] = True
            note(field, ref)
        handler = missing_runtime_handler(message)
        if handler is not None:
            values["runtime_handler_missing"] = True
            values["runtime_handler"] = handler
            note("runtime_handler_missing", ref)
        for err in container_cli_errors(message):
            if err.to_fact() not in values["nvidia_container_cli_errors"]:
                values["nvidia_container_cli_errors"].append(err.to_fact())
            note("nvidia_container_cli_errors", ref)
        for hook in hook_errors(message):
            if hook.to_fact() not in values["oci_hook_errors"]:
                values["oci_hook_errors"].append(hook.to_fact())
            note("oci_hook_errors", ref)
    values.update(lists)
    values["items"] = [r for r, _ in records]
    values["reasons"] = reasons
    for _record, ref in records:
        note("items", ref)
    return values, {k: v for k, v in cites.items() if v}


def _classify(reason: str, message: str) -> list[str]:
    """Which convenience fields one event feeds."""
    fields = []
    lower = message.lower()
    if reason in SCHEDULING_FAILURES:
        if _HAMI_NOT_MINE not in message:
            fields.append("failed_scheduling")
    elif reason == "NotTriggerScaleUp":
        fields.append("not_triggered_scale_up")
    elif reason == "FailedCreatePodSandBox":
        fields.append("sandbox_errors")
    elif (
        reason in _ADMISSION_REASONS
        or reason.startswith("OutOf")
        or (_ADMISSION_TEXT.search(lower))
        or message.startswith("Pod was rejected")
    ):
        fields.append("admission_errors")
    elif reason == "FailedPrepareDynamicResources" or "prepare dynamic resources" in lower:
        fields.append("dra_errors")
    elif reason in ("FailedMount", "FailedAttachVolume", "FailedMapVolume"):
        fields.append("failed_mount")
    elif reason in ("ErrImagePull", "ImagePullBackOff") or any(
        s in lower for s in ("pull image", "pulling image", "errimagepull", "imagepullbackoff")
    ):
        fields.append("image_errors")
    elif reason in (
        "Failed",
        "CreateContainerError",
        "CreateContainerConfigError",
        "RunContainerError",
    ):
        fields.append("container_errors")
    elif reason == "BackOff" and "restarting failed container" in lower:
        fields.append("backoff")
    elif reason == "Evicted":
        fields.append("evicted")
    elif reason == "Preempted" or lower.startswith("preempted by"):
        fields.append("preempted")
    if reason in ("OOMKilling", "SystemOOM") or "oomkilled" in lower:
        fields.append("oom_killing")
    return fields


def _sort_key(timestamp: str) -> float:
    """Seconds since the epoch for ordering; events without a time keep their file order."""
    if not timestamp:
        return 0.0
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
