"""Shared test configuration.

* ``shared_dir`` / ``corpus_dir``: the real-world corpus next to the checkout (``../shared``),
  or ``$GPUTRIAGE_SHARED``. Tests that read it skip when it is absent.
* ``require_tool``: integration tests call it for sshd, kubectl, tmux...; when ``CI`` is set a
  missing tool is a failure, not a skip.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _shared() -> Path | None:
    env = os.environ.get("GPUTRIAGE_SHARED")
    candidates = [Path(env)] if env else []
    candidates += [ROOT.parent / "shared", ROOT.parent.parent / "shared"]
    for c in candidates:
        if (c / "corpus").is_dir():
            return c
    return None


SHARED = _shared()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if SHARED is None:
        pytest.skip("../shared (real-world corpus) is not next to this checkout")
    return SHARED


@pytest.fixture(scope="session")
def corpus_dir(shared_dir: Path) -> Path:
    return shared_dir / "corpus"


def require_tool(name: str, path: str | None = None) -> str:
    """Absolute path of an external tool; skip (or fail under CI) when it is missing."""
    found = path if path and os.access(path, os.X_OK) else shutil.which(name)
    if not found:
        msg = f"{name} is not installed (apt-get install it; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(f"CI: {msg}")
        pytest.skip(msg)
    return found


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never read or write the user's real cache (the playbook load cache lives there).
    Child processes inherit it."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
