"""The TUI test harness: the app wired to a bundle, a counting session, waiting, reading.

A plain module (not a conftest) so tests import these names from exactly one place.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from textual.pilot import Pilot

from gputriage.evidence.model import Evidence
from gputriage.session import BundleSession
from gputriage.tui.app import TriageApp
from tests.tui.bundles import HandWalker

#: The fixed clock of every test app (2023-11-14T22:13:20Z): exported names are predictable.
NOW = 1_700_000_000.0


class CountingSession(BundleSession):
    """A real BundleSession that counts how often it was streamed (refresh re-streams)."""

    streams = 0

    async def stream(self) -> AsyncIterator[Evidence]:
        self.streams += 1
        async for evidence in super().stream():
            yield evidence


def make_app(bundle: Path, walker: HandWalker | None, tmp_path: Path,
             session: BundleSession | None = None) -> TriageApp:
    factory = (lambda: (walker, ())) if walker is not None else None
    return TriageApp(session or CountingSession(bundle, description="bundle demo"),
                     walker_factory=factory, notes_path=tmp_path / "notes" / "n.json",
                     export_dir=tmp_path / "out", clock=lambda: NOW,
                     clipboard_file=tmp_path / "clipboard.txt")


async def settle(pilot: Pilot[int], app: TriageApp) -> None:
    """Wait until every worker finished and the app handled what they posted."""
    for _ in range(200):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if app.settled and (app.walker is not None or app.walk_status.startswith("the")):
            await pilot.pause()
            return
    raise AssertionError(f"the app never settled: pending={sorted(app.pending)}")


def screen_text(app: TriageApp) -> str:
    """Every line on screen as plain text, exactly the cells a terminal would show.

    Reads the compositor's strips: the same data ``export_screenshot`` draws from.
    """
    strips = app.screen._compositor.render_strips()
    return "\n".join(strip.text for strip in strips)
