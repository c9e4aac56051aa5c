"""Run every evidence source at once and hand each result over as soon as it lands.

The pod comes first (the other keys need its node, uid and owner); then a node source that can
connect already starts doing so, and every cluster key and every node key start together (the
cluster keys once the node connection has been dialled, see :data:`NODE_HEAD_START_S`), each
blocking call in its own thread, each awaited under a deadline on top of the client's own
timeout (``asyncio.wait_for`` cannot stop a thread, so the call must bound itself too). One
slow or dead source never delays the others: total time is the slowest key, not the sum. Node
keys wait only for the node object (for its address) and then try the node sources in order:
the first OK answer wins, else the most informative failure.

Nothing here raises: a source that times out, raises or returns nonsense becomes an Evidence
with status ``timeout`` or ``error`` and words saying so.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator, Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol

from gputriage.evidence.model import DESCRIPTIONS, Evidence, EvidenceSet, Key, Status
from gputriage.evidence.sources import NODE_KEYS, NodeQuery, NodeSource
from gputriage.options import DEFAULT_REQUEST_TIMEOUT

#: How long the other API requests wait, at most, for an early node connection to be dialled.
#: Connecting, logging in and running the node's commands is the longest chain of a
#: collection; Python runs one thread at a time, and ~20 API requests handled at once would
#: slow its start (importing the SSH client, the key exchange) by as much as they take, while
#: they finish well before the node's commands anyway.
NODE_HEAD_START_S = 0.15
#: When every node source failed, the failure shown is the first of these statuses found.
_INFORMATIVE = (Status.ERROR, Status.FORBIDDEN, Status.TIMEOUT, Status.UNAVAILABLE)


class ClusterSource(Protocol):
    """Evidence about the target pod from the cluster (the Kubernetes API, or a fake)."""

    def keys(self) -> tuple[Key, ...]:
        """Keys besides the pod."""
        ...

    def pod(self) -> Evidence:
        """The pod object. Blocking, bounded, never raises."""
        ...

    def collect(self, key: Key, pod: Evidence) -> Evidence:
        """One key, given the pod. Blocking, bounded, never raises."""
        ...

    def node_query(self, pod: Evidence, node: Evidence | None) -> NodeQuery | str:
        """What to ask the pod's node, or why there is no node to ask."""
        ...


@dataclass(frozen=True)
class FollowUp:
    """A key collected once the pod and the cluster keys it ``needs`` have landed (candidate
    nodes of an unscheduled pod need the node list). ``collect(pod, needed)`` is blocking,
    bounded, never raises; it is awaited for ``deadline`` seconds."""

    key: Key
    needs: tuple[Key, ...]
    collect: Callable[[Evidence, Mapping[Key, Evidence]], Evidence]
    deadline: float


