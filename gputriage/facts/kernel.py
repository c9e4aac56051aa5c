"""Fact group ``kernel``: Xids, SXids, lost GPUs, driver trouble and OOM kills in the node's
kernel log.

Built from ``dmesg.log`` (``dmesg -T`` or ``journalctl -k``). Lists are bounded so that a log
flooded with one Xid (11,000 Xid 45 per node are real) stays cheap: they keep the first line of
every distinct (code, GPU) and the most recent lines; counts cover everything. Each Xid carries
NVIDIA's immediate action from the catalog (``immediate_action``), so a playbook can act on the
bucket (``RESET_GPU``, ``RESTART_APP``...) instead of listing codes. OOM kills join the
``oom-kill:`` line (cgroups, pod UID) with the ``Killed process`` line that follows it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts.model import FactGroup, FieldSpec, GroupSpec, Target, known, unknown_from
from gputriage.parsers.kernel import KernelLogReader, KernelRecord, Kind, iter_lines, pod_of_cgroup
from gputriage.xid import catalog
from gputriage.xid.decode import recovery_fact, sxid_fact, sxid_fatal, xid_fact

#: Most recent Xid/SXid lines kept in ``xids`` / ``sxids`` (besides the first of each kind).
MAX_LISTED = 500
#: Distinct (code, GPU) pairs whose first line is kept.
MAX_FIRSTS = 200
#: Evidence lines cited per field.
MAX_CITES = 20
#: Distinct driver-load errors, RmInitAdapter errors and GPU identities kept.
MAX_DISTINCT = 50
#: Most recent OOM kills kept per scope (cgroup / node).
MAX_OOM_KILLS = 100
#: How far (in lines) an ``oom-kill:`` line and its ``Killed process`` line may be apart.
OOM_JOIN_LINES = 8

_XID_KEYS = (
    "code, pci, gpu_instance, compute_instance (-1 without MIG), pid ('<unknown>' or '' "
    "when not printed), process, message, timestamp (as printed), time (ISO or ''), line, "
    "klass, mnemonic, description, action, immediate_action (NVIDIA's immediate-action "
    "bucket: RESET_GPU, RESTART_APP, RESTART_BM, IGNORE, CONTACT_SUPPORT, WORKFLOW_...; "
    "'' when not catalogued), plugin_skips, hardware, severity, unit, link, caused_by, "
    "gpc, tpc, sm (-1 when absent), device, origin"
)
_OOM_KEYS = (
    "pid (-1 when not printed), process, constraint (CONSTRAINT_MEMCG, "
    "CONSTRAINT_NONE...; '' when not printed), cgroup (the victim's memory cgroup), "
    "pod_uid and container_id (named by that cgroup; '' when it names none), "
    "anon_rss_kb (-1 when not printed), line, timestamp, time"
)

SPEC = GroupSpec(
    name="kernel",
    doc="NVIDIA messages in the node's kernel log: Xid and SXid errors, GPUs fallen off the "
    "bus, initialisation failures, GSP timeouts and driver-load problems; and the processes "
    "the kernel's OOM killer killed (in a memory cgroup, or for the whole node).",
    sources=(Key.DMESG,),
    fields={
        "xids": FieldSpec(
            "list<map>",
            [],
            f"Xid lines, oldest first. Keys: {_XID_KEYS}. "
            "Bounded: the first line of each (code, GPU) plus the latest "
            f"{MAX_LISTED}; see xids_omitted.",
        ),
        "xid_codes": FieldSpec("list<int>", [], "Distinct Xid codes seen, sorted."),
        "xid_summary": FieldSpec(
            "list<map>",
            [],
            "One entry per Xid code, sorted by code: code, "
            "count, pcis (list), mnemonic, klass, immediate_action, "
            "first_line, last_line.",
        ),
        "xids_omitted": FieldSpec("int", 0, "Xid lines not listed in xids because of the bound."),
        "sxids": FieldSpec(
            "list<map>",
            [],
            "NVSwitch SXid events (kernel and Fabric Manager "
            "log), oldest first: code, severity (fatal|nonfatal|''), fatal, link, "
            "description, first, switch, pci, message, timestamp, time, line, "
            "klass (non-fatal|potentially-fatal|always-fatal|''), action, origin.",
        ),
        "sxid_codes": FieldSpec(
            "list<int>",
            [],
            "Distinct SXid codes seen (events and their Severity/Data detail lines), sorted.",
        ),
        "sxid_fatal": FieldSpec(
            "bool",
            False,
            "Any SXid printed as Fatal (or always fatal per the Fabric Manager guide).",
        ),
        "fallen_off_bus": FieldSpec(
            "bool",
            False,
            "A GPU fell off the bus: Xid 79, "
            "'GPU has fallen off the bus', or the probe-time message.",
        ),
        "fallen_off_bus_pci": FieldSpec(
            "list<string>", [], "PCI ids (DDDD:BB:DD) of the GPUs that fell off the bus."
        ),
        "rm_init_adapter_failed": FieldSpec(
            "bool",
            False,
            "The driver failed to initialise a GPU (RmInitAdapter failed, GFW boot timeout...).",
        ),
        "rm_init_adapter_errors": FieldSpec(
            "list<map>",
            [],
            "Distinct RmInitAdapter failures: pci, code (e.g. '0x62:0x65:1792'), line, count.",
        ),
        "gsp_timeout": FieldSpec(
            "bool", False, "GSP firmware heartbeat or RPC timeout (including Xid 119)."
        ),
        "hardware_xids": FieldSpec(
            "bool", False, "Any Xid whose class is hardware, memory or nvlink."
        ),
        "application_xids_only": FieldSpec(
            "bool",
            False,
            "There are Xids and every one is an "
            "application error or a side effect of one (classes "
            "application/sympathetic, at least one application).",
        ),
        "recovery_actions": FieldSpec(
            "list<map>",
            [],
            "Xid 154 recovery-action changes, oldest "
            "first: pci, previous_code, previous, action_code, action "
            "(e.g. 'GPU Reset Required'), line, timestamp.",
        ),
        "driver_load_errors": FieldSpec(
            "list<string>",
            [],
            "Distinct driver-load problems in "
            "words: no GPU found, probe failed, nouveau conflict, API "
            "mismatch, module not supported...",
        ),
        "driver_version": FieldSpec(
            "string",
            "",
            "Version in the last 'loading NVIDIA UNIX ... Kernel Module' banner ('' when none).",
        ),
        "gpu_identities": FieldSpec(
            "list<map>", [], "GPUs the driver named: pci, uuid, serial ('' when not printed)."
        ),
        "peermem_invalid_context": FieldSpec(
            "int",
            0,
            "nvidia-peermem 'invalid context' lines (GPUDirect RDMA noise, not a fault by itself).",
        ),
        "latest_xid": FieldSpec("map", {}, "The last Xid line (same keys as xids); {} when none."),
        "cgroup_oom_kills": FieldSpec(
            "list<map>",
            [],
            "Processes the OOM killer killed because "
            "a memory cgroup (a container's or pod's limit) was full, "
            f"oldest first, the latest {MAX_OOM_KILLS}. Keys: "
            f"{_OOM_KEYS}. Match a pod with k.pod_uid == pod.uid.",
        ),
        "node_oom_kills": FieldSpec(
            "list<map>",
            [],
            "Processes the OOM killer killed because "
            "the whole node ran out of memory (no cgroup limit "
            f"involved), oldest first, the latest {MAX_OOM_KILLS}; same "
            "keys as cgroup_oom_kills.",
        ),
        "lines_scanned": FieldSpec("int", 0, "Lines of the kernel log read."),
    },
)


class _Sample:
    """A bounded, line-ordered sample: the first record of each key plus the latest ones."""

    def __init__(self, keep_last: int, max_keys: int = MAX_FIRSTS) -> None:
        self.count = 0
        self._firsts: dict[Hashable, KernelRecord] = {}
        self._max_keys = max_keys
        self._last: deque[KernelRecord] = deque(maxlen=keep_last)

    def add(self, key: Hashable, rec: KernelRecord) -> None:
        self.count += 1
        if key not in self._firsts and len(self._firsts) < self._max_keys:
            self._firsts[key] = rec
        self._last.append(rec)

    def records(self) -> list[KernelRecord]:
        by_line = {r.line: r for r in self._firsts.values()}
        by_line.update((r.line, r) for r in self._last)
        return [by_line[n] for n in sorted(by_line)]

    def cites(self, evidence: Evidence) -> list[LineRef]:
        return [evidence.cite(r.line, r.text) for r in self.records()]


class _Collector:
    """Folds the stream of records into the group's values, in one pass."""

    def __init__(self) -> None:
        self.xids = _Sample(MAX_LISTED)
        self.sxids = _Sample(MAX_LISTED)
        self.sxid_codes: set[int] = set()
        self.summary: dict[int, dict[str, Any]] = {}
        self.classes: set[str] = set()
        self.latest: KernelRecord | None = None
        self.hardware = _Sample(3, MAX_CITES)
        self.fatal_sxids = _Sample(3, MAX_CITES)
        self.fallen = _Sample(3, MAX_CITES)
        self.fallen_pci: dict[str, None] = {}
        self.rm_init = _Sample(3, MAX_CITES)
        self.rm_errors: dict[tuple[str, str], dict[str, Any]] = {}
        self.gsp = _Sample(3, MAX_CITES)
        self.recovery = _Sample(MAX_LISTED)
        self.driver_load = _Sample(3, MAX_CITES)
        self.driver_errors: dict[str, None] = {}
        self.banner: KernelRecord | None = None
        self.identities: dict[str, dict[str, str]] = {}
        self.identity_lines = _Sample(3, MAX_CITES)
        self.last_identity = ""
        self.peermem = _Sample(1, 1)
        self.oom = _OomKills()
        self._handlers: dict[Kind, Callable[[KernelRecord], None]] = {
            Kind.XID: self._on_xid,
            Kind.SXID: self._on_sxid,
            Kind.SXID_DETAIL: self._on_sxid_detail,
            Kind.FALLEN_OFF_BUS: self._fallen,
            Kind.RM_INIT_ADAPTER: self._on_rm_init_adapter,
            Kind.GSP_TIMEOUT: self._on_gsp_timeout,
            Kind.DRIVER_LOAD: self._on_driver_load,
            Kind.DRIVER_VERSION: self._on_driver_version,
            Kind.GPU_IDENTITY: self._on_gpu_identity,
            Kind.PEERMEM: self._on_peermem,
            Kind.OOM_KILL: self.oom.add,
        }

    def add(self, rec: KernelRecord) -> None:
        handler = self._handlers.get(rec.kind)
        if handler is not None:
            handler(rec)

    def _on_xid(self, rec: KernelRecord) -> None:
        info = catalog.lookup(rec.code)
        self.xids.add((rec.code, rec.pci), rec)
        self.latest = rec
        entry = self.summary.setdefault(
            rec.code,
            {
                "code": rec.code,
                "count": 0,
                "pcis": [],
                "mnemonic": info.mnemonic if info else "",
                "klass": info.klass if info else "",
                "immediate_action": info.immediate if info else "",
                "first_line": rec.line,
                "last_line": rec.line,
            },
        )
        entry["count"] += 1
        entry["last_line"] = rec.line
        if rec.pci and rec.pci not in entry["pcis"] and len(entry["pcis"]) < MAX_DISTINCT:
            entry["pcis"].append(rec.pci)
        self.classes.add(info.klass if info else "")
        if info and info.hardware:
            self.hardware.add((rec.code, rec.pci), rec)
        if rec.code == 79:
            self._fallen(rec)
        if rec.code == 119:
            self.gsp.add((rec.code, rec.pci), rec)
        if rec.code == 154 and rec.recovery_to >= 0:
            self.recovery.add((rec.pci, rec.recovery_to), rec)

    def _on_sxid(self, rec: KernelRecord) -> None:
        self.sxids.add((rec.code, rec.pci), rec)
        self.sxid_codes.add(rec.code)
        if sxid_fatal(rec):
            self.fatal_sxids.add((rec.code, rec.pci), rec)

    def _on_sxid_detail(self, rec: KernelRecord) -> None:
        self.sxid_codes.add(rec.code)

    def _fallen(self, rec: KernelRecord) -> None:
        self.fallen.add(rec.pci, rec)
        if rec.pci and len(self.fallen_pci) < MAX_DISTINCT:
            self.fallen_pci.setdefault(rec.pci)

    def _on_rm_init_adapter(self, rec: KernelRecord) -> None:
        self.rm_init.add((rec.pci, rec.detail), rec)
        if rec.detail.startswith("0x"):
            key = (rec.pci, rec.detail)
            if key in self.rm_errors:
                self.rm_errors[key]["count"] += 1
            elif len(self.rm_errors) < MAX_DISTINCT:
                self.rm_errors[key] = {
                    "pci": rec.pci,
                    "code": rec.detail,
                    "line": rec.line,
                    "count": 1,
                }

    def _on_gsp_timeout(self, rec: KernelRecord) -> None:
        self.gsp.add((rec.pci, rec.device), rec)

    def _on_driver_load(self, rec: KernelRecord) -> None:
        self.driver_load.add(rec.detail, rec)
        if len(self.driver_errors) < MAX_DISTINCT:
            self.driver_errors.setdefault(rec.detail)

    def _on_driver_version(self, rec: KernelRecord) -> None:
        self.banner = rec

    def _on_gpu_identity(self, rec: KernelRecord) -> None:
        pci = rec.pci or self.last_identity  # "GPU Board Serial Number" follows its UUID line
        if not pci:
            return
        self.last_identity = pci
        if pci not in self.identities and len(self.identities) >= MAX_DISTINCT:
            return
        ident = self.identities.setdefault(pci, {"pci": pci, "uuid": "", "serial": ""})
        if rec.device.startswith("GPU-"):
            ident["uuid"] = rec.device
        if rec.detail:
            ident["serial"] = rec.detail
        self.identity_lines.add(pci, rec)

    def _on_peermem(self, rec: KernelRecord) -> None:
        self.peermem.add(None, rec)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    """The ``kernel`` group from the node's kernel log (unknown when it was not read)."""
    ev = evidence.get_or_missing(Key.DMESG)
    if not ev.ok:
        return unknown_from(SPEC, ev)
    reader = KernelLogReader(oom_kills=True)
    c = _Collector()
    for rec in reader.records(iter_lines(ev.raw)):
        c.add(rec)
    xids = c.xids.records()
    sxids = c.sxids.records()
    cgroup_kills, node_kills = c.oom.done()
    values: dict[str, Any] = {
        "xids": [_xid_entry(r) for r in xids],
        "xid_codes": sorted(c.summary),
        "xid_summary": [c.summary[code] for code in sorted(c.summary)],
        "xids_omitted": c.xids.count - len(xids),
        "sxids": [sxid_fact(r) for r in sxids],
        "sxid_codes": sorted(c.sxid_codes),
        "sxid_fatal": c.fatal_sxids.count > 0,
        "fallen_off_bus": c.fallen.count > 0,
        "fallen_off_bus_pci": list(c.fallen_pci),
        "rm_init_adapter_failed": c.rm_init.count > 0,
        "rm_init_adapter_errors": list(c.rm_errors.values()),
        "gsp_timeout": c.gsp.count > 0,
        "hardware_xids": c.hardware.count > 0,
        "application_xids_only": bool(c.summary)
        and "application" in c.classes
        and c.classes <= {"application", "sympathetic"},
        "recovery_actions": [recovery_fact(r) for r in c.recovery.records()],
        "driver_load_errors": list(c.driver_errors),
        "driver_version": c.banner.detail if c.banner else "",
        "gpu_identities": list(c.identities.values()),
        "peermem_invalid_context": c.peermem.count,
        "latest_xid": _xid_entry(c.latest) if c.latest else {},
        "cgroup_oom_kills": [k.fact() for k in cgroup_kills],
        "node_oom_kills": [k.fact() for k in node_kills],
        "lines_scanned": reader.lines_scanned,
    }
    cites: dict[str, list[LineRef]] = {
        "xids": _cite_sample(ev, xids),
        "sxids": _cite_sample(ev, sxids),
        "sxid_fatal": c.fatal_sxids.cites(ev),
        "fallen_off_bus": c.fallen.cites(ev),
        "fallen_off_bus_pci": c.fallen.cites(ev),
        "rm_init_adapter_failed": c.rm_init.cites(ev),
        "rm_init_adapter_errors": c.rm_init.cites(ev),
        "gsp_timeout": c.gsp.cites(ev),
        "hardware_xids": c.hardware.cites(ev),
        "recovery_actions": _cite_sample(ev, c.recovery.records()),
        "driver_load_errors": c.driver_load.cites(ev),
        "gpu_identities": c.identity_lines.cites(ev),
        "peermem_invalid_context": c.peermem.cites(ev),
        "cgroup_oom_kills": [k.cite(ev) for k in cgroup_kills][-MAX_CITES:],
        "node_oom_kills": [k.cite(ev) for k in node_kills][-MAX_CITES:],
    }
    if c.latest:
        cites["latest_xid"] = [ev.cite(c.latest.line, c.latest.text)]
    if c.banner:
        cites["driver_version"] = [ev.cite(c.banner.line, c.banner.text)]
    firsts = {e["first_line"] for e in c.summary.values()}
    cites["xid_codes"] = [ev.cite(r.line, r.text) for r in xids if r.line in firsts][:MAX_CITES]
    cites["xid_summary"] = cites["xid_codes"]
    cites["application_xids_only"] = cites["xids"] if values["application_xids_only"] else []
    return known(SPEC, values, {k: v for k, v in cites.items() if v})


