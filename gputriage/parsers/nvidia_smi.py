"""Any nvidia-smi output an SRE may have, as one :class:`GpuSnapshot`.

:func:`parse_nvidia_smi` recognises ``-q -x`` XML, ``-q`` text (also inside a capture that
concatenates several commands' outputs), the default table, ``-L`` lists, ``--query-gpu`` CSV
and nvidia-smi's error messages, and never raises. Error messages are looked for in every
input, because a lost card shows up as one ``Unable to determine the device handle for GPU
0000:3B:00.0: GPU is lost`` line in the middle of an otherwise normal table.

Statuses: ``ok``; ``gpu_lost`` / ``unknown_error`` (a device handle could not be obtained:
``lost_pci_ids`` names the cards); ``nvml_mismatch`` (driver/library version mismatch);
``driver_unreachable`` (nvidia-smi could not talk to the kernel driver); ``no_devices``;
``unparsed`` (not recognisable, or XML that is truncated or refused; ``message`` says which).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gputriage.parsers.gpu_record import GpuRecord, GpuSnapshot
from gputriage.parsers.nvidia_smi_table import (
    has_csv,
    has_list,
    has_table,
    parse_csv,
    parse_list,
    parse_table,
)
from gputriage.parsers.nvidia_smi_text import parse_query_text
from gputriage.parsers.nvidia_smi_values import first_line, normalize_pci
from gputriage.parsers.nvidia_smi_xml import parse_xml

_QUERY_BANNER = "NVSMI LOG"
_CAPTURE_RULE = re.compile(r"^#{20,}\s*$", re.MULTILINE)
_HANDLE_TEXT = "Unable to determine the device handle for GPU"
_HANDLE = re.compile(
    r"Unable to determine the device handle for GPU\s*"
    r"(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*:\s*"
    r"(?P<reason>[^\n]*(?:\n [a-z][^\n]*)?)"
)
_NVML_INIT = re.compile(r"Failed to initialize NVML: (?P<reason>[^\n]*)")
_DRIVER_TEXT = "couldn't communicate with the NVIDIA driver"
_NO_DEVICES_TEXT = "No devices were found"
_MISMATCH_WARNING = "Mismatch in versions between nvidia-smi and NVML"
_NVML_UNKNOWN = re.compile(
    r"(?i)nvml[^\n]{0,80}?unknown error|^[^\n]*Unknown Error[^\n]*$", re.MULTILINE
)
_NVML_DRIVER_NOT_LOADED = "nvml error: driver not loaded"

#: When several error messages appear, the most specific one names the status.
_RANK = {
    "gpu_lost": 6,
    "unknown_error": 5,
    "nvml_mismatch": 4,
    "driver_unreachable": 3,
    "no_devices": 2,
}


@dataclass(frozen=True)
class _Problem:
    status: str
    text: str
    pci: str = ""
    rank: int = 0


def parse_nvidia_smi(text: str) -> GpuSnapshot:
    """Parse any nvidia-smi output (or its error text) into a snapshot. Never raises."""
    try:
        return _parse(text)
    except Exception as exc:  # a parser bug must not take triage down; say what happened
        return GpuSnapshot(
            status="unparsed",
            message=f"internal nvidia-smi parser error: {type(exc).__name__}: {exc}",
        )


def _parse(text: str) -> GpuSnapshot:
    if not text or not text.strip():
        return GpuSnapshot(status="unparsed", message="empty output")
    if _looks_binary(text):
        return GpuSnapshot(status="unparsed", message="binary data, not nvidia-smi output")
    problems = _problems(text)
    snapshot = _structured(text)
    if snapshot is None:
        if problems:
            return _from_problems(GpuSnapshot(source_format="error"), problems)
        return GpuSnapshot(
            status="unparsed",
            message=f"not recognisable nvidia-smi output (first line: {first_line(text, 120)!r})",
        )
    if snapshot.source_format in ("xml", "text", "table") and has_list(text):
        _merge_list(snapshot, parse_list(text))
    _settle(snapshot, problems)
    return snapshot


def _looks_binary(text: str) -> bool:
    head = text[:8192]
    if "\x00" in head:
        return True
    controls = sum(1 for ch in head if ord(ch) < 32 and ch not in "\t\n\r\f\x1b")
    return controls / max(1, len(head)) > 0.1 or head.count("\ufffd") / max(1, len(head)) > 0.1


def _structured(text: str) -> GpuSnapshot | None:
    """The richest format found in ``text`` (XML > -q > table > -L > CSV); None if none."""
    if "<nvidia_smi_log" in text:
        return parse_xml(text)
    if _QUERY_BANNER in text:
        return parse_query_text(_last_query_block(text))
    if has_table(text):
        return parse_table(text)
    if has_list(text):
        return parse_list(text)
    if has_csv(text):
        return parse_csv(text)
    return None


def _last_query_block(text: str) -> str:
    """The newest ``-q`` report: from the last banner to the next capture rule (``####``)."""
    start = text.rfind(_QUERY_BANNER)
    start = text.rfind("\n", 0, start) + 1
    rule = _CAPTURE_RULE.search(text, start)
    return text[start : rule.start() if rule else len(text)]


def _merge_list(snapshot: GpuSnapshot, listing: GpuSnapshot) -> None:
    """Fill what ``-L`` knows and the richer format does not: MIG profiles and UUIDs."""
    by_index = {g.index: g for g in listing.gpus}
    for gpu in snapshot.gpus:
        listed = by_index.get(gpu.index)
        if listed is None:
            continue
        gpu.uuid = gpu.uuid or listed.uuid
        if len(listed.mig_devices) == len(gpu.mig_devices):
            for mine, theirs in zip(gpu.mig_devices, listed.mig_devices, strict=True):
                mine["profile"] = mine.get("profile") or theirs["profile"]
                mine["uuid"] = mine.get("uuid") or theirs["uuid"]


def _problems(text: str) -> list[_Problem]:
    found: list[_Problem] = []
    if _HANDLE_TEXT in text:
        for m in _HANDLE.finditer(text):
            reason = " ".join(m.group("reason").split())
            status = "gpu_lost" if "gpu is lost" in reason.lower() else "unknown_error"
            found.append(
                _Problem(
                    status,
                    " ".join(m.group(0).split()),
                    normalize_pci(m.group("pci")),
                    _RANK[status],
                )
            )
    if "Failed to initialize NVML" in text:
        for m in _NVML_INIT.finditer(text):
            reason = m.group("reason").strip()
            status = "nvml_mismatch" if "version mismatch" in reason.lower() else "unknown_error"
            # Ranked just below the same status from a device-handle error (which names a GPU).
            found.append(_Problem(status, m.group(0).strip(), "", _RANK[status] - 1))
    if _MISMATCH_WARNING in text:
        found.append(
            _Problem(
                "nvml_mismatch",
                _line_at(text, text.find(_MISMATCH_WARNING)),
                "",
                _RANK["nvml_mismatch"] - 2,
            )
        )
    if _DRIVER_TEXT in text:
        found.append(
            _Problem(
                "driver_unreachable",
                _line_at(text, text.find(_DRIVER_TEXT)),
                "",
                _RANK["driver_unreachable"],
            )
        )
    lowered = text.lower()
    if _NVML_DRIVER_NOT_LOADED in lowered:
        at = lowered.find(_NVML_DRIVER_NOT_LOADED)
        found.append(
            _Problem("driver_unreachable", _line_at(text, at), "", _RANK["driver_unreachable"])
        )
    if _NO_DEVICES_TEXT in text:
        found.append(
            _Problem(
                "no_devices", _line_at(text, text.find(_NO_DEVICES_TEXT)), "", _RANK["no_devices"]
            )
        )
    if not found and "unknown error" in lowered:
        unknown = _NVML_UNKNOWN.search(text)
        if unknown:
            found.append(_Problem("unknown_error", _line_at(text, unknown.start()), "", 1))
    return found


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start : end if end >= 0 else len(text)].strip()


