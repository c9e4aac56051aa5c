"""Fact group ``kubelet`` built from a journal, filtered to the pod under triage."""

from __future__ import annotations

import json

from gputriage.evidence.bundle import decode
from gputriage.evidence.model import Evidence, EvidenceSet, Key, Status
from gputriage.facts import kubelet
from gputriage.facts.build import build_facts, target_of
from gputriage.facts.kubelet import SPEC

UID = "4e9b2c71-8d3f-4a06-b5e1-7c2d9f0a6e38"
OTHER = "0b4f6d2e-9c71-4a38-8e5d-2f7a1c9b3e64"
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "triton-0", "namespace": "inference", "uid": UID},
    "spec": {"nodeName": "gpu-node-4", "containers": [{"name": "triton"}]},
}
K = "2024-08-13T10:21:41+0000 gpu-node-4 kubelet[1873]: "
UVM = "nvidia-container-cli: mount error: stat failed: /dev/nvidia-uvm: no such file or directory"


def syncing(uid: str, ns_name: str, reason: str, err: str) -> str:
    return (
        K + 'E0813 10:21:41.392301    1873 pod_workers.go:1298] "Error syncing pod, skipping" '
        'err="failed to \\"StartContainer\\" for \\"triton\\" with '
        + reason
        + ': \\"'
        + err
        + '\\"" pod="'
        + ns_name
        + '" podUID="'
        + uid
        + '"'
    )


JOURNAL = (
    "\n".join(
        [
            K
            + 'I0813 08:02:11.208911    1873 server.go:144] "Got registration request from device '
            'plugin with resource" resourceName="nvidia.com/gpu"',
            K + 'I0813 10:21:38.604417    1873 kubelet.go:2431] "SyncLoop ADD" source="api" '
            'pods=["inference/triton-0"]',
            syncing(
                UID,
                "inference/triton-0",
                "RunContainerError",
                "failed to create shim task: ... stderr: Auto-detected mode as 'legacy'\\\\n"
                + UVM
                + ": unknown",
            ),
            syncing(
                OTHER,
                "batch/other-7",
                "RunContainerError",
                "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown",
            ),
            K
            + 'I0813 10:21:52.018356    1873 kubelet_volumes.go:163] "Cleaned up orphaned pod volumes '
            'dir" podUID="' + OTHER + '"',
            syncing(
                UID,
                "inference/triton-0",
                "RunContainerError",
                "failed to create shim task: ... stderr: Auto-detected mode as 'legacy'\\\\n"
                + UVM
                + ": unknown",
            ),
            K + 'E0813 10:22:00.000000    1873 kubelet.go:2000] "Failed to admit pod" '
            'pod="inference/triton-0" err="Allocate failed due to no healthy devices present; cannot '
            'allocate unhealthy devices nvidia.com/gpu, which is unexpected"',
        ]
    )
    + "\n"
)


def evidence(journal: Evidence) -> EvidenceSet:
    return EvidenceSet([decode(Key.POD, json.dumps(POD).encode(), source="b/pod.json"), journal])


def test_every_field_is_documented() -> None:
    assert all(spec.doc for spec in SPEC.fields.values())
    assert SPEC.defaults()["eviction"] == {
        "evicted": False,
        "message": "",
        "resource": "",
        "line": 0,
    }


def test_signals_for_the_pod_with_citations() -> None:
    ev = evidence(decode(Key.KUBELET_LOG, JOURNAL.encode(), source="b/kubelet.log"))
    g = kubelet.build(ev, target_of(ev), {})
    v = g.values
    assert g.known
    assert (v["lines_scanned"], v["lines_for_pod"], v["node_lines"]) == (7, 4, 1)
    assert v["device_manager_registered"] == ["nvidia.com/gpu"]
    assert [
        (e["kind"], e["message"], e["line"], e["count"]) for e in v["nvidia_container_cli_errors"]
    ] == [("mount", UVM, 3, 2)]
    assert [(e["kind"], e["resource"], e["line"]) for e in v["admission_errors"]] == [
        ("no_healthy_devices", "nvidia.com/gpu", 7)
    ]
    assert v["admission_kinds"] == ["no_healthy_devices"]
    assert not v["runtime_handler_missing"] and v["sandbox_errors"] == []
    assert not v["eviction"]["evicted"]
    assert [r.line for r in g.cites["nvidia_container_cli_errors"]] == [3, 6]
    assert str(g.cites["device_manager_registered"][0]).startswith(
        "b/kubelet.log:1: 2024-08-13T10:21:41+0000 gpu-node-4 kubelet[1873]:"
    )


def test_runtime_handler_and_eviction() -> None:
    text = "\n".join(
        [
            K + 'E0813 10:21:41.1 1873 remote_runtime.go:209] "RunPodSandbox from runtime service '
            'failed" err="rpc error: code = Unknown desc = failed to get sandbox runtime: no '
            'runtime for \\"nvidia\\" is configured"',
            K + 'I0813 10:30:00.1 1873 eviction_manager.go:366] "Eviction manager: attempting to '
            'reclaim" resourceName="ephemeral-storage"',
            K + 'I0813 10:30:01.1 1873 eviction_manager.go:592] "Eviction manager: pod is evicted '
            'successfully" pod="inference/triton-0"',
        ]
    )
    ev = evidence(decode(Key.KUBELET_LOG, text.encode(), source="b/kubelet.log"))
    v = build_facts(ev)["kubelet"].to_context()
    assert v["runtime_handler_missing"] and v["runtime_handler"] == "nvidia"
    assert v["sandbox_errors"][0]["message"] == (
        'failed to get sandbox runtime: no runtime for "nvidia" is configured'
    )
    assert v["eviction"] == {
        "evicted": True,
        "resource": "ephemeral-storage",
        "line": 3,
        "message": "Eviction manager: pod is evicted successfully",
    }


def test_unknown_when_the_journal_was_not_read() -> None:
    ev = evidence(
        Evidence(
            Key.KUBELET_LOG,
            Status.TIMEOUT,
            "ssh gpu-node-4 did not answer in 10 s",
            "",
            "ssh gpu-node-4",
        )
    )
    g = kubelet.build(ev, target_of(ev), {})
    assert not g.known
    assert g.reason == (
        "the kubelet journal on the node: timeout: ssh gpu-node-4 did not answer in 10 s"
    )
    assert g.values["admission_errors"] == [] and g.values["lines_for_pod"] == 0


def test_binary_journal_is_an_error_not_a_crash() -> None:
    ev = evidence(decode(Key.KUBELET_LOG, b"\x00\x01" * 500, source="b/kubelet.log"))
    g = build_facts(ev)["kubelet"]
    assert not g.known and "looks binary" in g.reason
