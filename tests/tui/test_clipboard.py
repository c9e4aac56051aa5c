"""The clipboard tells the truth: which way the text went, and only ways that worked.

The platform clipboard is exercised with a real executable on PATH standing in for ``xclip``
(this machine has no X server): it records what it was given and exits as told.
"""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

from gputriage.tui.app import TriageApp
from gputriage.tui.clipboard import copy_text, osc52_sequence, platform_tool
from tests.tui.harness import settle

COMMAND = "kubectl -n ml describe pod 'trainer-0'; echo $HOME"


def fake_tool(bin_dir: Path, name: str, rc: int, sink: Path) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / name
    script.write_text(
        f'#!/bin/sh\necho "$@" > {sink}.args\n/bin/cat > {sink}\n'
        f"echo 'cannot open display' >&2\nexit {rc}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_osc52_is_the_standard_escape() -> None:
    seq = osc52_sequence(COMMAND)
    assert seq.startswith("\x1b]52;c;") and seq.endswith("\a")
    assert base64.b64decode(seq[7:-1]).decode() == COMMAND


def test_no_clipboard_tool_falls_back_to_an_owner_only_file(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path / "empty-bin"), "HOME": str(tmp_path)}
    result = copy_text(COMMAND, osc52_sent=False, file=tmp_path / "state" / "clip.txt", env=env)
    assert result.platform == "" and result.file == tmp_path / "state" / "clip.txt"
    assert result.file.read_text() == COMMAND + "\n"
    assert stat.S_IMODE(result.file.stat().st_mode) == 0o600
    assert result.title() == "saved to a file (no clipboard reachable)"
    sent = copy_text(COMMAND, osc52_sent=True, file=tmp_path / "c2.txt", env=env)
    assert sent.title() == "sent to the terminal clipboard (OSC 52) and saved to a file"


def test_a_working_platform_tool_gets_the_text_and_is_named(tmp_path: Path) -> None:
    sink = tmp_path / "got"
    fake_tool(tmp_path / "bin", "xclip", 0, sink)
    env = {"PATH": str(tmp_path / "bin"), "DISPLAY": ":0"}
    result = copy_text(COMMAND, osc52_sent=True, file=tmp_path / "clip.txt", env=env)
    assert sink.read_text() == COMMAND  # passed on stdin, never through a shell
    assert Path(f"{sink}.args").read_text().split() == ["-selection", "clipboard", "-in"]
    assert result.platform == "xclip" and result.file is None
    assert not (tmp_path / "clip.txt").exists()
    assert result.title() == "copied to the clipboard (xclip)"
    assert result.lines() == ["also sent to the terminal (OSC 52)"]


def test_a_failing_platform_tool_is_not_reported_as_copied(tmp_path: Path) -> None:
    fake_tool(tmp_path / "bin", "xclip", 1, tmp_path / "got")
    env = {"PATH": str(tmp_path / "bin"), "DISPLAY": ":0"}
    result = copy_text(COMMAND, osc52_sent=False, file=tmp_path / "clip.txt", env=env)
    assert result.platform == "" and result.file == tmp_path / "clip.txt"
    assert result.problems == ("xclip exited 1: cannot open display",)
    assert "copied" not in result.title()


def test_x11_tools_need_a_display(tmp_path: Path) -> None:
    fake_tool(tmp_path / "bin", "xclip", 0, tmp_path / "got")
    assert platform_tool({"PATH": str(tmp_path / "bin")}) is None
    tool = platform_tool({"PATH": str(tmp_path / "bin"), "DISPLAY": ":1"})
    assert tool is not None and tool.name == "xclip"


async def test_c_in_the_app_says_where_the_command_went(
    app: TriageApp, tmp_path: Path, monkeypatch: object
) -> None:
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin") + os.pathsep + "/nonexistent")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    app.clipboard_file = tmp_path / "clip.txt"
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("c")
        await pilot.pause()
        assert app.clipboard == "kubectl -n ml describe pod trainer-0"
        assert (tmp_path / "clip.txt").read_text() == "kubectl -n ml describe pod trainer-0\n"
        toast = app._notifications
        titles = [n.title for n in toast]
        # Headless: no terminal got an OSC 52, no platform tool: only the file, and it says so.
        assert "saved to a file (no clipboard reachable)" in titles
        assert any(f"file: {tmp_path / 'clip.txt'}" in n.message for n in toast)
