"""NVIDIA's Xid and SXid catalog, as package data (``xids.json``), loaded on first use.

Rows follow NVIDIA's "Analyzing Xid Errors with the Xid Catalog" (codes 1-172) wherever
sources disagree (Xid 45 is *preemptive cleanup after previous errors*, nothing to do with PCIe).
``klass`` is gputriage's reading of NVIDIA's resolution buckets, one of :data:`CLASSES`.
SXid (NVSwitch) classes come from the Fabric Manager guide: ``non-fatal``,
``potentially-fatal`` or ``always-fatal``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

#: Xid classes and what each means for the GPU.
CLASSES: dict[str, str] = {
    "application": "the application faulted; the GPU stays healthy",
    "driver": "driver or driver-firmware error",
    "firmware": "GPU firmware (GSP, SEC2) error; software first, hardware if it repeats",
    "hardware": "GPU, board or PCIe hardware fault",
    "memory": "GPU memory (ECC, row remapping) error",
    "nvlink": "NVLink error (GPU side)",
    "engine": "copy or media engine exception (application or driver)",
    "sympathetic": "side effect of another error",
    "informational": "informational or test report",
    "configuration": "configuration problem (vGPU, confidential computing, InfoROM limits)",
    "power": "power smoothing circuitry event",
    "unused": "not used on Ampere and newer GPUs",
}

#: Classes whose Xids point at the GPU itself rather than the software on it.
HARDWARE_CLASSES: frozenset[str] = frozenset({"hardware", "memory", "nvlink"})


@dataclass(frozen=True, slots=True)
class XidInfo:
    """One row of NVIDIA's Xid catalog plus gputriage's reading of it."""

    code: int
    mnemonic: str  # NVIDIA's name, e.g. ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS
    description: str  # NVIDIA's catalog description ("Unused" = Volta-or-older only)
    legacy_name: str  # the r555 (Volta-era) document's name
    applies_to: tuple[str, ...]  # of A100, H100, B100, GB200
    klass: str  # one of CLASSES
    reading: str  # the class in words, e.g. "PCIe/bus HW (or GPU HW / driver)"
    immediate: str  # NVIDIA's immediate-action bucket, e.g. RESTART_BM
    investigatory: str  # NVIDIA's investigatory bucket
    action: str  # what to do, in words
    xid154_since: str  # driver branch since which it feeds Xid 154 ("" = does not)
    legacy_causes: tuple[str, ...]  # r555 cause flags: hardware, driver, user application...
    plugin_skips: bool  # the k8s-device-plugin ignores it as an application error
    other_tools: str  # how DCGM, Azure NPD, gpud... treat it
    notes: str
    source: str  # tags of the sources, see sources()

    @property
    def hardware(self) -> bool:
        return self.klass in HARDWARE_CLASSES

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "mnemonic": self.mnemonic,
            "description": self.description,
            "legacy_name": self.legacy_name,
            "applies_to": list(self.applies_to),
            "klass": self.klass,
            "reading": self.reading,
            "immediate": self.immediate,
            "investigatory": self.investigatory,
            "action": self.action,
            "xid154_since": self.xid154_since,
            "legacy_causes": list(self.legacy_causes),
            "plugin_skips": self.plugin_skips,
            "other_tools": self.other_tools,
            "notes": self.notes,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class SxidInfo:
    """An NVSwitch SXid code and its Fabric Manager class."""

    code: int
    name: str  # "" when the guide lists the code without a name
    klass: str  # non-fatal | potentially-fatal | always-fatal
    action: str

    @property
    def fatal(self) -> bool:
        return self.klass == "always-fatal"

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "name": self.name, "klass": self.klass, "action": self.action}


@cache
def _data() -> dict[str, Any]:
    text = resources.files("gputriage.xid").joinpath("xids.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@cache
def _xids() -> dict[int, XidInfo]:
    table: dict[int, XidInfo] = {}
    for row in _data()["xids"]:
        info = XidInfo(
            **{
                **row,
                "applies_to": tuple(row["applies_to"]),
                "legacy_causes": tuple(row["legacy_causes"]),
            }
        )
        table[info.code] = info
    return table


@cache
def _sxids() -> dict[int, SxidInfo]:
    return {row["code"]: SxidInfo(**row) for row in _data()["sxids"]}


def lookup(code: int) -> XidInfo | None:
    """The catalog row of Xid ``code``, or None when NVIDIA's catalog does not list it."""
    return _xids().get(code)


def all() -> tuple[XidInfo, ...]:  # shadows the builtin on purpose: catalog.all()
    """Every catalogued Xid, in code order."""
    return tuple(_xids()[c] for c in sorted(_xids()))


def lookup_sxid(code: int) -> SxidInfo | None:
    """The Fabric Manager class of SXid ``code``, or None when the guide does not list it."""
    return _sxids().get(code)


def all_sxids() -> tuple[SxidInfo, ...]:
    return tuple(_sxids()[c] for c in sorted(_sxids()))


def plugin_skipped_xids() -> tuple[int, ...]:
    """Xids the NVIDIA k8s-device-plugin ignores by default (its application-error list)."""
    return tuple(_data()["device_plugin_skips"])


def bucket_meaning(bucket: str) -> str:
    """What an NVIDIA resolution bucket (RESET_GPU, WORKFLOW_XID_45...) asks for ("" if unknown)."""
    buckets: dict[str, str] = _data()["buckets"]
    return buckets.get(bucket, "")


def recovery_action_name(value: int) -> str:
    """NVML's name for a GPU recovery action value (Xid 154), e.g. 2 -> Node Reboot Required."""
    names: dict[str, str] = _data()["recovery_actions"]
    return names.get(str(value), "")


def sources() -> dict[str, str]:
    """Source tags used in ``XidInfo.source`` and what each one is."""
    found: dict[str, str] = _data()["sources"]
    return found
