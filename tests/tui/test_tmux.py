"""The real ``gputriage demo`` binary in a real terminal (tmux): walk, export, quit.

tmux runs on a private socket (``-L``) so it never touches the user's server. Textual draws on
stderr, so the command inside tmux never redirects it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import require_tool

pytestmark = pytest.mark.integration

SCENARIO = "pending-insufficient-gpu"
GPUTRIAGE = Path(sys.executable).with_name("gputriage")


class Tmux:
    def __init__(self, tmux: str, socket: str) -> None:
        self.base = [tmux, "-L", socket]

    def __call__(self, *args: str) -> str:
        return subprocess.run([*self.base, *args], check=True, capture_output=True,
                              text=True, timeout=10).stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "triage")

    def alive(self) -> bool:
        return subprocess.run([*self.base, "has-session", "-t", "triage"],
                              capture_output=True, timeout=10).returncode == 0

    def wait_for(self, what: str, check: Callable[[], bool], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; screen:\n{self.screen()}")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    session = Tmux(require_tool("tmux"), f"gputriage-test-{os.getpid()}")
    yield session
    subprocess.run([*session.base, "kill-server"], capture_output=True, timeout=10)


def headless_finding() -> str:
    out = subprocess.run([str(GPUTRIAGE), "demo", SCENARIO, "--report", "json"],
                         capture_output=True, text=True, timeout=60)
    return str(json.loads(out.stdout)["verdict"]["finding"])


def test_demo_walks_exports_and_quits_in_a_real_terminal(tmux: Tmux, tmp_path: Path) -> None:
    assert GPUTRIAGE.exists(), f"{GPUTRIAGE} is not installed (pip install -e .)"
    expected = headless_finding()
    out = tmp_path / "exports"
    # COLUMNS/LINES inherited from the test runner would override the pane's real size.
    command = (f"unset COLUMNS LINES; cd {shlex.quote(str(tmp_path))} && "
               f"XDG_STATE_HOME={shlex.quote(str(tmp_path))}"
               f" {shlex.quote(str(GPUTRIAGE))} demo {SCENARIO}"
               f" --export-dir {shlex.quote(str(out))}")
    tmux("new-session", "-d", "-x", "120", "-y", "40", "-s", "triage", command)

    tmux.wait_for("the first step", lambda: "Step 1 of" in tmux.screen())
    tmux.wait_for("every source", lambda: "Sources" in tmux.screen()
                  and not re.search(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]", tmux.screen()))
    first = tmux.screen()
    assert "ml-training/llm-finetune-7d9c5b8f6d-x2x4q" in first
    assert "Follow" in first and "Override" in first  # the footer's k9s-style keys

    for _ in range(20):  # follow the proposed branch, step by step, to the verdict
        if "Verdict" in tmux.screen():
            break
        tmux("send-keys", "-t", "triage", "Enter")
        time.sleep(0.3)
    tmux.wait_for("the verdict", lambda: "Verdict" in tmux.screen())
    verdict = tmux.screen()
    assert "⚑ verdict" in verdict and expected in verdict

    tmux("send-keys", "-t", "triage", "e")
    tmux.wait_for("the export", lambda: len(list(out.glob("*.md"))) == 1
                  and len(list(out.glob("*.json"))) == 1)
    md = next(out.glob("*.md")).read_text()
    assert expected in md and "llm-finetune-7d9c5b8f6d-x2x4q" in md
    summary = json.loads(next(out.glob("*.json")).read_text())
    assert summary["verdict"]["finding"] == expected
    tmux.wait_for("the notification", lambda: "incident summary written" in tmux.screen())

    tmux("send-keys", "-t", "triage", "q")
    tmux.wait_for("gputriage to exit", lambda: not tmux.alive())
