"""Host file parsers: lsmod, ls -l /dev/nvidia* (also real ls output) and containerd configs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gputriage.parsers.host import parse_containerd_config, parse_dev_nvidia, parse_lsmod

LSMOD_GPU_NODE = """\
Module                  Size  Used by
nvidia_uvm           1523712  4
nvidia_drm             77824  0
nvidia_modeset       1302528  1 nvidia_drm
nvidia_peermem         16384  0
ib_core               434176  6 rdma_cm,ib_ipoib,nvidia_peermem,ib_umad,ib_uverbs,mlx5_ib
nvidia              56532992  35 nvidia_uvm,nvidia_peermem,nvidia_modeset
drm_kms_helper        311296  1 nvidia_drm
drm                   622592  4 drm_kms_helper,nvidia,nvidia_drm
"""

LSMOD_NOUVEAU = """\
Module                  Size  Used by
nouveau              2433024  1
mxm_wmi                16384  1 nouveau
ttm                   106496  1 nouveau
drm                   491520  4 nouveau,ttm,drm_kms_helper
"""

PROC_MODULES = """\
nvidia_uvm 1523712 0 - Live 0xffffffffc1c4f000 (POE)
nvidia 56532992 35 nvidia_uvm,nvidia_peermem,nvidia_modeset, Live 0xffffffffc0000000 (POE)
"""


def test_lsmod_on_a_gpu_node() -> None:
    mods = parse_lsmod(LSMOD_GPU_NODE)
    assert mods.problem == ""
    assert len(mods.modules) == 8
    nvidia = mods.get("nvidia")
    assert nvidia is not None
    assert (nvidia.size, nvidia.use_count) == (56532992, 35)
    assert nvidia.used_by == ("nvidia_uvm", "nvidia_peermem", "nvidia_modeset")
    assert mods.lines["nvidia"] == 7 and mods.lines["nvidia_uvm"] == 2
    assert mods.get("nouveau") is None


def test_lsmod_with_nouveau_and_proc_modules_form() -> None:
    assert parse_lsmod(LSMOD_NOUVEAU).get("nouveau") is not None
    assert parse_lsmod(LSMOD_NOUVEAU).get("nvidia") is None
    proc = parse_lsmod(PROC_MODULES)
    assert [(m.name, m.use_count) for m in proc.modules] == [("nvidia_uvm", 0), ("nvidia", 35)]
    assert proc.modules[0].used_by == ()
    assert proc.modules[1].used_by == ("nvidia_uvm", "nvidia_peermem", "nvidia_modeset")


@pytest.mark.parametrize("text", ["", "bash: lsmod: command not found\n", "\x00\x01binary"])
def test_lsmod_problem_instead_of_exception(text: str) -> None:
    mods = parse_lsmod(text)
    assert mods.modules == [] and mods.problem.startswith("no lsmod lines recognised")


LS_DEV = """\
crw-rw-rw- 1 root root 195,   0 Mar 12 08:14 /dev/nvidia0
crw-rw-rw- 1 root root 195,   1 Mar 12 08:14 /dev/nvidia1
crw-rw-rw- 1 root root 195, 255 Mar 12 08:14 /dev/nvidiactl
crw-rw-rw- 1 root root 195, 254 Mar 12 08:14 /dev/nvidia-modeset
crw-rw-rw- 1 root root 508,   0 Mar 12 08:15 /dev/nvidia-uvm
crw-rw-rw- 1 root root 508,   1 Mar 12 08:15 /dev/nvidia-uvm-tools