class Broker:
    """Concurrent collection from one cluster source and a list of node sources.

    ``timeout`` is what each blocking call is given (the client's own timeout); a cluster key
    may make several calls, so it is awaited for ``deadline`` (default three timeouts). Each
    node source gets ``node_timeout`` (default ``timeout``) plus a second of grace.
    """

    def __init__(
        self,
        cluster: ClusterSource,
        node_sources: Sequence[NodeSource] = (),
        *,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
        deadline: float | None = None,
        node_timeout: float | None = None,
        node_keys: tuple[Key, ...] = NODE_KEYS,
        followups: Sequence[FollowUp] = (),
    ) -> None:
        self.cluster = cluster
        self.followups = tuple(followups)
        self.node_sources = tuple(node_sources)
        self.timeout = timeout
        self.deadline = deadline if deadline is not None else 3 * timeout
        self.node_timeout = node_timeout if node_timeout is not None else timeout
        self.node_keys = node_keys

    def keys(self) -> tuple[Key, ...]:
        return (Key.POD, *self.cluster.keys(), *self.node_keys, *(f.key for f in self.followups))

    async def stream(self, only: Collection[Key] | None = None) -> AsyncGenerator[Evidence, None]:
        """Yield the pod, then every other key in the order they finish.

        ``only``: collect just these keys (and the pod, and the Node object when a node key
        needs its address): a refresh of the node side asks the API nothing else."""
        executor = ThreadPoolExecutor(
            max_workers=len(self.keys()) + 2, thread_name_prefix="gputriage-evidence"
        )
        tasks: list[asyncio.Task[None]] = []
        try:
            pod = await self._run(executor, Key.POD, self.cluster.pod, self.deadline)
            connecting = self._prepare_nodes(pod)
            yield pod
            queue: asyncio.Queue[Evidence] = asyncio.Queue()
            node_ready: asyncio.Future[Evidence | None] = asyncio.get_running_loop().create_future()
            wanted = self.cluster.keys()
            node_keys = self.node_keys
            followups = self.followups
            if only is not None:
                node_keys = tuple(k for k in node_keys if k in only)
                keep = {*only, *((Key.NODE,) if node_keys else ())}
                wanted = tuple(k for k in wanted if k in keep)
                followups = tuple(f for f in followups if f.key in only)
            cluster_keys = tuple(k for k in wanted if k is not Key.POD)
            if Key.NODE not in cluster_keys:
                node_ready.set_result(None)

            landed: dict[Key, asyncio.Future[Evidence]] = {
                k: asyncio.get_running_loop().create_future() for k in cluster_keys
            }

            async def cluster_key(key: Key) -> None:
                ev = await self._run(
                    executor, key, partial(self.cluster.collect, key, pod), self.deadline
                )
                if key is Key.NODE and not node_ready.done():
                    node_ready.set_result(ev)
                if not landed[key].done():
                    landed[key].set_result(ev)
                await queue.put(ev)

            async def followup(f: FollowUp) -> None:
                needed = {k: await asyncio.shield(landed[k]) for k in f.needs if k in landed}
                await queue.put(
                    await self._run(executor, f.key, partial(f.collect, pod, needed), f.deadline)
                )

            async def node_key(key: Key) -> None:
                node = await asyncio.shield(node_ready)
                await queue.put(await self._node_key(executor, key, pod, node))

            if connecting:
                await asyncio.get_running_loop().run_in_executor(
                    executor, _wait_all, connecting, NODE_HEAD_START_S
                )
            tasks = [asyncio.create_task(cluster_key(k)) for k in cluster_keys]
            tasks += [asyncio.create_task(node_key(k)) for k in node_keys]
            tasks += [asyncio.create_task(followup(f)) for f in followups]
            for _ in tasks:
                yield await queue.get()
        finally:
            for t in tasks:
                t.cancel()
            # Threads still running are bounded by their own timeouts; do not wait for them.
            executor.shutdown(wait=False, cancel_futures=True)

    def _prepare_nodes(self, pod: Evidence) -> list[threading.Event]:
        """Let node sources that can start connecting as soon as the pod names its node
        (``prepare``, optional: SSH) do so, before the Node object has arrived. Returns the
        events they set once connecting is under way."""
        preparers = [p for p in (getattr(s, "prepare", None) for s in self.node_sources) if p]
        if not preparers:
            return []
        try:
            query = self.cluster.node_query(pod, None)
        except Exception:  # _node_key reports it
            return []
        if isinstance(query, str):
            return []
        started: list[threading.Event] = []
        for prepare in preparers:
            try:
                event = prepare(query, self.node_timeout)
            except Exception:  # an optimisation only: collect() still connects
                continue
            if isinstance(event, threading.Event):
                started.append(event)
        return started

    async def gather(self) -> EvidenceSet:
        """Everything, once every key has answered or timed out."""
        return EvidenceSet([ev async for ev in self.stream()])

    async def _run(
        self,
        executor: ThreadPoolExecutor,
        key: Key,
        call: Callable[[], Evidence],
        deadline: float,
        source: str = "",
    ) -> Evidence:
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        try:
            ev = await asyncio.wait_for(loop.run_in_executor(executor, call), deadline)
        except TimeoutError:
            ev = Evidence(
                key,
                Status.TIMEOUT,
                f"no answer within {deadline:g} s for {DESCRIPTIONS[key]}",
                "",
                source,
            )
        except Exception as exc:  # a source broke its promise not to raise
            ev = Evidence(
                key,
                Status.ERROR,
                f"internal error while collecting {DESCRIPTIONS[key]}: {type(exc).__name__}: {exc}",
                "",
                source,
            )
        if not isinstance(ev, Evidence) or ev.key is not key:
            ev = Evidence(
                key,
                Status.ERROR,
                f"internal error: the source answered {type(ev).__name__} for {key.value}",
                "",
                source,
            )
        return replace(ev, elapsed_s=round(time.monotonic() - started, 3))

    async def _node_key(
        self, executor: ThreadPoolExecutor, key: Key, pod: Evidence, node: Evidence | None
    ) -> Evidence:
        try:
            query = self.cluster.node_query(pod, node)
        except Exception as exc:
            return Evidence(
                key, Status.ERROR, f"internal error finding the node: {type(exc).__name__}: {exc}"
            )
        if isinstance(query, str):
            return Evidence(key, Status.UNAVAILABLE, query)
        if not self.node_sources:
            return Evidence(
                key,
                Status.UNAVAILABLE,
                f"no node access configured for {query.node}: use SSH or --local "
                f"to read {DESCRIPTIONS[key]}",
            )
        attempts: list[tuple[str, Evidence]] = []
        for src in self.node_sources:
            name = str(getattr(src, "name", type(src).__name__))
            ev = await self._run(
                executor,
                key,
                partial(src.collect, key, query, self.node_timeout),
                self.node_timeout + 1.0,
                source=name,
            )
            if ev.ok:
                return ev
            attempts.append((name, ev))
        return most_informative(attempts)


def _wait_all(events: Sequence[threading.Event], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for event in events:
        event.wait(max(0.0, deadline - time.monotonic()))


def most_informative(attempts: Sequence[tuple[str, Evidence]]) -> Evidence:
    """The failure that says the most (error > forbidden > timeout > unavailable; the first
    source on ties), with the other attempts named in its detail."""
    rank = {s: i for i, s in enumerate(_INFORMATIVE)}
    best_i = min(range(len(attempts)), key=lambda i: (rank.get(attempts[i][1].status, 9), i))
    best_name, best = attempts[best_i]
    others = [
        f"{name}: {ev.status.value}: {ev.detail}"
        for i, (name, ev) in enumerate(attempts)
        if i != best_i
    ]
    detail = f"{best_name}: {best.detail}" + (
        f" (also tried {'; '.join(others)})" if others else ""
    )
    return replace(best, detail=detail)
