"""Built-in demo scenarios: evidence bundles shipped inside the package.

Each scenario is a directory holding a bundle (DESIGN 3.1) plus ``scenario.json`` with its
``title``, ``family`` and a one-line ``description``. ``gputriage demo`` and the screenshots
replay them with a ``BundleSession``.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from gputriage.errors import GputriageError

SCENARIO_FILE = "scenario.json"


@dataclass(frozen=True)
class ScenarioInfo:
    """What ``gputriage demo --list`` shows for one scenario."""

    name: str
    title: str
    family: str
    description: str
    path: Path


def _root() -> Path:
    # The package lives on the file system (wheel or checkout), so the traversable is a Path.
    return Path(str(resources.files(__name__)))


def _names() -> list[str]:
    return sorted(p.name for p in _root().iterdir() if p.is_dir() and (p / SCENARIO_FILE).is_file())


def list_scenarios() -> list[ScenarioInfo]:
    """Every built-in scenario, sorted by name."""
    return [_info(name) for name in _names()]


def scenario_path(name: str) -> Path:
    """The bundle directory of scenario ``name``; a GputriageError naming close matches."""
    names = _names()
    if name in names:
        return _root() / name
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.4)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise GputriageError(
        f"no demo scenario named {name!r}.{hint} Available: {', '.join(names)} "
        "(`gputriage demo --list` describes them).",
        title="unknown scenario",
    )


def _info(name: str) -> ScenarioInfo:
    path = _root() / name
    try:
        meta = json.loads((path / SCENARIO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = {}
    if not isinstance(meta, dict):
        meta = {}
    return ScenarioInfo(
        name=name,
        title=str(meta.get("title") or name),
        family=str(meta.get("family") or ""),
        description=str(meta.get("description") or ""),
        path=path,
    )
