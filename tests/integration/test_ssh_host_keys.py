"""Host keys are checked strictly, and logins use ssh_config keys or the SSH agent."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gputriage.evidence.model import Key, Status
from gputriage.evidence.ssh import SshNodeSource
from tests.conftest import require_tool
from tests.sshd import SshLab, keygen

pytestmark = pytest.mark.integration


def lsmod(lab: SshLab, **settings: object) -> object:
    source = SshNodeSource(lab.settings(**settings))
    try:
        return source.collect(Key.LSMOD, lab.query(), timeout=20)
    finally:
        source.close()


def test_unknown_node_key_is_refused_with_its_fingerprint(lab: SshLab) -> None:
    lab.known_hosts.write_text(lab.bastion.known_hosts_line())  # the node is not known
    ev = lsmod(lab)
    assert ev.status is Status.ERROR
    assert (
        f"host key of [127.0.0.1]:{lab.node.port} is not in known_hosts "
        f"({lab.known_hosts}): the server offered ssh-ed25519 {lab.node.fingerprint()}"
    ) in ev.detail
    assert "--accept-new-host-key" in ev.detail
    assert lab.node.commands() == []  # refused before anything ran
    assert lab.known_hosts.read_text() == lab.bastion.known_hosts_line()


def test_unknown_bastion_key_is_refused_too(lab: SshLab) -> None:
    lab.known_hosts.write_text(lab.node.known_hosts_line())
    ev = lsmod(lab)
    assert ev.status is Status.ERROR
    assert f"[127.0.0.1]:{lab.bastion.port}" in ev.detail
    assert lab.bastion.fingerprint() in ev.detail
    assert "(connecting to root@bastion (127.0.0.1)" in ev.detail


def test_accept_new_host_key_trusts_and_saves_an_unknown_key(lab: SshLab) -> None:
    lab.known_hosts.write_text(lab.bastion.known_hosts_line())
    ev = lsmod(lab, accept_new_host_key=True)
    assert ev.status is Status.OK
    assert (
        f"accepted new host key of [127.0.0.1]:{lab.node.port}: ssh-ed25519 "
        f"{lab.node.fingerprint()} (saved to {lab.known_hosts})"
    ) in ev.detail
    key_type, key_b64 = lab.node.host_key_pub.split()[:2]
    assert lab.known_hosts.read_text() == (
        lab.bastion.known_hosts_line() + f"[127.0.0.1]:{lab.node.port} {key_type} {key_b64}\n"
    )
    # Now known: a strict run succeeds, and OpenSSH itself agrees with what was saved.
    assert lsmod(lab).status is Status.OK
    found = subprocess.run(
        ["ssh-keygen", "-F", f"[127.0.0.1]:{lab.node.port}", "-f", str(lab.known_hosts)],
        capture_output=True,
        text=True,
    )
    assert found.returncode == 0 and lab.node.host_key_pub.split()[1] in found.stdout


@pytest.mark.parametrize("accept_new", [False, True])
def test_changed_host_key_is_always_refused(lab: SshLab, tmp_path: Path, accept_new: bool) -> None:
    impostor = keygen(tmp_path / "old_host_key", "old")
    old_fp = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(tmp_path / "old_host_key.pub")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()[1]
    before = f"[127.0.0.1]:{lab.node.port} {impostor}\n" + lab.bastion.known_hosts_line()
    lab.known_hosts.write_text(before)
    ev = lsmod(lab, accept_new_host_key=accept_new)
    assert ev.status is Status.ERROR
    assert (
        f"host key of [127.0.0.1]:{lab.node.port} CHANGED: known_hosts has ssh-ed25519 "
        f"{old_fp} but the server offered ssh-ed25519 {lab.node.fingerprint()}"
    ) in ev.detail
    assert "refuses it even with --accept-new-host-key" in ev.detail
    assert lab.known_hosts.read_text() == before  # nothing was rewritten
    assert lab.node.commands() == []


def test_login_with_a_key_only_in_the_ssh_agent(
    lab: SshLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_tool("ssh-agent")
    require_tool("ssh-add")
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if sock.exists():
                break
            subprocess.run(["sleep", "0.01"])
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(
            ["ssh-add", "-q", str(lab.client_key)], check=True, env=env, capture_output=True
        )
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))  # no ~/.ssh/id_* to find
        # The config names a key file the server does not accept: only the agent can log in.
        keygen(tmp_path / "stranger", "stranger")
        lab.write_config(identity=tmp_path / "stranger")
        ev = lsmod(lab)
    finally:
        agent.terminate()
        agent.wait()
    assert ev.status is Status.OK, ev.detail
    assert lab.node.logins() == 1


def test_refused_login_is_forbidden_and_names_what_was_tried(
    lab: SshLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    keygen(tmp_path / "stranger", "stranger")
    lab.write_config(
        identity=tmp_path / "stranger", node_extra=f"  IdentityFile {tmp_path / 'missing_key'}\n"
    )
    ev = lsmod(lab)
    assert ev.status is Status.FORBIDDEN
    assert "SSH login as root on root@bastion (127.0.0.1)" in ev.detail
    assert f"tried {tmp_path / 'stranger'}" in ev.detail
