"""How the triage screen looks: a few SVG snapshots at a pinned size, with fixed content.

Regenerate after an intended change with ``pytest tests/tui/test_snapshots.py
--snapshot-update`` and review the SVGs. Nothing here depends on a clock: the bundle, the walk
and the session's description are fixed, and every snapshot waits until all evidence settled
(no spinner frames).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from gputriage.tui.app import TriageApp
from tests.tui.bundles import HandWalker, write_bundle
from tests.tui.harness import make_app, settle

SIZE = (120, 40)


def app_for(tmp_path: Path) -> TriageApp:
    bundle = write_bundle(tmp_path, hostile=False)
    return make_app(bundle, HandWalker(bundle), tmp_path)


async def settled(pilot: Pilot[Any]) -> None:
    assert isinstance(pilot.app, TriageApp)
    await settle(pilot, pilot.app)


def test_verdict(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(app_for(tmp_path), press=["enter", "enter"], terminal_size=SIZE,
                        run_before=settled)


def test_override_menu(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(app_for(tmp_path), press=["enter", "o"], terminal_size=SIZE,
                        run_before=settled)


def test_waiting_question_after_an_override(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(app_for(tmp_path), press=["enter", "o", "down", "enter"],
                        terminal_size=SIZE, run_before=settled)
