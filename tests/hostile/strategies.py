"""Hypothesis strategies for hostile input: real documents, mutated, mixed with random text.

``hostile_text(kind)`` draws, with roughly equal weight:

* a real seed document (:mod:`tests.hostile.seeds`) put through 1-6 mutations: truncation
  (a cut-off paste), deleted, duplicated or swapped spans and lines, lines spliced in from
  other seeds of the same kind, digits replaced by huge or negative numbers, control
  characters, terminal escapes, odd Unicode, overlong lines, brackets and quotes;
* a document assembled line by line from real lines of that kind and random lines;
* plain random text (any code points, short and long).

``hostile_bytes(kind)`` adds the byte level: invalid UTF-8, NULs, a BOM, CRLF, and random
binary.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tests.hostile.seeds import lines_of, seeds

#: Things real inputs do not usually hold but hostile ones do.
NASTY = (
    "\x00",
    "\x1b[31m",
    "\x1b]0;pwned\x07",
    "\x1b]52;c;ZXZpbA==\x07",
    "\x9b6n",
    "\r",
    "\r\n",
    "\t",
    "\x0b",
    "\x0c",
    "\u2028",
    "\u202e",
    "\ufeff",
    "\ud7ff",
    "\U0010ffff",
    "é",
    "𝔊",
    "[bold red]boom[/]",
    "[/]",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    "</gpu>",
    "<gpu>",
    "&amp;",
    "&#0;",
    "<!--",
    "]]>",
    '"',
    "'",
    "\\",
    '\\"',
    "$(touch /tmp/gputriage-canary)",
    "`id`",
    ";",
    "|",
    "&&",
    "%s%n",
    "{{",
    "}}",
    "N/A",
    "[N/A]",
    "ERR!",
    "Unknown Error",
    "-1",
    "0",
    "NaN",
    "inf",
    "1e309",
    "18446744073709551616",
    "-9223372036854775809",
    "99999999999999999999999999",
    "0x7fffffff",
    "Xid",
    "NVRM:",
    "PCI:",
    "0/",
    "nodes are available:",
    "Insufficient ",
    "pod=",
    'podUID="',
    "GPU-",
    "MiB",
    " kubelet[",
    "E0305 ",
)

_PRINTABLE = st.text(alphabet=st.characters(codec="utf-8"), max_size=80)


def _mutate(doc: str, draw: st.DrawFn, pool: tuple[str, ...]) -> str:
    op = draw(st.integers(0, 9))
    n = len(doc)
    i = draw(st.integers(0, n)) if n else 0
    j = draw(st.integers(i, min(n, i + 4096))) if n else 0
    if op == 0:  # cut-off paste
        return doc[:i]
    if op == 1:  # a span deleted
        return doc[:i] + doc[j:]
    if op == 2:  # a span repeated
        return doc[:j] + doc[i:j] * draw(st.integers(1, 4)) + doc[j:]
    if op == 3:  # something nasty inserted
        return doc[:i] + draw(st.sampled_from(NASTY)) + doc[i:]
    if op == 4:  # random text inserted
        return doc[:i] + draw(_PRINTABLE) + doc[i:]
    if op == 5:  # a real line from another document of the same kind
        line = draw(st.sampled_from(pool)) if pool else ""
        return doc[:i] + line + "\n" + doc[i:]
    if op == 6:  # lines shuffled around
        lines = doc.splitlines(keepends=True)
        if len(lines) > 1:
            a = draw(st.integers(0, len(lines) - 1))
            b = draw(st.integers(0, len(lines) - 1))
            lines[a], lines[b] = lines[b], lines[a]
        return "".join(lines)
    if op == 7:  # a number made huge, negative or not a number
        digits = [k for k, ch in enumerate(doc) if ch.isdigit()]
        if not digits:
            return doc
        k = draw(st.sampled_from(digits))
        return (
            doc[:k]
            + draw(
                st.sampled_from(
                    ("99999999999999999999999", "-1", "-0", "1e400", "NaN", "", "٣", "0x10")
                )
            )
            + doc[k:]
        )
    if op == 8:  # an overlong line
        return (
            doc[:i]
            + draw(st.sampled_from(("A", "[", "0", "é", " "))) * draw(st.integers(1000, 70000))
            + doc[i:]
        )
    # a character replaced
    if not n:
        return doc
    return doc[:i] + draw(st.characters(codec="utf-8")) + doc[i + 1 :]


@st.composite
def mutated_seed(draw: st.DrawFn, kind: str) -> str:
    docs = seeds()[kind]
    doc = draw(st.sampled_from(docs))
    pool = lines_of(kind)
    for _ in range(draw(st.integers(1, 6))):
        doc = _mutate(doc, draw, pool)
    return doc


@st.composite
def spliced_lines(draw: st.DrawFn, kind: str) -> str:
    pool = lines_of(kind) or ("",)
    line = st.one_of(
        st.sampled_from(pool), st.sampled_from(pool), _PRINTABLE, st.sampled_from(NASTY)
    )
    return "\n".join(draw(st.lists(line, max_size=40))) + draw(st.sampled_from(("", "\n")))


def hostile_text(kind: str) -> st.SearchStrategy[str]:
    """Mostly corpus-shaped, sometimes plain random, text for a parser of ``kind``."""
    return st.one_of(
        mutated_seed(kind),
        spliced_lines(kind),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=2000),
        st.sampled_from(("", " ", "\n", "\x00", "{", "[", "<", "null", "---", "- -", "0/")),
    )


@st.composite
def _corrupted(draw: st.DrawFn, kind: str) -> bytes:
    blob = draw(hostile_text(kind)).encode("utf-8", errors="surrogatepass")
    op = draw(st.integers(0, 5))
    i = draw(st.integers(0, len(blob)))
    if op == 0:
        return (
            blob[:i]
            + draw(
                st.sampled_from(
                    (b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80", b"\x00", b"\xfe\xff")
                )
            )
            + blob[i:]
        )
    if op == 1:
        return b"\xef\xbb\xbf" + blob  # a UTF-8 BOM, as Windows editors save
    if op == 2:
        return blob.replace(b"\n", b"\r\n")
    if op == 3:
        return blob[:i] + draw(st.binary(max_size=64)) + blob[i:]
    return blob


def hostile_bytes(kind: str) -> st.SearchStrategy[bytes]:
    """Bytes as a file or an API/SSH answer for ``kind`` might hold them."""
    return st.one_of(_corrupted(kind), st.binary(max_size=512))
