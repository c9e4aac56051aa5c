"""Run Python code in a child process with a memory ceiling and a wall-clock limit.

Used to prove "bounded time and memory": the code gets ``RLIMIT_AS`` (a runaway allocation
fails inside it instead of taking the machine down) and is SIGKILLed at the deadline. Its peak
RSS comes from ``os.wait4``, the kernel's own accounting of that process and the children it
reaped (gputriage's forked walk).

The code runs as the child of a small launcher, not of the test process: the kernel's peak
RSS of a process counts its life before ``exec``, when a child forked from a pytest process
that has grown to hundreds of MiB holds all of it; a child of a 10 MiB launcher does not.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

MIB = 1024 * 1024

#: ``python -c LAUNCHER REPORT MEMORY_MIB CODE ARGS...``: runs ``python -c CODE ARGS...``
#: under the limits and writes its wait status and peak RSS (KiB) to REPORT as JSON.
LAUNCHER = """
import json, os, resource, subprocess, sys
report, memory_mib, code, *args = sys.argv[1:]
cap = int(memory_mib) * 1024 * 1024
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
proc = subprocess.Popen([sys.executable, "-c", code, *args])
_, status, usage = os.wait4(proc.pid, 0)
with open(report, "w") as fh:
    json.dump({"status": status, "maxrss_kib": usage.ru_maxrss}, fh)
"""


@dataclass(frozen=True)
class Outcome:
    returncode: int  # negative: killed by that signal
    stdout: str
    stderr: str
    elapsed_s: float
    max_rss_mib: float
    timed_out: bool

    def describe(self) -> str:
        return (
            f"rc={self.returncode} timed_out={self.timed_out} elapsed={self.elapsed_s:.1f}s "
            f"maxrss={self.max_rss_mib:.0f}MiB\nstdout: {self.stdout[-2000:]}\n"
            f"stderr: {self.stderr[-3000:]}"
        )


def run_bounded(
    code: str,
    *args: str,
    timeout: float = 60.0,
    memory_mib: int = 2048,
    env: dict[str, str] | None = None,
) -> Outcome:
    """Run ``python -c code args...`` from the repo root under the limits."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory() as tmp,
    ):
        report = Path(tmp) / "report.json"
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, str(report), str(memory_mib), code, *args],
            cwd=ROOT,
            stdout=out,
            stderr=err,
            start_new_session=True,  # the deadline kills the launcher and the code together
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            with contextlib.suppress(ProcessLookupError):  # it finished just now
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4 above
        elapsed = time.monotonic() - started
        returncode, max_rss_kib = proc.returncode, usage.ru_maxrss
        if report.exists():  # the code ran to its end (or died) under the launcher
            ran = json.loads(report.read_text())
            returncode = os.waitstatus_to_exitcode(ran["status"])
            max_rss_kib = ran["maxrss_kib"]
        out.seek(0)
        err.seek(0)
        return Outcome(
            returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            elapsed,
            max_rss_kib / 1024,
            killed.is_set(),
        )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
