"""Journal/klog line shapes and the kubelet journal's GPU signals (k8s-messages.md 4)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputriage.parsers.journal import (
    KubeletJournal,
    flatten,
    parse_fields,
    parse_kubelet_journal,
    parse_line,
    unquote_go,
)

NS, POD, UID = "ml", "train-0", "3f0c1e52-4a8b-4a55-9d3c-1c2f1a0b9e77"
OTHER_UID = "11111111-2222-4333-8444-555555555555"
ISO = "2024-03-05T10:12:00+0000 gpu-node-7 kubelet[1234]: "


def journal(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def for_pod(text: str) -> KubeletJournal:
    return parse_kubelet_journal(text, namespace=NS, pod=POD, uid=UID)


# --- line shapes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "time_", "host", "unit"),
    [
        (
            "Mar 05 10:11:12 gpu-7 kubelet[1234]: I0305 10:11:12.123456    1234 manager.go:411] x",
            "Mar 05 10:11:12",
            "gpu-7",
            "kubelet",
        ),
        (
            "Mar  5 10:11:12.123456 gpu-7 kubelet[1234]: I0305 10:11:12.123456 1234 manager.go:411] x",
            "Mar  5 10:11:12.123456",
            "gpu-7",
            "kubelet",
        ),
        (
            "2024-03-05T10:11:12+0000 gpu-7 kubelet[1234]: I0305 10:11:12.123456 1234 manager.go:411] x",
            "2024-03-05T10:11:12+0000",
            "gpu-7",
            "kubelet",
        ),
        (
            "2024-03-05T10:11:12.123456+00:00 gpu-7 kubelet[1234]: I0305 10:11:12.1 1 manager.go:411] x",
            "2024-03-05T10:11:12.123456+00:00",
            "gpu-7",
            "kubelet",
        ),
        (
            "Tue 2024-03-05 10:11:12 UTC gpu-7 kubelet[1234]: I0305 10:11:12.1 1 manager.go:411] x",
            "Tue 2024-03-05 10:11:12 UTC",
            "gpu-7",
            "kubelet",
        ),
        (
            " 6월 07 06:13:05 node01 origin-node[98054]: I0607 06:13:05.681377   98108 manager.go:411] x",
            "6월 07 06:13:05",
            "node01",
            "origin-node",
        ),
    ],
)
def test_journal_prefixes(text: str, time_: str, host: str, unit: str) -> None:
    line = parse_line(text.strip(), 7)
    assert (line.lineno, line.time, line.host, line.unit) == (7, time_, host, unit)
    assert (line.severity, line.origin, line.message) == ("I", "manager.go:411", "x")


def test_plain_klog_and_kubectl_timestamps_prefix() -> None:
    line = parse_line("E0305 10:11:12.123456    1234 kubelet.go:2000] boom", 1)
    assert (line.time, line.severity, line.origin, line.msg) == (
        "0305 10:11:12.123456",
        "E",
        "kubelet.go:2000",
        "boom",
    )
    line = parse_line("2024-03-05T10:11:12.123456789Z W0305 10:11:12.1 1 a.go:1] careful", 2)
    assert (line.time, line.severity, line.msg) == (
        "2024-03-05T10:11:12.123456789Z",
        "W",
        "careful",
    )


def test_structured_message_and_fields() -> None:
    line = parse_line(
        'E0305 10:12:00.1 1234 pod_workers.go:949] "Error syncing pod, skipping" '
        'err="failed to \\"CreatePodSandbox\\" for \\"x\\"" pod="ml/train-0" '
        'podUID=3f0c1e52-4a8b-4a55-9d3c-1c2f1a0b9e77 pods=["a/b", "c/d"] '
        'event={"ID":"1","Type":"ContainerDied"}',
        1,
    )
    assert line.msg == "Error syncing pod, skipping"
    assert line.fields == {
        "err": 'failed to "CreatePodSandbox" for "x"',
        "pod": "ml/train-0",
        "podUID": UID,
        "pods": '["a/b", "c/d"]',
        "event": '{"ID":"1","Type":"ContainerDied"}',
    }
    assert line.detail == 'Error syncing pod, skipping: failed to "CreatePodSandbox" for "x"'


def test_go_quote_helpers() -> None:
    assert unquote_go('"a\\"b\\\\c\\n" rest') == ('a"b\\c\n', 11)
    assert unquote_go('"unterminated') == ("unterminated", 13)
    assert parse_fields('a=1 b="two words" c=[x y] trailing junk') == {
        "a": "1",
        "b": "two words",
        "c": "[x y]",
    }
    assert flatten('no runtime for \\\\\\"nvidia\\\\\\" is configured\\\\n next') == (
        'no runtime for "nvidia" is configured  next'
    )


def test_json_klog_record() -> None:
    line = parse_line(
        '{"ts":1709633472.1,"caller":"manager.go:1","msg":"Allocate failed",'
        '"err":"no healthy devices","pod":"ml/train-0","v":0}',
        3,
    )
    assert (line.msg, line.severity, line.origin) == ("Allocate failed", "E", "manager.go:1")
    assert line.fields == {"err": "no healthy devices", "pod": "ml/train-0"}


# --- signals ------------------------------------------------------------------------------

REG_NEW = (
    ISO + 'I0305 10:11:12.123456 1234 server.go:144] "Got registration request from '
    'device plugin with resource" resourceName="nvidia.com/gpu"'
)
REG_OLD = (
    "Jun 01 11:41:24 fabricnode1 kubelet[11402]: I0601 11:41:24.847969   11402 "
    "manager.go:411] Got registration request from device plugin with resource name "
    '"nvidia.com/mig-1g.10gb"'
)
GRPC_NOISE = (
    "Jun 01 11:41:24 fabricnode1 kubelet[11402]: I0601 11:41:24.848055   11402 "
    'endpoint.go:179] scheme "" not registered, fallback to default scheme'
)
SANDBOX = (
    ISO + 'E0305 10:12:00.000002 1234 pod_workers.go:949] "Error syncing pod, skipping" '
    'err="failed to \\"CreatePodSandbox\\" for \\"train-0_ml(' + UID + ')\\" with '
    'CreatePodSandboxError: \\"Failed to create sandbox for pod \\\\\\"train-0_ml('
    + UID
    + ')\\\\\\": rpc error: code = Unknown desc = failed to get sandbox runtime: no '
    'runtime for \\\\\\"nvidia\\\\\\" is configured\\"" pod="ml/train-0" podUID="' + UID + '"'
)
RUNPODSANDBOX = (
    ISO + 'E0305 10:12:00.000001 1234 remote_runtime.go:209] "RunPodSandbox from '
    'runtime service failed" err="rpc error: code = Unknown desc = failed to get '
    'sandbox runtime: no runtime for \\"nvidia\\" is configured"'
)


def test_registration_both_wordings_and_grpc_noise_is_not_an_endpoint_error() -> None:
    out = for_pod(journal(REG_NEW, REG_OLD, GRPC_NOISE))
    assert out.registrations == [("nvidia.com/gpu", 1), ("nvidia.com/mig-1g.10gb", 2)]
    assert out.endpoint_errors == []
    assert out.node_lines == [1, 2] and out.pod_lines == []


def test_sandbox_runtime_handler_missing_for_pod_and_node() -> None:
    out = for_pod(journal(RUNPODSANDBOX, SANDBOX, SANDBOX))
    assert out.runtime_handler == ("nvidia", 1)
    assert out.runtime_handler_lines == [1, 2, 3]
    [sig] = out.sandbox_errors
    assert (sig.message, sig.count, sig.lines) == (
        'failed to get sandbox runtime: no runtime for "nvidia" is configured',
        3,
        [1, 2, 3],
    )
    assert out.pod_lines == [2, 3] and out.node_lines == [1]


def test_other_pods_lines_are_ignored() -> None:
    other = SANDBOX.replace(UID, OTHER_UID).replace("train-0", "other-1")
    out = for_pod(journal(other, other))
    assert out.sandbox_errors == [] and out.runtime_handler is None
    assert out.pod_lines == [] and out.node_lines == [] and out.lines_scanned == 2


def test_pod_matched_by_name_without_uid() -> None:
    line = (
        "Mar 05 10:11:12 gpu-7 kubelet[1]: E0305 10:11:12.1 1 kuberuntime_manager.go:815] "
        'createPodSandbox for pod "train-0_ml(' + UID + ')" failed: rpc error: code = '
        "Unknown desc = failed to find runtime handler nvidia from runtime list "
        "map[crun:0xc runc:0xc]"
    )
    out = parse_kubelet_journal(line, namespace=NS, pod=POD)
    assert out.pod_lines == [1] and out.runtime_handler == ("nvidia", 1)
    # a pod whose name only starts with ours is someone else, and so are its lines
    other = line.replace("train-0_ml", "train-01_ml").replace(UID, OTHER_UID)
    out = parse_kubelet_journal(other, namespace=NS, pod=POD, uid=UID)
    assert out.pod_lines == [] and out.runtime_handler is None


CTR_ERR = (
    "failed to create containerd task: failed to create shim task: OCI runtime create "
    "failed: runc create failed: unable to start container process: error during "
    "container init: error running hook #0: error running hook: exit status 1, stdout: "
    ", stderr: Auto-detected mode as 'legacy'"
)


@pytest.mark.parametrize(
    ("stderr", "kind", "message"),
    [
        (
            "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown",
            "initialization",
            "nvidia-container-cli: initialization error: nvml error: driver not loaded",
        ),
        (
            "nvidia-container-cli.real: initialization error: load library failed: libnvidia-ml.so.1: "
            "cannot open shared object file: no such file or directory: unknown",
            "initialization",
            "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: "
            "cannot open shared object file: no such file or directory",
        ),
        (
            "nvidia-container-cli: detection error: nvml error: unknown error: unknown",
            "detection",
            "nvidia-container-cli: detection error: nvml error: unknown error",
        ),
        (
            "nvidia-container-cli: mount error: stat failed: /dev/nvidia-uvm: no such file or "
            "directory: unknown",
            "mount",
            "nvidia-container-cli: mount error: stat failed: /dev/nvidia-uvm: no such file or "
            "directory",
        ),
        (
            "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update "
            "your driver to a newer version, or use an earlier cuda container: unknown",
            "requirement",
            "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update "
            "your driver to a newer version, or use an earlier cuda container",
        ),
    ],
)
def test_nvidia_container_cli_errors_relayed_by_kubelet(
    stderr: str, kind: str, message: str
) -> None:
    err = (CTR_ERR + "\\\\n" + stderr).replace('"', '\\"')
    line = (
        ISO + 'E0305 10:12:00.2 1234 pod_workers.go:1298] "Error syncing pod, skipping" '
        'err="failed to \\"StartContainer\\" for \\"cuda\\" with RunContainerError: \\"'
        + err
        + '\\"" pod="ml/train-0" podUID="'
        + UID
        + '"'
    )
    out = for_pod(journal(line))
    assert [(s.kind, s.message, s.line) for s in out.container_cli_errors] == [(kind, message, 1)]


def test_cdi_and_dra_errors() -> None:
    cdi = (
        ISO + 'E0305 10:12:00.3 1234 pod_workers.go:1298] "Error syncing pod, skipping" '
        'err="failed to \\"StartContainer\\" for \\"cuda\\" with CreateContainerError: '
        '\\"failed to create containerd container: CDI device injection failed: unresolvable '
        'CDI devices nvidia.com/gpu=all, nvidia.com/gpu=0\\"" pod="ml/train-0"'
    )
    dra = (
        ISO + 'E0305 10:12:00.4 1234 kuberuntime_manager.go:1200] "Failed to prepare dynamic '
        'resources" err="prepare dynamic resources: DRA driver compute-domain.nvidia.com is '
        'not registered" pod="ml/train-0"'
    )
    out = for_pod(journal(cdi, dra))
    [c] = out.cdi_errors
    assert c.devices == ["nvidia.com/gpu=all", "nvidia.com/gpu=0"] and c.line == 1
    [d] = out.dra_errors
    assert d.message == (
        "Failed to prepare dynamic resources: prepare dynamic resources: DRA "
        "driver compute-domain.nvidia.com is not registered"
    )


@pytest.mark.parametrize(
    ("err", "kind", "resource", "requested", "available"),
    [
        (
            "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
            "Requested: 2, Available: 1, which is unexpected",
            "devices_unavailable",
            "nvidia.com/gpu",
            2,
            1,
        ),
        (
            "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices "
            "nvidia.com/gpu, which is unexpected",
            "no_healthy_devices",
            "nvidia.com/gpu",
            0,
            0,
        ),
        (
            "Allocate failed due to previously allocated devices are no longer healthy; cannot "
            "allocate unhealthy devices nvidia.com/gpu, which is unexpected",
            "previously_allocated_unhealthy",
            "nvidia.com/gpu",
            0,
            0,
        ),
        (
            "Allocate failed due to can't allocate unregistered device nvidia.com/gpu, which is "
            "unexpected",
            "unregistered_device",
            "nvidia.com/gpu",
            0,
            0,
        ),
        (
            "Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: rpc "
            "error: code = Unknown desc = Unable to retrieve list of available devices: error creating "
            "nvml.Device 3: nvml: GPU is lost, which is unexpected",
            "preferred_allocation_failed",
            "",
            0,
            0,
        ),
        (
            "Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 0, capacity: 0",
            "out_of_resource",
            "nvidia.com/gpu",
            1,
            0,
        ),
        (
            "Allocate failed due to rpc error: code = Unavailable desc = error reading from server: "
            "EOF, which is unexpected",
            "allocate_failed",
            "",
            0,
            0,
        ),
    ],
)
def test_admission_errors(
    err: str, kind: str, resource: str, requested: int, available: int
) -> None:
    line = (
        ISO + 'E0305 10:13:00.1 1234 kubelet.go:2000] "Failed to admit pod" pod="ml/train-0" '
        'err="' + err + '"'
    )
    [sig] = for_pod(journal(line, line)).admission_errors
    assert (sig.kind, sig.resource, sig.requested, sig.available, sig.count) == (
        kind,
        resource,
        requested,
        available,
        2,
    )
    assert "which is unexpected" not in sig.message


def test_endpoint_errors() -> None:
    lines = journal(
        "Mar 19 14:31:09 dell-63 kubelet[1067]: E0319 14:31:09.987111    1067 endpoint.go:107] "
        '"listAndWatch ended unexpectedly for device plugin" err="rpc error: code = Unavailable '
        'desc = error reading from server: EOF" resourceName="nvidia.com/gpu"',
        ISO + 'E0305 10:14:00.1 1234 client.go:90] "Unable to connect to device plugin client '
        'with socket path" err="failed to dial device plugin: context deadline exceeded" '
        'path="/var/lib/kubelet/device-plugins/nvidia-gpu.sock"',
        ISO + "I0305 10:14:00.2 1234 manager.go:1] Endpoint (nvidia.com/gpu, 0xc0) became "
        "unhealthy",
    )
    out = for_pod(lines)
    assert [(s.kind, s.resource) for s in out.endpoint_errors] == [
        ("listandwatch_ended", "nvidia.com/gpu"),
        ("dial_failed", ""),
        ("unhealthy", ""),
    ]


def test_eviction_with_resource_from_reclaim_line() -> None:
    lines = journal(
        ISO + 'I0305 10:20:00.1 1234 eviction_manager.go:366] "Eviction manager: attempting to '
        'reclaim" resourceName="memory"',
        ISO + 'I0305 10:20:00.2 1234 eviction_manager.go:377] "Eviction manager: must evict '
        'pod(s) to reclaim" resourceName="memory"',
        ISO + 'I0305 10:20:01.1 1234 eviction_manager.go:592] "Eviction manager: pod is evicted '
        'successfully" pod="ml/train-0"',
    )
    out = for_pod(lines)
    [ev] = out.evictions
    assert (ev.resource, ev.line) == ("memory", 3)


def test_without_a_target_every_pod_line_counts() -> None:
    out = parse_kubelet_journal(journal(SANDBOX, REG_NEW))
    assert out.pod_lines == [1] and out.node_lines == [2]
    assert out.runtime_handler == ("nvidia", 1)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n",
        "garbage without structure",
        "\x00\xff" * 100,
        'E0305 10:12:00.1 1 x.go:1] "unterminated err="',
    ],
)
def test_bad_input_is_empty_not_an_exception(text: str) -> None:
    out = for_pod(text)
    assert out.admission_errors == [] and out.sandbox_errors == [] and out.registrations == []


def test_large_journal_filters_cheaply() -> None:
    noise = (
        ISO + 'I0305 10:11:12.1 1234 reconciler.go:212] "operationExecutor.VerifyController'
        'AttachedVolume started" pod="other/x" podUID="' + OTHER_UID + '"\n'
    )
    start = time.perf_counter()
    out = for_pod(noise * 50_000 + SANDBOX + "\n")
    assert out.lines_scanned == 50_001 and out.pod_lines == [50_001]
    assert time.perf_counter() - start < 10


PIECES = st.sampled_from(
    [
        ISO,
        "Mar 05 10:11:12 gpu-7 kubelet[1]: ",
        "E0305 10:12:00.1 1234 pod_workers.go:949] ",
        '"Error syncing pod, skipping" ',
        'err="',
        '\\"',
        "\\\\",
        '"',
        " pod=",
        "ml/train-0",
        f" podUID={UID}",
        "train-0_ml(",
        UID,
        ")",
        "no runtime for ",
        "nvidia-container-cli: ",
        "mount error: ",
        "unresolvable CDI devices ",
        "nvidia.com/gpu=all",
        "Allocate failed due to ",
        "requested number of devices unavailable for ",
        "evicted",
        "attempting to reclaim",
        "\n",
        "[",
        "{",
        "resourceName=",
        "desc = ",
        "\x00",
        "é",
    ]
)


@given(st.lists(PIECES, max_size=60).map("".join))
@settings(max_examples=300, deadline=None)
def test_never_raises_on_shuffled_real_pieces(text: str) -> None:
    out = for_pod(text)
    assert out.lines_scanned == len(text.splitlines())
    assert set(out.pod_lines).isdisjoint(out.node_lines)
