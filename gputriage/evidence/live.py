"""The live session: evidence from the cluster's API and the pod's node, as it lands.

:meth:`LiveSession.open` loads the kubeconfig and resolves the target (a pod, or the worst
pod of ``deploy/NAME``...) before anything is shown, so "pod not found" and "permission denied"
are errors with advice instead of an empty walk. The pod object read while resolving is the
first thing the stream yields. Node evidence goes to the SSH/local source the command line
options ask for (:func:`gputriage.evidence.nodes.node_source`), with the API's node log
query as a read-only fallback for the kubelet journal.

Importing this module is cheap: ``kubernetes`` and the node transports load in ``open``.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from gputriage.evidence.model import Evidence, EvidenceSet, Key
from gputriage.options import DEFAULT_NAMESPACE, ClusterAccess, NodeAccess

if TYPE_CHECKING:
    from gputriage.evidence.broker import Broker, FollowUp
    from gputriage.evidence.kube import KubeSource
    from gputriage.evidence.sources import NodeSource

_T = TypeVar("_T")


class LiveSession:
    """A :class:`gputriage.session.Session` over the live cluster."""

    def __init__(
        self,
        broker: Broker,
        *,
        context: str,
        description: str,
        notice: str = "",
        namespace: str = "",
        pod: str = "",
        closers: Sequence[Callable[[], None]] = (),
    ) -> None:
        self.broker = broker
        self.context = context
        self.description = description
        #: How the pod was chosen when the user named a workload ("deploy/x has 3 pods...").
        self.notice = notice
        self.namespace = namespace
        self.pod = pod
        self._closers = list(closers)
        #: The API client and source, for :meth:`watch` (set by :meth:`from_args`).
        self.live: tuple[Any, Any] | None = None

    @classmethod
    def open(cls, target: str, cluster: ClusterAccess, node: NodeAccess) -> LiveSession:
        """The live session of ``target`` (a pod, or ``KIND/NAME`` of a workload).

        Blocks for the kubeconfig and one or two API calls; raises GputriageError when there
        is no pod to triage."""
        from gputriage.evidence.kube_client import KubeClient, load_config
        from gputriage.evidence.kube_target import resolve_target

        config = load_config(cluster.kubeconfig, cluster.context)
        namespace = cluster.namespace or config.namespace or DEFAULT_NAMESPACE
        timeout = cluster.request_timeout
        client = KubeClient(config, timeout=timeout)
        try:
            resolving = _in_background(lambda: resolve_target(client, namespace, target))
            # While the pod's GET is on its way: the code that collects everything else.
            from gputriage.evidence.broker import Broker, FollowUp
            from gputriage.evidence.kube import KubeNodeLogSource, KubeSource
            from gputriage.evidence.nodes import node_source
            from gputriage.evidence.prometheus import PrometheusSource, settings_from_access

            # Nothing connects (or imports an SSH client) here: the broker lets the node source
            # start as soon as the pod names its node.
            configured = node_source(node)
            resolved = resolving()
        except BaseException:
            client.close()
            raise
        source = KubeSource(
            client,
            resolved.namespace,
            resolved.pod,
            pod_evidence=resolved.pod_evidence,
            node_overrides=node.node_addresses,
            since=node.since,
            job_selector=resolved.job_selector,
        )
        node_sources: list[NodeSource] = [
            *([configured] if configured else []),
            KubeNodeLogSource(client),
        ]
        via = f" via {resolved.via}" if resolved.via else ""
        try:
            prom = PrometheusSource(settings_from_access(cluster.metrics, timeout), kube=client)
        except ValueError as exc:
            from gputriage.errors import GputriageError

            client.close()
            raise GputriageError(f"--prometheus: {exc}", title="bad Prometheus option") from None
        followups = [
            candidate_followup(source, node_sources, node, timeout),
            FollowUp(Key.PROMETHEUS, (), lambda pod, _needed: prom.collect(pod), 3 * timeout),
        ]
        # A node source connects (SSH, maybe through jump hosts) before it runs anything.
        session = cls(
            Broker(
                source, node_sources, timeout=timeout, node_timeout=2 * timeout, followups=followups
            ),
            context=config.context,
            description=f"context {config.context} ({resolved.namespace}/{resolved.pod}{via})",
            notice=resolved.notice,
            namespace=resolved.namespace,
            pod=resolved.pod,
            closers=[*(s.close for s in node_sources), client.close],
        )
        session.live = (client, source)
        return session

    def keys(self) -> tuple[Key, ...]:
        return self.broker.keys()

    def watch(self, on_change: Callable[[Evidence], None], pod: Evidence) -> Callable[[], None]:
        """Watch the pod, its events and its node (GET ``watch=true``); ``on_change`` gets
        each re-collected key, from a thread. Returns the function that stops watching."""
        if self.live is None:
            return lambda: None
        from gputriage.evidence.watch import LiveWatch

        client, source = self.live
        watch = LiveWatch(
            client, source, self.namespace, self.pod, on_change, pod_evidence=pod
        ).start()
        self._closers.insert(0, watch.stop)
        return watch.stop

    async def stream(self) -> AsyncIterator[Evidence]:
        async for ev in self.broker.stream():
            yield ev

    async def stream_only(self, keys: Collection[Key]) -> AsyncIterator[Evidence]:
        """The pod, then ``keys`` only (a refresh of the node side: the watch keeps the rest
        live, so the API is asked nothing more than the node's address)."""
        async for ev in self.broker.stream(only=keys):
            yield ev

    def collect_all(self) -> EvidenceSet:
        """Everything, blocking; usable from inside a running event loop too."""
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.broker.gather())
        # Inside an event loop (the TUI): the broker runs its own loop in a thread.
        return _in_background(
            lambda: asyncio.run(self.broker.gather()), name="gputriage-collect-all"
        )()

    def close(self) -> None:
        """Close node connections and the API client (safe to call twice)."""
        closers, self._closers = self._closers, []
        for close in closers:
            try:
                close()
            except Exception:  # closing must not hide the result of the triage
                continue


