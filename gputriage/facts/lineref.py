"""One cited line of evidence, the unit every fact, verdict and report points at.

It lives with the facts (beside :class:`gputriage.facts.model.FactSet`) so the playbook engine
and the reports cite evidence without importing ``gputriage.evidence``; evidence sources make
them through :meth:`gputriage.evidence.model.Evidence.cite` (``evidence.model`` re-exports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Longest cited line kept in a LineRef; longer lines are cut (the line number still points
#: at the whole line in the source).
MAX_CITE_CHARS = 1000
#: How much of a longer line is cleaned and redacted before the cut: far more than is kept, so
#: a secret that starts in the kept part is redacted whole (a private key block without its
#: END line is redacted to the window's end), while a 40 MB one-line file costs what 64 KiB do.
REDACT_WINDOW = 64 * 1024


@dataclass(frozen=True, slots=True)
class LineRef:
    """One cited line of evidence: where it came from and exactly what it said."""

    key: str
    source: str
    line: int  # 1-based; 0 when the fact came from a structured field without a line
    text: str

    def __post_init__(self) -> None:
        # A compact 40 MB JSON file is one line: a citation shows where, not the whole file.
        # Redact the whole line before the cut, so a cut can never expose part of a secret.
        if len(self.text) > MAX_CITE_CHARS:
            from gputriage.textsafe import clean

            object.__setattr__(self, "text", clean(self.text[:REDACT_WINDOW], MAX_CITE_CHARS))

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return f"{where}: {self.text}"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "source": self.source, "line": self.line, "text": self.text}
