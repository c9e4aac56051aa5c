"""The built-in demo scenarios: the index API, consistency, and the facts each one is for."""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Any

import pytest

from gputriage.errors import GputriageError
from gputriage.evidence.bundle import read_bundle, read_meta
from gputriage.evidence.model import BUNDLE_FILES, Status
from gputriage.facts.build import build_facts
from gputriage.facts.model import FactSet
from gputriage.scenarios import list_scenarios, scenario_path

NAMES = ["create-nvidia-uvm-missing", "lost-xid79", "oom-time-sliced", "pending-insufficient-gpu"]


def load(name: str, file: str) -> Any:
    return json.loads((scenario_path(name) / file).read_text(encoding="utf-8"))


def facts(name: str) -> FactSet:
    return build_facts(read_bundle(scenario_path(name)))


def test_index() -> None:
    infos = list_scenarios()
    assert [i.name for i in infos] == NAMES
    assert [i.family for i in infos] == ["container-create", "lost-gpu", "oom", "pending"]
    for info in infos:
        assert info.title and info.description and "\n" not in info.description
        assert info.path == scenario_path(info.name) and (info.path / "pod.json").is_file()


def test_unknown_scenario_names_close_matches() -> None:
    with pytest.raises(GputriageError) as err:
        scenario_path("lost-xid")
    assert err.value.title == "unknown scenario"
    assert "Did you mean lost-xid79?" in err.value.message
    assert "pending-insufficient-gpu" in err.value.message
    with pytest.raises(GputriageError, match=r"no demo scenario named '\.\./etc'"):
        scenario_path("../etc")


@pytest.mark.parametrize("name", NAMES)
def test_every_file_reads_and_every_gap_is_explained(name: str) -> None:
    path = scenario_path(name)
    evidence = read_bundle(path)
    recorded = read_meta(path)["sources"]
    for key, ev in evidence.items():
        present = any((path / f).exists() for f in BUNDLE_FILES[key])
        if present:
            assert ev.ok, (key, ev.detail)
        elif key.value in recorded:
            assert ev.status is Status(recorded[key.value]["status"])
            assert ev.detail == recorded[key.value]["detail"]
    internal = {
        n: g.reason for n, g in build_facts(evidence).groups.items() if "internal error" in g.reason
    }
    assert internal == {}


@pytest.mark.parametrize("name", NAMES)
def test_one_node_one_story(name: str) -> None:
    """Node name, host names and addresses agree across files; every address is private."""
    path = scenario_path(name)
    pod = load(name, "pod.json")
    node = pod["spec"].get("nodeName", "")
    if (path / "node.json").exists():
        assert load(name, "node.json")["metadata"]["name"] == node
    pods = load(name, "node-pods.json")["items"]
    hosts = {p["spec"]["nodeName"] for p in pods}
    assert len(hosts) == 1 and (not node or hosts == {node})
    if (path / "kubelet.log").exists():
        kubelet_hosts = {
            line.split()[1]
            for line in (path / "kubelet.log").read_text(encoding="utf-8").splitlines()
        }
        assert kubelet_hosts == {node}
    seen = set()
    for file in path.iterdir():
        text = file.read_text(encoding="utf-8")
        for ip in re.findall(r"(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?![\d.])", text):
            assert ipaddress.ip_address(ip).is_private, (file.name, ip)
            seen.add(ip)
    assert any(ip.startswith("10.0.") for ip in seen)


def test_pending_insufficient_gpu() -> None:
    f = facts("pending-insufficient-gpu")
    [event] = load("pending-insufficient-gpu", "events.json")["items"]
    assert event["message"].startswith(
        "0/4 nodes are available: 1 node(s) had untolerated taint "
        "{node-role.kubernetes.io/control-plane: }, 3 Insufficient nvidia.com/gpu. preemption:"
    )
    gpu_nodes = [
        n
        for n in load("pending-insufficient-gpu", "nodes.json")["items"]
        if "nvidia.com/gpu" in n["status"]["capacity"]
    ]
    assert [n["status"]["allocatable"]["nvidia.com/gpu"] for n in gpu_nodes] == ["4"] * 3
    terminating = [
        p
        for p in load("pending-insufficient-gpu", "node-pods.json")["items"]
        if p["metadata"].get("deletionTimestamp")
    ]
    assert [
        p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] for p in terminating
    ] == ["2"]
    dp = f["device_plugin"].values
    assert dp["pod_found"] and dp["pod_ready"] and not dp["log_known"]
    assert dp["log_reason"].endswith("the pod is not scheduled to a node")
    assert not f["kubelet"].known
    # cross-group (scheduler and cluster groups are owned by others)
    assert f.value("scheduler.insufficient_gpu") == 3
    assert f.value("cluster.terminating_holders") == 1
    assert f.value("cluster.gpus_held_by_terminating") == 2


