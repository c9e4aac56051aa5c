"""Is a pod GPU-involved, and is it a pod of the GPU stack itself?

A pod reaches GPUs in more ways than an ``nvidia.com/gpu`` limit, and the pods an SRE looks at
when GPU nodes break are often the GPU stack's own, which request no GPU at all. One table
(:data:`GPU_STACK`) recognises them; :func:`involvement` lists every reason a pod counts as
GPU-involved, so "no GPU was requested" is only concluded when none applies.

* a GPU resource limit: ``nvidia.com/gpu``, MIG profiles, sharing layers (gpu_resources);
* a DRA claim (``spec.resourceClaims``);
* a RuntimeClass whose name is NVIDIA's (``runtimeClassName: nvidia``, ``nvidia-cdi``);
* ``NVIDIA_VISIBLE_DEVICES`` in a container's env (``all``, UUIDs; ``void``/``none`` excluded);
* a GPU-stack component (:data:`GPU_STACK`): device plugin, GPU Operator with its operands and
  validators, container toolkit, DCGM exporter, MIG manager, GPU feature discovery, DRA kubelet
  plugins, KubeVirt GPU device plugin, HAMi and Volcano device plugins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: GPU-stack components: (component, substrings of an image, of a label value, of an owner or
#: pod name). Matching is case-insensitive; a pod matches when any of its images, its
#: ``app`` / ``app.kubernetes.io/name`` / ``app.kubernetes.io/component`` labels, or its owner
#: name contains one of the substrings.
GPU_STACK: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("nvidia-device-plugin", ("k8s-device-plugin", "nvidia-device-plugin")),
    (
        "gpu-operator-validator",
        (
            "gpu-operator-validator",
            "nvidia-operator-validator",
            "cuda-validator",
            "plugin-validator",
        ),
    ),
    ("nvidia-driver", ("nvidia-driver-daemonset", "nvidia/driver", "nvidia-driver")),
    ("nvidia-container-toolkit", ("container-toolkit", "nvidia-container-toolkit")),
    ("dcgm-exporter", ("dcgm-exporter", "nvidia-dcgm")),
    ("mig-manager", ("mig-manager",)),
    ("gpu-feature-discovery", ("gpu-feature-discovery",)),
    ("gpu-operator", ("gpu-operator",)),
    ("nvidia-dra-driver", ("k8s-dra-driver", "dra-driver-gpu", "nvidia-dra-driver")),
    ("kubevirt-gpu-device-plugin", ("kubevirt-gpu-device-plugin",)),
    ("hami", ("hami-device-plugin", "projecthami/hami", "hami-scheduler", "/hami:")),
    (
        "volcano-device-plugin",
        ("volcano-vgpu-device-plugin", "volcano-device-plugin", "volcanosh/volcano-device-plugin"),
    ),
    ("sandbox-device-plugin", ("sandbox-device-plugin", "vgpu-device-manager", "vfio-manager")),
)
#: Namespaces that hold only GPU-stack pods in standard installs.
GPU_STACK_NAMESPACES = frozenset({"gpu-operator", "nvidia-gpu-operator", "nvidia-device-plugin"})
_LABEL_KEYS = (
    "app",
    "app.kubernetes.io/name",
    "app.kubernetes.io/component",
    "app.kubernetes.io/part-of",
    "k8s-app",
    "name",
)
_NO_DEVICES = frozenset({"", "void", "none"})


def stack_component(meta: Mapping[str, Any], spec: Mapping[str, Any], owner_name: str) -> str:
    """The GPU-stack component a pod belongs to ('' when it is not one)."""
    raw_labels = meta.get("labels")
    labels: Mapping[str, Any] = raw_labels if isinstance(raw_labels, Mapping) else {}
    haystack = [_text(c.get("image")) for c in _all_containers(spec)]
    haystack += [_text(labels.get(k)) for k in _LABEL_KEYS]
    haystack += [owner_name, _text(meta.get("name"))]
    lowered = [h.lower() for h in haystack if h]
    for component, needles in GPU_STACK:
        if any(n in h for h in lowered for n in needles):
            return component
    if _text(meta.get("namespace")) in GPU_STACK_NAMESPACES:
        return "gpu-operator"
    return ""


def visible_devices(spec: Mapping[str, Any]) -> str:
    """The first ``NVIDIA_VISIBLE_DEVICES`` value set in a container's env ('' when none)."""
    for c in _all_containers(spec):
        env = c.get("env")
        for e in env if isinstance(env, list) else ():
            if isinstance(e, Mapping) and e.get("name") == "NVIDIA_VISIBLE_DEVICES":
                value = _text(e.get("value"))
                if value.strip().lower() not in _NO_DEVICES:
                    return value
    return ""


def is_nvidia_runtime_class(name: str) -> bool:
    """A RuntimeClass name that selects NVIDIA's runtime (nvidia, nvidia-cdi, nvidia-legacy)."""
    return "nvidia" in name.lower()


def involvement(
    *, gpu_resources: Mapping[str, int], dra: bool, runtime_class: str, visible: str, component: str
) -> list[str]:
    """Every reason the pod counts as GPU-involved, in words (empty: none)."""
    out: list[str] = []
    if gpu_resources:
        out.append("requests " + ", ".join(f"{r}={_count(n)}" for r, n in gpu_resources.items()))
    if dra:
        out.append("claims devices through DRA")
    if runtime_class and is_nvidia_runtime_class(runtime_class):
        out.append(f"runs with runtimeClassName {runtime_class}")
    if visible:
        out.append(f"sets NVIDIA_VISIBLE_DEVICES={visible}")
    if component:
        out.append(f"is a pod of the GPU stack ({component})")
    return out


def _count(n: int) -> str:
    """A resource count in words; a hostile 5,000-digit count is not printed whole."""
    return str(n) if n.bit_length() < 64 else "(a number too large to show)"


def _text(value: Any) -> str:
    """Strings only: anything else in a hostile object (a 5,000-digit int) reads as ''."""
    return value if isinstance(value, str) else ""


def _all_containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for key in ("initContainers", "containers"):
        items = spec.get(key)
        if isinstance(items, list):
            out += [c for c in items if isinstance(c, Mapping)]
    return out
