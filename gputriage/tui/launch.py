"""Entry points from the command line into the TUI.

Imports only Textual and the app module on the way to the first paint; the session's heavy
clients (kubernetes, paramiko) and the playbook engine (cel) load later, in workers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gputriage.session import Session


def run_tui(args: argparse.Namespace) -> int:
    """``gputriage <pod>`` (and ``--from DIR``) in the TUI."""
    from gputriage.session import open_session

    return run_app(open_session(args), args)


def run_app(session: Session, args: argparse.Namespace) -> int:
    from gputriage.tui.app import TriageApp

    app = TriageApp(
        session,
        playbook_dirs=[Path(p) for p in getattr(args, "playbooks", None) or []],
        export_dir=Path(getattr(args, "export_dir", None) or "."),
        extra_notes_file=Path(args.notes) if getattr(args, "notes", None) else None,
        target_hint=_asked_for(args),
    )
    try:
        app.run()
    finally:
        # Live sessions hold SSH connections and an API client; bundles hold nothing.
        close = getattr(session, "close", None)
        if callable(close):
            close()
    if app.next_node:  # "triage node" on a verdict that blames the node
        from gputriage.commands.node import run_node_after

        return run_node_after(session, args, app.next_node)
    return app.return_code or 0


def _asked_for(args: argparse.Namespace) -> str:
    """``ns/pod`` from the command line, for the header's first frame ("" when unknown)."""
    pod = getattr(args, "pod", None)
    if not isinstance(pod, str) or not pod or "/" in pod:  # deploy/x: the pod is chosen later
        return ""
    namespace = getattr(args, "namespace", None)
    return f"{namespace}/{pod}" if isinstance(namespace, str) and namespace else ""


def pick_scenario(choices: list[tuple[str, str]]) -> str | None:
    """Let the SRE pick a demo scenario (name, one-line description); ``None`` = quit."""
    from gputriage.tui.picker import ScenarioPicker

    return ScenarioPicker(choices).run()
