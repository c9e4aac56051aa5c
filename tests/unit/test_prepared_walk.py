"""The walk prepared in a forked process gives what the in-process walk gives, and any failure
of the child falls back to the in-process walk (gputriage.prepared_walk).

Each case runs in a fresh interpreter (``tests/walkfork.py``): forking needs a process with no
other thread running, and the pytest process may have some.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gputriage.prepared_walk import can_fork

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(p.parent for p in (ROOT / "gputriage" / "scenarios").glob("*/pod.json"))
LOST = ROOT / "gputriage" / "scenarios" / "lost-xid79"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the walk forks on Linux only")


def _run(mode: str, bundle: Path = LOST, **env: str) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if k != "GPUTRIAGE_NO_FORK"}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.walkfork", mode, str(bundle)],
        cwd=ROOT,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr == "", proc.stderr[-3000:]  # the child never writes to the terminal
    return json.loads(proc.stdout)


def _report(out: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(out["text"])
    doc.pop("generated_at")
    return doc


@pytest.mark.parametrize("bundle", SCENARIOS, ids=[p.name for p in SCENARIOS])
def test_forked_walk_gives_the_in_process_report(bundle: Path) -> None:
    forked, here = _run("fork", bundle), _run("thread", bundle)
    assert forked["forked"] is True and here["forked"] is False
    assert forked["reaped"] is True
    assert _report(forked) == _report(here)
    assert forked["exit_code"] == here["exit_code"]
    assert _report(forked)["findings"], "the scenario should end at a finding"


@pytest.mark.parametrize("mode", ["crash", "garbage", "hang", "stuck", "big"])
def test_a_child_that_fails_falls_back_to_the_walk_here(mode: str) -> None:
    out = _run(mode)
    assert out["child"] is True and out["forked"] is False
    assert out["reaped"] is True
    assert _report(out) == _report(_run("thread"))
    assert out["seconds"] < 20  # "hang", "stuck": ANSWER_TIMEOUT_S (0.5 s here), not the child


def test_an_error_in_the_walk_is_raised_here_as_it_would_be_without_the_child() -> None:
    out = _run("raise")
    assert out["child"] is True
    assert out["error"] == "bad notes: the notes file is not readable"
    assert out["reaped"] is True


def test_a_run_that_ends_before_any_evidence_stops_and_reaps_the_child() -> None:
    out = _run("close-early")
    assert out["child"] is True and out["reaped"] is True
    assert out["seconds"] < 5  # not waiting for the child to finish loading


def test_no_fork_when_asked_or_when_threads_already_run() -> None:
    for out in (_run("fork", GPUTRIAGE_NO_FORK="1"), _run("threaded")):
        assert out["child"] is False and out["forked"] is False
        assert _report(out) == _report(_run("thread"))


def test_can_fork_only_without_other_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    monkeypatch.delenv("GPUTRIAGE_NO_FORK", raising=False)
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert can_fork() is False
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert can_fork() is True
    monkeypatch.setenv("GPUTRIAGE_NO_FORK", "1")
    assert can_fork() is False


def test_the_child_compiles_the_conditions_while_it_waits(tmp_path: Path) -> None:
    """Loaded from a warm cache, conditions compile when they first run; the child compiles
    them all while the parent collects (the walk here compiles only those it reaches)."""
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    _run("thread", **cache)  # fills the playbook cache
    forked = _run("count", **cache)
    here = _run("count", GPUTRIAGE_NO_FORK="1", **cache)
    assert forked["forked"] is True and here["forked"] is False
    child, parent = json.loads(forked["text"]), json.loads(here["text"])
    assert child["compiled"] == child["conditions"] > 100
    assert parent["compiled"] == 0
    assert child["report"]["findings"] == parent["report"]["findings"]
