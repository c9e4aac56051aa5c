"""What each evidence tab shows, from real evidence through the real fact builders."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputriage.evidence.bundle import decode, read_bundle
from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef, Status
from gputriage.facts.build import build_facts
from gputriage.facts.model import FactGroup, FactSet, Target
from gputriage.facts.registry import specs
from gputriage.tui import tables
from tests.tui.bundles import HOSTILE_MSG, NS, POD, UID

XID79 = (
    "[Tue Mar  5 10:11:12 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
    "name=<unknown>, GPU has fallen off the bus."
)
XID13 = (
    "[Tue Mar  5 10:09:01 2024] NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python3, "
    "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"
)
DMESG = f"[Tue Mar  5 10:00:00 2024] Linux version 6.1.0\n{XID13}\n{XID79}\n"
SMI_LOST = "Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error\n"
OOM_LOG = (
    "step 10 loss 2.3\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.15 GiB of which 1.06 GiB is free. Process 4242 has 78.08 GiB memory in use. "
    "Of the allocated memory 76.50 GiB is allocated by PyTorch, and 1.02 GiB is reserved by "
    "PyTorch but unallocated.\n"
)
PLUGIN_LOG = (
    "I0305 10:00:01.000000       1 main.go:256] Starting FS watcher.\n"
    "I0305 10:00:02.000000       1 server.go:165] Registered device plugin for "
    "'nvidia.com/gpu' with Kubelet\n"
    "I0305 10:11:13.000000       1 health.go:159] 'nvidia.com/gpu' device marked unhealthy: "
    "GPU-8d3b5f2e-1c4a-4b8e-9f00-0a1b2c3d4e5f\n"
)


def evidence(*items: Evidence) -> EvidenceSet:
    return EvidenceSet(items)


def node_evidence() -> EvidenceSet:
    return evidence(
        decode(Key.DMESG, DMESG.encode(), source="b/dmesg.log"),
        decode(Key.NVIDIA_SMI, SMI_LOST.encode(), source="b/nvidia-smi.txt"),
        decode(Key.CONTAINER_LOG_PREVIOUS, OOM_LOG.encode(), source="b/container-previous.log"),
        decode(Key.DEVICE_PLUGIN_LOG, PLUGIN_LOG.encode(), source="b/device-plugin.log"),
    )


def test_every_field_a_tab_reads_is_declared_by_its_group() -> None:
    declared = specs()
    for group, fields in tables.READS.items():
        assert group in declared, f"no fact group {group!r} is registered"
        missing = set(fields) - set(declared[group].fields)
        assert not missing, f"{group} does not declare {sorted(missing)}"


def test_xid_tab_lists_each_xid_with_nvidias_meaning_and_action() -> None:
    ev = node_evidence()
    data = tables.xid_table(build_facts(ev), ev, frozenset(), frozenset({("b/dmesg.log", 3)}))
    assert [r.cells[2] for r in data.rows] == ["13", "79"]
    xid79 = data.rows[1]
    assert xid79.cells[1] == "Xid" and xid79.cells[3] == "0000:3B:00"
    assert xid79.cells[7] == "3" and xid79.cited and not data.rows[0].cited
    assert xid79.tone == "error"  # 79 is a hardware Xid
    assert "fallen off the bus" in xid79.cells[5].lower()
    assert xid79.cells[6] not in ("", "-")  # NVIDIA's immediate action
    assert "GPU fallen off the bus" in data.note and "2 Xid/SXid events" in data.note


def test_nvidia_smi_tab_names_the_lost_gpu() -> None:
    ev = node_evidence()
    data = tables.gpus_table(build_facts(ev), ev, frozenset(), frozenset())
    assert data.rows == ()
    assert "0000:3B:00.0" in data.note and "Unknown Error" in data.note


def test_container_log_tab_shows_the_oom_signature_and_its_numbers() -> None:
    ev = node_evidence()
    cited = frozenset({("b/container-previous.log", 2)})
    data = tables.container_log_table(build_facts(ev), ev, frozenset(), cited)
    oom = [r for r in data.rows if r.cells[1] == "2"]
    assert oom and oom[0].cited
    assert "CUDA out of memory" in oom[0].cells[3]
    assert "tried: 2048" in data.note


def test_device_plugin_tab_shows_the_log_and_the_unhealthy_device() -> None:
    ev = node_evidence()
    data = tables.device_plugin_table(
        build_facts(ev), ev, frozenset(), frozenset({("b/device-plugin.log", 3)})
    )
    assert [r.cells[0] for r in data.rows] == ["1", "2", "3"]
    assert data.rows[2].cited and data.rows[2].tone == "error"
    assert "GPU-8d3b5f2e-1c4a-4b8e-9f00-0a1b2c3d4e5f" in data.note
    assert "registered: yes" in data.note


def test_kubelet_tab_keeps_the_lines_about_the_pod(bundle: Path) -> None:
    ev = read_bundle(bundle)
    data = tables.kubelet_table(build_facts(ev), ev, frozenset(), frozenset())
    # Line 1 (device-plugin registration) is node-wide but the kubelet facts cite it; line 3
    # is about another pod.
    assert [r.cells[0] for r in data.rows] == ["1", "2"]
    assert "Error syncing pod" in data.rows[1].cells[1] and data.rows[1].tone == "error"
    assert data.note == f"2 of 3 lines naming {NS}/{POD} or cited by the kubelet facts"


def test_pending_and_unknown_groups_say_why_a_tab_is_empty() -> None:
    pending = tables.xid_table(None, EvidenceSet(), frozenset({Key.DMESG}), frozenset())
    assert pending.note == "kernel log: collecting dmesg…" and pending.rows == ()
    failed = evidence(Evidence(Key.DMESG, Status.TIMEOUT, "ssh gpu-7 did not answer in 10 s"))
    data = tables.xid_table(build_facts(failed), failed, frozenset(), frozenset())
    assert data.note.startswith("kernel log unknown: ")
    assert "timeout: ssh gpu-7 did not answer in 10 s" in data.note


def hand_facts(**groups: dict[str, object]) -> FactSet:
    return FactSet(
        Target(namespace=NS, pod=POD, uid=UID, node="gpu-node-7"),
        {name: FactGroup(name, True, "", values) for name, values in groups.items()},
    )


def test_events_tab_is_inert_and_marks_warnings() -> None:
    facts = hand_facts(
        events={
            "items": [
                {
                    "type": "Warning",
                    "reason": "FailedScheduling",
                    "message": "0/4 nodes",
                    "count": 5,
                    "last": "2026-03-05T10:04:05Z",
                    "line": 31,
                },
                {
                    "type": "Normal",
                    "reason": "BackOff",
                    "message": HOSTILE_MSG,
                    "count": 1,
                    "last": "2026-03-05T10:04:05Z",
                    "line": 52,
                },
            ]
        }
    )
    ev = evidence(Evidence(Key.EVENTS, Status.OK, source="b/events.json"))
    data = tables.events_table(facts, ev, frozenset(), frozenset({("b/events.json", 31)}))
    first, hostile = data.rows
    assert first.cells[:4] == ("pod", "Warning", "FailedScheduling", "5")
    assert first.tone == "warning" and first.cited and not hostile.cited
    assert hostile.cells[5] == "[bold red]boom[/] red alert done"
    assert data.note == "owner events: not collected (owner-events)"


def test_scheduler_tab_counts_nodes_per_reason() -> None:
    facts = hand_facts(
        scheduler={
            "total_nodes": 4,
            "preemption_helpful": False,
            "reasons": [
                {
                    "count": 1,
                    "kind": "taint",
                    "taint_key": "node-role.kubernetes.io/control-plane",
                    "taint_value": "",
                    "text": "node(s) had untolerated taint",
                },
                {
                    "count": 3,
                    "kind": "insufficient",
                    "resource": "nvidia.com/gpu",
                    "text": "Insufficient nvidia.com/gpu",
                },
            ],
        }
    )
    data = tables.scheduler_table(facts, EvidenceSet(), frozenset(), frozenset())
    assert data.note == "0/4 nodes are available; preemption is not helpful"
    assert data.rows[0].cells == (
        "1",
        "taint",
        "node-role.kubernetes.io/control-plane=",
        "node(s) had untolerated taint",
    )
    assert data.rows[1].cells[:3] == ("3", "insufficient", "nvidia.com/gpu")
    assert data.rows[1].tone == "warning"


def test_gpu_nodes_tab_shows_capacity_allocatable_requested_free() -> None:
    facts = hand_facts(
        cluster={
            "gpu_nodes": [
                {
                    "name": "gpu-node-7",
                    "ready": True,
                    "unschedulable": False,
                    "capacity": {"nvidia.com/gpu": 8, "cpu": 96},
                    "allocatable": {"nvidia.com/gpu": 7},
                    "requested": {"nvidia.com/gpu": 7},
                    "free": {"nvidia.com/gpu": 0},
                    "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                },
                {
                    "name": "gpu-node-8",
                    "ready": False,
                    "capacity": {},
                    "allocatable": {},
                    "requested": None,
                    "free": {},
                    "taints": [],
                },
            ]
        }
    )
    data = tables.gpu_nodes_table(facts, EvidenceSet(), frozenset(), frozenset())
    seven, eight = data.rows
    assert seven.cells == (
        "gpu-node-7 *",
        "yes",
        "no",
        "nvidia.com/gpu: 8",
        "nvidia.com/gpu: 7",
        "nvidia.com/gpu: 7",
        "nvidia.com/gpu: 0",
        "nvidia.com/gpu:NoSchedule",
    )
    assert seven.tone == "warning" and eight.tone == "error"
    assert data.note == "2 GPU nodes; * = the pod's node"


def test_sources_tab_gives_every_status_and_reason() -> None:
    ev = evidence(
        Evidence(Key.POD, Status.OK, "object (json)", source="b/pod.json", elapsed_s=0.25),
        Evidence(Key.DMESG, Status.FORBIDDEN, "dmesg: Operation not permitted"),
    )
    data = tables.sources_table(None, ev, frozenset({Key.KUBELET_LOG}), frozenset())
    assert [r.cells[:2] for r in data.rows] == [
        ("pod", "ok"),
        ("dmesg", "failed: forbidden"),
        ("kubelet", "collecting"),
    ]
    assert data.rows[0].cells[4] == "0.25s" and data.rows[0].tone == "ok"
    assert data.rows[1].cells[2] == "dmesg: Operation not permitted"
    assert data.rows[1].tone == "error"


def test_filter_keeps_matching_rows_case_insensitively() -> None:
    data = tables.TableData(("a", "b"), (tables.Row(("Xid 79", "x")), tables.Row(("ok", "y"))))
    assert [r.cells[0] for r in data.filtered("xid").rows] == ["Xid 79"]
    assert data.filtered("  ") is data and data.filtered("zzz").rows == ()


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "-"),
        ("", "-"),
        ([], "-"),
        ({}, "-"),
        (True, "yes"),
        (False, "no"),
        (1.50, "1.5"),
        (["a", 2], "a, 2"),
        ({"nvidia.com/gpu": 2}, "nvidia.com/gpu: 2"),
        ("a\x1b[31mred\x1b[0m\nb", "ared b"),
        ("x" * 500, "x" * 399 + "…"),
    ],
)
def test_cells_are_one_inert_line(value: object, shown: str) -> None:
    assert tables.cell(value) == shown


def test_cited_set_ignores_lines_without_a_number() -> None:
    refs = [LineRef("dmesg", "b/dmesg.log", 3, "x"), LineRef("pod", "b/pod.json", 0, "y")]
    assert tables.cited_set(refs) == frozenset({("b/dmesg.log", 3)})
    assert tables.reported(-1) is None and tables.reported(0) == 0
    assert tables.reported(True) is True


def test_scheduler_tab_says_no_victims_never_that_preemption_could_help() -> None:
    """ "No preemption victims found": the scheduler could evict nothing; not "could help"."""
    facts = hand_facts(
        scheduler={
            "total_nodes": 4,
            "preemption_helpful": True,
            "preemption": {"total_nodes": 4, "not_helpful": 1, "no_victims": 3},
            "reasons": [
                {
                    "count": 3,
                    "kind": "insufficient",
                    "resource": "nvidia.com/gpu",
                    "text": "Insufficient nvidia.com/gpu",
                }
            ],
        }
    )
    data = tables.scheduler_table(facts, EvidenceSet(), frozenset(), frozenset())
    assert data.note == (
        "0/4 nodes are available; preemption: no victims found on 3 node(s) "
        "(the GPUs are taken by pods of equal or higher priority)"
    )
    assert "could help" not in data.note
