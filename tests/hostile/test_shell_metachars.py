"""Shell metacharacters in names and settings are never executed, on the node or locally.

End to end: a live triage (:class:`gputriage.evidence.live.LiveSession`) against the test
Kubernetes API and a real sshd node (:class:`tests.sshd.SshLab`), where the pod, namespace,
node and container names, the pod UID and ``--since`` carry command substitutions, separators,
quotes and backticks. Every payload would create a canary file in the node's (empty) home
directory if any shell ever ran it. The node's dispatcher records each command it received,
so the test also checks that each value reached the node as one quoted argument.

Then the settings that name where to connect: ``--ssh-user`` and ``--node-address`` with
metacharacters, and an ssh_config using ``Match exec "... %h ..."`` (which paramiko runs
through a local shell with the host name substituted, as OpenSSH did before it started
refusing such host names: CVE-2023-51385).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from gputriage.cli import build_parser
from gputriage.evidence.model import Key, Status
from gputriage.evidence.sources import NODE_KEYS
from tests.kubeapi import KubeAPI
from tests.kubeapi.cluster import container, event, gpu_cluster, gpu_node, namespace, pod, running
from tests.live import open_live
from tests.sshd import KUBELET_LOG, SshLab

pytestmark = pytest.mark.integration

#: Each payload touches a canary named after where it was planted, in the node's $HOME.
NS = "ml;cd;touch c-ns"
POD = "trainer-$(cd;touch c-pod)"
NODE = "gpu-node-9`cd;touch c-node`"
CONTAINER = "main|cd;touch c-ctr"
UID = "6b1f0a6e'$(cd;touch c-uid)'"
SINCE = "2h' ; cd ; touch c-since ; '"
HOSTILE = {"ns": NS, "pod": POD, "node": NODE, "uid": UID, "since": SINCE}


@pytest.fixture
def api() -> Iterator[KubeAPI]:
    cluster = gpu_cluster()
    node = gpu_node(NODE, address="10.0.0.9")
    target = pod(
        POD,
        NS,
        node=NODE,
        containers=[container(CONTAINER, gpus=1)],
        statuses=[running(CONTAINER, restarts=1)],
    )
    target["metadata"]["uid"] = UID
    cluster.add(namespace(NS))
    cluster.add(node)
    cluster.add(target)
    cluster.add(event(target, "BackOff", f"Back-off restarting {CONTAINER}"))
    cluster.logs[(NS, POD, CONTAINER, False)] = "step 1\n"
    with KubeAPI(cluster) as server:
        yield server
        assert not server.mutations()


def canaries(lab: SshLab) -> list[str]:
    places = [lab.home, lab.tmp, lab.data, Path.cwd(), Path.home()]
    return sorted(str(p) for d in places if d.is_dir() for p in d.glob("c-*"))


def triage_args(api: KubeAPI, lab: SshLab, tmp: Path, *extra: str) -> argparse.Namespace:
    kubeconfig = api.write_kubeconfig(tmp / "kubeconfig")
    return build_parser().parse_args(
        [
            "triage",
            POD,
            "-n",
            NS,
            "--kubeconfig",
            str(kubeconfig),
            "--ssh-config",
            str(lab.config),
            "--known-hosts",
            str(lab.known_hosts),
            "--since",
            SINCE,
            "--request-timeout",
            "10",
            *extra,
        ]
    )


def collect(args: argparse.Namespace) -> dict[Key, Any]:
    session = open_live(args)
    try:
        return dict(session.collect_all())
    finally:
        session.close()


def test_names_from_the_cluster_reach_the_node_only_quoted(
    api: KubeAPI, lab: SshLab, tmp_path: Path
) -> None:
    hostile_line = (
        f'2026-03-05T10:09:00+0000 {NODE} kubelet[1187]: E0305 "Error syncing '
        f'pod" pod="{NS}/{POD}" podUID="{UID}"\n'
    )
    lab.write_data("kubelet.log", KUBELET_LOG + hostile_line)
    evidence = collect(triage_args(api, lab, tmp_path))

    assert evidence[Key.POD].ok and evidence[Key.POD].data["metadata"]["name"] == POD
    assert evidence[Key.CONTAINER_LOG].ok, evidence[Key.CONTAINER_LOG].detail
    node_status = {k.value: evidence[k].status for k in NODE_KEYS}
    assert node_status == {k.value: Status.OK for k in NODE_KEYS}, {
        k.value: evidence[k].detail for k in NODE_KEYS
    }
    assert hostile_line.strip() in evidence[Key.KUBELET_LOG].lines()  # matched literally
    assert canaries(lab) == [], "a name from the cluster was executed"

    commands = lab.node.commands()
    assert len(commands) >= len(NODE_KEYS)
    for command in commands:
        argv = shlex.split(command)
        assert argv[:2] == ["sh", "-c"] and len(argv) == 3, command
    kubelet_script = next(shlex.split(c)[2] for c in commands if "-u kubelet" in c)
    lexer = shlex.shlex(kubelet_script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    for value in (f"{NS}/{POD}", UID, SINCE):
        assert value in words, f"{value!r} did not reach the node as one argument"
    args = (lab.data / "journalctl.args").read_text().splitlines()
    assert args[args.index("--since") + 1] == SINCE  # byte for byte, one argument

    paths = [r.path for r in api.requests]
    assert f"/api/v1/namespaces/{quote(NS, safe='')}/pods/{quote(POD, safe='')}" in paths
    assert all(r.method == "GET" for r in api.requests)


def test_hostile_ssh_user_and_node_address_are_never_executed(
    api: KubeAPI, lab: SshLab, tmp_path: Path
) -> None:
    user = "root;cd;touch c-user"
    evidence = collect(triage_args(api, lab, tmp_path, "--ssh-user", user))
    assert canaries(lab) == []
    ssh = evidence[Key.DMESG]
    assert ssh.status is not Status.OK and "touch c-user" in ssh.detail, ssh.detail
    assert f"Invalid user {user}" in lab.node.log()  # it arrived as a user name, nothing more
    assert lab.node.commands() == []

    address = "127.0.0.1;cd;touch c-addr"
    evidence = collect(triage_args(api, lab, tmp_path, "--node-address", f"{NODE}={address}"))
    assert canaries(lab) == []
    for key in (Key.DMESG, Key.NVIDIA_SMI, Key.LSMOD):
        assert evidence[key].status is Status.UNAVAILABLE, evidence[key].detail
    assert lab.node.commands() == []


def test_ssh_config_match_blocks_do_not_break_node_access(
    api: KubeAPI, lab: SshLab, tmp_path: Path
) -> None:
    """A user's ssh_config with a ``Match`` block (common) must not turn SSH into an error."""
    text = lab.config.read_text()
    lab.config.write_text('Match exec "true"\n  ServerAliveInterval 30\n' + text)
    evidence = collect(triage_args(api, lab, tmp_path))
    assert evidence[Key.LSMOD].status is Status.OK, evidence[Key.LSMOD].detail


