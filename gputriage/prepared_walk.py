"""The walk's half of a headless run, made ready while the evidence is being collected.

Before it can walk, a fresh process imports the code that builds facts, walks and renders,
and loads the playbooks: about 0.1 s of CPU. A live triage spends that time waiting on the
network, but Python runs one thread at a time: loading in a thread slows down the threads that
parse the API's answers and drive SSH by as much as it takes. On Linux the loading therefore
runs in a child process forked at the start, on another core and at a lower priority, which
then imports what the walk would import late and compiles the conditions while it waits; the
evidence goes to it when collected (:mod:`gputriage.evidence.wire`), it builds facts, walks
and renders, and the report comes back. The child only computes: it reads no terminal,
writes no file and touches nothing the parent does not see.

Nothing depends on the child. When the process cannot fork (not Linux, threads already
running, ``GPUTRIAGE_NO_FORK`` set), the playbooks load in a thread while collecting and the
walk runs here after it, as it always did. When the evidence is too large to be worth the
trip (:data:`WIRE_LIMIT_BYTES`) or the child fails in any way (crashes, answers garbage, stays
silent for :data:`ANSWER_TIMEOUT_S`), the child is stopped and the playbooks load and the walk
runs here. Every outcome, errors included, is what the in-process walk gives.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gputriage.evidence.model import EvidenceSet
    from gputriage.playbook.model import PlaybookSet

#: ``(playbooks, evidence, session description, context) -> (report text, exit code)``.
Finish = Callable[["PlaybookSet", "EvidenceSet", str, str], tuple[str, int]]

#: How much lower the child's CPU priority is than the parent's (``nice``).
CHILD_NICENESS = 10
#: Set (to anything) to keep the walk in this process.
NO_FORK_ENV = "GPUTRIAGE_NO_FORK"
#: How long the parent waits for the child's report once it has the evidence. A walk takes
#: milliseconds; this only bounds a child that went wrong, after which the walk runs here.
ANSWER_TIMEOUT_S = 30.0
_CHUNK = 1 << 16
#: Evidence text beyond which the walk runs here instead: encoding and decoding it (and its
#: parsed objects) would cost more than loading the playbooks again (~0.1 s).
WIRE_LIMIT_BYTES = 16 << 20


@dataclass(frozen=True)
class WalkResult:
    """What the walk's half of a headless run hands back."""

    text: str
    exit_code: int
    problems: tuple[str, ...]
    """Playbooks that were skipped (for the warnings on stderr)."""
    forked: bool = False
    """True when the child process walked (for tests and benchmarks)."""


def load(dirs: list[Path]) -> PlaybookSet:
    """Everything the walk needs besides the evidence: the code that builds facts, walks and
    renders, imported, and the playbooks."""
    import gputriage.facts.build
    import gputriage.playbook.engine
    import gputriage.report.render  # noqa: F401
    from gputriage.playbook.loader import load_playbooks

    return load_playbooks(dirs)


class PreparedWalk(Protocol):
    """A walk being prepared: ``finish`` walks the evidence once it is collected, ``close``
    ends whatever is still running (safe after ``finish``, and twice)."""

    def finish(self, evidence: EvidenceSet, description: str, context: str) -> WalkResult: ...

    def close(self) -> None: ...


def prepare_walk(dirs: list[Path], finish: Finish, *, fork: bool) -> PreparedWalk:
    """Start preparing the walk: in a forked child when ``fork`` and the platform allow it,
    else in a thread of this process. Call ``finish`` on the result, then ``close``."""
    if fork and can_fork():
        forked = ForkedWalk.start(dirs, finish)
        if forked is not None:
            return forked
    return ThreadWalk(dirs, finish)


def can_fork() -> bool:
    """Linux, no other thread running yet (forking a threaded process can deadlock the child),
    and not turned off."""
    return (
        sys.platform == "linux"
        and hasattr(os, "fork")
        and threading.active_count() == 1
        and not os.environ.get(NO_FORK_ENV)
    )


