"""Source states: expected absences read "not applicable (why)", only failures are red."""

from __future__ import annotations

import json
from pathlib import Path

from gputriage.evidence.bundle import decode
from gputriage.evidence.model import Evidence, EvidenceSet, Key, Status
from gputriage.facts.build import build_facts
from gputriage.report.source_states import SourceState, reading
from gputriage.tui import tables
from tests.tui.bundles import pod_object


def facts_for(pod: dict[str, object]) -> tuple[EvidenceSet, object]:
    ev = EvidenceSet([decode(Key.POD, json.dumps(pod).encode(), source="b/pod.json")])
    return ev, build_facts(ev)


def creating_pod() -> dict[str, object]:
    pod = pod_object()
    pod["spec"]["nodeName"] = "gpu-node-7"  # type: ignore[index]
    pod["status"] = {
        "phase": "Pending",
        "containerStatuses": [
            {
                "name": "train",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }
        ],
    }
    return pod


def test_unscheduled_pod_node_evidence_is_not_applicable() -> None:
    _, facts = facts_for(pod_object())
    for key in (Key.KUBELET_LOG, Key.NODE, Key.DMESG):
        r = reading(Evidence(key, Status.ERROR, "ssh: no node to connect to"), facts)
        assert r.state is SourceState.NOT_APPLICABLE
        assert r.why == "the pod is not scheduled to a node yet"
    # Cluster-wide evidence is not excused by the pod's state: a failure stays a failure.
    r = reading(Evidence(Key.NODES, Status.FORBIDDEN, "nodes is forbidden"), facts)
    assert r.state is SourceState.FAILED and r.why == "forbidden: nodes is forbidden"


def test_a_container_that_never_started_has_no_log_to_collect() -> None:
    _, facts = facts_for(creating_pod())
    log = reading(Evidence(Key.CONTAINER_LOG, Status.ERROR, "container is waiting to start"), facts)
    assert log.state is SourceState.NOT_APPLICABLE
    assert log.why == "no container has started yet (ContainerCreating)"
    prev = reading(Evidence(Key.CONTAINER_LOG_PREVIOUS, Status.UNAVAILABLE, "x"), facts)
    assert prev.state is SourceState.NOT_APPLICABLE
    # The pod is scheduled: its node's journal is expected, so its failure is a failure.
    kubelet = reading(Evidence(Key.KUBELET_LOG, Status.TIMEOUT, "ssh timed out"), facts)
    assert kubelet.state is SourceState.FAILED


def test_not_collected_and_ok_and_collecting() -> None:
    _, facts = facts_for(creating_pod())
    assert (
        reading(Evidence(Key.QUOTA, Status.UNAVAILABLE, "not in the bundle"), facts).state
        is SourceState.NOT_COLLECTED
    )
    assert reading(Evidence(Key.POD, Status.OK), facts).state is SourceState.OK
    assert (
        reading(Evidence(Key.POD, Status.OK), facts, pending=True).state is SourceState.COLLECTING
    )
    assert (
        reading(Evidence(Key.CONTAINER_LOG, Status.ERROR, "boom"), None).state is SourceState.FAILED
    )  # without pod facts nothing is excused


def test_sources_tab_colours_only_failures(tmp_path: Path) -> None:
    ev, facts = facts_for(pod_object())
    ev = ev.with_evidence(
        Evidence(Key.KUBELET_LOG, Status.ERROR, "no node"),
        Evidence(Key.NODES, Status.TIMEOUT, "10 s"),
        Evidence(Key.QUOTA, Status.UNAVAILABLE, "not in the bundle"),
    )
    rows = {r.cells[0]: r for r in tables.sources_table(facts, ev, frozenset(), frozenset()).rows}
    assert rows["kubelet"].cells[1:3] == (
        "not applicable",
        "the pod is not scheduled to a node yet",
    )
    assert rows["kubelet"].tone == ""
    assert rows["nodes"].cells[1] == "failed: timeout" and rows["nodes"].tone == "error"
    assert rows["quota"].cells[1] == "not collected" and rows["quota"].tone == ""


def _owned_by(pod: dict[str, object], kind: str) -> dict[str, object]:
    meta = pod["metadata"]
    assert isinstance(meta, dict)
    meta["ownerReferences"] = [{"kind": kind, "name": "owner", "controller": True}]
    return pod


def test_candidate_nodes_and_job_pods_apply_only_where_they_can_exist() -> None:
    _, scheduled = facts_for(_owned_by(creating_pod(), "ReplicaSet"))
    candidates = reading(Evidence(Key.CANDIDATES, Status.UNAVAILABLE, "on a node"), scheduled)
    assert candidates.state is SourceState.NOT_APPLICABLE
    assert "gpu-node-7" in candidates.why
    jobs = reading(Evidence(Key.JOB_PODS, Status.UNAVAILABLE, "one pod"), scheduled)
    assert jobs.state is SourceState.NOT_APPLICABLE
    # A Pending pod: its candidate nodes are expected, so not reading them is a gap.
    _, pending = facts_for(pod_object())
    gap = reading(Evidence(Key.CANDIDATES, Status.UNAVAILABLE, "--nodes 0"), pending)
    assert gap.state is SourceState.NOT_COLLECTED
    # A job's pod triaged alone: its peers could have been read (KIND/NAME), so it is a gap.
    for kind in ("Job", "PyTorchJob"):
        _, worker = facts_for(_owned_by(creating_pod(), kind))
        peers = reading(Evidence(Key.JOB_PODS, Status.UNAVAILABLE, "one pod"), worker)
        assert peers.state is SourceState.NOT_COLLECTED, kind


def test_reports_leave_out_what_does_not_apply_and_say_the_state_of_every_source() -> None:
    from gputriage.playbook.engine import walk
    from gputriage.playbook.loader import load_playbooks
    from gputriage.report.render import render

    pod = _owned_by(creating_pod(), "ReplicaSet")
    evidence = EvidenceSet(
        [
            decode(Key.POD, json.dumps(pod).encode(), source="b/pod.json"),
            Evidence(Key.CANDIDATES, Status.UNAVAILABLE, "the pod is on a node", ""),
            Evidence(Key.JOB_PODS, Status.UNAVAILABLE, "the target is one pod", ""),
            Evidence(Key.KUBELET_LOG, Status.TIMEOUT, "ssh timed out", ""),
        ]
    )
    facts = build_facts(evidence)
    transcript = walk(load_playbooks(user_config=False), facts, {}, {})
    doc = json.loads(render("json", "", "", evidence, facts, transcript, []))
    states = {s["key"]: s["state"] for s in doc["sources"]}
    assert states["candidate-nodes"] == states["job-pods"] == "not applicable"
    assert states["kubelet"] == "failed" and states["pod"] == "ok"
    unreadable = {s["key"] for s in doc["unreadable"]}
    assert "kubelet" in unreadable
    assert not unreadable & {"candidate-nodes", "job-pods", "pod"}
    md = render("markdown", "", "", evidence, facts, transcript, [])
    could_not_see = md.split("## What gputriage could not see", 1)[1]
    assert "ssh timed out" in could_not_see and "the target is one pod" not in could_not_see
