"""The real ``gputriage demo`` binary in a real terminal (tmux): walk, export, quit.

tmux runs on a private socket (``-L``) so it never touches the user's server. Textual draws on
stderr, so the command inside tmux never redirects it.
"""

from __future__ import annotations

import base64
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
        return subprocess.run(
            [*self.base, *args], check=True, capture_output=True, text=True, timeout=10
        ).stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "triage")

    def alive(self) -> bool:
        return (
            subprocess.run(
                [*self.base, "has-session", "-t", "triage"], capture_output=True, timeout=10
            ).returncode
            == 0
        )

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
    out = subprocess.run(
        [str(GPUTRIAGE), "demo", SCENARIO, "--report", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return str(json.loads(out.stdout)["verdict"]["finding"])


def test_demo_walks_exports_and_quits_in_a_real_terminal(tmux: Tmux, tmp_path: Path) -> None:
    assert GPUTRIAGE.exists(), f"{GPUTRIAGE} is not installed (pip install -e .)"
    expected = headless_finding()
    out = tmp_path / "exports"
    # COLUMNS/LINES inherited from the test runner would override the pane's real size.
    command = (
        f"unset COLUMNS LINES; cd {shlex.quote(str(tmp_path))} && "
        f"XDG_STATE_HOME={shlex.quote(str(tmp_path))}"
        f" {shlex.quote(str(GPUTRIAGE))} demo {SCENARIO}"
        f" --export-dir {shlex.quote(str(out))}"
    )
    tmux("new-session", "-d", "-x", "120", "-y", "40", "-s", "triage", command)

    tmux.wait_for("the first step", lambda: "Step 1 of" in tmux.screen())
    tmux.wait_for(
        "every source",
        lambda: "Sources" in tmux.screen() and not re.search(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]", tmux.screen()),
    )
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
    tmux.wait_for(
        "the export",
        lambda: len(list(out.glob("*.md"))) == 1 and len(list(out.glob("*.json"))) == 1,
    )
    md = next(out.glob("*.md")).read_text()
    assert expected in md and "llm-finetune-7d9c5b8f6d-x2x4q" in md
    summary = json.loads(next(out.glob("*.json")).read_text())
    assert summary["verdict"]["finding"] == expected
    tmux.wait_for("the notification", lambda: "incident summary written" in tmux.screen())

    tmux("send-keys", "-t", "triage", "q")
    tmux.wait_for("gputriage to exit", lambda: not tmux.alive())


def test_markup_row_opens_verbatim_and_c_emits_osc52(tmux: Tmux, tmp_path: Path) -> None:
    """In a real terminal: a row full of markup and escapes opens in the detail pane as plain
    text, and ``c`` writes OSC 52 (base64 of the command) to the terminal output stream."""
    from tests.tui.bundles import NS, POD, write_bundle

    assert GPUTRIAGE.exists(), f"{GPUTRIAGE} is not installed (pip install -e .)"
    bundle = write_bundle(tmp_path / "b")
    stream = tmp_path / "pane-output.bin"
    command = (
        f"unset COLUMNS LINES DISPLAY WAYLAND_DISPLAY; cd {shlex.quote(str(tmp_path))}"
        f" && XDG_STATE_HOME={shlex.quote(str(tmp_path / 'state'))}"
        f" {shlex.quote(str(GPUTRIAGE))} {POD} -n {NS} --from {shlex.quote(str(bundle))}"
    )
    tmux("new-session", "-d", "-x", "120", "-y", "40", "-s", "triage", command)
    tmux("pipe-pane", "-o", "-t", "triage", f"cat >> {shlex.quote(str(stream))}")
    tmux.wait_for("the walk", lambda: "Step 1 of" in tmux.screen())
    tmux.wait_for("the sources", lambda: not re.search(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]", tmux.screen()))

    # Filter the rows to the hostile event, then open it: two keys once the filter is typed.
    tmux("send-keys", "-t", "triage", "/")
    time.sleep(0.3)  # a human's pause: the filter box takes focus on the next tick
    tmux("send-keys", "-t", "triage", "-l", "boom")
    tmux("send-keys", "-t", "triage", "Enter")
    time.sleep(0.3)
    tmux("send-keys", "-t", "triage", "v")
    tmux.wait_for("the detail pane", lambda: "from  " in tmux.screen())
    detail = tmux.screen()
    assert "[bold red]boom[/]" in detail and "red alert" in detail  # literal, not styled
    assert "events.json:" in detail
    title = tmux("display-message", "-p", "-t", "triage", "#{pane_title}")
    assert "pwned" not in title  # the OSC 0 in the event never reached the terminal
    tmux("send-keys", "-t", "triage", "Escape")
    tmux("send-keys", "-t", "triage", "Escape")  # closes the filter
    time.sleep(0.3)

    tmux("send-keys", "-t", "triage", "c")
    tmux.wait_for(
        "the copy toast", lambda: "clipboard" in tmux.screen() or "saved to a file" in tmux.screen()
    )
    copied = (tmp_path / "state" / "gputriage" / "clipboard.txt").read_text().strip()
    assert copied  # the highlighted fix command of the walk's finding, also in the file
    osc52 = b"\x1b]52;c;" + base64.b64encode(copied.encode())
    tmux.wait_for(
        "OSC 52 in the output stream", lambda: stream.exists() and osc52 in stream.read_bytes()
    )
    assert "sent to the terminal clipboard (OSC 52)" in tmux.screen()
    tmux("send-keys", "-t", "triage", "q")
    tmux.wait_for("gputriage to exit", lambda: not tmux.alive())


def test_an_event_added_to_the_api_appears_without_refresh(tmux: Tmux, tmp_path: Path) -> None:
    """Live: the TUI watches the pod's events (GET watch=true) and shows a new one at once."""
    from tests.kubeapi import KubeAPI
    from tests.kubeapi.cluster import event, gpu_cluster

    assert GPUTRIAGE.exists(), f"{GPUTRIAGE} is not installed (pip install -e .)"
    cluster = gpu_cluster()
    with KubeAPI(cluster) as api:
        config = api.write_kubeconfig(tmp_path / "kubeconfig")
        overrides = " ".join(
            f"--node-address={name}=127.0.0.1" for _, name in cluster.keys("", "nodes")
        )
        command = (
            f"unset COLUMNS LINES DISPLAY; cd {shlex.quote(str(tmp_path))} && "
            f"XDG_STATE_HOME={shlex.quote(str(tmp_path / 'state'))}"
            f" {shlex.quote(str(GPUTRIAGE))} trainer-0 -n ml"
            f" --kubeconfig {shlex.quote(str(config))} --ssh off {overrides}"
        )
        tmux("new-session", "-d", "-x", "160", "-y", "48", "-s", "triage", command)
        tmux.wait_for("the live watch", lambda: "● live" in tmux.screen())
        tmux("send-keys", "-t", "triage", "1")  # the Events tab
        marker = "MountVolume.SetUp failed for volume live-marker-7f3a"
        assert marker not in tmux.screen()
        pod = cluster.get("", "pods", "ml", "trainer-0")
        assert pod is not None
        cluster.add(event(pod, "FailedMount", marker, minutes=0))
        tmux.wait_for("the new event", lambda: marker in tmux.screen(), timeout=20)
        assert "changed since launch: events" in tmux.screen()
        tmux("send-keys", "-t", "triage", "q")
        tmux.wait_for("gputriage to exit", lambda: not tmux.alive())
        watches = [r for r in api.requests if r.query.get("watch") == ("true",)]
        assert watches and all(r.method == "GET" for r in api.requests)
        assert {r.path for r in watches} >= {
            "/api/v1/namespaces/ml/events",
            "/api/v1/namespaces/ml/pods",
        }
