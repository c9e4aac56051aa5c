"""Candidate nodes of an unscheduled pod: which GPU nodes it could land on, which of them are
read (troubled first, at most --nodes), the ``candidates`` facts built from their evidence,
and the bundle form (``candidate-nodes.json`` + ``nodes/<name>/``)."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from gputriage.evidence.bundle import decode, read_bundle
from gputriage.evidence.candidate_bundle import safe_node_dir
from gputriage.evidence.candidates import (
    NODE_EVIDENCE,
    collect_candidates,
    node_evidence,
    select_candidates,
)
from gputriage.evidence.collect import write_bundle
from gputriage.evidence.model import Evidence, Key, Status
from gputriage.evidence.sources import NodeQuery
from gputriage.facts.build import build_facts
from tests.kubeapi import cluster as c
from tests.sshd import KERNEL_LOG, NVIDIA_SMI_XML

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "tests" / "fixtures" / "k8s" / "pending-candidate-xid79"
LOST_UUID = "GPU-4a1b7c2e-9d3f-5e6a-8b0c-1d2e3f4a5b6c"


def _ev(key: Key, obj: Any) -> Evidence:
    return decode(key, json.dumps(obj).encode(), source=f"test/{key.value}")


def _nodes(*nodes: dict[str, Any]) -> Evidence:
    return _ev(Key.NODES, {"kind": "NodeList", "apiVersion": "v1", "items": list(nodes)})


def _pending(gpus: int = 8, **kw: Any) -> Evidence:
    return _ev(
        Key.POD, c.pod("bigtrain-0", gpus=gpus, unschedulable="0/3 nodes are available", **kw)
    )


def test_selection_keeps_the_nodes_the_pod_could_land_on_troubled_first() -> None:
    nodes = _nodes(
        c.gpu_node("a-healthy"),
        c.gpu_node("b-lost-one", allocatable=7),
        c.gpu_node("c-notready", ready=False),
        c.gpu_node("d-tainted", allocatable=6, taints=[c.taint("nvidia.com/gpu", value="x")]),
        c.gpu_node("e-cordoned", allocatable=6, unschedulable=True),
        c.gpu_node("f-other-pool", allocatable=5, labels={"pool": "infer"}),
        c.cpu_node("g-cpu"),
    )
    pod = c.pod("bigtrain-0", gpus=8, unschedulable="0/7 nodes are available")
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "pool", "operator": "NotIn", "values": ["infer"]}
                        ]
                    }
                ]
            }
        }
    }
    sel = select_candidates(_ev(Key.POD, pod), nodes, limit=3)
    assert [(cand.name, cand.reasons) for cand in sel.examine] == [
        (
            "b-lost-one",
            ("nvidia.com/gpu capacity 8 > allocatable 7: 1 device(s) taken out of service",),
        ),
        ("c-notready", ("NotReady",)),
    ]
    why = {s["name"]: s["why"] for s in sel.skipped}
    assert why["a-healthy"] == "a candidate, but the API shows no trouble on it"
    assert why["d-tainted"].startswith("has taints the pod does not tolerate (nvidia.com/gpu=x")
    assert why["e-cordoned"] == "cordoned (spec.unschedulable)"
    assert why["f-other-pool"] == ("does not match the pod's nodeSelector / required node affinity")
    assert "g-cpu" not in why  # not a GPU node at all
    assert (sel.considered, sel.candidates) == (6, 3)


def test_selection_is_bounded_by_the_limit_and_says_what_it_left_out() -> None:
    nodes = _nodes(*(c.gpu_node(f"gpu-{i:02d}", allocatable=7) for i in range(10)))
    sel = select_candidates(_pending(), nodes, limit=2)
    assert [cand.name for cand in sel.examine] == ["gpu-00", "gpu-01"]
    left = [s for s in sel.skipped if s["why"].startswith("beyond --nodes 2")]
    assert len(left) == 8


def test_device_plugin_trouble_makes_a_node_worth_reading() -> None:
    plugin = c.device_plugin_pod("gpu-7")
    plugin["status"]["phase"] = "Pending"
    holders = _ev(
        Key.NODE_PODS,
        {
            "kind": "PodList",
            "apiVersion": "v1",
            "items": [plugin],
            "gputriage": {"scope": "cluster-gpu-pods"},
        },
    )
    sel = select_candidates(_pending(gpus=1), _nodes(c.gpu_node("gpu-7")), holders)
    assert [cand.name for cand in sel.examine] == ["gpu-7"]
    assert sel.examine[0].reasons[0].startswith("device-plugin pod gpu-operator/")


def test_no_selection_without_nodes_or_gpu_request() -> None:
    assert "nodes" in select_candidates(_pending(), Evidence.missing(Key.NODES)).problem
    assert select_candidates(_pending(gpus=0), _nodes(c.gpu_node("x"))).problem == (
        "the pod requests no GPU resource"
    )


class RecordingSource:
    """A node source answering from fixture text; records what it was asked, and from how
    many threads at once."""

    name = "fixture"

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def collect(self, key: Key, query: NodeQuery, timeout: float) -> Evidence:
        with self._lock:
            self.asked.append((query.node, query.address, key.value))
        text = {Key.DMESG: KERNEL_LOG, Key.NVIDIA_SMI: NVIDIA_SMI_XML}.get(key)
        if text is None:
            return Evidence(key, Status.UNAVAILABLE, "not in this fixture")
        return decode(key, text.encode(), source=f"fixture {query.node}: {key.value}")

    def close(self) -> None:
        """Nothing to close."""


def test_collect_reads_only_the_chosen_nodes_at_their_override_address() -> None:
    src = RecordingSource()
    nodes = _nodes(
        c.gpu_node("gpu-1", allocatable=7, address="10.0.0.7"),
        c.gpu_node("gpu-2", address="10.0.0.8"),
    )
    ev = collect_candidates(
        _pending(),
        nodes,
        None,
        node_sources=[src],
        plugin_log=None,
        overrides={"gpu-1": "127.0.0.1"},
        timeout=5,
    )
    assert ev.ok and ev.key is Key.CANDIDATES
    assert sorted(src.asked) == [
        ("gpu-1", "127.0.0.1", k) for k in ("dmesg", "kubelet", "nvidia-smi")
    ]
    document = json.loads(ev.raw)
    assert NODE_EVIDENCE not in document  # the per-node evidence is not in the JSON text
    assert document["items"][0]["sources"]["kubelet"]["status"] == "unavailable"
    assert set(node_evidence(ev)["gpu-1"]) == {"dmesg", "nvidia-smi", "kubelet"}


def test_collect_skips_scheduled_pods_and_nodes_zero() -> None:
    scheduled = _ev(Key.POD, c.pod("t", node="gpu-1", statuses=[c.running("main")]))
    nodes = _nodes(c.gpu_node("gpu-1", allocatable=7))
    for pod, limit, words in (
        (scheduled, 3, "candidate nodes are for pods not scheduled"),
        (_pending(), 0, "--nodes 0"),
    ):
        ev = collect_candidates(
            pod,
            nodes,
            None,
            node_sources=[RecordingSource()],
            plugin_log=None,
            overrides={},
            limit=limit,
        )
        assert ev.status is Status.UNAVAILABLE and words in ev.detail


def test_facts_name_the_node_the_gpu_and_the_xid_from_the_bundle() -> None:
    facts = build_facts(read_bundle(BUNDLE))
    group = facts.groups["candidates"]
    assert group.known
    v = group.values
    assert (v["candidate_count"], v["examined_count"], v["fault_nodes"]) == (1, 1, ["gpu-node-1"])
    first = v["first_fault"]
    assert {
        k: first[k] for k in ("node", "uuid", "pci", "serial", "xid", "immediate_action", "origin")
    } == {
        "node": "gpu-node-1",
        "uuid": LOST_UUID,
        "pci": "0000:3B:00",
        "serial": "1652923017935",
        "xid": 79,
        "immediate_action": "RESTART_BM",
        "origin": "kernel",
    }
    assert first["action"].startswith("Reboot (power-cycle) the node")
    cited = [str(r) for r in group.cites["faults"]]
    assert cited[0].startswith("pending-candidate-xid79/nodes/gpu-node-1/dmesg.log:")
    assert "Xid (PCI:0000:3b:00): 79" in cited[0]
    assert v["not_examined"] == [
        {
            "name": "gpu-node-2",
            "why": "has taints the pod does not tolerate (nvidia.com/gpu=present:NoSchedule)",
        }
    ]


def test_replayed_bundle_concludes_the_candidate_gpu_fault() -> None:
    import io
    from contextlib import redirect_stdout

    from gputriage.cli import main

    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["bigtrain-0", "--from", str(BUNDLE), "--report", "json"])
    report = json.loads(buf.getvalue())
    assert rc == 0 and report["findings"][0]["id"] == "pending.candidate-gpu-fault"
    assert LOST_UUID in report["findings"][0]["summary"]


def test_bundle_round_trip_keeps_every_node_file_and_status(tmp_path: Path) -> None:
    first = read_bundle(BUNDLE)
    out = tmp_path / "again"
    write_bundle(first, out)
    assert sorted(p.name for p in (out / "nodes" / "gpu-node-1").iterdir()) == [
        "device-plugin.log",
        "dmesg.log",
        "kubelet.log",
        "nvidia-smi.xml",
    ]
    again = read_bundle(out)
    a, b = node_evidence(first[Key.CANDIDATES]), node_evidence(again[Key.CANDIDATES])
    assert {n: {k: (e.status, e.raw) for k, e in d.items()} for n, d in a.items()} == {
        n: {k: (e.status, e.raw) for k, e in d.items()} for n, d in b.items()
    }


def test_a_failed_node_source_is_replayed_as_failed(tmp_path: Path) -> None:
    copy = tmp_path / "b"
    shutil.copytree(BUNDLE, copy)
    (copy / "nodes" / "gpu-node-1" / "dmesg.log").unlink()
    doc = json.loads((copy / "candidate-nodes.json").read_text())
    doc["items"][0]["sources"]["dmesg"] = {
        "status": "timeout",
        "detail": "ssh: no answer",
        "source": "ssh gpu-node-1",
        "file": None,
    }
    (copy / "candidate-nodes.json").write_text(json.dumps(doc))
    dmesg = node_evidence(read_bundle(copy)[Key.CANDIDATES])["gpu-node-1"]["dmesg"]
    assert (dmesg.status, dmesg.detail) == (Status.TIMEOUT, "ssh: no answer")


@pytest.mark.parametrize("name", ["../../etc", "a/b", "..", "", "UPPER", "x" * 300, "-a"])
def test_hostile_node_names_never_become_paths(name: str, tmp_path: Path) -> None:
    assert safe_node_dir(name) == ""
    copy = tmp_path / "b"
    shutil.copytree(BUNDLE, copy)
    doc = json.loads((copy / "candidate-nodes.json").read_text())
    doc["items"][0]["name"] = name
    (copy / "candidate-nodes.json").write_text(json.dumps(doc))
    assert node_evidence(read_bundle(copy)[Key.CANDIDATES]) == {}


def test_collect_force_replaces_stale_node_files_only(tmp_path: Path) -> None:
    out = tmp_path / "b"
    stale = out / "nodes" / "gpu-node-9"
    stale.mkdir(parents=True)
    (stale / "dmesg.log").write_text("old\n")
    (out / "nodes" / "gpu-node-1").mkdir()
    (out / "nodes" / "gpu-node-1" / "my-notes.txt").write_text("keep me\n")
    write_bundle(read_bundle(BUNDLE), out, force=True)
    assert not stale.exists()  # its only file was a stale bundle file
    assert (out / "nodes" / "gpu-node-1" / "my-notes.txt").read_text() == "keep me\n"
    assert (out / "nodes" / "gpu-node-1" / "dmesg.log").is_file()


def test_a_fault_only_the_device_plugin_reports_carries_nvidias_action(tmp_path: Path) -> None:
    """No SSH: the candidate's kernel log could not be read, its device-plugin log (API) can."""
    copy = tmp_path / "b"
    shutil.copytree(BUNDLE, copy)
    for name in ("dmesg.log", "nvidia-smi.xml"):
        (copy / "nodes" / "gpu-node-1" / name).unlink()
    doc = json.loads((copy / "candidate-nodes.json").read_text())
    for key in ("dmesg", "nvidia-smi"):
        doc["items"][0]["sources"][key] = {
            "status": "unavailable",
            "file": None,
            "detail": "no node access configured",
            "source": "",
        }
    (copy / "candidate-nodes.json").write_text(json.dumps(doc))
    first = build_facts(read_bundle(copy)).groups["candidates"].values["first_fault"]
    assert (first["origin"], first["uuid"], first["xid"]) == ("device-plugin", LOST_UUID, 79)
    assert first["mnemonic"] == "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"
    assert first["immediate_action"] == "RESTART_BM"
    assert first["action"].startswith("Reboot (power-cycle) the node")
