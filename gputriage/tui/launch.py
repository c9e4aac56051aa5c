"""Entry points from the command line into the TUI: the one TUI runner of every walk.

Imports only Textual and the app module on the way to the first paint; the session's heavy
clients (kubernetes, paramiko) and the playbook engine (cel) load later, in workers.
"""

from __future__ import annotations

from gputriage.options import TriageOptions
from gputriage.pipeline import Triage, node_after


def run_triage(triage: Triage, options: TriageOptions) -> int:
    """The triage TUI on ``triage`` (a pod, a workload's pod or a node).

    When the SRE asks to "triage node" on a verdict that blames the node, the node's walk
    follows in a new app, from the same bundle when this walk replayed one.
    """
    from gputriage.tui.app import TriageApp

    session = triage.open_session()
    try:
        app = TriageApp(
            session,
            playbook_dirs=options.walk.playbook_dirs,
            facts_builder=triage.build_facts,
            entry=triage.entry,
            notes_path=triage.notes_path(session.context),
            export_dir=options.tui.export_dir,
            extra_notes_file=options.walk.notes_file,
            target_hint=_asked_for(triage, options),
        )
        app.run()
    finally:
        # Live sessions hold SSH connections and an API client; bundles hold nothing.
        close = getattr(session, "close", None)
        if callable(close):
            close()
    if app.next_node:
        return run_triage(node_after(session, app.next_node, options), options)
    return app.return_code or 0


def _asked_for(triage: Triage, options: TriageOptions) -> str:
    """``ns/pod`` from the command line, for the header's first frame ("" when unknown)."""
    namespace = options.cluster.namespace
    if triage.kind != "pod" or "/" in triage.name or not namespace:
        return ""  # deploy/x: the pod is chosen later
    return f"{namespace}/{triage.name}"


def pick_scenario(choices: list[tuple[str, str]]) -> str | None:
    """Let the SRE pick a demo scenario (name, one-line description); ``None`` = quit."""
    from gputriage.tui.picker import ScenarioPicker

    return ScenarioPicker(choices).run()
