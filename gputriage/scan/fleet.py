"""The state of one scan: small records in, trouble rows out, page by page.

:class:`Fleet` receives node and pod records in any order (nodes and pods are listed at the same
time) and answers with the rows that are new or changed, so a view can show them as pages
arrive. Troubles that need both lists (a GPU node without a device-plugin pod) are settled by
:meth:`Fleet.finish`. Every update is keyed (an object seen twice, after a list restarted,
replaces itself), and memory grows with the GPU nodes and GPU pods, never with the list size.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gputriage.scan.classify import (
    NodeInfo,
    PodInfo,
    node_row,
    plugin_expected,
    plugin_row,
    pod_row,
)
from gputriage.scan.inventory import Holder, holder_of, node_inventory
from gputriage.scan.model import NODE, RANK, Row, merge


class Fleet:
    """Records of GPU nodes and GPU pods, and the trouble rows found among them."""

    def __init__(self, now: float, stuck_after: int) -> None:
        self.now = now
        self.stuck_after = stuck_after
        self.rows: dict[tuple[str, str, str], Row] = {}
        self.nodes: dict[str, NodeInfo] = {}
        self.holders: dict[str, dict[str, Holder]] = {}
        self.plugins: dict[str, dict[str, PodInfo]] = {}
        self.nodes_seen = 0
        self.pods_seen = 0
        self.gpu_pods = 0
        #: Set when every pod was listed (all namespaces, no label selector): only then are
        #: the GPUs requested on a node, and its free GPUs, known.
        self.holders_complete = False
        self._node_rows: dict[str, Row] = {}  # what the node object alone says

    # -- input -----------------------------------------------------------------------------

    def add_nodes(self, seen: int, records: Iterable[NodeInfo]) -> list[Row]:
        """One page of nodes (``seen`` items, GPU nodes as ``records``); changed rows back."""
        self.nodes_seen += seen
        changed = []
        for node in records:
            self.nodes[node.name] = node
            row = node_row(node)
            if row is None:
                continue
            self._node_rows[node.name] = row
            changed.append(self._put(row))
        return changed

    def add_pods(self, seen: int, records: Iterable[PodInfo]) -> list[Row]:
        """One page of pods (``seen`` items; GPU pods and device-plugin pods as ``records``)."""
        self.pods_seen += seen
        changed = []
        for pod in records:
            if pod.plugin:
                self.add_plugin(pod)
                continue
            self.gpu_pods += 1
            holder = holder_of(pod)
            if holder is not None:
                self.holders.setdefault(pod.node, {})[pod.key] = holder
            row = pod_row(pod, self.now, self.stuck_after)
            if row is not None:
                changed.append(self._put(row))
        return changed

    def add_plugin(self, pod: PodInfo) -> None:
        """A device-plugin pod (from the pod list, or from a list of plugin pods only)."""
        if pod.node:
            self.plugins.setdefault(pod.node, {})[pod.key] = pod

    def _put(self, row: Row) -> Row:
        """Add or replace (an object listed twice, after a list restarted, replaces itself)."""
        self.rows[row.key] = row
        return row

    # -- the end ---------------------------------------------------------------------------

    def finish(self, *, plugins_listed: bool) -> list[Row]:
        """Settle the device-plugin troubles of every GPU node (``plugins_listed``: the
        device-plugin pods were listed cluster-wide). Returns the rows that changed."""
        if not plugins_listed:
            return []
        any_plugin = bool(self.plugins)
        changed = []
        for name, node in sorted(self.nodes.items()):
            pods = list(self.plugins.get(name, {}).values())
            row = plugin_row(name, pods, expected=any_plugin and plugin_expected(node))
            if row is None:
                continue
            base = self._node_rows.get(name)
            merged = merge(base, row) if base is not None else _with_resources(row, node)
            if self.rows.get(merged.key) != merged:
                self.rows[merged.key] = merged
                changed.append(merged)
        return changed

    # -- output ----------------------------------------------------------------------------

    def sorted_rows(self) -> list[Row]:
        """Nodes first (a bad node explains its pods), then pods; most telling trouble first."""
        return sorted(
            self.rows.values(),
            key=lambda r: (r.kind != NODE, RANK[r.troubles[0]], r.namespace, r.name),
        )

    def inventory(self, node: str) -> dict[str, Any] | None:
        """The GPU inventory of ``node`` as listed (None when it is not a GPU node seen)."""
        info = self.nodes.get(node)
        if info is None:
            return None
        # A copy: the TUI reads this while its worker thread may still be adding holders.
        holders = list(self.holders.get(node, {}).values()) if self.holders_complete else None
        return node_inventory(info, holders)

    def summary(self) -> dict[str, Any]:
        """Counts for the report header."""
        capacity: dict[str, int] = {}
        allocatable: dict[str, int] = {}
        for node in self.nodes.values():
            for into, source in ((capacity, node.capacity), (allocatable, node.allocatable)):
                for resource, n in source.items():
                    into[resource] = into.get(resource, 0) + n
        return {
            "nodes_listed": self.nodes_seen,
            "gpu_nodes": len(self.nodes),
            "pods_listed": self.pods_seen,
            "gpu_pods": self.gpu_pods,
            "gpu_capacity": dict(sorted(capacity.items())),
            "gpu_allocatable": dict(sorted(allocatable.items())),
            "pods_in_trouble": sum(1 for r in self.rows.values() if r.kind != NODE),
            "nodes_in_trouble": sum(1 for r in self.rows.values() if r.kind == NODE),
        }


def _with_resources(row: Row, node: NodeInfo) -> Row:
    return Row(
        row.kind,
        row.namespace,
        row.name,
        row.node,
        row.troubles,
        row.reason,
        row.since,
        gpu_capacity=dict(node.capacity),
        gpu_allocatable=dict(node.allocatable),
    )
