"""The device-plugin log parser on every generation's line shapes (k8s-messages.md 6 and 7.1)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputriage.parsers.device_plugin import parse_device_plugin_log

UUID = "GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8"

# v0.14+/HEAD klog start-up with a multi-line config, then a health-check sequence.
KLOG = """\
I0813 08:02:09.771203       1 main.go:178] Starting FS watcher.
I0813 08:02:09.771288       1 main.go:185] Starting OS watcher.
I0813 08:02:09.771645       1 main.go:200] Starting Plugins.
I0813 08:02:09.771662       1 main.go:257] Loading configuration.
I0813 08:02:09.772436       1 main.go:276] \n\
Running with config:
{
  "version": "v1",
  "flags": {
    "migStrategy": "mixed",
    "failOnInitError": true,
    "plugin": {
      "passDeviceSpecs": true,
      "deviceListStrategy": [
        "envvar",
        "cdi-annotations"
      ],
      "deviceIDStrategy": "uuid"
    }
  },
  "resources": {
    "gpus": [
      {
        "pattern": "*",
        "name": "nvidia.com/gpu"
      }
    ]
  },
  "sharing": {
    "timeSlicing": {
      "renameByDefault": true,
      "resources": [
        {
          "name": "nvidia.com/gpu",
          "devices": "all",
          "replicas": 8
        }
      ]
    }
  }
}
I0813 08:02:09.772450       1 main.go:279] Retrieving plugins.
I0813 08:02:10.416911       1 server.go:147] Starting to serve 'nvidia.com/gpu.shared' on \
/var/lib/kubelet/device-plugins/nvidia-gpu.sock
I0813 08:02:10.420374       1 server.go:154] Registered device plugin for 'nvidia.com/gpu.shared' \
with Kubelet
I0813 08:02:10.468230       1 health.go:64] Ignoring the following XIDs for health checks: \
map[13:true 31:true 43:true 45:true 68:true 109:true]
I0813 10:41:02.002792       1 health.go:151] Skipping non-nvmlEventTypeXidCriticalError event: \
{Device:{Handle:0x7f0dcf40bdf8} EventType:2 EventData:0 GpuInstanceId:4294967295 \
ComputeInstanceId:4294967295}
I0813 10:41:05.100000       1 health.go:155] Skipping event {Device:{Handle:0x7f0dcf40bdf8} \
EventType:8 EventData:43 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}
I0813 10:41:07.918342       1 health.go:159] Processing event {Device:{Handle:0x7f4b2c11e9a8} \
EventType:8 EventData:79 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}
I0813 10:41:07.918405       1 health.go:185] XidCriticalError: Xid=79 on Device=GPU-5f2d3c9e-8a41\
-7b6e-92c1-4d0e8f7a6b13; marking device as unhealthy.
I0813 10:41:07.918512       1 server.go:276] 'nvidia.com/gpu.shared' device marked unhealthy: \
GPU-5f2d3c9e-8a41-7b6e-92c1-4d0e8f7a6b13
"""


def test_klog_startup_config_and_xid_health_check() -> None:
    log = parse_device_plugin_log(KLOG)
    assert log.starts == [1]
    assert log.registered == [("nvidia.com/gpu.shared", 44)]
    assert log.serving == [("nvidia.com/gpu.shared", 43)]
    cfg = log.config
    assert (cfg.printed, cfg.line, cfg.mig_strategy, cfg.sharing, cfg.replicas) == (
        True,
        6,
        "mixed",
        "time-slicing",
        8,
    )
    assert cfg.shared_resources == ["nvidia.com/gpu.shared"]
    assert cfg.rename_by_default and cfg.fail_on_init_error
    assert cfg.device_list_strategy == ["envvar", "cdi-annotations"]
    assert cfg.device_id_strategy == "uuid" and cfg.resources == ["nvidia.com/gpu"]
    assert log.ignored_xids == [13, 31, 43, 45, 68, 109] and log.ignored_xids_line == 45
    assert log.skipped_events == [
        {"type": 2, "kind": "double_bit_ecc", "xid": 0, "line": 46},
        {"type": 8, "kind": "xid", "xid": 43, "line": 47},
    ]
    assert log.skipped_xids == [43]
    assert log.processed_xids == [(79, 48)]
    [dev] = log.unhealthy
    assert (dev.uuid, dev.xid, dev.resource, dev.reason, dev.line, dev.lines) == (
        "GPU-5f2d3c9e-8a41-7b6e-92c1-4d0e8f7a6b13",
        79,
        "nvidia.com/gpu.shared",
        "xid",
        49,
        [49, 50],
    )
    assert log.errors == [] and log.nvml_errors == []


def test_old_go_log_xid_69_device_goes_unhealthy() -> None:
    text = (
        f"2020/08/10 19:09:42 XidCriticalError: Xid=69 on Device={UUID}, the device will go "
        f"unhealthy.\n2020/08/10 19:09:42 'nvidia.com/gpu' device marked unhealthy: {UUID}\n"
    )
    [dev] = parse_device_plugin_log(text).unhealthy
    assert (dev.uuid, dev.xid, dev.resource, dev.lines) == (UUID, 69, "nvidia.com/gpu", [1, 2])


def test_beta_wording_without_resource_and_all_devices() -> None:
    text = (
        "2018/03/01 10:00:00 XidCriticalError: Xid=48, All devices will go unhealthy.\n"
        "2018/03/01 10:00:00 device marked unhealthy: GPU-aaaa-bbbb\n"
    )
    log = parse_device_plugin_log(text)
    assert [(d.uuid, d.xid, d.resource) for d in log.unhealthy] == [
        ("all", 48, ""),
        ("GPU-aaaa-bbbb", 0, ""),
    ]
    assert [m.text for m in log.all_unhealthy] == [
        "XidCriticalError: Xid=48, All devices will go unhealthy"
    ]


@pytest.mark.parametrize(
    ("line", "uuid", "reason"),
    [
        (
            "I0101 00:00:00.000000 1 health.go:98] Marking device GPU-1111 as unhealthy: "
            "ERROR_NOT_SUPPORTED",
            "GPU-1111",
            "nvml_error",
        ),
        (
            "W0101 00:00:00.000000 1 health.go:90] Could not determine device placement for MIG-22: "
            "failed to get parent device handle: ERROR_UNKNOWN; marking it unhealthy.",
            "MIG-22",
            "placement_unknown",
        ),
        (
            "I0101 00:00:00.000000 1 health.go:92] unable to get device handle from UUID: "
            "ERROR_GPU_IS_LOST; marking it as unhealthy",
            "",
            "no_handle",
        ),
        (
            "I0101 00:00:00.000000 1 health.go:95] unable to determine the supported events for "
            "GPU-3333: ERROR_UNKNOWN; marking it as unhealthy",
            "GPU-3333",
            "events_unsupported",
        ),
        (
            "2018/02/27 16:43:50 Warning: GPU with UUID GPU-edae6d5d-6698-fb8d-2c6b-2a791224f089 is too "
            "old to support healtchecking with error: %!s(MISSING). Marking it unhealthy",
            "GPU-edae6d5d-6698-fb8d-2c6b-2a791224f089",
            "too_old",
        ),
    ],
)
def test_every_unhealthy_wording(line: str, uuid: str, reason: str) -> None:
    [dev] = parse_device_plugin_log(line).unhealthy
    assert (dev.uuid, dev.xid, dev.reason, dev.line) == (uuid, 0, reason, 1)


def test_error_waiting_for_event_marks_all() -> None:
    text = (
        "I0101 00:00:00.000000 1 health.go:140] Error waiting for event: ERROR_GPU_IS_LOST; "
        "Marking all devices as unhealthy\n"
    )
    log = parse_device_plugin_log(text)
    assert [(d.uuid, d.reason) for d in log.unhealthy] == [("all", "event_wait_failed")]
    assert len(log.all_unhealthy) == 1


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "loading NVML\nFailed to start nvml with error:  could not load NVML library\n",
            "could not load NVML library",
        ),
        (
            "E0305 10:11:12.123456       1 factory.go:87] Failed to initialize NVML: "
            "ERROR_LIBRARY_NOT_FOUND.\n",
            "ERROR_LIBRARY_NOT_FOUND",
        ),
        (
            "2021/01/01 00:00:00 Failed to initialize NVML: could not load NVML library.\n",
            "could not load NVML library",
        ),
        (
            "W0101 00:00:00.000000 1 health.go:105] NVML init failed: ERROR_DRIVER_NOT_LOADED; health "
            "checks disabled\n",
            "ERROR_DRIVER_NOT_LOADED",
        ),
    ],
)
def test_nvml_init_failures(text: str, error: str) -> None:
    log = parse_device_plugin_log(text)
    assert [m.text for m in log.nvml_errors] == [error]


def test_nvml_hint_block_and_errors() -> None:
    text = """\
