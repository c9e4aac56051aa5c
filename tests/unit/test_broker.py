"""The broker: pod first, then everything at once; slow, dead or broken sources stay contained."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping

from gputriage.evidence.broker import NODE_HEAD_START_S, Broker, most_informative
from gputriage.evidence.model import Evidence, EvidenceSet, Key, Status
from gputriage.evidence.sources import NODE_KEYS, NodeQuery

POD = {
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ml", "uid": "u1"},
    "spec": {"nodeName": "n1"},
}


def ok(key: Key, text: str = "x") -> Evidence:
    return Evidence(key, Status.OK, "fine", text, f"fake/{key.value}")


class FakeCluster:
    """Keys that sleep for given seconds, raise, or answer the wrong thing."""

    def __init__(
        self,
        delays: Mapping[Key, float] | None = None,
        *,
        pod_delay: float = 0.0,
        keys: tuple[Key, ...] = (Key.EVENTS, Key.NODE, Key.QUOTA),
    ) -> None:
        self.delays = dict(delays or {})
        self.pod_delay = pod_delay
        self._keys = keys
        self.pod_done_at = 0.0
        self.started: dict[Key, float] = {}
        self.node_seen: list[Evidence | None] = []
        self.raise_for: set[Key] = set()
        self.wrong_for: set[Key] = set()

    def keys(self) -> tuple[Key, ...]:
        return self._keys

    def pod(self) -> Evidence:
        time.sleep(self.pod_delay)
        self.pod_done_at = time.monotonic()
        return Evidence(Key.POD, Status.OK, "object", "{}", "fake/pod", POD, "json")

    def collect(self, key: Key, pod: Evidence) -> Evidence:
        self.started[key] = time.monotonic()
        assert pod.data is POD
        time.sleep(self.delays.get(key, 0.0))
        if key in self.raise_for:
            raise RuntimeError("kaboom")
        if key in self.wrong_for:
            return ok(Key.DMESG)
        return ok(key)

    def node_query(self, pod: Evidence, node: Evidence | None) -> NodeQuery | str:
        self.node_seen.append(node)
        return NodeQuery("n1", "127.0.0.1", "ml", "p", "u1")


class FakeNode:
    def __init__(self, name: str, answers: Mapping[Key, Evidence], delay: float = 0.0) -> None:
        self.name = name
        self.answers = dict(answers)
        self.delay = delay
        self.calls: list[tuple[Key, float]] = []
        self.closed = False

    def collect(self, key: Key, query: NodeQuery, timeout: float) -> Evidence:
        self.calls.append((key, timeout))
        time.sleep(self.delay)
        return self.answers.get(key) or Evidence(key, Status.UNAVAILABLE, f"{self.name}: no")

    def close(self) -> None:
        self.closed = True


def run(broker: Broker) -> list[Evidence]:
    async def go() -> list[Evidence]:
        return [e async for e in broker.stream()]

    return asyncio.run(go())


def test_pod_first_then_keys_as_they_finish() -> None:
    cluster = FakeCluster({Key.EVENTS: 0.3, Key.NODE: 0.0, Key.QUOTA: 0.15}, pod_delay=0.05)
    got = run(Broker(cluster, node_keys=()))
    assert [e.key for e in got] == [Key.POD, Key.NODE, Key.QUOTA, Key.EVENTS]
    assert min(cluster.started.values()) >= cluster.pod_done_at  # everything waited for the pod
    assert got[3].elapsed_s >= 0.3 and got[1].elapsed_s < 0.1


def test_total_is_the_slowest_not_the_sum() -> None:
    keys = (
        Key.EVENTS,
        Key.NODE,
        Key.QUOTA,
        Key.NODES,
        Key.NODE_PODS,
        Key.NODE_EVENTS,
        Key.OWNER_EVENTS,
        Key.RUNTIME_CLASSES,
        Key.RESOURCE_CLAIMS,
        Key.RESOURCE_SLICES,
        Key.DEVICE_CLASSES,
        Key.DEVICE_PLUGIN_LOG,
        Key.CONTAINER_LOG,
        Key.CONTAINER_LOG_PREVIOUS,
    )
    cluster = FakeCluster(dict.fromkeys(keys, 0.3), keys=keys)
    node = FakeNode("ssh", {k: ok(k) for k in NODE_KEYS}, delay=0.3)
    started = time.monotonic()
    got = run(Broker(cluster, [node]))
    took = time.monotonic() - started
    assert len(got) == 1 + len(keys) + len(NODE_KEYS) and all(e.ok for e in got)
    # 20 calls of 0.3 s each: 6 s in a row; side by side about the time of one or two.
    assert took < 1.5, took


def test_a_stuck_key_times_out_without_delaying_others() -> None:
    cluster = FakeCluster({Key.EVENTS: 2.0, Key.QUOTA: 0.1})
    started = time.monotonic()
    got = {e.key: e for e in run(Broker(cluster, timeout=0.2, deadline=0.5, node_keys=()))}
    took = time.monotonic() - started
    assert got[Key.EVENTS].status is Status.TIMEOUT
    assert got[Key.EVENTS].detail == "no answer within 0.5 s for the pod's events"
    assert got[Key.QUOTA].ok and got[Key.NODE].ok
    assert took < 1.5, took


def test_a_raising_or_lying_source_becomes_an_error() -> None:
    cluster = FakeCluster()
    cluster.raise_for.add(Key.EVENTS)
    cluster.wrong_for.add(Key.QUOTA)
    got = {e.key: e for e in run(Broker(cluster, node_keys=()))}
    assert got[Key.EVENTS].status is Status.ERROR
    assert got[Key.EVENTS].detail == (
        "internal error while collecting the pod's events: RuntimeError: kaboom"
    )
    assert got[Key.QUOTA].status is Status.ERROR
    assert got[Key.QUOTA].detail == "internal error: the source answered Evidence for quota"
    assert got[Key.NODE].ok


def test_node_keys_wait_for_the_node_and_first_ok_wins() -> None:
    cluster = FakeCluster({Key.NODE: 0.2})
    ssh = FakeNode("ssh", {Key.DMESG: ok(Key.DMESG, "ssh dmesg")})
    proxy = FakeNode(
        "kube-node-log",
        {Key.DMESG: ok(Key.DMESG, "proxy dmesg"), Key.KUBELET_LOG: ok(Key.KUBELET_LOG, "journal")},
    )
    got = {e.key: e for e in run(Broker(cluster, [ssh, proxy], timeout=3))}
    assert len(cluster.node_seen) == len(NODE_KEYS)
    assert all(n is not None and n.key is Key.NODE for n in cluster.node_seen)
    assert got[Key.DMESG].raw == "ssh dmesg"
    assert (Key.DMESG, 3) not in proxy.calls  # the first source answered
    assert got[Key.KUBELET_LOG].raw == "journal"  # the second source filled in
    assert (Key.KUBELET_LOG, 3) in ssh.calls and (Key.KUBELET_LOG, 3) in proxy.calls


def test_when_every_node_source_fails_the_most_informative_is_kept() -> None:
    cluster = FakeCluster()
    ssh = FakeNode(
        "ssh", {Key.LSMOD: Evidence(Key.LSMOD, Status.TIMEOUT, "ssh n1: no answer in 3 s")}
    )
    proxy = FakeNode(
        "kube-node-log",
        {Key.LSMOD: Evidence(Key.LSMOD, Status.UNAVAILABLE, "only the kubelet journal")},
    )
    got = {e.key: e for e in run(Broker(cluster, [proxy, ssh]))}
    lsmod = got[Key.LSMOD]
    assert lsmod.status is Status.TIMEOUT
    assert lsmod.detail == (
        "ssh: ssh n1: no answer in 3 s (also tried kube-node-log: "
        "unavailable: only the kubelet journal)"
    )


def test_most_informative_ranks_error_over_forbidden_over_timeout() -> None:
    attempts = [
        ("a", Evidence(Key.DMESG, Status.UNAVAILABLE, "u")),
        ("b", Evidence(Key.DMESG, Status.TIMEOUT, "t")),
        ("c", Evidence(Key.DMESG, Status.FORBIDDEN, "f")),
        ("d", Evidence(Key.DMESG, Status.ERROR, "e")),
    ]
    assert most_informative(attempts).status is Status.ERROR
    assert most_informative(attempts[:3]).status is Status.FORBIDDEN
    assert most_informative(attempts[:1]).detail == "a: u"


def test_a_hung_node_source_is_bounded_by_its_timeout() -> None:
    cluster = FakeCluster()
    hung = FakeNode("ssh", {}, delay=2.0)
    started = time.monotonic()
    got = {e.key: e for e in run(Broker(cluster, [hung], timeout=0.2, node_timeout=0.2))}
    assert time.monotonic() - started < 3.0
    assert got[Key.DMESG].status is Status.TIMEOUT
    assert got[Key.DMESG].detail.startswith("ssh: no answer within 1.2 s")


def test_no_node_sources_or_no_node() -> None:
    got = {e.key: e for e in run(Broker(FakeCluster()))}
    assert got[Key.KUBELET_LOG].status is Status.UNAVAILABLE
    assert got[Key.KUBELET_LOG].detail == (
        "no node access configured for n1: use SSH or "
        "--local to read the kubelet journal on the node"
    )

    class Unscheduled(FakeCluster):
        def node_query(self, pod: Evidence, node: Evidence | None) -> NodeQuery | str:
            return "the pod is not scheduled to a node yet"

    got = {e.key: e for e in run(Broker(Unscheduled(), [FakeNode("ssh", {})]))}
    assert {got[k].detail for k in NODE_KEYS} == {"the pod is not scheduled to a node yet"}


def test_stopping_early_cancels_the_rest() -> None:
    cluster = FakeCluster({Key.EVENTS: 0.5, Key.QUOTA: 0.5, Key.NODE: 0.5})
    before = threading.active_count()

    async def first_only() -> Evidence:
        stream = Broker(cluster, node_keys=()).stream()
        first = await anext(stream)
        await stream.aclose()
        return first

    started = time.monotonic()
    first = asyncio.run(first_only())
    assert first.key is Key.POD
    assert time.monotonic() - started < 0.45  # did not wait for the 0.5 s keys
    time.sleep(0.7)
    assert threading.active_count() <= before + 1


def test_gather_and_keys() -> None:
    broker = Broker(FakeCluster(), [FakeNode("ssh", {})])
    assert broker.keys() == (Key.POD, Key.EVENTS, Key.NODE, Key.QUOTA, *NODE_KEYS)
    evidence = asyncio.run(broker.gather())
    assert isinstance(evidence, EvidenceSet)
    assert set(evidence) == set(broker.keys())


class PreparingNode(FakeNode):
    """A node source that starts connecting when the pod names its node (like SSH), and says
    so ``dial_after`` seconds later (never, for None)."""

    def __init__(self, dial_after: float | None, *, fail: bool = False) -> None:
        super().__init__("ssh", {k: ok(k) for k in NODE_KEYS})
        self.dial_after = dial_after
        self.fail = fail
        self.prepared_at = 0.0
        self.dialled_at = 0.0

    def prepare(self, query: NodeQuery, timeout: float) -> threading.Event:
        if self.fail:
            raise RuntimeError("no early connection for you")
        self.prepared_at = time.monotonic()
        dialled = threading.Event()
        if self.dial_after is not None:

            def dial() -> None:
                time.sleep(self.dial_after or 0.0)
                self.dialled_at = time.monotonic()
                dialled.set()

            threading.Thread(target=dial, daemon=True).start()
        return dialled


def test_the_api_waits_for_the_node_connection_to_be_dialled() -> None:
    cluster = FakeCluster()
    node = PreparingNode(dial_after=0.08)
    got = run(Broker(cluster, [node]))
    assert all(e.ok for e in got)
    assert node.prepared_at >= cluster.pod_done_at
    assert min(cluster.started.values()) >= node.dialled_at > 0


def test_the_head_start_is_bounded_and_optional() -> None:
    # A connection that never says it dialled holds the API back NODE_HEAD_START_S at most.
    cluster = FakeCluster()
    node = PreparingNode(dial_after=None)
    got = run(Broker(cluster, [node]))
    assert all(e.ok for e in got)
    waited = min(cluster.started.values()) - node.prepared_at
    assert NODE_HEAD_START_S - 0.01 <= waited < NODE_HEAD_START_S + 0.5, waited
    # A source without prepare, or whose prepare fails, holds nothing back.
    for nodes in ([FakeNode("ssh", {})], [PreparingNode(dial_after=5.0, fail=True)]):
        cluster = FakeCluster()
        run(Broker(cluster, nodes))
        assert min(cluster.started.values()) - cluster.pod_done_at < NODE_HEAD_START_S
