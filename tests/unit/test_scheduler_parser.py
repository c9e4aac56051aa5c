"""The scheduler message parser on every wording generation (k8s-messages.md section 2)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gputriage.parsers.scheduler import GENERATIONS, KINDS, parse_scheduler_message

# message -> (total, generation, {kind: count}, {resource: count}, taints, preemption helpful)
CASES: dict[
    str, tuple[int, str, dict[str, int], dict[str, int], list[tuple[str, str]], bool | None]
] = {
    # pre-framework predicate names (k8s-device-plugin#22, #36)
    "0/3 nodes are available: 1 PodToleratesNodeTaints, 3 Insufficient nvidia.com/gpu.": (
        3,
        "predicates",
        {"taint": 1, "insufficient": 3},
        {"nvidia.com/gpu": 3},
        [],
        None,
    ),
    "0/4 nodes are available: 1 NodeUnschedulable, 1 MatchNodeSelector, 2 Insufficient "
    "nvidia.com/gpu.": (
        4,
        "predicates",
        {"unschedulable": 1, "selector": 1, "insufficient": 2},
        {"nvidia.com/gpu": 2},
        [],
        None,
    ),
    # predicate descriptions (~1.10-1.17)
    "0/5 nodes are available: 2 node(s) didn't match node selector, 3 node(s) had taints that "
    "the pod didn't tolerate.": (
        5,
        "predicate-descriptions",
        {"selector": 2, "taint": 3},
        {},
        [],
        None,
    ),
    # ~1.18-1.25: taint printed, then ", that the pod didn't tolerate" (a comma inside an entry)
    "0/4 nodes are available: 1 node(s) had taint {node-role.kubernetes.io/master: }, that the "
    "pod didn't tolerate, 3 Insufficient nvidia.com/gpu.": (
        4,
        "taint-didnt-tolerate",
        {"taint": 1, "insufficient": 3},
        {"nvidia.com/gpu": 3},
        [("node-role.kubernetes.io/master", "")],
        None,
    ),
    # ~1.26-1.33 with preemption tail and the 1.24-1.27 double period
    "0/8 nodes are available: 2 node(s) had untolerated taint {nvidia.com/gpu: present}, "
    "6 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are available: 2 Preemption is not "
    "helpful for scheduling, 6 No preemption victims found for incoming pod..": (
        8,
        "untolerated-taint",
        {"taint": 2, "insufficient": 6},
        {"nvidia.com/gpu": 6},
        [("nvidia.com/gpu", "present")],
        True,
    ),
    # newest: key/value no longer printed
    "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match Pod's "
    "node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful "
    "for scheduling.": (3, "untolerated-taints", {"taint": 1, "selector": 2}, {}, [], False),
    # lexicographic sort: "10 ..." before "2 ..."
    "0/12 nodes are available: 10 Insufficient nvidia.com/mig-1g.10gb, 2 node(s) were "
    "unschedulable.": (
        12,
        "framework",
        {"insufficient": 10, "unschedulable": 2},
        {"nvidia.com/mig-1g.10gb": 10},
        [],
        None,
    ),
    "0/3 nodes are available: 3 Too many pods.": (
        3,
        "framework",
        {"too_many_pods": 3},
        {},
        [],
        None,
    ),
    "0/2 nodes are available: 1 node(s) had volume node affinity conflict, 1 Insufficient "
    "nvidia.com/gpu.shared.": (
        2,
        "framework",
        {"volume": 1, "insufficient": 1},
        {"nvidia.com/gpu.shared": 1},
        [],
        None,
    ),
    # real case outputs (corpus pending-007, pending-016, pending-021)
    "0/6 nodes are available: 6 Insufficient nvidia.com/gpu.": (
        6,
        "framework",
        {"insufficient": 6},
        {"nvidia.com/gpu": 6},
        [],
        None,
    ),
    "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.": (
        1,
        "framework",
        {"insufficient": 1},
        {"nvidia.com/gpu": 1},
        [],
        None,
    ),
    "0/1 nodes are available: 1 Insufficient memory, 1 Insufficient nvidia.com/gpu. no new "
    "claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for "
    "scheduling.": (
        1,
        "framework",
        {"insufficient": 2},
        {"memory": 1, "nvidia.com/gpu": 1},
        [],
        False,
    ),
    "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. no new "
    "claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for "
    "scheduling.": (1, "framework", {"selector": 1}, {}, [], False),
    # DRA, structured parameters (1.31+)
    "0/2 nodes are available: 1 cannot allocate all claims, 1 node(s) didn't match Pod's node "
    "affinity/selector. still not schedulable, preemption: 0/2 nodes are available: 2 "
    "Preemption is not helpful for scheduling.": (
        2,
        "framework",
        {"dra": 1, "selector": 1},
        {},
        [],
        False,
    ),
    # PreFilter failures replace the histogram and apply to every node
    '0/3 nodes are available: persistentvolumeclaim "x" not found. preemption: 0/3 nodes are '
    "available: 3 Preemption is not helpful for scheduling.": (
        3,
        "framework",
        {"volume": 3},
        {},
        [],
        False,
    ),
    "0/4 nodes are available: resourceclaim not found. preemption: 0/4 nodes are available: 4 "
    "Preemption is not helpful for scheduling.": (4, "framework", {"dra": 4}, {}, [], False),
    '0/4 nodes are available: resourceclaim "gpu-claim" is being deleted. preemption: 0/4 nodes '
    "are available: 4 Preemption is not helpful for scheduling.": (
        4,
        "framework",
        {"dra": 4},
        {},
        [],
        False,
    ),
    "0/2 nodes are available: resourceclaim gpu-claim: request gpu: device class gpu.nvidia.com "
    "does not exist. preemption: 0/2 nodes are available: 2 Preemption is not helpful for "
    "scheduling.": (2, "framework", {"dra": 2}, {}, [], False),
    # classic DRA (1.26-1.30): no envelope, only the preemption tail
    'waiting for dynamic resource controller to create the resourceclaim "pod0-gpu". no new '
    "claims to deallocate, preemption: 0/2 nodes are available: 2 No preemption victims found "
    "for incoming pod": (2, "framework", {"dra": 2}, {}, [], True),
    # other schedulers
    "0/2 nodes are available: 2 ExceedsGPUQuota.": (2, "framework", {"other": 2}, {}, [], None),
    "0/10 nodes are available: 1 node unregisterd, 6 node(s) didn't match Pod's node "
    "affinity/selector.": (10, "framework", {"other": 1, "selector": 6}, {}, [], None),
    "pod didn't trigger scale-up: 1 max node group size reached, 2 node(s) didn't match Pod's "
    "node affinity/selector, 1 Insufficient nvidia.com/mig-1g.10gb": (
        0,
        "autoscaler",
        {"other": 1, "selector": 2, "insufficient": 1},
        {"nvidia.com/mig-1g.10gb": 1},
        [],
        None,
    ),
    "pod didn't trigger scale-up (it wouldn't fit if a new node is added): 3 Insufficient "
    "nvidia.com/gpu": (0, "autoscaler", {"insufficient": 3}, {"nvidia.com/gpu": 3}, [], None),
    "Resources were not found for pod <ns>/<pod> due to: no nodes with enough resources were "
    "found: 1 node(s) didn't have enough resources: rdma/shared_mlx5.\n6 node(s) didn't have "
    "enough of mig profile: nvidia.com/mig-1g.5gb.": (
        0,
        "kai",
        {"insufficient": 7},
        {"rdma/shared_mlx5": 1, "nvidia.com/mig-1g.5gb": 6},
        [],
        None,
    ),
    "No nodes with enough resources were found: 2 node(s) didn't have enough resources: GPUs.": (
        0,
        "kai",
        {"insufficient": 2},
        {"nvidia.com/gpu": 2},
        [],
        None,
    ),
    # Volcano (pkg/scheduler/api/unschedule_info.go: "0/%v nodes are unavailable: <histogram>.")
    "0/3 nodes are unavailable: 1 node(s) pod number exceeded, 2 Insufficient nvidia.com/gpu.": (
        3,
        "volcano",
        {"too_many_pods": 1, "insufficient": 2},
        {"nvidia.com/gpu": 2},
        [],
        None,
    ),
    "all nodes are unavailable: 1 node(s) didn't match Pod's node affinity/selector, 3 node(s) "
    "resource fit failed.": (0, "volcano", {"selector": 1, "other": 3}, {}, [], None),
    # HAMi's extender: FilteringFailed, one event per failure reason (pkg/scheduler/score.go)
    "3 nodes CardInsufficientMemory(gpu-a,gpu-b,gpu-c)": (
        0,
        "hami",
        {"insufficient": 3},
        {"nvidia.com/gpumem": 3},
        [],
        None,
    ),
    "2 nodes NodeInsufficientDevice(gpu-d,gpu-e)": (
        0,
        "hami",
        {"insufficient": 2},
        {"nvidia.com/gpu": 2},
        [],
        None,
    ),
    "1 nodes CardUuidMismatch(gpu-node-b)": (0, "hami", {"other": 1}, {}, [], None),
    "no available node, 4 nodes do not meet": (4, "hami", {"other": 4}, {}, [], None),
}


def _kinds(message: str) -> dict[str, int]:
    parsed = parse_scheduler_message(message)
    out: dict[str, int] = {}
    for r in parsed.reasons:
        out[r.kind] = out.get(r.kind, 0) + r.count
    return out


@pytest.mark.parametrize("message", list(CASES))
def test_every_generation(message: str) -> None:
    total, generation, kinds, insufficient, taints, helpful = CASES[message]
    parsed = parse_scheduler_message(message)
    assert parsed.recognised
    assert parsed.total_nodes == total
    assert parsed.generation == generation
    assert _kinds(message) == kinds
    assert parsed.insufficient() == insufficient
    assert [(r.taint_key, r.taint_value) for r in parsed.reasons if r.taint_key] == taints
    assert (parsed.preemption.helpful if parsed.preemption else None) == helpful


def test_entry_texts_and_counts_are_exact() -> None:
    parsed = parse_scheduler_message(
        "0/4 nodes are available: 1 node(s) had taint {node-role.kubernetes.io/master: }, that "
        "the pod didn't tolerate, 3 Insufficient nvidia.com/gpu."
    )
    assert [(r.count, r.text) for r in parsed.reasons] == [
        (1, "node(s) had taint {node-role.kubernetes.io/master: }, that the pod didn't tolerate"),
        (3, "Insufficient nvidia.com/gpu"),
    ]
    assert parsed.count("taint") == 1
    assert parsed.count("insufficient") == 3
    assert parsed.scheduler == "kube-scheduler"


def test_postfilter_tail_is_split_from_the_histogram() -> None:
    parsed = parse_scheduler_message(
        "0/1 nodes are available: 1 Insufficient memory, 1 Insufficient nvidia.com/gpu. no new "
        "claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not "
        "helpful for scheduling."
    )
    assert parsed.notes == ("no new claims to deallocate",)
    assert parsed.preemption is not None
    assert (
        parsed.preemption.total_nodes,
        parsed.preemption.not_helpful,
        parsed.preemption.no_victims,
    ) == (1, 1, 0)
    assert len(parsed.reasons) == 2  # preemption entries never leak into the histogram


def test_prefilter_text_is_kept() -> None:
    parsed = parse_scheduler_message(
        '0/3 nodes are available: persistentvolumeclaim "x" not found. preemption: 0/3 nodes '
        "are available: 3 Preemption is not helpful for scheduling."
    )
    assert parsed.prefilter == 'persistentvolumeclaim "x" not found'
    assert parsed.reasons[0].prefilter is True
    assert parsed.reasons[0].count == 3


@pytest.mark.parametrize(
    ("message", "scheduler"),
    [
        ("0/4 nodes are available: 4 Insufficient nvidia.com/gpu.", "kube-scheduler"),
        ("pod didn't trigger scale-up: 1 max node group size reached", "cluster-autoscaler"),
        (
            "No nodes with enough resources were found: 2 node(s) didn't have enough resources: GPUs.",
            "kai-scheduler",
        ),
        ("0/2 nodes are unavailable: 2 Insufficient nvidia.com/gpu.", "volcano"),
        ("2 nodes CardTimeSlicingExhausted(gpu-a,gpu-b)", "hami-scheduler"),
    ],
)
def test_each_scheduler_is_named(message: str, scheduler: str) -> None:
    assert parse_scheduler_message(message).scheduler == scheduler


@pytest.mark.parametrize(
    "message",
    [
        "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; "
        "Pending: 1 Unschedulable",
        "pod group is not ready, 1 Pending, 1 minAvailable; Pending: 1 Unschedulable",
        "10/6 tasks in gang unschedulable: job is not ready, 10 minAvailable, 6 Pending.",
    ],
)
def test_volcano_gang_messages_are_volcano_but_no_per_node_verdict(message: str) -> None:
    parsed = parse_scheduler_message(message)
    assert (parsed.recognised, parsed.scheduler, parsed.generation) == (False, "volcano", "")
    # "Unschedulable" inside the gang text is a task count, not cordoned nodes
    assert (parsed.reasons, parsed.total_nodes, parsed.count("unschedulable")) == ((), 0, 0)


def test_bare_plugin_text_is_not_recognised_but_classified() -> None:
    parsed = parse_scheduler_message(
        'running Reserve plugin "DynamicResources": waiting for resource driver to allocate '
        "resource"
    )
    assert not parsed.recognised
    assert parsed.generation == ""
    assert parsed.total_nodes == 0
    assert [r.kind for r in parsed.reasons] == ["dra"]
    assert parsed.prefilter.startswith("running Reserve plugin")


@pytest.mark.parametrize(
    "junk",
    [
        "",
        "   ",
        "\x00\x01binary",
        "0/",
        "0/x nodes are available:",
        "nodes are available: 3 Insufficient",
        "." * 5000,
        "{" * 100,
    ],
)
def test_junk_never_raises(junk: str) -> None:
    parsed = parse_scheduler_message(junk)
    assert parsed.raw == junk
    assert all(r.kind in KINDS for r in parsed.reasons)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "0/3 nodes are available: ",
                "preemption: ",
                "1 ",
                "10 ",
                "Insufficient nvidia.com/gpu",
                "node(s) had untolerated taint {",
                "}",
                ", ",
                ". ",
                "..",
                "pod didn't trigger scale-up: ",
                "no nodes with enough resources were found: ",
                "\n",
                "x",
                ":",
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_fuzzed_messages_never_raise(message: str) -> None:
    parsed = parse_scheduler_message(message)
    assert all(r.kind in KINDS and r.count >= 0 for r in parsed.reasons)
    assert parsed.generation in ("", *GENERATIONS)


def test_counts_no_cluster_has_are_zero_not_a_crash() -> None:
    huge = "9" * 5000  # int() refuses more than 4,300 digits
    parsed = parse_scheduler_message(
        f"0/{huge} nodes are available: {huge} Insufficient "
        f"nvidia.com/gpu, 2 Too many pods. preemption: 0/{huge} "
        f"nodes are available: {huge} Preemption is not helpful"
    )
    assert (parsed.recognised, parsed.total_nodes, parsed.count("too_many_pods")) == (True, 0, 2)
    assert parsed.insufficient() == {"nvidia.com/gpu": 0}
    assert parse_scheduler_message(f"{huge} nodes CardInsufficientMemory(a)").reasons[0].count == 0


def test_non_string_input_is_empty() -> None:
    parsed = parse_scheduler_message(None)  # type: ignore[arg-type]
    assert (parsed.recognised, parsed.reasons, parsed.total_nodes) == (False, (), 0)


def test_every_generation_is_documented() -> None:
    from tests.unit.test_variants_scheduler import VARIANTS

    generations = {CASES[m][1] for m in CASES} | {
        v[2]["generation"] for v in VARIANTS if "generation" in v[2]
    }
    assert generations <= set(GENERATIONS)
    assert set(GENERATIONS) - generations == set()


def _corpus_messages(shared: Path) -> list[str]:
    """Concrete scheduler messages in k8s-messages.md and the cases (format strings skipped)."""
    doc = (shared / "docs" / "k8s-messages.md").read_text(encoding="utf-8")
    found = [
        m.replace("\\n", "\n")
        for m in re.findall(r"`([^`]+)`", doc)
        if re.search(
            r"\d+/\d+ nodes are available|trigger scale-up|enough resources were "
            r"found",
            m,
            re.I,
        )
        and "..." not in m
    ]
    for case in sorted((shared / "corpus" / "k8s" / "cases").glob("*.yaml")):
        data: Any = yaml.safe_load(case.read_text(encoding="utf-8"))
        texts = [
            e.get("message", "")
            for e in data.get("events") or []
            if isinstance(e, dict) and e.get("reason") == "FailedScheduling"
        ]
        texts += [t for t in data.get("other_log") or [] if isinstance(t, str)]
        for text in texts:
            m = re.search(r"0/\d+ nodes are available.*", text)
            if m:
                found.append(m.group(0))
    return found


@pytest.mark.corpus
def test_every_real_message_in_the_references(shared_dir: Path) -> None:
    messages = _corpus_messages(shared_dir)
    assert len(messages) >= 12  # 8 in k8s-messages.md, 4 in the cases
    for message in messages:
        parsed = parse_scheduler_message(message)
        assert parsed.recognised, message
        assert message in CASES, f"add an expectation for: {message}"
        total, generation, kinds, insufficient, _, _ = CASES[message]
        assert (parsed.total_nodes, parsed.generation) == (total, generation), message
        assert _kinds(message) == kinds, message
        assert parsed.insufficient() == insufficient, message
