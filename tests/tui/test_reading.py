"""Reading the evidence at 3 a.m.: tabs by key, rows opened whole, the walk's tab brought up,
the differential beside the verdict, and the compact layout at 80x24."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gputriage.evidence.model import LineRef
from gputriage.facts.model import FactSet
from gputriage.playbook.transcript import Alternative, Transcript
from gputriage.tui.app import TriageApp
from gputriage.tui.screens.row_detail import RowDetailScreen
from gputriage.tui.widgets.evidence_tabs import EvidenceTable, EvidenceTabs
from gputriage.tui.widgets.step_panel import verdict_content
from tests.tui.bundles import HOSTILE_MSG, INSUFFICIENT, HandWalker, line_of
from tests.tui.harness import make_app, screen_text, settle

SIZE = (120, 40)


def box_text(screen: str, title: str) -> str:
    """The words inside the bordered panel titled ``title``, its lines joined by spaces."""
    lines = screen.splitlines()
    top = next(i for i, ln in enumerate(lines) if f"╭─ {title} " in ln)
    left = lines[top].index(f"╭─ {title} ")
    right = lines[top].index("╮", left)
    inside = []
    for ln in lines[top + 1 :]:
        if ln[left : left + 1] != "│":
            break
        inside.append(ln[left + 1 : right].strip())
    return " ".join(" ".join(inside).split())


def tabs_of(app: TriageApp) -> EvidenceTabs:
    return app.triage.query_one(EvidenceTabs)


async def test_number_keys_and_brackets_switch_tabs(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        tabs = tabs_of(app)
        await pilot.press("4")
        assert tabs.active_id() == "kubelet"
        await pilot.press("right_square_bracket")
        assert tabs.active_id() == "xid"
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert tabs.active_id() == "nodes"
        await pilot.press("9")
        assert tabs.active_id() == "sources"
        await pilot.press("right_square_bracket")  # wraps around
        assert tabs.active_id() == "events"


async def test_the_step_in_focus_brings_up_the_tab_of_its_cited_rows(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        tabs = tabs_of(app)
        await pilot.press("4")  # the SRE looks elsewhere
        await pilot.press("enter")  # step 2 cites the FailedScheduling event
        await pilot.pause()
        assert tabs.active_id() == "events"
        table = tabs.active_table()
        row = tabs.shown["events"].rows[table.cursor_row]
        assert row.cited and row.cells[2] == "FailedScheduling"
        await pilot.press("4")  # the SRE's own choice stands while the citations are the same
        app._push()
        await pilot.pause()
        assert tabs.active_id() == "kubelet"


async def test_a_markup_laden_row_opens_whole_and_verbatim(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        tabs = tabs_of(app)
        await pilot.press("1")
        table = tabs.active_table()
        hostile = next(
            i for i, r in enumerate(tabs.shown["events"].rows) if r.cells[2] == "BackOff"
        )
        table.focus()
        table.move_cursor(row=hostile)
        await pilot.press("enter")  # enter on a row opens it (it does not follow the walk)
        await pilot.pause()
        assert isinstance(app.screen, RowDetailScreen)
        detail = app.screen.detail
        assert detail.citation.startswith("trainer-bundle/events.json:")
        assert "[bold red]boom[/] " in detail.line and "\x1b" not in detail.line
        text = screen_text(app)
        assert "[bold red]boom[/]" in text and "red alert" in text  # shown as text, not markup
        assert "from  trainer-bundle/events.json:" in text
        await pilot.press("w")
        await pilot.pause()
        assert app.screen.query_one("#row-detail-text").styles.text_wrap == "nowrap"
        await pilot.press("escape")
        assert app.screen is app.triage and app.cursor == 0
        await pilot.press("v")  # v opens the highlighted row from anywhere
        await pilot.pause()
        assert isinstance(app.screen, RowDetailScreen)
        assert app.screen.detail.fields[2] == ("reason", "BackOff")


def differential_walker(walker: HandWalker, bundle: Path) -> HandWalker:
    """The hand walker, with the verdict's differential filled in as the engine does."""
    kubelet = line_of(bundle, "kubelet.log", "Error syncing pod")

    class Differential(HandWalker):
        def __call__(
            self,
            facts: FactSet,
            answers: dict[str, str],  # type: ignore[override]
            overrides: dict[str, str],
        ) -> Transcript:
            t = super().__call__(facts, answers, overrides)
            if t.findings != (INSUFFICIENT,):
                return t
            return replace(
                t,
                confidence="likely",
                consistent=(
                    Alternative(
                        "pending.taint-repels",
                        "A taint repels the pod",
                        "medium",
                        "possible",
                        "1 node has an untolerated control-plane taint",
                        (kubelet,),
                        "pending/scheduler",
                    ),
                ),
                ruled_out=(
                    Alternative(
                        "pending.quota",
                        "A ResourceQuota caps GPUs",
                        "medium",
                        "",
                        "no quota in the namespace",
                        (),
                        "",
                    ),
                ),
            )

    return Differential(walker.bundle)


