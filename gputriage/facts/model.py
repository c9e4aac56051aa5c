"""Fact groups, their declared fields, and the set handed to the playbook engine.

A group is either *known* (its evidence was read) or *unknown* with a reason ("kubelet journal:
timeout: ssh gpu-7 did not answer in 10 s"). An unknown group still carries every declared
field at its default, so a CEL condition never hits a missing key; the engine looks at
``known`` to tell "false" from "could not see".

Citations map a field path inside the group (``xids``, ``reasons.insufficient``) to the evidence
lines that support it; the engine cites them when a condition that reads that path fires.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gputriage.evidence.model import DESCRIPTIONS, Evidence, EvidenceSet, Key
from gputriage.facts.lineref import LineRef as LineRef


@dataclass(frozen=True)
class FieldSpec:
    """One declared field of a fact group."""

    type: str  # bool | int | float | string | list | map | list<map> | ... (documentation)
    default: Any
    doc: str


@dataclass(frozen=True)
class GroupSpec:
    """A fact group's name, the evidence it is built from, and its fields."""

    name: str
    doc: str
    sources: tuple[Key, ...]
    fields: Mapping[str, FieldSpec]

    def defaults(self) -> dict[str, Any]:
        # Fresh copies: defaults may be mutable containers.
        import copy

        return {name: copy.deepcopy(spec.default) for name, spec in self.fields.items()}


@dataclass(frozen=True)
class FactGroup:
    """The facts of one group, as built from one evidence snapshot."""

    name: str
    known: bool
    reason: str
    values: Mapping[str, Any]
    cites: Mapping[str, tuple[LineRef, ...]] = field(default_factory=dict)

    def to_context(self) -> dict[str, Any]:
        return {"known": self.known, "reason": self.reason, **self.values}


def known(
    spec: GroupSpec, values: Mapping[str, Any], cites: Mapping[str, Iterable[LineRef]] | None = None
) -> FactGroup:
    """A known group: ``values`` over the declared defaults. Undeclared fields are a bug."""
    extra = set(values) - set(spec.fields)
    if extra:
        raise ValueError(f"fact group {spec.name!r} has undeclared fields: {sorted(extra)}")
    merged = spec.defaults()
    merged.update(values)
    return FactGroup(spec.name, True, "", merged, {k: tuple(v) for k, v in (cites or {}).items()})


def unknown(spec: GroupSpec, reason: str) -> FactGroup:
    """An unknown group: every field at its default, plus why it could not be built."""
    return FactGroup(spec.name, False, reason, spec.defaults(), {})


def reason_for(evidence: Evidence) -> str:
    """Words for why a piece of evidence is not usable: "<what>: <status>: <detail>"."""
    return f"{DESCRIPTIONS[evidence.key]}: {evidence.status.value}: {evidence.detail}".rstrip(": ")


def unknown_from(spec: GroupSpec, evidence: Evidence) -> FactGroup:
    return unknown(spec, reason_for(evidence))


@dataclass(frozen=True)
class Target:
    """Who we are triaging, as far as the pod evidence tells."""

    namespace: str = ""
    pod: str = ""
    uid: str = ""
    node: str = ""
    containers: tuple[str, ...] = ()
    owner_kind: str = ""
    owner_name: str = ""


#: A builder turns evidence (plus the groups built before it) into one group.
Builder = Callable[[EvidenceSet, Target, Mapping[str, FactGroup]], FactGroup]


@dataclass(frozen=True)
class FactSet:
    """All fact groups of one evidence snapshot."""

    target: Target
    groups: Mapping[str, FactGroup]

    def __getitem__(self, name: str) -> FactGroup:
        return self.groups[name]

    def to_context(self) -> dict[str, Any]:
        """Plain dicts/lists for CEL: ``{group: {"known": ..., "reason": ..., field: ...}}``."""
        return {name: g.to_context() for name, g in self.groups.items()}

    def value(self, path: str) -> Any:
        """The value at ``group.field[.key...]`` (None when absent)."""
        parts = path.split(".")
        cur: Any = self.groups.get(parts[0])
        if cur is None:
            return None
        cur = cur.to_context()
        for p in parts[1:]:
            if isinstance(cur, Mapping) and p in cur:
                cur = cur[p]
            else:
                return None
        return cur

    def citations(self, path: str) -> tuple[LineRef, ...]:
        """Lines supporting ``group.field...``: the longest cited prefix of the path.

        ``kernel.xids`` cites the Xid lines; ``kernel`` alone cites everything the group cites.
        """
        group, _, rest = path.partition(".")
        g = self.groups.get(group)
        if g is None:
            return ()
        if not rest:
            seen: dict[tuple[str, int, str], LineRef] = {}
            for refs in g.cites.values():
                for r in refs:
                    seen.setdefault((r.source, r.line, r.text), r)
            return tuple(seen.values())
        parts = rest.split(".")
        for n in range(len(parts), 0, -1):
            hit = g.cites.get(".".join(parts[:n]))
            if hit:
                return hit
        return ()