@pytest.mark.parametrize("via", ["node-address-option", "node-internal-ip"])
def test_match_exec_never_sees_a_hostile_host_name(
    api: KubeAPI, lab: SshLab, tmp_path: Path, via: str
) -> None:
    """``Match exec`` substitutes %h into a local shell command: a host name with shell
    metacharacters (a node InternalIP, which whoever controls the node's kubelet can set, or
    a mistyped ``--node-address``) must be refused before any ssh_config lookup."""
    text = lab.config.read_text().replace("Host gpu-node-*", "Host gpu-node-1")
    lab.config.write_text(
        'Match exec "test %h = never-this-host"\n  ServerAliveInterval 30\n' + text
    )
    address = f"10.0.0.9;touch {lab.home}/c-match-exec;#"  # "#": the rest of the line
    extra: tuple[str, ...] = ()
    if via == "node-address-option":
        extra = ("--node-address", f"{NODE}={address}")
    else:
        node = api.cluster.get("", "nodes", "", NODE)
        assert node is not None
        node["status"]["addresses"][0]["address"] = address
    evidence = collect(triage_args(api, lab, tmp_path, *extra))
    assert canaries(lab) == [], "ssh_config Match exec ran a host name through the shell"
    ev = evidence[Key.LSMOD]
    assert ev.status is not Status.OK
    assert "KeyError" not in ev.detail, ev.detail
