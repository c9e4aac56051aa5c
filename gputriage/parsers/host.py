"""Node host files: ``lsmod``, ``ls -l /dev/nvidia*`` and the containerd configuration.

These answer the node-onboarding questions of the diagnosis tree: is the driver loaded (and is
nouveau in the way), do the device nodes exist (``nvidia-uvm`` is created lazily and is the one
usually missing), and is containerd wired to the NVIDIA runtime with a cgroup driver that
matches the kubelet. Each parser returns a record with a ``problem`` string instead of raising.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# --- lsmod ----------------------------------------------------------------------------------

#: The modules the GPU stack cares about, in load order.
GPU_MODULES = ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem", "nouveau")

# Digit runs are bounded: a real size or count has < 19 digits, and int() refuses > 4300.
_MODULE = re.compile(
    r"^(?P<name>[A-Za-z0-9_]+)\s+(?P<size>\d{1,18})\s+(?P<count>-?\d{1,18}|-)"
    r"(?:\s+(?P<users>\S+))?"
)


@dataclass(frozen=True)
class KernelModule:
    name: str
    size: int
    use_count: int  # -1 when lsmod printed "-" (module cannot be unloaded)
    used_by: tuple[str, ...] = ()


@dataclass
class ModuleList:
    """What ``lsmod`` (or ``cat /proc/modules``) listed."""

    modules: list[KernelModule] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)  # module name -> 1-based line
    problem: str = ""

    def get(self, name: str) -> KernelModule | None:
        return next((m for m in self.modules if m.name == name), None)


def parse_lsmod(text: str) -> ModuleList:
    """Parse ``lsmod`` or ``/proc/modules`` output."""
    out = ModuleList()
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _MODULE.match(line.strip())
        if not m or m.group("name") == "Module":
            continue
        count = m.group("count")
        users = tuple(
            u
            for u in (m.group("users") or "").strip(",").split(",")
            if u and u not in ("-", "[permanent]")
        )
        out.modules.append(
            KernelModule(
                m.group("name"), int(m.group("size")), -1 if count == "-" else int(count), users
            )
        )
        out.lines.setdefault(m.group("name"), lineno)
    if not out.modules:
        out.problem = f"no lsmod lines recognised (first line: {_first_line(text)!r})"
    return out


# --- ls -l /dev/nvidia* ---------------------------------------------------------------------

_LS_ENTRY = re.compile(
    r"^(?P<mode>[bcdlps-][rwxsStT-]{9})[.+@]?\s+\d+\s+\S+\s+\S+\s+"
    r"(?:(?P<major>\d{1,9}),\s*(?P<minor>\d{1,9})|\d+)\s+(?P<rest>.+)$"
)
_LS_MISSING = re.compile(
    r"ls: (?:cannot access )?['\"‘]?(?P<path>/[^'\"’:\s]+)['\"’]?: No such file or directory"
)
_LS_DIR = re.compile(r"^(?P<dir>/\S+):$")


@dataclass(frozen=True)
class DeviceNode:
    name: str  # "nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-cap1"...
    path: str
    kind: str  # c (character device), d (directory), l (symlink), - (file)
    mode: str  # "crw-rw-rw-"
    major: int | None = None
    minor: int | None = None
    line: int = 0


@dataclass
class DeviceListing:
    """What ``ls -l /dev/nvidia*`` showed: the nodes present and the paths ls said are missing."""

    nodes: list[DeviceNode] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    missing_lines: list[int] = field(default_factory=list)
    problem: str = ""

    def has(self, name: str) -> bool:
        return any(n.name == name for n in self.nodes)

    def gpu_nodes(self) -> list[DeviceNode]:
        """The per-GPU nodes ``/dev/nvidia0``..``/dev/nvidiaN``."""
        return [n for n in self.nodes if re.fullmatch(r"nvidia\d+", n.name)]


def parse_dev_nvidia(text: str) -> DeviceListing:
    """Parse ``ls -l /dev/nvidia*`` output, including its "No such file" error form."""
    out = DeviceListing()
    directory = ""
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        missing = _LS_MISSING.search(line)
        if missing:
            out.missing.append(missing.group("path"))
            out.missing_lines.append(lineno)
            continue
        header = _LS_DIR.match(line)
        if header:
            directory = header.group("dir")
            if not any(n.path == directory for n in out.nodes):
                out.nodes.append(
                    DeviceNode(directory.rsplit("/", 1)[-1], directory, "d", "", line=lineno)
                )
            continue
        entry = _LS_ENTRY.match(line)
        if not entry:
            continue
        target = entry.group("rest").split(" -> ", 1)[0].split()[-1]
        path = target if target.startswith("/") else f"{directory or '/dev'}/{target}"
        major, minor = entry.group("major"), entry.group("minor")
        out.nodes.append(
            DeviceNode(
                path.rsplit("/", 1)[-1],
                path,
                entry.group("mode")[0],
                entry.group("mode"),
                int(major) if major else None,
                int(minor) if minor else None,
                lineno,
            )
        )
    if not out.nodes and not out.missing:
        out.problem = f"no ls -l lines recognised (first line: {_first_line(text)!r})"
    return out


# --- containerd config ----------------------------------------------------------------------

_V3_RUNTIME = "io.containerd.cri.v1.runtime"
_V2_CRI = "io.containerd.grpc.v1.cri"


@dataclass(frozen=True)
class Runtime:
    name: str
    runtime_type: str
    binary_name: str  # options.BinaryName (or the legacy options.Runtime); "" when unset
    systemd_cgroup: bool | None  # options.SystemdCgroup; None when unset (containerd: false)


@dataclass
class ContainerdConfig:
    """The parts of containerd's config that decide whether GPU containers can start."""

    version: int | None = None
    layout: str = ""  # v1 (plugins.cri), v2 (io.containerd.grpc.v1.cri), v3 (cri.v1.runtime)
    default_runtime: str = ""
    runtimes: list[Runtime] = field(default_factory=list)
    cdi_enabled: bool | None = None
    cdi_spec_dirs: list[str] = field(default_factory=list)
    problem: str = ""

    def runtime(self, name: str) -> Runtime | None:
        return next((r for r in self.runtimes if r.name == name), None)

    def nvidia_runtime(self) -> Runtime | None:
        """The runtime that launches through nvidia-container-runtime, if any."""
        return (
            self.runtime("nvidia")
            or next((r for r in self.runtimes if "nvidia-container-runtime" in r.binary_name), None)
            or next((r for r in self.runtimes if r.name.startswith("nvidia")), None)
        )