def _settle(snapshot: GpuSnapshot, problems: list[_Problem]) -> None:
    """Decide the final status from what parsed and which error messages were seen."""
    snapshot.lost_pci_ids = list(dict.fromkeys(p.pci for p in problems if p.pci))
    described = _described(snapshot.gpus)
    if not described and snapshot.status == "ok":
        if problems:
            _from_problems(snapshot, problems)
        elif snapshot.attached_gpus == 0:
            snapshot.status = "no_devices"
            snapshot.message = "nvidia-smi reports 0 attached GPUs"
        else:
            snapshot.status = "unparsed"
            snapshot.message = f"the {snapshot.source_format} output describes no GPU"
        return
    notes: list[str] = []
    handle_problems = [p for p in problems if p.pci]
    if handle_problems and snapshot.status == "ok":
        snapshot.status = max(handle_problems, key=lambda p: p.rank).status
        notes.extend(p.text for p in handle_problems)
    if snapshot.attached_gpus is not None and snapshot.attached_gpus > described:
        notes.append(
            f"the output describes {described} of {snapshot.attached_gpus} "
            "attached GPUs (truncated, or GPUs missing)"
        )
    if any(p.text.startswith(_MISMATCH_WARNING) for p in problems):
        notes.append(_MISMATCH_WARNING)
    snapshot.message = "; ".join(m for m in [snapshot.message, *notes] if m)


def _from_problems(snapshot: GpuSnapshot, problems: list[_Problem]) -> GpuSnapshot:
    """Status and message from the error lines alone (nothing else was described)."""
    snapshot.status = max(problems, key=lambda p: p.rank).status
    snapshot.lost_pci_ids = list(dict.fromkeys(p.pci for p in problems if p.pci))
    texts = list(dict.fromkeys(p.text for p in sorted(problems, key=lambda p: -p.rank)))
    snapshot.message = "; ".join(texts[:5])
    return snapshot


def _described(gpus: list[GpuRecord]) -> int:
    return len({g.pci_bus_id or g.uuid or str(g.index) for g in gpus})
