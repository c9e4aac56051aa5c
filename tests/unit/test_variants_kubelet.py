"""Kubelet admission wordings: device manager, Topology Manager and general predicates.

Every ``message`` is a real string copied from the public source named beside it (the pod's
``status.message``, a Warning event, or a pasted ``kubectl describe``). Each row is checked as
an event (``facts.events``: it must land in ``admission_errors``) and as the kubelet journal
prints the same event: client-go's event recorder logs ``"Event occurred" object="ns/pod" ...
reason="..." message="..."`` (the line shape pasted in Project-HAMi/HAMi#602), so the journal
rows wrap the real message in that shape instead of inventing journal text.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gputriage.facts.events import summarise
from gputriage.parsers.journal import parse_kubelet_journal
from tests.events import event_record

# (id, event reason, message, expected journal signal: kind, resource, requested, available)
ADMISSION_VARIANTS: list[tuple[str, str, str, dict[str, Any]]] = [
    # k8s < 1.22 "Pod Allocate failed due to", devices unavailable: volcano-sh/volcano#1782
    (
        "pod-allocate-devices-unavailable",
        "UnexpectedAdmissionError",
        "Pod Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
        "Requested: 1, Available: 0, which is unexpected",
        {
            "kind": "devices_unavailable",
            "resource": "nvidia.com/gpu",
            "requested": 1,
            "available": 0,
        },
    ),
    # k8s >= 1.22 "Allocate failed due to": Project-HAMi/HAMi#596
    (
        "allocate-devices-unavailable",
        "UnexpectedAdmissionError",
        "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
        "Requested: 1, Available: 0, which is unexpected",
        {
            "kind": "devices_unavailable",
            "resource": "nvidia.com/gpu",
            "requested": 1,
            "available": 0,
        },
    ),
    # MIG resource, "Pod was rejected:" status prefix, k8s >= 1.27 (#116376):
    # openshift/instaslice-operator#140
    (
        "pod-was-rejected-no-healthy-mig",
        "UnexpectedAdmissionError",
        "Pod was rejected: Allocate failed due to no healthy devices present; cannot allocate "
        "unhealthy devices nvidia.com/mig-1g.5gb, which is unexpected",
        {"kind": "no_healthy_devices", "resource": "nvidia.com/mig-1g.5gb"},
    ),
    # other vendors' resources word it the same: trueforge-org/truecharts#19201
    (
        "no-healthy-amd",
        "UnexpectedAdmissionError",
        "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices "
        "amd.com/gpu, which is unexpected",
        {"kind": "no_healthy_devices", "resource": "amd.com/gpu"},
    ),
    # GetPreferredAllocation, old device-plugin text: kubernetes/kubernetes#97131,
    # NVIDIA/k8s-device-plugin#231
    (
        "preferred-allocation-gpu-lost-old",
        "UnexpectedAdmissionError",
        "Pod Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: rpc "
        "error: code = Unknown desc = Unable to retrieve list of available devices: error creating "
        "nvml.Device 5: nvml: GPU is lost, which is unexpected",
        {"kind": "preferred_allocation_failed"},
    ),
    # GetPreferredAllocation, NVLink wording of newer plugins: pytorch/ci-infra#1057
    (
        "preferred-allocation-nvlink",
        "UnexpectedAdmissionError",
        "Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: rpc "
        "error: code = Unknown desc = error getting list of preferred allocation devices: unable to "
        "get device link information: error getting NVLink for devices (0, 1): failed to get "
        "nvlink remote pci info: failed to get nvlink state: GPU is lost, which is unexpected",
        {"kind": "preferred_allocation_failed"},
    ),
    # plugin died mid-Allocate (HAMi): Project-HAMi/HAMi#39
    (
        "allocate-transport-closing",
        "UnexpectedAdmissionError",
        "Allocate failed due to rpc error: code = Unavailable desc = transport is closing, which is "
        "unexpected",
        {"kind": "allocate_failed"},
    ),
    # tkestack vcuda plugin refusing Allocate: tkestack/gpu-manager#182 (message as pasted, cut)
    (
        "allocate-plugin-refused",
        "UnexpectedAdmissionError",
        "Pod Allocate failed due to rpc error: code = Unknown desc = candidate pod not found for "
        "request &AllocateRequest{ContainerRequests:[&ContainerAllocateRequest{DevicesIDs:"
        "[tencent.com/vcuda-core-67 tencent.com/vcuda-core-198",
        {"kind": "allocate_failed"},
    ),
    # k8s <= 1.16 wording "Update plugin resources failed due to": tkestack/gpu-manager#37
    (
        "update-plugin-resources",
        "UnexpectedAdmissionError",
        "Pod Update plugin resources failed due to rpc error: code = Unknown desc = Nvidia node "
        "mismatch for pod tencent-gpu-test-app-time-cost-7fc956cd5f-2f98c"
        "(tencent-gpu-test-app-time-cost), pick up:/dev/nvidia4  predicate: /dev/nvidia0, which is "
        "unexpected.",
        {"kind": "allocate_failed"},
    ),
    # general predicates (pod bound by a non-default scheduler): kai-scheduler/KAI-Scheduler#306
    (
        "out-of-memory-kai",
        "OutOfmemory",
        "Pod was rejected: Node didn't have enough resource: memory, requested: 2147483648, used: "
        "32290433792, capacity: 32457011200",
        {
            "kind": "out_of_resource",
            "resource": "memory",
            "requested": 2147483648,
            "available": 32457011200,
        },
    ),
    # Topology Manager event: kubernetes/website
    # content/en/docs/tasks/administer-cluster/memory-manager.md; pytorch/ci-infra#696
    (
        "topology-affinity",
        "TopologyAffinityError",
        "Resources cannot be allocated with Topology locality",
        {"kind": "topology_affinity"},
    ),
    # same in the pod's status.message (kubelet rejectPod prefix), k8s >= 1.22
    (
        "topology-affinity-rejected",
        "TopologyAffinityError",
        "Pod was rejected: Resources cannot be allocated with Topology locality",
        {"kind": "topology_affinity"},
    ),
]


def _journal_event(reason: str, message: str, ns: str = "ml", pod: str = "train-0") -> str:
    return (
        "Mar 05 10:12:00 gpu-node-7 kubelet[1234]: I0305 10:12:00.000000    1234 "
        f'event.go:307] "Event occurred" object="{ns}/{pod}" fieldPath="" kind="Pod" '
        f'apiVersion="v1" type="Warning" reason="{reason}" message={json.dumps(message)}'
    )


@pytest.mark.parametrize(
    ("reason", "message", "expected"),
    [(r, m, e) for _, r, m, e in ADMISSION_VARIANTS],
    ids=[i for i, *_ in ADMISSION_VARIANTS],
)
def test_admission_variant(reason: str, message: str, expected: dict[str, Any]) -> None:
    values, cites = summarise([event_record(reason, message)])
    assert values["admission_errors"] == [message]
    assert cites["admission_errors"][0].line == 1

    journal = parse_kubelet_journal(_journal_event(reason, message), namespace="ml", pod="train-0")
    assert journal.admission_errors, "the journal line was not read as an admission failure"
    signal = journal.admission_errors[0]
    assert signal.kind == expected["kind"]
    for field in ("resource", "requested", "available"):
        if field in expected:
            assert getattr(signal, field) == expected[field]


def test_topology_affinity_reason_of_k8s_1_16() -> None:
    """k8s 1.16 printed the reason with spaces (kubernetes/kubernetes#84869, #83775: STATUS
    column "Topology Affinity Error"); it is an admission rejection whatever the message."""
    values, _ = summarise(
        [
            event_record(
                "Topology Affinity Error", "Resources cannot be allocated with Topology locality"
            )
        ]
    )
    assert values["admission_errors"] == ["Resources cannot be allocated with Topology locality"]


def test_scheduling_failure_is_not_an_admission_error() -> None:
    """A Pending pod's FailedScheduling (k8s-device-plugin#430) must not read as admission."""
    message = (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes "
        "are available: 1 No preemption victims found for incoming pod.."
    )
    values, _ = summarise([event_record("FailedScheduling", message)])
    assert values["admission_errors"] == []
    assert values["failed_scheduling"] == message


