"""Run Python code in a child process with a memory ceiling and a wall-clock limit.

Used to prove "bounded time and memory": the child gets ``RLIMIT_AS`` (a runaway allocation
fails inside it instead of taking the machine down) and is SIGKILLed at the deadline. Its peak
RSS comes from ``os.wait4``, the kernel's own accounting of that one child.
"""

from __future__ import annotations

import contextlib
import os
import resource
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

    def limit() -> None:
        cap = memory_mib * MIB
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            cwd=ROOT,
            stdout=out,
            stderr=err,
            preexec_fn=limit,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            with contextlib.suppress(ProcessLookupError):  # it finished just now
                os.kill(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4 above
        elapsed = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        return Outcome(
            proc.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            elapsed,
            usage.ru_maxrss / 1024,
            killed.is_set(),
        )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
