"""Node evidence when gputriage runs on the node itself (``--local``).

GPU state comes from NVML (:mod:`gputriage.evidence.nvml`); logs, modules, device nodes and the
containerd config come from the same commands the SSH source runs
(:mod:`gputriage.evidence.nodecmds`), started with an argv list (never a shell) and filtered and
bounded here exactly as the node script does it with ``grep -F | tail -c``.
"""

from __future__ import annotations

import glob
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import IO, Protocol

from gputriage.evidence.model import Evidence, Key, Status
from gputriage.evidence.nodecmds import (
    MISSING_MARK,
    STDERR_LIMIT,
    NodeCommand,
    RawResult,
    collect_key,
)
from gputriage.evidence.nvml import NvmlAdapter, nvml_evidence
from gputriage.evidence.sources import NodeQuery


class LocalNodeSource:
    """A :class:`~gputriage.evidence.sources.NodeSource` for the machine gputriage runs on."""

    name = "local"

    def __init__(
        self, *, sudo: bool = False, nvml: Callable[[], NvmlAdapter] | None = None
    ) -> None:
        self.sudo = sudo
        self._nvml = nvml

    def collect(self, key: Key, query: NodeQuery, timeout: float) -> Evidence:
        started = time.monotonic()
        deadline = started + timeout
        try:
            if key is Key.NVIDIA_SMI:
                return nvml_evidence(self._nvml() if self._nvml else None, timeout=timeout)
            evidence = collect_key(
                key,
                query,
                lambda cmd: run_local(cmd, deadline, self.sudo),
                where="local",
                sudo=self.sudo,
                time_left=lambda: deadline - time.monotonic(),
            )
        except Exception as exc:  # never raise into the broker
            evidence = Evidence(
                key,
                Status.ERROR,
                f"local collection failed: {type(exc).__name__}: {exc}",
                "",
                "local",
            )
        return replace(evidence, elapsed_s=time.monotonic() - started)

    def close(self) -> None:
        """Nothing is held open between collections."""


def local_argv(cmd: NodeCommand, *, sudo: bool = False) -> list[str]:
    """``cmd``'s argv for :func:`subprocess.Popen`: globs expanded here as the shell would."""
    argv: list[str] = []
    for arg in cmd.argv:
        if arg in cmd.globs:
            # No match: pass the pattern through, so ls prints the same "No such file" the
            # node's shell would have produced.
            argv.extend(sorted(glob.glob(arg)) or [arg])
        else:
            argv.append(arg)
    return ["sudo", "-n", *argv] if sudo else argv


def run_local(cmd: NodeCommand, deadline: float, sudo: bool = False) -> RawResult:
    """Run ``cmd`` here, keeping only the lines its filter keeps, bounded like ``tail -c``."""
    for program in (cmd.program, "sudo") if sudo else (cmd.program,):
        if shutil.which(program) is None:
            return RawResult(127, b"", MISSING_MARK.format(program=program).encode())
    try:
        proc = subprocess.Popen(
            local_argv(cmd, sudo=sudo),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if cmd.merge_stderr else subprocess.PIPE,
            env={**os.environ, "LC_ALL": "C"},
            start_new_session=True,
        )
    except OSError as exc:
        return RawResult(None, b"", b"", failure=f"cannot start {program}: {exc.strerror}")
    out = _Bounded(cmd.max_bytes, newest=cmd.newest)
    err = _Bounded(STDERR_LIMIT, newest=False)
    streams: dict[IO[bytes], _Sink] = {}
    assert proc.stdout is not None
    streams[proc.stdout] = _LineFilter(cmd, out)
    if proc.stderr is not None:
        streams[proc.stderr] = err
    timed_out = _pump(streams, deadline)
    if timed_out:
        _kill(proc)
    try:
        rc = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill(proc)
        rc = proc.wait()
        timed_out = True
    for stream in streams:
        stream.close()
    return RawResult(None if timed_out else rc, out.value(), err.value(), timed_out=timed_out)


class _Sink(Protocol):
    def feed(self, chunk: bytes) -> None: ...
    def finish(self) -> None: ...


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the command and whatever it started (its own session, see ``run_local``)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:  # already gone, or not ours to kill (sudo): fall back to the child
        proc.kill()


def _pump(streams: dict[IO[bytes], _Sink], deadline: float) -> bool:
    """Read every stream to EOF, feeding chunks to its sink; True when the deadline passed."""
    with selectors.DefaultSelector() as sel:
        for stream, sink in streams.items():
            sel.register(stream, selectors.EVENT_READ, sink)
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            for ready, _ in sel.select(timeout=min(remaining, 0.5)):
                chunk = os.read(ready.fd, 65536)
                if chunk:
                    ready.data.feed(chunk)
                else:
                    ready.data.finish()
                    sel.unregister(ready.fileobj)
    return False


class _LineFilter:
    """``grep -a -F -e ...`` over a byte stream: whole lines in, kept lines out."""

    def __init__(self, cmd: NodeCommand, sink: _Sink) -> None:
        self.cmd = cmd
        self.sink = sink
        self.partial = b""

    def feed(self, chunk: bytes) -> None:
        if not self.cmd.keep:
            self.sink.feed(chunk)
            return
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        if len(self.partial) > 1024 * 1024:  # a "line" this long is not a log line
            self.partial = b""
        kept = [line + b"\n" for line in lines if self.cmd.keeps(line)]
        if kept:
            self.sink.feed(b"".join(kept))

    def finish(self) -> None:
        # grep prints a last line without a newline too (adding one).
        if self.partial and self.cmd.keeps(self.partial):
            self.sink.feed(self.partial + b"\n")
        self.partial = b""
        self.sink.finish()


class _Bounded:
    """At most ``limit`` bytes: the first ones (``head -c``) or the newest (``tail -c``)."""

    def __init__(self, limit: int, *, newest: bool) -> None:
        self.limit = limit
        self.newest = newest
        self.chunks: deque[bytes] = deque()
        self.size = 0

    def feed(self, chunk: bytes) -> None:
        if not self.newest:
            room = self.limit - self.size
            if room > 0:
                self.chunks.append(chunk[:room])
                self.size += min(room, len(chunk))
            return
        self.chunks.append(chunk)
        self.size += len(chunk)
        while self.size - len(self.chunks[0]) >= self.limit:
            self.size -= len(self.chunks.popleft())

    def finish(self) -> None:
        """Nothing is pending: chunks are kept as they come."""

    def value(self) -> bytes:
        data = b"".join(self.chunks)
        return data[-self.limit :] if self.newest else data
