"""The TUI test harness: the app wired to a bundle, a counting session, waiting, reading.

A plain module (not a conftest) so tests import these names from exactly one place.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from textual.app import App
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


def make_app(
    bundle: Path, walker: HandWalker | None, tmp_path: Path, session: BundleSession | None = None
) -> TriageApp:
    factory = (lambda: (walker, ())) if walker is not None else None
    return TriageApp(
        session or CountingSession(bundle, description="bundle demo"),
        walker_factory=factory,
        notes_path=tmp_path / "notes" / "n.json",
        export_dir=tmp_path / "out",
        clock=lambda: NOW,
        clipboard_file=tmp_path / "clipboard.txt",
    )


async def settle(pilot: Pilot[int], app: TriageApp) -> None:
    """Wait until every worker finished and the app handled what they posted."""
    for _ in range(200):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if app.settled and (app.walker is not None or app.walk_status.startswith("the")):
            await pilot.pause()
            return
    raise AssertionError(f"the app never settled: pending={sorted(app.pending)}")


#: Rich's SVG export puts a cell at x = column * 20 * 0.61 (``Console.export_svg``: 20-pixel
#: character height, the default font aspect ratio 0.61).
_SVG_CELL_WIDTH = 20 * 0.61
_SVG_TEXT = re.compile(
    r'<text [^>]*?x="([0-9.e+-]+)"[^>]*?clip-path="url\(#[^)]*-line-(\d+)\)"'
    r"[^>]*>(.*?)</text>",
    re.S,
)


def screen_text(app: App[Any]) -> str:
    """Every line on screen as plain text, exactly the cells a terminal would show.

    Reads :meth:`App.export_screenshot` (public API): the SVG holds each run of non-blank
    cells as a ``<text>`` at its column on its line; the blanks between them are put back.
    """
    width, height = app.size
    rows: list[list[tuple[int, str]]] = [[] for _ in range(height)]
    for x, line, content in _SVG_TEXT.findall(app.export_screenshot()):
        if int(line) < height:
            rows[int(line)].append((round(float(x) / _SVG_CELL_WIDTH), html.unescape(content)))
    lines = []
    for runs in rows:
        text = ""
        for column, run in sorted(runs):
            run = run.replace("\xa0", " ").replace("\n", "")  # rich ends each line with "\n"
            text += " " * max(0, column - cell_len(text)) + run
        lines.append(text + " " * max(0, width - cell_len(text)))
    return "\n".join(lines)
