#!/usr/bin/env python3
"""Time the TUI's first frame against a hello-world Textual app, in a real terminal (tmux).

Each round launches, in a fresh tmux pane of the same size, (a) a hello-world Textual app and
(b) ``gputriage POD --from BUNDLE``, and polls the pane every 5 ms until:

* hello world: its text is on screen (its first frame);
* gputriage first frame: the walk panel's border is on screen;
* gputriage pod header: ``namespace/pod`` is on screen;
* gputriage walk: ``Step 1 of`` is on screen (evidence read, playbooks loaded, walked).

Rounds are interleaved (hello, gputriage, hello, ...) and medians are printed with the load
average, so a busy machine shows in the figures. Times are from the ``tmux new-session`` call,
so both include the interpreter start and the same tmux overhead.

    python scripts/tui_first_paint.py [--rounds 7] [--bundle DIR --pod NS/POD]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HELLO = """\
from textual.app import App
from textual.widgets import Static
class Hello(App):
    def compose(self):
        yield Static("Hello, first frame")
Hello().run()
"""


def tmux(sock: str, *args: str) -> str:
    return subprocess.run(
        ["tmux", "-L", sock, *args], check=True, capture_output=True, text=True, timeout=10
    ).stdout


def time_markers(
    sock: str, command: str, markers: list[str], size: tuple[int, int], timeout: float = 30.0
) -> list[float]:
    """Seconds from launch until each marker is first on screen."""
    found: dict[str, float] = {}
    start = time.perf_counter()
    tmux(sock, "new-session", "-d", "-x", str(size[0]), "-y", str(size[1]), "-s", "p", command)
    try:
        while len(found) < len(markers) and time.perf_counter() - start < timeout:
            screen = tmux(sock, "capture-pane", "-p", "-t", "p")
            now = time.perf_counter() - start
            for m in markers:
                if m not in found and m in screen:
                    found[m] = now
            time.sleep(0.005)
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, timeout=10)
    missing = [m for m in markers if m not in found]
    if missing:
        raise SystemExit(f"never saw {missing} on screen from: {command}")
    return [found[m] for m in markers]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--bundle", help="bundle to replay (default: a demo scenario)")
    parser.add_argument("--pod", default="", help="NS/POD the header shows for --bundle")
    parser.add_argument("--size", default="120x40")
    args = parser.parse_args()
    w, h = (int(x) for x in args.size.split("x"))
    python = sys.executable
    env = f"PYTHONPATH={shlex.quote(str(ROOT))} "
    with tempfile.TemporaryDirectory() as tmp:
        hello = Path(tmp) / "hello.py"
        hello.write_text(HELLO)
        if args.bundle:
            bundle, pod = Path(args.bundle), args.pod
        else:
            from gputriage.scenarios import scenario_path

            bundle = scenario_path("pending-insufficient-gpu")
            pod = "ml-training/llm-finetune-7d9c5b8f6d-x2x4q"
        ns, name = pod.split("/")
        hello_cmd = f"unset COLUMNS LINES; {python} {shlex.quote(str(hello))}"
        triage_cmd = (
            f"unset COLUMNS LINES; cd {shlex.quote(tmp)} && {env}{python} -m gputriage "
            f"{shlex.quote(name)} -n {shlex.quote(ns)} --from {shlex.quote(str(bundle))}"
        )
        sock = f"first-paint-{os.getpid()}"
        hellos: list[float] = []
        frames: list[float] = []
        headers: list[float] = []
        walks: list[float] = []
        for i in range(args.rounds):  # a fresh tmux server each time, as a new terminal
            hellos += time_markers(f"{sock}-h{i}", hello_cmd, ["Hello, first frame"], (w, h))
            frame, header, walk = time_markers(
                f"{sock}-g{i}", triage_cmd, ["─ Walk ─", pod, "Step 1 of"], (w, h)
            )
            frames.append(frame)
            headers.append(header)
            walks.append(walk)
    med = statistics.median
    load = os.getloadavg()
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f}; {args.rounds} interleaved rounds in tmux at {w}x{h}; medians"
    )
    print(f"hello-world Textual first frame   {med(hellos):.3f} s")
    print(
        f"gputriage first frame             {med(frames):.3f} s  "
        f"({med(frames) / med(hellos):.2f}x hello world)"
    )
    print(f"gputriage pod header on screen    {med(headers):.3f} s")
    print(f"gputriage first step walked       {med(walks):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
