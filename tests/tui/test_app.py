"""Pilot tests: every action of the triage screen, driven by keys and clicks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.widgets import DataTable, Input, OptionList, TextArea

from gputriage.errors import GputriageError
from gputriage.evidence.model import Evidence, Key, Status
from gputriage.facts.model import FactSet
from gputriage.playbook.transcript import Outcome, Transcript
from gputriage.session import BundleSession
from gputriage.tui import walkstate
from gputriage.tui.app import TriageApp
from gputriage.tui.screens.choice import ChoiceScreen
from gputriage.tui.screens.error import ErrorScreen
from gputriage.tui.screens.help import HelpScreen
from gputriage.tui.screens.note import NoteScreen
from gputriage.tui.widgets.evidence_tabs import CITED_MARK, EvidenceTabs
from gputriage.tui.widgets.fix_panel import FixPanel
from gputriage.tui.widgets.walk_path import WalkPath
from tests.tui.bundles import (
    HOSTILE_MSG,
    INSUFFICIENT,
    TOLERATION_MISSING,
    HandWalker,
    line_of,
)
from tests.tui.harness import NOW, CountingSession, make_app, screen_text, settle

SIZE = (120, 40)


async def test_startup_streams_every_key_then_walks(app: TriageApp, walker: HandWalker) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert set(app.evidence) == set(Key) and app.pending == frozenset()
        assert app.evidence[Key.POD].ok and app.evidence[Key.DMESG].status is Status.UNAVAILABLE
        assert app.facts is not None and app.facts.target.pod == "trainer-0"
        assert app.transcript is not None and len(app.transcript.visits) == 2
        assert app.cursor == 0 and walker.calls >= 1
        text = screen_text(app)
        assert "ml/trainer-0" in text and "Pending" in text and "nvidia.com/gpu×2" in text
        assert "Which phase is the pod in?" in text
        assert "trainer-bundle/pod.json:43" in text  # the cited line, in place
        # An unscheduled pod: node-side evidence and the never-started container's log are
        # expected to be missing ("not applicable"), distinct from "not collected".
        assert (
            f"Sources 3/{len(Key)} ok  – not applicable: 14 sources  – not collected: "
            f"{len(Key) - 17} sources" in text
        )
        assert (
            "⏎ Follow o Override b Back c Copy e Export f Fix v View 1-9 Tabs ? Help q Quit"
        ) in text


async def test_follow_walks_to_the_verdict_and_back(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("enter")
        assert app.cursor == 1
        assert "Does the scheduler say there is no free GPU?" in screen_text(app)
        await pilot.press("enter")
        assert app.cursor == 2
        text = screen_text(app)
        assert "Verdict" in text and INSUFFICIENT.title in text and " HIGH " in text
        await pilot.press("enter")  # nothing past the verdict: a notification says so
        assert app.cursor == 2
        await pilot.pause()
        assert any("walk is complete" in n.message for n in app._notifications)
        await pilot.press("b")
        assert app.cursor == 1
        await pilot.press("escape")
        assert app.cursor == 0
        await pilot.press("escape")
        assert app.cursor == 0


async def test_arrow_keys_and_clicks_move_along_the_path(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        path = app.triage.query_one(WalkPath)
        assert app.focused is path
        await pilot.press("down")
        await pilot.pause()
        assert app.cursor == 1 and path.highlighted == 1
        await pilot.press("down", "down", "down")
        await pilot.pause()
        assert app.cursor == 2  # clamped at the verdict
        await pilot.press("home")
        await pilot.pause()
        assert app.cursor == 0
        # The second step starts on line 3 of the list (each step takes two lines).
        await pilot.click(WalkPath, offset=(5, 3))
        await pilot.pause()
        assert app.cursor == 1 and path.highlighted == 1


async def test_override_takes_another_branch_and_marks_it(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("o")  # step 1 has two branches too
        assert isinstance(app.screen, ChoiceScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, ChoiceScreen) and app.overrides == {}
        await pilot.press("enter", "o")
        choice = app.screen
        assert isinstance(choice, ChoiceScreen)
        assert choice.query_one(OptionList).highlighted == 0  # the branch taken now
        await pilot.press("down", "enter")
        await pilot.pause()
        assert app.overrides == {"pending/scheduler": "taints"}
        assert app.transcript is not None
        visit = app.transcript.visits[1]
        assert visit.outcome is Outcome.OVERRIDE and visit.target == "pending/taints"
        assert app.cursor == 2 and app.transcript.question is not None
        text = screen_text(app)
        assert "↷ pending/taints  (override)" in text
        # b goes back over the override and undoes it: the walk is the engine's own again.
        await pilot.press("b")
        await pilot.pause()
        assert app.overrides == {} and app.cursor == 1
        assert app.transcript.visits[1].outcome is Outcome.CONDITION
        assert "Override at pending/scheduler undone." in [n.message for n in app._notifications]
        text = screen_text(app)
        assert "Next       finding pending.insufficient-gpu" in text
        assert "(override)" not in text
        # Override again, look at it from the step, and pick the engine's branch once more:
        # that removes the override too.
        await pilot.press("o", "down", "enter", "up")
        await pilot.pause()
        assert app.overrides == {"pending/scheduler": "taints"} and app.cursor == 1
        text = screen_text(app)
        assert "Taken      pending/taints: Is the control-plane taint meant" in text
        assert "Engine     finding pending.insufficient-gpu" in text
        await pilot.press("o", "up", "enter")
        await pilot.pause()
        assert app.overrides == {}
        assert app.transcript.visits[1].outcome is Outcome.CONDITION


async def test_answer_a_question_in_a_modal(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("a")  # nothing waits yet
        await pilot.pause()
        assert not isinstance(app.screen, ChoiceScreen)
        assert any("No question" in n.message for n in app._notifications)
        app.overrides = {"pending/scheduler": "taints"}
        app._rewalk()
        app._push()
        await pilot.press("a")  # jumps to the waiting step and asks
        assert isinstance(app.screen, ChoiceScreen) and app.cursor == 2
        assert "Ask the cluster owner." in screen_text(app)
        await pilot.press("down", "enter")
        await pilot.pause()
        assert app.answers == {"pending/taints": "not-intended"}
        assert app.transcript is not None
        assert app.transcript.findings == (TOLERATION_MISSING,)
        assert app.cursor == 3 and "The pod lacks a toleration" in screen_text(app)
        await pilot.press("b", "enter")  # following onto an answered step moves on
        assert app.cursor == 3


async def test_follow_on_a_waiting_step_opens_the_question(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        app.overrides = {"pending/scheduler": "taints"}
        app._rewalk()
        app._move(2)
        await pilot.press("enter")
        assert isinstance(app.screen, ChoiceScreen)
        await pilot.press("enter")
        await pilot.pause()
        assert app.answers == {"pending/taints": "intended"}


async def test_a_note_is_saved_at_once_with_its_step(app: TriageApp, tmp_path: Path) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("enter", "n")
        assert isinstance(app.screen, NoteScreen)
        assert isinstance(app.focused, TextArea)
        await pilot.press(*"GPU 3 looks dead", "enter")
        await pilot.press(*"paged the vendor")
        await pilot.press("ctrl+s")
        await pilot.pause()
        saved = json.loads((tmp_path / "notes" / "n.json").read_text())
        assert saved["notes"][0]["text"] == "GPU 3 looks dead\npaged the vendor"
        assert saved["notes"][0]["step"] == "pending/scheduler"
        await pilot.press("n", "escape")  # cancelled: nothing more saved
        await pilot.pause()
        assert len(json.loads((tmp_path / "notes" / "n.json").read_text())["notes"]) == 1


async def test_refresh_streams_the_session_again(app: TriageApp) -> None:
    session = app.session
    assert isinstance(session, CountingSession)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert session.streams == 1
        await pilot.press("r")
        await settle(pilot, app)
        assert session.streams == 2 and app.pending == frozenset()
        assert app.transcript is not None and len(app.transcript.visits) == 2
        await pilot.click("#sources")  # the status bar retries on a click too
        await settle(pilot, app)
        assert session.streams == 3


async def test_filter_narrows_the_evidence_tables(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        tabs = app.triage.query_one(EvidenceTabs)
        await pilot.press("colon")
        await pilot.press(*"kubelet", "enter")  # palette entry: show the Kubelet tab
        await pilot.pause()
        table = tabs.active_table()
        assert table.id == "table-kubelet" and table.row_count == 2
        await pilot.press("slash")
        assert isinstance(app.focused, Input) and tabs.filter_open
        await pilot.press(*"error syncing")
        await pilot.pause()
        assert table.row_count == 1
        assert "Error syncing pod" in str(table.get_row_at(0)[1])
        await pilot.press("enter")  # enter in the filter box goes to the table, not "follow"
        assert app.cursor == 0 and app.focused is table
        await pilot.press("slash", "escape")
        await pilot.pause()
        assert not tabs.filter_open and table.row_count == 2 and app.cursor == 0


async def test_copy_puts_the_fix_command_on_the_clipboard(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("c")
        assert app.clipboard == "kubectl -n ml describe pod trainer-0"
        fix = app.triage.query_one(FixPanel)
        fix.query_one(OptionList).focus()
        await pilot.press("down", "c")
        assert app.clipboard == "kubectl get pods -A --field-selector spec.nodeName=gpu-node-7"
        app.copy_to_clipboard("")
        await pilot.click("#fix-commands", offset=(4, 0))
        await pilot.pause()
        assert app.clipboard == "kubectl -n ml describe pod trainer-0"


async def test_export_writes_markdown_and_json(app: TriageApp, tmp_path: Path) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("enter", "enter", "n", *"drained the node", "ctrl+s")
        await pilot.press("e")
        await pilot.pause()
        md, js = app.exported
        stem = "gputriage-ml-trainer-0-20231114T221320Z"
        assert md == tmp_path / "out" / f"{stem}.md" and js.suffix == ".json"
        assert "pending.insufficient-gpu" in md.read_text()
        summary = json.loads(js.read_text())
        assert [f["id"] for f in summary["findings"]] == ["pending.insufficient-gpu"]
        assert summary["notes"][0]["text"] == "drained the node"
        assert summary["target"]["pod"] == "trainer-0"
        assert any(str(md) in n.message for n in app._notifications)


async def test_export_failure_is_a_notification_not_a_crash(app: TriageApp, tmp_path: Path) -> None:
    (tmp_path / "out").write_text("a file where the export directory should be")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("e")
        await pilot.pause()
        assert app.exported == ()
        assert any(n.title == "export failed" for n in app._notifications)
        assert app.is_running


async def test_help_screen_lists_every_key(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        for key, what in (
            ("enter", "Follow"),
            ("o", "Override"),
            ("/", "Filter"),
            ("e", "Export"),
            (":", "Palette"),
            ("↷", "override"),
            ("1-9", "Tabs"),
            ("v", "View"),
            ("f", "Fix"),
            ("[ ]", "tab"),
        ):
            assert f"{key}" in text and what in text
        await pilot.press("escape")
        assert app.screen is app.triage


@pytest.mark.parametrize(
    ("query", "check"),
    [
        ("export", "exported"),
        ("help", "help"),
        ("next theme", "theme"),
    ],
)
async def test_palette_runs_actions(app: TriageApp, query: str, check: str) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        before = app.theme
        await pilot.press("colon")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*query)
        await pilot.pause(0.2)
        await pilot.press("enter")
        await pilot.pause()
        if check == "exported":
            assert len(app.exported) == 2
        elif check == "help":
            assert isinstance(app.screen, HelpScreen)
        else:
            assert app.theme != before


async def test_theme_key_cycles_themes(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert app.theme == "gputriage"
        await pilot.press("t")
        assert app.theme == "gputriage-light"


async def test_no_color_renders_monochrome(
    bundle: Path, walker: HandWalker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    colored = make_app(bundle, walker, tmp_path)
    async with colored.run_test(size=SIZE) as pilot:
        await settle(pilot, colored)
        assert "#76b900" in colored.export_screenshot().lower()  # the theme's green
    monkeypatch.setenv("NO_COLOR", "1")
    mono = make_app(bundle, walker, tmp_path)
    async with mono.run_test(size=SIZE) as pilot:
        await settle(pilot, mono)
        assert mono.no_color
        assert "#76b900" not in mono.export_screenshot().lower()


async def test_cluster_text_is_inert_everywhere(bundle: Path, tmp_path: Path) -> None:
    hostile = line_of(bundle, "events.json", "boom")
    assert "\\u001b" in hostile.text  # JSON escapes it; facts decode it to a real ESC

    class Citing(HandWalker):
        def __call__(self, facts: FactSet, answers: object, overrides: object) -> Transcript:
            t = super().__call__(facts, {}, {})
            from dataclasses import replace

            from gputriage.evidence.model import LineRef

            ref = LineRef("events", hostile.source, hostile.line, HOSTILE_MSG)
            return replace(
                t,
                visits=(replace(t.visits[0], citations=(ref,), because=HOSTILE_MSG), *t.visits[1:]),
            )

    app = make_app(bundle, Citing(bundle), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        text = screen_text(app)
        assert "[bold red]boom[/] red alert done" in text
        assert "\x1b" not in text and "pwned" not in text
        events = app.triage.query_one("#table-events", DataTable)
        shown = ["".join(str(c) for c in events.get_row_at(i)) for i in range(events.row_count)]
        assert any("[bold red]boom[/] red alert done" in row for row in shown)
        assert all("\x1b" not in row for row in shown)


async def test_cited_rows_are_marked_in_the_tables(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("enter")  # step 2 cites the FailedScheduling event
        events = app.triage.query_one("#table-events", DataTable)
        first = [str(c) for c in events.get_row_at(0)]
        assert first[0].startswith(CITED_MARK) and "FailedScheduling" in first


class SlowSession(BundleSession):
    """Yields the pod at once, then holds the rest until ``release`` is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, description="slow")
        self.release = asyncio.Event()

    async def stream(self) -> AsyncIterator[Evidence]:
        evidence = self._load()
        yield evidence[Key.POD]
        await self.release.wait()
        for key in Key:
            if key is not Key.POD:
                yield evidence.get_or_missing(key)


