"""GPU failure wordings in container logs (NVML, CUDA, driver, CDI, NCCL), each a real line.

Every ``line`` is copied from the public source named beside it (``kubectl logs``, a container's
output pasted in an issue, or the corpus case that cites it). The table pins which signature of
:mod:`gputriage.parsers.container_log` names it (and so which ``container_log`` fact it raises).
"""

from __future__ import annotations

import pytest

from gputriage.parsers.container_log import cdi_devices, scan_container_log

# (id, line, signature id)
VARIANTS: list[tuple[str, str, str]] = [
    # --- NVML inside the container --------------------------------------------------------------
    # device cgroup lost after systemctl daemon-reload: NVIDIA/nvidia-container-toolkit#251
    ("nvml-unknown-error", "Failed to initialize NVML: Unknown Error", "nvml_unknown_error"),
    # same on a HAMi-managed pod: Project-HAMi/HAMi#1520 (title)
    (
        "nvml-unknown-error-hami",
        'kubernetes pod run nvidia-smi report: "Failed to initialize NVML: Unknown Error"',
        "nvml_unknown_error",
    ),
    # podman/CDI permissions: NVIDIA/nvidia-container-toolkit#210 (via k8s-messages.md 5.4)
    (
        "nvml-insufficient-permissions",
        "Failed to initialize NVML: Insufficient Permissions",
        "nvml_insufficient_permissions",
    ),
    # driver upgraded under a loaded module: NVIDIA/k8s-device-plugin#1431 (nvidia-smi output)
    (
        "nvml-version-mismatch",
        "Failed to initialize NVML: Driver/library version mismatch",
        "nvml_driver_mismatch",
    ),
    # --- no driver / no device visible ----------------------------------------------------------
    # nvidia-smi in a container without the driver injected: NVIDIA/gpu-operator#751,
    # ameli/manylinux-cuda#5
    (
        "nvidia-smi-cannot-communicate",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
        "that the latest NVIDIA driver is installed and running.",
        "no_nvidia_driver",
    ),
    # the curly apostrophe of a copy through a blog: qixuema/envs#4
    (
        "nvidia-smi-cannot-communicate-curly",
        "NVIDIA-SMI has failed because it couldn\u2018t communicate with the NVIDIA driver.",
        "no_nvidia_driver",
    ),
    # --- CUDA runtime vs driver ------------------------------------------------------------------
    # image CUDA newer than the node's driver: kubernetes/kubernetes#77035 (corpus create-021)
    (
        "cuda-driver-insufficient",
        "CUDA driver version is insufficient for CUDA runtime version",
        "driver_insufficient",
    ),
    # --- CDI, as the operator's toolkit container logs it: NVIDIA/gpu-operator#531 ----------------
    (
        "cdi-unresolvable-toolkit-log",
        "unresolvable CDI devices management.nvidia.com/gpu=all: unknown",
        "cdi_unresolvable",
    ),
    # --- out of memory: NVIDIA/k8s-device-plugin#323 (PyTorch <= 2.0 wording) ---------------------
    (
        "torch-oom-old",
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 14.76 GiB total "
        "capacity; 4.37 GiB already allocated; 14.75 MiB free; 4.43 GiB reserved in total by "
        "PyTorch)",
        "torch_cuda_oom",
    ),
    # --- NCCL /dev/shm, old include/shm.h wording: NVIDIA/nccl#525 --------------------------------
    (
        "nccl-shm-fallocate",
        "[3] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
        "nccl_shm",
    ),
    (
        "nccl-shm-segment",
        "[3] include/shm.h:48 NCCL WARN Error while creating shared memory segment "
        "nccl-shm-recv-1462445a6f01cbfc-1-2-3 (size 9637888)",
        "nccl_shm",
    ),
]


@pytest.mark.parametrize(
    ("line", "signature"), [(t, s) for _, t, s in VARIANTS], ids=[i for i, _, _ in VARIANTS]
)
def test_container_log_variant(line: str, signature: str) -> None:
    scan = scan_container_log(f"starting...\n{line}\nexiting\n")
    assert [(m.id, m.line) for m in scan.matches] == [(signature, 2)]


def test_cdi_names_in_container_log_lose_runtime_suffix() -> None:
    """``: unknown`` (gpu-operator#531) and a sentence period (moby/moby#47633) are not part of
    the device name."""
    assert cdi_devices("unresolvable CDI devices management.nvidia.com/gpu=all: unknown") == [
        "management.nvidia.com/gpu=all"
    ]
    assert cdi_devices(
        "docker: Error response from daemon: CDI device injection failed: "
        "unresolvable CDI devices spidernet.io/test=demo1."
    ) == ["spidernet.io/test=demo1"]
