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
from typing import Any

import pytest

from gputriage.cli import main
from tests.conftest import require_tool
from tests.kubeapi import KubeAPI
from tests.live import open_live
from tests.sshd import SshLab

pytestmark = pytest.mark.integration

CHECKPOINT_PATH = "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"
LOST_UUID = "GPU-4a1b7c2e-9d3f-5e6a-8b0c-1d2e3f4a5b6c"


def _run(lab: SshLab, kubeconfig: Path, out: Path, pod: str = "trainer-0") -> dict:
    rc = main([pod, *lab.cli_flags(kubeconfig), "--report", "json", "-o", str(out)])
    assert rc in (0, 3)
    return json.loads(out.read_text())


def test_report_maps_the_pod_to_its_gpus_and_names_the_lost_one(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    require_tool("sshd", "/usr/sbin/sshd")
    with SshLab(tmp_path / "ssh") as lab:
        # The lab node's cat serves tests/fixtures/node/kubelet_internal_checkpoint there.
        report = _run(lab, kubeconfig, tmp_path / "r.json")
        commands = lab.node.commands()
    assert any(CHECKPOINT_PATH in c for c in commands)
    sources = {s["key"]: s for s in report["sources"]}
    assert sources["device-checkpoint"]["status"] == "ok"
    assert sources["device-checkpoint"]["source"] == f"ssh gpu-node-1: cat {CHECKPOINT_PATH}"
    gpus = report["placement"]
    assert len(gpus["pod_gpus"]) == 8 and {g["container"] for g in gpus["pod_gpus"]} == {"trainer"}
    lost = next(g for g in gpus["pod_gpus"] if g["uuid"] == LOST_UUID)
    assert (lost["pci"], lost["serial"]) == ("0000:3B:00.0", "1652923017935")
    assert lost["fault"].startswith("Xid 79")
    faulty = {g["uuid"]: g for g in gpus["faulty_gpus"]}
    assert faulty[LOST_UUID]["pods"] == ["ml/trainer-0 (trainer)"]


def test_gpu_operator_node_runs_nvidia_smi_from_the_driver_root(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    require_tool("sshd", "/usr/sbin/sshd")
    with SshLab(tmp_path / "ssh") as lab:
        lab.remove_tool("nvidia-smi")  # not on the host PATH on Operator nodes
        # The driver container's root: its nvidia-smi answers (fixture chroot for that root).
        lab.write_tool(
            "chroot",
            'if [ "$1" = /run/nvidia/driver ] && [ "$2" = nvidia-smi ]; '
            'then exec cat "$DATA/nvidia-smi.xml"; fi\n'
            'echo "chroot: unexpected: $*" >&2; exit 125\n',
        )
        report = _run(lab, kubeconfig, tmp_path / "r.json")
        commands = lab.node.commands()
    smi = {s["key"]: s for s in report["sources"]}["nvidia-smi"]
    assert smi["status"] == "ok"
    assert smi["source"] == "ssh gpu-node-1: chroot /run/nvidia/driver nvidia-smi -q -x"
    assert "nvidia-smi is not installed on the node" in smi["detail"]
    assert any("chroot /run/nvidia/driver nvidia-smi -q -x" in c for c in commands)


def test_node_without_nvidia_smi_or_operator_driver_says_so(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
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


# -- the GPU Operator's components through the API -------------------------------------------

#: toolkit-validation's failure as NVIDIA/gpu-operator#1374 reports it.
TOOLKIT_FAILURE = (
    'time="2026-11-02T09:20:11Z" level=info msg="Error: error validating toolkit '
    'installation: exec: \\"nvidia-smi\\": executable file not found in $PATH"\n'
)


def _operator_on_gpu_node_1(cl: Any) -> None:
    from tests.kubeapi import cluster as c

    driver = c.pod(
        "nvidia-driver-daemonset-8x2lq",
        "gpu-operator",
        node="gpu-node-1",
        gpus=0,
        labels={"app": "nvidia-driver-daemonset"},
        containers=[c.container("nvidia-driver-ctr", image="nvcr.io/nvidia/driver:550.127.08")],
        statuses=[c.running("nvidia-driver-ctr")],
    )
    inits = ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation")
    validator = c.pod(
        "nvidia-operator-validator-4kq9z",
        "gpu-operator",
        node="gpu-node-1",
        gpus=0,
        labels={"app": "nvidia-operator-validator", "app.kubernetes.io/part-of": "gpu-operator"},
        containers=[c.container("nvidia-operator-validator")],
        init_containers=[c.container(n) for n in inits],
        init_statuses=[
            {
                "name": "driver-validation",
                "ready": True,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
            },
            c.waiting("toolkit-validation", "CrashLoopBackOff", restarts=7),
            c.waiting("cuda-validation", "PodInitializing"),
            c.waiting("plugin-validation", "PodInitializing"),
        ],
        statuses=[c.waiting("nvidia-operator-validator", "PodInitializing")],
        phase="Pending",
    )
    policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {},
        "status": {"state": "notReady", "namespace": "gpu-operator"},
    }
    cl.add(driver, validator, policy)
    cl.add_log(validator, TOOLKIT_FAILURE, container="toolkit-validation")


def test_gpu_operator_components_and_validator_logs(
    kube_api: KubeAPI, kube_cluster: Any, kubeconfig: Path, tmp_path: Path
) -> None:
    from gputriage.evidence.model import Key
    from gputriage.facts.build import build_facts
    from tests.integration.conftest import node_overrides

    _operator_on_gpu_node_1(kube_cluster)
    from gputriage.cli import build_parser

    args = build_parser().parse_args(
        [
            "triage",
            "trainer-0",
            "-n",
            "ml",
            "--kubeconfig",
            str(kubeconfig),
            "--ssh",
            "off",
            *node_overrides(kube_cluster),
        ]
    )
    session = open_live(args)
    try:
        evidence = session.collect_all()
    finally:
        session.close()
    assert evidence[Key.GPU_OPERATOR].ok, evidence[Key.GPU_OPERATOR].detail
    group = build_facts(evidence).groups["gpu_operator"]
    v = group.values
    assert v["present"] and v["driver_containerized"]
    assert v["cluster_policy_state"] == "notReady"
    by = {c["component"]: c for c in v["components"]}
    assert set(by) == {"driver", "validator", "device-plugin"}
    assert by["validator"]["waiting_reason"] == "CrashLoopBackOff"
    assert by["validator"]["failed_inits"] == [
        "toolkit-validation",
        "cuda-validation",
        "plugin-validation",
    ]
    assert "validator" in v["not_ready"] and "driver" not in v["not_ready"]
    toolkit = next(f for f in v["validator_failures"] if f["container"] == "toolkit-validation")
    assert "executable file not found in $PATH" in toolkit["lines"][-1]
    assert group.cites["validator_failures"]
    # Only GETs, and the validator's log came through pods/log.
    logs = [
        r
        for r in kube_api.requests
        if r.path.endswith("/log") and r.param("container") == "toolkit-validation"
    ]
    assert logs and all(r.method == "GET" for r in kube_api.requests)
