"""Shared helpers for ``bench/``: figures with goals, timing, child processes, the machine.

A :class:`Figure` is one measured number with the goal it is held to (DESIGN 4 or a goal
stated next to it) and PASS/MISS; ``bench/run.py`` prints them as a table and writes them into
``docs/performance.md``. Nothing here asserts: benchmarks report, tests assert.
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PYTHON = sys.executable


@dataclass(frozen=True)
class Figure:
    """One measured figure. ``passed`` is None when it has no goal (shown for context)."""

    section: str
    name: str
    value: float
    unit: str
    goal: str = ""
    passed: bool | None = None
    note: str = ""

    @property
    def verdict(self) -> str:
        return "" if self.passed is None else ("PASS" if self.passed else "MISS")

    def shown(self) -> str:
        if self.unit in ("x", "ratio"):
            return f"{self.value:.2f}x"
        if self.unit == "s":
            return f"{self.value:.3f} s"
        if self.unit == "ms":
            return f"{self.value:.2f} ms"
        if self.unit == "us":
            return f"{self.value:.1f} us"
        if self.unit == "MiB":
            return f"{self.value:.1f} MiB"
        if self.unit == "B":
            return human_bytes(self.value)
        if self.unit == "%":
            return f"{self.value:.4g} %"
        return f"{self.value:g} {self.unit}".strip()


def at_most(
    section: str, name: str, value: float, unit: str, limit: float, goal: str = "", note: str = ""
) -> Figure:
    return Figure(section, name, value, unit, goal or f"<= {limit:g} {unit}", value <= limit, note)


def at_least(
    section: str, name: str, value: float, unit: str, limit: float, goal: str = "", note: str = ""
) -> Figure:
    return Figure(section, name, value, unit, goal or f">= {limit:g} {unit}", value >= limit, note)


def info(section: str, name: str, value: float, unit: str, note: str = "") -> Figure:
    return Figure(section, name, value, unit, "", None, note)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_time(fn: Callable[[], object], runs: int) -> float:
    return median(timed(fn) for _ in range(max(1, runs)))


@dataclass(frozen=True)
class ChildRun:
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    max_rss_mib: float
    #: CPU time (user + system) the child used: what machine load does not inflate much.
    cpu_s: float = 0.0


def run_child(
    argv: Sequence[str],
    *,
    timeout: float = 600.0,
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
) -> ChildRun:
    """Run ``argv``; wall time and the child's own peak RSS (``wait4``), output captured."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        # Bytecode is written and read as on any install (a figure never includes compiling
        # gputriage's sources, whatever the caller's environment says).
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdout=out,
            stderr=err,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "", **(env or {})},
        )
        timer = threading.Timer(timeout, lambda: _kill(proc.pid))
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return ChildRun(
            proc.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            wall,
            usage.ru_maxrss / 1024,
            usage.ru_utime + usage.ru_stime,
        )


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:  # it finished at the deadline
        return


def python_child(
    code: str, *args: str, timeout: float = 600.0, env: Mapping[str, str] | None = None
) -> ChildRun:
    return run_child(
        [PYTHON, "-c", code, *args], timeout=timeout, env={"PYTHONPATH": str(ROOT), **(env or {})}
    )


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _tool_version(argv: Sequence[str]) -> str:
    if not shutil.which(argv[0]):
        return "not installed"
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = (done.stdout or done.stderr).strip().splitlines()
    return text[0].strip() if text else "unknown"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 0
    return {
        "CPU": f"{cpu_model()} ({os.cpu_count()} cores visible)",
        "memory": human_bytes(mem),
        "load average": " ".join(f"{x:.2f}" for x in load),
        "OS": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "gputriage": _version("gputriage"),
        "textual / rich": f"{_version('textual')} / {_version('rich')}",
        "kubernetes / paramiko": f"{_version('kubernetes')} / {_version('paramiko')}",
        "CEL (common-expression-language)": _version("common-expression-language"),
        "kubectl": _tool_version(["kubectl", "version", "--client"]),
        "OpenSSH": _tool_version(["ssh", "-V"]),
    }


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
