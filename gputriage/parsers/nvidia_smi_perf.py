"""Performance-related nvidia-smi fields: PCIe link, clock event (throttle) reasons, fabric
state, utilisation (``nvidia-smi -q -x`` and ``-q`` text), ``nvidia-smi topo -m`` and
``nvidia-smi nvlink -s``. Pure text in, plain dicts out; nothing here raises on bad input.

Each GPU dict: ``index, uuid, pci, line`` (1-based line of the GPU's block), ``pcie_gen_max,
pcie_gen_current, pcie_width_max, pcie_width_current`` (-1 unknown), ``reasons`` (active clock
event reasons by NVML name: ``hw_slowdown``, ``sw_power_cap``...), ``util_gpu`` (-1 unknown),
``pstate``, ``fabric_state``, ``fabric_status``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_INT = re.compile(r"-?\d+")

#: XML tag suffixes (after clocks_event_reason_ / clocks_throttle_reason_) and -q labels.
REASON_TAGS = {
    "gpu_idle": "gpu_idle",
    "applications_clocks_setting": "applications_clocks_setting",
    "sw_power_cap": "sw_power_cap",
    "hw_slowdown": "hw_slowdown",
    "hw_thermal_slowdown": "hw_thermal_slowdown",
    "hw_power_brake_slowdown": "hw_power_brake_slowdown",
    "sync_boost": "sync_boost",
    "sw_thermal_slowdown": "sw_thermal_slowdown",
    "display_clocks_setting": "display_clocks_setting",
}
REASON_LABELS = {
    "Idle": "gpu_idle",
    "Applications Clocks Setting": "applications_clocks_setting",
    "SW Power Cap": "sw_power_cap",
    "HW Slowdown": "hw_slowdown",
    "HW Thermal Slowdown": "hw_thermal_slowdown",
    "HW Power Brake Slowdown": "hw_power_brake_slowdown",
    "Sync Boost": "sync_boost",
    "SW Thermal Slowdown": "sw_thermal_slowdown",
    "Display Clock Setting": "display_clocks_setting",
}


def _num(text: str | None) -> int:
    m = _INT.search(text or "")
    return int(m.group()) if m and len(m.group()) <= 12 else -1


def _blank() -> dict[str, Any]:
    return {
        "index": 0,
        "uuid": "",
        "pci": "",
        "line": 0,
        "pcie_gen_max": -1,
        "pcie_gen_current": -1,
        "pcie_width_max": -1,
        "pcie_width_current": -1,
        "reasons": [],
        "util_gpu": -1,
        "pstate": "",
        "fabric_state": "",
        "fabric_status": "",
    }


def parse_perf(text: str) -> list[dict[str, Any]]:
    """Per-GPU performance fields from ``-q -x`` XML or ``-q`` text ([] when neither)."""
    if "<nvidia_smi_log" in text:
        return _from_xml(text)
    return _from_text(text)


def _from_xml(text: str) -> list[dict[str, Any]]:
    start = text.find("<nvidia_smi_log")
    end = text.find("</nvidia_smi_log>", start)
    if end < 0:
        return []
    try:
        root = ET.fromstring(text[start : end + len("</nvidia_smi_log>")])
    except ET.ParseError:
        return []
    lines = text.splitlines()
    gpus = []
    for i, g in enumerate(root.findall("gpu")):
        rec = _blank()
        rec["index"] = (
            _num(g.findtext("minor_number"))
            if g.findtext("minor_number", "").strip().isdigit()
            else i
        )
        rec["uuid"] = (g.findtext("uuid") or "").strip()
        rec["pci"] = (g.get("id") or "").strip()
        rec["line"] = next((n for n, t in enumerate(lines, 1) if f'<gpu id="{rec["pci"]}"' in t), 0)
        link = g.find("pci/pci_gpu_link_info")
        if link is not None:
            rec["pcie_gen_max"] = _num(link.findtext("pcie_gen/max_link_gen"))
            rec["pcie_gen_current"] = _num(link.findtext("pcie_gen/current_link_gen"))
            rec["pcie_width_max"] = _num(link.findtext("link_widths/max_link_width"))
            rec["pcie_width_current"] = _num(link.findtext("link_widths/current_link_width"))
        for block, prefix in (
            ("clocks_event_reasons", "clocks_event_reason_"),
            ("clocks_throttle_reasons", "clocks_throttle_reason_"),
        ):
            el = g.find(block)
            if el is None:
                continue
            for child in el:
                name = REASON_TAGS.get(child.tag.removeprefix(prefix))
                if name and (child.text or "").strip() == "Active":
                    rec["reasons"].append(name)
        rec["util_gpu"] = _num(g.findtext("utilization/gpu_util"))
        rec["pstate"] = (g.findtext("performance_state") or "").strip()
        rec["fabric_state"] = _clean(g.findtext("fabric/state"))
        rec["fabric_status"] = _clean(g.findtext("fabric/status"))
        gpus.append(rec)
    return gpus


def _clean(value: str | None) -> str:
    value = (value or "").strip()
    return "" if value in ("N/A", "") else value


_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_KV = re.compile(r"^(?P<ind>\s*)(?P<key>[^:]+?)\s*(?::\s*(?P<val>.*))?$")


def _from_text(text: str) -> list[dict[str, Any]]:
    gpus: list[dict[str, Any]] = []
    rec: dict[str, Any] | None = None
    stack: list[tuple[int, str]] = []
    for n, line in enumerate(text.splitlines(), 1):
        m = _GPU_HEADER.match(line)
        if m:
            rec = _blank()
            rec.update(index=len(gpus), pci=m.group(1), line=n)
            gpus.append(rec)
            stack = []
            continue
        if rec is None or not line.strip():
            continue
        kv = _KV.match(line)
        if not kv:
            continue
        indent, key, val = len(kv["ind"]), kv["key"].strip(), kv["val"]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([s for _, s in stack] + [key])
        if val is None:
            stack.append((indent, key))
            continue
        val = val.strip()
        _text_field(rec, path, val)
    return gpus


def _text_field(rec: dict[str, Any], path: str, val: str) -> None:
    if path == "GPU UUID":
        rec["uuid"] = val
    elif path == "Minor Number" and _num(val) >= 0:
        rec["index"] = _num(val)
    elif path.endswith("GPU Link Info/PCIe Generation/Max"):
        rec["pcie_gen_max"] = _num(val)
    elif path.endswith("GPU Link Info/PCIe Generation/Current"):
        rec["pcie_gen_current"] = _num(val)
    elif path.endswith("GPU Link Info/Link Width/Max"):
        rec["pcie_width_max"] = _num(val)
    elif path.endswith("GPU Link Info/Link Width/Current"):
        rec["pcie_width_current"] = _num(val)
    elif path.startswith(("Clocks Event Reasons/", "Clocks Throttle Reasons/")):
        name = REASON_LABELS.get(path.rsplit("/", 1)[-1])
        if name and val == "Active":
            rec["reasons"].append(name)
    elif path == "Utilization/Gpu":
        rec["util_gpu"] = _num(val)
    elif path == "Performance State":
        rec["pstate"] = val
    elif path == "Fabric/State":
        rec["fabric_state"] = _clean(val)
    elif path == "Fabric/Status":
        rec["fabric_status"] = _clean(val)


def parse_topo(text: str) -> dict[str, Any]:
    """``nvidia-smi topo -m``: ``gpus`` [{name, index, line, cpu_affinity, numa_affinity}] and
    ``links`` [{a, b, link}] between GPUs ({} when no matrix is found)."""
    lines = [_ANSI.sub("", t) for t in text.splitlines()]
    header: list[str] = []
    gpus: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    for n, line in enumerate(lines, 1):
        cells = [c.strip() for c in line.split("\t") if c.strip()]
        if not header:
            if cells and cells[0].startswith("GPU0") and "CPU Affinity" in cells:
                header = cells
            continue
        if not cells or not re.fullmatch(r"GPU\d{1,4}", cells[0]):
            if cells and cells[0].startswith("Legend"):
                break
            continue
        row = dict(zip(header, cells[1:], strict=False))
        name = cells[0]
        gpus.append(
            {
                "name": name,
                "index": int(name[3:]),
                "line": n,
                "cpu_affinity": row.get("CPU Affinity", ""),
                "numa_affinity": _num(row.get("NUMA Affinity")),
            }
        )
        for col, val in row.items():
            if re.fullmatch(r"GPU\d{1,4}", col) and col != name and val != "X":
                a, b = int(name[3:]), int(col[3:])
                if a < b:
                    links.append({"a": a, "b": b, "link": val})
    return {"gpus": gpus, "links": links} if header else {}


_NVL_GPU = re.compile(r"^GPU (\d{1,4}): (.*?)(?: \(UUID: (GPU-[0-9a-fA-F-]+)\))?\s*$")
_NVL_LINK = re.compile(r"^\s+Link (\d{1,4}): (.*)$")


def parse_nvlink(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi nvlink -s``: per GPU {index, uuid, line, links, active, inactive: [ids],
    inactive_lines: [line numbers]}."""
    gpus: list[dict[str, Any]] = []
    for n, line in enumerate(text.splitlines(), 1):
        m = _NVL_GPU.match(line)
        if m:
            gpus.append(
                {
                    "index": int(m.group(1)),
                    "uuid": m.group(3) or "",
                    "line": n,
                    "links": 0,
                    "active": 0,
                    "inactive": [],
                    "inactive_lines": [],
                }
            )
            continue
        lm = _NVL_LINK.match(line)
        if lm and gpus:
            g = gpus[-1]
            g["links"] += 1
            if "inactive" in lm.group(2).lower():
                g["inactive"].append(int(lm.group(1)))
                g["inactive_lines"].append(n)
            else:
                g["active"] += 1
    return gpus
