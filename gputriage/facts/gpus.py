"""Fact group ``gpus``: what nvidia-smi (or NVML on the node) says about the node's GPUs.

Built from ``Key.NVIDIA_SMI``: any nvidia-smi output or error text, parsed by
:func:`gputriage.parsers.nvidia_smi.parse_nvidia_smi`, or, when the local NVML adapter
collected it (``evidence.format == "nvml"``), a ``GpuSnapshot.to_dict()`` in ``data``.

Per-GPU values are CEL-safe: a number nvidia-smi printed as ``N/A`` is ``-1``, an unknown
string is ``""`` and an unknown flag is ``false``, so ``g.remapped_rows_uncorrectable > 0``
never hits a null. The derived ``any_*`` flags are what playbooks usually test.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    unknown,
    unknown_from,
)
from gputriage.parsers.gpu_record import GpuRecord, GpuSnapshot
from gputriage.parsers.nvidia_smi import parse_nvidia_smi
from gputriage.parsers.nvidia_smi_values import normalize_pci

MAX_CITES = 50

_GPU_DOC = (
    "{index, uuid, serial (board serial, for an RMA), pci (0000:3B:00.0), pci_slot "
    "(0000:3B:00, the form Xid lines use), name, "
    "memory_total_mib, memory_used_mib, ecc_mode, ecc_volatile_sbe, ecc_volatile_dbe, "
    "ecc_aggregate_sbe, ecc_aggregate_dbe, retired_pages_sbe, retired_pages_dbe, "
    "retired_pages_pending, remapped_rows_correctable, remapped_rows_uncorrectable, "
    "remapped_rows_pending, remapped_rows_failure, recovery_action, reset_required, mig_mode, "
    "mig_enabled, mig_devices [{gpu_instance, compute_instance, profile, memory_total_mib, "
    "memory_used_mib, uuid}], processes [{pid, name, type, used_memory_mib, gpu_instance, "
    'compute_instance}], errors ["field: Unknown Error"]}; -1 / "" / false when not reported'
)

SPEC = GroupSpec(
    name="gpus",
    doc="The node's GPUs as nvidia-smi (or NVML) reports them: per-GPU memory, ECC, retired "
    "pages, row remapping, recovery action, MIG and processes, or the error nvidia-smi "
    "printed instead (GPU lost, driver unreachable, NVML version mismatch, no devices).",
    sources=(Key.NVIDIA_SMI,),
    fields={
        "status": FieldSpec(
            "string",
            "",
            "ok | gpu_lost | unknown_error | nvml_mismatch | driver_unreachable | no_devices | "
            "unparsed. gpu_lost/unknown_error: nvidia-smi could not get a device handle "
            "(see lost_pci_ids).",
        ),
        "message": FieldSpec(
            "string",
            "",
            "nvidia-smi's own error text, or a note such as \"the output "
            'describes 1 of 8 attached GPUs".',
        ),
        "source_format": FieldSpec(
            "string", "", "xml | text (-q) | table | list (-L) | csv | error | nvml."
        ),
        "driver_version": FieldSpec("string", "", 'Driver version ("" when not printed).'),
        "cuda_version": FieldSpec("string", "", "CUDA version the driver supports."),
        "count": FieldSpec("int", 0, "GPUs described in the output."),
        "attached": FieldSpec("int", -1, '"Attached GPUs" as printed (-1 when not printed).'),
        "missing_gpus": FieldSpec(
            "int",
            0,
            "attached - count when both are known: GPUs the driver "
            "counts but the output does not describe.",
        ),
        "gpus": FieldSpec("list<map>", [], "One map per GPU: " + _GPU_DOC + "."),
        "pci_ids": FieldSpec(
            "list<string>", [], "PCI bus ids of the described GPUs (0000:3B:00.0)."
        ),
        "pci_slots": FieldSpec(
            "list<string>",
            [],
            "The same without the function digit (0000:3B:00), to compare with Xid lines.",
        ),
        "uuids": FieldSpec("list<string>", [], "GPU UUIDs."),
        "models": FieldSpec("list<string>", [], "Distinct product names."),
        "lost_pci_ids": FieldSpec(
            "list<string>",
            [],
            'GPUs nvidia-smi could not get a handle for ("Unable to '
            'determine the device handle for GPU 0000:3B:00.0").',
        ),
        "gpu_lost": FieldSpec(
            "bool", False, "status is gpu_lost, or some GPU has no device handle."
        ),
        "any_remap_pending": FieldSpec(
            "bool", False, "A GPU has row remapping pending (needs a GPU reset to take effect)."
        ),
        "any_remap_failure": FieldSpec(
            "bool", False, "A GPU ran out of spare rows (remapping failure): RMA candidate."
        ),
        "any_dbe": FieldSpec(
            "bool",
            False,
            "A GPU reports uncorrectable (double-bit) ECC errors, volatile or aggregate.",
        ),
        "any_retired_pending": FieldSpec(
            "bool", False, "A GPU has retired pages pending (pre-Ampere)."
        ),
        "any_reset_required": FieldSpec(
            "bool",
            False,
            "A GPU needs a reset or more: recovery action other "
            "than None, or row remapping pending.",
        ),
        "recovery_actions": FieldSpec(
            "list<string>",
            [],
            "Distinct recovery actions other than None (Reset, "
            "Reboot, Drain P2P, Drain and Reset...).",
        ),
        "any_field_errors": FieldSpec(
            "bool", False, "Some GPU answered a query with Unknown Error or ERR!."
        ),
        "mig_enabled": FieldSpec("bool", False, "Some GPU has MIG mode enabled."),
        "mig_device_count": FieldSpec("int", 0, "MIG devices across all GPUs."),
        "mig_profiles": FieldSpec(
            "list<string>", [], "Distinct MIG profiles (1g.10gb...), when -L was included."
        ),
        "max_memory_mib": FieldSpec("int", -1, "Largest GPU memory size in MiB."),
        "process_count": FieldSpec("int", 0, "Processes listed on all GPUs."),
    },
)

_HEADER = re.compile(
    r"^\s*(?:GPU\s+|<gpu id=\")(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
    r"|^\|\s+\d+\s.*?\|\s*(?P<row>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
    r"|GPU (?P<index>\d+): [^\n]*\(UUID: GPU-"
)
_BLOCK_SPAN = 800
# The NVML adapter's JSON (indent 2): GPU objects sit at indent 4 inside "gpus": [...].
_JSON_OPEN = re.compile(r"^ {4}\{\s*$")
_JSON_CLOSE = re.compile(r"^ {4}\},?\s*$")
_JSON_PCI = re.compile(r'^ {6}"pci_bus_id":\s*"([^"]*)"')
_JSON_INDEX = re.compile(r'^ {6}"index":\s*(\d+)')

# Lines inside a GPU's block that support a derived flag (-q text, XML and NVML JSON).
_PATTERNS = {
    "remap_pending": r"^\s*Pending\s*:\s*Yes|<remapped_row_pending>\s*Yes"
    r'|"remapped_rows_pending": true',
    "remap_failure": r"Remapping Failure Occurred\s*:\s*Yes|<remapped_row_failure>\s*Yes"
    r'|"remapped_rows_failure": true',
    "dbe": r"(?i)(?:uncorrectable|double bit)[^:<]*(?::\s*|>)\s*[1-9]|<double_bit>|ECC Errors|"
    r'<ecc_errors>|Uncorr\. ECC|"ecc_(?:volatile|aggregate)_dbe": [1-9]',
    "retired_pending": r"Pending Page (?:Blacklist|Retirement)\s*:\s*Yes"
    r'|<pending_(?:retirement|blacklist)>\s*Yes|"retired_pages_pending": true',
    "reset": r"GPU Recovery Action|<gpu_recovery_action>|Reset Required\s*:\s*Yes"
    r"|Drain and Reset Recommended\s*:\s*Yes|<reset_required>\s*Yes"
    r"|<drain_and_reset_recommended>\s*Yes|^\s*Pending\s*:\s*Yes"
    r'|<remapped_row_pending>\s*Yes|"recovery_action": "(?!None")[^"]+"'
    r'|"remapped_rows_pending": true',
    "mig": r'MIG Mode|<mig_mode>|MIG \S+\s+Device|"mig_mode": "Enabled"',
    "errors": r"Unknown Error|ERR!",
}


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    ev = evidence.get_or_missing(Key.NVIDIA_SMI)
    if not ev.ok:
        return unknown_from(SPEC, ev)
    if ev.format == "nvml":
        try:
            snapshot = GpuSnapshot.from_dict(ev.data if isinstance(ev.data, dict) else {})
        except (TypeError, ValueError) as exc:
            return unknown(SPEC, f"{ev.source}: NVML snapshot is malformed: {exc}")
    else:
        snapshot = parse_nvidia_smi(ev.raw)
    if snapshot.status == "unparsed" and not snapshot.gpus:
        return unknown(
            SPEC, f"{ev.source}: nvidia-smi output could not be read: {snapshot.message}"
        )
    return _facts(snapshot, ev)


def _facts(s: GpuSnapshot, ev: Evidence) -> FactGroup:
    gpus = [_gpu(g) for g in s.gpus]
    attached = s.attached_gpus if s.attached_gpus is not None else -1
    profiles = sorted({m["profile"] for g in gpus for m in g["mig_devices"] if m["profile"]})
    actions = sorted(
        {g["recovery_action"] for g in gpus if g["recovery_action"] not in ("", "None")}
    )
    memory = [g["memory_total_mib"] for g in gpus if g["memory_total_mib"] >= 0]
    values: dict[str, Any] = {
        "status": s.status,
        "message": s.message,
        "source_format": s.source_format,
        "driver_version": s.driver_version or "",
        "cuda_version": s.cuda_version or "",
        "count": len(gpus),
        "attached": attached,
        "missing_gpus": max(0, attached - len(gpus)) if attached >= 0 else 0,
        "gpus": gpus,
        "pci_ids": [g["pci"] for g in gpus if g["pci"]],
        "pci_slots": [g["pci_slot"] for g in gpus if g["pci_slot"]],
        "uuids": [g["uuid"] for g in gpus if g["uuid"]],
        "models": list(dict.fromkeys(g["name"] for g in gpus if g["name"])),
        "lost_pci_ids": list(s.lost_pci_ids),
        "gpu_lost": s.status == "gpu_lost" or bool(s.lost_pci_ids),
        "any_remap_pending": any(g["remapped_rows_pending"] for g in gpus),
        "any_remap_failure": any(g["remapped_rows_failure"] for g in gpus),
        "any_dbe": any(g["ecc_volatile_dbe"] > 0 or g["ecc_aggregate_dbe"] > 0 for g in gpus),
        "any_retired_pending": any(g["retired_pages_pending"] for g in gpus),
        "any_reset_required": any(g["reset_required"] for g in gpus),
        "recovery_actions": actions,
        "any_field_errors": any(g["errors"] for g in gpus),
        "mig_enabled": any(g["mig_enabled"] for g in gpus),
        "mig_device_count": sum(len(g["mig_devices"]) for g in gpus),
        "mig_profiles": profiles,
        "max_memory_mib": max(memory) if memory else -1,
        "process_count": sum(len(g["processes"]) for g in gpus),
    }
    return known(SPEC, values, _cites(s, gpus, ev))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _gpu(g: GpuRecord) -> dict[str, Any]:
    action = g.recovery_action or ""
    pending = bool(g.remapped_rows_pending)
    return {
        "index": g.index,
        "uuid": g.uuid,
        "serial": g.serial,
        "pci": g.pci_bus_id,
        "pci_slot": g.pci_bus_id.rsplit(".", 1)[0] if "." in g.pci_bus_id else g.pci_bus_id,
        "name": g.name,
        "memory_total_mib": _int(g.memory_total_mib),
        "memory_used_mib": _int(g.memory_used_mib),
        "ecc_mode": g.ecc_mode or "",
        "ecc_volatile_sbe": _int(g.ecc_volatile_sbe),
        "ecc_volatile_dbe": _int(g.ecc_volatile_dbe),
        "ecc_aggregate_sbe": _int(g.ecc_aggregate_sbe),
        "ecc_aggregate_dbe": _int(g.ecc_aggregate_dbe),
        "retired_pages_sbe": _int(g.retired_pages_sbe),
        "retired_pages_dbe": _int(g.retired_pages_dbe),
        "retired_pages_pending": bool(g.retired_pages_pending),
        "remapped_rows_correctable": _int(g.remapped_rows_correctable),
        "remapped_rows_uncorrectable": _int(g.remapped_rows_uncorrectable),
        "remapped_rows_pending": pending,
        "remapped_rows_failure": bool(g.remapped_rows_failure),
        "recovery_action": action,
        "reset_required": pending or action not in ("", "None"),
        "mig_mode": g.mig_mode or "",
        "mig_enabled": g.mig_mode == "Enabled",
        "mig_devices": [
            {
                "gpu_instance": _int(m.get("gpu_instance")),
                "compute_instance": _int(m.get("compute_instance")),
                "profile": str(m.get("profile") or ""),
                "memory_total_mib": _int(m.get("memory_total_mib")),
                "memory_used_mib": _int(m.get("memory_used_mib")),
                "uuid": str(m.get("uuid") or ""),
            }
            for m in g.mig_devices
            if isinstance(m, dict)
        ],
        "processes": [
            {
                "pid": _int(p.get("pid")),
                "name": str(p.get("name") or ""),
                "type": str(p.get("type") or ""),
                "used_memory_mib": _int(p.get("used_memory_mib")),
                "gpu_instance": _int(p.get("gpu_instance")),
                "compute_instance": _int(p.get("compute_instance")),
            }
            for p in g.processes
            if isinstance(p, dict)
        ],
        "errors": [str(e) for e in g.errors],
    }


class _Blocks:
    """Where each GPU's block sits in the raw output, to cite the lines behind a flag.

    For nvidia-smi text a block runs from its header (``GPU 00000000:3B:00.0``, ``<gpu id=``,
    a table row, a ``-L`` line) to the next header; for the NVML adapter's JSON it is the GPU's
    ``{ ... }`` object, cited at its ``pci_bus_id`` line.
    """

    def __init__(self, ev: Evidence, s: GpuSnapshot) -> None:
        self.ev = ev
        self.lines = ev.lines()
        found = self._json_spans() if ev.format == "nvml" else self._text_spans()
        # index -> (header line, first line searched, line after the last searched)
        self.spans = {
            g.index: found.get(normalize_pci(g.pci_bus_id)) or found.get(f"#{g.index}") or (0, 0, 0)
            for g in s.gpus
        }

    def _text_spans(self) -> dict[str, tuple[int, int, int]]:
        heads: list[tuple[str, int]] = []
        for n, text in enumerate(self.lines, 1):
            m = _HEADER.search(text)
            if m:
                key = m["pci"] or m["row"]
                heads.append((normalize_pci(key) if key else f"#{m['index']}", n))
        spans: dict[str, tuple[int, int, int]] = {}
        for i, (key, n) in enumerate(heads):
            end = heads[i + 1][1] if i + 1 < len(heads) else len(self.lines) + 1
            spans[key] = (n, n, min(end, n + _BLOCK_SPAN))  # a later block wins: newest
        return spans

    def _json_spans(self) -> dict[str, tuple[int, int, int]]:
        spans: dict[str, tuple[int, int, int]] = {}
        start = 0
        keys: list[tuple[str, int]] = []  # ("0000:3B:00.0" or "#0", line)
        for n, text in enumerate(self.lines, 1):
            if _JSON_OPEN.match(text):
                start, keys = n, []
            elif not start:
                continue
            elif m := _JSON_PCI.search(text):
                keys.append((normalize_pci(m[1]), n))
            elif m := _JSON_INDEX.match(text):
                keys.append((f"#{m[1]}", n))
            elif _JSON_CLOSE.match(text):
                header = next((line for key, line in keys if not key.startswith("#")), start)
                for key, _ in keys:
                    spans[key] = (header, start, n + 1)
                start = 0
        return spans

    def cite(self, line: int) -> LineRef:
        return self.ev.cite(line, self.lines[line - 1].strip())

    def first(self, needle: str, fold: bool = False) -> list[LineRef]:
        """The first line containing ``needle`` (case-insensitively with ``fold``)."""
        if fold:
            needle = needle.lower()
        for n, text in enumerate(self.lines, 1):
            if needle and needle in (text.lower() if fold else text):
                return [self.cite(n)]
        return []

    def header(self, index: int) -> list[LineRef]:
        line = self.spans.get(index, (0, 0, 0))[0]
        return [self.cite(line)] if line else []

    def find(self, index: int, pattern: str) -> list[LineRef]:
        _, start, end = self.spans.get(index, (0, 0, 0))
        rx = re.compile(pattern, re.MULTILINE)
        hits = [n for n in range(start, end) if start and rx.search(self.lines[n - 1])]
        return [self.cite(n) for n in hits[:5]]


def _cites(s: GpuSnapshot, gpus: list[dict[str, Any]], ev: Evidence) -> dict[str, list[LineRef]]:
    blocks = _Blocks(ev, s)
    cites: dict[str, list[LineRef]] = {}

    def add(field: str, refs: list[LineRef]) -> None:
        if refs:
            bucket = cites.setdefault(field, [])
            bucket.extend(r for r in refs if r not in bucket)
            del bucket[MAX_CITES:]

    flags = {
        "any_remap_pending": ("remapped_rows_pending", "remap_pending"),
        "any_remap_failure": ("remapped_rows_failure", "remap_failure"),
        "any_retired_pending": ("retired_pages_pending", "retired_pending"),
        "any_reset_required": ("reset_required", "reset"),
        "mig_enabled": ("mig_enabled", "mig"),
        "any_field_errors": ("errors", "errors"),
    }
    for g in gpus:
        add("gpus", blocks.header(g["index"]))
        for field, (key, pattern) in flags.items():
            if g[key]:
                add(field, blocks.header(g["index"]) + blocks.find(g["index"], _PATTERNS[pattern]))
        if g["ecc_volatile_dbe"] > 0 or g["ecc_aggregate_dbe"] > 0:
            add("any_dbe", blocks.header(g["index"]) + blocks.find(g["index"], _PATTERNS["dbe"]))
    if any(g["recovery_action"] not in ("", "None") for g in gpus):
        add("recovery_actions", cites.get("any_reset_required", []))
    if any(m["profile"] for g in gpus for m in g["mig_devices"]):
        add("mig_profiles", cites.get("mig_enabled", []))
    if s.status != "ok" or s.message:
        refs = [r for text in _message_parts(s) for r in blocks.first(text)]
        add("status", refs)
        add("message", refs)
    # Error lines print the id in any case and with or without the 0000: domain.
    add("lost_pci_ids", [r for pci in s.lost_pci_ids for r in blocks.first(pci[5:], fold=True)])
    add("gpu_lost", cites.get("lost_pci_ids", []) or cites.get("status", []))
    if s.driver_version:
        add(
            "driver_version",
            _line_with(
                blocks.lines,
                ev,
                ("Driver Version", "driver_version", "KMD Version"),
                s.driver_version,
            ),
        )
    add("attached", _line_with(blocks.lines, ev, ("Attached GPUs", "attached_gpus"), ""))
    add("missing_gpus", cites.get("attached", []) if _has_missing(s) else [])
    return {k: v for k, v in cites.items() if v}


def _has_missing(s: GpuSnapshot) -> bool:
    return s.attached_gpus is not None and s.attached_gpus > len(s.gpus)


def _line_with(
    lines: list[str], ev: Evidence, labels: tuple[str, ...], value: str
) -> list[LineRef]:
    """The last line holding one of ``labels`` and ``value`` (a capture's newest block)."""
    found = [
        n
        for n, text in enumerate(lines, 1)
        if value in text and any(label in text for label in labels)
    ]
    return [ev.cite(found[-1], lines[found[-1] - 1].strip())] if found else []


def _message_parts(s: GpuSnapshot) -> list[str]:
    """Searchable pieces of the status message (each error line nvidia-smi printed)."""
    return [part.strip()[:60] for part in s.message.split(";") if part.strip()][:5]
