"""SSH overlapped with the API: the node connection starts as soon as the pod names its node
(``SshNodeSource.prepare``, called by the broker), against real sshd instances."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gputriage.evidence.broker import Broker
from gputriage.evidence.model import Evidence, Key, Status
from gputriage.evidence.sources import NODE_KEYS, NodeQuery
from gputriage.evidence.ssh import SshNodeSource
from tests.kubeapi import KubeAPI
from tests.sshd import NODE_NAME, SshLab

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _wait_for(predicate, seconds: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())


def test_prepare_connects_before_any_collect_and_collect_shares_it(
    lab: SshLab, dials: list
) -> None:
    source = SshNodeSource(lab.settings())
    try:
        # What the broker knows right after the pod: its node's name, no Node object yet.
        dialled = source.prepare(lab.query(address=NODE_NAME), 20)
        assert dialled.wait(20)  # set once the first hop's TCP connection is made
        assert _wait_for(lambda: source.connections_opened == 2)  # bastion + node
        assert lab.node.logins() == 1
        results = {key: source.collect(key, lab.query(), 20) for key in NODE_KEYS}
    finally:
        source.close()
    assert {k: e.status for k, e in results.items()} == {k: Status.OK for k in NODE_KEYS}
    assert source.connections_opened == 2 and lab.node.logins() == 1


def test_prepare_does_nothing_when_the_address_needs_the_node_object(
    lab: SshLab, dials: list, tmp_path: Path
) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host bastion\n  HostName 127.0.0.1\n")  # nothing for gpu-node-*
    source = SshNodeSource(lab.settings(config_path=str(config)))
    try:
        dialled = source.prepare(lab.query(address=NODE_NAME), 20)
        # Set at once (nothing to dial early): the broker does not hold the API back for it.
        assert dialled.wait(5)
        time.sleep(0.5)  # the background thread has long decided by now
        assert source.connections_opened == 0
        assert dials == []
    finally:
        source.close()


class _OneNode:
    """A cluster source with a pod on gpu-node-1 whose Node object answers slowly."""

    def __init__(self, node_delay: float) -> None:
        self.node_delay = node_delay
        self.node_answered = 0.0

    def keys(self) -> tuple[Key, ...]:
        return (Key.NODE,)

    def pod(self) -> Evidence:
        return Evidence(
            Key.POD,
            Status.OK,
            "",
            "{}",
            "test",
            {"metadata": {"name": "trainer-0", "namespace": "ml"}, "spec": {"nodeName": NODE_NAME}},
            "json",
        )

    def collect(self, key: Key, pod: Evidence) -> Evidence:
        time.sleep(self.node_delay)
        self.node_answered = time.monotonic()
        return Evidence(key, Status.OK, "", "{}", "test", {"metadata": {"name": NODE_NAME}}, "json")

    def node_query(self, pod: Evidence, node: Evidence | None) -> NodeQuery | str:
        return NodeQuery(NODE_NAME, NODE_NAME, "ml", "trainer-0")


def test_the_broker_connects_while_the_node_object_is_still_on_its_way(lab: SshLab) -> None:
    import asyncio

    source = SshNodeSource(lab.settings())
    cluster = _OneNode(node_delay=1.5)
    connected: list[float] = []
    watcher = threading.Thread(
        target=lambda: (
            _wait_for(lambda: source.connections_opened == 2) and connected.append(time.monotonic())
        )
    )
    watcher.start()
    try:
        evidence = asyncio.run(Broker(cluster, [source], timeout=20).gather())
    finally:
        watcher.join()
        source.close()
    assert evidence[Key.LSMOD].ok and evidence[Key.KUBELET_LOG].ok
    assert source.connections_opened == 2 and lab.node.logins() == 1
    # Logged in before the Node object answered (1.5 s after the pod).
    assert connected and connected[0] < cluster.node_answered


_CHILD = """
import json, sys
from gputriage.cli import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "paramiko": "paramiko" in sys.modules}))
"""


@pytest.mark.parametrize(("namespace", "contacted"), [("ml-dev", False), ("ml", True)])
def test_paramiko_is_imported_only_when_a_node_is_contacted(
    kube_api: KubeAPI, tmp_path: Path, namespace: str, contacted: bool
) -> None:
    """ml-dev/trainer-0 is Pending on no node; ml/trainer-0 runs on gpu-node-1 (reached, and
    refused, at a closed port on 127.0.0.1). SSH is on (the default) in both; ``--nodes 0``
    keeps the Pending pod's candidate nodes unread, so no node at all is contacted there."""
    config = kube_api.write_kubeconfig(tmp_path / "kc")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(f"Host gpu-node-*\n  HostName 127.0.0.1\n  Port {port}\n")
    argv = [
        "triage",
        "trainer-0",
        "-n",
        namespace,
        "--kubeconfig",
        str(config),
        "--ssh-config",
        str(ssh_config),
        "--request-timeout",
        "5",
        "--nodes",
        "0",
        "--report",
        "json",
        "-o",
        str(tmp_path / "r"),
    ]
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)},
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rc"] in (0, 3), done.stderr
    assert result["paramiko"] is contacted


def test_a_refused_early_connection_still_says_it_dialled(tmp_path: Path) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now: the dial is refused
    config = tmp_path / "ssh_config"
    config.write_text(f"Host {NODE_NAME}\n  HostName 127.0.0.1\n  Port {port}\n")
    from gputriage.evidence.ssh import SshSettings

    source = SshNodeSource(SshSettings(config_path=str(config)))
    try:
        dialled = source.prepare(NodeQuery(NODE_NAME, "", "ml", "trainer-0"), 20)
        assert dialled.wait(10)
        got = source.collect(Key.LSMOD, NodeQuery(NODE_NAME, "", "ml", "trainer-0"), 20)
    finally:
        source.close()
    assert got.status is Status.UNAVAILABLE or got.status is Status.ERROR, got
    assert source.connections_opened == 0
