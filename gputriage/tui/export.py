"""Write the incident summary from the TUI: the same renderers as ``--report md|json``.

Kept small on purpose: the report layer does the work (redaction, inert text, layout); this
only names the files and writes them atomically.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

from gputriage.evidence.model import EvidenceSet
from gputriage.facts.model import FactSet
from gputriage.playbook.transcript import Transcript
from gputriage.report.notes import Note
from gputriage.session import Session


def summary_stem(facts: FactSet, now: float) -> str:
    """``gputriage-<ns>-<pod>-<UTC time>``, safe as a file name."""
    t = facts.target
    name = "-".join(p for p in (t.namespace, t.pod) if p) or "target"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    return re.sub(r"[^A-Za-z0-9._-]+", "-", f"gputriage-{name}-{stamp}")


def export_summary(
    directory: Path,
    session: Session,
    evidence: EvidenceSet,
    facts: FactSet,
    transcript: Transcript,
    notes: Sequence[Note],
    now: float,
    *,
    confirmed: bool = False,
) -> tuple[Path, ...]:
    """Write ``<stem>.md`` and ``<stem>.json`` into ``directory``; return both paths.

    ``confirmed``: the SRE followed the walk to its verdict step by step (the summary says so;
    otherwise it says the verdict is the engine's proposal, or that steps were overridden)."""
    from gputriage.report.render import render
    from gputriage.report.write import atomic_write

    stem = summary_stem(facts, now)
    written = []
    for fmt, suffix in (("md", ".md"), ("json", ".json")):
        text = render(
            fmt,
            session.description,
            session.context,
            evidence,
            facts,
            transcript,
            notes,
            confirmed=confirmed,
        )
        written.append(atomic_write(directory / f"{stem}{suffix}", text))
    return tuple(written)
