#!/usr/bin/env python3
"""How fast gputriage starts: ``--help``, and the live TUI's first paint and pod facts.

* ``gputriage --help``: wall time of the installed console script (median of N runs);
* the live TUI, in a fresh interpreter each run (cold imports), against the test API and node
  of :mod:`bench._lab`, with Textual's headless driver at 120x40. Marks, in seconds from
  process launch: ``api`` (the kubeconfig is loaded and the API has answered the pod GET,
  which gputriage does before showing anything), ``paint`` (first frame drawn) and ``pod``
  (the header widget holds the pod's facts; the next frame draws them). DESIGN 4's budget
  is ``pod - api``: pod facts on screen under 0.5 s after the API answers.

    .venv/bin/python bench/startup_bench.py [--runs 5] [--latency-ms 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._lab import Lab
from bench._util import Figure, at_most, info, median, python_child, run_child

SECTION = "startup"

CHILD = r"""
import asyncio, json, sys, tempfile, time
t0 = float(sys.argv[1])
from pathlib import Path
from gputriage.cli import build_parser
from gputriage.commands.options import triage_options_from_args
from gputriage.pipeline import pod_triage
from gputriage.tui.app import TriageApp
from gputriage.tui.widgets.target_header import TargetHeader

async def main():
    marks = {"imported": time.time() - t0}
    args = build_parser().parse_args(sys.argv[2:])
    session = pod_triage(args.pod, triage_options_from_args(args)).open_session()
    marks["api"] = time.time() - t0
    tmp = Path(tempfile.mkdtemp())
    app = TriageApp(session, notes_path=tmp / "n.json", export_dir=tmp)
    async with app.run_test(size=(120, 40)) as pilot:
        marks["paint"] = time.time() - t0
        deadline = time.time() + 60
        header = app.triage.query_one(TargetHeader)
        while "settled" not in marks and time.time() < deadline:
            # The header widget holds the pod: the next frame (1/60 s) draws it. (Waiting
            # with pilot.pause() would wait for the app to go idle: every source in.)
            if "pod" not in marks and args.pod in str(header.content):
                marks["pod"] = time.time() - t0
            if "pod" in marks and app.settled:
                marks["settled"] = time.time() - t0
            await asyncio.sleep(0.005)
    session.close()
    print(json.dumps(marks))

asyncio.run(main())
"""


def help_wall(lab: Lab, runs: int) -> float:
    times = []
    for _ in range(runs):
        done = run_child([*lab.gputriage(), "--help"], env=lab.env(), timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"gputriage --help failed: {done.stderr[-500:]}")
        times.append(done.wall_s)
    return median(times)


def tui_marks(lab: Lab, runs: int) -> dict[str, float]:
    results = []
    for _ in range(runs):
        done = python_child(
            CHILD, repr(time.time()), *lab.triage_args(), env=lab.env(), timeout=120
        )
        if done.returncode != 0:
            raise RuntimeError(f"the live TUI run failed: {done.stderr[-1500:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    keys = [k for k in results[0] if all(k in r for r in results)]
    return {k: median(r[k] for r in results) for k in keys}


def measure(lab: Lab, runs: int) -> list[Figure]:
    figures = [
        at_most(
            SECTION,
            "gputriage --help (wall)",
            help_wall(lab, runs),
            "s",
            0.3,
            note=f"median of {runs}",
        )
    ]
    marks = tui_marks(lab, runs)
    note = f"median of {runs} cold starts, headless 120x40, live API + SSH node"
    figures += [
        info(SECTION, "TUI: API answered (from launch)", marks["api"], "s", note),
        info(SECTION, "TUI: first paint (from launch)", marks["paint"], "s", note),
        info(SECTION, "TUI: pod facts on screen (from launch)", marks["pod"], "s", note),
        at_most(
            SECTION,
            "TUI: pod facts on screen after the API answered",
            marks["pod"] - marks["api"],
            "s",
            0.5,
            note=note,
        ),
    ]
    if "settled" in marks:
        figures.append(
            info(
                SECTION,
                "TUI: every source in and walked (from launch)",
                marks["settled"],
                "s",
                note,
            )
        )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args = parser.parse_args()
    with Lab(args.latency_ms / 1000) as lab:
        for f in measure(lab, args.runs):
            print(f"{f.name:<52} {f.shown():>12}  {f.goal:<12} {f.verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
