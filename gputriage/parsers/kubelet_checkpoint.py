"""The kubelet's device-manager checkpoint: which devices each container of each pod was given.

``/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint`` is JSON written by the
kubelet's device manager (``pkg/kubelet/cm/devicemanager/checkpoint``)::

    {"Data": {"PodDeviceEntries": [{"PodUID": "...", "ContainerName": "trainer",
                                    "ResourceName": "nvidia.com/gpu",
                                    "DeviceIDs": {"0": ["GPU-..."], "1": ["GPU-..."]},
                                    "AllocResp": "<base64 ContainerAllocateResponse>"}],
              "RegisteredDevices": {"nvidia.com/gpu": ["GPU-...", ...]}},
     "Checksum": 1234567890, "BootID": "..."}

``DeviceIDs`` is keyed by NUMA node (``"-1"`` without NUMA information); kubelets before 1.20
wrote a plain list. The NVIDIA device plugin names devices by UUID (``GPU-...``, ``MIG-...``),
by index with ``deviceIDStrategy=index``, and adds ``::N`` to shared replicas (time-slicing,
MPS). ``AllocResp`` is the plugin's protobuf answer to Allocate; its ``envs`` map carries
``NVIDIA_VISIBLE_DEVICES``, which names the physical GPUs whatever the ID strategy, so it is
decoded too (a minimal protobuf reader for that one map; nothing else is trusted from it).

Pure and total: bad input gives ``problems``, never an exception.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

#: The environment variable NVIDIA's device plugin sets to the GPUs a container gets.
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
#: Entries read at most (a node runs at most a few hundred pods).
MAX_ENTRIES = 5000
#: AllocResp blobs bigger than this are not decoded.
MAX_ALLOC_RESP = 64 * 1024


@dataclass(frozen=True)
class DeviceEntry:
    """One container's devices of one resource."""

    pod_uid: str
    container: str
    resource: str
    device_ids: tuple[str, ...]  # as the plugin named them, NUMA nodes in order
    numa: dict[str, tuple[str, ...]]  # NUMA node ("-1": unknown) -> device IDs
    visible_devices: tuple[str, ...]  # NVIDIA_VISIBLE_DEVICES from AllocResp ("" items dropped)

    @property
    def gpus(self) -> tuple[str, ...]:
        """The physical devices: NVIDIA_VISIBLE_DEVICES when it names UUIDs, else the device
        IDs without a shared-replica ``::N`` suffix (order kept, duplicates dropped)."""
        named = tuple(v for v in self.visible_devices if v.startswith(("GPU-", "MIG-")))
        source = named or tuple(d.split("::", 1)[0] for d in self.device_ids)
        return tuple(dict.fromkeys(source))


@dataclass
class Checkpoint:
    """The parsed checkpoint."""

    entries: list[DeviceEntry] = field(default_factory=list)
    registered: dict[str, list[str]] = field(default_factory=dict)
    checksum: int | None = None
    boot_id: str = ""
    problems: list[str] = field(default_factory=list)


def parse_checkpoint(text: str) -> Checkpoint:
    """Parse the checkpoint's JSON text."""
    result = Checkpoint()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        result.problems.append(f"not JSON: {exc}")
        return result
    if not isinstance(data, dict) or not isinstance(data.get("Data"), dict):
        result.problems.append("no Data object: not a kubelet device-manager checkpoint")
        return result
    body = data["Data"]
    checksum = data.get("Checksum")
    result.checksum = (
        checksum if isinstance(checksum, int) and not isinstance(checksum, bool) else None
    )
    result.boot_id = str(data.get("BootID") or "")
    registered = body.get("RegisteredDevices")
    if isinstance(registered, dict):
        result.registered = {
            str(k): [str(d) for d in v if isinstance(d, str)]
            for k, v in registered.items()
            if isinstance(v, list)
        }
    entries = body.get("PodDeviceEntries")
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        result.problems.append("PodDeviceEntries is not a list")
        return result
    for i, raw in enumerate(entries[:MAX_ENTRIES]):
        entry = _entry(raw, i, result.problems)
        if entry is not None:
            result.entries.append(entry)
    if len(entries) > MAX_ENTRIES:
        result.problems.append(
            f"{len(entries) - MAX_ENTRIES} entries beyond {MAX_ENTRIES} not read"
        )
    return result


def _entry(raw: Any, i: int, problems: list[str]) -> DeviceEntry | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("PodUID"), str):
        problems.append(f"entry {i} has no PodUID")
        return None
    ids = raw.get("DeviceIDs")
    numa: dict[str, tuple[str, ...]] = {}
    if isinstance(ids, dict):  # v2: NUMA node -> IDs
        for node in sorted(ids, key=_numa_order):
            value = ids[node]
            if isinstance(value, list):
                numa[str(node)] = tuple(str(d) for d in value if isinstance(d, str))
    elif isinstance(ids, list):  # v1 (kubelet < 1.20): a plain list
        numa["-1"] = tuple(str(d) for d in ids if isinstance(d, str))
    flat = tuple(d for node in numa.values() for d in node)
    return DeviceEntry(
        str(raw["PodUID"]),
        str(raw.get("ContainerName") or ""),
        str(raw.get("ResourceName") or ""),
        flat,
        numa,
        _visible_devices(raw.get("AllocResp")),
    )


def _numa_order(node: Any) -> tuple[int, str]:
    try:
        return (int(node), "")
    except (TypeError, ValueError):
        return (1 << 30, str(node))


def _visible_devices(blob: Any) -> tuple[str, ...]:
    if not isinstance(blob, str) or not blob or len(blob) > MAX_ALLOC_RESP:
        return ()
    try:
        data = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return ()
    value = allocate_envs(data).get(VISIBLE_DEVICES, "")
    return tuple(v.strip() for v in value.split(",") if v.strip())


def allocate_envs(data: bytes) -> dict[str, str]:
    """The ``envs`` map (field 1) of a protobuf ContainerAllocateResponse; other fields are
    skipped. Malformed input yields what was read before the fault."""
    envs: dict[str, str] = {}
    for number, value in _fields(data):
        if number == 1 and isinstance(value, bytes):
            entry = dict(_fields(value))
            key, val = entry.get(1), entry.get(2, b"")
            if isinstance(key, bytes) and isinstance(val, bytes):
                envs[key.decode("utf-8", "replace")] = val.decode("utf-8", "replace")
    return envs


def _fields(data: bytes) -> list[tuple[int, bytes | int]]:
    """(field number, value) pairs of one protobuf message: length-delimited values as bytes,
    varints as int; stops at the first malformed field."""
    out: list[tuple[int, bytes | int]] = []
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        if tag < 0:
            break
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            if value < 0:
                break
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            if length < 0 or pos + length > len(data):
                break
            out.append((number, data[pos : pos + length]))
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            break
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    return -1, pos
