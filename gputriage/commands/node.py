"""``gputriage node <node>``: lost-card and onboarding triage for a node, without a pod.

Evidence is the node's: its object and events, the pods on it, the device-plugin log and
RuntimeClasses from the API; kernel log, nvidia-smi, modules, device nodes, containerd config
and the kubelet journal from the node itself (SSH or ``--local``, with the API's node log query
as a fallback for the journal). ``--from DIR`` replays a node bundle (``node.json`` plus any of
the other bundle files). The walk enters ``lost-card`` when the facts show a lost or failing
GPU, else ``node-onboarding`` (:mod:`gputriage.scan.nodewalk`). Exit codes as for a pod walk:
0 finding, 3 undetermined, 4 waiting for an answer, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputriage.commands.options import (
    add_cluster_arguments,
    add_node_access_arguments,
    add_playbook_arguments,
    add_report_arguments,
)
from gputriage.errors import GputriageError

if TYPE_CHECKING:
    from gputriage.evidence.kube import KubeSource
    from gputriage.evidence.kube_client import KubeClient
    from gputriage.evidence.model import Evidence
    from gputriage.evidence.sources import NodeQuery
    from gputriage.session import Session

HELP = "lost-card and onboarding triage for a node, without a pod (`gputriage node NODE`)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("node", help="node name (kubectl get nodes)")
    p.add_argument("--from", dest="from_bundle", metavar="DIR",
                   help="replay a node bundle (node.json plus any of node-events.json, "
                        "node-pods.json, device-plugin.log, dmesg.log, nvidia-smi.xml, "
                        "lsmod.txt, kubelet.log...) instead of reading the live cluster")
    add_report_arguments(p)
    p.add_argument("--notes", metavar="FILE", help="notes file to include in the summary")
    add_cluster_arguments(p)
    add_node_access_arguments(p)
    add_playbook_arguments(p)


def run(args: argparse.Namespace) -> int:
    if args.report:
        return run_headless(args)
    return run_node_tui(args)


# ---------------------------------------------------------------------------------------------
# Sessions


class NodeClusterSource:
    """The API keys of a node walk, for the broker (a ``ClusterSource`` without a pod).

    The kube source's node collectors read only ``spec.nodeName`` of the pod they are handed,
    so they are given an anchor naming the node; the anchor never leaves this class (the
    session's pod is "unavailable: no pod").
    """

    def __init__(self, kube: KubeSource, node: str, *, node_overrides: Mapping[str, str],
                 since: str, max_bytes: int = 4 * 1024 * 1024) -> None:
        from gputriage.evidence.model import Evidence, Key, Status

        self.kube = kube
        self.node = node
        self.node_overrides = dict(node_overrides)
        self.since = since
        self.max_bytes = max_bytes
        self._anchor = Evidence(Key.POD, Status.OK, "node walk anchor", "", "node",
                                {"metadata": {"name": f"node/{node}", "namespace": ""},
                                 "spec": {"nodeName": node}})

    def keys(self) -> tuple[Any, ...]:
        from gputriage.scan.nodewalk import NODE_API_KEYS

        return NODE_API_KEYS

    def pod(self) -> Evidence:
        from gputriage.evidence.model import Evidence, Key

        return Evidence.missing(Key.POD, f"no pod: this is the walk of node {self.node}",
                                "node walk")

    def collect(self, key: Any, pod: Evidence) -> Evidence:
        return self.kube.collect(key, self._anchor)

    def node_query(self, pod: Evidence, node: Evidence | None) -> NodeQuery | str:
        from gputriage.evidence.nodes import node_address
        from gputriage.evidence.sources import NodeQuery

        obj: Mapping[str, Any] = (node.data if node is not None and node.ok
                                  and isinstance(node.data, dict)
                                  else {"metadata": {"name": self.node}})
        return NodeQuery(self.node, node_address(obj, self.node_overrides), since=self.since,
                         max_bytes=self.max_bytes)


def open_node_session(args: argparse.Namespace) -> Session:
    """A node bundle (``--from``) or the live cluster for ``args.node``."""
    if getattr(args, "from_bundle", None):
        from gputriage.scan.nodewalk import NodeBundleSession

        return NodeBundleSession(Path(args.from_bundle), str(args.node))
    from gputriage.evidence.broker import Broker
    from gputriage.evidence.kube import KubeNodeLogSource, KubeSource
    from gputriage.evidence.kube_client import KubeClient, load_config
    from gputriage.evidence.live import LiveSession
    from gputriage.evidence.nodes import node_source_from_args, parse_node_addresses
    from gputriage.evidence.sources import NodeSource

    overrides = parse_node_addresses(getattr(args, "node_address", None) or [])
    config = load_config(getattr(args, "kubeconfig", None), getattr(args, "context", None))
    timeout = float(getattr(args, "request_timeout", None) or 10.0)
    client = KubeClient(config, timeout=timeout)
    try:
        _check_node(client, str(args.node))
    except BaseException:
        client.close()
        raise
    since = str(getattr(args, "since", None) or "2h")
    kube = KubeSource(client, config.namespace or "default", "", node_overrides=overrides,
                      since=since)
    cluster = NodeClusterSource(kube, str(args.node), node_overrides=overrides, since=since)
    configured = node_source_from_args(args)
    node_sources: list[NodeSource] = [*([configured] if configured else []),
                                      KubeNodeLogSource(client)]
    return LiveSession(Broker(cluster, node_sources, timeout=timeout, node_timeout=2 * timeout),
                       context=config.context,
                       description=f"context {config.context} (node {args.node})",
                       closers=[*(s.close for s in node_sources), client.close])


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
    names = [str((n.get("metadata") or {}).get("name") or "")
             for n in (data or {}).get("items") or [] if isinstance(n, dict)]
    close = difflib.get_close_matches(node, names, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise GputriageError(f'node "{node}" not found.{hint} (kubectl get nodes)',
                         title="node not found")


# ---------------------------------------------------------------------------------------------
# Headless and TUI


def run_headless(args: argparse.Namespace) -> int:
    from gputriage.headless import (
        EXIT_FINDING,
        EXIT_UNDETERMINED,
        EXIT_WAITING,
        parse_pairs,
    )
    from gputriage.playbook.loader import load_playbooks
    from gputriage.report.notes import read_notes_file
    from gputriage.report.render import render
    from gputriage.report.write import atomic_write
    from gputriage.scan.nodewalk import node_facts, node_walker

    answers = parse_pairs(args.answer or [], "--answer")
    overrides = parse_pairs(args.override or [], "--override")
    playbooks = load_playbooks([Path(p) for p in args.playbooks or []])
    for problem in playbooks.problems:
        print(f"gputriage: warning: skipped playbook: {problem}", file=sys.stderr)
    session = open_node_session(args)
    try:
        evidence = session.collect_all()
    finally:
        close = getattr(session, "close", None)
        if close is not None:
            close()
    facts = node_facts(evidence)
    transcript = node_walker(playbooks)(facts, answers, overrides)
    notes = read_notes_file(args.notes) if args.notes else []
    text = render(args.report, session.description, session.context, evidence, facts,
                  transcript, notes)
    text = with_inventory(args.report, text, evidence, facts)
    if args.output and args.output != "-":  # "-": stdout
        print(f"gputriage: wrote {atomic_write(args.output, text)}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if transcript.question is not None:
        return EXIT_WAITING
    if transcript.undetermined or not transcript.findings:
        return EXIT_UNDETERMINED
    return EXIT_FINDING


def with_inventory(fmt: str, text: str, evidence: Any, facts: Any) -> str:
    """The summary plus the node's GPU inventory (JSON key ``inventory``; a Markdown section)."""
    import json

    from gputriage.report.markdown import fence
    from gputriage.scan.inventory import inventory_lines
    from gputriage.scan.nodewalk import node_inventory_of
    from gputriage.textsafe import inert

    inventory = node_inventory_of(evidence, facts)
    if fmt == "json":
        summary = json.loads(text)
        summary["inventory"] = inventory
        return json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
    if inventory is None:
        return text
    lines = [inert(line) for line in inventory_lines(inventory)]
    return text.rstrip("\n") + "\n\n## GPU inventory\n\n" + fence(lines) + "\n"


def run_node_after(session: Any, args: argparse.Namespace, node: str) -> int:
    """The node walk after a pod walk blamed ``node``: from the same bundle when the pod walk
    replayed one (``--from``, ``gputriage demo``), else from the live cluster."""
    import copy

    chosen = copy.copy(args)
    chosen.node = node
    path = getattr(session, "path", None)
    chosen.from_bundle = str(path) if path is not None else None
    return run_node_tui(chosen)


def run_node_tui(args: argparse.Namespace) -> int:
    """The triage TUI on a node walk."""
    from functools import partial

    from gputriage.report.notes import default_notes_path
    from gputriage.tui.app import TriageApp

    session = open_node_session(args)
    dirs = tuple(Path(p) for p in getattr(args, "playbooks", None) or [])
    try:
        app = TriageApp(
            session,
            walker_factory=partial(tui_walker, dirs),
            notes_path=default_notes_path(session.context or "bundle", "node", str(args.node)),
            export_dir=Path(getattr(args, "export_dir", None) or "."),
            extra_notes_file=Path(args.notes) if getattr(args, "notes", None) else None,
        )
        app.run()
        return app.return_code or 0
    finally:
        close = getattr(session, "close", None)
        if close is not None:
            close()


def tui_walker(dirs: tuple[Path, ...]) -> tuple[Any, tuple[str, ...]]:
    from gputriage.playbook.loader import load_playbooks
    from gputriage.scan.nodewalk import node_walker

    playbooks = load_playbooks(list(dirs))
    return node_walker(playbooks), tuple(str(p) for p in playbooks.problems)
