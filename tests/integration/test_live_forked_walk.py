"""A live headless triage from a fresh process walks in the forked child (so its loading runs
on another core while the evidence is collected) and reports exactly what the in-process walk
reports: fake HTTPS Kubernetes API, real sshd through a ProxyJump hop."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, require_tool
from tests.kubeapi import KubeAPI
from tests.sshd import SshLab
from tests.walkfork import cli_report

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform != "linux", reason="the walk forks on Linux only"),
]


def test_live_triage_walks_in_the_child_and_reports_what_the_walk_here_reports(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    require_tool("sshd", "/usr/sbin/sshd")
    with SshLab(tmp_path / "ssh") as lab:
        args = ["trainer-0", "-n", "ml", "--kubeconfig", str(kubeconfig)]
        args += ["--ssh-config", str(lab.config), "--known-hosts", str(lab.known_hosts)]
        rc_fork, err_fork, forked = cli_report(args, tmp_path / "fork.json", ROOT)
        rc_here, err_here, here = cli_report(
            args, tmp_path / "here.json", ROOT, GPUTRIAGE_NO_FORK="1"
        )
    assert "walked in child: True" in err_fork, err_fork
    assert "walked in child" not in err_here, err_here  # no child at all
    assert rc_fork == rc_here
    assert forked["findings"], forked
    by_key = {s["key"]: s["status"] for s in forked["sources"]}
    assert by_key["nvidia-smi"] == by_key["kubelet"] == "ok", by_key
    assert forked == here
