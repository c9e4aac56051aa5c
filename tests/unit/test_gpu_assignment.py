"""The kubelet's device-plugin checkpoint (real format) and the ``gpu_assignment`` facts: which
GPUs a pod has, which pods sit on a faulty GPU."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from gputriage.evidence.bundle import decode
from gputriage.evidence.model import EvidenceSet, Key
from gputriage.facts.build import build_facts
from gputriage.parsers.kubelet_checkpoint import allocate_envs, parse_checkpoint
from tests.kubeapi.cluster import uid_for
from tests.sshd import KERNEL_LOG, NVIDIA_SMI_XML

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = (ROOT / "tests" / "fixtures" / "node" / "kubelet_internal_checkpoint").read_text()
LOST_UUID = "GPU-4a1b7c2e-9d3f-5e6a-8b0c-1d2e3f4a5b6c"
#: The shape a kind cluster's kubelet wrote for a Jetson (device ID "tegra", no NUMA).
TEGRA = (
    '{"Data":{"PodDeviceEntries":[{"PodUID":"bf52b2cd-b611-4e79-86b1-280b283185c3",'
    '"ContainerName":"check","ResourceName":"nvidia.com/gpu","DeviceIDs":{"-1":["tegra"]},'
    '"AllocResp":"Ch8KFk5WSURJQV9WSVNJQkxFX0RFVklDRVMSBXRlZ3Jh"}],'
    '"RegisteredDevices":{"nvidia.com/gpu":["tegra"]}},"Checksum":3660592824}'
)


def test_real_format_with_numa_nodes_and_allocate_response() -> None:
    cp = parse_checkpoint(CHECKPOINT)
    assert cp.problems == [] and cp.checksum == 2931415812
    trainer = cp.entries[0]
    assert (trainer.pod_uid, trainer.container, trainer.resource) == (
        uid_for("Pod", "ml", "trainer-0"),
        "trainer",
        "nvidia.com/gpu",
    )
    assert list(trainer.numa) == ["0", "1"] and len(trainer.device_ids) == 8
    assert trainer.visible_devices[0] == LOST_UUID and trainer.gpus[0] == LOST_UUID
    assert len(cp.registered["nvidia.com/gpu"]) == 10


def test_allocate_response_names_the_device_whatever_the_id() -> None:
    cp = parse_checkpoint(TEGRA)
    assert cp.entries[0].visible_devices == ("tegra",)
    assert allocate_envs(base64.b64decode("Ch8KFk5WSURJQV9WSVNJQkxFX0RFVklDRVMSBXRlZ3Jh")) == {
        "NVIDIA_VISIBLE_DEVICES": "tegra"
    }


def test_index_ids_and_shared_replicas_resolve_to_physical_gpus() -> None:
    entry = {
        "PodUID": "u",
        "ContainerName": "c",
        "ResourceName": "nvidia.com/gpu",
        "DeviceIDs": ["GPU-aaa::0", "GPU-aaa::3"],
    }  # v1 list, time-sliced replicas
    cp = parse_checkpoint(json.dumps({"Data": {"PodDeviceEntries": [entry]}}))
    assert cp.entries[0].numa == {"-1": ("GPU-aaa::0", "GPU-aaa::3")}
    assert cp.entries[0].gpus == ("GPU-aaa",)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "[]",
        '{"Data": 3}',
        '{"Data":{"PodDeviceEntries":7}}',
        '{"Data":{"PodDeviceEntries":[{"x":1}]}}',
        '{"Data":{"PodDeviceEntries":[{"PodUID":"u","AllocResp":"%%%"}]}}',
        '{"Data":{"PodDeviceEntries":[{"PodUID":"u","AllocResp":"/////"}]}}',
        "[" * 100000,
    ],
)
def test_bad_checkpoints_are_problems_not_exceptions(text: str) -> None:
    cp = parse_checkpoint(text)
    assert cp.problems or all(e.pod_uid == "u" for e in cp.entries)


def _evidence(*, dmesg: str = KERNEL_LOG) -> EvidenceSet:
    pods = {
        "kind": "PodList",
        "apiVersion": "v1",
        "items": [
            {
                "kind": "Pod",
                "metadata": {
                    "name": "trainer-0",
                    "namespace": "ml",
                    "uid": uid_for("Pod", "ml", "trainer-0"),
                },
                "spec": {"nodeName": "gpu-node-1", "containers": [{"name": "trainer"}]},
            }
        ],
    }
    pod = {**pods["items"][0], "apiVersion": "v1", "status": {"phase": "Running"}}
    return EvidenceSet(
        [
            decode(Key.POD, json.dumps(pod).encode(), source="b/pod.json"),
            decode(Key.NODE_PODS, json.dumps(pods).encode(), source="b/node-pods.json"),
            decode(
                Key.DEVICE_CHECKPOINT, CHECKPOINT.encode(), source="b/kubelet_internal_checkpoint"
            ),
            decode(Key.NVIDIA_SMI, NVIDIA_SMI_XML.encode(), source="b/nvidia-smi.xml"),
            decode(Key.DMESG, dmesg.encode(), source="b/dmesg.log"),
        ]
    )


def test_facts_map_the_pod_to_its_gpus_and_the_faulty_gpu_to_its_pods() -> None:
    group = build_facts(_evidence()).groups["gpu_assignment"]
    assert group.known and group.values["entries"] == 2
    gpus = group.values["pod_gpus"]
    assert len(gpus) == 8
    lost = gpus[0]
    assert {k: lost[k] for k in ("container", "uuid", "pci", "serial", "product", "faulty")} == {
        "container": "trainer",
        "uuid": LOST_UUID,
        "pci": "0000:3B:00.0",
        "serial": "1652923017935",
        "product": "NVIDIA A100-SXM4-80GB",
        "faulty": True,
    }
    assert lost["fault"] == "Xid 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS)"
    assert not any(g["faulty"] for g in gpus[1:])  # nvidia-smi knows only the lost one
    assert group.values["pod_on_faulty_gpu"]
    faulty = group.values["faulty_gpus"]
    assert [(g["uuid"], g["pods"]) for g in faulty] == [
        (
            LOST_UUID,
            [
                {
                    "namespace": "ml",
                    "name": "trainer-0",
                    "uid": uid_for("Pod", "ml", "trainer-0"),
                    "container": "trainer",
                }
            ],
        )
    ]
    assert group.values["unassigned_faulty"] == []
    assert str(group.cites["pod_gpus"][0]).startswith("b/kubelet_internal_checkpoint:1:")


def test_no_fault_without_a_hardware_xid() -> None:
    quiet = (
        "2026-03-05T10:02:00+0000 gpu-node-1 kernel: NVRM: loading NVIDIA UNIX x86_64 "
        "Kernel Module  535.183.01\n"
    )
    group = build_facts(_evidence(dmesg=quiet)).groups["gpu_assignment"]
    assert group.known and not group.values["pod_on_faulty_gpu"]
    assert group.values["faulty_gpus"] == []
