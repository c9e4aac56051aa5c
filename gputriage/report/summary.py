"""The incident summary: everything an SRE pastes into the ticket, as one plain structure.

``build_summary`` gathers the target, the verdict, the walk (with overrides marked), findings
and fixes, the SRE's notes, a merged timeline (event, journal and kernel timestamps), the cited
evidence excerpts, and the sources that could not be read and why. Every string goes through
``textsafe.clean_obj`` (escapes stripped, then secrets redacted) before the structure leaves
this module, so both renderers and any future one are safe by construction.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import PurePath
from typing import Any

from gputriage import __version__
from gputriage.evidence.model import DESCRIPTIONS, EvidenceSet, Key, LineRef, Status
from gputriage.facts.model import FactSet
from gputriage.playbook.transcript import Finding, Outcome, Transcript, Visit
from gputriage.report.gpu_section import gpu_section
from gputriage.report.notes import Note
from gputriage.report.source_states import SourceState, reading
from gputriage.textsafe import clean_obj

#: Fact groups whose list entries carry timestamps worth putting on the timeline.
TIMELINE_GROUPS: tuple[str, ...] = (
    "events",
    "owner_events",
    "node",
    "kubelet",
    "kernel",
    "device_plugin",
    "container_log",
)
_TIME_KEYS = ("timestamp", "time", "last", "first", "ts", "last_timestamp")
_TEXT_KEYS = ("message", "text", "reason", "mnemonic")
MAX_TIMELINE = 200
#: Cited lines kept per source, and per finding: what a ticket reader can check, not every
#: line a broad condition touched (a cluster-wide node list cites every node).
MAX_EXCERPT_LINES = 12
#: How the verdict was reached, for the ticket reader.
WALK_STATUS = {
    "confirmed": "confirmed step by step by the SRE",
    "overridden": "the SRE overrode the engine at one or more steps",
    "proposed": "exported straight from the engine's proposed verdict, not confirmed by a person",
}


def build_summary(
    *,
    session: str,
    context: str,
    evidence: EvidenceSet,
    facts: FactSet,
    transcript: Transcript,
    notes: Sequence[Note] = (),
    now: float | None = None,
    confirmed: bool = False,
) -> dict[str, Any]:
    """The summary as JSON-ready data (redacted and inert).

    ``confirmed``: the SRE walked the steps and confirmed them (the TUI knows; a headless
    report never is).
    """
    pod = facts.groups.get("pod")
    podv: Mapping[str, Any] = pod.values if pod else {}
    t = facts.target
    summary: dict[str, Any] = {
        "tool": {"name": "gputriage", "version": __version__},
        "generated_at": _iso(now if now is not None else time.time()),
        "target": {
            "session": evidence_label(session),
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
        "walk_status": walk_status(transcript, confirmed),
        "gpus": gpus_involved(facts, transcript),
        "findings": [_finding(f) for f in transcript.findings],
        "differential": {
            "consistent": [a.to_dict() for a in transcript.consistent],
            "ruled_out": [a.to_dict() for a in transcript.ruled_out],
        },
        "walk": [_visit(v) for v in transcript.visits],
        "question": _question(transcript),
        "notes": [{"time": n.iso, "step": n.step, "text": n.text} for n in notes],
        "timeline": timeline(facts, evidence),
        "sources": [
            {
                "key": k.value,
                "what": DESCRIPTIONS[k],
                "status": e.status.value,
                "detail": e.detail,
                "source": e.source,
                "state": reading(e, facts).state.value,
            }
            for k in Key
            if (e := evidence.get_or_missing(k))
        ],
        "excerpts": excerpts(transcript),
        "warnings": list(transcript.warnings),
        # issue 13: pod <-> GPU mapping, candidate nodes of a Pending pod, a job's pods
        "placement": gpu_section(facts),
    }
    # What could not be seen: failed and not collected; not what does not apply to this pod.
    summary["unreadable"] = [
        s
        for s in summary["sources"]
        if s["status"] != Status.OK.value and s["state"] != SourceState.NOT_APPLICABLE.value
    ]
    cleaned: dict[str, Any] = _clean(summary)
    return cleaned


def _verdict(tr: Transcript) -> dict[str, Any]:
    if tr.question is not None and (not tr.findings or tr.undetermined):
        return {"status": "waiting", "headline": f"waiting for an answer: {tr.question.prompt}"}
    if not tr.findings:
        return {"status": "undetermined", "headline": "the walk reached no conclusion"}
    first = tr.findings[0]
    status = "undetermined" if tr.undetermined else "finding"
    return {
        "status": status,
        "headline": first.title,
        "finding": first.id,
        "severity": first.severity,
        "confidence": tr.confidence,
    }


def evidence_label(session: str) -> str:
    """Where the evidence came from, without local paths: ``bundle NAME``, ``node bundle
    NAME``, ``demo X``, ``context prod``."""
    head, sep, rest = session.partition("bundle ")
    if sep and rest and head in ("", "node "):
        return f"{head}bundle {PurePath(rest.rstrip('/')).name}"
    return session


def walk_status(tr: Transcript, confirmed: bool) -> dict[str, str]:
    """Whether a person confirmed, overrode, or never looked at the walk."""
    if any(v.outcome is Outcome.OVERRIDE for v in tr.visits):
        status = "overridden"
    else:
        status = "confirmed" if confirmed else "proposed"
    return {"status": status, "words": WALK_STATUS[status]}


def _finding(f: Finding) -> dict[str, Any]:
    d = f.to_dict()
    d["evidence_more"] = max(0, len(d["evidence"]) - MAX_EXCERPT_LINES)
    d["evidence"] = d["evidence"][:MAX_EXCERPT_LINES]
    return d


def gpus_involved(facts: FactSet, tr: Transcript) -> list[dict[str, Any]]:
    """The GPUs a lost-card verdict is about: PCI id, UUID, serial, name and their Xid lines.

    Identity comes from nvidia-smi (per GPU) and from the driver's own kernel lines (``GPU at
    PCI:... GPU-uuid``, ``GPU Board Serial Number``); the GPUs are those with an Xid, lost to
    nvidia-smi, or marked unhealthy by the device plugin. Empty unless the verdict is a
    lost-card finding: an OOM ticket does not need the node's serial numbers.
    """
    if not any(f.playbook == "lost-card" or f.id.startswith("lost.") for f in tr.findings):
        return []
    kernel = _values(facts, "kernel")
    gpus = _values(facts, "gpus")
    plugin = _values(facts, "device_plugin")
    by_pci: dict[str, dict[str, Any]] = {}

    def slot(pci: Any) -> dict[str, Any] | None:
        key = _pci_key(pci)
        if not key:
            return None
        return by_pci.setdefault(
            key,
            {
                "pci": key,
                "uuid": "",
                "serial": "",
                "name": "",
                "index": "",
                "xids": [],
                "lost": False,
                "unhealthy": "",
            },
        )

    for g in _dicts(gpus.get("gpus")):
        entry = slot(g.get("pci"))
        if entry is not None:
            entry.update(
                uuid=str(g.get("uuid") or ""),
                name=str(g.get("name") or ""),
                serial=str(g.get("serial") or ""),
                index=str(g.get("index", "")),
            )
    for ident in _dicts(kernel.get("gpu_identities")):
        entry = slot(ident.get("pci"))
        if entry is not None:
            entry["uuid"] = entry["uuid"] or str(ident.get("uuid") or "")
            entry["serial"] = entry["serial"] or str(ident.get("serial") or "")
    for pci in gpus.get("lost_pci_ids") or []:
        entry = slot(pci)
        if entry is not None:
            entry["lost"] = True
    lines = {r.line: r for r in facts.citations("kernel.xids")}
    for x in _dicts(kernel.get("xids")):
        entry = slot(x.get("pci"))
        if entry is None:
            continue
        line = x.get("line")
        ref = lines.get(line) if isinstance(line, int) else None
        entry["xids"].append(
            {
                "code": x.get("code"),
                "time": str(x.get("time") or ""),
                "line": ref.text if ref else str(x.get("message") or ""),
                "source": f"{ref.source}:{ref.line}" if ref else "",
            }
        )
    uuids = {e["uuid"]: e for e in by_pci.values() if e["uuid"]}
    for d in _dicts(plugin.get("unhealthy_devices")):
        entry = uuids.get(str(d.get("uuid") or ""))
        if entry is not None:
            entry["unhealthy"] = f"Xid {d['xid']}" if d.get("xid") else str(d.get("reason") or "")
    involved = [e for e in by_pci.values() if e["xids"] or e["lost"] or e["unhealthy"]]
    for e in involved:
        e["xids"] = e["xids"][:MAX_EXCERPT_LINES]
    return involved


def _pci_key(pci: Any) -> str:
    """``0000:3B:00.0`` and ``0000:3b:00`` name the same GPU: lower case, no function."""
    text = str(pci or "").strip().lower()
    if not text:
        return ""
    if text.count(":") == 1:  # "3b:00.0" without domain
        text = "0000:" + text
    return text.rsplit(".", 1)[0] if "." in text else text


def _values(facts: FactSet, name: str) -> Mapping[str, Any]:
    group = facts.groups.get(name)
    return group.values if group is not None and group.known else {}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _visit(v: Visit) -> dict[str, Any]:
    return {
        "id": v.ref,
        "title": v.prompt,
        "outcome": v.outcome.value,
        "target": v.target,
        "because": v.because,
        "condition": v.condition,
        "proposed": v.proposed,
        "overridden": bool(v.proposed),
        "unknown_facts": list(v.unknown_facts),
        "citations": [c.to_dict() for c in v.citations],
    }


def _question(tr: Transcript) -> dict[str, Any] | None:
    q = tr.question
    if q is None:
        return None
    return {
        "ref": q.ref,
        "prompt": q.prompt,
        "choices": [{"value": c.value, "label": c.label} for c in q.choices],
    }


def excerpts(tr: Transcript) -> list[dict[str, Any]]:
    """Every cited evidence line, grouped by source, in line order, without duplicates."""
    refs: list[LineRef] = [c for v in tr.visits for c in v.citations]
    refs += [c for f in tr.findings for c in f.evidence]
    by_source: dict[str, dict[int | str, LineRef]] = {}
    for r in refs:
        by_source.setdefault(r.source, {}).setdefault(r.line or r.text, r)
    out = []
    for source, lines in by_source.items():
        ordered = sorted(lines.values(), key=lambda r: (r.line, r.text))
        kept = ordered[:MAX_EXCERPT_LINES]
        out.append(
            {
                "source": source,
                "key": kept[0].key,
                "lines": [{"line": r.line, "text": r.text} for r in kept],
                "more": len(ordered) - len(kept),
            }
        )
    return out


def timeline(facts: FactSet, evidence: EvidenceSet | None = None) -> list[dict[str, str]]:
    """Timestamped entries from events, journals, kernel logs and the pod's container
    states (when each container started and died), oldest first."""
    entries: list[tuple[datetime, str, str, bool]] = []
    if evidence is not None:
        for when_text, text in container_moments(evidence):
            stamp = _parse_time(when_text)
            if stamp is not None:
                entries.append((stamp[0], "pod", text, stamp[1]))
    for name in TIMELINE_GROUPS:
        group = facts.groups.get(name)
        if group is None or not group.known:
            continue
        for item in _dict_items(group.values.values()):
            stamp = next(
                (t for k in _TIME_KEYS if k in item if (t := _parse_time(item[k])) is not None),
                None,
            )
            if stamp is None:
                continue
            when, zoned = stamp
            text = next((str(item[k]) for k in _TEXT_KEYS if item.get(k)), "")
            if "code" in item and name == "kernel":
                text = f"Xid {item['code']}: {text}"
            elif item.get("reason") and item.get("message"):
                text = f"{item['reason']}: {item['message']}"
            entries.append((when, name, text, zoned))
    entries.sort(key=lambda e: e[0])
    seen: set[tuple[str, str, str]] = set()
    out = []
    for when, source, text, zoned in entries:
        row = (when.isoformat(), source, text)
        if row not in seen:
            seen.add(row)
            out.append(
                {
                    "time": when.strftime("%Y-%m-%dT%H:%M:%SZ" if zoned else "%Y-%m-%dT%H:%M:%S"),
                    "zone": "UTC" if zoned else LOCAL_ZONE,
                    "source": source,
                    "text": text,
                }
            )
    return out[-MAX_TIMELINE:]


#: The zone of a timestamp printed without one (``dmesg -T``, journal short format): the
#: node's local clock, whose offset from UTC the evidence does not say.
LOCAL_ZONE = "node local time, offset unknown"


def container_moments(evidence: EvidenceSet) -> list[tuple[str, str]]:
    """(time, words) for each container start and termination recorded in ``pod.json``."""
    pod = evidence.get_or_missing(Key.POD)
    data: Any = pod.data if pod.ok else None
    status = data.get("status") if isinstance(data, dict) else None
    out: list[tuple[str, str]] = []
    for cs in _dicts((status or {}).get("containerStatuses") if isinstance(status, dict) else None):
        name = str(cs.get("name") or "")
        for which in ("state", "lastState"):
            term = (
                (cs.get(which) or {}).get("terminated") if isinstance(cs.get(which), dict) else None
            )
            if not isinstance(term, dict):
                continue
            reason = str(term.get("reason") or "terminated")
            code = term.get("exitCode")
            if term.get("finishedAt"):
                out.append(
                    (str(term["finishedAt"]), f"container {name} ended: {reason}, exit code {code}")
                )
    return out


def _dict_items(values: Iterable[Any]) -> Iterable[dict[str, Any]]:
    for v in values:
        if isinstance(v, list):
            yield from (i for i in v if isinstance(i, dict))


def _parse_time(value: Any) -> tuple[datetime, bool] | None:
    """The moment, and whether its zone is known (a naive time is the node's local clock;
    it is placed as if UTC, for ordering, and labelled as local)."""
    if not isinstance(value, str) or len(value) < 19 or value[4] != "-":
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo:
        return when.astimezone(UTC), True
    return when.replace(tzinfo=UTC), False


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _clean(obj: Any) -> Any:
    """Every string through the funnel: escapes stripped, then secrets redacted."""
    return clean_obj(obj)
