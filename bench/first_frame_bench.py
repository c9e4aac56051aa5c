#!/usr/bin/env python3
"""The TUI's first frame against a hello-world Textual app's, in a real terminal (tmux).

Each round launches, in a fresh tmux server with a pane of the same size, (a) a hello-world
Textual app and (b) ``gputriage POD --from BUNDLE`` (a demo scenario), both with the same
Python (the installed gputriage's venv when one is given), and polls the pane every 5 ms:

* hello world: its text is on screen (its first frame);
* gputriage first frame: the walk panel's border is on screen;
* gputriage pod header: ``namespace/pod`` is on screen;
* gputriage walked: ``Step 1 of`` is on screen (evidence read, playbooks loaded, walked).

Rounds are interleaved (hello, gputriage, hello, ...); medians are reported. Times are from
the ``tmux new-session`` call, so both include the interpreter start and the same tmux cost.
Goal (issue 16): gputriage's first frame within 1.5x the hello-world app's.

    .venv/bin/python bench/first_frame_bench.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import PYTHON, ROOT, Figure, at_most, info, median

SECTION = "startup"
GOAL_RATIO = 1.5
SCENARIO = "pending-insufficient-gpu"
POD = "ml-training/llm-finetune-7d9c5b8f6d-x2x4q"
SIZE = (120, 40)

HELLO = """\
from textual.app import App
from textual.widgets import Static
class Hello(App):
    def compose(self):
        yield Static("Hello, first frame")
Hello().run()
"""


def _tmux(sock: str, *args: str) -> str:
    return subprocess.run(
        ["tmux", "-L", sock, *args], check=True, capture_output=True, text=True, timeout=10
    ).stdout


def time_markers(sock: str, command: str, markers: list[str], timeout: float = 30.0) -> list[float]:
    """Seconds from launch until each marker is first on screen."""
    found: dict[str, float] = {}
    start = time.perf_counter()
    _tmux(sock, "new-session", "-d", "-x", str(SIZE[0]), "-y", str(SIZE[1]), "-s", "p", command)
    try:
        while len(found) < len(markers) and time.perf_counter() - start < timeout:
            screen = _tmux(sock, "capture-pane", "-p", "-t", "p")
            now = time.perf_counter() - start
            for m in markers:
                if m not in found and m in screen:
                    found[m] = now
            time.sleep(0.005)
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, timeout=10)
    missing = [m for m in markers if m not in found]
    if missing:
        raise RuntimeError(f"never saw {missing} on screen from: {command}")
    return [found[m] for m in markers]


def measure(rounds: int, installed: Path | None = None) -> list[Figure]:
    """Hello world vs gputriage in tmux; ``installed``: the console script of an installed
    gputriage (its venv's Python runs the hello-world app too), else the source tree."""
    if shutil.which("tmux") is None:
        raise RuntimeError("tmux is not installed")
    python = str(installed.with_name("python")) if installed else PYTHON
    gputriage = shlex.quote(str(installed)) if installed else f"{PYTHON} -m gputriage"
    env = "" if installed else f"PYTHONPATH={shlex.quote(str(ROOT))} "
    bundle = ROOT / "gputriage" / "scenarios" / SCENARIO
    ns, name = POD.split("/")
    hellos: list[float] = []
    frames: list[float] = []
    headers: list[float] = []
    walks: list[float] = []
    with tempfile.TemporaryDirectory(prefix="gputriage-first-frame-") as tmp:
        hello = Path(tmp) / "hello.py"
        hello.write_text(HELLO)
        # A home of its own: the playbook cache starts cold, then is warm as on a user's
        # machine (the first, untimed round fills it).
        home = f"HOME={shlex.quote(tmp)} XDG_CACHE_HOME={shlex.quote(tmp)}/cache "
        hello_cmd = f"unset COLUMNS LINES; {home}{python} {shlex.quote(str(hello))}"
        triage_cmd = (
            f"unset COLUMNS LINES; cd {shlex.quote(tmp)} && {home}{env}{gputriage} "
            f"{shlex.quote(name)} -n {shlex.quote(ns)} --from {shlex.quote(str(bundle))}"
        )
        sock = f"gputriage-first-frame-{os.getpid()}"
        time_markers(f"{sock}-warm", triage_cmd, ["Step 1 of"])
        time_markers(f"{sock}-warm-h", hello_cmd, ["Hello, first frame"])
        for i in range(rounds):  # a fresh tmux server each time, as a new terminal
            hellos += time_markers(f"{sock}-h{i}", hello_cmd, ["Hello, first frame"])
            frame, header, walk = time_markers(
                f"{sock}-g{i}", triage_cmd, ["─ Walk ─", POD, "Step 1 of"]
            )
            frames.append(frame)
            headers.append(header)
            walks.append(walk)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    ratios = [f / h for f, h in zip(frames, hellos, strict=True)]
    what = "installed wheel" if installed else "source tree"
    note = (
        f"median of {rounds} interleaved rounds in tmux at {SIZE[0]}x{SIZE[1]}, from launch; "
        f"{what}; scenario {SCENARIO}; load average after: {load}"
    )
    return [
        info(
            SECTION, "TUI in tmux: hello-world Textual app, first frame", median(hellos), "s", note
        ),
        info(SECTION, "TUI in tmux: gputriage first frame", median(frames), "s", note),
        at_most(
            SECTION,
            "TUI in tmux: gputriage first frame / hello world's",
            round(median(frames) / median(hellos), 2),
            "x",
            GOAL_RATIO,
            goal=f"<= {GOAL_RATIO}x",
            note=f"per round: {', '.join(f'{r:.2f}' for r in ratios)}",
        ),
        info(SECTION, "TUI in tmux: gputriage pod header on screen", median(headers), "s", note),
        info(SECTION, "TUI in tmux: gputriage first step walked", median(walks), "s", note),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    for f in measure(args.rounds):
        print(f"{f.name:<56} {f.shown():>10}  {f.goal:<8} {f.verdict}  {f.note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
