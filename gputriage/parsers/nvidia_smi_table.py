"""The short nvidia-smi formats SREs paste: the default table, ``-L`` and ``--query-gpu`` CSV.

Each gives fewer fields than ``-q``, but often all there is in a ticket. The table also shows
``ERR!`` where NVML could not read a value, which is itself a lost-card signal.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable

from gputriage.parsers.gpu_record import GpuRecord, GpuSnapshot
from gputriage.parsers.nvidia_smi_values import (
    clean,
    first_line,
    normalize_pci,
    to_bool,
    to_int,
    to_mib,
    to_mode,
    to_version,
)

_PCI_TEXT = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
_TABLE_HEADER = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>\S+)\s+(?:Driver|KMD) Version:\s*(?P<driver>\S+)"
    r"(?:\s+CUDA (?:UMD )?Version:\s*(?P<cuda>\S+))?"
)
_NAME_CELL = re.compile(
    r"^\s*(?P<index>\d+)\s+(?P<name>.*?)\s*(?P<mode>\bOn|\bOff|WDDM|TCC|MCDM)?\s*$"
)
_BUS_CELL = re.compile(rf"^\s*(?P<pci>{_PCI_TEXT})\s+(?P<disp>\S+)?\s*$")
_MEMORY_CELL = re.compile(r"(?P<used>\d+)\s*MiB\s*/\s*(?P<total>\d+)\s*MiB")
_MIG_CELL = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$")
_PROCESS_ROW = re.compile(
    r"^\|\s+(?P<gpu>\d+)\s+(?:(?P<gi>\S+)\s+(?P<ci>\S+)\s+)?(?P<pid>\d+)\s+"
    r"(?P<type>C\+G|M\+C|C|G|M|\?)\s+(?P<name>.*?)\s+(?P<mem>\d+\s*MiB|N/A)\s*\|\s*$"
)
_ROW2_LABELS = ("Fan", "Temp", "Perf", "Pwr:Usage/Cap")

_LIST_ITEM = re.compile(
    r"GPU (?P<index>\d+): (?P<name>[^\n(]*?) ?\(UUID: (?P<uuid>GPU-[0-9A-Fa-f-]+)\)"
    r"|MIG (?P<profile>\S+)\s+Device\s+(?P<mig>\d+): \(UUID: (?P<mig_uuid>MIG-[^)\s]+)\)"
)


def has_table(text: str) -> bool:
    return "NVIDIA-SMI" in text and bool(_TABLE_HEADER.search(text))


def parse_table(text: str) -> GpuSnapshot:
    """Parse the default ``nvidia-smi`` table (GPU rows, MIG devices, processes)."""
    snapshot = GpuSnapshot(source_format="table")
    header = _TABLE_HEADER.search(text)
    if header:
        snapshot.driver_version = to_version(header.group("driver"))
        snapshot.cuda_version = to_version(header.group("cuda"))
    lines = text.splitlines()
    section = "gpus"
    by_index: dict[int, GpuRecord] = {}
    for i, line in enumerate(lines):
        stripped = line.strip()
        if "MIG devices:" in stripped:
            section = "mig"
        elif "Processes:" in stripped:
            section = "processes"
        if not stripped.startswith("|"):
            continue
        cells = stripped.split("|")
        if section == "gpus" and len(cells) >= 5 and re.search(_PCI_TEXT, cells[2]):
            rec = _gpu_rows(cells, lines[i + 1 : i + 3], len(snapshot.gpus))
            snapshot.gpus.append(rec)
            by_index.setdefault(rec.index, rec)
        elif section == "mig" and len(cells) >= 5:
            _mig_row(cells, by_index)
        elif section == "processes":
            _process_row(stripped, by_index)
    return snapshot


def _gpu_rows(cells: list[str], following: list[str], position: int) -> GpuRecord:
    name = _NAME_CELL.match(cells[1])
    rec = GpuRecord(index=int(name.group("index")) if name else position)
    rec.name = name.group("name").strip() if name else cells[1].strip()
    bus = _BUS_CELL.match(cells[2])
    rec.pci_bus_id = normalize_pci(bus.group("pci") if bus else re.findall(_PCI_TEXT, cells[2])[0])
    ecc = cells[3].strip()
    rec.ecc_volatile_dbe = to_int(ecc)
    rec.ecc_mode = "Enabled" if rec.ecc_volatile_dbe is not None else to_mode(ecc)
    if "ERR!" in cells[1]:
        rec.errors.append("Name: ERR!")
    if "ERR!" in cells[2]:
        rec.errors.append("Bus-Id/Disp.A: ERR!")
    if "ERR!" in ecc:
        rec.errors.append("Volatile Uncorr. ECC: ERR!")
    rows = [r.strip().split("|") for r in following if r.strip().startswith("|")]
    if rows and len(rows[0]) >= 4:
        tokens = rows[0][1].split()
        for pos, token in enumerate(tokens):
            if token == "ERR!":
                rec.errors.append(f"{_ROW2_LABELS[min(pos, len(_ROW2_LABELS) - 1)]}: ERR!")
        memory = _MEMORY_CELL.search(rows[0][2])
        if memory:
            rec.memory_used_mib = int(memory.group("used"))
            rec.memory_total_mib = int(memory.group("total"))
        elif "ERR!" in rows[0][2]:
            rec.errors.append("Memory-Usage: ERR!")
    if len(rows) > 1 and len(rows[1]) >= 4:
        rec.mig_mode = to_mode(rows[1][3])
    return rec


def _mig_row(cells: list[str], by_index: dict[int, GpuRecord]) -> None:
    ids = _MIG_CELL.match(cells[1])
    if not ids:
        return
    gpu, gi, ci, _dev = (int(x) for x in ids.groups())
    memory = _MEMORY_CELL.search(cells[2])
    rec = by_index.get(gpu)
    if rec is None:
        return
    rec.mig_devices.append(
        {
            "gpu_instance": gi,
            "compute_instance": ci,
            "profile": "",
            "memory_total_mib": int(memory.group("total")) if memory else None,
            "memory_used_mib": int(memory.group("used")) if memory else None,
            "uuid": "",
        }
    )


def _process_row(line: str, by_index: dict[int, GpuRecord]) -> None:
    row = _PROCESS_ROW.match(line)
    if not row:
        return
    rec = by_index.get(int(row.group("gpu")))
    if rec is None:
        return
    rec.processes.append(
        {
            "pid": int(row.group("pid")),
            "name": row.group("name").strip(),
            "type": row.group("type"),
            "used_memory_mib": to_mib(row.group("mem")),
            "gpu_instance": to_int(row.group("gi")),
            "compute_instance": to_int(row.group("ci")),
        }
    )


def has_list(text: str) -> bool:
    return "(UUID: GPU-" in text


def parse_list(text: str) -> GpuSnapshot:
    """Parse ``nvidia-smi -L`` (also when a paste lost its newlines).

    A GPU index seen twice (``-L`` and ``nvlink -s`` in one capture) is kept once; MIG lines
    belong to the GPU line before them.
    """
    snapshot = GpuSnapshot(source_format="list")
    current: GpuRecord | None = None
    seen: set[int] = set()
    for m in _LIST_ITEM.finditer(text):
        if m.group("index") is not None:
            index = int(m.group("index"))
            if index in seen:
                current = None
                continue
            seen.add(index)
            current = GpuRecord(index=index, name=m.group("name").strip(), uuid=m.group("uuid"))
            snapshot.gpus.append(current)
        elif current is not None:
            current.mig_devices.append(
                {
                    "gpu_instance": None,
                    "compute_instance": None,
                    "profile": m.group("profile"),
                    "memory_total_mib": None,
                    "memory_used_mib": None,
                    "uuid": m.group("mig_uuid"),
                }
            )
            current.mig_mode = "Enabled"
    return snapshot


# --query-gpu column -> (GpuRecord attribute, converter)
_CSV_FIELDS: dict[str, tuple[str, Callable[[str], object]]] = {
    "index": ("index", to_int),
    "name": ("name", clean),
    "gpu_name": ("name", clean),
    "uuid": ("uuid", clean),
    "gpu_uuid": ("uuid", clean),
    "serial": ("serial", clean),
    "gpu_serial": ("serial", clean),
    "pci.bus_id": ("pci_bus_id", normalize_pci),
    "gpu_bus_id": ("pci_bus_id", normalize_pci),
    "memory.total": ("memory_total_mib", to_mib),
    "memory.used": ("memory_used_mib", to_mib),
    "ecc.mode.current": ("ecc_mode", to_mode),
    "ecc.errors.corrected.volatile.total": ("ecc_volatile_sbe", to_int),
    "ecc.errors.uncorrected.volatile.total": ("ecc_volatile_dbe", to_int),
    "ecc.errors.corrected.aggregate.total": ("ecc_aggregate_sbe", to_int),
    "ecc.errors.uncorrected.aggregate.total": ("ecc_aggregate_dbe", to_int),
    "retired_pages.single_bit_ecc.count": ("retired_pages_sbe", to_int),
    "retired_pages.double_bit.count": ("retired_pages_dbe", to_int),
    "retired_pages.pending": ("retired_pages_pending", to_bool),
    "remapped_rows.correctable": ("remapped_rows_correctable", to_int),
    "remapped_rows.uncorrectable": ("remapped_rows_uncorrectable", to_int),
    "remapped_rows.pending": ("remapped_rows_pending", to_bool),
    "remapped_rows.failure": ("remapped_rows_failure", to_bool),
    "gpu_recovery_action": ("recovery_action", clean),
    "mig.mode.current": ("mig_mode", to_mode),
}


def _csv_columns(line: str) -> list[str]:
    return [re.sub(r"\s*\[.*?\]$", "", c.strip()) for c in line.split(",")]


def has_csv(text: str) -> bool:
    first = first_line(text, limit=20000)
    if "," not in first:
        return False
    columns = set(_csv_columns(first))
    return bool(columns & set(_CSV_FIELDS)) and bool(
        columns & {"name", "uuid", "pci.bus_id", "gpu_name", "gpu_uuid", "index"}
    )


def parse_csv(text: str) -> GpuSnapshot:
    """Parse ``nvidia-smi --query-gpu=... --format=csv`` (with its header line)."""
    snapshot = GpuSnapshot(source_format="csv")
    rows = list(csv.reader(text.strip().splitlines(), skipinitialspace=True))
    columns = _csv_columns(",".join(rows[0])) if rows else []
    for position, row in enumerate(rows[1:]):
        if len(row) != len(columns):
            continue
        values = dict(zip(columns, row, strict=True))
        index = to_int(values.get("index"))
        rec = GpuRecord(index=index if index is not None else position)
        for column, value in values.items():
            target = _CSV_FIELDS.get(column)
            if target and target[0] != "index":
                setattr(rec, target[0], target[1](value))
        rec.name = rec.name or ""
        rec.uuid = rec.uuid or ""
        rec.serial = rec.serial or ""
        snapshot.gpus.append(rec)
        snapshot.driver_version = snapshot.driver_version or to_version(
            values.get("driver_version")
        )
        count = to_int(values.get("count"))
        snapshot.attached_gpus = count if count is not None else snapshot.attached_gpus
    return snapshot
