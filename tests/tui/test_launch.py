"""The way into the TUI stays light: first paint must not wait for kubernetes, paramiko or cel."""

from __future__ import annotations

import subprocess
import sys

HEAVY = {"kubernetes", "paramiko", "cel", "pynvml", "yaml"}


def loaded_after(code: str) -> set[str]:
    script = f"import sys\n{code}\nprint('\\n'.join(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout
    return {name.split(".")[0] for name in out.split()}


def test_importing_the_app_loads_no_heavy_client() -> None:
    loaded = loaded_after("import gputriage.tui.launch, gputriage.tui.app")
    assert "textual" in loaded
    assert not HEAVY & loaded


def test_the_demo_command_module_is_light() -> None:
    loaded = loaded_after("import gputriage.commands.demo")
    assert not (HEAVY | {"textual"}) & loaded


def test_core_modules_of_the_tui_package_do_not_need_textual() -> None:
    # Tables, walk rules and the export path are plain Python: testable and reusable headless.
    loaded = loaded_after(
        "import gputriage.tui.tables, gputriage.tui.walkstate, gputriage.tui.export"
    )
    assert "textual" not in loaded and "rich" not in loaded
