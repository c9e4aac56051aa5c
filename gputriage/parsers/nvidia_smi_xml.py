"""``nvidia-smi -q -x`` (schemas nvsmi_device_v10 to v13) into a :class:`GpuSnapshot`.

Parsing is incremental so a truncated dump still yields every ``<gpu>`` that was complete
(status ``unparsed`` says the document itself was not). Entity declarations are refused
outright: nvidia-smi never writes them, and expanding them is how XML bombs work. The DOCTYPE
line is skipped rather than processed, so no DTD is ever looked at.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import cast

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

_ROOT = "<nvidia_smi_log"
_ROOT_END = "</nvidia_smi_log>"
_CHUNK = 1 << 16
_MAX_FIELD_ERRORS = 20

# Uncorrectable ECC counters in the Ampere-and-later layout (summed into the DBE figure).
_UNCORRECTABLE = (
    "sram_uncorrectable",
    "sram_uncorrectable_parity",
    "sram_uncorrectable_secded",
    "dram_uncorrectable",
)
_CORRECTABLE = ("sram_correctable", "dram_correctable")


def parse_xml(text: str) -> GpuSnapshot:
    """Parse ``nvidia-smi -q -x`` output. Never raises."""
    if "<!ENTITY" in text:
        return GpuSnapshot(
            status="unparsed",
            source_format="xml",
            message="refused: the XML declares entities (<!ENTITY ...>); "
            "nvidia-smi never writes them",
        )
    start = text.find(_ROOT)
    if start < 0:
        return GpuSnapshot(
            status="unparsed", source_format="xml", message="no <nvidia_smi_log> element in the XML"
        )
    end = text.find(_ROOT_END, start)
    body = text[start : end + len(_ROOT_END)] if end >= 0 else text[start:]
    root, gpus, error = _read(body)
    snapshot = GpuSnapshot(source_format="xml")
    if root is not None:
        snapshot.driver_version = to_version(root.findtext("driver_version"))
        snapshot.cuda_version = to_version(root.findtext("cuda_version"))
        snapshot.attached_gpus = to_int(root.findtext("attached_gpus"))
    snapshot.gpus = [_gpu(i, g) for i, g in enumerate(gpus)]
    if error:
        snapshot.status = "unparsed"
        snapshot.message = (
            f"nvidia-smi XML is truncated or malformed ({error}); "
            f"{len(gpus)} complete <gpu> element(s) read"
        )
    return snapshot


def _read(body: str) -> tuple[ET.Element | None, list[ET.Element], str]:
    """Feed the document in chunks; keep the root, the completed top-level <gpu>s, the error."""
    reader = _Reader()
    try:
        for i in range(0, len(body), _CHUNK):
            reader.parser.feed(body[i : i + _CHUNK])
            reader.drain()
        reader.parser.close()
        reader.drain()
    except ET.ParseError as exc:
        reader.drain()
        reader.error = str(exc)
    root = reader.root
    if root is not None and root.tag != "nvidia_smi_log":
        reader.error = reader.error or f"root element is <{root.tag}>, not <nvidia_smi_log>"
    return root, reader.gpus, reader.error


class _Reader:
    """Pull-parser state: events are drained after every chunk so none is lost to an error."""

    def __init__(self) -> None:
        self.parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
        self.root: ET.Element | None = None
        self.gpus: list[ET.Element] = []
        self.depth = 0
        self.error = ""

    def drain(self) -> None:
        for item in self.parser.read_events():
            event, elem = cast(tuple[str, object], item)
            if not isinstance(elem, ET.Element):
                continue
            if event == "start":
                if self.root is None:
                    self.root = elem
                self.depth += 1
            else:
                self.depth -= 1
                if self.depth == 1 and elem.tag == "gpu":
                    self.gpus.append(elem)


def _gpu(index: int, g: ET.Element) -> GpuRecord:
    rec = GpuRecord(index=index)
    rec.name = clean(g.findtext("product_name")) or ""
    rec.uuid = clean(g.findtext("uuid")) or ""
    rec.serial = clean(g.findtext("serial")) or ""
    rec.board_part_number = clean(g.findtext("board_part_number")) or ""
    rec.pci_bus_id = normalize_pci(g.get("id") or g.findtext("pci/pci_bus_id"))
    rec.memory_total_mib = to_mib(g.findtext("fb_memory_usage/total"))
    rec.memory_used_mib = to_mib(g.findtext("fb_memory_usage/used"))
    rec.ecc_mode = to_mode(g.findtext("ecc_mode/current_ecc"))
    rec.ecc_volatile_sbe, rec.ecc_volatile_dbe = _ecc(g.find("ecc_errors/volatile"))
    rec.ecc_aggregate_sbe, rec.ecc_aggregate_dbe = _ecc(g.find("ecc_errors/aggregate"))
    pages = g.find("retired_pages")
    if pages is not None:
        rec.retired_pages_sbe = to_int(
            pages.findtext("multiple_single_bit_retirement/retired_count")
        )
        rec.retired_pages_dbe = to_int(pages.findtext("double_bit_retirement/retired_count"))
        pending = [to_bool(pages.findtext(t)) for t in ("pending_retirement", "pending_blacklist")]
        rec.retired_pages_pending = True if True in pending else False if False in pending else None
    rows = g.find("remapped_rows")
    if rows is not None and len(rows):
        rec.remapped_rows_correctable = to_int(rows.findtext("remapped_row_corr"))
        rec.remapped_rows_uncorrectable = to_int(rows.findtext("remapped_row_unc"))
        rec.remapped_rows_pending = to_bool(rows.findtext("remapped_row_pending"))
        rec.remapped_rows_failure = to_bool(rows.findtext("remapped_row_failure"))
    rec.recovery_action = clean(g.findtext("gpu_recovery_action")) or recovery_from_reset_status(
        g.findtext("gpu_reset_status/reset_required"),
        g.findtext("gpu_reset_status/drain_and_reset_recommended"),
    )
    rec.mig_mode = to_mode(g.findtext("mig_mode/current_mig"))
    rec.mig_devices = [_mig(m) for m in g.findall("mig_devices/mig_device")]
    rec.processes = [_process(p) for p in g.findall("processes/process_info")]
    rec.errors = _field_errors(g)
    return rec


def _ecc(block: ET.Element | None) -> tuple[int | None, int | None]:
    """(correctable, uncorrectable) totals from either ECC layout (pre-Ampere or SRAM/DRAM)."""
    if block is None:
        return None, None
    if block.find("single_bit") is not None or block.find("double_bit") is not None:
        return (
            to_int(block.findtext("single_bit/total")),
            to_int(block.findtext("double_bit/total")),
        )
    sbe = sum_known([to_int(block.findtext(t)) for t in _CORRECTABLE])
    dbe = sum_known([to_int(block.findtext(t)) for t in _UNCORRECTABLE])
    return sbe, dbe


def _mig(m: ET.Element) -> dict[str, object]:
    return {
        "gpu_instance": to_int(m.findtext("gpu_instance_id")),
        "compute_instance": to_int(m.findtext("compute_instance_id")),
        "profile": "",  # nvidia-smi -q -x does not print the profile name; -L does
        "memory_total_mib": to_mib(m.findtext("fb_memory_usage/total")),
        "memory_used_mib": to_mib(m.findtext("fb_memory_usage/used")),
        "uuid": clean(m.findtext("uuid")) or "",
    }


def _process(p: ET.Element) -> dict[str, object]:
    return {
        "pid": to_int(p.findtext("pid")),
        "name": (p.findtext("process_name") or "").strip(),
        "type": (p.findtext("type") or "").strip(),
        "used_memory_mib": to_mib(p.findtext("used_memory")),
        "gpu_instance": to_int(p.findtext("gpu_instance_id")),
        "compute_instance": to_int(p.findtext("compute_instance_id")),
    }


def _field_errors(g: ET.Element) -> list[str]:
    errors: list[str] = []
    for elem in g.iter():
        if elem.text and is_error_text(elem.text):
            errors.append(f"{elem.tag}: {elem.text.strip()}")
            if len(errors) >= _MAX_FIELD_ERRORS:
                break
    return errors
