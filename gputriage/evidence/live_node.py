"""The live session of a node walk (``gputriage node NODE``): the node's evidence, no pod.

The API side is the node object and events, the pods on it, the device-plugin log and
RuntimeClasses (:data:`gputriage.evidence.sources.NODE_API_KEYS`); the node side is what its
SSH/local source reads, with the API's node log query as a fallback for the kubelet journal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gputriage.errors import GputriageError
from gputriage.evidence.broker import Broker
from gputriage.evidence.live import LiveSession
from gputriage.evidence.model import Evidence, Key, Status
from gputriage.evidence.nodes import node_address, node_source
from gputriage.evidence.sources import NODE_API_KEYS, NodeQuery, NodeSource
from gputriage.options import DEFAULT_NAMESPACE, ClusterAccess, NodeAccess

if TYPE_CHECKING:
    from gputriage.evidence.kube import KubeSource
    from gputriage.evidence.kube_client import KubeClient


class NodeClusterSource:
    """The API keys of a node walk, for the broker (a ``ClusterSource`` without a pod).

    The kube source's node collectors read only ``spec.nodeName`` of the pod they are handed,
    so they are given an anchor naming the node; the anchor never leaves this class (the
    session's pod is "unavailable: no pod").
    """

    def __init__(
        self,
        kube: KubeSource,
        node: str,
        *,
        node_overrides: Mapping[str, str],
        since: str,
        max_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        self.kube = kube
        self.node = node
        self.node_overrides = dict(node_overrides)
        self.since = since
        self.max_bytes = max_bytes
        self._anchor = Evidence(
            Key.POD,
            Status.OK,
            "node walk anchor",
            "",
            "node",
            {"metadata": {"name": f"node/{node}", "namespace": ""}, "spec": {"nodeName": node}},
        )

    def keys(self) -> tuple[Key, ...]:
        return NODE_API_KEYS

    def pod(self) -> Evidence:
        return Evidence.missing(
            Key.POD, f"no pod: this is the walk of node {self.node}", "node walk"
        )

    def collect(self, key: Key, pod: Evidence) -> Evidence:
        return self.kube.collect(key, self._anchor)

    def node_query(self, pod: Evidence, node: Evidence | None) -> NodeQuery | str:
        obj: Mapping[str, Any] = (
            node.data
            if node is not None and node.ok and isinstance(node.data, dict)
            else {"metadata": {"name": self.node}}
        )
        return NodeQuery(
            self.node,
            node_address(obj, self.node_overrides),
            since=self.since,
            max_bytes=self.max_bytes,
        )


def open_node_session(node: str, cluster: ClusterAccess, access: NodeAccess) -> LiveSession:
    """The live session of ``node``: its API keys, then what the node itself says.

    Fails before the walk when the node does not exist (naming close matches) or cannot be
    read."""
    from gputriage.evidence.kube import KubeNodeLogSource, KubeSource
    from gputriage.evidence.kube_client import KubeClient, load_config

    config = load_config(cluster.kubeconfig, cluster.context)
    timeout = cluster.request_timeout
    client = KubeClient(config, timeout=timeout)
    try:
        _check_node(client, node)
    except BaseException:
        client.close()
        raise
    kube = KubeSource(
        client,
        config.namespace or DEFAULT_NAMESPACE,
        "",
        node_overrides=access.node_addresses,
        since=access.since,
    )
    api = NodeClusterSource(kube, node, node_overrides=access.node_addresses, since=access.since)
    configured = node_source(access)
    node_sources: list[NodeSource] = [
        *([configured] if configured else []),
        KubeNodeLogSource(client),
    ]
    return LiveSession(
        Broker(api, node_sources, timeout=timeout, node_timeout=2 * timeout),
        context=config.context,
        description=f"context {config.context} (node {node})",
        closers=[*(s.close for s in node_sources), client.close],
    )


def _check_node(client: KubeClient, node: str) -> None:
    """Fail before the walk when the node does not exist (with close names) or is unreadable."""
    import difflib

    from gputriage.evidence.kube_target import cannot_read

    reply = client.get(f"/api/v1/nodes/{node}")
    if reply.ok:
        return
    if reply.status != 404:
        raise cannot_read(client, f"node {node}", reply)
    _, data = client.list_all("/api/v1/nodes")
    names = [
        str((n.get("metadata") or {}).get("name") or "")
        for n in (data or {}).get("items") or []
        if isinstance(n, dict)
    ]
    close = difflib.get_close_matches(node, names, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise GputriageError(
        f'node "{node}" not found.{hint} (kubectl get nodes)', title="node not found"
    )
