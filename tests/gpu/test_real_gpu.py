"""On a machine with an NVIDIA GPU: the real NVML adapter agrees with nvidia-smi.

Skips where there is no GPU (no ``nvidia-smi`` or no ``libnvidia-ml``), also under CI.
"""

from __future__ import annotations

import ctypes.util
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from gputriage.evidence.local import LocalNodeSource
from gputriage.evidence.model import Key, Status
from gputriage.evidence.nvml import PynvmlAdapter, normalise_pci, nvml_evidence, read_snapshot
from gputriage.evidence.sources import NodeQuery

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        shutil.which("nvidia-smi") is None or ctypes.util.find_library("nvidia-ml") is None,
        reason="needs an NVIDIA GPU with its driver (nvidia-smi, libnvidia-ml)",
    ),
]


def nvidia_smi_gpus() -> list[tuple[str, str, int]]:
    """(uuid, pci bus id, total MiB) per GPU, from ``nvidia-smi -q -x``."""
    xml = subprocess.run(
        ["nvidia-smi", "-q", "-x"], check=True, capture_output=True, timeout=60
    ).stdout
    root = ET.fromstring(xml)
    gpus = []
    for gpu in root.iter("gpu"):
        total = (gpu.findtext("fb_memory_usage/total") or "0 MiB").split()[0]
        gpus.append((gpu.findtext("uuid") or "", normalise_pci(gpu.get("id", "")), int(total)))
    return gpus


def test_nvml_snapshot_matches_nvidia_smi() -> None:
    snap = read_snapshot(PynvmlAdapter())
    assert snap.status == "ok", snap.message
    expected = nvidia_smi_gpus()
    assert snap.attached_gpus == len(expected) == len(snap.gpus)
    assert [(g.uuid, g.pci_bus_id) for g in snap.gpus] == [(u, p) for u, p, _ in expected]
    for gpu, (_uuid, _pci, total_mib) in zip(snap.gpus, expected, strict=True):
        assert gpu.name
        assert gpu.memory_total_mib is not None and abs(gpu.memory_total_mib - total_mib) <= 1
        assert gpu.mig_mode in ("Enabled", "Disabled", None)
    assert snap.driver_version and snap.cuda_version


def test_local_source_reads_nvml_and_the_real_device_nodes() -> None:
    source = LocalNodeSource()
    query = NodeQuery(node="this-node", address="")
    smi = source.collect(Key.NVIDIA_SMI, query, timeout=60)
    assert smi.status is Status.OK and smi.format == "nvml"
    assert smi.data["gpus"] and smi.data["status"] == "ok"
    dev = source.collect(Key.DEV_NVIDIA, query, timeout=10)
    assert dev.ok and "/dev/nvidia0" in dev.raw
    assert nvml_evidence().status is Status.OK
