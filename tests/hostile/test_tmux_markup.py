"""Markup in cluster text shows verbatim in a real terminal (tmux): the copy toast of the
triage app and the table of the scan app. ``[link=...]`` once crashed the app (MarkupError)
and ``[@click=app.quit]`` injected an action; both must render as the characters they are.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputriage.scenarios import scenario_path
from tests.conftest import ROOT, require_tool
from tests.kubeapi import KubeAPI
from tests.kubeapi.cluster import Cluster, gpu_cluster, pod
from tests.tui.test_tmux import Tmux

pytestmark = pytest.mark.integration

#: Not a valid Kubernetes name, but a hand-assembled bundle (or a fake API) can hold anything.
HOSTILE = "embed-[@click=app.quit]x[/]-[link=https://evil.example]y[/link]"


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    session = Tmux(require_tool("tmux"), f"gputriage-hostile-{os.getpid()}")
    yield session
    subprocess.run([*session.base, "kill-server"], capture_output=True, timeout=10)


def launch(tmux: Tmux, tmp_path: Path, *argv: str) -> None:
    words = " ".join(shlex.quote(w) for w in [sys.executable, "-m", "gputriage", *argv])
    command = (
        f"unset COLUMNS LINES; cd {shlex.quote(str(tmp_path))} && "
        f"PYTHONPATH={shlex.quote(str(ROOT))} XDG_STATE_HOME={shlex.quote(str(tmp_path))}"
        f" KUBECACHEDIR={shlex.quote(str(tmp_path))} {words}"
    )
    tmux("new-session", "-d", "-x", "200", "-y", "50", "-s", "triage", command)


def flat(screen: str) -> str:
    return "".join(line.strip() for line in screen.splitlines())


def test_copy_toast_shows_markup_verbatim(tmux: Tmux, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(scenario_path("oom-time-sliced"), bundle)
    old = "embed-worker-5d7f8b9c6-t7wzn"
    for file in bundle.iterdir():
        file.write_text(file.read_text().replace(old, HOSTILE))
    launch(tmux, tmp_path, HOSTILE, "-n", "search", "--from", str(bundle))
    tmux.wait_for(
        "a finding with fix commands",
        lambda: "logs" in tmux.screen() and "--previous" in tmux.screen(),
    )
    tmux("send-keys", "-t", "triage", "c")
    # The toast names where the copy went (a platform clipboard, OSC 52, or a file).
    tmux.wait_for(
        "the copy toast",
        lambda: any(
            words in tmux.screen()
            for words in ("copied to the clipboard", "terminal clipboard", "saved to a file")
        ),
    )
    screen = tmux.screen()
    assert "[@click=app.quit]x[/]" in flat(screen), screen
    assert "[link=https://evil.example]y[/link]" in flat(screen), screen
    assert tmux.alive(), "the app quit (or crashed) on markup in the toast"
    tmux("send-keys", "-t", "triage", "q")
    tmux.wait_for("the app to quit", lambda: not tmux.alive(), timeout=15)


@pytest.fixture
def hostile_cluster() -> Cluster:
    cluster = gpu_cluster()
    cluster.add(
        pod(
            HOSTILE,
            "ml",
            gpus=2,
            unschedulable="0/8 nodes are available: [@click=app.quit]quit[/] "
            "[link=https://evil.example]here[/link] \x1b]0;pwned\x07",
        )
    )
    return cluster


def test_scan_table_shows_markup_verbatim(
    tmux: Tmux, tmp_path: Path, hostile_cluster: Cluster
) -> None:
    with KubeAPI(hostile_cluster) as api:
        config = api.write_kubeconfig(tmp_path / "kubeconfig")
        # SSH off and every node routed to 127.0.0.1: fixture addresses are never dialled.
        overrides = [f"--node-address={n}=127.0.0.1" for _, n in api.cluster.keys("", "nodes")]
        launch(
            tmux, tmp_path, "scan", "-A", "--kubeconfig", str(config), "--ssh", "off", *overrides
        )
        tmux.wait_for("the scan", lambda: "done" in tmux.screen(), timeout=60)
        tmux.wait_for("the hostile row", lambda: "[@click" in tmux.screen())
        screen = tmux.screen()
        assert "embed-[@click=app.quit]" in screen, screen
        assert "[@click=app.quit]quit[/]" in flat(screen), screen
        assert "pwned" not in screen
        assert tmux.alive()
        tmux("send-keys", "-t", "triage", "q")
        tmux.wait_for("the app to quit", lambda: not tmux.alive(), timeout=15)


def test_q_exits_promptly_while_a_body_never_ends(tmux: Tmux, tmp_path: Path) -> None:
    """The events reply never ends and each call may take 30 s: after ``q`` the process must
    still exit at once (the client cuts the read in flight), not when the read times out."""
    with KubeAPI(gpu_cluster()) as api:
        api.endless_body("/namespaces/ml/events$")
        config = api.write_kubeconfig(tmp_path / "kubeconfig")
        overrides = [f"--node-address={n}=127.0.0.1" for _, n in api.cluster.keys("", "nodes")]
        launch(
            tmux,
            tmp_path,
            "trainer-0",
            "-n",
            "ml",
            "--kubeconfig",
            str(config),
            "--ssh",
            "off",
            "--request-timeout",
            "30",
            *overrides,
        )
        tmux.wait_for("the first screen", lambda: "Sources" in tmux.screen(), timeout=30)
        tmux.wait_for(
            "the endless reply to start",
            lambda: any(r.path.endswith("/events") for r in api.requests),
        )
        started = time.monotonic()
        tmux("send-keys", "-t", "triage", "q")
        tmux.wait_for("the process to exit", lambda: not tmux.alive(), timeout=20)
        assert time.monotonic() - started < 10.0
