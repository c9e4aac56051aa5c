#!/usr/bin/env python3
"""Playbook load time, full-walk evaluation time and per-condition cost, shipped playbooks.

Facts come from each built-in demo scenario (real bundles through the real fact builders).
For every scenario: the CEL context is built once, every condition of every shipped playbook
(routes and branches) is evaluated against it, and the whole walk is run. Figures:

* load (parse, check, compile every condition) of all shipped playbooks, in a fresh
  process after loading the CEL engine (its compiled module, shown apart), with the playbook
  load cache cold (YAML parsed, cache written: a user's first run) and warm (every later run);
* per condition: the median over all conditions and the slowest one (both per evaluation);
* a full walk (routes, steps, citations, templated findings) per scenario: the slowest.

Goals (ours, so the engine stays invisible next to evidence collection): per-condition
evaluation under 1 ms, a full walk under 50 ms (the TUI re-walks on every piece of evidence
that lands), loading every shipped playbook under 2 s (done in a worker while evidence is
collected).

    .venv/bin/python bench/conditions_bench.py [--reps 200]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import Figure, at_most, info, median, python_child

SECTION = "playbooks"

LOAD_CHILD = r"""
import json, time
t0 = time.perf_counter()
from gputriage.playbook.cel_runtime import cel_module
cel_module()
t1 = time.perf_counter()
from gputriage.playbook.loader import load_playbooks
books = load_playbooks(user_config=False)
t2 = time.perf_counter()
print(json.dumps({"import_cel": t1 - t0, "load": t2 - t1, "playbooks": len(books.playbooks),
                  "problems": [str(p) for p in books.problems]}))
"""


def conditions(books: Any) -> list[tuple[str, Any]]:
    """(where, Condition) for every route and branch of every playbook."""
    out = []
    for book in books:
        out += [(f"{book.id} route {i}", r.when) for i, r in enumerate(book.routes)]
        for step in book.steps.values():
            out += [
                (f"{book.id}/{step.id} branch {i}", b.when) for i, b in enumerate(step.branches)
            ]
    return out


def scenario_facts() -> dict[str, Any]:
    from gputriage.evidence.bundle import read_bundle
    from gputriage.facts.build import build_facts
    from gputriage.scenarios import list_scenarios

    return {s.name: build_facts(read_bundle(s.path)) for s in list_scenarios()}


def measure(reps: int, runs: int = 3) -> list[Figure]:
    from gputriage.playbook.conditions import new_context
    from gputriage.playbook.engine import walk
    from gputriage.playbook.loader import load_playbooks

    def load_once(cache: str) -> dict[str, Any]:
        done = python_child(LOAD_CHILD, timeout=120, env={"XDG_CACHE_HOME": cache})
        if done.returncode != 0:
            raise RuntimeError(f"loading playbooks failed: {done.stderr[-800:]}")
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))

    with tempfile.TemporaryDirectory(prefix="gputriage-cache-") as cache:
        cold = load_once(cache)["load"]  # parses every file and writes the cache
        loads = [load_once(cache) for _ in range(runs)]
    load = median(x["load"] for x in loads)
    import_cel = median(x["import_cel"] for x in loads)

    books = load_playbooks(user_config=False)
    conds = conditions(books)
    per_condition: dict[str, float] = {}
    walks: dict[str, float] = {}
    for name, facts in scenario_facts().items():
        context = new_context(facts.to_context())
        unknown = frozenset(n for n, g in facts.groups.items() if not g.known)
        for where, cond in conds:
            start = time.perf_counter()
            for _ in range(reps):
                cond.evaluate(context, frozenset())
            per = (time.perf_counter() - start) / reps
            per_condition[where] = max(per_condition.get(where, 0.0), per)
            cond.evaluate(context, unknown)
        times = []
        for _ in range(max(5, reps // 20)):
            start = time.perf_counter()
            walk(books, facts)
            times.append(time.perf_counter() - start)
        walks[name] = median(times)
    slowest = max(per_condition, key=lambda w: per_condition[w])
    slowest_walk = max(walks, key=lambda n: walks[n])
    n_books = len(books.playbooks)
    return [
        info(SECTION, "CEL engine, compiled module only (once per process)", import_cel, "s"),
        at_most(
            SECTION,
            f"load all shipped playbooks ({n_books}, {len(conds)} conditions), cold cache",
            cold,
            "s",
            2.0,
            note="fresh process, first run: YAML parsed",
        ),
        at_most(
            SECTION,
            "load all shipped playbooks, warm cache",
            load,
            "s",
            2.0,
            note=f"fresh process, median of {runs}: rebuilt from the cache (checked before)",
        ),
        at_most(
            SECTION,
            "condition evaluation, median over all",
            1e6 * median(per_condition.values()),
            "us",
            1000,
            goal="<= 1 ms",
            note=f"{len(conds)} conditions x {len(walks)} scenarios, {reps} reps each",
        ),
        at_most(
            SECTION,
            "condition evaluation, slowest",
            1e6 * per_condition[slowest],
            "us",
            1000,
            goal="<= 1 ms",
            note=slowest,
        ),
        at_most(
            SECTION,
            f"full walk, slowest scenario ({slowest_walk})",
            1e3 * walks[slowest_walk],
            "ms",
            50,
            note="routes, steps, citations, findings",
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    for f in measure(args.reps):
        print(f"{f.name:<56} {f.shown():>12}  {f.goal:<10} {f.verdict}  {f.note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
