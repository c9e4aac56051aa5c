"""The ``host`` fact group: per-source known flags, values and the lines they cite."""

from __future__ import annotations

from gputriage.evidence.bundle import decode
from gputriage.evidence.model import Evidence, EvidenceSet, Key
from gputriage.facts import host
from gputriage.facts.model import FactGroup, FactSet, Target

LSMOD = b"""\
Module                  Size  Used by
nvidia_drm             77824  0
nvidia_modeset       1302528  1 nvidia_drm
nvidia              56532992  2 nvidia_modeset
drm                   622592  4 nvidia_drm
"""

DEV_NO_UVM = b"""\
crw-rw-rw- 1 root root 195,   0 Mar 12 08:14 /dev/nvidia0
crw-rw-rw- 1 root root 195,   1 Mar 12 08:14 /dev/nvidia1
crw-rw-rw- 1 root root 195, 255 Mar 12 08:14 /dev/nvidiactl
crw-rw-rw- 1 root root 195, 254 Mar 12 08:14 /dev/nvidia-modeset
"""

K3S = b"""\
version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
"""


def build(*items: Evidence) -> FactGroup:
    return host.build(EvidenceSet(items), Target(), {})


def ev(key: Key, blob: bytes) -> Evidence:
    return decode(key, blob, source=f"bundle/{key.value}")


def test_all_three_sources() -> None:
    group = build(
        ev(Key.LSMOD, LSMOD), ev(Key.DEV_NVIDIA, DEV_NO_UVM), ev(Key.CONTAINERD_CONFIG, K3S)
    )
    v = group.values
    assert group.known
    assert (v["modules_known"], v["devices_known"], v["containerd_known"]) == (True, True, True)
    # Driver loaded without nvidia_uvm: CUDA cannot start, and /dev/nvidia-uvm is absent.
    assert (v["nvidia"], v["nvidia_uvm"], v["nvidia_modeset"], v["nouveau"]) == (
        True,
        False,
        True,
        False,
    )
    assert v["module_use_counts"] == {"nvidia_drm": 0, "nvidia_modeset": 1, "nvidia": 2}
    assert (v["gpu_device_nodes"], v["dev_nvidiactl"], v["dev_nvidia_uvm"]) == (2, True, False)
    assert v["device_nodes"] == ["nvidia0", "nvidia1", "nvidiactl", "nvidia-modeset"]
    assert v["containerd_layout"] == "v2"
    assert (v["containerd_nvidia_runtime"], v["containerd_nvidia_runtime_name"]) == (True, "nvidia")
    assert v["containerd_nvidia_binary"] == "/usr/bin/nvidia-container-runtime"
    assert v["containerd_default_runtime"] == "runc"
    # The k3s mismatch: runc uses the systemd cgroup driver, the nvidia runtime does not.
    assert (v["containerd_systemd_cgroup"], v["containerd_runc_systemd_cgroup"]) == (False, True)
    assert v["containerd_cdi_enabled"] is False
    assert v["containerd_runtimes"] == [
        {
            "name": "runc",
            "runtime_type": "io.containerd.runc.v2",
            "binary_name": "",
            "systemd_cgroup": True,
        },
        {
            "name": "nvidia",
            "runtime_type": "io.containerd.runc.v2",
            "binary_name": "/usr/bin/nvidia-container-runtime",
            "systemd_cgroup": False,
        },
    ]


def test_citations() -> None:
    group = build(
        ev(Key.LSMOD, LSMOD), ev(Key.DEV_NVIDIA, DEV_NO_UVM), ev(Key.CONTAINERD_CONFIG, K3S)
    )
    facts = FactSet(Target(), {"host": group})
    assert [str(r) for r in facts.citations("host.nvidia")] == [
        "bundle/lsmod:4: nvidia              56532992  2 nvidia_modeset"
    ]
    assert [r.line for r in facts.citations("host.gpu_device_nodes")] == [1, 2]
    assert [r.line for r in facts.citations("host.containerd_runc_systemd_cgroup")] == [7]
    assert [r.line for r in facts.citations("host.containerd_nvidia_binary")] == [11]
    assert [r.line for r in facts.citations("host.containerd_default_runtime")] == [3]
    assert facts.citations("host.dev_nvidia_uvm") == ()  # absent: nothing to cite


def test_known_if_any_source_is_ok_with_per_source_reasons() -> None:
    group = build(
        ev(Key.DEV_NVIDIA, b"ls: cannot access '/dev/nvidia*': No such file or directory\n"),
        Evidence.missing(Key.LSMOD, "no SSH access"),
    )
    v = group.values
    assert group.known
    assert (v["devices_known"], v["dev_missing"], v["gpu_device_nodes"]) == (
        True,
        ["/dev/nvidia*"],
        0,
    )
    assert v["modules_known"] is False
    assert v["modules_reason"] == "loaded kernel modules (lsmod): unavailable: no SSH access"
    assert v["containerd_known"] is False
    assert v["containerd_reason"].startswith("containerd configuration: unavailable")
    assert [r.line for r in group.cites["dev_missing"]] == [1]


def test_invalid_toml_is_a_named_reason() -> None:
    group = build(ev(Key.CONTAINERD_CONFIG, b'version = 2\n[plugins."io.containerd.grpc.v1.cri"\n'))
    assert group.known and group.values["containerd_known"] is False
    assert group.values["containerd_reason"].startswith("bundle/containerd-config: invalid TOML:")
    assert group.values["containerd_nvidia_runtime"] is False


def test_unknown_when_nothing_was_read() -> None:
    group = build(
        Evidence.missing(Key.LSMOD),
        Evidence.missing(Key.DEV_NVIDIA),
        ev(Key.CONTAINERD_CONFIG, b""),
    )
    assert not group.known
    assert "loaded kernel modules (lsmod): unavailable" in group.reason
    assert "containerd configuration: error: bundle/containerd-config is empty" in group.reason
    assert group.values["nvidia"] is False and group.values["device_nodes"] == []


def test_every_field_is_declared_with_a_doc() -> None:
    assert all(spec.doc for spec in host.SPEC.fields.values())
    group = build(ev(Key.LSMOD, LSMOD))
    assert set(group.values) == set(host.SPEC.fields)
