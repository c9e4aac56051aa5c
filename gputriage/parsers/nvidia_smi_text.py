"""``nvidia-smi -q`` plain text into a :class:`GpuSnapshot`.

The ``-q`` report is an indentation tree of ``Key : value`` lines and section headers, with one
``GPU 00000000:07:00.0`` block per device. Field names changed across driver branches (ECC
``Single Bit``/``Double Bit`` became ``SRAM``/``DRAM`` counters; ``GPU Reset Status`` became
``GPU Recovery Action``); both spellings are read into the same record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputriage.parsers.gpu_record import GpuRecord, GpuSnapshot
from gputriage.parsers.nvidia_smi_values import (
    clean,
    is_error_text,
    normalize_pci,
    recovery_from_reset_status,
    sum_known,
    to_bool,
    to_int,
    to_mib,
    to_mode,
    to_version,
)

_GPU_HEADER = re.compile(
    r"^GPU\s+(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$"
)
_KEY_VALUE = re.compile(r"^(?P<key>\S.*?)\s+:(?:\s(?P<value>.*))?$")
_MAX_FIELD_ERRORS = 20

_CORRECTABLE = ("SRAM Correctable", "DRAM Correctable")
_UNCORRECTABLE = (
    "SRAM Uncorrectable",
    "SRAM Uncorrectable Parity",
    "SRAM Uncorrectable SEC-DED",
    "DRAM Uncorrectable",
)


@dataclass
class _Node:
    """One line of the report: a ``key : value`` field or a section header (value None)."""

    key: str
    value: str | None
    line: int
    indent: int
    children: list[_Node] = field(default_factory=list)

    def child(self, *path: str) -> _Node | None:
        node: _Node | None = self
        for key in path:
            node = next((c for c in node.children if c.key == key), None) if node else None
        return node

    def get(self, *path: str) -> str | None:
        node = self.child(*path)
        return node.value if node is not None else None

    def walk(self) -> list[_Node]:
        out: list[_Node] = []
        stack = list(reversed(self.children))
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(node.children))
        return out


def _tree(text: str) -> _Node:
    """The indentation tree of a ``-q`` report (root has indent -1)."""
    root = _Node("", None, 0, -1)
    stack = [root]
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.expandtabs(4).rstrip()
        content = line.lstrip(" ")
        if not content or content.startswith("====="):
            continue
        indent = len(line) - len(content)
        header = _GPU_HEADER.match(content)
        if header:
            node = _Node("GPU", header.group("pci"), lineno, indent)
        else:
            kv = _KEY_VALUE.match(content)
            node = (
                _Node(kv.group("key"), (kv.group("value") or "").strip(), lineno, indent)
                if kv
                else _Node(content, None, lineno, indent)
            )
        while stack[-1].indent >= indent:
            stack.pop()
        stack[-1].children.append(node)
        stack.append(node)
    return root


def parse_query_text(text: str) -> GpuSnapshot:
    """Parse one ``nvidia-smi -q`` report. Never raises."""
    root = _tree(text)
    snapshot = GpuSnapshot(source_format="text")
    # 610+ deprecates "Driver Version"/"CUDA Version" for "KMD Version"/"CUDA UMD Version".
    snapshot.driver_version = to_version(root.get("KMD Version"), root.get("Driver Version"))
    snapshot.cuda_version = to_version(root.get("CUDA UMD Version"), root.get("CUDA Version"))
    snapshot.attached_gpus = to_int(root.get("Attached GPUs"))
    blocks = [c for c in root.children if c.key == "GPU"]
    snapshot.gpus = [_gpu(i, b) for i, b in enumerate(blocks)]
    return snapshot


def _gpu(index: int, g: _Node) -> GpuRecord:
    rec = GpuRecord(index=index)
    rec.name = clean(g.get("Product Name")) or ""
    rec.uuid = clean(g.get("GPU UUID")) or ""
    rec.serial = clean(g.get("Serial Number")) or ""
    rec.pci_bus_id = normalize_pci(g.value or g.get("PCI", "Bus Id"))
    rec.memory_total_mib = to_mib(g.get("FB Memory Usage", "Total"))
    rec.memory_used_mib = to_mib(g.get("FB Memory Usage", "Used"))
    rec.ecc_mode = to_mode(g.get("ECC Mode", "Current"))
    rec.ecc_volatile_sbe, rec.ecc_volatile_dbe = _ecc(g.child("ECC Errors", "Volatile"))
    rec.ecc_aggregate_sbe, rec.ecc_aggregate_dbe = _ecc(g.child("ECC Errors", "Aggregate"))
    pages = g.child("Retired Pages")
    if pages is not None:
        rec.retired_pages_sbe = to_int(pages.get("Single Bit ECC"))
        rec.retired_pages_dbe = to_int(pages.get("Double Bit ECC"))
        pending = [to_bool(c.value) for c in pages.children if c.key.startswith("Pending")]
        rec.retired_pages_pending = True if True in pending else False if False in pending else None
    rows = g.child("Remapped Rows")
    if rows is not None and rows.children:
        rec.remapped_rows_correctable = to_int(rows.get("Correctable Error"))
        rec.remapped_rows_uncorrectable = to_int(rows.get("Uncorrectable Error"))
        rec.remapped_rows_pending = to_bool(rows.get("Pending"))
        rec.remapped_rows_failure = to_bool(rows.get("Remapping Failure Occurred"))
    rec.recovery_action = clean(g.get("GPU Recovery Action")) or recovery_from_reset_status(
        g.get("GPU Reset Status", "Reset Required"),
        g.get("GPU Reset Status", "Drain and Reset Recommended"),
    )
    rec.mig_mode = to_mode(g.get("MIG Mode", "Current"))
    migs = [c for c in g.children if c.key == "MIG Device"]
    holder = g.child("MIG Devices")
    if holder is not None:
        migs += [c for c in holder.children if c.key == "MIG Device"]
    rec.mig_devices = [_mig(m) for m in migs]
    rec.processes = _processes(g.child("Processes"))
    rec.errors = _field_errors(g)
    return rec


def _ecc(block: _Node | None) -> tuple[int | None, int | None]:
    """(correctable, uncorrectable) totals from either ECC layout."""
    if block is None:
        return None, None
    if block.child("Single Bit") is not None or block.child("Double Bit") is not None:
        return to_int(block.get("Single Bit", "Total")), to_int(block.get("Double Bit", "Total"))
    return (
        sum_known([to_int(block.get(k)) for k in _CORRECTABLE]),
        sum_known([to_int(block.get(k)) for k in _UNCORRECTABLE]),
    )


def _mig(m: _Node) -> dict[str, object]:
    memory = m.child("Shared FB Memory Usage") or m.child("FB Memory Usage")
    return {
        "gpu_instance": to_int(m.get("GPU Instance ID")),
        "compute_instance": to_int(m.get("Compute Instance ID")),
        "profile": "",  # -q does not print the profile name; nvidia-smi -L does
        "memory_total_mib": to_mib(memory.get("Total")) if memory else None,
        "memory_used_mib": to_mib(memory.get("Used")) if memory else None,
        "uuid": clean(m.get("UUID")) or "",
    }


def _processes(block: _Node | None) -> list[dict[str, object]]:
    """Process entries: ``GPU instance ID``/``Compute instance ID`` lines precede each PID."""
    if block is None:
        return []
    out: list[dict[str, object]] = []
    gi: int | None = None
    ci: int | None = None
    for node in block.children:
        if node.key == "GPU instance ID":
            gi = to_int(node.value)
        elif node.key == "Compute instance ID":
            ci = to_int(node.value)
        elif node.key == "Process ID":
            out.append(
                {
                    "pid": to_int(node.value),
                    "name": (node.get("Name") or "").strip(),
                    "type": (node.get("Type") or "").strip(),
                    "used_memory_mib": to_mib(node.get("Used GPU Memory")),
                    "gpu_instance": gi,
                    "compute_instance": ci,
                }
            )
            gi = ci = None
    return out


def _field_errors(g: _Node) -> list[str]:
    errors: list[str] = []
    for node in g.walk():
        if node.value and is_error_text(node.value):
            errors.append(f"{node.key}: {node.value}")
            if len(errors) >= _MAX_FIELD_ERRORS:
                break
    return errors
