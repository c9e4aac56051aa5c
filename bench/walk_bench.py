#!/usr/bin/env python3
"""A full walk with every source at once, against the slowest single source alone.

Against :mod:`bench._lab` (the test API and a real SSH node, each answering after the
injected latency): the time from "resolve the pod" to "verdict" with every evidence key
(cluster keys over the API, node keys over SSH) collected concurrently, facts built and the
shipped playbooks walked; and, for each key, the time to collect that key alone with only
what it needs (the pod; for node keys also the node object and a fresh SSH connection).
DESIGN 4's budget: the full walk takes no more than 1.2x the slowest single source.

    .venv/bin/python bench/walk_bench.py [--runs 3] [--latency-ms 20]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._lab import Lab
from bench._util import Figure, at_most, info, median

SECTION = "walk"


class OnlyKeys:
    """A cluster source narrowed to some of its keys (the broker asks it which)."""

    def __init__(self, source: Any, keys: tuple[Any, ...]) -> None:
        self._source = source
        self._keys = keys

    def keys(self) -> tuple[Any, ...]:
        return self._keys

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)


def _session(lab: Lab) -> Any:
    from gputriage.cli import build_parser
    from gputriage.commands.options import triage_options_from_args
    from gputriage.pipeline import pod_triage

    args = build_parser().parse_args(lab.triage_args())
    return pod_triage(args.pod, triage_options_from_args(args)).open_session()


def full_walk(lab: Lab, books: Any) -> float:
    from gputriage.facts.build import build_facts
    from gputriage.playbook.engine import walk

    start = time.perf_counter()
    session = _session(lab)
    try:
        evidence = session.collect_all()
        walk(books, build_facts(evidence))
    finally:
        session.close()
    return time.perf_counter() - start


def single_key(lab: Lab, key: Any) -> float | None:
    from gputriage.evidence.broker import Broker
    from gputriage.evidence.model import Key, Status
    from gputriage.evidence.sources import NODE_KEYS

    start = time.perf_counter()
    session = _session(lab)
    try:
        broker = session.broker
        if key in NODE_KEYS:
            narrowed = Broker(
                OnlyKeys(broker.cluster, (Key.NODE,)),
                broker.node_sources,
                timeout=broker.timeout,
                node_timeout=broker.node_timeout,
                node_keys=(key,),
            )
        else:
            narrowed = Broker(
                OnlyKeys(broker.cluster, (key,)), (), timeout=broker.timeout, node_keys=()
            )
        evidence = asyncio.run(narrowed.gather())
        if evidence[key].status is Status.UNAVAILABLE:
            return None  # does not apply to this target (job pods of a plain pod...)
        if not evidence[key].ok:
            raise RuntimeError(
                f"{key.value} alone: {evidence[key].status.value}: {evidence[key].detail}"
            )
    finally:
        session.close()
    return time.perf_counter() - start


def measure(lab: Lab, runs: int, progress: Callable[[str], None] = lambda s: None) -> list[Figure]:
    from gputriage.evidence.model import Key
    from gputriage.evidence.sources import NODE_KEYS
    from gputriage.playbook.loader import load_playbooks

    books = load_playbooks(user_config=False)
    full_walk(lab, books)  # warm imports (kubernetes, paramiko, cel) out of the figures
    full = median(full_walk(lab, books) for _ in range(runs))
    progress("full walk measured")
    from gputriage.evidence.kube import CLUSTER_KEYS

    singles: dict[Key, float] = {}
    for key in (*CLUSTER_KEYS, *NODE_KEYS):
        times = [single_key(lab, key) for _ in range(runs)]
        if all(t is not None for t in times):
            singles[key] = median(t for t in times if t is not None)
    slowest = max(singles, key=lambda k: singles[k])
    note = (
        f"median of {runs}; {len(singles) + 1} keys; slowest alone: {slowest.value} "
        f"({singles[slowest]:.3f} s)"
    )
    return [
        info(SECTION, "full walk, every source (pod to verdict)", full, "s", note),
        info(
            SECTION,
            f"slowest single source alone ({slowest.value})",
            singles[slowest],
            "s",
            f"median of {runs}, fresh connections",
        ),
        at_most(
            SECTION,
            "full walk / slowest single source",
            full / singles[slowest],
            "x",
            1.2,
            goal="<= 1.2x",
            note=note,
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args = parser.parse_args()
    with Lab(args.latency_ms / 1000) as lab:
        for f in measure(lab, args.runs):
            print(f"{f.name:<52} {f.shown():>12}  {f.goal:<10} {f.verdict}  {f.note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
