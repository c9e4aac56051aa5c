"""``gputriage demo``: listing, picking, the headless passthrough, and clear errors."""

from __future__ import annotations

import json

import pytest

from gputriage.cli import main
from gputriage.scenarios import list_scenarios
from gputriage.tui.picker import ScenarioPicker

NAMES = ["create-nvidia-uvm-missing", "lost-xid79", "oom-time-sliced", "pending-insufficient-gpu"]


def test_list_names_every_scenario_with_its_title(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--list"]) == 0
    out = capsys.readouterr().out
    for s in list_scenarios():
        assert f"{s.name}  " in out and s.title in out
    assert [s.name for s in list_scenarios()] == NAMES


def test_unknown_scenario_names_the_close_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "lost-xid97"]) == 2
    err = capsys.readouterr().err
    assert "no demo scenario named 'lost-xid97'" in err and "Did you mean lost-xid79" in err


def test_report_walks_the_scenario_headless(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "pending-insufficient-gpu", "--report", "json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert summary["target"]["pod"] == "llm-finetune-7d9c5b8f6d-x2x4q"
    assert summary["target"]["namespace"] == "ml-training"
    assert summary["verdict"]["status"] == "finding" and summary["findings"]


async def test_picker_returns_the_chosen_scenario() -> None:
    picker = ScenarioPicker([(n, f"about {n}") for n in NAMES])
    async with picker.run_test(size=(120, 30)) as pilot:
        await pilot.press("down", "down", "enter")
        await pilot.pause()
    assert picker.return_value == "oom-time-sliced"


async def test_picker_quits_without_a_choice() -> None:
    picker = ScenarioPicker([(n, n) for n in NAMES])
    async with picker.run_test(size=(120, 30)) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert picker.return_value is None


async def test_picker_shows_its_keys_in_the_footer_and_a_hint_line() -> None:
    from tests.tui.harness import screen_text

    picker = ScenarioPicker([(n, f"about {n}") for n in NAMES])
    async with picker.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        lines = screen_text(picker).splitlines()
        footer = lines[-1]
        for key in ("⏎ Open", "↑↓ j/k Move", "q Quit"):
            assert key in footer, footer
        assert any(
            "enter opens a scenario  ·  ↑↓ or j/k move  ·  q quits" in line for line in lines
        )
        # The keys the footer names do what it says: j/k move, enter opens.
        await pilot.press("j", "j", "k", "enter")
        await pilot.pause()
    assert picker.return_value == "lost-xid79"
