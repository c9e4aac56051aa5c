"""Evidence tabs as plain tables: which rows each tab shows, built from facts and evidence.

Pure functions, no Textual, so every tab's content is tested without a terminal. Fact groups
land one by one while evidence streams in, so every reader here goes through ``.get()`` and
treats a missing group or field as "not yet". Every cell is made inert (no escape sequences, no
control characters) here, once; widgets still render cells as plain text, never as markup.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gputriage.evidence.model import DESCRIPTIONS, Evidence, EvidenceSet, Key, LineRef, Status
from gputriage.facts.model import FactGroup, FactSet
from gputriage.report.source_states import SourceState, reading
from gputriage.textsafe import inert_line

#: Log tabs keep the newest lines only: a table of a million journal lines helps nobody.
MAX_LOG_ROWS = 2000
#: Long cells are cut so one runaway message does not make a row unreadable.
MAX_CELL = 400

#: klog error/fatal lines and words that mean something went wrong, for colouring log rows.
_ALARMING = re.compile(r"(?:^|\s)[EF]\d{4} |\b(?:error|failed|unhealthy)\b", re.IGNORECASE)

#: ``(source, line)`` of every line the current step or verdict cites.
Cited = frozenset[tuple[str, int]]


@dataclass(frozen=True)
class Row:
    cells: tuple[str, ...]
    tone: str = ""  # "" | "ok" | "warning" | "error": how alarming the row is
    cited: bool = False  # the current step or verdict cites this row's line
    source: str = ""  # where the row's line is: the evidence source (file or API path)
    line: int = 0  # 1-based line in that source; 0 when the row has no single line


@dataclass(frozen=True)
class TableData:
    columns: tuple[str, ...]
    rows: tuple[Row, ...] = ()
    note: str = ""  # one line above the table: a summary, or why the tab is empty

    def filtered(self, query: str) -> TableData:
        """Rows where any cell contains ``query`` (case-insensitive); all rows for ""."""
        q = query.strip().casefold()
        if not q:
            return self
        rows = tuple(r for r in self.rows if any(q in c.casefold() for c in r.cells))
        return TableData(self.columns, rows, self.note)


@dataclass(frozen=True)
class TabSpec:
    id: str
    title: str
    build: Callable[[FactSet | None, EvidenceSet, frozenset[Key], Cited], TableData]


def cell(value: Any) -> str:
    """A fact value as one line of inert text: ``-`` for nothing, ``a, b`` for lists."""
    if value is None or value == "" or value == [] or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, Mapping):
        text = ", ".join(f"{k}: {cell(v)}" for k, v in value.items())
    elif isinstance(value, list | tuple):
        text = ", ".join(cell(v) for v in value)
    else:
        text = str(value)
    text = inert_line(text)
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def reported(value: Any) -> Any:
    """``None`` for the ``-1`` that fact groups use for "not reported" numbers."""
    return None if isinstance(value, int) and not isinstance(value, bool) and value < 0 else value


def cited_set(refs: Iterable[LineRef]) -> Cited:
    return frozenset((r.source, r.line) for r in refs if r.line)


def _group(facts: FactSet | None, name: str) -> FactGroup | None:
    return facts.groups.get(name) if facts is not None else None


def _why_empty(
    group: FactGroup | None,
    what: str,
    keys: Iterable[Key],
    pending: frozenset[Key],
    evidence: EvidenceSet,
) -> str:
    """Why a tab has nothing to show: "" when its group is known (even while re-collecting),
    else still collecting, not collected, or unknown with the reason."""
    if group is not None and group.known:
        return ""
    keys = list(keys)
    waiting = [k.value for k in keys if k in pending]
    if waiting:
        return f"{what}: collecting {', '.join(waiting)}…"
    if all(evidence.get_or_missing(k).status is Status.UNAVAILABLE for k in keys):
        return f"{what}: not collected ({', '.join(k.value for k in keys)})"
    if group is None:
        return f"{what}: no facts are built from this evidence in this version"
    return f"{what} unknown: {inert_line(group.reason)}"


def _maps(group: FactGroup | None, name: str) -> list[Mapping[str, Any]]:
    items = group.values.get(name) if group is not None else None
    if not isinstance(items, list):
        return []
    return [i for i in items if isinstance(i, Mapping)]


def _as_line(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _line_cited(ev: Evidence, line: Any, cited: Cited) -> bool:
    return isinstance(line, int) and (ev.source, line) in cited


def events_table(
    facts: FactSet | None, evidence: EvidenceSet, pending: frozenset[Key], cited: Cited
) -> TableData:
    cols = ("of", "type", "reason", "count", "last seen", "message", "line")
    rows: list[Row] = []
    notes: list[str] = []
    for name, key, label in (
        ("events", Key.EVENTS, "pod"),
        ("owner_events", Key.OWNER_EVENTS, "owner"),
    ):
        group = _group(facts, name)
        why = _why_empty(group, f"{label} events", [key], pending, evidence)
        if why:
            notes.append(why)
            continue
        ev = evidence.get_or_missing(key)
        for e in _maps(group, "items"):
            warning = str(e.get("type", "")) == "Warning"
            rows.append(
                Row(
                    (
                        label,
                        cell(e.get("type")),
                        cell(e.get("reason")),
                        cell(e.get("count")),
                        cell(e.get("last")),
                        cell(e.get("message")),
                        cell(e.get("line")),
                    ),
                    "warning" if warning else "",
                    _line_cited(ev, e.get("line"), cited),
                    ev.source,
                    _as_line(e.get("line")),
                )
            )
    return TableData(cols, tuple(rows), "; ".join(notes))


def scheduler_table(
    facts: FactSet | None, evidence: EvidenceSet, pending: frozenset[Key], cited: Cited
) -> TableData:
    cols = ("nodes", "kind", "resource / taint", "reason")
    group = _group(facts, "scheduler")
    why = _why_empty(group, "scheduler reasons", [Key.POD, Key.EVENTS], pending, evidence)
    if why or group is None:
        return TableData(cols, note=why)
    v = group.values
    rows = []
    for r in _maps(group, "reasons"):
        detail = r.get("resource") or (
            f"{r.get('taint_key')}={r.get('taint_value') or ''}" if r.get("taint_key") else ""
        )
        rows.append(
            Row(
                (
                    cell(r.get("count")),
                    cell(r.get("kind")),
                    cell(detail),
                    cell(r.get("text") or r.get("raw")),
                ),
                "warning" if r.get("kind") == "insufficient" else "",
            )
        )
    total = v.get("total_nodes")
    if not rows and not total:
        return TableData(cols, note="the scheduler reported nothing (the pod was scheduled)")
    note = f"0/{cell(total)} nodes are available"
    raw = v.get("preemption")
    pre: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    if pre.get("no_victims"):  # the scheduler's words: nothing of lower priority to evict
        note += (
            f"; preemption: no victims found on {cell(pre['no_victims'])} node(s) "
            "(the GPUs are taken by pods of equal or higher priority)"
        )
    elif v.get("preemption_helpful") is False:
        note += "; preemption is not helpful"
    return TableData(cols, tuple(rows), note)


def _gpu_only(resources: Any) -> dict[str, Any]:
    if not isinstance(resources, Mapping):
        return {}
    return {k: v for k, v in resources.items() if "gpu" in str(k) or "mig-" in str(k)}


def gpu_nodes_table(
    facts: FactSet | None, evidence: EvidenceSet, pending: frozenset[Key], cited: Cited
) -> TableData:
    cols = ("node", "ready", "cordoned", "capacity", "allocatable", "requested", "free", "taints")
    group = _group(facts, "cluster")
    why = _why_empty(group, "GPU nodes", [Key.NODES, Key.NODE_PODS], pending, evidence)
    if why or group is None:
        return TableData(cols, note=why)
    target = facts.target.node if facts is not None else ""
    rows = []
    for n in _maps(group, "gpu_nodes"):
        free = _gpu_only(n.get("free"))
        taints = [
            f"{t.get('key')}:{t.get('effect')}"
            for t in n.get("taints") or []
            if isinstance(t, Mapping)
        ]
        tone = (
            "error"
            if n.get("ready") is False
            else ("warning" if not any(isinstance(x, int) and x > 0 for x in free.values()) else "")
        )
        name = str(n.get("name", ""))
        rows.append(
            Row(
                (
                    cell(name + (" *" if name and name == target else "")),
                    cell(n.get("ready")),
                    cell(n.get("unschedulable")),
                    cell(_gpu_only(n.get("capacity"))),
                    cell(_gpu_only(n.get("allocatable"))),
                    cell(_gpu_only(n.get("requested"))),
                    cell(free),
                    cell(taints),
                ),
                tone,
            )
        )
    note = f"{len(rows)} GPU nodes" + ("; * = the pod's node" if target else "")
    return TableData(cols, tuple(rows), note)


@lru_cache(maxsize=8)
def _lines(raw: str) -> tuple[str, ...]:
    """Split once per log: tabs are rebuilt on every cursor move, logs do not change."""
    return tuple(raw.splitlines())


def _log_rows(
    ev: Evidence, cited: Cited, keep: Callable[[str], bool] | None = None, also: Cited = frozenset()
) -> tuple[list[Row], int]:
    """Lines of a text log as rows (newest ``MAX_LOG_ROWS``), keeping cited lines always."""
    rows: list[Row] = []
    matched = 0
    for i, text in enumerate(_lines(ev.raw), 1):
        is_cited = (ev.source, i) in cited
        if keep is not None and not is_cited and (ev.source, i) not in also and not keep(text):
            continue
        matched += 1
        tone = "error" if _ALARMING.search(text) else ""
        rows.append(Row((str(i), cell(text)), tone, is_cited, ev.source, i))
    return rows[-MAX_LOG_ROWS:], matched


def kubelet_table(
    facts: FactSet | None, evidence: EvidenceSet, pending: frozenset[Key], cited: Cited
) -> TableData:
    """The kubelet journal lines about this pod (name or UID), plus every line facts cite."""
    cols = ("line", "kubelet journal")
    ev = evidence.get_or_missing(Key.KUBELET_LOG)
    group = _group(facts, "kubelet")
    if Key.KUBELET_LOG in pending or not ev.ok:
        return TableData(
            cols,
            note=_why_empty(group, "kubelet journal", [Key.KUBELET_LOG], pending, evidence)
            or _evidence_reason(ev),
        )
    target = facts.target if facts is not None else None
    needles = [n for n in ((target.uid, target.pod) if target else ()) if n]
    group_cites = cited_set(facts.citations("kubelet")) if facts is not None else frozenset()
    rows, matched = _log_rows(
        ev, cited, (lambda t: any(n in t for n in needles)) if needles else None, group_cites
    )
    which = (
        f"lines naming {target.namespace}/{target.pod} or cited by the kubelet facts"
        if needles and target
        else "lines"
    )
    note = f"{matched} of {len(_lines(ev.raw))} {which}"
    if len(rows) < matched:
        note += f" (newest {len(rows)} shown)"
    return TableData(cols, tuple(rows), note)


def xid_table(
    facts: FactSet | None, evidence: EvidenceSet, pending: frozenset[Key], cited: Cited
) -> TableData:
    cols = ("time", "kind", "code", "PCI", "process", "meaning", "action", "line")
    group = _group(facts, "kernel")
    why = _why_empty(group, "kernel log", [Key.DMESG], pending, evidence)
    if why or group is None:
        return TableData(cols, note=why)
    ev = evidence.get_or_missing(Key.DMESG)
    rows = []
    for kind, name in (("Xid", "xids"), ("SXid", "sxids")):
        for x in _maps(group, name):
            hardware = bool(x.get("hardware")) or str(x.get("klass", "")) in (
                "hardware",
                "memory",
                "nvlink",
                "always-fatal",
            )
            rows.append(
                Row(
                    (
                        cell(x.get("timestamp")),
                        kind,
                        cell(x.get("code")),
                        cell(x.get("pci")),
                        cell(x.get("process")),
                        cell(x.get("description") or x.get("mnemonic") or x.get("message")),
                        cell(x.get("action")),
                        cell(x.get("line")),
                    ),
                    "error" if hardware else "warning",
                    _line_cited(ev, x.get("line"), cited),
                    ev.source,
                    _as_line(x.get("line")),
                )
            )
    v = group.values
    facts_note = []
    if v.get("fallen_off_bus"):
        facts_note.append(f"GPU fallen off the bus: {cell(v.get('fallen_off_bus_pci'))}")
    if v.get("recovery_actions"):
        facts_note.append(f"recovery: {cell(v.get('recovery_actions'))}")
    note = f"{len(rows)} Xid/SXid events in {cell(v.get('lines_scanned'))} kernel lines"
    return TableData(cols, tuple(rows), "; ".join([note, *facts_note]))


def gpus_table(
    facts: FactSet | None, evidence: EvidenceSet, pending: frozenset[Key], cited: Cited
) -> TableData:
    cols = (
        "gpu",
        "PCI",
        "name",
        "memory used/total MiB",
        "ECC DBE",
        "remap pending",
        "remap failed",
        "recovery",
        "MIG",
        "processes",
    )
    group = _group(facts, "gpus")
    why = _why_empty(group, "nvidia-smi", [Key.NVIDIA_SMI], pending, evidence)
    if why or group is None:
        return TableData(cols, note=why)
    v = group.values
    rows = []
    for g in _maps(group, "gpus"):
        mem = (
            f"{cell(reported(g.get('memory_used_mib')))}/"
            f"{cell(reported(g.get('memory_total_mib')))}"
        )
        dbe = reported(g.get("ecc_volatile_dbe"))
        bad = (
            g.get("remapped_rows_failure") or (isinstance(dbe, int) and dbe > 0) or g.get("errors")
        )
        procs = g.get("processes") or []
        rows.append(
            Row(
                (
                    cell(reported(g.get("index"))),
                    cell(g.get("pci")),
                    cell(g.get("name")),
                    mem,
                    cell(dbe),
                    cell(g.get("remapped_rows_pending")),
                    cell(g.get("remapped_rows_failure")),
                    cell(g.get("recovery_action")),
                    cell(g.get("mig_mode")),
                    cell(len(procs) if procs else None),
                ),
                "error" if bad else "",
            )
        )
    status = str(v.get("status") or "")
    note = f"nvidia-smi: {status or '-'}"
    if v.get("driver_version"):
        note += f"; driver {cell(v.get('driver_version'))}, CUDA {cell(v.get('cuda_version'))}"
    if v.get("message"):
        note += f"; {cell(v.get('message'))}"
    if v.get("lost_pci_ids"):
        note += f"; lost: {cell(v.get('lost_pci_ids'))}"
    return TableData(cols, tuple(rows), note)


def device_plugin_table(
    facts: FactSet | None, evidence: EvidenceSet, pending: frozenset[Key], cited: Cited
) -> TableData:
    cols = ("line", "device-plugin log")
    ev = evidence.get_or_missing(Key.DEVICE_PLUGIN_LOG)
    group = _group(facts, "device_plugin")
    parts = []
    if group is not None and group.known:
        v = group.values
        if "pod_found" in v and v.get("pod_known"):
            parts.append(
                f"plugin pod {cell(v.get('pod_name'))}: {cell(v.get('pod_phase'))}, "
                f"restarts {cell(v.get('restart_count'))}"
            )
        parts.append(f"registered: {cell(v.get('registered'))}")
        unhealthy = _maps(group, "unhealthy_devices")
        if unhealthy:
            parts.append(
                "unhealthy: "
                + ", ".join(f"{cell(u.get('uuid'))} (Xid {cell(u.get('xid'))})" for u in unhealthy)
            )
    if Key.DEVICE_PLUGIN_LOG in pending or not ev.ok:
        reason = (
            "device-plugin log: collecting…"
            if Key.DEVICE_PLUGIN_LOG in pending
            else _evidence_reason(ev)
        )
        return TableData(cols, note="; ".join([*parts, reason]))
    rows, matched = _log_rows(ev, cited)
    parts.append(
        f"{matched} lines" + (f" (newest {len(rows)} shown)" if len(rows) < matched else "")
    )
    return TableData(cols, tuple(rows), "; ".join(parts))


def container_log_table(
    facts: FactSet | None, evidence: EvidenceSet, pending: frozenset[Key], cited: Cited
) -> TableData:
    cols = ("log", "line", "signature", "text")
    group = _group(facts, "container_log")
    why = _why_empty(
        group, "container logs", [Key.CONTAINER_LOG, Key.CONTAINER_LOG_PREVIOUS], pending, evidence
    )
    if why or group is None:
        return TableData(cols, note=why)
    sources = {
        k: evidence.get_or_missing(k).source
        for k in (Key.CONTAINER_LOG, Key.CONTAINER_LOG_PREVIOUS)
    }
    rows = []
    for s in _maps(group, "signatures"):
        line = s.get("line")
        log = str(s.get("log", ""))
        source = next((src for k, src in sources.items() if k.value == log or log in src), "")
        rows.append(
            Row(
                (cell(log), cell(line), cell(s.get("id")), cell(s.get("text"))),
                "error",
                isinstance(line, int) and (source, line) in cited,
                source,
                _as_line(line),
            )
        )
    oom = group.values.get("oom")
    note = f"{len(rows)} known failure signatures"
    if isinstance(oom, Mapping) and oom:
        sizes = {
            k.removesuffix("_mib"): v
            for k, v in oom.items()
            if k.endswith("_mib") and reported(v) is not None
        }
        note += f"; CUDA OOM (MiB): {cell(sizes)}"
    return TableData(cols, tuple(rows), note)


def _evidence_reason(ev: Evidence) -> str:
    return f"{DESCRIPTIONS[ev.key]}: {ev.status.value}: {inert_line(ev.detail)}"


def sources_table(
    facts: FactSet | None, evidence: EvidenceSet, pending: frozenset[Key], cited: Cited
) -> TableData:
    """Every evidence key: how collecting it went and why, for the "retry" decision."""
    cols = ("evidence", "status", "detail", "from", "took")
    rows = []
    keys = list(dict.fromkeys([*evidence.keys(), *sorted(pending)]))
    for key in keys:
        if key in pending:
            rows.append(Row((key.value, "collecting", DESCRIPTIONS[key], "-", "-")))
            continue
        ev = evidence[key]
        state = reading(ev, facts)
        tone = {SourceState.OK: "ok", SourceState.FAILED: "error"}.get(state.state, "")
        detail = state.why if state.state is SourceState.NOT_APPLICABLE else ev.detail
        shown = (
            f"failed: {ev.status.value}" if state.state is SourceState.FAILED else state.state.value
        )
        rows.append(
            Row(
                (
                    key.value,
                    shown,
                    cell(detail),
                    cell(ev.source),
                    f"{ev.elapsed_s:.2f}s" if ev.elapsed_s else "-",
                ),
                tone,
            )
        )
    return TableData(cols, tuple(rows), "r re-collects every source")


#: Every fact field a tab reads, by group: checked against the declared specs by the tests, so
#: a renamed field fails loudly instead of leaving a tab silently empty.
READS: dict[str, tuple[str, ...]] = {
    "events": ("items",),
    "owner_events": ("items",),
    "scheduler": ("reasons", "total_nodes", "preemption_helpful"),
    "cluster": ("gpu_nodes",),
    "kernel": (
        "xids",
        "sxids",
        "fallen_off_bus",
        "fallen_off_bus_pci",
        "recovery_actions",
        "lines_scanned",
    ),
    "gpus": ("gpus", "status", "message", "driver_version", "cuda_version", "lost_pci_ids"),
    "device_plugin": (
        "pod_found",
        "pod_known",
        "pod_name",
        "pod_phase",
        "restart_count",
        "registered",
        "unhealthy_devices",
    ),
    "container_log": ("signatures", "oom"),
    "pod": ("phase", "reason", "node", "gpu_resources", "containers"),
}

#: The tabs, in the order they are shown.
TABS: tuple[TabSpec, ...] = (
    TabSpec("events", "Events", events_table),
    TabSpec("scheduler", "Scheduler", scheduler_table),
    TabSpec("nodes", "Nodes", gpu_nodes_table),
    TabSpec("kubelet", "Kubelet", kubelet_table),
    TabSpec("xid", "Xids", xid_table),
    TabSpec("gpus", "GPUs", gpus_table),
    TabSpec("plugin", "Plugin", device_plugin_table),
    TabSpec("logs", "Logs", container_log_table),
    TabSpec("sources", "Sources", sources_table),
)


@dataclass(frozen=True)
class RowDetail:
    """One evidence row opened whole: where it is, the full line, every cell uncut."""

    title: str
    citation: str  # "bundle/kubelet.log:12" or "GET /api/v1/...:3", "" when none
    line: str  # the whole source line, inert, never cut ("" when the row has no line)
    fields: tuple[tuple[str, str], ...]  # (column, cell) in column order


def row_detail(title: str, columns: tuple[str, ...], row: Row, evidence: EvidenceSet) -> RowDetail:
    """The detail of ``row``: its source line read back whole from the evidence."""
    full = ""
    if row.source and row.line:
        ev = next((e for e in evidence.values() if e.source == row.source), None)
        if ev is not None:
            lines = _lines(ev.raw)
            if 0 < row.line <= len(lines):
                full = inert_line(lines[row.line - 1]).strip()
    citation = f"{row.source}:{row.line}" if row.source and row.line else row.source
    return RowDetail(
        title, inert_line(citation), full, tuple(zip(columns, row.cells, strict=False))
    )
