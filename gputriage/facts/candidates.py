"""Fact group ``candidates``: the GPU nodes an unscheduled pod could land on that show trouble,
and what their own evidence says (Xids, lost GPUs, devices the plugin marked unhealthy).

Built from ``candidate-nodes.json`` and each examined node's ``nodes/<name>/`` files (or the
same evidence collected live). Each examined node's kernel log, nvidia-smi output and
device-plugin log are read with the same fact builders as the pod's own node
(:mod:`gputriage.facts.kernel`, :mod:`gputriage.facts.gpus`,
:mod:`gputriage.facts.device_plugin`), so a fault found here carries the same Xid decoding and
NVIDIA action. ``faults`` names the node and the GPU (UUID, PCI bus id, serial when the driver
printed it) and cites the kernel or plugin line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputriage.evidence.candidate_model import node_evidence
from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts import device_plugin, gpus, kernel
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    reason_for,
    unknown,
)
from gputriage.xid import catalog

#: Immediate actions that take a GPU out of service until someone acts.
_SERIOUS_ACTIONS = ("RESET_GPU", "RESTART_BM", "CONTACT_SUPPORT")
#: Citations kept per field.
MAX_CITES = 20

_FAULT_KEYS = (
    "node, uuid ('' when unknown), pci (DDDD:BB:DD, '' when unknown), serial ('' "
    "when the driver did not print it), xid (0 when only the plugin's word), "
    "mnemonic, klass, immediate_action (NVIDIA's bucket: RESET_GPU, RESTART_BM, "
    "CONTACT_SUPPORT...), action (NVIDIA's action in words), fallen_off_bus, "
    "origin (kernel | device-plugin), line (the cited text), time"
)

SPEC = GroupSpec(
    name="candidates",
    doc="For an unscheduled pod: the GPU nodes it could land on (its GPU resource, "
    "nodeSelector/affinity, tolerated taints, not cordoned), the troubled ones examined "
    "(capacity above allocatable, NotReady, device-plugin trouble; at most --nodes), and "
    "the GPU faults their kernel log, nvidia-smi and device-plugin log show.",
    sources=(Key.CANDIDATES,),
    fields={
        "limit": FieldSpec("int", 0, "At most this many candidate nodes were examined (--nodes)."),
        "considered_count": FieldSpec("int", 0, "GPU nodes looked at."),
        "candidate_count": FieldSpec("int", 0, "Of those, nodes the pod could land on."),
        "examined_count": FieldSpec("int", 0, "Candidate nodes whose own evidence was read."),
        "examined": FieldSpec(
            "list<map>",
            [],
            "Examined nodes: name, reasons (list: why it was picked), sources (map: evidence "
            "key -> status), xid_codes (list<int>), fallen_off_bus (bool), unhealthy_devices "
            "(list of UUIDs the plugin marked unhealthy), gpu_count (GPUs nvidia-smi "
            "described; -1 when unknown), nvidia_smi_status (gpus.status there: ok, "
            "gpu_lost, no_driver...; '' when unknown).",
        ),
        "not_examined": FieldSpec(
            "list<map>", [], "Other GPU nodes and why they were not examined: name, why."
        ),
        "faults": FieldSpec(
            "list<map>", [], f"GPU faults on examined nodes, the most serious first: {_FAULT_KEYS}."
        ),
        "fault_found": FieldSpec("bool", False, "size(faults) > 0."),
        "first_fault": FieldSpec("map", {}, "faults[0], or {} when none."),
        "fault_nodes": FieldSpec("list<string>", [], "Names of the nodes with a fault."),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    ev = evidence.get_or_missing(Key.CANDIDATES)
    if not ev.ok or not isinstance(ev.data, dict):
        return unknown(
            SPEC, reason_for(ev) if not ev.ok else f"{ev.source}: not a candidate-node document"
        )
    data = ev.data
    per_node = node_evidence(ev)
    examined: list[dict[str, Any]] = []
    faults: list[dict[str, Any]] = []
    cites: dict[str, list[LineRef]] = {}
    for item in data.get("items") or []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        name = item["name"]
        reasons = [str(r) for r in item.get("reasons") or [] if isinstance(r, str)]
        evs = per_node.get(name) or {}
        summary, node_faults, refs = _node(name, reasons, evs)
        examined.append(summary)
        faults.extend(node_faults)
        for field, found in refs.items():
            cites.setdefault(field, []).extend(found)
        ref = ev.find_line(f'"name": "{name}"')
        if ref.line:
            cites.setdefault("examined", []).append(ref)
    faults.sort(key=_severity)
    skipped = [
        {"name": str(s.get("name") or ""), "why": str(s.get("why") or "")}
        for s in data.get("notExamined") or []
        if isinstance(s, dict)
    ]
    values = {
        "limit": _int(data.get("limit")),
        "considered_count": _int(data.get("considered")),
        "candidate_count": _int(data.get("candidates")),
        "examined_count": len(examined),
        "examined": examined,
        "not_examined": skipped,
        "faults": faults,
        "fault_found": bool(faults),
        "first_fault": faults[0] if faults else {},
        "fault_nodes": sorted({f["node"] for f in faults}),
    }
    cites = {k: v[:MAX_CITES] for k, v in cites.items()}
    for alias in ("fault_found", "first_fault", "fault_nodes"):
        if cites.get("faults"):
            cites[alias] = cites["faults"]
    return known(SPEC, values, cites)


def _node(
    name: str, reasons: list[str], evs: Mapping[str, Evidence]
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, list[LineRef]]]:
    node_set = EvidenceSet(e for e in evs.values() if isinstance(e, Evidence))
    tgt = Target(node=name)
    k = kernel.build(node_set, tgt, {})
    g = gpus.build(node_set, tgt, {})
    d = device_plugin.build(node_set, tgt, {})
    identities = {str(i.get("pci", "")).upper(): i for i in k.values["gpu_identities"]}
    by_pci = {str(x.get("pci_slot", "")).upper(): x for x in g.values["gpus"]}
    by_uuid = {str(x.get("uuid", "")): x for x in g.values["gpus"]}
    for i in k.values["gpu_identities"]:
        by_uuid.setdefault(str(i.get("uuid", "")), {"pci_slot": i.get("pci", "")})
    faults: list[dict[str, Any]] = []
    seen: set[tuple[str, int]] = set()
    refs: dict[str, list[LineRef]] = {}
    kernel_refs = {r.line: r for r in k.cites.get("xids", ())}
    for x in k.values["xids"] if k.known else []:
        serious = (
            x.get("hardware")
            or x.get("immediate_action") in _SERIOUS_ACTIONS
            or x.get("code") == 79
        )
        pci = str(x.get("pci", "")).upper()
        if not serious or (pci, int(x.get("code", 0))) in seen:
            continue
        seen.add((pci, int(x.get("code", 0))))
        ident = identities.get(pci, {})
        uuid = str(ident.get("uuid") or by_pci.get(pci, {}).get("uuid") or "")
        ref = kernel_refs.get(int(x.get("line", 0)))
        faults.append(
            {
                "node": name,
                "uuid": uuid,
                "pci": pci,
                "serial": str(ident.get("serial") or ""),
                "xid": int(x.get("code", 0)),
                "mnemonic": str(x.get("mnemonic", "")),
                "klass": str(x.get("klass", "")),
                "immediate_action": str(x.get("immediate_action", "")),
                "action": str(x.get("action", "")),
                "fallen_off_bus": int(x.get("code", 0)) == 79,
                "origin": "kernel",
                "line": ref.text if ref else str(x.get("message", "")),
                "time": str(x.get("time", "")),
            }
        )
        if ref:
            refs.setdefault("faults", []).append(ref)
    plugin_refs = list(d.cites.get("unhealthy_devices", ()))
    for dev in d.values["unhealthy_devices"] if d.known else []:
        uuid = str(dev.get("uuid", ""))
        xid = int(dev.get("xid") or 0)
        pci = str(by_uuid.get(uuid, {}).get("pci_slot", "")).upper()
        if any(f["uuid"] == uuid and uuid and f["xid"] in (xid, 0) for f in faults) or (
            pci and (pci, xid) in seen
        ):
            continue
        info = catalog.lookup(xid) if xid else None  # the plugin names the Xid, not its text
        faults.append(
            {
                "node": name,
                "uuid": uuid,
                "pci": pci,
                "serial": "",
                "xid": xid,
                "mnemonic": info.mnemonic if info else "",
                "klass": str(dev.get("xid_klass", "")) or (info.klass if info else ""),
                "immediate_action": str(dev.get("xid_immediate_action", ""))
                or (info.immediate if info else ""),
                "action": info.action if info else "",
                "fallen_off_bus": xid == 79,
                "origin": "device-plugin",
                "line": str(dev.get("line", "")),
                "time": "",
            }
        )
    refs.setdefault("faults", []).extend(plugin_refs[:MAX_CITES])
    summary = {
        "name": name,
        "reasons": reasons,
        "sources": {key: e.status.value for key, e in evs.items() if isinstance(e, Evidence)},
        "xid_codes": list(k.values["xid_codes"]),
        "fallen_off_bus": bool(k.values["fallen_off_bus"]),
        "unhealthy_devices": [str(u.get("uuid", "")) for u in d.values["unhealthy_devices"]],
        "gpu_count": int(g.values["count"]) if g.known else -1,
        "nvidia_smi_status": str(g.values["status"]) if g.known else "",
    }
    return summary, faults, refs


def _severity(fault: Mapping[str, Any]) -> tuple[int, int, str]:
    order = {"RESTART_BM": 0, "CONTACT_SUPPORT": 1, "RESET_GPU": 2}
    return (
        0 if fault.get("origin") == "kernel" else 1,
        order.get(str(fault.get("immediate_action")), 5),
        str(fault.get("node")),
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
