"""Fact group ``gpu_assignment``: which physical GPU each pod on the node was given.

Built from the kubelet's device-manager checkpoint read on the node
(:mod:`gputriage.parsers.kubelet_checkpoint`): pod UID, container, resource and device IDs
(GPU UUIDs, MIG devices, or indexes; ``NVIDIA_VISIBLE_DEVICES`` from the plugin's Allocate
answer when the IDs are not UUIDs). Joined with ``nvidia-smi`` (PCI bus id, serial, board part
number, product: what an RMA needs), the pods on the node (UID -> namespace/name), and the
GPU faults the kernel log and the device plugin report, it answers "which GPUs has my pod?"
and "which pods are on the broken GPU?".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    reason_for,
    unknown,
)
from gputriage.parsers.kubelet_checkpoint import parse_checkpoint
from gputriage.parsers.nvidia_smi import parse_nvidia_smi

#: Immediate actions that take a GPU out of service until someone acts.
_SERIOUS_ACTIONS = ("RESET_GPU", "RESTART_BM", "CONTACT_SUPPORT")

_GPU_KEYS = (
    "device_id (as the plugin named it), uuid, pci (0000:3B:00.0; '' when nvidia-smi "
    "is unknown), serial, board_part_number, product, resource, faulty (bool), "
    "fault (words: 'Xid 79', 'marked unhealthy by the device plugin'; '')"
)

SPEC = GroupSpec(
    name="gpu_assignment",
    doc="Pod <-> GPU mapping on the node from the kubelet's device-plugin checkpoint, with each "
    "GPU's identity from nvidia-smi (UUID, PCI bus id, serial, board part number) and the "
    "faults the kernel log and the device plugin report for it.",
    sources=(Key.DEVICE_CHECKPOINT, Key.NVIDIA_SMI, Key.NODE_PODS),
    fields={
        "entries": FieldSpec("int", 0, "Container/resource entries in the checkpoint."),
        "registered": FieldSpec("map", {}, "Resource -> device IDs the plugins registered."),
        "pod_gpus": FieldSpec(
            "list<map>",
            [],
            "The GPUs of the pod under triage, one map per "
            f"device and container: container, {_GPU_KEYS}.",
        ),
        "pod_on_faulty_gpu": FieldSpec("bool", False, "One of the pod's GPUs has a fault."),
        "gpu_pods": FieldSpec(
            "list<map>",
            [],
            f"Every allocated device: {_GPU_KEYS}, pods (list of maps: namespace, name ('' when "
            "the pod is not in node-pods), uid, container).",
        ),
        "faulty_gpus": FieldSpec(
            "list<map>", [], "gpu_pods entries whose GPU has a fault: the pods on a broken GPU."
        ),
        "unassigned_faulty": FieldSpec(
            "list<string>", [], "UUIDs (or PCI ids) with a fault that no pod holds."
        ),
        "problems": FieldSpec("list<string>", [], "What could not be read in the checkpoint."),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    ev = evidence.get_or_missing(Key.DEVICE_CHECKPOINT)
    if not ev.ok:
        return unknown(SPEC, reason_for(ev))
    checkpoint = parse_checkpoint(ev.raw)
    if not checkpoint.entries and checkpoint.problems:
        return unknown(SPEC, f"{ev.source}: {'; '.join(checkpoint.problems)}")
    identity = _identities(evidence.get_or_missing(Key.NVIDIA_SMI))
    faults = _faults(earlier, identity)
    names = _pod_names(evidence.get_or_missing(Key.NODE_PODS))
    by_device: dict[tuple[str, str], dict[str, Any]] = {}
    pod_gpus: list[dict[str, Any]] = []
    cites: dict[str, list[LineRef]] = {}
    for entry in checkpoint.entries:
        pod = names.get(entry.pod_uid, {"namespace": "", "name": ""})
        for device in entry.gpus:
            info = identity.get(device) or identity.get(device.upper()) or {}
            uuid = str(info.get("uuid") or device)
            fault = faults.get(uuid) or faults.get(str(info.get("pci_slot", ""))) or ""
            gpu = {
                "device_id": device,
                "uuid": uuid,
                "pci": str(info.get("pci") or ""),
                "serial": str(info.get("serial") or ""),
                "board_part_number": str(info.get("board_part_number") or ""),
                "product": str(info.get("product") or ""),
                "resource": entry.resource,
                "faulty": bool(fault),
                "fault": fault,
            }
            row = by_device.setdefault((entry.resource, device), {**gpu, "pods": []})
            row["pods"].append({**pod, "uid": entry.pod_uid, "container": entry.container})
            if target.uid and entry.pod_uid == target.uid:
                pod_gpus.append({"container": entry.container, **gpu})
    if pod_gpus:  # the checkpoint is one line of JSON: one citation says where
        ref = ev.find_line(target.uid)
        if ref.line:
            cites["pod_gpus"] = [ref]
    gpu_pods = list(by_device.values())
    faulty = [g for g in gpu_pods if g["faulty"]]
    held = {g["uuid"] for g in gpu_pods} | {
        g["pci"].rsplit(".", 1)[0] for g in gpu_pods if g["pci"]
    }
    unassigned = sorted(k for k in faults if k not in held)
    if pod_gpus and any(g["faulty"] for g in pod_gpus):
        cites["pod_on_faulty_gpu"] = list(cites.get("pod_gpus", []))
    return known(
        SPEC,
        {
            "entries": len(checkpoint.entries),
            "registered": checkpoint.registered,
            "pod_gpus": pod_gpus,
            "pod_on_faulty_gpu": any(g["faulty"] for g in pod_gpus),
            "gpu_pods": gpu_pods,
            "faulty_gpus": faulty,
            "unassigned_faulty": unassigned,
            "problems": checkpoint.problems,
        },
        cites,
    )


def _identities(ev: Evidence) -> dict[str, dict[str, str]]:
    """UUID (and MIG UUID, and index) -> the GPU's identity from nvidia-smi."""
    found: dict[str, dict[str, str]] = {}
    if not ev.ok:
        return found
    snapshot = parse_nvidia_smi(ev.raw)
    for rec in snapshot.gpus:
        pci = rec.pci_bus_id or ""
        info = {
            "uuid": rec.uuid,
            "pci": pci,
            "pci_slot": pci.rsplit(".", 1)[0] if pci else "",
            "serial": rec.serial,
            "board_part_number": rec.board_part_number,
            "product": rec.name,
        }
        for key in (rec.uuid, str(rec.index)):
            if key:
                found.setdefault(key, info)
        for mig in rec.mig_devices:
            if isinstance(mig, dict) and mig.get("uuid"):
                found.setdefault(str(mig["uuid"]), {**info, "uuid": str(mig["uuid"])})
    return found


