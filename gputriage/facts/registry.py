"""The ordered list of fact-group modules and the declared schema of every group.

Each module named in :data:`GROUP_MODULES` exposes ``SPEC: GroupSpec`` and
``build(evidence, target, earlier) -> FactGroup``. Order matters: a builder may read groups
built before it through ``earlier``.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType

from gputriage.facts.model import GroupSpec

GROUP_MODULES: tuple[str, ...] = (
    "gputriage.facts.pod",
    "gputriage.facts.events",
    "gputriage.facts.owner_events",
    "gputriage.facts.scheduler",
    "gputriage.facts.node",
    "gputriage.facts.cluster",
    "gputriage.facts.quota",
    "gputriage.facts.dra",
    "gputriage.facts.kernel",
    "gputriage.facts.gpus",
    "gputriage.facts.host",
    "gputriage.facts.device_plugin",
    "gputriage.facts.kubelet",
    "gputriage.facts.container_log",
    "gputriage.facts.candidates",
    "gputriage.facts.gpu_assignment",
    "gputriage.facts.gpu_operator",
    "gputriage.facts.job",
)


@cache
def modules() -> tuple[ModuleType, ...]:
    found = []
    for name in GROUP_MODULES:
        try:
            found.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a real import error inside the module: surface it
                raise
    return tuple(found)


@cache
def specs() -> dict[str, GroupSpec]:
    """Every declared fact group by name."""
    return {m.SPEC.name: m.SPEC for m in modules()}


def known_paths() -> set[str]:
    """``group.field`` for every declared field, plus ``group.known`` and ``group.reason``."""
    paths: set[str] = set()
    for spec in specs().values():
        paths.update({f"{spec.name}.known", f"{spec.name}.reason"})
        paths.update(f"{spec.name}.{f}" for f in spec.fields)
    return paths
