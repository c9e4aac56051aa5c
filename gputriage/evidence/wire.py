"""Evidence to bytes and back, exactly, for a process gputriage forked itself.

A headless live triage hands the evidence it collected to the process that prepared the walk
(:mod:`gputriage.prepared_walk`). Every field of every :class:`Evidence` survives the trip,
including evidence nested in another's ``data`` (the candidate nodes' per-node evidence):
``decode(encode(items, tag), tag)`` equals ``items`` as long as ``data`` holds JSON values
(what the API and the node sent, parsed) and evidence, which is what every source puts there.

Nested evidence is marked by a one-key object whose key is ``tag``, a random string both
processes share and the cluster cannot guess, so no object from the API can pass for one.
This is not a storage format: nothing written here outlives the run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from gputriage.evidence.model import Evidence, Key, Status

_FIELDS = tuple(f.name for f in fields(Evidence))


class WireError(ValueError):
    """The bytes are not evidence encoded with this tag."""


def encode(items: Iterable[Evidence], tag: str) -> bytes:
    """``items`` as ASCII JSON. Raises TypeError when some ``data`` holds a value JSON cannot
    carry (a set, bytes, an object): the caller keeps the evidence in process then."""

    def nested(obj: Any) -> Any:
        if isinstance(obj, Evidence):
            return {tag: _fields_of(obj)}
        raise TypeError(f"{type(obj).__name__} cannot cross to the walk process")

    document = [{tag: _fields_of(ev)} for ev in items]
    return json.dumps(document, default=nested, ensure_ascii=True, check_circular=True).encode()


def decode(payload: bytes, tag: str) -> list[Evidence]:
    """The evidence :func:`encode` wrote with the same ``tag``."""

    def hook(obj: dict[str, Any]) -> Any:
        if len(obj) == 1 and tag in obj:
            return _evidence(obj[tag])
        return obj

    try:
        items = json.loads(payload, object_hook=hook)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"not encoded evidence: {exc}") from None
    if not isinstance(items, list) or not all(isinstance(ev, Evidence) for ev in items):
        raise WireError("not a list of evidence")
    return items


def _fields_of(ev: Evidence) -> dict[str, Any]:
    values = {name: getattr(ev, name) for name in _FIELDS}
    values["key"] = ev.key.value
    values["status"] = ev.status.value
    return values


def _evidence(values: Any) -> Evidence:
    if not isinstance(values, dict) or set(values) != set(_FIELDS):
        raise WireError("an evidence record without its fields")
    try:
        return Evidence(**{**values, "key": Key(values["key"]), "status": Status(values["status"])})
    except ValueError as exc:
        raise WireError(str(exc)) from None
