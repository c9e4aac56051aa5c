"""The incident summary: everything an SRE pastes into the ticket, as one plain structure.

``build_summary`` gathers the target, the verdict, the walk (with overrides marked), findings
and fixes, the SRE's notes, a merged timeline (event, journal and kernel timestamps), the cited
evidence excerpts, and the sources that could not be read and why. Every string is made inert
(no terminal escapes) and secrets are redacted before the structure leaves this module, so both
renderers and any future one are safe by construction.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from gputriage import __version__
from gputriage.evidence.model import DESCRIPTIONS, EvidenceSet, Key, LineRef, Status
from gputriage.facts.model import FactSet
from gputriage.playbook.transcript import Transcript, Visit
from gputriage.report.notes import Note
from gputriage.report.redact import redact_obj
from gputriage.textsafe import inert

#: Fact groups whose list entries carry timestamps worth putting on the timeline.
TIMELINE_GROUPS: tuple[str, ...] = ("events", "owner_events", "node", "kubelet", "kernel",
                                    "device_plugin", "container_log")
_TIME_KEYS = ("timestamp", "time", "last", "first", "ts", "last_timestamp")
_TEXT_KEYS = ("message", "text", "reason", "mnemonic")
MAX_TIMELINE = 200
MAX_EXCERPT_LINES = 60


def build_summary(
    *,
    session: str,
    context: str,
    evidence: EvidenceSet,
    facts: FactSet,
    transcript: Transcript,
    notes: Sequence[Note] = (),
    now: float | None = None,
) -> dict[str, Any]:
    """The summary as JSON-ready data (redacted and inert)."""
    pod = facts.groups.get("pod")
    podv: Mapping[str, Any] = pod.values if pod else {}
    t = facts.target
    summary: dict[str, Any] = {
        "tool": {"name": "gputriage", "version": __version__},
        "generated_at": _iso(now if now is not None else time.time()),
        "target": {
            "session": session,
            "context": context,
            "namespace": t.namespace,
            "pod": t.pod,
            "uid": t.uid,
            "node": t.node,
            "owner": f"{t.owner_kind}/{t.owner_name}" if t.owner_kind else "",
            "phase": podv.get("phase", ""),
            "gpu_request": podv.get("gpu_resources", {}),
        },
        "verdict": _verdict(transcript),
        "findings": [f.to_dict() for f in transcript.findings],
        "differential": {
            "consistent": [a.to_dict() for a in transcript.consistent],
            "ruled_out": [a.to_dict() for a in transcript.ruled_out],
        },
        "walk": [_visit(v) for v in transcript.visits],
        "question": _question(transcript),
        "notes": [{"time": n.iso, "step": n.step, "text": n.text} for n in notes],
        "timeline": timeline(facts),
        "sources": [
            {"key": k.value, "what": DESCRIPTIONS[k], "status": e.status.value,
             "detail": e.detail, "source": e.source}
            for k in Key if (e := evidence.get_or_missing(k))
        ],
        "excerpts": excerpts(transcript),
        "warnings": list(transcript.warnings),
    }
    summary["unreadable"] = [s for s in summary["sources"] if s["status"] != Status.OK.value]
    return _clean(summary)


def _verdict(tr: Transcript) -> dict[str, Any]:
    if tr.question is not None and (not tr.findings or tr.undetermined):
        return {"status": "waiting", "headline": f"waiting for an answer: {tr.question.prompt}"}
    if not tr.findings:
        return {"status": "undetermined", "headline": "the walk reached no conclusion"}
    first = tr.findings[0]
    status = "undetermined" if tr.undetermined else "finding"
    return {"status": status, "headline": first.title, "finding": first.id,
            "severity": first.severity, "confidence": tr.confidence}


def _visit(v: Visit) -> dict[str, Any]:
    return {
        "id": v.ref, "title": v.prompt, "outcome": v.outcome.value, "target": v.target,
        "because": v.because, "condition": v.condition, "proposed": v.proposed,
        "overridden": bool(v.proposed), "unknown_facts": list(v.unknown_facts),
        "citations": [c.to_dict() for c in v.citations],
    }


def _question(tr: Transcript) -> dict[str, Any] | None:
    q = tr.question
    if q is None:
        return None
    return {"ref": q.ref, "prompt": q.prompt,
            "choices": [{"value": c.value, "label": c.label} for c in q.choices]}


def excerpts(tr: Transcript) -> list[dict[str, Any]]:
    """Every cited evidence line, grouped by source, in line order, without duplicates."""
    refs: list[LineRef] = [c for v in tr.visits for c in v.citations]
    refs += [c for f in tr.findings for c in f.evidence]
    by_source: dict[str, dict[int | str, LineRef]] = {}
    for r in refs:
        by_source.setdefault(r.source, {}).setdefault(r.line or r.text, r)
    out = []
    for source, lines in by_source.items():
        ordered = sorted(lines.values(), key=lambda r: (r.line, r.text))[:MAX_EXCERPT_LINES]
        out.append({"source": source, "key": ordered[0].key,
                    "lines": [{"line": r.line, "text": r.text} for r in ordered]})
    return out


def timeline(facts: FactSet) -> list[dict[str, str]]:
    """Timestamped entries from events, journals and kernel logs, oldest first."""
    entries: list[tuple[datetime, str, str]] = []
    for name in TIMELINE_GROUPS:
        group = facts.groups.get(name)
        if group is None or not group.known:
            continue
        for item in _dict_items(group.values.values()):
            when = next((t for k in _TIME_KEYS if k in item
                         if (t := _parse_time(item[k])) is not None), None)
            if when is None:
                continue
            text = next((str(item[k]) for k in _TEXT_KEYS if item.get(k)), "")
            if "code" in item and name == "kernel":
                text = f"Xid {item['code']}: {text}"
            elif item.get("reason") and item.get("message"):
                text = f"{item['reason']}: {item['message']}"
            entries.append((when, name, text))
    entries.sort(key=lambda e: e[0])
    seen: set[tuple[str, str, str]] = set()
    out = []
    for when, source, text in entries:
        row = (when.isoformat(), source, text)
        if row not in seen:
            seen.add(row)
            out.append({"time": when.strftime("%Y-%m-%dT%H:%M:%SZ"), "source": source,
                        "text": text})
    return out[-MAX_TIMELINE:]


def _dict_items(values: Iterable[Any]) -> Iterable[dict[str, Any]]:
    for v in values:
        if isinstance(v, list):
            yield from (i for i in v if isinstance(i, dict))


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or len(value) < 19 or value[4] != "-":
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _clean(obj: Any) -> Any:
    """Redact secrets, then strip terminal escapes from every string."""
    return _inert(redact_obj(obj))


def _inert(obj: Any) -> Any:
    if isinstance(obj, str):
        return inert(obj)
    if isinstance(obj, list):
        return [_inert(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _inert(v) for k, v in obj.items()}
    return obj