def parse_containerd_config(text: str) -> ContainerdConfig:
    """Parse ``/etc/containerd/config.toml`` or ``containerd config dump`` (v1/v2/v3 layouts).

    Invalid TOML becomes ``problem`` ("invalid TOML: ... (at line 3, column 5)").
    """
    try:
        data = _load_toml(text)
    except ValueError as exc:  # TOMLDecodeError, or an integer past Python's digit limit
        return ContainerdConfig(problem=f"invalid TOML: {exc}")
    except RecursionError:  # tomllib recurses into nested arrays and inline tables
        return ContainerdConfig(problem="invalid TOML: nested too deeply to be a containerd config")
    try:
        return _read_config(data)
    except (AttributeError, TypeError, ValueError) as exc:
        return ContainerdConfig(problem=f"unexpected containerd config shape: {exc}")


def _load_toml(text: str) -> dict[str, Any]:
    import tomllib  # only when there is a containerd config to read

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        # `containerd config dump` may be preceded by its own log lines on a merged stream.
        lines = text.splitlines()
        skip = 0
        while skip < len(lines) and re.match(r"^\s*(time=|level=|WARN|INFO|ERRO)", lines[skip]):
            skip += 1
        if not skip:
            raise
        return tomllib.loads("\n".join(lines[skip:]))


def _table(data: Any, *keys: str) -> dict[str, Any]:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def _read_config(data: dict[str, Any]) -> ContainerdConfig:
    out = ContainerdConfig()
    version = data.get("version")
    # containerd knows versions 1-3; a negative number or a boolean is no version at all.
    valid = isinstance(version, int) and not isinstance(version, bool) and version >= 0
    out.version = version if valid else None
    plugins = _table(data, "plugins")
    if _V3_RUNTIME in plugins:
        out.layout, cri = "v3", _table(plugins, _V3_RUNTIME)
    elif _V2_CRI in plugins:
        out.layout, cri = "v2", _table(plugins, _V2_CRI)
    elif "cri" in plugins:
        out.layout, cri = "v1", _table(plugins, "cri")
    else:
        out.problem = (
            'no CRI plugin section (plugins."io.containerd.grpc.v1.cri" or '
            'plugins."io.containerd.cri.v1.runtime")'
        )
        return out
    containerd = _table(cri, "containerd")
    name = containerd.get("default_runtime_name")
    out.default_runtime = name if isinstance(name, str) else ""
    for rt_name, rt in _table(containerd, "runtimes").items():
        if isinstance(rt, dict):
            out.runtimes.append(_runtime(rt_name, rt))
    legacy_default = _table(containerd, "default_runtime")
    if legacy_default:
        out.runtimes.append(_runtime("default_runtime", legacy_default))
        out.default_runtime = out.default_runtime or "default_runtime"
    enable_cdi = cri.get("enable_cdi")
    # containerd 2.x (v3 layout) enables CDI by default; 1.7 (v2) does not.
    out.cdi_enabled = enable_cdi if isinstance(enable_cdi, bool) else out.layout == "v3"
    dirs = cri.get("cdi_spec_dirs")
    out.cdi_spec_dirs = [d for d in dirs if isinstance(d, str)] if isinstance(dirs, list) else []
    return out


def _runtime(name: str, rt: dict[str, Any]) -> Runtime:
    options = _table(rt, "options")
    binary = options.get("BinaryName") or options.get("Runtime") or rt.get("runtime_engine")
    systemd = options.get("SystemdCgroup")
    runtime_type = rt.get("runtime_type")
    return Runtime(
        name,
        runtime_type if isinstance(runtime_type, str) else "",
        binary if isinstance(binary, str) else "",
        systemd if isinstance(systemd, bool) else None,
    )


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines()[:50] if line.strip()), "")[:120]
