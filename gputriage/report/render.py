"""Render the incident summary in a chosen format: shared by headless mode and TUI export."""

from __future__ import annotations

from collections.abc import Sequence

from gputriage.evidence.model import EvidenceSet
from gputriage.facts.model import FactSet
from gputriage.playbook.transcript import Transcript
from gputriage.report.notes import Note


def render(
    fmt: str,
    session: str,
    context: str,
    evidence: EvidenceSet,
    facts: FactSet,
    transcript: Transcript,
    notes: Sequence[Note],
    *,
    confirmed: bool = False,
) -> str:
    """The summary in ``fmt`` ("md", "text" or "json"); shared by headless mode and the TUI
    export."""
    from gputriage.report.summary import build_summary

    summary = build_summary(
        session=session,
        context=context,
        evidence=evidence,
        facts=facts,
        transcript=transcript,
        notes=notes,
        confirmed=confirmed,
    )
    # Each renderer is imported only when asked for (a fresh headless run pays for one).
    if fmt == "json":
        from gputriage.report.json import render_json

        return render_json(summary)
    if fmt == "text":
        from gputriage.report.model import Summary
        from gputriage.report.text import render_text

        return render_text(Summary.from_dict(summary))
    from gputriage.report.markdown import render_markdown

    return render_markdown(summary)
