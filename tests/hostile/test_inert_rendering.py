"""Markup, terminal escapes and Markdown from the cluster stay inert: on screen and in exports.

The app runs with the real playbook engine over :mod:`tests.hostile.hostile_bundle`. On every
evidence tab the screen (the cells a terminal would show) must hold the literal
``[bold red]boom[/]``, and the bytes Textual would write to the terminal for that frame (the
compositor's full update, rendered exactly as the driver would send it) must carry none of
the hostile escapes' payloads. Exports (Markdown and JSON, written by the ``e`` key and by
``--report``) must hold the text literally, without control characters, and the Markdown must
keep cluster text out of the document structure.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from gputriage.evidence.bundle import read_bundle
from gputriage.facts.build import build_facts
from gputriage.playbook.engine import walk
from gputriage.playbook.loader import load_playbooks
from gputriage.report.render import render
from gputriage.session import BundleSession
from gputriage.tui.app import TriageApp
from gputriage.tui.tables import TABS
from tests.hostile.hostile_bundle import MARKUP, PAYLOADS, POD_NAME, write_hostile_bundle
from tests.tui.harness import NOW, screen_text, settle

SIZE = (180, 50)
#: OSC sequences Textual itself may emit (OSC 8 hyperlinks of its own widgets).
_OSC = re.compile(r"\x1b\](\d*);")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_bytes(app: TriageApp) -> str:
    """Exactly what the driver would write to the terminal for a full repaint."""
    update = app.screen._compositor.render_full_update()
    return update.render_segments(app.console)


def check_terminal(output: str, where: str) -> None:
    for payload in PAYLOADS:
        assert payload not in output, f"{where}: {payload!r} reached the terminal"
    assert set(_OSC.findall(output)) <= {"8"}, f"{where}: OSC {_OSC.findall(output)}"


async def test_screen_shows_markup_literally_and_no_escape_reaches_the_terminal(
    tmp_path: Path,
) -> None:
    bundle = write_hostile_bundle(tmp_path)
    app = TriageApp(
        BundleSession(bundle, description="bundle hostile"),
        notes_path=tmp_path / "notes.json",
        export_dir=tmp_path / "out",
        clock=lambda: NOW,
    )
    seen_markup: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert app.transcript is not None and app.transcript.visits, app.walk_status
        assert app.facts is not None and app.facts.target.pod == POD_NAME
        screen = screen_text(app)
        assert POD_NAME in screen, "the header does not show the pod name literally"
        check_terminal(terminal_bytes(app), "first screen")
        for spec in TABS:
            app.action_show_tab(spec.id)
            await pilot.pause()
            await pilot.pause()
            screen = screen_text(app)
            check_terminal(terminal_bytes(app), f"tab {spec.id}")
            assert not _CONTROL.search(screen), f"tab {spec.id}: a control character on screen"
            if MARKUP in screen:
                seen_markup.append(spec.id)
        await pilot.press("e")
        await pilot.pause()
        await settle(pilot, app)
    # The hostile lines are in events, kubelet, Xid, plugin and log evidence.
    assert {"events", "logs"} <= set(seen_markup), seen_markup
    exported = sorted((tmp_path / "out").glob("gputriage-*"))
    assert [p.suffix for p in exported] == [".json", ".md"], exported
    check_export_json(exported[0].read_text(encoding="utf-8"))
    check_export_markdown(exported[1].read_text(encoding="utf-8"))


def check_export_json(text: str) -> None:
    data = json.loads(text)
    flat = json.dumps(data, ensure_ascii=False)
    assert MARKUP in flat, "the literal markup text is missing from the JSON export"
    for payload in PAYLOADS:
        assert payload not in flat, f"JSON export holds {payload!r}"

    def strings(obj: object) -> list[str]:
        if isinstance(obj, str):
            return [obj]
        if isinstance(obj, list):
            return [s for v in obj for s in strings(v)]
        if isinstance(obj, dict):
            return [s for v in obj.values() for s in strings(v)]
        return []

    bad = [s for s in strings(data) if re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", s)]
    assert not bad, f"control characters in JSON strings: {bad[:3]}"


def outside_fences(markdown: str) -> str:
    """The Markdown text that is not inside a fenced code block (CommonMark fence rules)."""
    kept: list[str] = []
    fence = ""
    for line in markdown.splitlines():
        stripped = line.lstrip(" ")
        if fence:
            if stripped.startswith(fence) and not stripped[len(fence) :].strip("`").strip():
                fence = ""
            continue
        m = re.match(r"(`{3,}|~{3,})", stripped)
        if m and len(line) - len(stripped) < 4:
            fence = m.group(1)
            continue
        kept.append(line)
    return "\n".join(kept)


def check_export_markdown(text: str) -> None:
    assert MARKUP in text, "the literal markup text is missing from the Markdown export"
    for payload in PAYLOADS:
        assert payload not in text, f"Markdown export holds {payload!r}"
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), "control characters"
    prose = outside_fences(text)
    assert "# injected-heading" not in prose, "cluster text became a Markdown heading"
    assert "<img" not in prose, "cluster text became raw HTML in the Markdown export"
    assert "](https://evil.example)" not in prose, "cluster text became a Markdown link"


def test_headless_reports_of_a_hostile_bundle_are_inert(tmp_path: Path) -> None:
    bundle = write_hostile_bundle(tmp_path)
    evidence = read_bundle(bundle)
    facts = build_facts(evidence)
    # Answering the router's question leads to a finding with fix commands and excerpts.
    transcript = walk(
        load_playbooks(user_config=False), facts, answers={"triage/symptom": "gpu-errors"}
    )
    assert transcript.visits
    check_export_json(render("json", "bundle hostile", "", evidence, facts, transcript, []))
    check_export_markdown(render("md", "bundle hostile", "", evidence, facts, transcript, []))
