"""The ``container_log`` fact group, from bundle text and from the corpus' real incidents."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputriage.evidence.bundle import decode
from gputriage.evidence.model import Evidence, EvidenceSet, Key
from gputriage.facts import container_log
from gputriage.facts.model import FactGroup, FactSet, Target

TIME_SLICED_OOM = (
    b"Loading model...\n"
    b"Traceback (most recent call last):\n"
    b'  File "/srv/app.py", line 41, in predict\n'
    b"RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 14.76 GiB total "
    b"capacity; 4.37 GiB already allocated; 14.75 MiB free; 4.43 GiB reserved in total by "
    b"PyTorch)\n"
)


def log(blob: bytes, key: Key = Key.CONTAINER_LOG) -> Evidence:
    name = "container.log" if key is Key.CONTAINER_LOG else "container-previous.log"
    return decode(key, blob, source=f"bundle/{name}")


def build(*items: Evidence) -> FactGroup:
    return container_log.build(EvidenceSet(items), Target(), {})


def test_time_slicing_oom_names_the_memory_held_by_others() -> None:
    group = build(log(TIME_SLICED_OOM))
    v = group.values
    assert group.known and v["logs_read"] == ["current"]
    assert v["cuda_oom"] is True
    assert v["oom"] == {
        "signature": "torch_cuda_oom",
        "log": "current",
        "line": 4,
        "gpu": 0,
        "tried_mib": 20,
        "total_mib": 15114,
        "free_mib": 15,
        "allocated_mib": 4475,
        "reserved_mib": 4536,
        "process_mib": -1,
    }
    assert v["oom_other_process_mib"] == 10563
    assert (v["nccl_shm"], v["nvml_unknown_error"], v["no_cuda_device"]) == (False, False, False)
    facts = FactSet(Target(), {"container_log": group})
    (ref,) = facts.citations("container_log.oom_other_process_mib")
    assert (ref.source, ref.line) == ("bundle/container.log", 4)
    assert ref.text.startswith("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB")


def test_cel_reads_the_oom_numbers() -> None:
    import cel

    ctx = cel.Context()
    ctx.add_variable("container_log", build(log(TIME_SLICED_OOM)).to_context())
    assert (
        cel.evaluate(
            "container_log.cuda_oom && container_log.oom_other_process_mib > "
            "2 * container_log.oom.reserved_mib",
            ctx,
        )
        is True
    )
    assert (
        cel.evaluate(
            "container_log.signatures.exists(s, s.id == 'torch_cuda_oom' && "
            "s.numbers.tried_mib == 20.0)",
            ctx,
        )
        is True
    )


def test_previous_log_is_read_and_labelled() -> None:
    previous = log(
        b"NCCL INFO Bootstrap\n"
        b"[3] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space "
        b"left on device\n",
        Key.CONTAINER_LOG_PREVIOUS,
    )
    current = log(b"starting worker 3\n")
    group = build(current, previous)
    v = group.values
    assert v["logs_read"] == ["current", "previous"]
    assert v["nccl_shm"] is True and v["cuda_oom"] is False and v["oom"] == {}
    assert v["oom_other_process_mib"] == -1
    assert v["signatures"] == [
        {
            "id": "nccl_shm",
            "log": "previous",
            "line": 2,
            "text": "[3] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left "
            "on device",
            "numbers": {},
        }
    ]
    assert [(r.source, r.line) for r in group.cites["nccl_shm"]] == [
        ("bundle/container-previous.log", 2)
    ]


def test_current_oom_wins_over_previous() -> None:
    newer = log(
        b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 0 "
        b"has a total capacity of 15.60 GiB of which 700.88 MiB is free. Process 2514 "
        b"has 14.91 GiB memory in use. Of the allocated memory 14.62 GiB is allocated by "
        b"PyTorch, and 87.96 MiB is reserved by PyTorch but unallocated.\n"
    )
    group = build(newer, log(TIME_SLICED_OOM, Key.CONTAINER_LOG_PREVIOUS))
    v = group.values
    assert (v["oom"]["log"], v["oom"]["tried_mib"], v["oom"]["reserved_mib"]) == (
        "current",
        1280,
        15059,
    )
    assert v["oom_other_process_mib"] == 215  # this process holds nearly all of it
    assert v["signature_counts"] == {"torch_cuda_oom": 2}


def test_vllm_startup_shortfall_counts_as_oom() -> None:
    group = build(
        log(
            b"ValueError: Free memory on device cuda:1 (19.77/22.05 GiB) on startup is "
            b"less than desired GPU memory utilization (0.9, 19.84 GiB). Decrease GPU "
            b"memory utilization or reduce GPU memory used by other processes.\n"
        )
    )
    v = group.values
    assert v["cuda_oom"] is True and v["oom"]["signature"] == "vllm_free_memory_low"
    assert (v["oom"]["total_mib"], v["oom"]["free_mib"]) == (22579, 20244)
    assert v["oom_other_process_mib"] == 2335


def test_unknown_when_no_log_was_read() -> None:
    group = build(
        Evidence.missing(Key.CONTAINER_LOG, "container gpu-worker has not started"),
        log(b"", Key.CONTAINER_LOG_PREVIOUS),
    )
    assert not group.known
    assert group.reason == (
        "the container log: unavailable: container gpu-worker has not "
        "started; the previous container's log (--previous): error: "
        "bundle/container-previous.log is empty"
    )
    assert group.values["signatures"] == [] and group.values["oom"] == {}


def test_every_field_is_declared_with_a_doc() -> None:
    assert all(spec.doc for spec in container_log.SPEC.fields.values())
    assert set(build(log(TIME_SLICED_OOM)).values) == set(container_log.SPEC.fields)


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("case", "flags", "ids"),
    [
        ("oom-001-k8sdp-323-time-slicing-cuda-oom", {"cuda_oom"}, ["torch_cuda_oom"]),
        ("oom-003-nccl-525-kubeflow-dev-shm", {"nccl_shm"}, ["nccl_shm"]),
        (
            "create-019-nct-251-nvml-unknown-error-daemon-reload",
            {"nvml_unknown_error"},
            ["nvml_unknown_error"],
        ),
        (
            "create-009-gpuop-531-toolkit-unresolvable-cdi-all",
            {"cdi_unresolvable"},
            ["cdi_unresolvable"],
        ),
        ("oom-007-triton-309-container-memory-limit-too-small", set(), []),
    ],
)
def test_corpus_incident_logs(corpus_dir: Path, case: str, flags: set[str], ids: list[str]) -> None:
    import yaml

    data = yaml.safe_load((corpus_dir / "k8s" / "cases" / f"{case}.yaml").read_text())
    blob = "\n".join(data["container_log"]).encode() + b"\n"
    v = build(log(blob)).values
    assert v["signature_ids"] == ids
    set_flags = {
        f
        for f in (
            "cuda_oom",
            "nccl_shm",
            "nvml_unknown_error",
            "driver_insufficient",
            "no_cuda_device",
            "nccl_timeout",
            "cdi_unresolvable",
            "dataloader_killed",
        )
        if v[f]
    }
    assert set_flags == flags
    if case.startswith("create-009"):
        assert v["cdi_devices"] == ["management.nvidia.com/gpu=all"]
        assert [str(r) for r in build(log(blob)).cites["cdi_devices"]] == [
            "bundle/container.log:1: unresolvable CDI devices management.nvidia.com/gpu=all: "
            "unknown"
        ]
    if case.startswith("oom-001"):
        # The issue: "the other pod/service allocated around 9GiB" of the 15 GiB T4.
        assert 9 * 1024 <= v["oom_other_process_mib"] <= 11 * 1024
