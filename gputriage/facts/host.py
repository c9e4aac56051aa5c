"""Fact group ``host``: kernel modules, ``/dev/nvidia*`` nodes and containerd's GPU wiring.

Built from ``Key.LSMOD``, ``Key.DEV_NVIDIA`` and ``Key.CONTAINERD_CONFIG``. The group is known
when any of the three was read; each part says on its own whether it is known
(``modules_known``, ``devices_known``, ``containerd_known``) and why not, because "nvidia is
not loaded" and "we could not run lsmod" lead to different fixes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    reason_for,
    unknown,
)
from gputriage.parsers.host import (
    GPU_MODULES,
    ContainerdConfig,
    DeviceListing,
    ModuleList,
    parse_containerd_config,
    parse_dev_nvidia,
    parse_lsmod,
)

_MODULE_FIELDS = {
    name: FieldSpec("bool", False, f"The {name} kernel module is loaded.") for name in GPU_MODULES
}
_DEVICE_FLAGS = {
    "dev_nvidiactl": "nvidiactl",
    "dev_nvidia_uvm": "nvidia-uvm",
    "dev_nvidia_uvm_tools": "nvidia-uvm-tools",
    "dev_nvidia_modeset": "nvidia-modeset",
    "dev_nvidia_caps": "nvidia-caps",
}

SPEC = GroupSpec(
    name="host",
    doc="The GPU node's host setup: NVIDIA kernel modules (lsmod), device nodes "
    "(ls -l /dev/nvidia*) and containerd's NVIDIA runtime, cgroup driver and CDI settings.",
    sources=(Key.LSMOD, Key.DEV_NVIDIA, Key.CONTAINERD_CONFIG),
    fields={
        "modules_known": FieldSpec("bool", False, "lsmod output was read."),
        "modules_reason": FieldSpec("string", "", 'Why modules are unknown ("" when known).'),
        "modules": FieldSpec("list<string>", [], "Every loaded module name, as listed."),
        "module_use_counts": FieldSpec(
            "map", {}, 'Use count of each GPU-related module that is loaded ({"nvidia": 2, ...}).'
        ),
        **_MODULE_FIELDS,
        "devices_known": FieldSpec("bool", False, "ls -l /dev/nvidia* output was read."),
        "devices_reason": FieldSpec("string", "", 'Why devices are unknown ("" when known).'),
        "device_nodes": FieldSpec(
            "list<string>",
            [],
            "Names of the /dev/nvidia* entries (nvidia0, nvidiactl, "
            "nvidia-uvm, nvidia-caps, nvidia-cap1...).",
        ),
        "gpu_device_nodes": FieldSpec("int", 0, "How many /dev/nvidiaN nodes exist."),
        "dev_nvidiactl": FieldSpec("bool", False, "/dev/nvidiactl exists."),
        "dev_nvidia_uvm": FieldSpec(
            "bool",
            False,
            "/dev/nvidia-uvm exists (CUDA needs it; it is created "
            "when nvidia_uvm loads and a tool first opens it).",
        ),
        "dev_nvidia_uvm_tools": FieldSpec("bool", False, "/dev/nvidia-uvm-tools exists."),
        "dev_nvidia_modeset": FieldSpec("bool", False, "/dev/nvidia-modeset exists."),
        "dev_nvidia_caps": FieldSpec(
            "bool", False, "/dev/nvidia-caps exists (MIG capability nodes)."
        ),
        "dev_missing": FieldSpec(
            "list<string>",
            [],
            'Paths ls reported as missing ("/dev/nvidia*" when none exist at all).',
        ),
        "containerd_known": FieldSpec("bool", False, "containerd's config was read and parsed."),
        "containerd_reason": FieldSpec(
            "string",
            "",
            'Why containerd facts are unknown, e.g. "invalid TOML: ... (at line 3, column 5)".',
        ),
        "containerd_layout": FieldSpec(
            "string",
            "",
            "v1 (plugins.cri) | v2 (io.containerd.grpc.v1.cri, "
            "containerd 1.x) | v3 (io.containerd.cri.v1.runtime, "
            "containerd 2.x).",
        ),
        "containerd_runtimes": FieldSpec(
            "list<map>",
            [],
            "{name, runtime_type, binary_name, systemd_cgroup} per "
            "configured runtime (systemd_cgroup false when unset).",
        ),
        "containerd_nvidia_runtime": FieldSpec(
            "bool",
            False,
            "A runtime launches nvidia-container-runtime (named nvidia, or BinaryName says so).",
        ),
        "containerd_nvidia_runtime_name": FieldSpec(
            "string", "", "That runtime's name (the RuntimeClass handler to use)."
        ),
        "containerd_nvidia_binary": FieldSpec("string", "", "That runtime's BinaryName."),
        "containerd_default_runtime": FieldSpec(
            "string",
            "",
            'default_runtime_name ("nvidia" makes every pod go through the NVIDIA runtime).',
        ),
        "containerd_systemd_cgroup": FieldSpec(
            "bool",
            False,
            "SystemdCgroup of the NVIDIA runtime (of the default runtime when there is none).",
        ),
        "containerd_runc_systemd_cgroup": FieldSpec(
            "bool",
            False,
            "SystemdCgroup of the runc runtime: a "
            "mismatch with the NVIDIA runtime gets GPU "
            "pods killed (k3s).",
        ),
        "containerd_cdi_enabled": FieldSpec(
            "bool",
            False,
            "CDI is enabled (enable_cdi; containerd 2.x defaults to true, 1.7 to false).",
        ),
        "containerd_cdi_spec_dirs": FieldSpec("list<string>", [], "cdi_spec_dirs as set."),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    lsmod = evidence.get_or_missing(Key.LSMOD)
    dev = evidence.get_or_missing(Key.DEV_NVIDIA)
    config = evidence.get_or_missing(Key.CONTAINERD_CONFIG)
    if not (lsmod.ok or dev.ok or config.ok):
        return unknown(SPEC, "; ".join(reason_for(e) for e in (lsmod, dev, config)))
    values: dict[str, Any] = {}
    cites: dict[str, list[LineRef]] = {}
    _modules(lsmod, values, cites)
    _devices(dev, values, cites)
    _containerd(config, values, cites)
    return known(SPEC, values, cites)


class _Parsed(Protocol):
    problem: str


_P = TypeVar("_P", bound=_Parsed)


def _parsed(
    ev: Evidence, values: dict[str, Any], part: str, parse: Callable[[str], _P]
) -> _P | None:
    """Parse one host source, or record in ``<part>_reason`` why it is not usable."""
    if not ev.ok:
        values[f"{part}_reason"] = reason_for(ev)
        return None
    result = parse(ev.raw)
    if result.problem:
        values[f"{part}_reason"] = f"{ev.source}: {result.problem}"
        return None
    return result


def _modules(ev: Evidence, values: dict[str, Any], cites: dict[str, list[LineRef]]) -> None:
    listing: ModuleList | None = _parsed(ev, values, "modules", parse_lsmod)
    if listing is None:
        return
    lines = ev.lines()
    values["modules_known"] = True
    values["modules"] = [m.name for m in listing.modules]
    values["module_use_counts"] = {
        m.name: m.use_count for m in listing.modules if m.name in GPU_MODULES
    }
    for name in GPU_MODULES:
        values[name] = listing.get(name) is not None
        line = listing.lines.get(name)
        if line:
            cites[name] = [_ref(ev, lines, line)]
    cites["module_use_counts"] = [ref for name in GPU_MODULES for ref in cites.get(name, [])]
    cites["modules"] = cites["module_use_counts"] or [_ref(ev, lines, 1)]


def _devices(ev: Evidence, values: dict[str, Any], cites: dict[str, list[LineRef]]) -> None:
    listing: DeviceListing | None = _parsed(ev, values, "devices", parse_dev_nvidia)
    if listing is None:
        return
    lines = ev.lines()
    values["devices_known"] = True
    values["device_nodes"] = [n.name for n in listing.nodes]
    values["gpu_device_nodes"] = len(listing.gpu_nodes())
    values["dev_missing"] = list(listing.missing)
    for field, name in _DEVICE_FLAGS.items():
        values[field] = listing.has(name)
        line = next((n.line for n in listing.nodes if n.name == name), 0)
        if line:
            cites[field] = [_ref(ev, lines, line)]
    cites["gpu_device_nodes"] = [_ref(ev, lines, n.line) for n in listing.gpu_nodes()]
    cites["device_nodes"] = [_ref(ev, lines, n.line) for n in listing.nodes][:50]
    cites["dev_missing"] = [_ref(ev, lines, n) for n in listing.missing_lines]


def _containerd(ev: Evidence, values: dict[str, Any], cites: dict[str, list[LineRef]]) -> None:
    config: ContainerdConfig | None = _parsed(ev, values, "containerd", parse_containerd_config)
    if config is None:
        return
    nvidia = config.nvidia_runtime()
    primary = nvidia or config.runtime(config.default_runtime)
    runc = config.runtime("runc")
    values.update(
        {
            "containerd_known": True,
            "containerd_layout": config.layout,
            "containerd_runtimes": [
                {
                    "name": r.name,
                    "runtime_type": r.runtime_type,
                    "binary_name": r.binary_name,
                    "systemd_cgroup": bool(r.systemd_cgroup),
                }
                for r in config.runtimes
            ],
            "containerd_nvidia_runtime": nvidia is not None,
            "containerd_nvidia_runtime_name": nvidia.name if nvidia else "",
            "containerd_nvidia_binary": nvidia.binary_name if nvidia else "",
            "containerd_default_runtime": config.default_runtime,
            "containerd_systemd_cgroup": bool(primary and primary.systemd_cgroup),
            "containerd_runc_systemd_cgroup": bool(runc and runc.systemd_cgroup),
            "containerd_cdi_enabled": bool(config.cdi_enabled),
            "containerd_cdi_spec_dirs": list(config.cdi_spec_dirs),
        }
    )
    lines = ev.lines()
    section = f"runtimes.{nvidia.name}" if nvidia else ""
    wanted = {
        "containerd_nvidia_runtime": (section, ""),
        "containerd_nvidia_runtime_name": (section, ""),
        "containerd_nvidia_binary": (section, "BinaryName"),
        "containerd_default_runtime": ("", "default_runtime_name"),
        "containerd_systemd_cgroup": (
            f"runtimes.{primary.name}" if primary else "",
            "SystemdCgroup",
        ),
        "containerd_runc_systemd_cgroup": ("runtimes.runc" if runc else "", "SystemdCgroup"),
        "containerd_cdi_enabled": ("", "enable_cdi"),
        "containerd_cdi_spec_dirs": ("", "cdi_spec_dirs"),
    }
    for field, (after, key) in wanted.items():
        line = _line_after(lines, after, key)
        if line:
            cites[field] = [_ref(ev, lines, line)]


def _line_after(lines: list[str], section: str, key: str) -> int:
    """1-based line of the first ``key`` at or after the first line naming ``section``."""
    start = 0
    if section:
        start = next((i for i, text in enumerate(lines) if section in text), -1)
        if start < 0:
            return 0
        if not key:
            return start + 1
    elif not key:
        return 0
    return next((i + 1 for i in range(start, len(lines)) if key in lines[i]), 0)


def _ref(ev: Evidence, lines: list[str], line: int) -> LineRef:
    return ev.cite(line, lines[line - 1].strip() if 0 < line <= len(lines) else "")
