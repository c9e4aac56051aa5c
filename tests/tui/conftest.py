"""Fixtures for the TUI tests: a bundle on disk, its hand walker, and the app wired to both."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputriage.tui.app import TriageApp
from tests.tui.bundles import HandWalker, write_bundle
from tests.tui.harness import make_app


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return write_bundle(tmp_path)


@pytest.fixture
def walker(bundle: Path) -> HandWalker:
    return HandWalker(bundle)


@pytest.fixture
def app(bundle: Path, walker: HandWalker, tmp_path: Path) -> TriageApp:
    return make_app(bundle, walker, tmp_path)
