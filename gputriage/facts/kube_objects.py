"""Read Kubernetes objects out of structured evidence, and cite the lines they came from.

Structured evidence (``pod.json``, ``nodes.yaml``, describe text...) is parsed into
``Evidence.data``; facts derived from it still have to point at a line the SRE can open. These
helpers find that line for a value whether the file is JSON (``"phase": "Pending"``, strings
escaped), YAML (``phase: Pending``, long strings folded) or ``kubectl describe`` text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from gputriage.evidence.model import Evidence, LineRef

#: How much of a long value is searched for: YAML folds long strings across lines.
_NEEDLE_CHARS = 120
_SHORT_NEEDLE_CHARS = 40


def items(evidence: Evidence) -> list[dict[str, Any]]:
    """The object dicts of a list evidence (``items``), or ``[]`` when it holds none."""
    data = evidence.data if evidence.ok else None
    found = data.get("items") if isinstance(data, Mapping) else None
    return [i for i in found if isinstance(i, dict)] if isinstance(found, list) else []


def obj(evidence: Evidence) -> dict[str, Any]:
    """The single object of an evidence, or ``{}``."""
    data = evidence.data if evidence.ok else None
    return data if isinstance(data, dict) else {}


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def dict_list(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def text(value: Any) -> str:
    """A string field, ``""`` for anything that is not a string or number."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return str(value)
        except ValueError:  # an integer past Python's digit limit
            return ""
    return ""


def integer(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 4000:
        return int(value.strip())
    return default


def cite_text(evidence: Evidence, value: str) -> LineRef:
    """The first line of ``evidence`` showing ``value`` (its first line), in any encoding."""
    first = value.strip().splitlines()[0] if value.strip() else ""
    if not first:
        return LineRef(evidence.key.value, evidence.source, 0, "")
    escaped = json.dumps(first, ensure_ascii=False)[1:-1]
    # Go's encoder escapes <, > and & as \u003c, \u003e, \u0026.
    go_escaped = escaped.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    lines = _lines(evidence.raw)
    for needle in (
        first[:_NEEDLE_CHARS],
        escaped[:_NEEDLE_CHARS],
        go_escaped[:_NEEDLE_CHARS],
        first[:_SHORT_NEEDLE_CHARS],
        escaped[:_SHORT_NEEDLE_CHARS],
    ):
        for lineno, line in enumerate(lines, 1):
            if needle in line:
                return LineRef(evidence.key.value, evidence.source, lineno, line.strip())
    return LineRef(evidence.key.value, evidence.source, 0, first)


def cite_field(evidence: Evidence, key: str, value: Any) -> LineRef:
    """The line holding ``key: value`` (JSON, YAML or describe), else one showing the value.

    The value must be the whole rest of the line, so ``nvidia.com/gpu`` does not cite a
    ``nvidia.com/gpu.count`` line. One pass over the file per key, however many values are
    looked up (a 5,000-node list is cited node by node).
    """
    try:
        shown = json.dumps(value) if isinstance(value, bool | int | float) else text(value)
    except ValueError:  # an integer past Python's digit limit
        shown = ""
    hit = _field_index(evidence.raw, key).get(shown)
    if hit:
        return LineRef(evidence.key.value, evidence.source, hit[0], hit[1])
    return cite_text(evidence, shown)


@lru_cache(maxsize=16)
def _lines(raw: str) -> tuple[str, ...]:
    return tuple(raw.splitlines())


@lru_cache(maxsize=64)
def _field_index(raw: str, key: str) -> dict[str, tuple[int, str]]:
    """value -> (first line, its text) for every ``"key": value`` / ``key: value`` line."""
    index: dict[str, tuple[int, str]] = {}
    prefixes = (f'"{key}":', f"{key}:")
    for lineno, line in enumerate(_lines(raw), 1):
        stripped = line.strip()
        for prefix in prefixes:
            if stripped.startswith(prefix):
                index.setdefault(_bare(stripped[len(prefix) :]), (lineno, stripped))
    return index


def _bare(rest: str) -> str:
    return rest.strip().rstrip(",").strip().strip("'\"")


def cite_event(evidence: Evidence, event: Mapping[str, Any]) -> LineRef:
    """An event's line: ``_line`` for describe-derived events, else a search for its message."""
    line = event.get("_line")
    if isinstance(line, int) and not isinstance(line, bool) and line > 0:
        return evidence.cite(line)
    message = text(event.get("message")) or text(event.get("note"))
    return cite_text(evidence, message or text(event.get("reason")))
