#!/usr/bin/env python3
"""gputriage's whole triage against the manual chain an SRE runs today, same servers.

Both run against :mod:`bench._lab` with the same injected latency:

* ``gputriage trainer-0 -n ml --report json`` (a fresh process: imports, API, SSH, facts,
  playbooks, report), which reads 21 kinds of evidence concurrently;
* one after the other, with the real clients: ``kubectl describe pod``, ``kubectl get node
  -o json``, ``kubectl logs``, then ``ssh node journalctl -u kubelet``, ``ssh node dmesg -T``
  and ``ssh node nvidia-smi -q -x`` (kubectl with a fresh KUBECACHEDIR per run, as on a
  laptop whose discovery cache is cold; OpenSSH with ``ssh -F`` on the same ssh_config).

Only machine time is counted: the manual chain's reading, typing and correlating are not.
Goal: gputriage at least 3x faster.

    .venv/bin/python bench/manual_bench.py [--runs 5] [--latency-ms 20]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._lab import Lab
from bench._util import Figure, at_least, info, median, run_child

SECTION = "vs manual"
#: --report exit codes that mean "ran fine": finding, undetermined, waiting for an answer.
OK_EXITS = (0, 3, 4)


def gputriage_once(lab: Lab) -> float:
    out = lab.dir / "report.json"
    done = run_child([*lab.gputriage(), *lab.triage_args("--report", "json", "-o", str(out))],
                     env=lab.env(), timeout=120)
    if done.returncode not in OK_EXITS or not out.exists():
        raise RuntimeError(f"gputriage --report failed ({done.returncode}): "
                           f"{done.stderr[-1000:]}")
    return done.wall_s


def manual_once(lab: Lab) -> tuple[float, dict[str, float]]:
    shutil.rmtree(lab.kubecache, ignore_errors=True)
    lab.kubecache.mkdir()
    steps: dict[str, float] = {}
    for argv in lab.manual_chain():
        done = run_child(argv, env=lab.env(), timeout=120)
        label = " ".join(a for a in argv if not a.startswith(("/", "--kubeconfig", "-F")))
        if done.returncode != 0 or not done.stdout.strip():
            raise RuntimeError(f"{label} failed ({done.returncode}): {done.stderr[-500:]}")
        steps[label] = done.wall_s
    return sum(steps.values()), steps


def measure(lab: Lab, runs: int) -> list[Figure]:
    gputriage_once(lab)  # warm the page cache for both sides
    manual_once(lab)
    ours = median(gputriage_once(lab) for _ in range(runs))
    manual_runs = [manual_once(lab) for _ in range(runs)]
    manual = median(total for total, _ in manual_runs)
    note = f"median of {runs}; manual = 3 kubectl + 3 ssh commands, run one after another"
    return [
        info(SECTION, "gputriage <pod> --report json (fresh process)", ours, "s",
             "21 evidence kinds, facts, playbooks, report"),
        info(SECTION, "manual chain: kubectl x3 + ssh x3, sequential", manual, "s", note),
        at_least(SECTION, "manual chain / gputriage", manual / ours, "x", 3.0, goal=">= 3x",
                 note=note),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args = parser.parse_args()
    with Lab(args.latency_ms / 1000) as lab:
        for f in measure(lab, args.runs):
            print(f"{f.name:<52} {f.shown():>12}  {f.goal:<10} {f.verdict}  {f.note}")
        _, steps = manual_once(lab)
        for label, seconds in steps.items():
            print(f"  {label:<50} {seconds:8.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