E0305 10:11:12.123456       1 factory.go:87] Failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND.
E0305 10:11:12.123470       1 factory.go:88] If this is a GPU node, did you set the docker \
default runtime to `nvidia`?
E0305 10:11:12.123480       1 factory.go:89] You can check the prerequisites at: \
https://github.com/NVIDIA/k8s-device-plugin#prerequisites
E0305 10:11:12.123490       1 factory.go:91] If this is not a GPU node, you should set up a \
toleration or nodeSelector to only deploy this plugin on GPU nodes
E0305 10:11:12.123500       1 main.go:123] error starting plugins: error creating plugin \
manager: unable to create plugin manager: nvml init failed: ERROR_LIBRARY_NOT_FOUND
"""
    log = parse_device_plugin_log(text)
    assert log.runtime_hint == [2]
    assert [(m.text, m.lines) for m in log.nvml_errors] == [("ERROR_LIBRARY_NOT_FOUND", [1, 5])]
    assert [m.line for m in log.errors] == [1, 2, 3, 4, 5]


def test_registration_failures_and_restarts() -> None:
    text = """\
2020/02/09 00:20:15 Starting to serve on /var/lib/kubelet/device-plugins/nvidia.sock
2020/02/09 00:20:15 Could not register device plugin: rpc error: code = Unimplemented desc = \
unknown service deviceplugin.Registration
2020/02/09 00:20:15 Could not contact Kubelet, retrying. Did you enable the device plugin \
feature gate?
I1017 12:05:33.312491    1667 main.go:246] inotify: /var/lib/kubelet/device-plugins/kubelet.sock \
created, restarting.
I1017 12:05:40.000000    1667 main.go:250] Received SIGHUP, restarting.
I1017 12:05:41.000000    1667 main.go:246] inotify: /var/lib/kubelet/device-plugins/kubelet.sock \
created, restarting.
"""
    log = parse_device_plugin_log(text)
    assert [m.text for m in log.registration_errors] == [
        "Could not register device plugin: rpc error: code = Unimplemented desc = unknown "
        "service deviceplugin.Registration",
        "Could not contact Kubelet",
    ]
    assert [(m.text, m.count) for m in log.restarts] == [
        ("inotify: /var/lib/kubelet/device-plugins/kubelet.sock created, restarting", 2),
        ("Received SIGHUP, restarting", 1),
    ]
    assert log.registered == []


def test_journald_wrapped_plugin_with_config_across_prefixed_lines() -> None:
    host = "May 22 17:53:18 ip-192-168-87-217.us-west-2.compute.internal nvidia-device-plugin[5]:"
    body = [
        "I0522 17:53:18.740797  579106 main.go:253]",
        "Running with config:",
        "{",
        '  "version": "v1",',
        '  "flags": {',
        '    "migStrategy": "none"',
        "  },",
        '  "sharing": {',
        '    "mps": {',
        '      "resources": [',
        '        {"name": "nvidia.com/gpu", "replicas": 2}',
        "      ]",
        "    }",
        "  }",
        "}",
        "I0522 17:53:19.000000  579106 server.go:154] Registered device plugin for "
        "'nvidia.com/gpu' with Kubelet",
    ]
    log = parse_device_plugin_log("\n".join(f"{host} {b}" for b in body))
    assert (log.config.printed, log.config.line, log.config.sharing, log.config.replicas) == (
        True,
        2,
        "mps",
        2,
    )
    assert log.config.mig_strategy == "none"
    assert log.registered == [("nvidia.com/gpu", 16)]


def test_json_records_and_single_line_config() -> None:
    text = (
        '{"ts":1709633472123.456,"caller":"main.go:235","msg":"Starting NVIDIA Device Plugin",'
        '"v":0,"version":"v0.17.0"}\n'
        '{"ts":1709633472124.0,"caller":"main.go:276","msg":"Running with config:\\n'
        '{\\"flags\\":{\\"migStrategy\\":\\"single\\"}}","v":0}\n'
        '{"ts":1709633473000.0,"caller":"server.go:154","msg":"Registered device plugin for '
        '\'nvidia.com/mig-1g.10gb\' with Kubelet","v":0}\n'
        '{"ts":1709633474000.0,"caller":"main.go:300","msg":"GRPC server for '
        '\'nvidia.com/gpu\' crashed with error: EOF","err":"EOF"}\n'
    )
    log = parse_device_plugin_log(text)
    assert (log.version, log.version_line) == ("v0.17.0", 1)
    assert log.config.mig_strategy == "single" and log.config.line == 2
    assert log.registered == [("nvidia.com/mig-1g.10gb", 3)]
    assert [(m.text, m.line) for m in log.errors] == [
        ("GRPC server for 'nvidia.com/gpu' crashed with error: EOF: EOF", 4)
    ]


def test_gke_plugin_lines() -> None:
    text = """\
