"""Kernel records and Xid codes in words: what a line said joined to what NVIDIA says about it.

Shared by the ``kernel`` fact group (CEL-friendly maps with stable keys) and by
``gputriage xid`` (explanations of a code or of a pasted line).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from gputriage.parsers.kernel import KernelRecord, Kind
from gputriage.xid import catalog

#: What each non-Xid record kind means, for people reading a decoded line.
KIND_MEANING: dict[Kind, str] = {
    Kind.FALLEN_OFF_BUS: "the GPU stopped answering on PCIe (lost card): reboot or power-cycle "
    "the node; if it repeats suspect the riser, slot, PSU or the GPU",
    Kind.RM_INIT_ADAPTER: "the driver could not initialise this GPU, so nvidia-smi shows fewer "
    "GPUs or 'No devices were found'",
    Kind.GSP_TIMEOUT: "the GPU's GSP firmware stopped answering; the GPU likely needs a reset "
    "(it usually cascades into Xid 119/109/154)",
    Kind.DRIVER_LOAD: "the NVIDIA kernel module did not load or bind to the GPU",
    Kind.DRIVER_VERSION: "the NVIDIA kernel module that was loaded, and its version",
    Kind.GPU_IDENTITY: "which GPU (UUID, board serial) sits at this PCI address",
    Kind.PEERMEM: "nvidia-peermem (GPUDirect RDMA) noise; not a GPU fault by itself",
    Kind.SXID_DETAIL: "detail line of an NVSwitch SXid reported just before it",
    Kind.OTHER_NVRM: "another NVIDIA driver message",
}


def device_plugin_behaviour(code: int) -> str:
    """What the NVIDIA k8s-device-plugin does when NVML reports Xid ``code``."""
    skipped = catalog.plugin_skipped_xids()
    listed = ", ".join(str(c) for c in skipped)
    if code in skipped:
        return (
            f"ignored: the NVIDIA k8s-device-plugin treats Xid {code} as an application "
            f"error and keeps the GPU schedulable (its skip list: {listed}; force it with "
            f"DP_ENABLE_HEALTHCHECKS={code})"
        )
    return (
        f"marks the GPU (or its MIG instance) Unhealthy, so nvidia.com/gpu allocatable drops "
        f"(not in its application-error skip list {listed}; opt out with "
        f"DP_DISABLE_HEALTHCHECKS={code})"
    )


def explain_xid(code: int) -> dict[str, Any] | None:
    """NVIDIA's catalog row for ``code`` plus the meaning of its buckets (None when unknown)."""
    info = catalog.lookup(code)
    if info is None:
        return None
    return {
        **info.to_dict(),
        "class_meaning": catalog.CLASSES.get(info.klass, ""),
        "hardware": info.hardware,
        "immediate_meaning": catalog.bucket_meaning(info.immediate),
        "investigatory_meaning": catalog.bucket_meaning(info.investigatory),
        "device_plugin": device_plugin_behaviour(code),
    }


def explain_sxid(code: int) -> dict[str, Any] | None:
    """The Fabric Manager class of SXid ``code`` (None when the guide does not list it)."""
    info = catalog.lookup_sxid(code)
    return None if info is None else info.to_dict()


def xid_fact(rec: KernelRecord) -> dict[str, Any]:
    """One ``kernel.xids`` entry: what the line said plus the catalog's reading (stable keys)."""
    info = catalog.lookup(rec.code)
    return {
        "code": rec.code,
        "pci": rec.pci,
        "gpu_instance": rec.gpu_instance,
        "compute_instance": rec.compute_instance,
        "pid": rec.pid,
        "process": rec.process,
        "message": rec.message,
        "timestamp": rec.timestamp,
        "time": rec.time,
        "line": rec.line,
        "klass": info.klass if info else "",
        "mnemonic": info.mnemonic if info else "",
        "description": info.description if info else "",
        "action": info.action if info else "",
        "plugin_skips": rec.code in catalog.plugin_skipped_xids(),
        "hardware": info.hardware if info else False,
        "severity": rec.severity,
        "unit": rec.unit,
        "link": rec.link,
        "caused_by": rec.caused_by,
        "gpc": rec.gpc,
        "tpc": rec.tpc,
        "sm": rec.sm,
        "device": rec.device,
        "origin": rec.origin,
    }


def sxid_fatal(rec: KernelRecord) -> bool:
    """Fatal as printed, or (for lines without a severity) always fatal per Fabric Manager."""
    if rec.severity:
        return rec.severity == "fatal"
    info = catalog.lookup_sxid(rec.code)
    return bool(info and info.fatal)


def sxid_fact(rec: KernelRecord) -> dict[str, Any]:
    """One ``kernel.sxids`` entry (stable keys)."""
    info = catalog.lookup_sxid(rec.code)
    return {
        "code": rec.code,
        "severity": rec.severity,
        "fatal": sxid_fatal(rec),
        "link": rec.link,
        "description": rec.detail or (info.name if info else ""),
        "first": rec.first,
        "switch": rec.device,
        "pci": rec.pci,
        "message": rec.message,
        "timestamp": rec.timestamp,
        "time": rec.time,
        "line": rec.line,
        "klass": info.klass if info else "",
        "action": info.action if info else "",
        "origin": rec.origin,
    }


def recovery_fact(rec: KernelRecord) -> dict[str, Any]:
    """One ``kernel.recovery_actions`` entry, from an Xid 154 line."""
    return {
        "pci": rec.pci,
        "previous_code": rec.recovery_from,
        "previous": rec.recovery_from_name or catalog.recovery_action_name(rec.recovery_from),
        "action_code": rec.recovery_to,
        "action": rec.recovery_to_name or catalog.recovery_action_name(rec.recovery_to),
        "line": rec.line,
        "timestamp": rec.timestamp,
    }


def decode_record(rec: KernelRecord) -> dict[str, Any]:
    """Everything about one record: its fields and what it means."""
    out = asdict(rec)
    out["kind"] = rec.kind.value
    out["registers"] = list(rec.registers)
    if rec.kind is Kind.XID:
        out["meaning"] = explain_xid(rec.code)
    elif rec.kind is Kind.SXID:
        out["meaning"] = explain_sxid(rec.code)
        out["fatal"] = sxid_fatal(rec)
    else:
        out["meaning"] = KIND_MEANING.get(rec.kind, "")
    return out
