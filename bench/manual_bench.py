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
Goal: gputriage at least 3x faster, as the median of the per-round ratios of ``--runs``
interleaved rounds (each round runs both sides, alternating which goes first, so both see the
same machine load; the load average is printed). gputriage is the installed package
(:mod:`bench._install`: a wheel in its own venv, bytecode present), unless ``--source-tree``.

Also a fresh headless bundle replay (``--from`` a built-in scenario), goal <= 0.35 s, after one
first run that fills the playbook cache.

    .venv/bin/python bench/manual_bench.py [--runs 5] [--latency-ms 20] [--source-tree]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._install import Installed
from bench._lab import Lab
from bench._util import ROOT, Figure, at_least, at_most, info, median, run_child

SECTION = "vs manual"
#: The bundle the replay figure reads (a built-in scenario: JSON and text files).
SCENARIO = ROOT / "gputriage" / "scenarios" / "lost-xid79"
#: A fresh headless replay, end to end (issue 16).
REPLAY_GOAL_S = 0.35
#: --report exit codes that mean "ran fine": finding, undetermined, waiting for an answer.
OK_EXITS = (0, 3, 4)


def gputriage_once(lab: Lab) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh ``gputriage <pod> --report json``."""
    out = lab.dir / "report.json"
    out.unlink(missing_ok=True)
    done = run_child(
        [*lab.gputriage(), *lab.triage_args("--report", "json", "-o", str(out))],
        env=lab.env(),
        timeout=120,
        cwd=lab.dir,
    )
    if done.returncode not in OK_EXITS or not out.exists():
        raise RuntimeError(f"gputriage --report failed ({done.returncode}): {done.stderr[-1000:]}")
    return done.wall_s, done.cpu_s


def manual_once(lab: Lab) -> tuple[float, dict[str, float], float]:
    """Wall seconds of the chain, of each command, and the chain's CPU seconds."""
    shutil.rmtree(lab.kubecache, ignore_errors=True)
    lab.kubecache.mkdir()
    steps: dict[str, float] = {}
    cpu = 0.0
    for argv in lab.manual_chain():
        done = run_child(argv, env=lab.env(), timeout=120, cwd=lab.dir)
        label = " ".join(a for a in argv if not a.startswith(("/", "--kubeconfig", "-F")))
        if done.returncode != 0 or not done.stdout.strip():
            raise RuntimeError(f"{label} failed ({done.returncode}): {done.stderr[-500:]}")
        steps[label] = done.wall_s
        cpu += done.cpu_s
    return sum(steps.values()), steps, cpu


def replay_once(lab: Lab) -> tuple[float, float]:
    """A fresh ``gputriage trainer-0 --from BUNDLE --report json`` (no cluster, no node)."""
    out = lab.dir / "replay.json"
    out.unlink(missing_ok=True)
    meta = json.loads((SCENARIO / "pod.json").read_text())["metadata"]
    done = run_child(
        [
            *lab.gputriage(),
            "triage",
            meta["name"],
            "-n",
            meta["namespace"],
            "--from",
            str(SCENARIO),
            "--report",
            "json",
            "-o",
            str(out),
        ],
        env=lab.env(),
        timeout=120,
        cwd=lab.dir,
    )
    if done.returncode not in OK_EXITS or not out.exists():
        raise RuntimeError(f"gputriage --from failed ({done.returncode}): {done.stderr[-1000:]}")
    return done.wall_s, done.cpu_s


@dataclass
class Rounds:
    """Interleaved rounds: each round runs both sides, alternating which goes first."""

    ours: list[float] = field(default_factory=list)
    manual: list[float] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    ours_cpu: list[float] = field(default_factory=list)
    manual_cpu: list[float] = field(default_factory=list)

    @property
    def ratios(self) -> list[float]:
        return [m / o for o, m in zip(self.ours, self.manual, strict=True)]


def rounds(lab: Lab, runs: int) -> Rounds:
    gputriage_once(lab)  # warm the page cache and the playbook cache, for both sides
    manual_once(lab)
    result = Rounds()
    for i in range(runs):
        if i % 2:
            manual, _, manual_cpu = manual_once(lab)
            ours, ours_cpu = gputriage_once(lab)
        else:
            ours, ours_cpu = gputriage_once(lab)
            manual, _, manual_cpu = manual_once(lab)
        result.ours.append(ours)
        result.manual.append(manual)
        result.ours_cpu.append(ours_cpu)
        result.manual_cpu.append(manual_cpu)
        result.load.append(os.getloadavg()[0])
    return result


def measure(lab: Lab, runs: int) -> list[Figure]:
    r = rounds(lab, runs)
    what = "installed wheel" if lab.installed else "source tree"
    note = (
        f"median of {runs} interleaved rounds ({what}); manual = 3 kubectl + 3 ssh "
        "commands, run one after another"
    )
    load = (
        f"1-min load average during the rounds: {min(r.load):.2f}-{max(r.load):.2f} "
        f"on {os.cpu_count()} cores"
    )
    return [
        info(
            SECTION,
            "gputriage <pod> --report json (fresh process)",
            median(r.ours),
            "s",
            f"21 evidence kinds, facts, playbooks, report; rounds: "
            f"{', '.join(f'{x:.2f}' for x in r.ours)}",
        ),
        info(
            SECTION,
            "manual chain: kubectl x3 + ssh x3, sequential",
            median(r.manual),
            "s",
            f"rounds: {', '.join(f'{x:.2f}' for x in r.manual)}",
        ),
        at_least(
            SECTION,
            "manual chain / gputriage",
            median(r.ratios),
            "x",
            3.0,
            goal=">= 3x",
            note=f"{note}; per round: {', '.join(f'{x:.2f}' for x in r.ratios)}",
        ),
        info(
            SECTION,
            "gputriage CPU time (user + system)",
            median(r.ours_cpu),
            "s",
            "median; load-independent-ish: what the process itself computed",
        ),
        info(
            SECTION,
            "manual chain CPU time (user + system, 6 processes)",
            median(r.manual_cpu),
            "s",
            "median",
        ),
        info(
            SECTION,
            "machine load during the rounds (1-min average, max)",
            round(max(r.load), 2),
            "",
            load,
        ),
    ]


def measure_replay(lab: Lab, runs: int) -> list[Figure]:
    cache = lab.dir / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    cold, _ = replay_once(lab)  # fills the playbook cache, as a user's first run does
    warm = [replay_once(lab) for _ in range(runs)]
    what = "installed wheel" if lab.installed else "source tree"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        info("replay", "replay, first run (cold playbook cache)", cold, "s", what),
        at_most(
            "replay",
            "gputriage POD --from BUNDLE --report json (fresh process)",
            median(w for w, _ in warm),
            "s",
            REPLAY_GOAL_S,
            note=f"median of {runs}; {what}; scenario {SCENARIO.name}; load average after: {load}",
        ),
        info(
            "replay",
            "replay CPU time (user + system)",
            median(c for _, c in warm),
            "s",
            f"median of {runs}",
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument(
        "--source-tree",
        action="store_true",
        help="run the checkout's gputriage instead of an installed wheel",
    )
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        installed = None if args.source_tree else stack.enter_context(Installed()).gputriage
        lab = stack.enter_context(Lab(args.latency_ms / 1000, installed))
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for f in [*measure(lab, args.runs), *measure_replay(lab, args.runs)]:
            print(f"{f.name:<58} {f.shown():>10}  {f.goal:<10} {f.verdict}  {f.note}")
        _, steps, _ = manual_once(lab)
        for label, seconds in steps.items():
            print(f"  {label:<50} {seconds:8.3f} s")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
