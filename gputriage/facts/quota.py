"""ResourceQuota facts: GPU quotas in the namespace and quota rejections of the pod's owner.

Extended resources can only be quota'd on requests (``requests.nvidia.com/gpu``); a pod that
would push ``used`` past ``hard`` is refused at admission, so no pod exists and the only trace
is the controller's ``FailedCreate ... exceeded quota: NAME, requested: R=N, used: R=N,
limited: R=N`` (k8s-messages.md section 3).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import EvidenceSet, Key, LineRef
from gputriage.facts.gpu_resources import is_gpu_resource, quota_resource
from gputriage.facts.kube_objects import cite_text, items, mapping, text
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    reason_for,
    unknown,
)
from gputriage.parsers.quantity import to_int

_EXCEEDED = re.compile(
    r"[Ee]xceeded quota: (?P<quota>[^,]+), requested: (?P<requested>\S+), used: (?P<used>\S+), "
    r"limited: (?P<limited>[^\s]+)"
)

SPEC = GroupSpec(
    name="quota",
    doc="ResourceQuotas of the namespace (quota.json) and 'exceeded quota' rejections on the "
    "pod's owner (owner-events.json).",
    sources=(Key.QUOTA, Key.OWNER_EVENTS),
    fields={
        "quotas_known": FieldSpec("bool", False, "quota.json was read."),
        "quotas": FieldSpec(
            "list<map>",
            [],
            "Every quota line as maps: name, resource "
            "(requests.nvidia.com/gpu...), hard, used (as "
            "printed), hard_value, used_value (whole numbers, "
            "rounded up; -1 when unreadable), gpu (bool).",
        ),
        "gpu_quotas": FieldSpec("list<map>", [], "The quota lines on GPU resources."),
        "gpu_headroom": FieldSpec(
            "map", {}, "GPU resource -> smallest hard - used over the quotas limiting it."
        ),
        "gpu_quota_full": FieldSpec("bool", False, "A GPU quota has used >= hard."),
        "gpu_quota_exceeded": FieldSpec(
            "bool",
            False,
            "The pod's GPU request does not fit a "
            "GPU quota (used + request > hard), or "
            "the owner was refused for a GPU "
            "quota.",
        ),
        "exceeded_messages": FieldSpec(
            "list", [], "'exceeded quota:' messages from the owner's FailedCreate events."
        ),
        "exceeded": FieldSpec(
            "list<map>",
            [],
            "Those messages parsed, one map per resource: "
            "quota, resource, requested, used, limited "
            "(whole numbers), gpu.",
        ),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    ev = evidence.get_or_missing(Key.QUOTA)
    owner = earlier.get("owner_events")
    owner_known = owner is not None and owner.known
    if not ev.ok and not owner_known:
        why = [reason_for(ev)] + ([owner.reason] if owner is not None else [])
        return unknown(SPEC, "; ".join(why))
    pod = earlier.get("pod")
    request: dict[str, int] = dict(pod.values["gpu_resources"]) if pod and pod.known else {}
    values: dict[str, Any] = {}
    cites: dict[str, list[LineRef]] = {}
    if ev.ok:
        quotas = _quota_lines(items(ev))
        gpu = [q for q in quotas if q["gpu"]]
        headroom: dict[str, int] = {}
        for q in gpu:
            if q["hard_value"] >= 0 and q["used_value"] >= 0:
                room = q["hard_value"] - q["used_value"]
                target_resource = quota_resource(q["resource"])
                headroom[target_resource] = min(headroom.get(target_resource, room), room)
        over = [
            q
            for q in gpu
            if q["hard_value"] >= 0
            and q["used_value"] >= 0
            and q["used_value"] + request.get(quota_resource(q["resource"]), 0) > q["hard_value"]
        ]
        values.update(
            quotas_known=True,
            quotas=quotas,
            gpu_quotas=gpu,
            gpu_headroom=headroom,
            gpu_quota_full=any(q["used_value"] >= q["hard_value"] >= 0 for q in gpu),
            gpu_quota_exceeded=bool(over),
        )
        for q in gpu:
            ref = cite_text(ev, q["resource"])
            if ref.line:
                cites.setdefault("gpu_quotas", []).append(ref)
                if q in over:
                    cites.setdefault("gpu_quota_exceeded", []).append(ref)
    if owner_known and owner is not None:
        messages = list(owner.values["quota_messages"])
        parsed: list[dict[str, Any]] = []
        for entry in (p for m in messages for p in _parse_exceeded(m)):
            if entry not in parsed:  # the controller retries: same refusal, new pod name
                parsed.append(entry)
        values.update(exceeded_messages=messages, exceeded=parsed)
        if any(p["gpu"] for p in parsed):
            values["gpu_quota_exceeded"] = True
            cites.setdefault("gpu_quota_exceeded", []).extend(owner.cites.get("quota_messages", ()))
        if messages:
            cites["exceeded_messages"] = list(owner.cites.get("quota_messages", ()))
    return known(SPEC, values, {k: v for k, v in cites.items() if v})


def _quota_lines(quotas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for q in quotas:
        name = text(mapping(q.get("metadata")).get("name"))
        status = mapping(q.get("status"))
        hard = mapping(status.get("hard")) or mapping(mapping(q.get("spec")).get("hard"))
        used = mapping(status.get("used"))
        for resource, limit in sorted(hard.items()):
            hard_value, used_value = to_int(limit), to_int(used.get(resource, "0"))
            out.append(
                {
                    "name": name,
                    "resource": str(resource),
                    "hard": text(limit),
                    "used": text(used.get(resource, "")),
                    "hard_value": -1 if hard_value is None else hard_value,
                    "used_value": -1 if used_value is None else used_value,
                    "gpu": is_gpu_resource(quota_resource(str(resource))),
                }
            )
    return out


def _parse_exceeded(message: str) -> list[dict[str, Any]]:
    m = _EXCEEDED.search(message)
    if not m:
        return []
    fields = {k: _amounts(m[k]) for k in ("requested", "used", "limited")}
    resources = list(dict.fromkeys([*fields["requested"], *fields["limited"]]))
    return [
        {
            "quota": m["quota"].strip(),
            "resource": r,
            "requested": fields["requested"].get(r, 0),
            "used": fields["used"].get(r, 0),
            "limited": fields["limited"].get(r, 0),
            "gpu": is_gpu_resource(quota_resource(r)),
        }
        for r in resources
    ]


def _amounts(listing: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in listing.split(","):
        resource, _, amount = part.partition("=")
        value = to_int(amount)
        if resource and value is not None:
            out[resource] = value
    return out