# --- device-manager lines that name no pod: (id, journal text, registered, endpoint kinds) -----
NODE_LINE_VARIANTS: list[tuple[str, str, list[str], list[str]]] = [
    # k8s ~1.15-1.20 unstructured klog: NVIDIA/k8s-device-plugin#178 (the gRPC "scheme not
    # registered" chatter right after it is noise, not an unregistered plugin)
    (
        "registration-unstructured",
        "Jun 01 11:41:24 fabricnode1 kubelet[11402]: I0601 11:41:24.847969   11402 manager.go:411] "
        'Got registration request from device plugin with resource name "nvidia.com/gpu"\n'
        "Jun 01 11:41:24 fabricnode1 kubelet[11402]: I0601 11:41:24.848055   11402 endpoint.go:179] "
        'scheme "" not registered, fallback to default scheme\n',
        ["nvidia.com/gpu"],
        [],
    ),
    # structured klog (k8s >= 1.21) as K3s logs it: ROCm/k8s-device-plugin#31
    (
        "registration-structured",
        'I1125 10:01:30.604506  143363 server.go:142] "Got registration request from device plugin '
        'with resource" resourceName="amd.com/gpu"\n',
        ["amd.com/gpu"],
        [],
    ),
    # k8s 1.10 endpoint stream ends: networkservicemesh/networkservicemesh#101
    (
        "listandwatch-ended",
        "Jun 18 13:21:56 kube-5.sbezverk.cisco.com kubelet[1356]: I0618 13:21:56.639130    1356 "
        "manager.go:290] Got registration request from device plugin with resource name "
        '"nsm.ligato.io/socket"\n'
        "Jun 18 13:21:56 kube-5.sbezverk.cisco.com kubelet[1356]: E0618 13:21:56.640441    1356 "
        "endpoint.go:132] listAndWatch ended unexpectedly for device plugin nsm.ligato.io/socket "
        "with error EOF\n",
        ["nsm.ligato.io/socket"],
        ["listandwatch_ended"],
    ),
]


@pytest.mark.parametrize(
    ("text", "registered", "endpoint_kinds"),
    [(t, r, k) for _, t, r, k in NODE_LINE_VARIANTS],
    ids=[i for i, *_ in NODE_LINE_VARIANTS],
)
def test_device_manager_node_line_variant(
    text: str, registered: list[str], endpoint_kinds: list[str]
) -> None:
    journal = parse_kubelet_journal(text, namespace="ml", pod="train-0")
    assert [r for r, _ in journal.registrations] == registered
    assert [s.kind for s in journal.endpoint_errors] == endpoint_kinds
