"""NVIDIA k8s-device-plugin (and forks) log wordings across versions, each a real pasted log.

Every ``log`` below is copied from the public issue named beside it (``kubectl logs`` of the
plugin pod, Go ``log`` / klog prefixes kept as pasted). The table pins what
:func:`gputriage.parsers.device_plugin.parse_device_plugin_log` must find in it.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from gputriage.parsers.device_plugin import DevicePluginLog, parse_device_plugin_log

# (id, log, expected) - expected keys name DevicePluginLog fields and what they must hold.
VARIANTS: list[tuple[str, str, dict[str, Any]]] = [
    # --- registration -------------------------------------------------------------------------
    # 1.0.0-beta Go log, kubelet without the DevicePlugins gate: NVIDIA/k8s-device-plugin#82
    (
        "beta-registration-deadline",
        "2018/11/27 03:43:50 Loading NVML\n"
        "2018/11/27 03:43:50 Fetching devices.\n"
        "2018/11/27 03:43:51 Starting FS watcher.\n"
        "2018/11/27 03:43:51 Starting OS watcher.\n"
        "2018/11/27 03:44:00 Starting to serve on /var/lib/kubelet/device-plugins/nvidia.sock\n"
        "2018/11/27 03:44:12 Could not register device plugin: context deadline exceeded\n"
        "2018/11/27 03:44:13 Could not contact Kubelet, retrying. Did you enable the device plugin "
        "feature gate?\n",
        {
            "registration_errors": [
                "Could not register device plugin: context deadline exceeded",
                "Could not contact Kubelet",
            ],
            "registered": [],
            "starts": 1,
        },
    ),
    # plugin newer than the kubelet: NVIDIA/k8s-device-plugin#109 (title)
    (
        "registration-unknown-service",
        "Could not register device plugin: rpc error: code = Unimplemented desc = unknown service "
        "v1beta1.Registration\n",
        {
            "registration_errors": [
                "Could not register device plugin: rpc error: code = "
                "Unimplemented desc = unknown service v1beta1.Registration"
            ]
        },
    ),
    # v0.12 Go log, healthy start: NVIDIA/k8s-device-plugin#328
    (
        "v0.12-registered",
        "2022/08/11 06:57:10 Starting Plugins.\n"
        "2022/08/11 06:57:10 Loading configuration.\n"
        "2022/08/11 06:57:10 Initializing NVML.\n"
        "2022/08/11 06:57:10 Retreiving plugins.\n"
        "2022/08/11 06:57:10 No MIG devices found. Falling back to mig.strategy=none\n"
        "2022/08/11 06:57:10 Starting GRPC server for 'nvidia.com/gpu'\n"
        "2022/08/11 06:57:10 Starting to serve 'nvidia.com/gpu' on "
        "/var/lib/kubelet/device-plugins/nvidia-gpu.sock\n"
        "2022/08/11 06:57:10 Registered device plugin for 'nvidia.com/gpu' with Kubelet\n",
        {
            "registered": ["nvidia.com/gpu"],
            "serving": ["nvidia.com/gpu"],
            "registration_errors": [],
            "nvml_errors": [],
        },
    ),
    # --- NVML cannot start ----------------------------------------------------------------------
    # earliest wording: NVIDIA/k8s-device-plugin#23
    (
        "earliest-nvml",
        "Loading NVML\nFailed to start nvml with error:  could not load NVML library\n",
        {"nvml_errors": ["could not load NVML library"]},
    ),
    # Go log era, k8s 1.10: NVIDIA/k8s-device-plugin#60 (title line)
    (
        "go-log-nvml",
        "2018/06/29 08:52:25 Loading NVML\n"
        "2018/06/29 08:52:25 Failed to initialize NVML: could not load NVML library.\n"
        "2018/06/29 08:52:25 If this is a GPU node, did you set the docker default runtime to "
        "`nvidia`?\n",
        {"nvml_errors": ["could not load NVML library"], "runtime_hint": 1},
    ),
    # klog at Info then Fatal (Volcano's fork of the plugin): volcano-sh/volcano#3160
    (
        "klog-info-then-fatal",
        "I1030 05:12:02.805254       1 main.go:77] Loading NVML\n"
        "I1030 05:12:02.805419       1 main.go:79] Failed to initialize NVML: could not load NVML "
        "library.\n"
        "I1030 05:12:02.805428       1 main.go:80] If this is a GPU node, did you set the docker "
        "default runtime to `nvidia`?\n"
        "I1030 05:12:02.805431       1 main.go:81] You can check the prerequisites at: "
        "https://github.com/NVIDIA/k8s-device-plugin#prerequisites\n"
        "F1030 05:12:02.805498       1 main.go:44] failed to initialize NVML\n",
        {"nvml_errors": ["could not load NVML library"], "runtime_hint": 1},
    ),
    # v0.14.5 go-nvml return code: Project-HAMi/HAMi#452 (title)
    (
        "v0.14-nvml-error-unknown",
        "Failed to initialize NVML: ERROR_UNKNOWN\n",
        {"nvml_errors": ["ERROR_UNKNOWN"]},
    ),
    # v0.16 fatal chain: NVIDIA/k8s-device-plugin#856
    (
        "v0.16-nvml-init-failed",
        "error starting plugins: error creating plugin manager: unable to create plugin manager: "
        "nvml init failed: ERROR_LIBRARY_NOT_FOUND\n",
        {"nvml_errors": ["ERROR_LIBRARY_NOT_FOUND"]},
    ),
    # v0.17 resource-manager warning: NVIDIA/k8s-device-plugin#1371
    (
        "v0.17-nvml-not-detected",
        'W0819 07:02:54.757542       1 rm.go:108] mig-strategy="mixed" is only supported with '
        "NVML\n"
        "W0819 07:02:54.757556       1 rm.go:109] NVML not detected: could not load NVML library: "
        "libnvidia-ml.so.1: cannot open shared object file: No such file or directory\n",
        {
            "nvml_errors": [
                "could not load NVML library: libnvidia-ml.so.1: cannot open shared "
                "object file: No such file or directory"
            ]
        },
    ),
    # v0.15+: no devices and no NVML: NVIDIA/k8s-device-plugin#1134 (title)
    (
        "incompatible-strategy",
        "Incompatible strategy detected auto\nNo devices found. Waiting indefinitely.\n",
        {"no_devices": 1, "errors_contain": "Incompatible strategy detected auto"},
    ),
    # v0.17 klog with multi-line version, then nothing found: NVIDIA/k8s-device-plugin#1080
    (
        "v0.17-start",
        'I1129 11:18:42.706600       1 main.go:235] "Starting NVIDIA Device Plugin" version=<\n'
        "        d475b2cf\n"
        "        commit: d475b2cfcf12b983a4975d4fc59d91af432cf28e\n"
        " >\n"
        "I1129 11:18:42.706636       1 main.go:238] Starting FS watcher for "
        "/var/lib/kubelet/device-plugins\n"
        "I1129 11:18:42.706683       1 main.go:245] Starting OS watcher.\n"
        "I1129 11:18:42.706950       1 main.go:260] Starting Plugins.\n",
        {"starts": 1, "registered": []},
    ),
    # v0.18 configuration failure: NVIDIA/k8s-device-plugin#1470
    (
        "v0.18-invalid-strategy",
        "error starting plugins: error getting plugins: unable to create plugins: failed to "
        "construct resource managers: invalid device discovery strategy\n",
        {"errors_contain": "invalid device discovery strategy"},
    ),
    # v0.14: NVIDIA/k8s-device-plugin#397 (title)
    (
        "v0.14-resource-managers",
        "failed to construct NVML resource managers\n",
        {"errors_contain": "failed to construct NVML resource managers"},
    ),
    # --- health checks ----------------------------------------------------------------------------
    # beta (no healthchecking on an old GPU): NVIDIA/k8s-device-plugin#33
    (
        "too-old",
        "2018/02/27 16:43:50 Warning: GPU with UUID GPU-edae6d5d-6698-fb8d-2c6b-2a791224f089 is too "
        "old to support healtchecking with error: %!s(MISSING). Marking it unhealthy\n",
        {"unhealthy": [("GPU-edae6d5d-6698-fb8d-2c6b-2a791224f089", 0, "too_old")]},
    ),
    # 1.0 Go log Xid: NVIDIA/k8s-device-plugin#189
    (
        "xid-go-log",
        "2020/08/10 19:09:42 XidCriticalError: Xid=69 on Device=GPU-7540a9b3-eeb9-1214-1526-"
        "f93c9ea826a8, the device will go unhealthy.\n"
        "2020/08/10 19:09:42 'nvidia.com/gpu' device marked unhealthy: "
        "GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8\n",
        {"unhealthy": [("GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8", 69, "xid")]},
    ),
    # v0.14+ klog health.go wording ("; marking device as unhealthy"), as pasted with
    # kubectl --timestamps: akash-network/support#244
    (
        "xid-klog-v0.14",
        "2024-08-09T13:32:51.873584285Z I0809 13:32:51.873532       1 health.go:159] Processing "
        "event {Device:{Handle:0x7e590d4986e8} EventType:8 EventData:94 GpuInstanceId:4294967295 "
        "ComputeInstanceId:4294967295}\n"
        "2024-08-09T13:32:51.873588972Z I0809 13:32:51.873541       1 health.go:185] "
        "XidCriticalError: Xid=94 on Device=GPU-3b6ec030-5adc-1847-e155-79f635584b4e; marking "
        "device as unhealthy.\n"
        "2024-08-09T13:32:51.873595882Z I0809 13:32:51.873567       1 server.go:292] "
        "'nvidia.com/gpu' device marked unhealthy: GPU-3b6ec030-5adc-1847-e155-79f635584b4e\n",
        {
            "unhealthy": [("GPU-3b6ec030-5adc-1847-e155-79f635584b4e", 94, "xid")],
            "processed_xids": [94],
        },
    ),
    # logrus text format of a plugin derived from NVIDIA's beta (plugin older than the
    # kubelet's API): hustcat/k8s-rdma-device-plugin#10
    (
        "logrus-unknown-service-old-api",
        "ERRO[0008] Could not register device plugin: rpc error: code = Unimplemented desc = "
        "unknown service deviceplugin.Registration\n"
        "INFO[0008] Could not contact Kubelet, retrying. Did you enable the device plugin feature "
        "gate?\n",
        {
            "registration_errors": [
                "Could not register device plugin: rpc error: code = "
                "Unimplemented desc = unknown service deviceplugin.Registration",
                "Could not contact Kubelet",
            ]
        },
    ),
]


def _check(log: DevicePluginLog, expected: dict[str, Any]) -> None:
    if "registered" in expected:
        assert [r for r, _ in log.registered] == expected["registered"]
    if "serving" in expected:
        assert [r for r, _ in log.serving] == expected["serving"]
    if "registration_errors" in expected:
        assert [m.text for m in log.registration_errors] == expected["registration_errors"]
    if "nvml_errors" in expected:
        assert [m.text for m in log.nvml_errors] == expected["nvml_errors"]
    if "runtime_hint" in expected:
        assert len(log.runtime_hint) == expected["runtime_hint"]
    if "no_devices" in expected:
        assert len(log.no_devices) == expected["no_devices"]
    if "starts" in expected:
        assert len(log.starts) == expected["starts"]
    if "errors_contain" in expected:
        assert any(expected["errors_contain"] in m.text for m in log.errors), log.errors
    if "unhealthy" in expected:
        assert [(d.uuid, d.xid, d.reason) for d in log.unhealthy] == expected["unhealthy"]
    if "processed_xids" in expected:
        assert sorted({x for x, _ in log.processed_xids}) == expected["processed_xids"]


@pytest.mark.parametrize(
    ("log", "expected"), [(t, e) for _, t, e in VARIANTS], ids=[i for i, _, _ in VARIANTS]
)
def test_device_plugin_log_variant(log: str, expected: dict[str, Any]) -> None:
    _check(parse_device_plugin_log(log), expected)


def test_device_plugin_variants_survive_kubectl_timestamps() -> None:
    """``kubectl logs --timestamps`` puts an RFC 3339 stamp before every line (the form pasted in
    akash-network/support#244); every row must read the same underneath it."""
    for _, text, expected in VARIANTS:
        if re.match(r"\d{4}-\d\d-\d\dT", text):
            continue  # pasted with --timestamps already
        stamped = "".join(f"2024-07-29T10:22:37.963223476Z {line}\n" for line in text.splitlines())
        _check(parse_device_plugin_log(stamped), expected)
