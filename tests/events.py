"""Event records as ``gputriage.facts.events.normalise`` makes them, for tests of the summary."""

from __future__ import annotations

from gputriage.evidence.model import LineRef


def event_record(reason: str, message: str) -> tuple[dict[str, object], LineRef]:
    """One Warning event from the kubelet, and the line it is cited by."""
    record = {
        "type": "Warning",
        "reason": reason,
        "message": message,
        "count": 1,
        "first": "",
        "last": "",
        "age": "",
        "source": "kubelet",
        "line": 1,
    }
    return record, LineRef("events", "events.json", 1, message)
