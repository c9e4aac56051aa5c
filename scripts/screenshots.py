#!/usr/bin/env python3
"""Render the key screens of every demo scenario into ``screenshots/`` (SVG, then PNG).

Runs the real app headless (``App.run_test``) on each built-in scenario with the shipped
playbooks, walks it to the verdict, and saves: the first screen, the verdict, and the evidence
tab that matters for that scenario. The first scenario also gets the override menu and the
help screen; the full set (no ``--scenario``) also has the demo picker at 80x24. PNGs come
from ``rsvg-convert`` (``apt-get install librsvg2-bin fonts-symbola``); ``--svg-only`` skips
them.

    .venv/bin/python scripts/screenshots.py [--out screenshots] [--scenario NAME]...
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputriage.scenarios import list_scenarios, scenario_path  # noqa: E402
from gputriage.session import BundleSession  # noqa: E402
from gputriage.tui import walkstate  # noqa: E402
from gputriage.tui.app import TriageApp  # noqa: E402

SIZE = (120, 40)
#: The smallest terminal the TUI is made for: every scenario's verdict is also shot at it.
COMPACT = (80, 24)
#: A fixed clock: nothing time-dependent reaches the screen, but exports stay reproducible.
NOW = 1_700_000_000.0
#: The evidence tab worth showing for each family of scenario.
FOCUS_TAB = {"pending": "scheduler", "create": "kubelet", "oom": "logs", "lost": "xid"}


async def settle(app: TriageApp, pilot: object) -> None:
    from textual.pilot import Pilot

    assert isinstance(pilot, Pilot)
    for _ in range(400):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if app.settled and (app.walker is not None or app.walk_status):
            await pilot.pause(0.1)
            return
    raise RuntimeError("the app did not settle")


def demo_app(name: str, work: Path) -> TriageApp:
    app = TriageApp(
        BundleSession(scenario_path(name), description=f"demo {name}"),
        notes_path=work / f"{name}-notes.json",
        export_dir=work,
        clock=lambda: NOW,
        clipboard_file=work / "clipboard.txt",
    )
    app.animation_level = "none"  # no half-drawn tab underline: the same pictures every run
    return app


async def to_verdict(app: TriageApp, pilot: object) -> None:
    """Follow the engine to its verdict, stopping at a question rather than answering it."""
    from textual.pilot import Pilot

    assert isinstance(pilot, Pilot)
    while walkstate.follow(app.cursor, app.transcript).kind == "advance":
        await pilot.press("enter")
    await pilot.pause()


async def shoot_compact(name: str, out: Path, work: Path) -> Path:
    app = demo_app(name, work)
    async with app.run_test(size=COMPACT) as pilot:
        await settle(app, pilot)
        await to_verdict(app, pilot)
        app.clear_notifications()
        await pilot.pause()
        return Path(app.save_screenshot(f"{name}-verdict-80x24.svg", str(out)))


async def shoot(name: str, out: Path, work: Path, extras: bool) -> list[Path]:
    app = demo_app(name, work)
    saved: list[Path] = []
    async with app.run_test(size=SIZE) as pilot:

        async def save(suffix: str) -> None:
            app.clear_notifications()  # toasts (a playbook skipped...) are not the point here
            await pilot.pause()
            saved.append(Path(app.save_screenshot(f"{name}-{suffix}.svg", str(out))))

        await settle(app, pilot)
        await save("start")
        if extras:
            await pilot.press("question_mark")
            await save("help")
            await pilot.press("escape")
            await pilot.press("o")
            await pilot.pause()
            await save("override")
            await pilot.press("escape")
        await to_verdict(app, pilot)
        await save("verdict")
        if extras:  # the verdict's cited row, opened whole (v)
            await pilot.press("v")
            await pilot.pause()
            await save("detail")
            await pilot.press("escape")
        family = name.split("-", 1)[0]
        if family in FOCUS_TAB:
            app.action_show_tab(FOCUS_TAB[family])
            await pilot.pause()
            await save("evidence")
    return saved


async def shoot_picker(out: Path) -> Path:
    """``gputriage demo`` without a name: the scenario picker and its keys, at 80x24."""
    from gputriage.tui.picker import ScenarioPicker

    picker = ScenarioPicker([(s.name, s.title) for s in list_scenarios()])
    async with picker.run_test(size=COMPACT) as pilot:
        await pilot.pause()
        return Path(picker.save_screenshot("demo-picker-80x24.svg", str(out)))


def to_png(svgs: list[Path]) -> None:
    tool = shutil.which("rsvg-convert")
    if tool is None:
        raise SystemExit(
            "rsvg-convert not found: apt-get install -y librsvg2-bin fonts-symbola "
            "(or pass --svg-only)"
        )
    for svg in svgs:
        subprocess.run([tool, "-o", str(svg.with_suffix(".png")), str(svg)], check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        help="only this scenario (repeatable; default: all)",
    )
    parser.add_argument("--svg-only", action="store_true", help="skip the PNG conversion")
    args = parser.parse_args()
    names = args.scenario or [s.name for s in list_scenarios()]
    args.out.mkdir(parents=True, exist_ok=True)
    svgs: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(names):
            svgs += asyncio.run(shoot(name, args.out, Path(tmp), extras=i == 0))
            svgs.append(asyncio.run(shoot_compact(name, args.out, Path(tmp))))
    if not args.scenario:  # the full set (for the README) has the demo picker too
        svgs.append(asyncio.run(shoot_picker(args.out)))
    if not args.svg_only:
        to_png(svgs)
    for svg in svgs:
        print(svg.relative_to(args.out.parent) if svg.is_relative_to(args.out.parent) else svg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
