"""The SRE's notes for one triage, saved after every change.

Notes live in a small JSON file written atomically on every add, so a crash, a killed
terminal or a dropped SSH session loses nothing. Reopening the same target picks them up.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gputriage.report.write import atomic_write


@dataclass(frozen=True)
class Note:
    time: float
    text: str
    step: str = ""  # the step ref the SRE was looking at, if any

    @property
    def iso(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.time))


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "gputriage"


def default_notes_path(context: str, namespace: str, pod: str) -> Path:
    """``~/.local/state/gputriage/notes/<context>_<ns>_<pod>.json`` (names made file-safe)."""
    parts = [p or "-" for p in (context, namespace, pod)]
    safe = "_".join(re.sub(r"[^A-Za-z0-9._-]+", "-", p) for p in parts)
    return state_dir() / "notes" / f"{safe}.json"


class NotesStore:
    """Notes for one target, loaded from and autosaved to ``path``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._notes: list[Note] = self._load()

    def _load(self) -> list[Note]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return []
        items = data.get("notes", []) if isinstance(data, dict) else []
        return [
            Note(float(n.get("time", 0)), str(n.get("text", "")), str(n.get("step", "")))
            for n in items
            if isinstance(n, dict)
        ]

    @property
    def notes(self) -> tuple[Note, ...]:
        return tuple(self._notes)

    def add(self, text: str, step: str = "") -> Note:
        note = Note(time.time(), text.rstrip(), step)
        self._notes.append(note)
        self.save()
        return note

    def save(self) -> None:
        payload = {"format": 1, "notes": [asdict(n) for n in self._notes]}
        atomic_write(self.path, json.dumps(payload, indent=2) + "\n")


def read_notes_file(path: str | os.PathLike[str]) -> list[Note]:
    """Notes from ``--notes FILE``: a NotesStore JSON file, or plain text (one note)."""
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    if raw.lstrip().startswith("{"):
        return list(NotesStore(p).notes)
    return [Note(p.stat().st_mtime, raw.strip())] if raw.strip() else []