def _xid_entry(rec: KernelRecord) -> dict[str, Any]:
    """One ``kernel.xids`` entry: the decoded line plus NVIDIA's immediate-action bucket."""
    info = catalog.lookup(rec.code)
    return {**xid_fact(rec), "immediate_action": info.immediate if info else ""}


@dataclass
class _OomKill:
    """One OOM kill, from its ``oom-kill:`` line, its ``Killed process`` line, or both."""

    first: KernelRecord
    scope: str
    pid: str
    process: str
    constraint: str
    cgroup: str
    rss_kb: int

    @classmethod
    def of(cls, rec: KernelRecord) -> _OomKill:
        return cls(rec, rec.unit, rec.pid, rec.process, rec.detail, rec.cgroup, rec.rss_kb)

    def joins(self, rec: KernelRecord) -> bool:
        """Does ``rec`` report the same kill (same pid, a few lines later)?"""
        return (
            bool(self.pid) and rec.pid == self.pid and rec.line - self.first.line <= OOM_JOIN_LINES
        )

    def join(self, rec: KernelRecord) -> None:
        self.scope = self.scope or rec.unit
        self.process = self.process or rec.process
        self.constraint = self.constraint or rec.detail
        self.cgroup = self.cgroup or rec.cgroup
        self.rss_kb = self.rss_kb if self.rss_kb >= 0 else rec.rss_kb

    def fact(self) -> dict[str, Any]:
        pod_uid, container_id = pod_of_cgroup(self.cgroup)
        return {
            "pid": int(self.pid) if self.pid.isdigit() else -1,
            "process": self.process,
            "constraint": self.constraint,
            "cgroup": self.cgroup,
            "pod_uid": pod_uid,
            "container_id": container_id,
            "anon_rss_kb": self.rss_kb,
            "line": self.first.line,
            "timestamp": self.first.timestamp,
            "time": self.first.time,
        }

    def cite(self, evidence: Evidence) -> LineRef:
        return evidence.cite(self.first.line, self.first.text)


