"""Shared test configuration.

* ``shared_dir`` / ``corpus_dir``: the real-world corpus next to the checkout (``../shared``),
  or ``$GPUTRIAGE_SHARED``. Tests that read it skip when it is absent.
* ``require_tool``: integration tests call it for sshd, kubectl, tmux...; when ``CI`` is set a
  missing tool is a failure, not a skip. The message says how to get the tool
  (:data:`HOW_TO_GET`).
* ``lab``: a real OpenSSH sshd on 127.0.0.1 acting as a node (``tests/sshd.py``), behind a
  ProxyJump bastion; ``dials``: every TCP connection a test opens, failing on any address but
  127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.sshd import SshLab

ROOT = Path(__file__).resolve().parents[1]

#: How to get each external tool the suite uses (README, "Running the tests").
HOW_TO_GET: dict[str, str] = {
    "sshd": "apt-get install openssh-server (.ci/run does)",
    "ssh": "apt-get install openssh-client (.ci/run does)",
    "ssh-keygen": "apt-get install openssh-client (.ci/run does)",
    "ssh-agent": "apt-get install openssh-client (.ci/run does)",
    "ssh-add": "apt-get install openssh-client (.ci/run does)",
    "tmux": "apt-get install tmux (.ci/run does)",
    "rsvg-convert": "apt-get install librsvg2-bin (.ci/run does)",
    "kubectl": "install kubectl from https://kubernetes.io/docs/tasks/tools/ (Debian/Ubuntu "
    "do not package it; .ci/run does not install it)",
}


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
        msg = f"{name} is not installed: {HOW_TO_GET.get(name, 'install it')}"
        if os.environ.get("CI"):
            pytest.fail(f"CI: {msg}")
        pytest.skip(msg)
    return found


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[SshLab]:
    """A real sshd on 127.0.0.1 acting as a node, reached through a ProxyJump bastion."""
    from tests.sshd import SshLab

    require_tool("sshd", "/usr/sbin/sshd")
    require_tool("ssh-keygen")
    with SshLab(tmp_path / "lab") as lab:
        yield lab


@pytest.fixture
def dials(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every TCP connection the process opens; anything but 127.0.0.1 fails the test."""
    seen: list[tuple[str, int]] = []
    real = socket.create_connection

    def guarded(address: tuple[str, int], *args: object, **kw: object) -> socket.socket:
        seen.append((address[0], int(address[1])))
        assert address[0] == "127.0.0.1", f"a test tried to dial {address}"
        return real(address, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "create_connection", guarded)
    return seen


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never read or write the user's real cache (the playbook load cache lives there).
    Child processes inherit it."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
