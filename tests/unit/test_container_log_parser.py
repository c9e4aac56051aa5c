"""Container-log signatures: ids, line numbers and the numbers each message carries."""

# Real log lines are long and stay verbatim here.

from __future__ import annotations

import pytest

from gputriage.parsers.container_log import (
    SIGNATURES,
    cdi_devices,
    other_process_mib,
    parse_torch_oom,
    scan_container_log,
)

TORCH_OLD = (
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 14.76 GiB "
    "total capacity; 4.37 GiB already allocated; 14.75 MiB free; 4.43 GiB reserved in "
    "total by PyTorch)"
)
TORCH_20 = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.63 GiB (GPU 1; "
    "44.56 GiB total capacity; 27.91 GiB already allocated; 565.31 MiB free; 28.22 GiB "
    "reserved in total by PyTorch) If reserved memory is >> allocated memory try setting "
    "max_split_size_mb to avoid fragmentation."
)
TORCH_NEW_NEIGHBOUR = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 0 has a total "
    "capacity of 15.60 GiB of which 700.88 MiB is free. Process 2514 has 14.91 GiB memory in "
    "use. Of the allocated memory 14.62 GiB is allocated by PyTorch, and 87.96 MiB is reserved "
    "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
)
TORCH_NEW_SELF = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 23.65 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this "
    "process has 22.58 GiB memory in use. Of the allocated memory 21.87 GiB is allocated by "
    "PyTorch, and 259.54 MiB is reserved by PyTorch but unallocated."
)


def test_torch_old_format_numbers() -> None:
    n = parse_torch_oom(TORCH_OLD)
    assert n == {
        "tried_mib": 20.0,
        "total_mib": 15114.24,
        "free_mib": 14.75,
        "allocated_mib": 4474.88,
        "reserved_mib": 4536.32,
        "gpu": 0.0,
        "other_process_mib": 10563.17,
    }


def test_torch_2_0_format_numbers() -> None:
    n = parse_torch_oom(TORCH_20)
    assert (n["gpu"], n["tried_mib"], n["total_mib"], n["free_mib"]) == (
        1.0,
        1669.12,
        45629.44,
        565.31,
    )
    assert n["reserved_mib"] == 28897.28
    assert n["other_process_mib"] == round(45629.44 - 565.31 - 28897.28, 2)


def test_torch_new_format_with_a_neighbour_process() -> None:
    n = parse_torch_oom(TORCH_NEW_NEIGHBOUR)
    assert (n["tried_mib"], n["total_mib"], n["free_mib"]) == (1280.0, 15974.4, 700.88)
    assert n["allocated_mib"] == 14970.88
    assert n["reserved_mib"] == round(14970.88 + 87.96, 2)  # allocated + reserved-unallocated
    assert "process_mib" not in n  # "Process 2514 has" may be any process, not this one
    assert n["other_process_mib"] == round(15974.4 - 700.88 - 15058.84, 2)


def test_torch_new_format_with_this_process_total() -> None:
    n = parse_torch_oom(TORCH_NEW_SELF)
    assert n["process_mib"] == 23121.92
    assert n["other_process_mib"] == round(24217.6 - 1085.44 - 23121.92, 2)


def test_other_process_needs_total_free_and_own_usage() -> None:
    assert other_process_mib({"total_mib": 100.0, "free_mib": 10.0}) is None
    assert other_process_mib({"total_mib": 100.0, "free_mib": 10.0, "reserved_mib": 95.0}) == 0.0
    assert (
        other_process_mib(
            {"total_mib": 100.0, "free_mib": 10.0, "reserved_mib": 50.0, "process_mib": 60.0}
        )
        == 30.0
    )


LOG = f"""\
Traceback (most recent call last):
  File "/app/train.py", line 88, in <module>
    loss.backward()
{TORCH_OLD}
2024-05-02 10:00:01.123 W tensorflow/tsl/framework/bfc_allocator.cc:485] Allocator (GPU_0_bfc) ran out of memory
2024-05-02 10:00:01.124 E external/xla/stream_executor/cuda/cuda_driver.cc:628] failed to allocate 1.00G (1073741824 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory
tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[8,1024,1024,64] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4294967296 bytes.
ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.
ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (22528). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.
ValueError: Free memory on device cuda:1 (19.77/22.05 GiB) on startup is less than desired GPU memory utilization (0.9, 19.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.
RuntimeError: CUDA error: out of memory
node-1:123:456 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-AbC123 to 9637892 bytes, error: No space left on device (28)
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1
[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600038 milliseconds before timing out.
ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).
RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version
Failed to initialize NVML: Unknown Error
Failed to initialize NVML: Insufficient Permissions
RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx
cudaGetDeviceCount returned 100 -> no CUDA-capable device is detected
RuntimeError: CUDA error: an illegal memory access was encountered
RuntimeError: CUDA error: uncorrectable ECC error encountered
RuntimeError: DataLoader worker (pid 3412) is killed by signal: Killed.
Error: failed to create containerd task: unresolvable CDI devices nvidia.com/gpu=0:1, management.nvidia.com/gpu=all: unknown
[PG 0 Rank 25] Process group watchdog thread terminated with exception: CUDA error: unspecified launch failure
RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized
"""