async def test_slow_sources_never_freeze_the_screen(
    bundle: Path, walker: HandWalker, tmp_path: Path
) -> None:
    session = SlowSession(bundle)
    app = make_app(bundle, walker, tmp_path, session=session)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            await pilot.pause(0.02)
            if app.transcript is not None and app.triage.rest_mounted:  # the source bar too
                await pilot.pause()
                break
        assert app.pending and Key.POD not in app.pending and app.transcript is not None
        assert f"Sources 1/{len(Key)} ok" in screen_text(app)
        assert "⠋ events" in screen_text(app) or "events" in screen_text(app)
        await pilot.press("question_mark")  # the UI answers while sources are still out
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        session.release.set()
        await settle(pilot, app)
        assert app.pending == frozenset() and f"Sources 3/{len(Key)} ok" in screen_text(app)


class FailingSession(BundleSession):
    async def stream(self) -> AsyncIterator[Evidence]:
        raise GputriageError(
            "pod trainer-9 not found in namespace ml; did you mean trainer-0?",
            title="pod not found",
        )
        yield  # pragma: no cover - makes this an async generator


async def test_a_failing_session_shows_the_reason(
    bundle: Path, walker: HandWalker, tmp_path: Path
) -> None:
    app = make_app(bundle, walker, tmp_path, session=FailingSession(bundle))
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, ErrorScreen)
        assert "did you mean trainer-0?" in screen_text(app)
        assert app.pending == frozenset()
        await pilot.press("q")
        await pilot.pause()
    assert not app.is_running


