"""Fact group ``device_plugin``: log part, pod part, known/unknown and citations."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gputriage.evidence.bundle import decode
from gputriage.evidence.model import Evidence, EvidenceSet, Key, Status
from gputriage.facts import device_plugin
from gputriage.facts.build import build_facts
from gputriage.facts.device_plugin import SPEC, find_plugin_pod
from gputriage.facts.model import Target

UUID = "GPU-5f2d3c9e-8a41-7b6e-92c1-4d0e8f7a6b13"
LOG = f"""\
I0813 08:02:09.771203       1 main.go:178] Starting FS watcher.
I0813 08:02:10.420374       1 server.go:154] Registered device plugin for 'nvidia.com/gpu' with \
Kubelet
I0813 10:41:05.100000       1 health.go:155] Skipping event {{Device:{{Handle:0x7f0d}} EventType:8 \
EventData:13 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}}
I0813 10:41:07.918405       1 health.go:185] XidCriticalError: Xid=79 on Device={UUID}; marking \
device as unhealthy.
I0813 10:41:07.918512       1 server.go:276] 'nvidia.com/gpu' device marked unhealthy: {UUID}
I0813 11:00:00.000000       1 main.go:246] inotify: /var/lib/kubelet/device-plugins/kubelet.sock \
created, restarting.
I0813 11:00:00.100000       1 main.go:178] Starting FS watcher.
E0813 11:00:01.000000       1 main.go:300] GRPC server for 'nvidia.com/gpu' crashed with error: EOF
"""


def pod(
    name: str,
    *,
    ns: str = "gpu-operator",
    labels: dict[str, str] | None = None,
    node: str = "gpu-1",
    phase: str = "Running",
    ready: bool = True,
    restarts: int = 0,
    waiting: str = "",
    last: str = "",
    deleting: bool = False,
    init_waiting: str = "",
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [
            {
                "name": "nvidia-device-plugin",
                "restartCount": restarts,
                "state": {"waiting": {"reason": waiting}} if waiting else {"running": {}},
                "lastState": {"terminated": {"reason": last, "exitCode": 1}} if last else {},
            }
        ],
    }
    if init_waiting:
        status["initContainerStatuses"] = [
            {
                "name": "toolkit-validation",
                "restartCount": 4,
                "state": {"waiting": {"reason": init_waiting}},
            }
        ]
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2024-08-13T10:00:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "nvidia-device-plugin"}]},
        "status": status,
    }


def evidence(
    *,
    log: str | None = None,
    pods: list[dict[str, Any]] | None = None,
    extra: tuple[Evidence, ...] = (),
) -> EvidenceSet:
    items: list[Evidence] = [
        decode(Key.POD, json.dumps(pod("train-0", ns="ml")).encode(), source="b/pod.json")
    ]
    if log is not None:
        items.append(decode(Key.DEVICE_PLUGIN_LOG, log.encode(), source="b/device-plugin.log"))
    if pods is not None:
        body = json.dumps({"apiVersion": "v1", "kind": "PodList", "items": pods}, indent=2)
        items.append(decode(Key.NODE_PODS, body.encode(), source="b/node-pods.json"))
    return EvidenceSet([*items, *extra])


def build(ev: EvidenceSet, node: str = "gpu-1") -> Any:
    return device_plugin.build(ev, Target(namespace="ml", pod="train-0", node=node), {})


def test_every_field_is_documented_and_defaults_are_cel_friendly() -> None:
    for name, spec in SPEC.fields.items():
        assert spec.doc, name
        assert spec.default is not None, name
    assert SPEC.defaults()["config"]["replicas"] == 0


def test_log_part() -> None:
    g = build(evidence(log=LOG))
    v = g.values
    assert g.known and v["log_known"] and not v["pod_known"]
    assert v["pod_reason"].startswith("pods on the pod's node: unavailable")
    assert v["registered"] and v["resources_registered"] == ["nvidia.com/gpu"]
    assert v["unhealthy_devices"] == [
        {
            "uuid": UUID,
            "xid": 79,
            "resource": "nvidia.com/gpu",
            "reason": "xid",
            "line": 4,
            "xid_klass": "hardware",
            "xid_immediate_action": "RESTART_BM",
        }
    ]
    assert v["unhealthy_xids"] == [79] and v["skipped_xids"] == [13]
    assert (v["starts"], v["restarts"]) == (2, 1)
    assert v["errors"] == [
        {
            "message": "GRPC server for 'nvidia.com/gpu' crashed with error: EOF",
            "line": 8,
            "count": 1,
        }
    ]
    assert not v["nvml_init_failed"] and not v["shared"] and not v["pod_found"]
    assert [str(r) for r in g.cites["unhealthy_devices"]] == [
        f"b/device-plugin.log:4: {LOG.splitlines()[3]}",
        f"b/device-plugin.log:5: {LOG.splitlines()[4]}",
    ]
    assert [r.line for r in g.cites["restarts"]] == [6]


@pytest.mark.parametrize(
    ("line", "entry"),
    [
        # An application Xid the plugin does not skip: NVIDIA says restart the application.
        (
            "XidCriticalError: Xid=69 on Device=GPU-1a2b, the device will go unhealthy.",
            {
                "xid": 69,
                "reason": "xid",
                "xid_klass": "application",
                "xid_immediate_action": "RESTART_APP",
            },
        ),
        (
            "XidCriticalError: Xid=48 on Device=GPU-1a2b, the device will go unhealthy.",
            {
                "xid": 48,
                "reason": "xid",
                "xid_klass": "memory",
                "xid_immediate_action": "WORKFLOW_XID_48",
            },
        ),
        (
            "XidCriticalError: Xid=173 on Device=GPU-1a2b, the device will go unhealthy.",
            {"xid": 173, "reason": "xid", "xid_klass": "", "xid_immediate_action": ""},
        ),
        (
            "unable to get device handle from UUID: Unknown Error; marking it as unhealthy",
            {"xid": 0, "reason": "no_handle", "xid_klass": "", "xid_immediate_action": ""},
        ),
    ],
)
def test_unhealthy_devices_carry_the_xid_catalog_reading(line: str, entry: dict[str, Any]) -> None:
    (device,) = build(evidence(log=f"I0101 00:00:00.0 1 health.go:1] {line}\n")).values[
        "unhealthy_devices"
    ]
    assert {k: device[k] for k in entry} == entry


def test_time_slicing_config_makes_the_gpu_shared() -> None:
    log = (
        "I0101 00:00:00.0 1 main.go:276] Running with config: "
        '{"flags":{"migStrategy":"none"},"sharing":{"timeSlicing":{"resources":'
        '[{"name":"nvidia.com/gpu","replicas":4}]}}}\n'
    )
    g = build(evidence(log=log))
    assert g.values["shared"] and g.values["config"]["replicas"] == 4
    assert g.values["config"]["sharing"] == "time-slicing"
    assert [r.line for r in g.cites["shared"]] == [1]


def test_nvml_failure_with_runtime_hint() -> None:
    log = (
        "2021/01/01 00:00:00 Loading NVML\n2021/01/01 00:00:00 Failed to initialize NVML: "
        "could not load NVML library.\n2021/01/01 00:00:00 If this is a GPU node, did you set "
        "the docker default runtime to `nvidia`?\n"
    )
    v = build(evidence(log=log)).values
    assert v["nvml_init_failed"] and v["nvml_error"] == "could not load NVML library"
    assert v["runtime_hint"] and not v["registered"]


@pytest.mark.parametrize(
    "labels",
    [
        {"app": "nvidia-device-plugin-daemonset"},
        {"app.kubernetes.io/name": "nvidia-device-plugin"},
        {"name": "nvidia-device-plugin-ds"},
        {"k8s-app": "nvidia-gpu-device-plugin"},
    ],
)
def test_plugin_pod_found_by_label(labels: dict[str, str]) -> None:
    pods = [pod("kube-proxy-x"), pod("dp-abc12", ns="kube-system", labels=labels)]
    found = find_plugin_pod(pods, "gpu-1")
    assert found is not None and found["metadata"]["name"] == "dp-abc12"


def test_plugin_pod_by_name_prefix_but_never_the_validator() -> None:
    pods = [
        pod("nvidia-device-plugin-validator-z9", labels={"app": "nvidia-device-plugin-validator"}),
        pod("nvidia-device-plugin-mps-control-daemon-q1"),
        pod("nvidia-gpu-device-plugin-k2j4"),
    ]
    found = find_plugin_pod(pods)
    assert found is not None and found["metadata"]["name"] == "nvidia-gpu-device-plugin-k2j4"
    assert find_plugin_pod(pods[:2]) is None
    assert find_plugin_pod(["not a pod", {"metadata": "junk"}]) is None


def test_plugin_pod_prefers_live_pod_on_the_right_node() -> None:
    label = {"app": "nvidia-device-plugin-daemonset"}
    pods = [
        pod("nvidia-device-plugin-daemonset-old", labels=label, deleting=True),
        pod("nvidia-device-plugin-daemonset-other", labels=label, node="gpu-2"),
        pod("nvidia-device-plugin-daemonset-new", labels=label, phase="Pending", ready=False),
        pod("nvidia-device-plugin-daemonset-live", labels=label),
    ]
    found = find_plugin_pod(pods, "gpu-1")
    assert found is not None and found["metadata"]["name"] == "nvidia-device-plugin-daemonset-live"


def test_crash_looping_plugin_pod() -> None:
    pods = [
        pod(
            "nvidia-device-plugin-daemonset-7xk2p",
            labels={"app": "nvidia-device-plugin-daemonset"},
            ready=False,
            restarts=12,
            waiting="CrashLoopBackOff",
            last="Error",
        )
    ]
    g = build(evidence(pods=pods))
    v = g.values
    assert g.known and v["pod_known"] and not v["log_known"]
    assert v["log_reason"].startswith("the device-plugin log on the node: unavailable")
    assert (v["pod_found"], v["pod_name"], v["pod_namespace"], v["pod_phase"], v["pod_ready"]) == (
        True,
        "nvidia-device-plugin-daemonset-7xk2p",
        "gpu-operator",
        "Running",
        False,
    )
    assert (v["restart_count"], v["waiting_reason"], v["last_terminated_reason"]) == (
        12,
        "CrashLoopBackOff",
        "Error",
    )
    [ref] = g.cites["pod_name"]
    assert ref.source == "b/node-pods.json" and '"nvidia-device-plugin-daemonset-7xk2p"' in ref.text


def test_init_container_waiting_reason_wins() -> None:
    pods = [
        pod(
            "nvidia-device-plugin-daemonset-a",
            labels={"app": "nvidia-device-plugin-daemonset"},
            phase="Pending",
            ready=False,
            init_waiting="CrashLoopBackOff",
        )
    ]
    v = build(evidence(pods=pods)).values
    assert v["waiting_reason"] == "Init:CrashLoopBackOff" and v["restart_count"] == 4


def test_node_pods_without_plugin_means_not_found() -> None:
    v = build(evidence(pods=[pod("kube-proxy-x")])).values
    assert v["pod_known"] and not v["pod_found"] and v["pod_name"] == ""


def test_unknown_when_neither_part_was_read() -> None:
    forbidden = Evidence(Key.NODE_PODS, Status.FORBIDDEN, "pods is forbidden", "", "api")
    g = build(evidence(extra=(forbidden,)))
    assert not g.known
    assert g.reason == (
        "the device-plugin log on the node: unavailable: not collected: the "
        "device-plugin log on the node; pods on the pod's node: forbidden: pods "
        "is forbidden"
    )
    assert g.values["unhealthy_devices"] == [] and g.values["config"]["printed"] is False


def test_empty_log_file_is_an_unknown_part() -> None:
    g = build(evidence(log="", pods=[pod("kube-proxy-x")]))
    assert g.known and not g.values["log_known"]
    assert (
        g.values["log_reason"] == "the device-plugin log on the node: error: "
        "b/device-plugin.log is empty"
    )


def test_build_facts_registers_the_group() -> None:
    facts = build_facts(evidence(log=LOG))
    assert facts.value("device_plugin.unhealthy_devices")[0]["xid"] == 79
    assert [r.line for r in facts.citations("device_plugin.unhealthy_xids")] == [4]