def _walk_here(
    playbooks: PlaybookSet, finish: Finish, evidence: EvidenceSet, description: str, context: str
) -> WalkResult:
    """``finish`` in this process."""
    text, code = finish(playbooks, evidence, description, context)
    return WalkResult(text, code, tuple(str(p) for p in playbooks.problems))


class ThreadWalk:
    """The walk prepared in this process: playbooks load in a thread, the walk runs here."""

    def __init__(self, dirs: list[Path], finish: Finish) -> None:
        self._finish = finish
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="playbooks")
        self._loading: Future[PlaybookSet] = self._pool.submit(load, dirs)

    def finish(self, evidence: EvidenceSet, description: str, context: str) -> WalkResult:
        return _walk_here(self._loading.result(), self._finish, evidence, description, context)

    def close(self) -> None:
        # A load still running (the session failed to open) is not waited for.
        self._pool.shutdown(wait=False, cancel_futures=True)


class ForkedWalk:
    """The walk prepared in a forked child; any failure of the child falls back to walking
    here (the playbooks load here only then)."""

    def __init__(
        self, dirs: list[Path], finish: Finish, pid: int, to_child: int, from_child: int, tag: str
    ) -> None:
        self._dirs = dirs
        self._finish = finish
        self._pid = pid
        self._to_child = to_child
        self._from_child = from_child
        self._tag = tag
        self._reaped = False

    @classmethod
    def start(cls, dirs: list[Path], finish: Finish) -> ForkedWalk | None:
        """Fork the child, or None when the system refuses."""
        tag = os.urandom(16).hex()  # as secrets.token_hex, without importing it here
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()  # else the child would inherit, and never write, a copy
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        try:
            pid = os.fork()
        except Exception:  # OSError (no processes left), a -W error DeprecationWarning...
            for fd in (to_child_r, to_child_w, from_child_r, from_child_w):
                os.close(fd)
            return None
        if pid == 0:  # the child: never returns
            status = 1
            try:
                os.close(to_child_w)
                os.close(from_child_r)
                status = _child(to_child_r, from_child_w, dirs, finish, tag)
            finally:
                os._exit(status)
        os.close(to_child_r)
        os.close(from_child_w)
        return cls(dirs, finish, pid, to_child_w, from_child_r, tag)

    def finish(self, evidence: EvidenceSet, description: str, context: str) -> WalkResult:
        result = self._ask_child(evidence, description, context)
        self.close()
        if result is not None:
            return result
        return _walk_here(load(self._dirs), self._finish, evidence, description, context)

    def _ask_child(
        self, evidence: EvidenceSet, description: str, context: str
    ) -> WalkResult | None:
        from gputriage.evidence import wire

        if sum(len(ev.raw) for ev in evidence.values()) > WIRE_LIMIT_BYTES:
            return None  # a huge cluster's lists: walking here costs less than the trip
        try:
            body = wire.encode(evidence.values(), self._tag)
        except (TypeError, ValueError, RecursionError):
            return None
        header = json.dumps({"description": description, "context": context}).encode()
        try:
            deadline = time.monotonic() + ANSWER_TIMEOUT_S
            _write_all(self._to_child, header + b"\n" + body, deadline)
            os.close(self._to_child)
            self._to_child = -1
            reply = _read_all(self._from_child, deadline)
            answer = json.loads(reply)
            text, code = answer["text"], answer["exit_code"]
            problems = answer["problems"]
        except (OSError, ValueError, KeyError, TypeError, TimeoutError):
            return None
        if not (
            isinstance(text, str)
            and type(code) is int
            and isinstance(problems, list)
            and all(isinstance(p, str) for p in problems)
        ):
            return None
        return WalkResult(text, code, tuple(problems), forked=True)

    def close(self) -> None:
        """Stop the child if it still runs (the session failed to open), reap it, close the
        pipes. Safe to call twice."""
        for name in ("_to_child", "_from_child"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)
        if self._reaped:
            return
        self._reaped = True
        try:
            done, _ = os.waitpid(self._pid, os.WNOHANG)
            if done == 0:
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
        except (ChildProcessError, ProcessLookupError):
            pass