def _in_background(call: Callable[[], _T], name: str = "gputriage-target") -> Callable[[], _T]:
    """Start ``call`` in a thread now; the function returned waits for its result (or raises
    what it raised). The thread is a daemon: an interrupted wait does not wait for it."""
    done: list[_T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(call())
        except BaseException as exc:  # handed to the caller's thread
            failed.append(exc)

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()

    def result() -> _T:
        worker.join()
        if failed:
            raise failed[0]
        return done[0]

    return result


# -- hook: candidate nodes of an unscheduled pod (issue 13) ----------------------------------


def candidate_followup(
    source: KubeSource, node_sources: Sequence[NodeSource], node: NodeAccess, timeout: float
) -> FollowUp:
    """Once the pod and the node list have landed: for an unscheduled pod, node evidence from
    the candidate nodes that show trouble (at most ``--nodes``, default 3)."""
    from gputriage.evidence.broker import FollowUp
    from gputriage.evidence.candidates import collect_candidates

    limit = node.candidate_nodes
    since = node.since
    overrides = node.node_addresses
    node_timeout = 2 * timeout

    def collect(pod: Evidence, needed: Mapping[Key, Evidence]) -> Evidence:
        return collect_candidates(
            pod,
            needed.get(Key.NODES) or Evidence.missing(Key.NODES),
            needed.get(Key.NODE_PODS),
            node_sources=node_sources,
            plugin_log=source.device_plugin_log_on,
            operator=source.gpu_operator_on,
            overrides=overrides,
            since=since,
            limit=limit,
            timeout=node_timeout,
            max_bytes=source.node_max_bytes,
        )

    # Reading waits for the node list (one API deadline), then each candidate node key.
    deadline = 3 * timeout + (len(node_sources) + 1) * (node_timeout + 1.0) + 2.0
    return FollowUp(Key.CANDIDATES, (Key.NODES, Key.NODE_PODS), collect, deadline)
