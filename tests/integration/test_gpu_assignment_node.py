"""Which GPU a pod has, and GPU Operator nodes, against the local HTTPS API and a real sshd
behind a ProxyJump bastion:

* the kubelet's device-plugin checkpoint (real format, tests/fixtures/node) read over SSH maps
  trainer-0 to its GPUs, and the report names the one the kernel log lost (UUID, PCI, serial);
* a node whose driver is containerized (GPU Operator: nvidia-smi only under
  /run/nvidia/driver) yields nvidia-smi facts through chroot; a node with neither says so.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gputriage.cli import main
from tests.conftest import require_tool
from tests.kubeapi import KubeAPI
from tests.sshd import SshLab

pytestmark = pytest.mark.integration

CHECKPOINT_PATH = "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"
LOST_UUID = "GPU-4a1b7c2e-9d3f-5e6a-8b0c-1d2e3f4a5b6c"


def _run(lab: SshLab, kubeconfig: Path, out: Path, pod: str = "trainer-0") -> dict:
    rc = main([pod, "-n", "ml", "--kubeconfig", str(kubeconfig), "--ssh-config",
               str(lab.config), "--known-hosts", str(lab.known_hosts), "--report", "json",
               "-o", str(out)])
    assert rc in (0, 3)
    return json.loads(out.read_text())


def test_report_maps_the_pod_to_its_gpus_and_names_the_lost_one(
        kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path) -> None:
    require_tool("sshd", "/usr/sbin/sshd")
    with SshLab(tmp_path / "ssh") as lab:
        # The lab node's cat serves tests/fixtures/node/kubelet_internal_checkpoint there.
        report = _run(lab, kubeconfig, tmp_path / "r.json")
        commands = lab.node.commands()
    assert any(CHECKPOINT_PATH in c for c in commands)
    sources = {s["key"]: s for s in report["sources"]}
    assert sources["device-checkpoint"]["status"] == "ok"
    assert sources["device-checkpoint"]["source"] == f"ssh gpu-node-1: cat {CHECKPOINT_PATH}"
    gpus = report["gpus"]
    assert len(gpus["pod_gpus"]) == 8 and {g["container"] for g in gpus["pod_gpus"]} == {
        "trainer"}
    lost = next(g for g in gpus["pod_gpus"] if g["uuid"] == LOST_UUID)
    assert (lost["pci"], lost["serial"]) == ("0000:3B:00.0", "1652923017935")
    assert lost["fault"].startswith("Xid 79")
    faulty = {g["uuid"]: g for g in gpus["faulty_gpus"]}
    assert faulty[LOST_UUID]["pods"] == ["ml/trainer-0 (trainer)"]


def test_gpu_operator_node_runs_nvidia_smi_from_the_driver_root(
        kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path) -> None:
    require_tool("sshd", "/usr/sbin/sshd")
    with SshLab(tmp_path / "ssh") as lab:
        lab.remove_tool("nvidia-smi")  # not on the host PATH on Operator nodes
        # The driver container's root: its nvidia-smi answers (fixture chroot for that root).
        lab.write_tool("chroot", 'if [ "$1" = /run/nvidia/driver ] && [ "$2" = nvidia-smi ]; '
                                 'then exec cat "$DATA/nvidia-smi.xml"; fi\n'
                                 'echo "chroot: unexpected: $*" >&2; exit 125\n')
        report = _run(lab, kubeconfig, tmp_path / "r.json")
        commands = lab.node.commands()
    smi = {s["key"]: s for s in report["sources"]}["nvidia-smi"]
    assert smi["status"] == "ok"
    assert smi["source"] == "ssh gpu-node-1: chroot /run/nvidia/driver nvidia-smi -q -x"
    assert "nvidia-smi is not installed on the node" in smi["detail"]
    assert any("chroot /run/nvidia/driver nvidia-smi -q -x" in c for c in commands)


def test_node_without_nvidia_smi_or_operator_driver_says_so(
        kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path) -> None:
    require_tool("sshd", "/usr/sbin/sshd")
    real_chroot = "/usr/sbin/chroot"
    if not os.access(real_chroot, os.X_OK) or Path("/run/nvidia/driver").exists():
        pytest.skip("needs /usr/sbin/chroot and no /run/nvidia/driver on this machine")
    with SshLab(tmp_path / "ssh") as lab:
        lab.remove_tool("nvidia-smi")
        (lab.bin / "chroot").symlink_to(real_chroot)  # the real one: the root does not exist
        report = _run(lab, kubeconfig, tmp_path / "r.json")
    smi = {s["key"]: s for s in report["sources"]}["nvidia-smi"]
    assert smi["status"] == "unavailable"
    assert "nvidia-smi is not installed on the node" in smi["detail"]
    assert "/run/nvidia/driver" in smi["detail"] and "No such file or directory" in smi["detail"]
