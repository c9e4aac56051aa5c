"""How each screen and dialog looks, at 80x24 and at 160x48: SVG snapshots by feature.

Regenerate after an intended change with ``pytest tests/tui/test_snapshots.py
--snapshot-update`` and review the SVGs. Nothing here depends on a clock or on where the
checkout or the temp dir is: the bundle, the walk and the session's description are fixed
(a ``BundleSession`` left to describe itself would print its absolute path in the header, and
so would every snapshot), every snapshot waits until all evidence settled (no spinner frames),
and ``test_snapshots_do_not_depend_on_the_path`` proves it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from gputriage.tui.app import TriageApp
from gputriage.tui.widgets.evidence_tabs import EvidenceTabs
from tests.tui.bundles import HandWalker, write_bundle
from tests.tui.harness import make_app, settle
from tests.tui.test_reading import differential_walker

SIZES = {"80x24": (80, 24), "160x48": (160, 48)}


@pytest.fixture(autouse=True)
def _stable_svg_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich names an SVG's CSS classes after a hash of every segment's repr, hidden style
    metadata included, which can differ between runs of the same screen: a fixed prefix keeps
    the snapshot about what is drawn."""
    from rich.console import Console

    export = Console.export_svg

    def stable(self: Console, *args: Any, **kwargs: Any) -> str:
        kwargs["unique_id"] = kwargs.get("unique_id") or "terminal-gputriage"
        return export(self, *args, **kwargs)

    monkeypatch.setattr(Console, "export_svg", stable)


def app_for(tmp_path: Path, differential: bool = False) -> TriageApp:
    bundle = write_bundle(tmp_path, hostile=False)
    walker = HandWalker(bundle)
    return make_app(
        bundle, differential_walker(walker, bundle) if differential else walker, tmp_path
    )


async def settled(pilot: Pilot[Any]) -> None:
    assert isinstance(pilot.app, TriageApp)
    await settle(pilot, pilot.app)


async def open_second_event(pilot: Pilot[Any]) -> None:
    await settled(pilot)
    app = pilot.app
    assert isinstance(app, TriageApp)
    tabs = app.triage.query_one(EvidenceTabs)
    table = tabs.active_table()
    table.focus()
    table.move_cursor(row=0)
    await pilot.pause()


#: feature -> (keys pressed after settling, what runs before, the differential walker?)
FEATURES: dict[str, tuple[list[str], Callable[[Pilot[Any]], Awaitable[None]], bool]] = {
    "first_screen": ([], settled, False),
    "verdict": (["enter", "enter"], settled, False),
    "verdict_differential": (["enter", "enter", "x"], settled, True),
    "override_menu": (["enter", "o"], settled, False),
    "waiting_question": (["enter", "o", "down", "enter"], settled, False),
    "help": (["question_mark"], settled, False),
    "row_detail": (["enter"], open_second_event, False),
    "fix_zoomed": (["enter", "enter", "f"], settled, False),
    "tab_by_number": (["4"], settled, False),
}


CASES = [(f, s) for f in FEATURES for s in SIZES]


@pytest.mark.parametrize(("feature", "size"), CASES)
def test_screen(snap_compare: Any, tmp_path: Path, feature: str, size: str) -> None:
    press, before, differential = FEATURES[feature]
    assert snap_compare(
        app_for(tmp_path, differential), press=press, terminal_size=SIZES[size], run_before=before
    )


def _normalized(svg: str) -> str:
    """The SVG as pytest-textual-snapshot compares it (its random id prefix removed)."""
    return re.sub(r"\bterminal-\d+-", "terminal-", svg)


async def _svg(root: Path) -> str:
    app = app_for(root)
    async with app.run_test(size=SIZES["80x24"]) as pilot:
        await settle(pilot, app)
        await pilot.press("enter", "enter")
        await pilot.pause()
        return _normalized(app.export_screenshot())


async def test_snapshots_do_not_depend_on_the_path(tmp_path: Path) -> None:
    short, deep = tmp_path / "a", tmp_path / "a-much-longer-checkout" / "with" / "depth"
    assert await _svg(short) == await _svg(deep)
