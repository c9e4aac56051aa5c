"""``gputriage node``: the walk for a node without a target pod. Pure parts and the node bundle.

* Evidence: the node's keys only (node object and events, pods on the node, device-plugin log,
  RuntimeClasses, and what the node itself says: kernel log, nvidia-smi, modules...). No pod:
  fact groups about the pod are unknown; :func:`node_facts` names the node as the target.
* Entry: by playbook routes, as for a pod walk: ``lost-card`` routes a pod-less walk whose
  facts show a sign of a lost or failing GPU, ``node-onboarding`` (driver modules, toolkit,
  runtimeClass, labels, taints) one that shows none (``playbooks/lost-card.yaml``,
  ``playbooks/node-onboarding.yaml``).
* A node bundle is a directory like a pod bundle without ``pod.json``: ``node.json`` is the
  one required file (``gputriage node NODE --from DIR``).
* :func:`blamed_node`: from a pod walk, the node its finding blames (``lost.*`` / ``node.*``
  findings), so the TUI can offer "triage node".
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputriage.errors import GputriageError
from gputriage.evidence.bundle import read_file
from gputriage.evidence.model import (
    BUNDLE_FILES,
    DESCRIPTIONS,
    Evidence,
    EvidenceSet,
    Key,
    Status,
)
from gputriage.evidence.sources import NODE_API_KEYS, NODE_KEYS
from gputriage.facts.model import FactSet
from gputriage.playbook.transcript import Transcript

#: Every key of a node walk.
NODE_WALK_KEYS: tuple[Key, ...] = (*NODE_API_KEYS, *NODE_KEYS)
#: Finding families that put the blame on the node rather than on the pod.
NODE_FAMILIES = ("lost.", "node.")


def node_facts(evidence: EvidenceSet) -> FactSet:
    """The facts of a node walk: built as for any snapshot (no pod, so pod groups are unknown),
    with the node as the target the summary names."""
    from dataclasses import replace

    from gputriage.facts.build import build_facts
    from gputriage.facts.model import Target

    facts = build_facts(evidence)
    return (
        replace(facts, target=Target(node=node_name(evidence))) if not facts.target.pod else facts
    )


def blamed_node(facts: FactSet | None, transcript: Transcript | None) -> str:
    """The node a pod walk's finding blames (``lost.*``/``node.*``), else ``""``."""
    if facts is None or transcript is None or not facts.target.pod:
        return ""
    if any(f.id.startswith(NODE_FAMILIES) and not f.undetermined for f in transcript.findings):
        return facts.target.node
    return ""


def node_inventory_of(evidence: EvidenceSet, facts: FactSet) -> dict[str, Any] | None:
    """The node's GPU inventory: labels and resources from the node object, holders from the
    pods on it, per-GPU state and processes from nvidia-smi when it was read."""
    from gputriage.facts.kube_objects import items, obj
    from gputriage.scan.classify import node_info, pod_info
    from gputriage.scan.inventory import holder_of, node_inventory

    info = node_info(obj(evidence.get_or_missing(Key.NODE)))
    if info is None:
        return None
    pods_ev = evidence.get_or_missing(Key.NODE_PODS)
    holders = None
    if pods_ev.ok:
        pods = [pod_info(p) for p in items(pods_ev)]
        holders = [
            h
            for p in pods
            if p is not None and p.node == info.name and (h := holder_of(p)) is not None
        ]
    gpus = facts.groups.get("gpus")
    return node_inventory(info, holders, gpus.values if gpus is not None and gpus.known else None)


# ---------------------------------------------------------------------------------------------
# Node bundles


def read_node_bundle(path: str | os.PathLike[str]) -> EvidenceSet:
    """Read the node keys of a bundle directory; ``node.json`` (or ``node.yaml``) is required."""
    root = Path(path)
    if not root.is_dir():
        raise GputriageError(
            f"{root} is not a directory. A node bundle is a directory holding "
            "at least node.json (kubectl get node N -o json).",
            title="bundle not found",
        )
    items = []
    for key in NODE_WALK_KEYS:
        found = next((root / n for n in BUNDLE_FILES[key] if (root / n).is_file()), None)
        items.append(
            read_file(key, found, source=f"{root.name}/{found.name}")
            if found
            else Evidence.missing(
                key,
                f"{BUNDLE_FILES[key][0]} is not in the bundle "
                f"({DESCRIPTIONS[key]} was not collected)",
                f"{root.name}/{BUNDLE_FILES[key][0]}",
            )
        )
    evidence = EvidenceSet(items)
    if evidence[Key.NODE].status is Status.UNAVAILABLE:
        raise GputriageError(
            f"{root} holds no node.json or node.yaml. Add the output of "
            "`kubectl get node NODE -o json > node.json`.",
            title="bundle has no node",
        )
    return evidence


def node_name(evidence: EvidenceSet) -> str:
    """The node object's name ("" when it could not be read)."""
    ev = evidence.get_or_missing(Key.NODE)
    data = ev.data if ev.ok and isinstance(ev.data, dict) else {}
    meta = data.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, dict) else ""


@dataclass
class NodeBundleSession:
    """A node bundle replayed (``gputriage node NODE --from DIR``); a Session."""

    path: Path
    node: str
    description: str = ""
    context: str = ""
    _evidence: EvidenceSet | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.description:
            self.description = f"node bundle {self.path}"

    def _load(self) -> EvidenceSet:
        if self._evidence is None:
            evidence = read_node_bundle(self.path)
            found = node_name(evidence)
            if self.node and found and found != self.node:
                raise GputriageError(
                    f"{self.path} holds node {found}, not {self.node}", title="wrong node"
                )
            self._evidence = evidence
        return self._evidence

    def keys(self) -> tuple[Key, ...]:
        return NODE_WALK_KEYS

    async def stream(self) -> AsyncIterator[Evidence]:
        evidence = await asyncio.to_thread(self._load)
        for key in NODE_WALK_KEYS:
            yield evidence.get_or_missing(key)

    def collect_all(self) -> EvidenceSet:
        return self._load()