def _child(from_parent: int, to_parent: int, dirs: list[Path], finish: Finish, tag: str) -> int:
    """The forked child's whole life: load, wait for the evidence, walk, answer. The exit
    status is for the record; the parent only reads the answer."""
    from gputriage.evidence import wire
    from gputriage.evidence.model import EvidenceSet

    # Ctrl-C reaches the whole process group: end quietly and let the parent report it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # Second in line for the CPU: while the parent collects, its threads, and the servers it
    # talks to when they share the machine, come first; the child has until the evidence
    # arrives, and by then the others are waiting on it.
    with contextlib.suppress(OSError):
        os.nice(CHILD_NICENESS)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # nothing the child imports may write to the SRE's terminal
        os.dup2(devnull, fd)
    try:
        playbooks = load(dirs)
        _import_lazy_parts()
        _compile_conditions(playbooks, from_parent)
        request = _read_all(from_parent, None)
        if not request:
            return 0  # the parent stopped before collecting anything
        header, _, body = request.partition(b"\n")
        meta = json.loads(header)
        evidence = EvidenceSet(wire.decode(body, tag))
        text, code = finish(playbooks, evidence, str(meta["description"]), str(meta["context"]))
        answer = {
            "text": text,
            "exit_code": code,
            "problems": [str(p) for p in playbooks.problems],
        }
        _write_all(to_parent, json.dumps(answer).encode())
        return 0
    except BaseException:  # the parent walks in its own process instead
        return 1


def _import_lazy_parts() -> None:
    """What a walk imports only when it first needs it (the renderers, the TOML reader for a
    containerd config): in the child it is imported while the parent still collects, not after
    (about 10 ms of the report's first rendering). A process that walks in place does not
    import what it may not use."""
    import tomllib  # noqa: F401

    import gputriage.report.gpu_section
    import gputriage.report.json
    import gputriage.report.markdown
    import gputriage.report.summary
    import gputriage.report.text  # noqa: F401


def _compile_conditions(playbooks: PlaybookSet, from_parent: int) -> None:
    """While the parent is still collecting: compile every condition, until the evidence
    arrives (loaded from the cache, a condition is compiled when it first runs: a few
    milliseconds of the walk otherwise). Compiled programs are kept on the conditions, as the
    walk would keep them."""

    def evidence_arrived() -> bool:
        return _ready(from_parent, select.POLLIN, time.monotonic())

    for i, condition in enumerate(playbooks.conditions()):
        if i % 8 == 0 and evidence_arrived():
            return
        with contextlib.suppress(Exception):
            condition.program  # noqa: B018  # compiled once, kept on the condition


def _ready(fd: int, events: int, deadline: float | None) -> bool:
    """Whether ``fd`` is ready for ``events`` by ``deadline`` (None: wait as long as it takes;
    a past deadline: look once). poll, not select: a process with over 1024 files open is no
    problem."""
    poller = select.poll()
    poller.register(fd, events)
    if deadline is None:
        return bool(poller.poll())
    return bool(poller.poll(max(0.0, deadline - time.monotonic()) * 1000))


def _write_all(fd: int, data: bytes, deadline: float | None = None) -> None:
    view = memoryview(data)
    while view:
        if deadline is not None and not _ready(fd, select.POLLOUT, deadline):
            raise TimeoutError("the walk process did not read the evidence")
        view = view[os.write(fd, view[:_CHUNK]) :]


def _read_all(fd: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    while True:
        if deadline is not None and not _ready(fd, select.POLLIN, deadline):
            raise TimeoutError("the walk process did not answer")
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
