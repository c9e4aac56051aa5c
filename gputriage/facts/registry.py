"""The fact groups, listed in one dict, and the declared schema of every group.

:func:`builders` names every group's module explicitly, in build order (as yamllint lists its
rules): a reader or a tool follows the import; the import itself runs on first use, so modules
that only need the schema names (``gputriage --help``) do not load the parsers. Each module
exposes ``SPEC: GroupSpec`` and ``build(evidence, target, earlier) -> FactGroup``. Order
matters: a builder may read groups built before it through ``earlier``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Protocol

from gputriage.evidence.model import EvidenceSet
from gputriage.facts.model import FactGroup, GroupSpec, Target


class GroupBuilder(Protocol):
    """What a fact-group module provides (the module itself satisfies this)."""

    SPEC: GroupSpec

    def build(
        self, evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]
    ) -> FactGroup: ...


@cache
def builders() -> dict[str, GroupBuilder]:
    """Every fact group by name, in the order they are built (earlier groups first)."""
    from gputriage.facts import (
        candidates,
        cluster,
        container_log,
        device_plugin,
        dra,
        events,
        gpu_assignment,
        gpu_operator,
        gpu_perf,
        gpu_topology,
        gpus,
        host,
        job,
        kernel,
        kubelet,
        metrics,
        node,
        owner_events,
        pod,
        quota,
        scheduler,
    )

    return {
        "pod": pod,
        "events": events,
        "owner_events": owner_events,
        "scheduler": scheduler,
        "node": node,
        "cluster": cluster,
        "quota": quota,
        "dra": dra,
        "kernel": kernel,
        "gpus": gpus,
        "host": host,
        "device_plugin": device_plugin,
        "kubelet": kubelet,
        "container_log": container_log,
        "candidates": candidates,
        "gpu_assignment": gpu_assignment,
        "gpu_operator": gpu_operator,
        "job": job,
        "gpu_perf": gpu_perf,
        "metrics": metrics,
        "gpu_topology": gpu_topology,
    }


def modules() -> tuple[GroupBuilder, ...]:
    """The group modules in build order."""
    return tuple(builders().values())


@cache
def specs() -> dict[str, GroupSpec]:
    """Every declared fact group by name."""
    return {name: b.SPEC for name, b in builders().items()}


def known_paths() -> set[str]:
    """``group.field`` for every declared field, plus ``group.known`` and ``group.reason``."""
    paths: set[str] = set()
    for spec in specs().values():
        paths.update({f"{spec.name}.known", f"{spec.name}.reason"})
        paths.update(f"{spec.name}.{f}" for f in spec.fields)
    return paths
