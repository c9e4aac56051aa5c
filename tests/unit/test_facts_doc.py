"""docs/facts.md is generated from the fact-group declarations and must stay in sync."""

from __future__ import annotations

from pathlib import Path

from gputriage.facts.doc import render_facts_doc
from gputriage.facts.registry import specs

DOC = Path(__file__).resolve().parents[2] / "docs" / "facts.md"


def test_every_field_is_documented() -> None:
    for spec in specs().values():
        assert spec.doc.strip(), spec.name
        for name, field in spec.fields.items():
            assert field.doc.strip(), f"{spec.name}.{name} has no doc"


def test_docs_facts_md_is_up_to_date() -> None:
    text = render_facts_doc()
    assert "## `kernel`" in text and "`pod.phase`" in text
    assert DOC.read_text() == text, "regenerate: gputriage facts --doc > docs/facts.md"