async def test_broken_playbooks_leave_the_evidence_usable(bundle: Path, tmp_path: Path) -> None:
    def broken() -> tuple[HandWalker, tuple[str, ...]]:
        raise RuntimeError("playbooks/triage.yaml:3:1: boom")

    app = TriageApp(
        CountingSession(bundle, description="d"),
        walker_factory=broken,
        notes_path=tmp_path / "n.json",
        export_dir=tmp_path,
        clock=lambda: NOW,
    )
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert app.transcript is None and app.walker is None
        assert app.walk_status.startswith("the playbooks could not be loaded: RuntimeError")
        assert "triage.yaml:3:1" in screen_text(app)
        assert app.facts is not None and app.facts.target.pod == "trainer-0"
        await pilot.press("e")
        await pilot.pause()
        assert app.exported == ()


async def test_an_engine_error_is_shown_not_raised(bundle: Path, tmp_path: Path) -> None:
    def walker(facts: FactSet, answers: object, overrides: object) -> Transcript:
        raise KeyError("scheduler")

    app = TriageApp(
        CountingSession(bundle, description="d"),
        walker_factory=lambda: (walker, ("skipped broken.yaml",)),
        notes_path=tmp_path / "n.json",
        export_dir=tmp_path,
        clock=lambda: NOW,
    )
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert app.walk_status == "the playbook engine failed: KeyError: 'scheduler'"
        warnings = [n.message for n in app._notifications if n.title == "playbooks skipped"]
        assert warnings == ["skipped broken.yaml\n`gputriage playbooks validate` lists them all."]
        await pilot.press("enter", "o")
        assert app.is_running and app.cursor == 0