def _faults(
    earlier: Mapping[str, FactGroup], identity: Mapping[str, Mapping[str, str]]
) -> dict[str, str]:
    """UUID or PCI slot (0000:3B:00) -> the fault in words."""
    faults: dict[str, str] = {}
    kernel = earlier.get("kernel")
    if kernel is not None and kernel.known:
        uuid_of = {
            str(i.get("pci", "")).upper(): str(i.get("uuid", ""))
            for i in kernel.values.get("gpu_identities", [])
        }
        for x in kernel.values.get("xids", []):
            if not (x.get("hardware") or x.get("immediate_action") in _SERIOUS_ACTIONS):
                continue
            pci = str(x.get("pci", "")).upper()
            words = f"Xid {x.get('code')}" + (
                f" ({x.get('mnemonic')})" if x.get("mnemonic") else ""
            )
            uuid = uuid_of.get(pci) or next(
                (
                    u
                    for u, i in identity.items()
                    if i.get("pci_slot") == pci and u.startswith("GPU-")
                ),
                "",
            )
            faults.setdefault(uuid or pci, words)
    plugin = earlier.get("device_plugin")
    if plugin is not None and plugin.known:
        for dev in plugin.values.get("unhealthy_devices", []):
            uuid = str(dev.get("uuid", ""))
            if uuid and uuid != "all":
                faults.setdefault(
                    uuid,
                    "marked unhealthy by the device plugin"
                    + (f" (Xid {dev.get('xid')})" if dev.get("xid") else ""),
                )
    return faults


def _pod_names(ev: Evidence) -> dict[str, dict[str, str]]:
    data = ev.data if ev.ok and isinstance(ev.data, dict) else {}
    names: dict[str, dict[str, str]] = {}
    for item in data.get("items") or []:
        meta = item.get("metadata") if isinstance(item, dict) else None
        if isinstance(meta, dict) and meta.get("uid"):
            names[str(meta["uid"])] = {
                "namespace": str(meta.get("namespace") or ""),
                "name": str(meta.get("name") or ""),
            }
    return names
