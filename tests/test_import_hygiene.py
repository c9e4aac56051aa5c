"""The core runs without the TUI: importing it never loads textual (harlequin's rule)."""

from __future__ import annotations

import subprocess
import sys

CORE = [
    "gputriage",
    "gputriage.cli",
    "gputriage.evidence.model",
    "gputriage.evidence.bundle",
    "gputriage.facts.build",
    "gputriage.playbook.transcript",
    "gputriage.session",
    "gputriage.options",
    "gputriage.pipeline",
]


def _loaded_after(modules: list[str]) -> set[str]:
    code = (
        "import sys, importlib\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return set(out.split())


def test_core_never_imports_textual() -> None:
    loaded = _loaded_after(CORE)
    assert "gputriage.cli" in loaded
    assert not {m for m in loaded if m == "textual" or m.startswith("textual.")}


def test_cli_help_imports_nothing_heavy() -> None:
    loaded = _loaded_after(["gputriage.cli"])
    heavy = {"textual", "kubernetes", "paramiko", "cel", "pynvml", "yaml"}
    assert not heavy & loaded


def test_import_linter_contracts_hold() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint_imports)], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    import tomllib

    contracts = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    assert f"Contracts: {len(contracts)} kept, 0 broken" in result.stdout
    names = {c["name"] for c in contracts}
    # the layer rules docs/architecture.md promises
    assert any("never reaches up into the command line" in n for n in names)
    assert any("imports nothing from evidence" in n for n in names)
    assert any("argparse" in n for n in names)
