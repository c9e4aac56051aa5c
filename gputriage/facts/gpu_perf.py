"""Fact group ``gpu_perf``: why the node's GPUs may run slowly, from one nvidia-smi look.

Built from ``Key.NVIDIA_SMI`` (``-q -x`` XML or ``-q`` text): the PCIe link each GPU trained
to against its maximum, the clock event (throttle) reasons active right now, utilisation, and
the NVSwitch fabric registration state (Hopper and later report it; it stays short of
``Completed`` while the Fabric Manager is not running).

A link generation below the maximum counts only on a busy GPU: an idle GPU drops its link to
Gen1 to save power (every idle GPU in the corpus does). A narrower width is never a power state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import EvidenceSet, Key, LineRef
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    unknown,
    unknown_from,
)
from gputriage.parsers.nvidia_smi_perf import parse_perf

#: Reasons that slow a GPU (idle, sync boost, application and display clocks are benign).
SLOWING = (
    "sw_power_cap",
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
)
#: Fabric states short of registration (nvmlGpuFabricState: Not Started, In Progress).
FABRIC_PENDING = ("Not Started", "In Progress")

SPEC = GroupSpec(
    name="gpu_perf",
    doc="Performance state of the node's GPUs from nvidia-smi -q: PCIe link trained below its "
    "maximum, clock event (throttle) reasons active now, and NVSwitch fabric registration "
    "(Fabric Manager).",
    sources=(Key.NVIDIA_SMI,),
    fields={
        "gpus": FieldSpec(
            "list<map>",
            [],
            "{index, uuid, pci, pcie_gen_max, pcie_gen_current, "
            "pcie_width_max, pcie_width_current, reasons, "
            "util_gpu, pstate, fabric_state, fabric_status}; -1 "
            '/ "" when not reported.',
        ),
        "pcie_downtrained": FieldSpec(
            "list<map>",
            [],
            "{index, uuid, pci, gen_current, "
            "gen_max, width_current, width_max, "
            "why}: GPUs whose link runs narrower "
            "than its maximum, or a lower generation "
            "while busy.",
        ),
        "any_pcie_downtrained": FieldSpec("bool", False, "Some GPU's PCIe link is downtrained."),
        "throttle_reasons": FieldSpec(
            "list<string>", [], "Slowing reasons active on some GPU (sw_power_cap only while busy)."
        ),
        "thermal_throttling": FieldSpec("bool", False, "hw/sw thermal slowdown active."),
        "power_throttling": FieldSpec(
            "bool", False, "SW power cap (busy) or HW power brake active."
        ),
        "hw_slowdown": FieldSpec(
            "bool", False, "HW slowdown active (thermal, power brake or an external signal)."
        ),
        "fabric_states": FieldSpec("list<string>", [], "Distinct fabric states reported."),
        "fabric_pending": FieldSpec(
            "bool",
            False,
            "A GPU's fabric state is Not Started or In "
            "Progress: the Fabric Manager has not "
            "registered it.",
        ),
        "fabric_failed": FieldSpec(
            "bool", False, "Fabric state Completed with a status other than Success."
        ),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    ev = evidence.get_or_missing(Key.NVIDIA_SMI)
    if not ev.ok:
        return unknown_from(SPEC, ev)
    gpus = parse_perf(ev.raw)
    if not gpus:
        return unknown(
            SPEC,
            f"{ev.source}: no per-GPU -q/-q -x blocks to read link, clock and fabric state from",
        )
    cites: dict[str, list[LineRef]] = {}

    def cite(field: str, g: dict[str, Any], text: str) -> None:
        cites.setdefault(field, []).append(
            ev.cite(g["line"], f"{ev.lines()[g['line'] - 1]} | {text}" if g["line"] else text)
        )

    down = []
    reasons: set[str] = set()
    for g in gpus:
        busy = "gpu_idle" not in g["reasons"] and g["util_gpu"] != 0
        why = []
        if 0 < g["pcie_width_current"] < g["pcie_width_max"]:
            why.append(f"x{g['pcie_width_current']} of x{g['pcie_width_max']}")
        if busy and 0 < g["pcie_gen_current"] < g["pcie_gen_max"]:
            why.append(f"Gen{g['pcie_gen_current']} of Gen{g['pcie_gen_max']} while busy")
        if why:
            down.append(
                {
                    "index": g["index"],
                    "uuid": g["uuid"],
                    "pci": g["pci"],
                    "gen_current": g["pcie_gen_current"],
                    "gen_max": g["pcie_gen_max"],
                    "width_current": g["pcie_width_current"],
                    "width_max": g["pcie_width_max"],
                    "why": ", ".join(why),
                }
            )
            cite("pcie_downtrained", g, f"GPU {g['index']}: PCIe link {', '.join(why)}")
        active = [r for r in g["reasons"] if r in SLOWING and (r != "sw_power_cap" or busy)]
        reasons.update(active)
        if active:
            cite(
                "throttle_reasons",
                g,
                f"GPU {g['index']}: clocks held down by "
                f"{', '.join(active)} (utilisation {g['util_gpu']} %)",
            )
        if g["fabric_state"]:
            cite(
                "fabric_states",
                g,
                f"GPU {g['index']}: fabric state {g['fabric_state']}, "
                f"status {g['fabric_status'] or 'N/A'}",
            )
    states = sorted({g["fabric_state"] for g in gpus if g["fabric_state"]})
    values = {
        "gpus": gpus,
        "pcie_downtrained": down,
        "any_pcie_downtrained": bool(down),
        "throttle_reasons": sorted(reasons),
        "thermal_throttling": bool(reasons & {"hw_thermal_slowdown", "sw_thermal_slowdown"}),
        "power_throttling": bool(reasons & {"sw_power_cap", "hw_power_brake_slowdown"}),
        "hw_slowdown": "hw_slowdown" in reasons,
        "fabric_states": states,
        "fabric_pending": any(s in FABRIC_PENDING for s in states),
        "fabric_failed": any(
            g["fabric_state"] == "Completed"
            and g["fabric_status"]
            and g["fabric_status"] != "Success"
            for g in gpus
        ),
    }
    cites["any_pcie_downtrained"] = cites.get("pcie_downtrained", [])
    for k in ("thermal_throttling", "power_throttling", "hw_slowdown"):
        cites[k] = cites.get("throttle_reasons", [])
    for k in ("fabric_pending", "fabric_failed"):
        cites[k] = cites.get("fabric_states", [])
    return known(SPEC, values, cites)
