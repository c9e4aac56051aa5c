"""Copying fix commands: mutating ones are marked and asked about, read-only ones go in one go.

The real walk over the lost-xid79 demo (playbooks and all): its fix lists read-only commands
first, then cordon / drain / reboot, which change state.
"""

from __future__ import annotations

from pathlib import Path

from gputriage.scenarios import scenario_path
from gputriage.tui.app import TriageApp
from gputriage.tui.screens.confirm import ConfirmScreen
from gputriage.tui.widgets.fix_panel import CommandList, FixPanel
from tests.tui.harness import make_app, settle

SIZE = (160, 50)


def _app(tmp_path: Path) -> TriageApp:
    return make_app(Path(str(scenario_path("lost-xid79"))), None, tmp_path)


async def test_mutating_command_is_marked_and_copied_only_after_yes(tmp_path: Path) -> None:
    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        panel = app.triage.query_one(FixPanel)
        cordon = next(i for i, c in enumerate(panel.commands) if c.startswith("kubectl cordon"))
        assert panel.records[cordon].mutates and not panel.records[0].mutates
        options = panel.query_one(CommandList)
        assert str(options.get_option_at_index(cordon).prompt) == "! kubectl cordon gpu-h100-07"
        assert str(options.get_option_at_index(0).prompt).startswith("$ kubectl get pods")
        options.highlighted = cordon
        app.copy_to_clipboard("")
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and app.clipboard == ""
        await pilot.press("n")  # cancel: nothing copied
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen) and app.clipboard == ""
        await pilot.press("c")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert app.clipboard == "kubectl cordon gpu-h100-07"


async def test_read_only_command_is_copied_without_a_question(tmp_path: Path) -> None:
    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("c")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert app.clipboard.startswith("kubectl get pods -A -o wide")


async def test_copy_read_only_takes_every_command_that_changes_nothing(tmp_path: Path) -> None:
    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("C")
        await pilot.pause()
        copied = app.clipboard.splitlines()
        assert "ssh gpu-h100-07 sudo nvidia-bug-report.sh --safe-mode" in copied
        assert len(copied) >= 4
        assert not any(
            c.startswith(("kubectl cordon", "kubectl drain", "kubectl uncordon"))
            or c.endswith("sudo reboot")
            for c in copied
        )


async def test_export_says_whether_the_sre_confirmed_the_walk(tmp_path: Path) -> None:
    import json

    from gputriage.tui import walkstate

    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("e")  # before following the walk: the engine's proposal
        await pilot.pause()
        first = json.loads(app.exported[1].read_text())
        assert first["walk_status"]["status"] == "proposed"
        for _ in range(12):
            if walkstate.at_verdict(app.cursor, app.transcript):
                break
            await pilot.press("enter")
            await pilot.pause()
        assert walkstate.at_verdict(app.cursor, app.transcript)
        app.clock = lambda: 1_700_000_100.0  # a second export gets its own file name
        await pilot.press("e")
        await pilot.pause()
        second = json.loads(app.exported[1].read_text())
        assert second["walk_status"]["status"] == "confirmed"
        assert "confirmed step by step" in app.exported[0].read_text()
