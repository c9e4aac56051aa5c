"""A process killed mid-write (SIGKILL: no cleanup, no finally) leaves notes and exports whole.

A child process writes, in a tight loop, a 2 MiB export through
:func:`gputriage.report.write.atomic_write` and adds notes through
:class:`gputriage.report.notes.NotesStore` (each add rewrites the file atomically). It is
killed at a spread of moments, many of them in the middle of a write. After every kill the
export must be one of the complete versions the child wrote (never a mix, never cut short)
and the notes file must load with every note the child had confirmed. A control run with a
plain ``write_text`` under the same kill schedule must leave a cut-short file, which shows
the kills do land mid-write.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gputriage.report.notes import NotesStore
from tests.conftest import ROOT

KILLS = 24
#: About one kill in five lands inside a plain write here: 40 make missing them all ~1e-4.
CONTROL_KILLS = 40

CHILD = r"""
import sys
from pathlib import Path
from gputriage.report.notes import NotesStore
from gputriage.report.write import atomic_write
out, notes_path, start = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
write = atomic_write if sys.argv[4] == "atomic" else Path.write_text
store = NotesStore(notes_path)
i = start
while True:
    body = f"version {i}\n" + ("x" * 127 + "\n") * 16384 + f"end {i}\n"
    write(out, body)
    store.add(f"note {i} " + "n" * 4000)
    print(i, flush=True)  # both writes of round i are complete
    i += 1
"""


def check_export(text: str) -> int:
    first, _, rest = text.partition("\n")
    assert first.startswith("version "), first[:40]
    n = int(first.split()[1])
    assert rest.endswith(f"end {n}\n"), "an export was left cut short"
    assert len(text) == len(f"version {n}\n") + 128 * 16384 + len(f"end {n}\n")
    return n


def spawn(out: Path, notes: Path, start: int, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(out), str(notes), str(start), mode],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def kill_soon(proc: subprocess.Popen[str], kill: int) -> list[int]:
    """Rounds the child confirmed before SIGKILL, which lands at a moment that moves
    through the write cycle from one kill to the next."""
    assert proc.stdout is not None
    rounds = [int(proc.stdout.readline())]
    time.sleep(0.003 * (kill % 12))
    os.kill(proc.pid, signal.SIGKILL)
    rest, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return rounds + [int(x) for x in rest.split()]


def test_sigkill_mid_write_leaves_exports_and_notes_intact(tmp_path: Path) -> None:
    out = tmp_path / "exports" / "summary.md"
    notes = tmp_path / "notes" / "n.json"
    confirmed = -1
    start = 0
    for kill in range(KILLS):
        confirmed = max(confirmed, *kill_soon(spawn(out, notes, start, "atomic"), kill))
        n = check_export(out.read_text(encoding="utf-8"))
        assert confirmed <= n <= confirmed + 1, (n, confirmed)  # the last confirmed or newer
        data = json.loads(notes.read_text(encoding="utf-8"))  # never half a JSON document
        texts = [note["text"] for note in data["notes"]]
        assert len(texts) >= confirmed + 1
        assert [t.split()[1] for t in texts[: confirmed + 1]] == [
            str(i) for i in range(confirmed + 1)
        ]
        start = len(texts)

    assert len(NotesStore(notes).notes) >= confirmed + 1
    leftovers = [p.name for p in out.parent.iterdir() if p.name != out.name]
    # A kill between mkstemp and rename can leave a hidden temp file; never the target.
    assert all(p.startswith(".summary.md.") and p.endswith(".tmp") for p in leftovers)


def test_control_a_plain_write_is_caught_cut_short(tmp_path: Path) -> None:
    out = tmp_path / "summary.md"
    broken = 0
    for kill in range(CONTROL_KILLS):
        kill_soon(spawn(out, tmp_path / "n.json", 0, "plain"), kill)
        try:
            check_export(out.read_text(encoding="utf-8"))
        except (AssertionError, ValueError):
            broken += 1
    assert broken > 0, "no kill landed mid-write: the schedule proves nothing"
