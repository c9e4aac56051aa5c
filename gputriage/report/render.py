"""Render the incident summary in a chosen format: shared by headless mode and TUI export."""

from __future__ import annotations

from collections.abc import Sequence

from gputriage.evidence.model import EvidenceSet
from gputriage.facts.model import FactSet
from gputriage.playbook.transcript import Transcript
from gputriage.report.notes import Note


def render(fmt: str, session: str, context: str, evidence: EvidenceSet, facts: FactSet,
           transcript: Transcript, notes: Sequence[Note], *, confirmed: bool = False) -> str:
    """The summary in ``fmt`` ("md", "text" or "json"); shared by headless mode and the TUI
    export."""
    from gputriage.report.json import render_json
    from gputriage.report.markdown import render_markdown
    from gputriage.report.summary import build_summary
    from gputriage.report.text import render_text

    summary = build_summary(session=session, context=context, evidence=evidence, facts=facts,
                            transcript=transcript, notes=notes, confirmed=confirmed)
    if fmt == "json":
        return render_json(summary)
    if fmt == "text":
        from gputriage.report.model import Summary

        return render_text(Summary.from_dict(summary))
    return render_markdown(summary)