def test_create_nvidia_uvm_missing() -> None:
    f = facts("create-nvidia-uvm-missing")
    path = scenario_path("create-nvidia-uvm-missing")
    assert "nvidia_uvm" not in (path / "lsmod.txt").read_text(encoding="utf-8")
    assert "nvidia-uvm" not in (path / "dev-nvidia.txt").read_text(encoding="utf-8")
    status = load("create-nvidia-uvm-missing", "pod.json")["status"]["containerStatuses"][0]
    assert status["state"]["waiting"]["reason"] == "RunContainerError"
    k = f["kubelet"].values
    assert [(e["kind"], e["message"]) for e in k["nvidia_container_cli_errors"]] == [
        (
            "mount",
            "nvidia-container-cli: mount error: stat failed: /dev/nvidia-uvm: no such file "
            "or directory",
        )
    ]
    assert k["nvidia_container_cli_errors"][0]["count"] == 7
    assert k["device_manager_registered"] == ["nvidia.com/gpu"] and k["lines_for_pod"] == 10
    dp = f["device_plugin"].values
    assert dp["registered"] and dp["pod_ready"] and dp["unhealthy_devices"] == []
    # cross-group (host, pod and gpus groups are owned by others)
    assert f.value("host.nvidia_uvm") is False and f.value("host.nvidia") is True
    assert f.value("host.dev_nvidia_uvm") is False
    assert f.value("host.containerd_nvidia_runtime") is True
    assert f.value("gpus.count") == 4


def test_oom_time_sliced() -> None:
    f = facts("oom-time-sliced")
    dp = f["device_plugin"].values
    assert dp["shared"] and dp["config"]["sharing"] == "time-slicing"
    assert dp["config"]["replicas"] == 4 and dp["resources_registered"] == ["nvidia.com/gpu"]
    node = load("oom-time-sliced", "node.json")
    assert node["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "4"
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "4"
    log = (scenario_path("oom-time-sliced") / "container-previous.log").read_text("utf-8")
    assert "Process 48213 has 10.21 GiB memory in use" in log
    # cross-group (container_log and gpus groups are owned by others)
    assert f.value("container_log.cuda_oom") is True
    assert f.value("container_log.oom_other_process_mib") > 10_000
    [gpu] = f.value("gpus.gpus")
    assert (gpu["name"], gpu["memory_total_mib"]) == ("Tesla T4", 15360)
    assert [(p["pid"], p["used_memory_mib"]) for p in gpu["processes"]] == [(48213, 10456)]


def test_lost_xid79() -> None:
    f = facts("lost-xid79")
    path = scenario_path("lost-xid79")
    uuid = "GPU-5f2d3c9e-8a41-7b6e-92c1-4d0e8f7a6b13"
    dmesg = (path / "dmesg.log").read_text(encoding="utf-8")
    assert (
        "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off "
        "the bus."
    ) in dmesg
    assert f"NVRM: GPU at PCI:0000:3b:00: {uuid}" in dmesg
    assert (path / "nvidia-smi.txt").read_text(encoding="utf-8") == (
        "Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error\n"
    )
    status = load("lost-xid79", "node.json")["status"]
    assert (status["capacity"]["nvidia.com/gpu"], status["allocatable"]["nvidia.com/gpu"]) == (
        "8",
        "7",
    )
    dp = f["device_plugin"].values
    assert dp["unhealthy_devices"] == [
        {
            "uuid": uuid,
            "xid": 79,
            "resource": "nvidia.com/gpu",
            "reason": "xid",
            "line": 49,
            "xid_klass": "hardware",
            "xid_immediate_action": "RESTART_BM",
        }
    ]
    assert dp["unhealthy_xids"] == [79] and dp["pod_found"]
    assert f["kubelet"].values["lines_for_pod"] == 4
    # cross-group (kernel, gpus and node groups are owned by others)
    assert f.value("kernel.xid_codes") == [79]
    assert f.value("kernel.fallen_off_bus_pci") == ["0000:3B:00"]
    assert f.value("gpus.lost_pci_ids") == ["0000:3B:00.0"]
    assert f.value("node.capacity_gt_allocatable") == ["nvidia.com/gpu"]


def test_scenarios_are_package_data() -> None:
    root = Path(scenario_path("lost-xid79")).parent
    assert (root / "__init__.py").is_file()
    assert (
        sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("_")) == NAMES
    )
