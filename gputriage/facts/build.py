"""Build every fact group from one evidence snapshot. Never raises for bad evidence."""

from __future__ import annotations

from typing import Any

from gputriage.evidence.model import EvidenceSet, Key
from gputriage.facts.model import FactGroup, FactSet, Target, unknown
from gputriage.facts.registry import modules


def target_of(evidence: EvidenceSet) -> Target:
    """Namespace, name, uid, node and containers of the pod under triage."""
    pod = evidence.get_or_missing(Key.POD)
    data: Any = pod.data if pod.ok else None
    if not isinstance(data, dict):
        return _owner_target(evidence)
    meta = data.get("metadata") or {}
    spec = data.get("spec") or {}
    owners = meta.get("ownerReferences") or []
    owner = next(
        (o for o in owners if isinstance(o, dict) and o.get("controller")),
        owners[0] if owners and isinstance(owners[0], dict) else {},
    )
    containers = tuple(
        str(c.get("name", "")) for c in (spec.get("containers") or []) if isinstance(c, dict)
    )
    return Target(
        namespace=str(meta.get("namespace") or "default"),
        pod=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        node=str(spec.get("nodeName") or ""),
        containers=containers,
        owner_kind=str(owner.get("kind") or ""),
        owner_name=str(owner.get("name") or ""),
    )


def _owner_target(evidence: EvidenceSet) -> Target:
    """No pod was created: the owner its events are about stands for it."""
    owner = evidence.get_or_missing(Key.OWNER_EVENTS)
    items = owner.data.get("items") if owner.ok and isinstance(owner.data, dict) else None
    for item in items if isinstance(items, list) else ():
        obj = item.get("involvedObject") if isinstance(item, dict) else None
        if isinstance(obj, dict) and obj.get("name"):
            return Target(
                namespace=str(obj.get("namespace") or "default"),
                owner_kind=str(obj.get("kind") or ""),
                owner_name=str(obj["name"]),
            )
    return Target()


def build_facts(evidence: EvidenceSet) -> FactSet:
    """Run every registered group builder in order.

    A builder that raises is a bug, but an incident is no time to crash: the group becomes
    unknown with the error as its reason, and the walk goes on.
    """
    target = target_of(evidence)
    groups: dict[str, FactGroup] = {}
    for module in modules():
        spec = module.SPEC
        try:
            groups[spec.name] = module.build(evidence, target, groups)
        except Exception as exc:
            groups[spec.name] = unknown(
                spec, f"internal error building {spec.name} facts: {type(exc).__name__}: {exc}"
            )
    return FactSet(target, groups)
