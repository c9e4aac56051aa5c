#!/usr/bin/env python3
"""How fast the TUI paints, shows the pod, and reaches a verdict on each demo scenario.

Each scenario runs in a fresh interpreter (cold imports, like a real ``gputriage demo``), with
the headless driver at 120x40 and the shipped playbooks. Times are from process launch:

* ``paint``: the app is mounted and its first frame drawn (budget: 0.5 s, DESIGN 4);
* ``pod``: the header shows the pod, its facts built from the first evidence;
* ``verdict``: the engine's walk concluded, or stopped at a question for the SRE (playbooks
  compiled in a worker meanwhile).

Prints figures; it is not a test and asserts nothing.

    .venv/bin/python bench/tui_startup.py [--runs 3] [SCENARIO...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import asyncio, json, sys, tempfile, time
t0 = float(sys.argv[1])
from pathlib import Path
from gputriage.tui.app import TriageApp
from gputriage.session import BundleSession
from gputriage.scenarios import scenario_path

marks = {"imported": time.time() - t0}

class Timed(TriageApp):
    CSS_PATH = str(Path(sys.modules[TriageApp.__module__].__file__).with_name("app.tcss"))

    # The first frame handed to the terminal driver with the triage screen on it.
    def _display(self, screen, renderable):
        if "paint" not in marks and screen is self.triage and renderable is not None:
            marks["paint"] = time.time() - t0
        super()._display(screen, renderable)

async def main():
    tmp = Path(tempfile.mkdtemp())
    app = Timed(BundleSession(scenario_path(sys.argv[2])), notes_path=tmp / "n.json",
                export_dir=tmp)
    async with app.run_test(size=(120, 40)) as pilot:
        while "verdict" not in marks:
            if "pod" not in marks and app.facts is not None and app.facts.target.pod:
                marks["pod"] = time.time() - t0
            t = app.transcript
            if t is not None and (t.findings or t.question is not None):
                marks["verdict"] = time.time() - t0
            await asyncio.sleep(0.002)
    print(json.dumps(marks))

asyncio.run(main())
"""


def run_once(scenario: str) -> dict[str, float]:
    start = time.time()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, repr(start), scenario],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from gputriage.scenarios import list_scenarios

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    names = args.scenarios or [s.name for s in list_scenarios()]
    print(
        f"{'scenario':<28} {'imported':>9} {'paint':>7} {'pod':>7} {'verdict':>8}  "
        f"(median of {args.runs} runs, seconds from process launch)"
    )
    for name in names:
        runs = [run_once(name) for _ in range(args.runs)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(
            f"{name:<28} {med['imported']:>9.3f} {med['paint']:>7.3f} {med['pod']:>7.3f} "
            f"{med['verdict']:>8.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