I0305 10:00:00.000000       1 manager.go:120] device-plugin registered with the kubelet
I0305 10:00:01.000000       1 health_checker.go:80] Skip error Xid=13 as it is not Xid Critical
I0305 10:00:02.000000       1 health_checker.go:90] XidCriticalError: Xid=48 on Device=nvidia0, \
uuid=GPU-9999, the device will go unhealthy.
I0305 10:00:03.000000       1 manager.go:200] Found 3 GPUs, while only 4 are registered. Stopping \
device-plugin server.
"""
    log = parse_device_plugin_log(text)
    assert log.registered == [("nvidia.com/gpu", 1)]
    assert log.skipped_xids == [13]
    assert [(d.uuid, d.xid) for d in log.unhealthy] == [("GPU-9999", 48)]
    assert [m.line for m in log.restarts] == [4]


def test_no_devices_and_mig_fallback() -> None:
    text = (
        "I0101 00:00:00.000000 1 main.go:1] No MIG devices found. Falling back to "
        "mig.strategy=none\nI0101 00:00:00.000000 1 main.go:2] No devices found. Waiting "
        "indefinitely.\n"
    )
    log = parse_device_plugin_log(text)
    assert log.no_devices == [2] and log.config.mig_strategy == "none"
    assert not log.config.printed


def test_healthchecks_disabled_by_env() -> None:
    text = (
        "I0101 00:00:00.000000 1 health.go:64] Ignoring the following XIDs for health "
        "checks: map[0:true]\n"
    )
    log = parse_device_plugin_log(text)
    assert log.ignored_xids == [0] and log.healthcheck_disabled == [1]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "\x00\x01\x02garbage\xff",
        "{not json",
        'Running with config:\n{\n  "flags": {\n',
        "Running with config:\nnot json at all\nNo devices found.",
    ],
)
def test_bad_input_gives_empty_results(text: str) -> None:
    log = parse_device_plugin_log(text)
    assert log.unhealthy == [] and log.registered == [] and not log.config.printed


def test_truncated_config_does_not_swallow_later_lines() -> None:
    log = parse_device_plugin_log("Running with config:\nnot json at all\nNo devices found.")
    assert log.no_devices == [3]


def test_large_junk_log_is_linear() -> None:
    junk = "I0101 00:00:00.000000 1 x.go:1] " + "a" * 200 + "\n"
    start = time.perf_counter()
    log = parse_device_plugin_log(junk * 20_000)
    assert log.lines_scanned == 20_000 and log.errors == []
    assert time.perf_counter() - start < 10


PIECES = st.sampled_from(
    [
        "I0813 08:02:09.771203       1 main.go:178] ",
        "2020/08/10 19:09:42 ",
        "Running with config:",
        "{",
        "}",
        '"',
        "\\",
        "XidCriticalError: Xid=",
        "79",
        " on Device=",
        "GPU-1",
        "; ",
        "'nvidia.com/gpu' device marked unhealthy: ",
        "Skipping event {EventType:8 EventData:",
        "Registered device plugin for '",
        "' with Kubelet",
        "Failed to initialize NVML: ",
        "\n",
        "May 22 17:53:18 h nvidia-device-plugin[5]: ",
        '{"msg":"',
        "map[13:true 0:",
        "\x00",
        "é",
    ]
)


@given(st.lists(PIECES, max_size=60).map("".join))
@settings(max_examples=300, deadline=None)
def test_never_raises_on_shuffled_real_pieces(text: str) -> None:
    log = parse_device_plugin_log(text)
    assert log.lines_scanned == len(text.splitlines())


def test_absurdly_long_numbers_do_not_raise() -> None:
    big = "9" * 5000  # int() refuses more than 4,300 digits
    log = parse_device_plugin_log(
        f"XidCriticalError: Xid={big} on Device=GPU-1a2b, the device will go unhealthy.\n"
        f"Skipping event {{Device:{{Handle:0xc000}} EventType:{big} EventData:{big}}}\n"
        f"Ignoring the following XIDs for health checks: [{big} 13]\n"
    )
    assert [(d.uuid, d.xid) for d in log.unhealthy] == [("GPU-1a2b", -1)]
    assert log.ignored_xids == [-1, 13]
    assert [(e["type"], e["xid"]) for e in log.skipped_events] == [(-1, 0)]
