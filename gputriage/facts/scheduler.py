"""Why the scheduler will not place the pod, parsed from its own words.

The message comes from the pod's ``PodScheduled=False`` condition (the scheduler's latest word)
or, when the pod object does not carry it (describe text, older bundles), from the newest
scheduling-failure event (``FailedScheduling``; KAI's and Volcano's ``Unschedulable``; HAMi's
``FilteringFailed``: :data:`gputriage.facts.events.SCHEDULING_FAILURES`). Parsing is
:mod:`gputriage.parsers.scheduler`; this group turns it into counts a playbook can compare,
e.g. ``scheduler.insufficient_gpu > 0 && !scheduler.preemption_helpful``. Nothing is
reported once the pod is scheduled: old FailedScheduling events are history, not the current
problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import EvidenceSet, Key, LineRef
from gputriage.facts.gpu_resources import is_gpu_resource
from gputriage.facts.kube_objects import cite_text
from gputriage.facts.model import FactGroup, FieldSpec, GroupSpec, Target, known, unknown
from gputriage.parsers.scheduler import SchedulerMessage, parse_scheduler_message

SPEC = GroupSpec(
    name="scheduler",
    doc="The scheduler's reasons for not placing the pod ('0/N nodes are available: ...'), "
    "per kind and per resource, with the preemption verdict and cluster-autoscaler's view.",
    sources=(Key.POD, Key.EVENTS),
    fields={
        "found": FieldSpec(
            "bool",
            False,
            "A scheduler message applies now (the pod is not scheduled and one was found).",
        ),
        "message": FieldSpec("string", "", "The raw message."),
        "source": FieldSpec(
            "string",
            "",
            "Where it came from: 'condition' (PodScheduled) or "
            "'event' (a scheduling-failure event).",
        ),
        "scheduler": FieldSpec(
            "string",
            "",
            "Which scheduler spoke: the event's source "
            "component (default-scheduler is named "
            "kube-scheduler; volcano, kai-scheduler, "
            "hami-scheduler...), for the condition the pod's "
            "schedulerName, else what the wording says.",
        ),
        "event_reason": FieldSpec(
            "string",
            "",
            "For source 'event': the event's reason "
            "(FailedScheduling, Unschedulable, "
            "FilteringFailed).",
        ),
        "recognised": FieldSpec(
            "bool",
            False,
            "The text had a known envelope "
            "('0/N nodes are available', KAI, Volcano, "
            "HAMi, preemption).",
        ),
        "generation": FieldSpec(
            "string",
            "",
            "Wording era (see parsers.scheduler.GENERATIONS): "
            "fit-failure, predicates-summary, "
            "predicates, predicate-descriptions, "
            "taint-didnt-tolerate, untolerated-taint, "
            "untolerated-taints, framework, kai, volcano, "
            "hami.",
        ),
        "total_nodes": FieldSpec("int", 0, "N in '0/N nodes are available' (0 = not printed)."),
        "reasons": FieldSpec(
            "list<map>",
            [],
            "Histogram entries as maps: count, kind "
            "(insufficient|taint|selector|unschedulable|"
            "too_many_pods|volume|dra|prefilter|other), text, "
            "resource, taint_key, taint_value, prefilter.",
        ),
        "insufficient": FieldSpec(
            "map", {}, "Resource -> nodes short of it ('Insufficient nvidia.com/gpu')."
        ),
        "insufficient_gpu": FieldSpec("int", 0, "Most nodes short of any one GPU resource."),
        "taint_nodes": FieldSpec("int", 0, "Nodes rejected for an untolerated taint."),
        "untolerated_taints": FieldSpec(
            "list<map>",
            [],
            "Taints printed in the message as maps "
            "key, value (newest releases print "
            "none: read node taints).",
        ),
        "selector_mismatch": FieldSpec("int", 0, "Nodes not matching nodeSelector/affinity."),
        "unschedulable_nodes": FieldSpec("int", 0, "Cordoned nodes ('were unschedulable')."),
        "too_many_pods": FieldSpec("int", 0, "Nodes at their pod limit."),
        "volume_nodes": FieldSpec("int", 0, "Nodes rejected for volume reasons."),
        "dra_reasons": FieldSpec(
            "list",
            [],
            "DRA texts: 'cannot allocate all claims', "
            "'resourceclaim not found', classic DRA waits.",
        ),
        "prefilter": FieldSpec(
            "string", "", "PreFilter text that replaced the histogram (applies to every node)."
        ),
        "preemption_helpful": FieldSpec(
            "bool|null",
            None,
            "True when some node would fit by evicting lower-priority pods ('No preemption "
            "victims found': the resource exists but is busy); False when preemption is 'not "
            "helpful' everywhere (missing resource, taint, selector); null without a "
            "preemption tail.",
        ),
        "preemption": FieldSpec(
            "map",
            {"total_nodes": 0, "not_helpful": 0, "no_victims": 0},
            "Preemption counts: total_nodes, not_helpful, no_victims.",
        ),
        "notes": FieldSpec(
            "list",
            [],
            "Other PostFilter text ('no new claims to deallocate' is "
            "noise, 'still not schedulable').",
        ),
        "autoscaler_message": FieldSpec("string", "", "Newest NotTriggerScaleUp message."),
        "autoscaler_reasons": FieldSpec(
            "list<map>", [], "Its entries, same shape as reasons (counts are node groups)."
        ),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    pod, events = earlier.get("pod"), earlier.get("events")
    if not (pod and pod.known) and not (events and events.known):
        why = [g.reason for g in (pod, events) if g is not None]
        return unknown(SPEC, "; ".join(why) or "neither the pod nor its events were read")
    values: dict[str, Any] = {}
    cites: dict[str, list[LineRef]] = {}
    scaleup = events.values["not_triggered_scale_up"] if events and events.known else ""
    if scaleup:
        parsed = parse_scheduler_message(scaleup)
        values["autoscaler_message"] = scaleup
        values["autoscaler_reasons"] = [r.to_dict() for r in parsed.reasons]
        if events is not None:
            cites["autoscaler_message"] = list(events.cites.get("not_triggered_scale_up", ()))
    if pod and pod.known and pod.values["scheduled"]:
        return known(SPEC, values, cites)
    message, source, scheduler, refs = _message(evidence, pod, events)
    if not message:
        return known(SPEC, values, cites)
    parsed = parse_scheduler_message(message)
    values.update(_values(parsed))
    scheduler_name = pod.values["scheduler_name"] if pod and pod.known else ""
    values.update(
        found=True,
        message=message,
        source=source,
        scheduler=_speaker(scheduler, scheduler_name, parsed),
        event_reason=events.values["failed_scheduling_reason"]
        if source == "event" and events is not None
        else "",
    )
    for name in (
        "message",
        "reasons",
        "insufficient",
        "insufficient_gpu",
        "taint_nodes",
        "untolerated_taints",
        "selector_mismatch",
        "unschedulable_nodes",
        "dra_reasons",
        "prefilter",
        "preemption_helpful",
        "total_nodes",
    ):
        cites[name] = refs
    return known(SPEC, values, {k: v for k, v in cites.items() if v})


def _message(
    evidence: EvidenceSet, pod: FactGroup | None, events: FactGroup | None
) -> tuple[str, str, str, list[LineRef]]:
    """(message, source, writer, cited lines): the condition first, else the newest event."""
    if pod and pod.known:
        for c in pod.values["conditions"]:
            if c["type"] == "PodScheduled" and c["status"] == "False" and c["message"]:
                ref = cite_text(evidence.get_or_missing(Key.POD), c["message"])
                return c["message"], "condition", "", [ref] if ref.line else []
    if events and events.known and events.values["failed_scheduling"]:
        return (
            events.values["failed_scheduling"],
            "event",
            events.values["failed_scheduling_source"],
            list(events.cites.get("failed_scheduling", ())),
        )
    return "", "", "", []


def _speaker(component: str, scheduler_name: str, parsed: SchedulerMessage) -> str:
    """Which scheduler wrote the message: the event's component, else (a condition) the
    scheduler the pod names, else what the wording gives away."""
    default = "kube-scheduler"
    if component:
        return default if component == "default-scheduler" else component
    if scheduler_name and scheduler_name != "default-scheduler":
        return scheduler_name
    return parsed.scheduler or (default if scheduler_name else "")


def _values(parsed: SchedulerMessage) -> dict[str, Any]:
    insufficient = parsed.insufficient()
    taints = [
        {"key": r.taint_key, "value": r.taint_value}
        for r in parsed.reasons
        if r.kind == "taint" and r.taint_key
    ]
    preemption = parsed.preemption
    return {
        "recognised": parsed.recognised,
        "generation": parsed.generation,
        "total_nodes": parsed.total_nodes,
        "reasons": [r.to_dict() for r in parsed.reasons],
        "insufficient": insufficient,
        "insufficient_gpu": max(
            (n for r, n in insufficient.items() if is_gpu_resource(r)), default=0
        ),
        "taint_nodes": parsed.count("taint"),
        "untolerated_taints": taints,
        "selector_mismatch": parsed.count("selector"),
        "unschedulable_nodes": parsed.count("unschedulable"),
        "too_many_pods": parsed.count("too_many_pods"),
        "volume_nodes": parsed.count("volume"),
        "dra_reasons": [r.text for r in parsed.reasons if r.kind == "dra"],
        "prefilter": parsed.prefilter,
        "preemption_helpful": preemption.helpful if preemption else None,
        "preemption": {
            "total_nodes": preemption.total_nodes,
            "not_helpful": preemption.not_helpful,
            "no_victims": preemption.no_victims,
        }
        if preemption
        else {"total_nodes": 0, "not_helpful": 0, "no_victims": 0},
        "notes": list(parsed.notes),
    }
