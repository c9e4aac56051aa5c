"""The evidence's own "now": the newest timestamp the Kubernetes objects in it carry.

Durations such as "Terminating for 40 minutes" are measured against this, not against the wall
clock, so replaying a bundle next week gives the same facts as the live run that wrote it. Node
heartbeats (``lastHeartbeatTime``, refreshed every few seconds by the kubelet) usually win, so
the reference is close to the moment of collection. ``deletionTimestamp`` is never a candidate:
it lies in the future while a pod is inside its grace period.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import EvidenceSet, Key
from gputriage.facts.kube_objects import dict_list, items, mapping, obj

#: Structured evidence whose objects carry times.
_OBJECT_KEYS = (Key.POD, Key.NODE)
_LIST_KEYS = (Key.NODES, Key.NODE_PODS, Key.EVENTS, Key.NODE_EVENTS, Key.OWNER_EVENTS)
_EVENT_FIELDS = (
    "firstTimestamp",
    "lastTimestamp",
    "eventTime",
    "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp",
)
_CONDITION_FIELDS = ("lastHeartbeatTime", "lastTransitionTime", "lastProbeTime")
_STATUS_LISTS = ("containerStatuses", "initContainerStatuses")


def parse_time(value: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 time (UTC when it names no zone), else None."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def reference_time(evidence: EvidenceSet) -> float | None:
    """The newest timestamp in the structured evidence, or None when it holds none."""
    stamps: set[str] = set()
    for key in _OBJECT_KEYS:
        _collect(obj(evidence.get_or_missing(key)), stamps)
    for key in _LIST_KEYS:
        for item in items(evidence.get_or_missing(key)):
            _collect(item, stamps)
    # Thousands of objects share a handful of distinct times: parse each one once.
    return max((t for s in stamps if (t := parse_time(s)) is not None), default=None)


def rfc3339(seconds: float | None) -> str:
    """``2026-11-02T09:30:00Z`` for a time from :func:`reference_time` ("" for None)."""
    if seconds is None:
        return ""
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _collect(item: Mapping[str, Any], out: set[str]) -> None:
    """Add the time fields of one object to ``out``: an event's times, or an object's
    creation, start, condition and container-state times."""
    candidates = [item.get(f) for f in _EVENT_FIELDS]
    candidates.append(mapping(item.get("series")).get("lastObservedTime"))
    candidates.append(mapping(item.get("metadata")).get("creationTimestamp"))
    status = mapping(item.get("status"))
    candidates.append(status.get("startTime"))
    for condition in dict_list(status.get("conditions")):
        candidates.extend(condition.get(f) for f in _CONDITION_FIELDS)
    for field in _STATUS_LISTS:
        for container in dict_list(status.get(field)):
            for which in ("state", "lastState"):
                for state in mapping(container.get(which)).values():
                    if isinstance(state, dict):
                        candidates += (state.get("startedAt"), state.get("finishedAt"))
    out.update(c for c in candidates if isinstance(c, str) and c)