/dev/nvidia-caps:
total 0
cr-------- 1 root root 511, 1 Mar 12 08:14 nvidia-cap1
cr--r--r-- 1 root root 511, 2 Mar 12 08:14 nvidia-cap2
"""


def test_ls_dev_nvidia_full_node() -> None:
    listing = parse_dev_nvidia(LS_DEV)
    assert listing.problem == "" and listing.missing == []
    assert [n.name for n in listing.nodes] == [
        "nvidia0",
        "nvidia1",
        "nvidiactl",
        "nvidia-modeset",
        "nvidia-uvm",
        "nvidia-uvm-tools",
        "nvidia-caps",
        "nvidia-cap1",
        "nvidia-cap2",
    ]
    assert [n.name for n in listing.gpu_nodes()] == ["nvidia0", "nvidia1"]
    uvm = next(n for n in listing.nodes if n.name == "nvidia-uvm")
    assert (uvm.kind, uvm.major, uvm.minor, uvm.line, uvm.path) == (
        "c",
        508,
        0,
        5,
        "/dev/nvidia-uvm",
    )
    cap = next(n for n in listing.nodes if n.name == "nvidia-cap2")
    assert (cap.path, cap.mode, cap.minor) == ("/dev/nvidia-caps/nvidia-cap2", "cr--r--r--", 2)
    assert listing.has("nvidia-caps") and not listing.has("nvidia2")


def test_ls_dev_nvidia_missing_forms() -> None:
    gnu = parse_dev_nvidia("ls: cannot access '/dev/nvidia*': No such file or directory\n")
    assert (gnu.nodes, gnu.missing, gnu.missing_lines) == ([], ["/dev/nvidia*"], [1])
    busybox = parse_dev_nvidia("ls: /dev/nvidia*: No such file or directory\n")
    assert busybox.missing == ["/dev/nvidia*"]
    partial = parse_dev_nvidia(
        LS_DEV.splitlines()[2] + "\n"
        "ls: cannot access '/dev/nvidia-uvm': No such file or directory\n"
    )
    assert [n.name for n in partial.nodes] == ["nvidiactl"]
    assert partial.missing == ["/dev/nvidia-uvm"]
    assert parse_dev_nvidia("Permission denied").problem.startswith("no ls -l lines recognised")


def test_real_ls_output_of_real_device_nodes(tmp_path: Path) -> None:
    ls = shutil.which("ls", path="/usr/bin:/bin")  # coreutils: part of every base system
    assert ls is not None
    try:
        os.mknod(tmp_path / "nvidia0", 0o20666, os.makedev(195, 0))
        os.mknod(tmp_path / "nvidiactl", 0o20666, os.makedev(195, 255))
        (tmp_path / "nvidia-caps").mkdir()
        os.mknod(tmp_path / "nvidia-caps" / "nvidia-cap1", 0o20400, os.makedev(511, 1))
    except PermissionError:
        pytest.skip("creating device nodes needs CAP_MKNOD")
    out = subprocess.run(
        f"{ls} -l {tmp_path}/nvidia*",
        shell=True,
        capture_output=True,
        text=True,
        check=True,
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
    )
    listing = parse_dev_nvidia(out.stdout)
    assert [(n.name, n.major, n.minor) for n in listing.nodes] == [
        ("nvidia0", 195, 0),
        ("nvidiactl", 195, 255),
        ("nvidia-caps", None, None),
        ("nvidia-cap1", 511, 1),
    ]
    assert not listing.has("nvidia-uvm")
    missing = subprocess.run(
        f"{ls} -l {tmp_path}/nvidia-uvm*",
        shell=True,
        capture_output=True,
        text=True,
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
    )
    assert missing.returncode != 0
    assert parse_dev_nvidia(missing.stderr).missing == [f"{tmp_path}/nvidia-uvm*"]


CONTAINERD_V2 = """\
version = 2

[plugins]

  [plugins."io.containerd.grpc.v1.cri"]
    enable_cdi = true
    cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]

    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "nvidia"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
          privileged_without_host_devices = false
          runtime_engine = ""
          runtime_root = ""
          runtime_type = "io.containerd.runc.v2"

          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
            BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
            SystemdCgroup = true

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
          runtime_type = "io.containerd.runc.v2"

          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
            SystemdCgroup = true
"""

CONTAINERD_V3 = """\
version = 3