class _OomKills:
    """Joins OOM-killer records into kills and keeps the latest of each scope."""

    def __init__(self) -> None:
        self._open: _OomKill | None = None
        self._kept: dict[str, deque[_OomKill]] = {
            "cgroup": deque(maxlen=MAX_OOM_KILLS),
            "node": deque(maxlen=MAX_OOM_KILLS),
        }

    def add(self, rec: KernelRecord) -> None:
        if self._open is not None and self._open.joins(rec):
            self._open.join(rec)
            return
        self._close()
        self._open = _OomKill.of(rec)

    def _close(self) -> None:
        kill, self._open = self._open, None
        # A bare "Killed process" line whose first line is not in the log has no scope: it
        # cannot be told apart, so it is left out rather than guessed.
        if kill is not None and kill.scope in self._kept:
            self._kept[kill.scope].append(kill)

    def done(self) -> tuple[list[_OomKill], list[_OomKill]]:
        self._close()
        return list(self._kept["cgroup"]), list(self._kept["node"])


def _cite_sample(evidence: Evidence, records: list[KernelRecord]) -> list[LineRef]:
    """At most MAX_CITES lines: the first of each distinct (code, GPU), then the latest."""
    sample = _Sample(1, MAX_CITES - 1)
    for r in records:
        sample.add((r.code, r.pci), r)
    return sample.cites(evidence)
