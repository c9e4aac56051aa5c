"""A live triage (fake HTTPS Kubernetes API + real sshd through a ProxyJump hop) and the replay
of the bundle `collect` wrote from the same servers give identical verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputriage.cli import main
from tests.conftest import require_tool
from tests.kubeapi import KubeAPI
from tests.sshd import NODE_PRIVATE_IP, SshLab

pytestmark = pytest.mark.integration


def _ssh_flags(lab: SshLab) -> list[str]:
    return ["--ssh-config", str(lab.config), "--known-hosts", str(lab.known_hosts)]


def test_live_run_and_replay_of_its_bundle_agree(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    require_tool("sshd", "/usr/sbin/sshd")
    with SshLab(tmp_path / "ssh") as lab:
        common = ["-n", "ml", "--kubeconfig", str(kubeconfig), *_ssh_flags(lab)]
        live = tmp_path / "live.json"
        rc_live = main(["trainer-0", *common, "--report", "json", "-o", str(live)])
        bundle = tmp_path / "bundle"
        assert main(["collect", "trainer-0", *common, "-o", str(bundle)]) == 0
        commands = lab.node.commands()
    replay = tmp_path / "replay.json"
    rc_replay = main(["trainer-0", "--from", str(bundle), "--report", "json", "-o", str(replay)])

    a, b = json.loads(live.read_text()), json.loads(replay.read_text())
    assert rc_live == rc_replay
    assert [f["id"] for f in a["findings"]] == [f["id"] for f in b["findings"]]
    assert [(w["id"], w["target"]) for w in a["walk"]] == [
        (w["id"], w["target"]) for w in b["walk"]
    ]
    # Node evidence really came over SSH (not skipped), and the private address was not used.
    by_key = {s["key"]: s for s in a["sources"]}
    for key in ("kubelet", "dmesg", "nvidia-smi"):
        assert by_key[key]["status"] == "ok", by_key[key]
    assert any("journalctl" in c for c in commands) and any("nvidia-smi" in c for c in commands)
    assert NODE_PRIVATE_IP not in json.dumps(by_key)
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["sources"]["dmesg"]["status"] == "ok"
