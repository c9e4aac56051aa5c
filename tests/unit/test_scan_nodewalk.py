"""The node walk's pure parts: node bundles, the playbook routes that choose its entry, the walk
over the shipped playbooks, and which node a pod walk's finding blames."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from gputriage.errors import GputriageError
from gputriage.evidence.bundle import read_bundle
from gputriage.evidence.model import Key, Status
from gputriage.facts.build import build_facts
from gputriage.playbook.engine import walk
from gputriage.playbook.loader import load_playbooks
from gputriage.playbook.model import PlaybookSet
from gputriage.playbook.transcript import Finding, Fix, Transcript
from gputriage.scan.nodewalk import (
    NODE_WALK_KEYS,
    NodeBundleSession,
    blamed_node,
    node_facts,
    read_node_bundle,
)

SCENARIOS = Path(__file__).resolve().parents[2] / "gputriage" / "scenarios"


def node_bundle(tmp_path: Path, scenario: str) -> Path:
    """A scenario without its pod: what `gputriage node` reads."""
    out = tmp_path / scenario
    shutil.copytree(SCENARIOS / scenario, out)
    for name in ("pod.json", "events.json", "container.log", "container-previous.log"):
        (out / name).unlink(missing_ok=True)
    return out


def test_node_bundle_reads_node_keys_and_targets_the_node(tmp_path: Path) -> None:
    bundle = node_bundle(tmp_path, "lost-xid79")
    evidence = read_node_bundle(bundle)
    assert tuple(evidence) == NODE_WALK_KEYS and Key.POD not in evidence
    assert evidence[Key.NODE].ok and evidence[Key.DMESG].ok
    assert evidence[Key.LSMOD].status is Status.UNAVAILABLE
    assert evidence[Key.LSMOD].detail == (
        "lsmod.txt is not in the bundle (loaded kernel modules (lsmod) was not collected)"
    )
    facts = node_facts(evidence)
    assert facts.target.node == "gpu-h100-07" and facts.target.pod == ""
    assert not facts["pod"].known and facts["node"].known
    assert facts["node"].values["is_pod_node"] is False  # there is no pod


def test_node_bundle_errors(tmp_path: Path) -> None:
    with pytest.raises(GputriageError, match="is not a directory"):
        read_node_bundle(tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(GputriageError, match=r"holds no node\.json or node\.yaml"):
        read_node_bundle(empty)
    session = NodeBundleSession(node_bundle(tmp_path, "lost-xid79"), "gpu-h100-99")
    with pytest.raises(GputriageError, match="holds node gpu-h100-07, not gpu-h100-99"):
        session.collect_all()


def without(playbooks: PlaybookSet, playbook_id: str) -> PlaybookSet:
    return PlaybookSet({b.id: b for b in playbooks if b.id != playbook_id}, playbooks.problems)


def test_routes_choose_the_entry_of_a_node_walk(tmp_path: Path) -> None:
    playbooks = load_playbooks([])
    lost = node_facts(read_node_bundle(node_bundle(tmp_path, "lost-xid79")))
    transcript = walk(playbooks, lost)
    assert transcript.entry == "lost-card"
    assert transcript.entry_reason == (
        "no pod to triage (gputriage node): the node's kernel log "
        "shows a lost or failing GPU (Xid codes 79)"
    )

    calm = node_facts(read_node_bundle(node_bundle(tmp_path, "create-nvidia-uvm-missing")))
    transcript = walk(playbooks, calm)
    assert transcript.entry == "node-onboarding"
    assert transcript.entry_reason.startswith(
        "there is no pod to triage (gputriage node) and no sign of a lost GPU"
    )
    # a missing preferred playbook falls back to the other one, never to the pod router
    assert walk(without(playbooks, "node-onboarding"), calm).entry == "lost-card"
    assert walk(without(playbooks, "lost-card"), lost).entry == "node-onboarding"


def test_each_source_alone_routes_a_node_walk_to_lost_card(tmp_path: Path) -> None:
    """One route per source: an unread source cannot hide another source's sign."""
    playbooks = load_playbooks([])
    bundle = node_bundle(tmp_path, "lost-xid79")
    (bundle / "dmesg.log").unlink()  # the kernel log is not read: the node's own signs remain
    facts = node_facts(read_node_bundle(bundle))
    assert not facts["kernel"].known
    transcript = walk(playbooks, facts)
    assert transcript.entry == "lost-card"
    assert transcript.entry_reason in (
        "no pod to triage (gputriage node): the device plugin marked devices unhealthy",
        "no pod to triage (gputriage node): nvidia-smi shows a lost or failing GPU",
        "no pod to triage (gputriage node): the node advertises fewer GPUs than it has",
    )


def test_walk_of_a_lost_card_node_over_the_shipped_playbooks(tmp_path: Path) -> None:
    playbooks = load_playbooks([])
    assert playbooks.get("lost-card") is not None
    facts = build_facts(read_node_bundle(node_bundle(tmp_path, "lost-xid79")))
    transcript = walk(playbooks, facts)
    assert transcript.entry == "lost-card"
    finding = transcript.findings[0]
    assert finding.id == "lost.gpu-fallen-off-bus" and not finding.undetermined
    assert [str(r) for r in finding.evidence][:1] == [
        "lost-xid79/dmesg.log:12: [Tue Aug 13 10:41:07 2024] NVRM: Xid (PCI:0000:3b:00): 79, "
        "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    ]
    assert "kubectl cordon gpu-h100-07" in finding.fix.commands


def test_node_bundle_session_streams_every_node_key(tmp_path: Path) -> None:
    session = NodeBundleSession(node_bundle(tmp_path, "oom-time-sliced"), "gpu-t4-03")

    async def keys() -> list[Key]:
        return [ev.key async for ev in session.stream()]

    assert asyncio.run(keys()) == list(NODE_WALK_KEYS) == list(session.keys())
    assert session.description == f"node bundle {session.path}"


def _transcript(*ids: str, undetermined: bool = False) -> Transcript:
    return Transcript(
        entry="triage",
        findings=tuple(Finding(i, "high", i, "", Fix(""), undetermined=undetermined) for i in ids),
    )


def test_blamed_node_only_for_node_findings_of_a_pod_walk() -> None:
    facts = build_facts(read_bundle(SCENARIOS / "lost-xid79"))
    assert facts.target.pod and facts.target.node == "gpu-h100-07"
    assert blamed_node(facts, _transcript("lost.gpu-fallen-off-bus")) == "gpu-h100-07"
    assert blamed_node(facts, _transcript("node.driver-not-loaded")) == "gpu-h100-07"
    assert blamed_node(facts, _transcript("oom.cuda-out-of-memory")) == ""
    assert blamed_node(facts, _transcript("lost.x", undetermined=True)) == ""
    assert blamed_node(None, _transcript("lost.x")) == ""
