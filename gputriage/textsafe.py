"""The one text-safety funnel: every piece of cluster or node text leaves gputriage through here.

Log lines, event messages, API error bodies and object fields are data. They may carry
ANSI/OSC escape sequences (colour codes, terminal title changes, hyperlinks, clipboard writes
via OSC 52), other control characters, secrets, Markdown/HTML, or Rich/Textual markup. Every
exit (TUI widgets, stdout/stderr of every command, Markdown, JSON and plain-text exports) uses
one of these functions, which always work in the same order:

1. **decode** bytes as UTF-8 (undecodable bytes become U+FFFD);
2. **strip** escape sequences and control characters (newline and tab kept);
3. **redact** secrets (:mod:`gputriage.report.redact`) over the *whole* value;
4. **truncate**, last, so a cut can never expose a fragment of a secret.

Escaping comes on top, per medium: :func:`md_prose` for Markdown prose (CommonMark and HTML
escaped, links and images never live), :func:`markup_free` for Rich/Textual (a ``Text``, never
markup). Printable characters are otherwise kept, so the words stay what the cluster said.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import sys
from collections.abc import Iterator
from typing import IO, Any

from gputriage.report.redact import MASK, SECRET_KEY, is_secret_name, redact_env, redact_text

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
#: A CSI sequence spelled out, as a JSON file or a Go %q holds it (``\u001b[1m``): inert
#: already, but it would split a secret (``AKIA\u001b[1m...``) so redaction missed it.
_SPELLED_CSI = re.compile(r"\\(?:u001[bB]|x1[bB]|033|e)\[[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
CUT_MARK = " …(cut)"


def decode(data: bytes | str) -> str:
    """Bytes as text (UTF-8, undecodable bytes replaced); text unchanged."""
    if isinstance(data, bytes | bytearray):
        return bytes(data).decode("utf-8", "replace")
    return data


def inert(text: str) -> str:
    """``text`` without terminal escape sequences or control characters (tabs and newlines
    kept), and without bidirectional overrides. Printable characters, including
    ``[bold]``-style markup, are left untouched: callers must still render the result as plain
    text, never as markup. No redaction: see :func:`clean` for anything that is exported."""
    if not text:
        return text
    return _CONTROLS.sub("", _ESCAPES.sub("", text.replace("\r\n", "\n")))


def _unspelled(text: str) -> str:
    return _SPELLED_CSI.sub("", text) if "\\" in text else text


def inert_line(text: str) -> str:
    """Like :func:`inert`, for single-line fields: newlines and tabs become spaces."""
    return inert(text).replace("\n", " ").replace("\t", " ")


def clean(data: bytes | str, limit: int = 0) -> str:
    """The funnel: decode, strip escapes and controls, redact, then cut to ``limit`` chars."""
    if isinstance(data, str) and len(data) <= _MEMO_MAX_CHARS:
        return _clean_memo(data, limit)
    return _clean(data, limit)


#: Strings up to this long have their cleaned form remembered: a report cleans the same cited
#: lines many times (facts, steps, differential), and the redaction catalogue is 23 patterns.
_MEMO_MAX_CHARS = 4096


def _clean(data: bytes | str, limit: int) -> str:
    text = redact_text(_unspelled(inert(decode(data))))
    if limit and len(text) > limit:
        text = text[:limit] + CUT_MARK
    return text


@functools.lru_cache(maxsize=8192)
def _clean_memo(text: str, limit: int) -> str:
    return _clean(text, limit)


def clean_line(data: bytes | str, limit: int = 0) -> str:
    """:func:`clean` for single-line fields: newlines and tabs become spaces."""
    return clean(decode(data).replace("\r", " ").replace("\n", " ").replace("\t", " "), limit)


def clean_obj(obj: Any) -> Any:
    """JSON-like data with every string through :func:`clean`, values under secret-looking
    keys and secret-looking env entries masked. Keys are cleaned too."""
    if isinstance(obj, str | bytes):
        return clean(obj)
    if isinstance(obj, list | tuple):
        return [clean_obj(v) for v in obj]
    if isinstance(obj, dict):
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            key = clean(k) if isinstance(k, str) else k
            if k == "env" and isinstance(v, list):
                out[key] = clean_obj(redact_env(v))
            elif isinstance(v, str) and SECRET_KEY.search(str(k)) and is_secret_name(str(k)):
                out[key] = MASK
            else:
                out[key] = clean_obj(v)
        return out
    return obj


# -- Markdown ----------------------------------------------------------------------------------

#: The ASCII punctuation that can start or end a CommonMark/GFM inline construct (emphasis,
#: links and images, HTML and autolinks, tables, strikethrough, entities); the backtick is
#: handled apart (code spans). ``(``, ``)`` and ``!`` are inert once ``[``/``]`` are escaped.
#: ``_`` only at a word's edge (inside ``nvidia_uvm`` it is literal in CommonMark); ``#``,
#: ``-``, ``+``, ``=`` and ``1.`` only at the start of a line (see :func:`_md_line`). Escaping
#: less keeps the text readable where a ticket shows Markdown source (Slack, Jira).
_MD_SPECIAL = re.compile(r"[\\*\[\]<>|~&]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_URLISH = re.compile(
    r"(?i)\b(?:[a-z][a-z0-9+.-]{1,20}://|www\.|(?:javascript|data|mailto|file):)"
    r"[^\s`]+"
)


def md_prose(text: Any, *, code_spans: bool = True) -> str:
    """Text for Markdown prose (titles, summaries, cells): through :func:`clean`, then every
    CommonMark and HTML special escaped, URLs shown as inline code (never a live link or a
    remote image), leading indentation dropped (no indented code block). Balanced code spans
    are kept when ``code_spans`` (they are inert); any other backtick is escaped, so a stray
    fence cannot swallow the rest of the document."""
    lines = [ln.strip() for ln in clean(str(text)).split("\n")]
    return "\n".join(_md_line(ln, code_spans) for ln in lines)


def md_cell(text: Any) -> str:
    """:func:`md_prose` on one line, with table pipes escaped too."""
    return md_prose(" ".join(str(text).split("\n")))


def md_code(text: Any) -> str:
    """One line of cluster text as inline code (cleaned; pipes escaped for tables)."""
    return _inline_code(clean_line(str(text)).replace("|", "\\|"))


def _md_line(line: str, code_spans: bool) -> str:
    out: list[str] = []
    pos = 0
    if code_spans:
        for m in _CODE_SPAN.finditer(line):
            out.append(_md_plain(line[pos : m.start()]))
            body = m.group(2).replace("|", "\\|")  # GFM tables split code spans too
            out.append(_inline_code(body))
            pos = m.end()
    out.append(_md_plain(line[pos:]))
    text = "".join(out)
    # '#', '-', '=' and digits+'.' only mean something at the start of a line (headings,
    # lists, setext); a lone '-' (an empty value) is left alone.
    if text[:1] in ("-", "=", "+", "#") and text != "-":
        return "\\" + text
    return re.sub(r"^(\d+)([.)])", r"\1\\\2", text)


def _md_plain(text: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _URLISH.finditer(text):
        out.append(_MD_SPECIAL.sub(_escape, text[pos : m.start()]).replace("`", "\\`"))
        out.append(_inline_code(m.group(0)))
        pos = m.end()
    out.append(_MD_SPECIAL.sub(_escape, text[pos:]).replace("`", "\\`"))
    return "".join(out)


def _escape(m: re.Match[str]) -> str:
    return "\\" + m.group(0)


def _inline_code(body: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{ticks}{pad}{body}{pad}{ticks}"


# -- terminal ----------------------------------------------------------------------------------


class SafeStream(io.TextIOBase):
    """A text stream that passes everything written to it through :func:`clean`.

    Installed over ``sys.stdout``/``sys.stderr`` for every command (:func:`funnelled_stdio`),
    so no print anywhere, including an API error body or a log line printed by ``collect``,
    ``facts`` or ``xid -``, can put an escape sequence on the operator's terminal or a secret
    in a pipe. Whole lines are cleaned at once (so redaction sees a line whole); ``flush``
    cleans and writes what is pending (a prompt). Even a chunk cut through an escape sequence
    is safe: a lone ESC is a control character and removed.
    """

    def __init__(self, raw: IO[str], limit: int = 1 << 16) -> None:
        super().__init__()
        self.raw = raw
        self._pending = ""
        self._limit = limit

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            head, _, self._pending = self._pending.rpartition("\n")
            self.raw.write(clean(head + "\n"))
        if len(self._pending) > self._limit:
            self._emit()
        return len(text)

    def _emit(self) -> None:
        if self._pending:
            text, self._pending = self._pending, ""
            self.raw.write(clean(text))

    def flush(self) -> None:
        self._emit()
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.raw, "encoding", "utf-8"))


@contextlib.contextmanager
def funnelled_stdio() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` through :class:`SafeStream` for the block. The TUI
    is unaffected: Textual draws on ``sys.__stderr__``."""
    saved = sys.stdout, sys.stderr
    out, err = SafeStream(saved[0]), SafeStream(saved[1])
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        for stream in (out, err):
            with contextlib.suppress(Exception):
                stream.flush()


def markup_free(text: str) -> Any:
    """A Rich ``Text`` holding :func:`clean` text: shown verbatim, never parsed as markup."""
    from rich.text import Text

    return Text(clean(text))
