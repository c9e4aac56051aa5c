"""GPU inventory per node: labels (GFD/NFD), resources, holders, MIG, time-slicing, and
nvidia-smi per-GPU state and processes, from the shipped scenario bundles and fixture nodes."""

from __future__ import annotations

from pathlib import Path

from gputriage.evidence.bundle import read_bundle
from gputriage.facts.build import build_facts
from gputriage.scan.classify import node_info, pod_info
from gputriage.scan.inventory import holder_of, inventory_lines, node_inventory
from gputriage.scan.nodewalk import node_inventory_of
from tests.kubeapi import cluster as c

SCENARIOS = Path(__file__).resolve().parents[2] / "gputriage" / "scenarios"


def test_time_sliced_node_with_nvidia_smi_processes() -> None:
    evidence = read_bundle(SCENARIOS / "oom-time-sliced")
    inv = node_inventory_of(evidence, build_facts(evidence))
    assert inv is not None
    assert (inv["node"], inv["product"], inv["memory_mib"]) == (
        "gpu-t4-03",
        "Tesla-T4-SHARED",
        15360,
    )
    assert inv["sharing"] == {"strategy": "time-slicing", "replicas": 4}
    assert inv["count_label"] == 1 and inv["advertised_gpus"] == 1
    assert inv["capacity"] == inv["allocatable"] == {"nvidia.com/gpu": 4}
    assert inv["requested"] == {"nvidia.com/gpu": 2} and inv["free"] == {"nvidia.com/gpu": 2}
    assert [h["name"] for h in inv["holders"]] == [
        "whisper-batch-6c9f7d5b8-p4xkm",
        "embed-worker-5d7f8b9c6-t7wzn",
    ]
    assert inv["gpus_source"] == "xml" and inv["driver"] == "535.183.01"
    gpu = inv["gpus"][0]
    assert (gpu["pci"], gpu["uuid"], gpu["memory_used_mib"]) == (
        "0000:00:1E.0",
        "GPU-6f1b9d2e-7c4a-3e85-b0d1-9a2f5c8e4b71",
        10459,
    )
    assert gpu["processes"] == [{"pid": 48213, "name": "python3", "used_memory_mib": 10456}]
    lines = inventory_lines(inv)
    assert lines[0] == "gpu-t4-03: Tesla-T4-SHARED, 15 GiB; label count 1, advertised 1"
    assert "sharing: time-slicing, 4 replicas per GPU" in lines
    assert lines[-1] == (
        "GPU 0 0000:00:1E.0 Tesla T4: 10459/15360 MiB; python3 (pid 48213, 10456 MiB)"
    )


def test_lost_gpu_node_shows_nvidia_smi_error_and_allocatable_drop() -> None:
    evidence = read_bundle(SCENARIOS / "lost-xid79")
    inv = node_inventory_of(evidence, build_facts(evidence))
    assert inv is not None and inv["node"] == "gpu-h100-07"
    assert inv["capacity"] == {"nvidia.com/gpu": 8} and inv["allocatable"] == {"nvidia.com/gpu": 7}
    assert inv["gpus"] == [] and inv["gpus_status"] == "unknown_error"
    assert "allocatable/capacity: nvidia.com/gpu 7/8" in inventory_lines(inv)
    assert inventory_lines(inv)[-1] == (
        "nvidia-smi: unknown_error: Unable to determine the "
        "device handle for GPU 0000:3B:00.0: Unknown Error"
    )


def test_mig_mixed_node_profiles_from_resources_and_labels() -> None:
    node = c.gpu_node(
        "gpu-mig",
        labels={
            "nvidia.com/mig.strategy": "mixed",
            "nvidia.com/mig.config": "all-balanced",
            "nvidia.com/mig.config.state": "success",
            "nvidia.com/mig-3g.40gb.count": "2",
        },
    )
    for key in ("capacity", "allocatable"):
        node["status"][key].update({"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "16"})
    info = node_info(node)
    assert info is not None
    holders = [
        holder_of(p)
        for p in map(
            pod_info,
            (
                c.pod(
                    "a",
                    node="gpu-mig",
                    statuses=[c.running("main")],
                    containers=[c.container("main", gpus=2, gpu_resource="nvidia.com/mig-1g.10gb")],
                ),
                c.pod(
                    "b",
                    node="gpu-mig",
                    phase="Failed",
                    statuses=[c.running("main")],
                    containers=[c.container("main", gpus=4, gpu_resource="nvidia.com/mig-1g.10gb")],
                ),
            ),
        )
        if p
    ]
    inv = node_inventory(info, [h for h in holders if h is not None])
    assert inv["mig"] == {
        "strategy": "mixed",
        "config": "all-balanced",
        "config_state": "success",
        "profiles": {"mig-1g.10gb": 16, "mig-3g.40gb": 2},
        "enabled_on_gpus": 0,
    }
    assert inv["requested"] == {"nvidia.com/mig-1g.10gb": 2}  # the Failed pod holds nothing
    assert inv["free"] == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 14}
    assert (
        "MIG: strategy mixed, config all-balanced (success), profiles mig-1g.10gb=16, mig-3g.40gb=2"
    ) in inventory_lines(inv)


def test_holders_unknown_when_the_pods_were_not_all_listed() -> None:
    info = node_info(c.gpu_node("gpu-a"))
    assert info is not None
    inv = node_inventory(info, None)
    assert inv["requested"] is None and inv["free"] is None and inv["holders"] == []
    assert "pods holding GPUs: not listed (scan with -A to count them)" in inventory_lines(inv)