async def test_tabs_switch_by_click(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        tabs = app.triage.query_one(EvidenceTabs)
        assert tabs.active_table().id == "table-events"
        await pilot.click("#tabs Tab#--content-tab-tab-sources")
        await pilot.pause()
        table = tabs.active_table()
        assert table.id == "table-sources" and table.row_count == len(Key)
        pod_row = [str(c) for c in table.get_row_at(0)]
        assert pod_row[:2] == ["pod", "ok"] and pod_row[3] == "trainer-bundle/pod.json"


async def test_the_palette_offers_every_action_and_every_tab(app: TriageApp) -> None:
    from textual.binding import Binding

    from gputriage.tui.palette import TriageCommands
    from gputriage.tui.screens.triage import TRIAGE_BINDINGS
    from gputriage.tui.tables import TABS

    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        provider = TriageCommands(app.screen)
        names = [hit.text async for hit in provider.discover()]
        actions = [
            b.description
            for b in TRIAGE_BINDINGS
            if isinstance(b, Binding) and b.action != "app.command_palette"
        ]
        assert names == [*actions, *(f"Show tab: {t.title}" for t in TABS)]
        assert "Follow" in names and "Export" in names and "Next theme" in names


class NoticeSession(BundleSession):
    """A session that chose its pod from a workload, as a live session does for deploy/x."""

    notice = "deploy/trainer has 3 pods; triaging trainer-0 (Pending)"


async def test_a_session_notice_is_shown(bundle: Path, walker: HandWalker, tmp_path: Path) -> None:
    app = make_app(bundle, walker, tmp_path, session=NoticeSession(bundle, description="d"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert [n.message for n in app._notifications if n.title == "target"] == [
            NoticeSession.notice
        ]


def test_run_triage_closes_the_session(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gputriage.options import TriageOptions
    from gputriage.pipeline import Triage
    from gputriage.tui import launch

    closed: list[bool] = []

    class Closing(BundleSession):
        def close(self) -> None:
            closed.append(True)

    # App.run needs a terminal (the tmux test runs it for real); here only the cleanup matters.
    monkeypatch.setattr(TriageApp, "run", lambda self: None)
    triage = Triage(kind="pod", name="p", open_session=lambda: Closing(bundle))
    assert launch.run_triage(triage, TriageOptions()) == 0
    assert closed == [True]


@pytest.mark.parametrize(
    "scenario",
    ["create-nvidia-uvm-missing", "lost-xid79", "oom-time-sliced", "pending-insufficient-gpu"],
)
async def test_demo_scenarios_walk_the_shipped_playbooks(scenario: str, tmp_path: Path) -> None:
    """The app's own walker (playbooks loaded in a worker) gives the engine's walk."""
    from gputriage.evidence.bundle import read_bundle
    from gputriage.facts.build import build_facts
    from gputriage.playbook.engine import walk
    from gputriage.playbook.loader import load_playbooks
    from gputriage.scenarios import scenario_path

    path = scenario_path(scenario)
    expected = walk(load_playbooks(), build_facts(read_bundle(path)))
    assert expected.visits
    app = TriageApp(
        BundleSession(path, description=f"demo {scenario}"),
        notes_path=tmp_path / "n.json",
        export_dir=tmp_path,
        clock=lambda: NOW,
    )
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert app.transcript == expected
        first = expected.visits[0]
        assert first.prompt in screen_text(app)
        while walkstate.follow(app.cursor, app.transcript).kind == "advance":
            await pilot.press("enter")
        if expected.question is None:
            assert app.cursor == len(expected.visits)
            assert "⚑ verdict" in screen_text(app)
            assert expected.findings[0].id in screen_text(app)
        else:
            assert app.cursor == len(expected.visits) - 1
            assert "press a to answer" in screen_text(app)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_export_toast_is_short_names_the_file_and_spares_the_table(
    bundle: Path, walker: HandWalker, tmp_path: Path, size: tuple[int, int]
) -> None:
    from gputriage.tui.app import EXPORT_TOAST_S

    # A directory name that looks like markup is shown as it is, not parsed.
    app = make_app(bundle, walker, tmp_path)
    app.export_dir = tmp_path / "[b]incidents[/b]"
    async with app.run_test(size=size, notifications=True) as pilot:
        await settle(pilot, app)
        app.clear_notifications()
        await pilot.press("e")
        for _ in range(50):  # toasts mount after the next refresh
            await pilot.pause(0.02)
            toasts = list(app.screen.query("Toast"))
            if toasts:
                break
        md, _ = app.exported
        assert len(toasts) == 1
        table = app.triage.query_one(EvidenceTabs).region
        assert not toasts[0].region.overlaps(table), (toasts[0].region, table)
        # Drawn verbatim: parsed as markup, "[b]incidents[/b]" would lose its brackets.
        shown = str(toasts[0].render())
        assert shown == f"incident summary written\n{md}\n+ .json beside it"
        assert "[b]incidents[/b]" in str(md)
        assert EXPORT_TOAST_S <= 5
        await pilot.pause(EXPORT_TOAST_S + 0.5)
        assert not list(app.screen.query("Toast"))


async def test_live_refresh_reads_node_side_evidence_only(tmp_path: Path) -> None:
    """With the watch on (a live session over the local fake API), ``r`` replaces only the
    node-side evidence; the pod, its events and its node stay as the watch has them."""
    from gputriage.cli import build_parser
    from gputriage.evidence.sources import NODE_KEYS
    from tests.kubeapi import KubeAPI
    from tests.kubeapi.cluster import gpu_cluster
    from tests.live import open_live

    cluster = gpu_cluster()
    with KubeAPI(cluster) as api:
        config = api.write_kubeconfig(tmp_path / "kubeconfig")
        args = build_parser().parse_args(
            [
                "triage",
                "trainer-0",
                "--kubeconfig",
                str(config),
                "--ssh",
                "off",
                *(f"--node-address={name}=127.0.0.1" for _, name in cluster.keys("", "nodes")),
            ]
        )
        session = open_live(args)
        app = TriageApp(
            session,
            notes_path=tmp_path / "n.json",
            export_dir=tmp_path,
            clock=lambda: NOW,
            clipboard_file=tmp_path / "clip.txt",
        )
        try:
            async with app.run_test(size=SIZE) as pilot:
                await settle(pilot, app)
                for _ in range(100):
                    if app.triage.view is not None and app.triage.view.live:
                        break
                    await pilot.pause(0.05)
                assert app.triage.view is not None and app.triage.view.live
                before = dict(app.evidence.items())
                node_side = {k for k in before if k in NODE_KEYS}
                assert Key.KUBELET_LOG in node_side
                app.clear_notifications()
                asked_before = len(api.requests)
                await pilot.press("r")
                await settle(pilot, app)
                after = dict(app.evidence.items())
                # The API is asked for the pod and its node (the address), nothing cluster-wide.
                asked = {
                    r.path for r in api.requests[asked_before:] if r.query.get("watch") != ("true",)
                }
                assert "/api/v1/namespaces/ml/pods/trainer-0" in asked
                assert not asked & {
                    "/api/v1/nodes",
                    "/api/v1/namespaces/ml/events",
                    "/apis/resource.k8s.io/v1/resourceslices",
                }, asked
                for key in (Key.POD, Key.EVENTS, Key.NODE):
                    assert after[key] is before[key], key  # the watch's, untouched
                for key in node_side:
                    assert after[key] is not before[key], key  # collected again
                toast = [n for n in app._notifications if n.title == "refresh"]
                assert len(toast) == 1 and "node-side evidence" in toast[0].message
                assert "live already" in toast[0].message
        finally:
            session.close()
        assert not api.mutations()


async def test_bundle_refresh_says_it_reads_every_source(app: TriageApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("r")
        await settle(pilot, app)
        assert [n.message for n in app._notifications if n.title == "refresh"] == [
            "Collecting every source again."
        ]


async def test_the_first_frame_is_header_walk_step_and_fix_the_rest_follows(
    app: TriageApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 16: the evidence tables, the source bar and the footer mount after the first
    frame; keys that reach for them before then do nothing instead of failing."""
    from gputriage.tui.screens.triage import TriageScreen

    monkeypatch.setattr(TriageScreen, "REST_DELAY", 60.0)  # hold the rest back
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.triage
        assert not screen.rest_mounted and not screen.query(EvidenceTabs)
        assert screen.query_one(WalkPath) and screen.query_one(FixPanel)
        assert "ml/trainer-0" in screen_text(app)
        for key in ("1", "]", "/", "v", "b"):
            await pilot.press(key)
        assert app.is_running and not app.settled
        await screen._mount_rest()
        await settle(pilot, app)
        assert screen.rest_mounted and screen.query_one(EvidenceTabs).view is not None
        assert "⏎ Follow" in screen_text(app)


class TrickleSession(BundleSession):
    """Yields the pod, then one key every 10 ms, as a live cluster's sources land."""

    async def stream(self) -> AsyncIterator[Evidence]:
        evidence = self._load()
        yield evidence[Key.POD]
        for key in Key:
            if key is not Key.POD:
                await asyncio.sleep(0.01)
                yield evidence.get_or_missing(key)


async def test_keys_landing_one_by_one_rebuild_the_screen_a_few_times_not_once_each(
    bundle: Path, walker: HandWalker, tmp_path: Path
) -> None:
    app = make_app(bundle, walker, tmp_path, session=TrickleSession(bundle, description="t"))
    rebuilds: list[frozenset[Key]] = []
    real = app._rebuild

    def counting() -> None:
        rebuilds.append(app.pending)
        real()

    app._rebuild = counting  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert app.pending == frozenset() and set(app.evidence) == set(Key)
    # 27 keys over ~0.3 s: the pod's facts at once, then at most one rebuild per 0.1 s, and
    # the last key's at once (nothing pending when it ran).
    assert rebuilds[0] == frozenset(Key) - {Key.POD}
    assert rebuilds[-1] == frozenset()
    assert 2 <= len(rebuilds) <= 8, len(rebuilds)
