"""One triage pipeline for every kind of walk: target -> session -> evidence -> facts -> engine.

A :class:`Triage` describes one walk: what is triaged (a pod, a workload's pod, a node), where
its evidence comes from (a session), how facts are built from that evidence, where the walk
enters (``None``: the playbooks' routes decide, for pods and nodes alike), where its notes are
kept and what a report adds. :func:`run_headless` is the one headless runner; the one TUI
runner is :func:`gputriage.tui.launch.run_triage`. A new kind of walk (a Job's pods, a node
chosen as a Pending pod's candidate) is one more constructor here, not a new runner.

Importing this module is cheap: sessions, the engine and the renderers load when a walk runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gputriage.options import ReportFormat, ReportOptions, TriageOptions

if TYPE_CHECKING:
    from gputriage.evidence.model import EvidenceSet
    from gputriage.facts.model import FactSet
    from gputriage.playbook.model import PlaybookSet
    from gputriage.playbook.transcript import Transcript
    from gputriage.session import Session

#: What a walk is about: one pod, a workload (``deploy/x``: its worst pod), or a node.
TargetKind = Literal["pod", "owner", "node"]

EXIT_FINDING = 0
EXIT_UNDETERMINED = 3
EXIT_WAITING = 4

#: ``(format, rendered summary, evidence, facts) -> summary``: what a kind of walk adds.
ReportExtras = Callable[[ReportFormat, str, "EvidenceSet", "FactSet"], str]


def _pod_facts(evidence: EvidenceSet) -> FactSet:
    from gputriage.facts.build import build_facts

    return build_facts(evidence)


def _node_facts(evidence: EvidenceSet) -> FactSet:
    from gputriage.scan.nodewalk import node_facts

    return node_facts(evidence)


@dataclass(frozen=True)
class Triage:
    """One walk, described: everything the runners need and nothing about how they show it."""

    kind: TargetKind
    """Pod, owner (a workload named ``KIND/NAME``) or node."""
    name: str
    """The pod, ``KIND/NAME``, or node as the SRE named it."""
    open_session: Callable[[], Session]
    """Opens the evidence session (blocks for a live cluster's first calls; may raise
    GputriageError with advice)."""
    build_facts: Callable[[EvidenceSet], FactSet] = _pod_facts
    """Evidence -> facts; a node walk names the node as the target."""
    entry: str | None = None
    """Playbook (or ``playbook/step``) to start at; None: the playbooks' routes choose."""
    notes_scope: tuple[str, str] | None = None
    """(namespace, name) the notes file is kept under; None: the pod the facts name."""
    report_extras: ReportExtras | None = None
    """What a headless report adds for this kind of walk (a node's GPU inventory)."""

    def notes_path(self, context: str) -> Path | None:
        """The notes file of this walk, or None when it depends on the pod found."""
        if self.notes_scope is None:
            return None
        from gputriage.report.notes import default_notes_path

        return default_notes_path(context or "bundle", *self.notes_scope)


# ---------------------------------------------------------------------------------------------
# Kinds of walk


def pod_triage(
    target: str, options: TriageOptions, *, description: str = "", check_bundle: bool = True
) -> Triage:
    """``gputriage POD`` (or ``KIND/NAME``): a bundle replayed or the live cluster.

    With a bundle, a pod name or namespace the SRE typed must be the bundle's (replaying
    another pod's evidence under this one's name would be a wrong report); ``check_bundle``
    is off where the name is not the SRE's (``gputriage demo SCENARIO``).
    """
    bundle = options.bundle
    namespace = options.cluster.namespace

    def open_session() -> Session:
        if bundle is not None:
            from gputriage.session import BundleSession, check_bundle_target

            session = BundleSession(bundle, description=description)
            if check_bundle:
                check_bundle_target(session.collect_all(), target, namespace, bundle)
            return session
        from gputriage.evidence.live import LiveSession

        return LiveSession.open(target, options.cluster, options.node)

    return Triage(kind="owner" if "/" in target else "pod", name=target, open_session=open_session)


def node_triage(node: str, options: TriageOptions) -> Triage:
    """``gputriage node NODE``: a node bundle replayed or the node in the live cluster."""
    bundle = options.bundle

    def open_session() -> Session:
        if bundle is not None:
            from gputriage.scan.nodewalk import NodeBundleSession

            return NodeBundleSession(bundle, node)
        from gputriage.evidence.live_node import open_node_session

        return open_node_session(node, options.cluster, options.node)

    return Triage(
        kind="node",
        name=node,
        open_session=open_session,
        build_facts=_node_facts,
        notes_scope=("node", node),
        report_extras=with_inventory,
    )


def node_after(session: Session, node: str, options: TriageOptions) -> Triage:
    """The walk of ``node`` after a pod walk blamed it: from the same bundle when the pod walk
    replayed one (``--from``, ``gputriage demo``), else from the live cluster."""
    from dataclasses import replace

    path = getattr(session, "path", None)
    return node_triage(node, replace(options, bundle=Path(path) if path is not None else None))


# ---------------------------------------------------------------------------------------------
# The headless runner


def exit_code(transcript: Transcript) -> int:
    """0 finding, 3 undetermined, 4 waiting for an answer (the README's table)."""
    if transcript.question is not None:
        return EXIT_WAITING
    if transcript.undetermined or not transcript.findings:
        return EXIT_UNDETERMINED
    return EXIT_FINDING


def run_headless(triage: Triage, options: TriageOptions, report: ReportOptions) -> int:
    """Collect, build facts, walk, render, write; the exit code says how the walk ended.

    Importing the walk's code and loading the playbooks take CPU time: they are done while
    the evidence is on its way (the collection is mostly waiting on the network), in a forked
    process when the evidence comes from a live cluster (:mod:`gputriage.prepared_walk`)."""
    from gputriage.prepared_walk import prepare_walk

    def finish(
        playbooks: PlaybookSet, evidence: EvidenceSet, description: str, context: str
    ) -> tuple[str, int]:
        from gputriage.playbook.engine import walk
        from gputriage.report.notes import read_notes_file
        from gputriage.report.render import render

        facts = triage.build_facts(evidence)
        transcript = walk(playbooks, facts, report.answers, report.overrides, entry=triage.entry)
        notes_file = options.walk.notes_file
        notes = read_notes_file(notes_file) if notes_file else []
        text = render(report.format, description, context, evidence, facts, transcript, notes)
        if triage.report_extras is not None:
            text = triage.report_extras(report.format, text, evidence, facts)
        return text, exit_code(transcript)

    dirs = [Path(p) for p in options.walk.playbook_dirs]
    prepared = prepare_walk(dirs, finish, fork=options.bundle is None)
    try:
        session = triage.open_session()
        try:
            evidence = session.collect_all()
        finally:
            close = getattr(session, "close", None)
            if callable(close):
                close()
        result = prepared.finish(evidence, session.description, session.context)
    finally:
        prepared.close()
    for problem in result.problems:
        print(f"gputriage: warning: skipped playbook: {problem}", file=sys.stderr)
    if report.output is not None:
        from gputriage.report.write import atomic_write

        print(f"gputriage: wrote {atomic_write(report.output, result.text)}", file=sys.stderr)
    else:
        sys.stdout.write(result.text)
    return result.exit_code


def with_inventory(fmt: ReportFormat, text: str, evidence: EvidenceSet, facts: FactSet) -> str:
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
