"""Facts from the events of the pod's owner (ReplicaSet, Job, StatefulSet...).

Admission rejections never produce a pod (k8s-messages.md section 3, rule 6): a ResourceQuota
or RuntimeClass refusal shows up only as ``FailedCreate`` on the controller, e.g. ``Error
creating: pods "x-654649bb45-vlrj8" is forbidden: exceeded quota: inference-gpu-quota,
requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=3, limited:
requests.nvidia.com/gpu=4``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from gputriage.evidence.model import EvidenceSet, Key, LineRef
from gputriage.facts.events import COMMON_FIELDS, normalise, summarise
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    unknown,
    unknown_from,
)

_QUOTA = re.compile(r"[Ee]xceeded quota:|failed quota:")
_RUNTIME_CLASS = re.compile(r'RuntimeClass "(?P<name>[^"]+)" not found')
_WEBHOOK = re.compile(r'admission webhook "[^"]+" denied the request')

SPEC = GroupSpec(
    name="owner_events",
    doc="Events of the pod's controller: FailedCreate rejections by ResourceQuota, RuntimeClass "
    "and admission webhooks, which leave no pod behind.",
    sources=(Key.OWNER_EVENTS,),
    fields={
        **COMMON_FIELDS,
        "failed_create": FieldSpec("list", [], "FailedCreate messages (unique, newest last)."),
        "owner_kind": FieldSpec(
            "string",
            "",
            "Kind of the owner these events are about (the "
            "pod's controller; for a target that never got a "
            "pod, the target itself).",
        ),
        "owner_name": FieldSpec("string", "", "Its name."),
        "owner_namespace": FieldSpec("string", "", "Its namespace."),
        "failed_create_quota": FieldSpec(
            "bool", False, "A FailedCreate was an 'exceeded quota' or 'failed quota' rejection."
        ),
        "quota_messages": FieldSpec("list", [], "Those quota rejection messages."),
        "runtime_class_rejected": FieldSpec(
            "bool", False, "A create was rejected because the RuntimeClass object does not exist."
        ),
        "runtime_class_missing": FieldSpec("string", "", "That RuntimeClass's name."),
        "webhook_denials": FieldSpec(
            "list", [], "'admission webhook ... denied the request' messages."
        ),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    ev = evidence.get_or_missing(Key.OWNER_EVENTS)
    if not ev.ok:
        return unknown_from(SPEC, ev)
    if not isinstance(ev.data, dict):
        return unknown(SPEC, f"{ev.source}: not an event list")
    records = normalise(ev, kind=target.owner_kind, name=target.owner_name)
    values, cites = summarise(records)
    failed: list[str] = []
    quota: list[str] = []
    webhooks: list[str] = []
    extra_cites: dict[str, list[LineRef]] = {}
    for record, ref in records:
        message = record["message"]
        if record["reason"] == "FailedCreate" and message not in failed:
            failed.append(message)
            extra_cites.setdefault("failed_create", []).append(ref)
        if _QUOTA.search(message) and message not in quota:
            quota.append(message)
            extra_cites.setdefault("quota_messages", []).append(ref)
            extra_cites.setdefault("failed_create_quota", []).append(ref)
        rc = _RUNTIME_CLASS.search(message)
        if rc:
            values["runtime_class_rejected"] = True
            values["runtime_class_missing"] = rc["name"]
            extra_cites.setdefault("runtime_class_rejected", []).append(ref)
        if _WEBHOOK.search(message) and message not in webhooks:
            webhooks.append(message)
            extra_cites.setdefault("webhook_denials", []).append(ref)
    values.update(
        failed_create=failed,
        failed_create_quota=bool(quota),
        quota_messages=quota,
        webhook_denials=webhooks,
        owner_kind=target.owner_kind,
        owner_name=target.owner_name,
        owner_namespace=target.namespace,
    )
    for name, refs in extra_cites.items():
        cites[name] = [r for r in refs if r.line]
    return known(SPEC, values, {k: v for k, v in cites.items() if v})
