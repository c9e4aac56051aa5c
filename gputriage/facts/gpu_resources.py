"""Which Kubernetes resource names are GPUs, and what a pod asks for in total.

Shared by the pod, node, cluster, quota and scheduler fact groups, so that "is this a GPU
resource" has one answer everywhere:

* ``nvidia.com/gpu`` and its variants: ``nvidia.com/gpu.shared`` (time-slicing / MPS with
  ``renameByDefault``), custom names such as ``nvidia.com/gpu-a100``, HAMi's
  ``nvidia.com/gpumem`` / ``nvidia.com/gpucores``;
* MIG profiles ``nvidia.com/mig-1g.10gb`` (mixed strategy);
* ``amd.com/gpu``, Intel ``gpu.intel.com/*``;
* the pre-device-plugin ``alpha.kubernetes.io/nvidia-gpu`` (k8s <= 1.10).

``nvidia.com/*`` names that are not GPUs (network operator: ``nvidia.com/hostdev``,
``nvidia.com/rdma_shared_device_a``, SR-IOV pools) are deliberately not GPU resources.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gputriage.parsers.quantity import to_int

NVIDIA_GPU = "nvidia.com/gpu"
LEGACY_NVIDIA_GPU = "alpha.kubernetes.io/nvidia-gpu"
_GPU_PREFIXES = (
    "nvidia.com/gpu",
    "nvidia.com/mig-",
    "amd.com/gpu",
    "gpu.intel.com/",
    # GPU-sharing layers: Volcano (vgpu-number/-memory/-cores, gpu-memory/-number),
    # Alibaba's gpushare (gpu-mem, gpu-count, gpu-core.percentage), Tencent's
    # gpu-manager (vcuda-core, vcuda-memory)
    "volcano.sh/vgpu-",
    "volcano.sh/gpu-",
    "aliyun.com/gpu",
    "tencent.com/vcuda-",
)
#: Resources that share one physical GPU between pods (fractions, not whole devices).
_SHARING_RESOURCES = frozenset(
    {
        "nvidia.com/gpumem",
        "nvidia.com/gpumem-percentage",
        "nvidia.com/gpucores",
        "aliyun.com/gpu-mem",
        "aliyun.com/gpu-core.percentage",
        "volcano.sh/vgpu-memory",
        "volcano.sh/vgpu-memory-percentage",
        "volcano.sh/vgpu-cores",
        "volcano.sh/gpu-memory",
        "tencent.com/vcuda-core",
        "tencent.com/vcuda-memory",
    }
)
#: ResourceQuota prefixes in front of a resource name (``requests.nvidia.com/gpu``).
_QUOTA_PREFIXES = ("requests.", "limits.")


def is_gpu_resource(name: str) -> bool:
    """True for GPU device resources (see the module docstring for the list)."""
    return (
        name.startswith(_GPU_PREFIXES) or name == LEGACY_NVIDIA_GPU or (name in _SHARING_RESOURCES)
    )


#: Sharing-layer resources that are GPU fractions, whatever their exact spelling.
_SHARING_PREFIXES = (
    "volcano.sh/vgpu-memory",
    "volcano.sh/vgpu-cores",
    "tencent.com/vcuda-",
    "aliyun.com/gpu-mem",
    "aliyun.com/gpu-core",
)


def is_mig_resource(name: str) -> bool:
    return name.startswith("nvidia.com/mig-")


def is_shared_resource(name: str) -> bool:
    """Resources that hand out a share of a GPU: ``*.shared`` renames and fractional ones."""
    return is_gpu_resource(name) and (
        name.endswith(".shared") or name in _SHARING_RESOURCES or name.startswith(_SHARING_PREFIXES)
    )


def quota_resource(name: str) -> str:
    """The resource a quota line limits: ``requests.nvidia.com/gpu`` -> ``nvidia.com/gpu``."""
    for prefix in _QUOTA_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def gpu_quantities(resources: Any) -> dict[str, int]:
    """The GPU entries of a resource map (limits, requests, capacity), as whole numbers.

    Non-GPU entries, non-mappings and unparseable quantities are skipped.
    """
    if not isinstance(resources, Mapping):
        return {}
    out: dict[str, int] = {}
    for name, value in resources.items():
        if isinstance(name, str) and is_gpu_resource(name):
            amount = to_int(value)
            if amount is not None:
                out[name] = amount
    return out


def container_gpus(container: Any) -> tuple[dict[str, int], dict[str, int]]:
    """(requests, limits) GPU maps of one container spec."""
    resources = container.get("resources") if isinstance(container, Mapping) else None
    if not isinstance(resources, Mapping):
        return {}, {}
    return gpu_quantities(resources.get("requests")), gpu_quantities(resources.get("limits"))


def effective_gpus(container: Any) -> dict[str, int]:
    """What the scheduler counts for one container.

    For extended resources a limit implies an equal request; a request without a limit is
    rejected by the API server, but a hand-written bundle may still hold one, so it counts.
    """
    requests, limits = container_gpus(container)
    return {**requests, **limits}


def pod_gpu_request(spec: Any) -> dict[str, int]:
    """The pod's effective GPU request per resource, following the scheduler's rule.

    Effective request = max(sum over app containers + restartable (sidecar) init containers,
    the largest single regular init container plus the sidecars started before it).
    """
    if not isinstance(spec, Mapping):
        return {}
    total: dict[str, int] = {}
    for c in _dicts(spec.get("containers")):
        _add(total, effective_gpus(c))
    sidecars: dict[str, int] = {}
    peak: dict[str, int] = {}
    for c in _dicts(spec.get("initContainers")):
        gpus = effective_gpus(c)
        if c.get("restartPolicy") == "Always":
            _add(sidecars, gpus)
            continue
        for name, amount in gpus.items():
            peak[name] = max(peak.get(name, 0), amount + sidecars.get(name, 0))
    _add(total, sidecars)
    for name, amount in peak.items():
        total[name] = max(total.get(name, 0), amount)
    return {k: v for k, v in sorted(total.items()) if v > 0}


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, 0) + amount


def _dicts(value: Any) -> Iterable[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
