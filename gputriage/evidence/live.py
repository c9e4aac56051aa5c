"""The live session: evidence from the cluster's API and the pod's node, as it lands.

:meth:`LiveSession.from_args` loads the kubeconfig and resolves the target (a pod, or the worst
pod of ``deploy/NAME``...) before anything is shown, so "pod not found" and "permission denied"
are errors with advice instead of an empty walk. The pod object read while resolving is the
first thing the stream yields. Node evidence goes to the SSH/local source the command line
configures (:func:`gputriage.evidence.nodes.node_source_from_args`), with the API's node log
query as a read-only fallback for the kubelet journal.

Importing this module is cheap: ``kubernetes`` and the node transports load in ``from_args``.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from gputriage.evidence.broker import Broker
from gputriage.evidence.model import Evidence, EvidenceSet, Key
from gputriage.evidence.nodes import node_source_from_args, parse_node_addresses
from gputriage.evidence.sources import NodeSource


class LiveSession:
    """A :class:`gputriage.session.Session` over the live cluster."""

    def __init__(self, broker: Broker, *, context: str, description: str, notice: str = "",
                 namespace: str = "", pod: str = "",
                 closers: Sequence[Callable[[], None]] = ()) -> None:
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
    def from_args(cls, args: argparse.Namespace) -> LiveSession:
        """Build from the options of :mod:`gputriage.commands.options` (``pod``, ``namespace``,
        ``context``, ``kubeconfig``, ``request_timeout`` and the node-access options).

        Blocks for the kubeconfig and one or two API calls; raises GputriageError when there
        is no pod to triage."""
        from gputriage.evidence.kube import KubeNodeLogSource, KubeSource
        from gputriage.evidence.kube_client import KubeClient, load_config
        from gputriage.evidence.kube_target import resolve_target

        overrides = parse_node_addresses(getattr(args, "node_address", None) or [])
        config = load_config(getattr(args, "kubeconfig", None), getattr(args, "context", None))
        namespace = getattr(args, "namespace", None) or config.namespace or "default"
        timeout = float(getattr(args, "request_timeout", None) or 10.0)
        client = KubeClient(config, timeout=timeout)
        try:
            target = resolve_target(client, namespace, str(args.pod))
        except BaseException:
            client.close()
            raise
        source = KubeSource(client, target.namespace, target.pod,
                            pod_evidence=target.pod_evidence,
                            node_overrides=overrides,
                            since=str(getattr(args, "since", None) or "2h"))
        configured = node_source_from_args(args)
        node_sources: list[NodeSource] = [*([configured] if configured else []),
                                          KubeNodeLogSource(client)]
        via = f" via {target.via}" if target.via else ""
        # A node source connects (SSH, maybe through jump hosts) before it runs anything.
        session = cls(Broker(source, node_sources, timeout=timeout, node_timeout=2 * timeout),
                      context=config.context,
                      description=f"context {config.context} "
                                  f"({target.namespace}/{target.pod}{via})",
                      notice=target.notice, namespace=target.namespace, pod=target.pod,
                      closers=[*(s.close for s in node_sources), client.close])
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
        watch = LiveWatch(client, source, self.namespace, self.pod, on_change,
                          pod_evidence=pod).start()
        self._closers.insert(0, watch.stop)
        return watch.stop

    async def stream(self) -> AsyncIterator[Evidence]:
        async for ev in self.broker.stream():
            yield ev

    def collect_all(self) -> EvidenceSet:
        """Everything, blocking; usable from inside a running event loop too."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.broker.gather())
        result: list[EvidenceSet] = []
        errors: list[BaseException] = []

        def run() -> None:
            try:
                result.append(asyncio.run(self.broker.gather()))
            except BaseException as exc:  # handed to the caller's thread below
                errors.append(exc)

        worker = threading.Thread(target=run, name="gputriage-collect-all")
        worker.start()
        worker.join()
        if errors:
            raise errors[0]
        return result[0]

    def close(self) -> None:
        """Close node connections and the API client (safe to call twice)."""
        closers, self._closers = self._closers, []
        for close in closers:
            try:
                close()
            except Exception:  # closing must not hide the result of the triage
                continue
