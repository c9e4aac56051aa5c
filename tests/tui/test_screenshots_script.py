"""``scripts/screenshots.py`` renders a scenario's key screens to SVG and PNG."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, require_tool

pytestmark = pytest.mark.integration


def test_screenshots_of_one_scenario(tmp_path: Path) -> None:
    require_tool("rsvg-convert")
    out = tmp_path / "shots"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "screenshots.py"),
            "--out",
            str(out),
            "--scenario",
            "pending-insufficient-gpu",
        ],
        check=True,
        cwd=tmp_path,
        capture_output=True,
        timeout=180,
    )
    names = sorted(p.name for p in out.iterdir())
    screens = ["detail", "evidence", "help", "override", "start", "verdict", "verdict-80x24"]
    assert names == sorted(
        f"pending-insufficient-gpu-{s}.{ext}" for s in screens for ext in ("png", "svg")
    )
    start = (out / "pending-insufficient-gpu-start.svg").read_text()
    assert "llm-finetune-7d9c5b8f6d-x2x4q" in start.replace("&#160;", " ")
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
