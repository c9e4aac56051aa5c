"""ssh_config resolution matches OpenSSH's, and nodes are reached at the right address."""

from __future__ import annotations

import argparse
import getpass
import subprocess
import time
from pathlib import Path

import pytest

from gputriage.commands.options import add_node_access_arguments, node_access_from_args
from gputriage.errors import GputriageError
from gputriage.evidence.local import LocalNodeSource
from gputriage.evidence.model import Key, Status
from gputriage.evidence.nodes import node_address, node_source, parse_node_addresses
from gputriage.evidence.sources import NodeQuery
from gputriage.evidence.ssh import SshNodeSource, SshSettings
from gputriage.evidence.sshconfig import (
    Hop,
    Route,
    SshConfigError,
    UnsafeHostError,
    check_host,
    has_host_entry,
    load_config,
    parse_jumps,
    resolve_route,
    unsafe_host_reason,
)
from gputriage.options import NodeAccess
from tests.conftest import require_tool

CONFIG = """\
Host bastion
  HostName 127.0.0.1
  Port 2201
  User jump
  IdentityFile ~/.ssh/bastion_key

Host jump2
  HostName 192.0.2.10
  User hop2

Host gpu-node-*
  HostName %h.gpu.example.net
  User ops
  Port 2222
  IdentityFile ~/.ssh/id_gpu
  IdentityFile ~/.ssh/id_backup
  IdentitiesOnly yes
  UserKnownHostsFile ~/.ssh/known_gpu ~/.ssh/known_more
  ProxyJump bastion,admin@jump2:2022
  ConnectTimeout 7

Host 10.0.*
  ProxyJump bastion

Host loop-a
  ProxyJump loop-b
Host loop-b
  ProxyJump loop-a
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config"
    path.write_text(CONFIG)
    return path


def test_route_through_a_two_hop_proxyjump(config_file: Path) -> None:
    route = resolve_route("gpu-node-3", load_config(str(config_file)))
    assert [(h.alias, h.hostname, h.port, h.user) for h in route.hops] == [
        ("bastion", "127.0.0.1", 2201, "jump"),
        ("jump2", "192.0.2.10", 2022, "admin"),
        ("gpu-node-3", "gpu-node-3.gpu.example.net", 2222, "ops"),
    ]
    home = str(Path("~").expanduser())
    target = route.target
    assert target.identity_files == (f"{home}/.ssh/id_gpu", f"{home}/.ssh/id_backup")
    assert target.identities_only
    assert target.known_hosts_files == (f"{home}/.ssh/known_gpu", f"{home}/.ssh/known_more")
    assert target.connect_timeout == 7.0
    assert route.jumps[0].identity_files == (f"{home}/.ssh/bastion_key",)
    assert route.describe() == (
        "jump@bastion (127.0.0.1):2201 -> admin@jump2 (192.0.2.10):2022"
        " -> ops@gpu-node-3 (gpu-node-3.gpu.example.net):2222"
    )


def test_resolution_agrees_with_ssh_dash_g(config_file: Path) -> None:
    ssh = require_tool("ssh")
    cfg = load_config(str(config_file))
    for alias in ("gpu-node-3", "bastion", "10.0.3.7"):
        out = subprocess.run(
            [ssh, "-G", "-F", str(config_file), alias], capture_output=True, text=True, check=True
        ).stdout
        effective: dict[str, list[str]] = {}
        for line in out.splitlines():
            key, _, value = line.partition(" ")
            effective.setdefault(key, []).append(value)
        hop = resolve_route(alias, cfg).target
        assert hop.hostname == effective["hostname"][0]
        assert hop.port == int(effective["port"][0])
        assert hop.user == effective["user"][0]
        assert effective.get("proxyjump", ["none"])[0] == (
            cfg.lookup(alias).get("proxyjump") or "none"
        )
        if alias == "gpu-node-3":
            ssh_view = [str(Path(f).expanduser()) for f in effective["identityfile"]]
            assert list(hop.identity_files) == ssh_view


def test_override_user_applies_to_the_target_only(config_file: Path) -> None:
    route = resolve_route("gpu-node-1", load_config(str(config_file)), user="sre")
    assert [h.user for h in route.hops] == ["jump", "admin", "sre"]


def test_unknown_host_defaults(config_file: Path) -> None:
    route = resolve_route("198.51.100.4", load_config(str(config_file)))
    (hop,) = route.hops
    assert (hop.hostname, hop.port, hop.user, hop.identity_files) == (
        "198.51.100.4",
        22,
        getpass.getuser(),
        (),
    )


def test_ip_pattern_routes_through_the_bastion(config_file: Path) -> None:
    route = resolve_route("10.0.3.7", load_config(str(config_file)))
    assert [h.alias for h in route.hops] == ["bastion", "10.0.3.7"]


def test_proxyjump_loop_is_reported(config_file: Path) -> None:
    with pytest.raises(SshConfigError, match="longer than 8 hops"):
        resolve_route("loop-a", load_config(str(config_file)))


def test_parse_jumps() -> None:
    assert parse_jumps("bastion") == [("", "bastion", None)]
    assert parse_jumps("ops@b1:2200, ssh://me@[2001:db8::1]:22") == [
        ("ops", "b1", 2200),
        ("me", "2001:db8::1", 22),
    ]
    assert parse_jumps("none") == [] and parse_jumps("") == []
    with pytest.raises(SshConfigError, match="cannot read ProxyJump hop 'a@b@c:x'"):
        parse_jumps("a@b@c:x")


def test_missing_configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/config: an empty config
    assert load_config(None).lookup("x") == {"hostname": "x"}
    with pytest.raises(SshConfigError, match="does not exist"):
        load_config(str(tmp_path / "nope"))


def test_has_host_entry(config_file: Path) -> None:
    cfg = load_config(str(config_file))
    assert has_host_entry(cfg, "gpu-node-12")
    assert not has_host_entry(cfg, "cpu-node-1")


NODE = {
    "metadata": {"name": "gpu-7"},
    "status": {
        "addresses": [
            {"type": "Hostname", "address": "gpu-7.internal"},
            {"type": "InternalIP", "address": "10.0.3.7"},
        ]
    },
}


def test_node_address_preference() -> None:
    assert node_address(NODE, {}) == "10.0.3.7"
    assert node_address(NODE, {"gpu-7": "bastion-side-name"}) == "bastion-side-name"
    assert node_address(NODE, {"other": "x"}) == "10.0.3.7"
    hostname_only = {
        "metadata": {"name": "gpu-8"},
        "status": {"addresses": [{"type": "Hostname", "address": "gpu-8.lan"}]},
    }
    assert node_address(hostname_only, {}) == "gpu-8.lan"
    assert node_address({"metadata": {"name": "gpu-9"}}, {}) == "gpu-9"
    assert node_address({"status": {"addresses": "garbage"}}, {}) == ""


def test_parse_node_addresses() -> None:
    assert parse_node_addresses(["gpu-7=10.1.1.1", " gpu-8 = gpu-8.example "]) == {
        "gpu-7": "10.1.1.1",
        "gpu-8": "gpu-8.example",
    }
    with pytest.raises(GputriageError, match="wants NODE=HOST"):
        parse_node_addresses(["gpu-7"])


def parse(*argv: str) -> NodeAccess:
    p = argparse.ArgumentParser()
    add_node_access_arguments(p)
    return node_access_from_args(p.parse_args(list(argv)))


def test_node_source_from_options(config_file: Path) -> None:
    assert node_source(parse("--ssh", "off")) is None
    local = node_source(parse("--local", "--sudo"))
    assert isinstance(local, LocalNodeSource) and local.sudo
    ssh = node_source(
        parse(
            "--ssh-config",
            str(config_file),
            "--ssh-user",
            "sre",
            "--node-address",
            "gpu-7=jump2",
            "--known-hosts",
            "/tmp/kh",
            "--accept-new-host-key",
            "--sudo",
        )
    )
    assert isinstance(ssh, SshNodeSource)
    s = ssh.settings
    assert (
        s.config_path,
        s.user,
        dict(s.overrides),
        s.known_hosts,
        s.accept_new_host_key,
        s.sudo,
    ) == (str(config_file), "sre", {"gpu-7": "jump2"}, "/tmp/kh", True, True)
    # Where each node goes: the override, a config Host entry for the name, else the address.
    q = NodeQuery(node="gpu-7", address="10.0.3.7")
    assert ssh.alias_for(q) == "jump2"
    assert ssh.alias_for(NodeQuery(node="gpu-node-4", address="10.0.9.9")) == "gpu-node-4"
    assert ssh.alias_for(NodeQuery(node="cpu-1", address="10.0.9.9")) == "10.0.9.9"


def test_has_host_entry_tolerates_match_blocks(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(
        'Match exec "true"\n  ServerAliveInterval 30\n\n'
        + CONFIG
        + "\nMatch host gpu-*\n  User other\n"
    )
    cfg = load_config(str(path))
    assert has_host_entry(cfg, "gpu-node-12")
    assert not has_host_entry(cfg, "cpu-node-1")


@pytest.mark.parametrize("via", ["override", "address"])
@pytest.mark.parametrize(
    "bad", ["10.0.0.9;touch X;#", "$(touch X)", "a b", "-oProxyCommand=x", "`id`", "h'q"]
)
def test_unsafe_host_names_are_refused_before_any_ssh_config_lookup(
    tmp_path: Path, via: str, bad: str
) -> None:
    canary = tmp_path / "canary"
    path = tmp_path / "config"
    path.write_text(f'Match exec "touch {canary}"\n  ServerAliveInterval 30\n')
    overrides = {"gpu-7": bad} if via == "override" else {}
    ssh = SshNodeSource(SshSettings(config_path=str(path), overrides=overrides))
    ev = ssh.collect(Key.LSMOD, NodeQuery(node="gpu-7", address=bad), 5.0)
    assert ev.status is Status.UNAVAILABLE, ev.detail
    assert "refusing to connect" in ev.detail and repr(bad) in ev.detail, ev.detail
    assert not canary.exists()
    with pytest.raises(UnsafeHostError):
        check_host(bad)


@pytest.mark.parametrize(
    "good", ["10.0.0.9", "gpu-7.example.net", "fe80::1%eth0", "[::1]", "node_1"]
)
def test_plain_host_names_and_addresses_pass(good: str) -> None:
    assert unsafe_host_reason("") and unsafe_host_reason("[]")
    assert unsafe_host_reason(good) == ""
    assert check_host(good) == good


def test_identity_file_turns_off_default_key_search(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import paramiko

    seen: list[dict[str, object]] = []

    def connect(self: paramiko.SSHClient, hostname: str, port: int = 22, **kwargs: object) -> None:
        seen.append(kwargs)
        raise paramiko.AuthenticationException("no")

    monkeypatch.setattr(paramiko.SSHClient, "connect", connect)
    key = tmp_path / "id"
    key.write_text("x")
    ssh = SshNodeSource(SshSettings(known_hosts=str(tmp_path / "kh")))
    for files, look in (((str(key),), False), ((), True)):
        hop = Hop(alias="n", hostname="127.0.0.1", user="u", identity_files=files)
        with pytest.raises(Exception, match="refused"):
            ssh._login(hop, Route((hop,)), None, time.monotonic() + 5, [])
        assert seen[-1]["look_for_keys"] is look


def test_match_exec_runs_quietly_and_never_with_an_unsafe_node_name(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    path = tmp_path / "config"
    path.write_text(
        f'Match exec "test %h = gpu-node-1"\n  User matched\n'
        f'Match exec "touch {canary}.%h"\n  Port 2222\n' + CONFIG
    )
    cfg = load_config(str(path))
    assert resolve_route("gpu-node-1", cfg).target.user == "matched"  # stdin not touched
    hostile = "gpu-node-9`touch X`"
    assert has_host_entry(cfg, hostile)  # Host gpu-node-* matches it
    with pytest.raises(UnsafeHostError, match="refusing to run ssh_config Match exec"):
        resolve_route(hostile, cfg)
    made = sorted(p.name for p in tmp_path.glob("canary*"))
    assert "canary.gpu-node-1" in made  # Match exec ran, for safe names only
    assert not [m for m in made if "gpu-node-9" in m] and not Path("X").exists()