def test_every_signature_on_its_line() -> None:
    scan = scan_container_log(LOG)
    assert [(m.id, m.line) for m in scan.matches] == [
        ("torch_cuda_oom", 4),
        ("tf_oom", 6),
        ("tf_oom", 7),
        ("xla_oom", 8),
        ("vllm_no_cache_memory", 9),
        ("vllm_kv_cache_too_small", 10),
        ("vllm_free_memory_low", 11),
        ("cuda_error_oom", 12),
        ("nccl_shm", 13),
        ("nccl_system_error", 14),
        ("nccl_timeout", 15),
        ("shm_bus_error", 16),
        ("driver_insufficient", 17),
        ("nvml_unknown_error", 18),
        ("nvml_insufficient_permissions", 19),
        ("no_nvidia_driver", 20),
        ("no_cuda_device", 21),
        ("illegal_memory_access", 22),
        ("ecc_uncorrectable", 23),
        ("dataloader_killed", 24),
        ("cdi_unresolvable", 25),
        ("cuda_launch_failure", 26),
        ("cuda_system_not_ready", 27),
    ]
    assert {s.id for s in SIGNATURES} - {m.id for m in scan.matches} == {"nvml_driver_mismatch"}


def test_numbers_carried_by_each_line() -> None:
    scan = scan_container_log(LOG)
    by_id = {m.id: m for m in reversed(scan.matches)}  # first match of each id
    assert by_id["tf_oom"].numbers == {"tried_mib": 1024.0}
    last_tf = scan.last("tf_oom")
    assert last_tf is not None and last_tf.line == 7 and last_tf.numbers == {}
    assert by_id["xla_oom"].numbers == {"tried_mib": 4096.0}
    assert by_id["vllm_free_memory_low"].numbers == {
        "free_mib": 20244.48,
        "total_mib": 22579.2,
        "utilization": 0.9,
        "requested_mib": 20316.16,
    }
    assert by_id["nccl_shm"].numbers == {"shm_request_mib": 9.19}
    assert by_id["nccl_timeout"].numbers == {"timeout_ms": 600000.0}
    assert by_id["nvml_unknown_error"].numbers == {}
    assert by_id["torch_cuda_oom"].numbers["other_process_mib"] == 10563.17
    assert by_id["dataloader_killed"].numbers == {"pid": 3412.0}
    assert by_id["cdi_unresolvable"].numbers == {}
    assert cdi_devices(by_id["cdi_unresolvable"].text) == [
        "nvidia.com/gpu=0:1",
        "management.nvidia.com/gpu=all",
    ]


@pytest.mark.parametrize(
    ("line", "devices"),
    [
        (
            "unresolvable CDI devices management.nvidia.com/gpu=all: unknown",
            ["management.nvidia.com/gpu=all"],
        ),
        (
            "unresolvable CDI devices nvidia.com/gpu=GPU-6b0f4c1a-1b8c-4b7f-9c83-3a6a3b1d2f11",
            ["nvidia.com/gpu=GPU-6b0f4c1a-1b8c-4b7f-9c83-3a6a3b1d2f11"],
        ),
        ("unresolvable CDI devices: unknown", []),
        ("", []),
    ],
)
def test_cdi_device_names(line: str, devices: list[str]) -> None:
    assert cdi_devices(line) == devices


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        (
            "DataLoader worker (pid 77) is killed by signal: Bus error. It is possible that "
            "dataloader's workers are out of shared memory.",
            ["shm_bus_error"],
        ),
        ("DataLoader worker (pid(s) 77, 78) exited unexpectedly", []),
        ("DataLoader worker (pid(s) 77) is killed by signal: Killed.", ["dataloader_killed"]),
    ],
)
def test_dataloader_worker_deaths(text: str, ids: list[str]) -> None:
    assert [m.id for m in scan_container_log(text).matches] == ids


def test_repeats_are_counted_but_capped() -> None:
    line = (
        "[3] include/shm.h:48 NCCL WARN Error while creating shared memory segment "
        "nccl-shm-recv-1462445a6f01cbfc-1-2-3 (size 9637888)\n"
    )
    scan = scan_container_log("starting\n" + line * 100, keep_per_signature=20)
    assert scan.counts == {"nccl_shm": 100}
    assert len(scan.matches) == 20
    assert [m.line for m in scan.matches][:3] == [2, 3, 4]
    assert scan.matches[0].numbers == {"shm_request_mib": 9.19}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "all good, epoch 3 loss 0.12\n",
        "CUDA out of mem",
        "Bus Error in PCIe link (not SIGBUS)",
    ],
)
def test_nothing_matches_in_clean_or_near_miss_logs(text: str) -> None:
    scan = scan_container_log(text)
    assert scan.matches == [] and scan.counts == {}


def test_long_lines_are_capped() -> None:
    scan = scan_container_log("x" * 5000 + " CUDA error: out of memory " + "y" * 5000)
    (match,) = scan.matches
    assert match.id == "cuda_error_oom" and len(match.text) == 2000


@pytest.mark.timeout(120)
def test_sixteen_megabyte_log_is_scanned_whole() -> None:
    filler = "I0501 12:00:00.000000 step=1234 loss=0.4321 lr=0.0001 tokens/s=12345\n"
    body = filler * (16 * 1024 * 1024 // len(filler))
    scan = scan_container_log(body + TORCH_OLD + "\n")
    assert scan.counts == {"torch_cuda_oom": 1}
    assert scan.matches[0].line == body.count("\n") + 1