async def test_the_differential_sits_beside_the_verdict(
    bundle: Path, walker: HandWalker, tmp_path: Path
) -> None:
    app = make_app(bundle, differential_walker(walker, bundle), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("enter", "enter")
        await pilot.pause()
        text = screen_text(app)
        await pilot.press("z")  # the verdict on the whole screen
        await pilot.pause()
        text = screen_text(app)
        assert "Confidence likely" in text
        assert "Also consistent (1)  x shows their evidence" in text
        assert "pending.taint-repels  A taint repels the pod  [possible]" in text
        assert "reached by o at pending/scheduler" in text
        assert "Ruled out (1)" in text and "no quota in the namespace" in text
        assert "Error syncing pod" not in text.split("Also consistent")[1]
        await pilot.press("x")
        await pilot.pause()
        opened = screen_text(app).split("Also consistent")[1]
        assert "trainer-bundle/kubelet.log:2" in opened and "pod_workers.go:1298" in opened
        assert app.transcript is not None  # the ruled-out one has no lines, and says so
        assert "no cited lines" in verdict_content(app.transcript, True).plain


async def test_80x24_shows_verdict_fix_commands_and_keys(app: TriageApp) -> None:
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        assert app.triage.has_class("-compact")
        await pilot.press("enter", "enter")
        await pilot.pause()
        text = screen_text(app)
        assert "Verdict" in text and "HIGH   No schedulable node has 2 free" in text
        fix = box_text(text, "Fix")
        for command in INSUFFICIENT.fix.commands:  # wrapped to the panel, but all there
            assert f"$ {command}" in fix
        footer = text.splitlines()[-1]
        for keys in (
            "⏎ Follow",
            "o Override",
            "b Back",
            "c Copy",
            "e Export",
            "f Fix",
            "v View",
            "1-9 Tabs",
            "? Help",
            "q Quit",
        ):
            assert keys in footer
        await pilot.press("f")  # the fix on the whole screen: summary and every command
        await pilot.pause()
        text = screen_text(app)
        assert "Free GPUs or add capacity." in text
        assert app.triage.maximized is not None
        await pilot.press("escape")
        await pilot.pause()
        assert app.triage.maximized is None and app.cursor == 2


async def test_evidence_table_has_focus_enter_still_follows_elsewhere(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert not isinstance(app.focused, EvidenceTable)
        await pilot.press("enter")
        assert app.cursor == 1


def test_lineref_source_is_what_rows_carry(bundle: Path) -> None:
    ref = line_of(bundle, "events.json", HOSTILE_MSG[:10])
    assert isinstance(ref, LineRef) and ref.source == "trainer-bundle/events.json"


async def test_the_first_frame_has_the_pod_header_and_the_verdict_skeleton(
    bundle: Path, walker: HandWalker, tmp_path: Path
) -> None:
    app = make_app(bundle, walker, tmp_path)
    app.target_hint = "ml/trainer-0"
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()  # the first frame: nothing collected or walked yet
        text = screen_text(app)
        assert "ml/trainer-0" in text
        assert "Verdict  ·  not yet" in text or "Step 1 of" in text
        await settle(pilot, app)
        assert app.triage.query_one(EvidenceTabs).shown  # and the tabs filled in after it


async def test_help_at_80x24_lists_the_keys_and_scrolls(app: TriageApp) -> None:
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("question_mark")
        await pilot.pause()
        text = screen_text(app)
        for keys in ("enter    Follow", "1-9      Tabs", "v        View", "f        Fix"):
            assert keys in text
        assert "esc Close" in text.splitlines()[-1]


def _walk_lines(app: TriageApp) -> list[str]:
    """The walk panel's rows as drawn, inside its border."""
    from gputriage.tui.widgets.walk_path import WalkPath

    region = app.triage.query_one(WalkPath).content_region
    rows = screen_text(app).splitlines()[region.y : region.bottom]
    return [row[region.x : region.right] for row in rows]


async def test_wrapped_walk_lines_start_under_their_text(app: TriageApp) -> None:
    from gputriage.tui.widgets.walk_path import STEP_INDENT

    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app)
        await pilot.resize_terminal(80, 24)  # a narrow walk: prompts wrap
        await pilot.pause()
        lines = [line.rstrip("▁▂▃▄▅▆▇█ ") for line in _walk_lines(app)]
        assert lines[:2] == [" 1 ● Which phase is", " " * STEP_INDENT + "the pod in?"], lines
        # The step's name is not cut in two: its indent narrows instead.
        assert lines[2:4] == ["   →", "   pending/scheduler"], lines
        await pilot.press("enter", "enter")  # the verdict, with its finding id
        await pilot.pause()
        lines = [line.rstrip("▁▂▃▄▅▆▇█ ") for line in _walk_lines(app)]
        assert "   ⚑ verdict" in lines, lines
        assert [line for line in lines if line and not line.startswith(" ")] == [], lines


def test_hanging_indent_wraps_under_the_text() -> None:
    from textual.content import Content

    from gputriage.tui.widgets.walk_path import hanging

    text = hanging(Content(" 1 ● "), Content("Does the scheduler say there is no free GPU?"), 20)
    assert text.plain.splitlines() == [
        " 1 ● Does the",
        "     scheduler say",
        "     there is no",
        "     free GPU?",
    ]
    # Not laid out yet (no width), or too narrow to indent: the widget wraps as usual.
    assert hanging(Content("ab "), Content("c d"), None).plain == "ab c d"
    assert hanging(Content(" 1 ● "), Content("x y"), 10).plain == " 1 ● x y"
    # A blank indent narrows so that a long word (a step's name) is not cut in two.
    assert hanging(Content("     "), Content("→ pending/scheduler"), 20).plain.splitlines() == [
        "   →",
        "   pending/scheduler",
    ]