[plugins]
  [plugins.'io.containerd.cri.v1.runtime']
    cdi_spec_dirs = ['/etc/cdi', '/var/run/cdi']

    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes]
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]
          runtime_type = 'io.containerd.runc.v2'
          [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia.options]
            BinaryName = '/usr/bin/nvidia-container-runtime'
            SystemdCgroup = true
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
          runtime_type = 'io.containerd.runc.v2'
          [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
            SystemdCgroup = true

  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
"""

# k3s's generated config: the nvidia runtime does not set SystemdCgroup while runc does.
CONTAINERD_K3S_MISMATCH = """\
version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes."nvidia"]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes."nvidia".options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
"""


def test_containerd_v2_operator_config() -> None:
    cfg = parse_containerd_config(CONTAINERD_V2)
    assert (cfg.problem, cfg.version, cfg.layout) == ("", 2, "v2")
    assert cfg.default_runtime == "nvidia"
    nvidia = cfg.nvidia_runtime()
    assert nvidia is not None
    assert (nvidia.name, nvidia.binary_name, nvidia.systemd_cgroup) == (
        "nvidia",
        "/usr/local/nvidia/toolkit/nvidia-container-runtime",
        True,
    )
    assert [r.name for r in cfg.runtimes] == ["nvidia", "runc"]
    assert (cfg.cdi_enabled, cfg.cdi_spec_dirs) == (True, ["/etc/cdi", "/var/run/cdi"])


@pytest.mark.parametrize("written", ["-12", "true", '"2"', "2.0"])
def test_containerd_version_that_is_no_version_is_unknown(written: str) -> None:
    """A negative, boolean, quoted or fractional ``version`` (a hypothesis find) is not taken
    as a containerd config version; the rest of the file is still read."""
    cfg = parse_containerd_config(CONTAINERD_V2.replace("version = 2", f"version = {written}", 1))
    assert cfg.version is None
    assert (cfg.problem, cfg.layout, cfg.default_runtime) == ("", "v2", "nvidia")


def test_containerd_v3_defaults_cdi_on() -> None:
    cfg = parse_containerd_config(CONTAINERD_V3)
    assert (cfg.version, cfg.layout, cfg.default_runtime) == (3, "v3", "runc")
    nvidia = cfg.nvidia_runtime()
    assert nvidia is not None and nvidia.binary_name == "/usr/bin/nvidia-container-runtime"
    assert cfg.cdi_enabled is True  # not set: containerd 2.x enables CDI by default


def test_containerd_k3s_cgroup_mismatch_and_quoted_runtime_name() -> None:
    cfg = parse_containerd_config(CONTAINERD_K3S_MISMATCH)
    nvidia, runc = cfg.runtime("nvidia"), cfg.runtime("runc")
    assert nvidia is not None and runc is not None
    assert (nvidia.systemd_cgroup, runc.systemd_cgroup) == (None, True)
    assert cfg.cdi_enabled is False  # v2 layout without enable_cdi: containerd 1.7 default


def test_containerd_without_nvidia_runtime_and_v1_layout() -> None:
    plain = parse_containerd_config(
        'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n'
        '  sandbox_image = "registry.k8s.io/pause:3.9"\n'
    )
    assert plain.problem == "" and plain.nvidia_runtime() is None and plain.runtimes == []
    v1 = parse_containerd_config(
        "[plugins.cri.containerd.default_runtime]\n"
        '  runtime_type = "io.containerd.runtime.v1.linux"\n'
        "[plugins.linux]\n"
        '  runtime = "nvidia-container-runtime"\n'
        "[plugins.cri.containerd.default_runtime.options]\n"
        '  Runtime = "nvidia-container-runtime"\n'
    )
    assert v1.layout == "v1" and v1.default_runtime == "default_runtime"
    legacy = v1.nvidia_runtime()
    assert legacy is not None and legacy.binary_name == "nvidia-container-runtime"


def test_containerd_dump_with_log_lines_in_front() -> None:
    dump = (
        'time="2025-03-01T10:00:00Z" level=warning msg="Ignoring unknown key in TOML" '
        'column=1 error="strict mode: fields in the document are missing" key=foo\n' + CONTAINERD_V2
    )
    cfg = parse_containerd_config(dump)
    assert cfg.problem == "" and cfg.default_runtime == "nvidia"


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ('version = 2\n[plugins."io.containerd.grpc.v1.cri"\n', "invalid TOML: "),
        ("version = = 2\n", "invalid TOML: "),
        ("\x00\x01\x02", "invalid TOML: "),
        ("version = 2\n", "no CRI plugin section"),
        ('plugins = "flat"\n', "no CRI plugin section"),
    ],
)
def test_containerd_problems_are_named(text: str, start: str) -> None:
    cfg = parse_containerd_config(text)
    assert cfg.problem.startswith(start), cfg.problem
    assert cfg.runtimes == []


def test_invalid_toml_says_where() -> None:
    cfg = parse_containerd_config('version = 2\n\n[plugins."io.containerd.grpc.v1.cri"\n')
    assert "(at line 3, column" in cfg.problem
