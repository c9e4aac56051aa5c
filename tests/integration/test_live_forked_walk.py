"""A live headless triage from a fresh process walks in the forked child (so its loading runs
on another core while the evidence is collected) and reports exactly what the in-process walk
reports: fake HTTPS Kubernetes API, real sshd through a ProxyJump hop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, require_tool
from tests.kubeapi import KubeAPI
from tests.sshd import SshLab

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform != "linux", reason="the walk forks on Linux only"),
]

#: The console script, with a note on stderr saying whether the child walked.
RUN = """
import sys
import gputriage.prepared_walk as pw
finish = pw.ForkedWalk.finish
def noted(self, *args):
    result = finish(self, *args)
    print(f"walked in child: {result.forked}", file=sys.stderr)
    return result
pw.ForkedWalk.finish = noted
sys.argv = ["gputriage", *sys.argv[1:]]
from gputriage.cli import entry
entry()
"""


def _triage(args: list[str], out: Path, **env: str) -> tuple[int, str, dict[str, Any]]:
    environ = {k: v for k, v in os.environ.items() if k != "GPUTRIAGE_NO_FORK"}
    proc = subprocess.run(
        [sys.executable, "-c", RUN, *args, "--report", "json", "-o", str(out)],
        cwd=ROOT,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    doc = json.loads(out.read_text())
    doc.pop("generated_at")
    for source in doc["sources"]:  # when each source answered differs between two runs
        for timing in ("elapsed_s", "collected_at"):
            source.pop(timing, None)
    return proc.returncode, proc.stderr, doc


def test_live_triage_walks_in_the_child_and_reports_what_the_walk_here_reports(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    require_tool("sshd", "/usr/sbin/sshd")
    with SshLab(tmp_path / "ssh") as lab:
        args = ["trainer-0", "-n", "ml", "--kubeconfig", str(kubeconfig)]
        args += ["--ssh-config", str(lab.config), "--known-hosts", str(lab.known_hosts)]
        rc_fork, err_fork, forked = _triage(args, tmp_path / "fork.json")
        rc_here, err_here, here = _triage(args, tmp_path / "here.json", GPUTRIAGE_NO_FORK="1")
    assert "walked in child: True" in err_fork, err_fork
    assert "walked in child" not in err_here, err_here  # no child at all
    assert rc_fork == rc_here
    assert forked["findings"], forked
    by_key = {s["key"]: s["status"] for s in forked["sources"]}
    assert by_key["nvidia-smi"] == by_key["kubelet"] == "ok", by_key
    assert forked == here
