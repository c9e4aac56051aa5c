#!/usr/bin/env python3
"""How fast playbooks load and conditions evaluate (DESIGN 4: budgets shown by bench/).

    .venv/bin/python bench/playbooks_bench.py [--iterations N]

Prints: the cost of loading the CEL engine (its compiled module, as gputriage does); loading
(parse + compile) the shipped playbooks; building one CEL context from real facts (a pod
object through the real fact builders); evaluating a typical condition (per evaluation, the
budget is well under 1 ms); and a whole walk of the router. Numbers are medians
(per-evaluation: the mean of many) on this machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer-0", "namespace": "ml", "uid": "0b4f6e1c"},
    "spec": {
        "nodeName": "gpu-node-7",
        "containers": [
            {
                "name": f"c{i}",
                "image": "pytorch",
                "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "64Gi"}},
            }
            for i in range(8)
        ],
    },
    "status": {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": f"c{i}",
                "ready": False,
                "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "Error", "exitCode": 1}},
            }
            for i in range(8)
        ],
    },
}

CONDITION = (
    'pod.phase == "Running" && pod.containers.exists(c, c.waiting_reason == '
    '"CrashLoopBackOff" && c.last_exit_code != 137)'
)


def median_s(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20000)
    args = parser.parse_args()

    start = time.perf_counter()
    from gputriage.playbook.cel_runtime import cel_module

    cel_module()  # measured: the first load is what the loader pays once

    import_cel = time.perf_counter() - start

    from gputriage.evidence.bundle import decode
    from gputriage.evidence.model import EvidenceSet, Key
    from gputriage.facts.build import build_facts
    from gputriage.playbook.conditions import compile_condition, new_context
    from gputriage.playbook.engine import walk
    from gputriage.playbook.loader import load_playbooks

    books = load_playbooks(user_config=False)
    load = median_s(lambda: load_playbooks(user_config=False), 5)
    conditions = sum(len(s.branches) for b in books for s in b.steps.values())
    conditions += sum(len(b.routes) for b in books)
    compile_one = median_s(lambda: compile_condition(CONDITION), 50)

    evidence = EvidenceSet(
        [decode(Key.POD, json.dumps(POD, indent=2).encode(), source="bench/pod.json")]
    )
    facts = build_facts(evidence)
    variables = facts.to_context()
    context_s = median_s(lambda: new_context(variables), 20)

    condition = compile_condition(CONDITION)
    context = new_context(variables)
    assert condition.evaluate(context, frozenset()).truth.value == "true"
    n = args.iterations
    start = time.perf_counter()
    for _ in range(n):
        condition.evaluate(context, frozenset())
    per_eval = (time.perf_counter() - start) / n

    walk_s = median_s(lambda: walk(books, facts, entry="triage"), 50)
    transcript = walk(books, facts, entry="triage")

    print(f"CEL engine (compiled module)     {import_cel * 1e3:8.1f} ms (once per process)")
    print(
        f"load shipped playbooks          {load * 1e3:8.1f} ms ({len(books)} playbooks, "
        f"{conditions} conditions)"
    )
    print(f"compile one condition           {compile_one * 1e3:8.3f} ms")
    print(
        f"build CEL context from facts    {context_s * 1e3:8.3f} ms ({len(variables)} fact groups)"
    )
    print(
        f"evaluate a typical condition    {per_eval * 1e6:8.1f} us (mean of {n}; "
        f"budget: well under 1 ms)"
    )
    print(
        f"walk the router to a finding    {walk_s * 1e3:8.3f} ms "
        f"(-> {', '.join(f.id for f in transcript.findings)})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
