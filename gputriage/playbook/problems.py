"""Located problems in playbook files, rendered like a compiler's diagnostics.

A :class:`Problem` is what the loader reports instead of raising: ``file:line:col``, a message
whose text is part of the API (tests assert it), an optional "did you mean" hint, and enough of
the source to draw the offending line with a caret::

    playbooks/pending.yaml:14:15: error: 'goto' names a step that does not exist: 'gpu-chek'
       |
    14 |         goto: gpu-chek
       |               ^^^^^^^^
       = help: did you mean 'gpu-check'?

Lines and columns are 1-based; both are 0 when the problem has no place in the text (an
unreadable file), and then only the file name is printed.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a playbook file."""

    file: str
    line: int
    col: int
    message: str
    hint: str = ""
    #: The text of ``line`` in the file, for the caret display ("" when unknown).
    source_line: str = ""
    #: How many characters the caret underlines (at least 1).
    length: int = 1

    @property
    def where(self) -> str:
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}:{self.col}"

    def __str__(self) -> str:
        """One line: ``file:line:col: message (hint)``; what logs and warnings print."""
        text = f"{self.where}: {self.message}"
        return f"{text} ({self.hint})" if self.hint else text

    def render(self) -> str:
        """Several lines: the message, the source line with a caret, and the hint."""
        out = [f"{self.where}: error: {self.message}"]
        if self.line > 0:
            gutter = " " * len(str(self.line))
            shown = self.source_line.rstrip("\n").expandtabs(1)
            start = max(self.col - 1, 0)
            width = max(1, min(self.length, max(len(shown) - start, 1)))
            out += [
                f"{gutter} |",
                f"{self.line} | {shown}",
                f"{gutter} | {' ' * start}{'^' * width}",
            ]
            if self.hint:
                out.append(f"{gutter} = help: {self.hint}")
        elif self.hint:
            out.append(f"  = help: {self.hint}")
        return "\n".join(out)


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"did you mean 'x'?"`` for the closest candidate, or "" when nothing is close."""
    matches = difflib.get_close_matches(word, sorted(set(candidates)), n=1, cutoff=0.6)
    return f"did you mean '{matches[0]}'?" if matches else ""


def sort_problems(problems: Iterable[Problem]) -> list[Problem]:
    """File order, then position; stable for problems at the same place."""
    return sorted(problems, key=lambda p: (p.file, p.line, p.col))
