"""Make text from the cluster or a node inert before anyone displays it.

Log lines and event messages are data. They may carry ANSI/OSC escape sequences (colour codes,
terminal title changes, hyperlinks, clipboard writes via OSC 52) or other control characters.
Displayed raw, they would act on the SRE's terminal; this module removes them while keeping
every printable character, so the words stay exactly what the cluster said.
"""

from __future__ import annotations

import re

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other two-char ESC sequences, and the
# 8-bit C1 equivalents of CSI/OSC.
_ESCAPES = re.compile(
    r"""
    \x1b\[[0-?]*[ -/]*[@-~]            # CSI
  | \x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?  # OSC ... BEL | ST
  | \x1b[PX^_][^\x1b]*(?:\x1b\\)?       # DCS / SOS / PM / APC strings
  | \x1b[@-Z\\-_]                       # other Fe escapes
  | \x9b[0-?]*[ -/]*[@-~]               # 8-bit CSI
  | \x9d[^\x07\x9c]*(?:\x07|\x9c)?      # 8-bit OSC
    """,
    re.VERBOSE,
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def inert(text: str) -> str:
    """``text`` without terminal escape sequences or control characters (tabs and newlines
    kept). Printable characters, including ``[bold]``-style markup, are left untouched:
    callers must still render the result as plain text, never as markup."""
    if not text:
        return text
    return _CONTROLS.sub("", _ESCAPES.sub("", text.replace("\r\n", "\n")))


def inert_line(text: str) -> str:
    """Like :func:`inert`, for single-line fields: newlines and tabs become spaces."""
    return inert(text).replace("\n", " ").replace("\t", " ")
