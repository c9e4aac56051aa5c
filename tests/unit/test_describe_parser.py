"""``kubectl describe pod`` text -> pod dict + events.

The fixtures under tests/fixtures/k8s/describe were laid out with the same tabwriter settings
kubectl uses (minwidth 0, tabwidth 8, padding 2), including the alignment breaks a multi-line
message causes, and cover kubectl 1.2x-1.3x plus an older one (``From: kubelet, <node>``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputriage.evidence.bundle import read_bundle
from gputriage.evidence.model import Key, Status
from gputriage.parsers.describe import parse_pod_describe

DESCRIBE = Path(__file__).resolve().parents[1] / "fixtures" / "k8s" / "describe"


def parse(name: str) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    text = (DESCRIBE / name).read_text(encoding="utf-8")
    pod, events = parse_pod_describe(text)
    return pod, events, text.splitlines()


def test_pending_pod() -> None:
    pod, events, lines = parse("pending-insufficient.txt")
    meta, spec, status = pod["metadata"], pod["spec"], pod["status"]
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    assert (meta["name"], meta["namespace"]) == ("trainer-7d9f8b6c5-x2x8q", "ml")
    assert meta["labels"] == {"app": "trainer", "pod-template-hash": "7d9f8b6c5"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "trainer-7d9f8b6c5",
            "controller": True,
        }
    ]
    assert "nodeName" not in spec
    assert (spec["priority"], spec["priorityClassName"]) == (1000, "gpu-batch")
    assert status["phase"] == "Pending"
    assert status["conditions"] == [{"type": "PodScheduled", "status": "False"}]
    assert "containerStatuses" not in status  # an unscheduled pod has none
    trainer = spec["containers"][0]
    assert trainer["resources"] == {
        "limits": {"nvidia.com/gpu": "4"},
        "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"},
    }
    assert trainer["command"] == ["torchrun", "--nproc_per_node=4", "train.py"]
    assert trainer["env"] == [{"name": "NCCL_DEBUG", "value": "INFO"}]
    assert trainer["volumeMounts"][0] == {"name": "dshm", "mountPath": "/dev/shm"}
    assert spec["volumes"][0] == {
        "name": "dshm",
        "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"},
    }
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert spec["tolerations"] == [
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert status["qosClass"] == "Burstable"
    assert len(events) == 1
    event = events[0]
    assert (event["type"], event["reason"], event["count"]) == ("Warning", "FailedScheduling", 3)
    assert event["source"] == {"component": "default-scheduler"}
    assert (event["_age"], event["_first_age"]) == ("2m", "5m")
    assert event["message"].startswith("0/5 nodes are available: 1 node(s) had untolerated")
    assert event["message"].endswith("3 Preemption is not helpful for scheduling.")
    assert event["_line"] == 56
    assert "FailedScheduling" in lines[event["_line"] - 1]
    assert event["involvedObject"] == {
        "kind": "Pod",
        "name": "trainer-7d9f8b6c5-x2x8q",
        "namespace": "ml",
    }


def test_running_pod_with_oom_and_init_container() -> None:
    pod, events, lines = parse("oom-crashloop.txt")
    spec, status = pod["spec"], pod["status"]
    assert spec["nodeName"] == "gpu-node-7"
    assert status["hostIP"] == "10.0.12.7"
    assert spec["runtimeClassName"] == "nvidia"
    assert status["startTime"] == "2024-06-10T09:58:11Z"
    assert pod["metadata"]["annotations"] == {
        "kubectl.kubernetes.io/restartedAt": "2024-06-10T09:57:40Z"
    }
    init = status["initContainerStatuses"][0]
    assert init["state"] == {
        "terminated": {
            "reason": "Completed",
            "exitCode": 0,
            "startedAt": "2024-06-10T09:58:13Z",
            "finishedAt": "2024-06-10T09:58:40Z",
        }
    }
    server = status["containerStatuses"][0]
    assert server["state"] == {"waiting": {"reason": "CrashLoopBackOff"}}
    assert server["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert server["lastState"]["terminated"]["exitCode"] == 137
    assert (server["restartCount"], server["ready"]) == (6, False)
    assert spec["containers"][0]["resources"]["limits"] == {
        "cpu": "8",
        "memory": "16Gi",
        "nvidia.com/gpu": "1",
    }
    assert spec["containers"][0]["args"] == [
        "--model",
        "/cache/llama",
        "--gpu-memory-utilization=0.9",
    ]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["dshm"] == {"name": "dshm", "emptyDir": {"medium": "Memory"}}  # <unset>
    assert volumes["model-cache"]["persistentVolumeClaim"] == {
        "claimName": "model-cache-llm-serve-0",
        "readOnly": False,
    }
    assert [c["type"] for c in status["conditions"]] == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    assert [(e["reason"], e["count"]) for e in events] == [
        ("Scheduled", 1),
        ("Pulled", 1),
        ("Created", 1),
        ("Started", 1),
        ("Pulled", 7),
        ("Created", 7),
        ("Started", 7),
        ("BackOff", 25),
    ]
    assert [e["_line"] for e in events] == list(range(105, 113))
    assert all(e["reason"] in lines[e["_line"] - 1] for e in events)


def test_multiline_messages_continue_from_column_zero() -> None:
    pod, events, _ = parse("start-error.txt")
    last = pod["status"]["containerStatuses"][0]["lastState"]["terminated"]
    assert last["reason"] == "StartError"
    assert last["exitCode"] == 128
    assert last["message"].splitlines() == [
        "failed to create containerd task: failed to create shim task: OCI runtime create "
        "failed: runc create failed: unable to start container process: error during container "
        "init: error running hook #0: error running hook: exit status 1, stdout: , stderr: "
        "Auto-detected mode as 'legacy'",
        "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown",
    ]
    failed = next(e for e in events if e["reason"] == "Failed")
    assert failed["count"] == 7
    assert failed["message"].endswith("nvml error: driver not loaded: unknown")
    assert failed["message"].count("\n") == 1
    backoff = events[-1]  # the row after the continuation is re-aligned by the tabwriter
    assert (backoff["reason"], backoff["count"], backoff["_age"]) == ("BackOff", 26, "5s")
    assert len(events) == 5


def test_runtime_handler_sandbox_error() -> None:
    pod, events, _ = parse("runtime-handler.txt")
    assert pod["status"]["containerStatuses"][0]["state"] == {
        "waiting": {"reason": "ContainerCreating"}
    }
    assert pod["status"]["containerStatuses"][0]["containerID"] == ""
    sandbox = events[1]
    assert (sandbox["reason"], sandbox["count"], sandbox["_first_age"]) == (
        "FailedCreatePodSandBox",
        17,
        "3m40s",
    )
    assert sandbox["message"].endswith('no runtime for "nvidia" is configured')


def test_older_kubectl_event_source_and_failed_admission() -> None:
    pod, events, _ = parse("admission-old-kubectl.txt")
    status = pod["status"]
    assert status["phase"] == "Failed"
    assert status["reason"] == "UnexpectedAdmissionError"
    assert status["message"].startswith(
        "Pod Allocate failed due to device plugin GetPreferredAllocation rpc failed"
    )
    assert pod["spec"]["volumes"] == [
        {"name": "default-token-8x2kq", "secret": {"secretName": "default-token-8x2kq"}}
    ]
    assert events[1]["source"] == {"component": "kubelet", "host": "gpu-node-3"}
    assert events[1]["message"].endswith("nvml: GPU is lost, which is unexpected.")


def test_terminating_pod_and_old_priority_class_key() -> None:
    text = (
        "Name:               gpu-job-0\n"
        "Namespace:          default\n"
        "Priority:           0\n"
        "PriorityClassName:  <none>\n"
        "Node:               gpu-node-1/10.0.0.21\n"
        "Status:             Terminating (lasts 2m13s)\n"
        "Termination Grace Period:  30s\n"
        "Events:                     <none>\n"
    )
    pod, events = parse_pod_describe(text)
    assert pod["metadata"]["deletionTimestamp"] == "lasts 2m13s"
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
    assert "phase" not in pod["status"]
    assert "priorityClassName" not in pod["spec"]
    assert events == []


def test_only_the_first_of_several_pods_is_read() -> None:
    one = (DESCRIBE / "runtime-handler.txt").read_text(encoding="utf-8")
    two = (DESCRIBE / "start-error.txt").read_text(encoding="utf-8")
    pod, events = parse_pod_describe(one + "\n\n" + two)
    assert pod["metadata"]["name"] == "cuda-vectoradd"
    assert [e["reason"] for e in events] == ["Scheduled", "FailedCreatePodSandBox"]


def test_toleration_forms() -> None:
    text = (
        "Name:         p\nNamespace:    default\n"
        "Tolerations:  op=Exists\n"
        "              :NoSchedule op=Exists\n"
        "              dedicated=gpu:NoSchedule\n"
        "              nvidia.com/gpu:NoSchedule\n"
        "              maintenance:NoExecute op=Exists for 60s\n"
    )
    pod, _ = parse_pod_describe(text)
    assert pod["spec"]["tolerations"] == [
        {"operator": "Exists"},
        {"operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "effect": "NoSchedule"},
        {
            "key": "maintenance",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 60,
        },
    ]


@pytest.mark.parametrize(
    "junk",
    [
        "",
        "\x00\x01\x02",
        "not describe output at all",
        "Name:\n",
        "Events:\n  garbage\n",
        "Name: x\nContainers:\n    Image: orphan\n      Reason: x\nConditions:\n  ??\n",
        "Name: x\nNamespace: y\n" + "Labels: " + "a=b\n" * 10000,
    ],
)
def test_junk_never_raises(junk: str) -> None:
    pod, events = parse_pod_describe(junk)
    assert pod["kind"] == "Pod"
    assert isinstance(events, list)


def test_truncated_paste_keeps_what_was_read() -> None:
    text = (DESCRIBE / "oom-crashloop.txt").read_text(encoding="utf-8")
    cut = text[: text.index("    Last State:")]
    pod, events = parse_pod_describe(cut)
    assert pod["metadata"]["name"] == "llm-serve-0"
    assert pod["status"]["containerStatuses"][-1]["state"] == {
        "waiting": {"reason": "CrashLoopBackOff"}
    }
    assert events == []


def test_bundle_reads_describe_text_for_pod_and_events(tmp_path: Path) -> None:
    (tmp_path / "pod.describe.txt").write_bytes((DESCRIBE / "start-error.txt").read_bytes())
    evidence = read_bundle(tmp_path)
    pod, events = evidence[Key.POD], evidence[Key.EVENTS]
    assert (pod.status, pod.format) == (Status.OK, "describe")
    assert pod.data["metadata"]["name"] == "nvml-check"
    assert (events.status, events.format) == (Status.OK, "describe")
    assert [e["reason"] for e in events.data["items"]] == [
        "Scheduled",
        "Pulled",
        "Created",
        "Failed",
        "BackOff",
    ]
    assert events.cite(events.data["items"][3]["_line"]).text.lstrip().startswith("Warning  Failed")


_DESCRIBE_ALPHABET = st.sampled_from(
    [
        "Name:",
        "Namespace:",
        "Containers:",
        "  c:\n",
        "    State:",
        "Waiting",
        "      Reason:",
        "Events:\n",
        "  Warning  Failed  2m (x3 over 5m)  kubelet  ",
        "Tolerations:",
        "op=Exists",
        "Volumes:\n",
        "    Type:",
        "EmptyDir",
        "\n",
        "  ",
        "\t",
        ":",
        "=",
        "{",
        "x",
        "0",
        "é",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_DESCRIBE_ALPHABET, max_size=60).map("".join))
def test_fuzzed_describe_never_raises(text: str) -> None:
    pod, events = parse_pod_describe(text)
    assert pod["kind"] == "Pod"
    assert all(isinstance(e["_line"], int) and e["_line"] > 0 for e in events)
