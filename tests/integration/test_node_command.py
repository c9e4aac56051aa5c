"""``gputriage node`` against the HTTPS test API (a generated cluster with a lost-card node)
and a real sshd acting as that node (tests/sshd.py), and from a node bundle."""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from gputriage.cli import main
from gputriage.options import TriageOptions
from gputriage.pipeline import node_after, node_triage
from gputriage.scan.nodewalk import NodeBundleSession
from gputriage.session import BundleSession
from gputriage.tui.app import TriageApp, playbook_walker
from gputriage.tui.launch import run_triage
from tests.kubeapi import KubeAPI
from tests.kubeapi.generate import LOST_NODE, generate
from tests.sshd import SshLab
from tests.tui.harness import settle
from tests.walkfork import cli_report

pytestmark = pytest.mark.integration

SCENARIOS = Path(__file__).resolve().parents[2] / "gputriage" / "scenarios"


@pytest.fixture
def api() -> Iterator[KubeAPI]:
    cluster, _ = generate(60, 300, seed=5, now=time.time())
    with KubeAPI(cluster) as api:
        yield api
        assert not api.mutations()


def test_live_node_walk_over_the_api_and_ssh(
    api: KubeAPI,
    lab: SshLab,
    tmp_path: Path,
    dials: list[tuple[str, int]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = api.write_kubeconfig(tmp_path / "kubeconfig")
    rc = main(
        [
            "node",
            LOST_NODE,
            "--kubeconfig",
            str(config),
            "--ssh-config",
            str(lab.config),
            "--known-hosts",
            str(lab.known_hosts),
            "--report",
            "json",
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 0, err
    report = json.loads(out)
    assert report["target"]["node"] == LOST_NODE and report["target"]["pod"] == ""
    assert report["target"]["session"] == f"context test (node {LOST_NODE})"
    finding = report["findings"][0]
    assert finding["id"] == "lost.gpu-fallen-off-bus"
    assert any("NVRM: Xid (PCI:0000:3b:00): 79" in e["text"] for e in finding["evidence"])
    assert report["walk"][0]["id"] == "lost-card/reachable"

    sources = {s["key"]: s for s in report["sources"]}
    assert sources["pod"]["status"] == "unavailable"
    assert sources["pod"]["detail"] == f"no pod: this is the walk of node {LOST_NODE}"
    for key in (
        "node",
        "node-events",
        "node-pods",
        "device-plugin",
        "runtimeclasses",
        "kubelet",
        "dmesg",
        "nvidia-smi",
        "lsmod",
        "containerd-config",
    ):
        assert sources[key]["status"] == "ok", (key, sources[key])
    assert sources["dmesg"]["source"].startswith("ssh ")
    assert sources["node"]["source"] == f"GET /api/v1/nodes/{LOST_NODE}"
    assert (
        "device-plugin pod gpu-operator/nvidia-device-plugin-00001"
        in sources["device-plugin"]["detail"]
    )

    inventory = report["inventory"]
    assert inventory["node"] == LOST_NODE
    assert inventory["capacity"] == {"nvidia.com/gpu": 8}
    assert inventory["allocatable"] == {"nvidia.com/gpu": 7}
    assert inventory["gpus_source"] == "xml"
    assert [(g["pci"], g["uuid"]) for g in inventory["gpus"]] == [
        ("0000:3B:00.0", "GPU-4a1b7c2e-9d3f-5e6a-8b0c-1d2e3f4a5b6c")
    ]

    paths = [r.path for r in api.requests]
    assert {r.method for r in api.requests} == {"GET"}
    assert f"/api/v1/nodes/{LOST_NODE}" in paths
    assert not any("node/" in p or p.startswith("/api/v1/namespaces/default/pods") for p in paths)
    node_pods = [
        r
        for r in api.requests
        if r.path == "/api/v1/pods" and r.param("fieldSelector") == f"spec.nodeName={LOST_NODE}"
    ]
    assert node_pods and all(r.param("limit") == "500" for r in node_pods)
    assert any("journalctl" in cmd or "dmesg" in cmd for cmd in lab.node.commands())
    assert dials and {host for host, _ in dials} == {"127.0.0.1"}


@pytest.mark.skipif(sys.platform != "linux", reason="the walk forks on Linux only")
def test_live_node_walk_forks_its_walk_and_reports_what_the_walk_here_reports(
    api: KubeAPI, lab: SshLab, tmp_path: Path
) -> None:
    """``gputriage node`` from a fresh process: the node's walk (node facts, the GPU
    inventory) runs in the forked child, with the same report as in process."""
    config = api.write_kubeconfig(tmp_path / "kubeconfig")
    args = ["node", LOST_NODE, "--kubeconfig", str(config), "--ssh-config", str(lab.config)]
    args += ["--known-hosts", str(lab.known_hosts)]
    root = Path(__file__).resolve().parents[2]
    rc_fork, err_fork, forked = cli_report(args, tmp_path / "fork.json", root)
    rc_here, err_here, here = cli_report(args, tmp_path / "here.json", root, GPUTRIAGE_NO_FORK="1")
    assert "walked in child: True" in err_fork, err_fork
    assert "walked in child" not in err_here, err_here
    assert rc_fork == rc_here == 0
    assert forked["findings"][0]["id"] == "lost.gpu-fallen-off-bus"
    assert forked["inventory"]["node"] == LOST_NODE
    assert forked == here


def test_unknown_node_suggests_close_names(
    api: KubeAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = api.write_kubeconfig(tmp_path / "kubeconfig")
    rc = main(
        ["node", "gpu-node-1x", "--kubeconfig", str(config), "--ssh", "off", "--report", "json"]
    )
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert 'node not found: node "gpu-node-1x" not found. Did you mean gpu-node-1' in err


def node_bundle(tmp_path: Path) -> Path:
    out = tmp_path / "node-bundle"
    shutil.copytree(SCENARIOS / "lost-xid79", out)
    for name in ("pod.json", "events.json", "container.log"):
        (out / name).unlink()
    return out


def test_node_bundle_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = node_bundle(tmp_path)
    rc = main(["node", "gpu-h100-07", "--from", str(bundle), "--report", "md"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert (
        "**Verdict:** 🟥 A GPU fell off the bus (Xid 79) (`lost.gpu-fallen-off-bus`, "
        "critical, certain)" in out
    )
    assert "## GPU inventory" in out
    assert "gpu-h100-07: NVIDIA-H100-80GB-HBM3, 79 GiB; label count 8, advertised 8" in out
    assert "allocatable/capacity: nvidia.com/gpu 7/8" in out

    rc = main(["node", "gpu-h100-99", "--from", str(bundle), "--report", "json"])
    assert rc == 2
    assert "holds node gpu-h100-07, not gpu-h100-99" in capsys.readouterr().err


async def test_node_walk_in_the_triage_tui(tmp_path: Path) -> None:
    session = NodeBundleSession(node_bundle(tmp_path), "gpu-h100-07")
    triage = node_triage("gpu-h100-07", TriageOptions())
    app = TriageApp(
        session,
        walker_factory=partial(playbook_walker, (), triage.entry),
        facts_builder=triage.build_facts,
        notes_path=tmp_path / "notes.json",
        export_dir=tmp_path / "out",
    )
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(pilot, app)
        assert app.facts is not None and app.facts["node"].values["name"] == "gpu-h100-07"
        assert app.facts.target.node == "gpu-h100-07"  # the node walk's facts builder
        assert not app.facts["pod"].known
        assert app.transcript is not None and app.transcript.entry == "lost-card"
        assert app.transcript.entry_reason.startswith(
            "no pod to triage (gputriage node): the node's kernel log"
        )
        assert app.transcript.findings[0].id == "lost.gpu-fallen-off-bus"


async def test_triage_node_from_a_pod_walk_that_blames_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = BundleSession(SCENARIOS / "lost-xid79")
    app = TriageApp(
        session,
        walker_factory=playbook_walker,
        notes_path=tmp_path / "n.json",
        export_dir=tmp_path / "out",
    )
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(pilot, app)
        assert app.transcript is not None
        assert app.transcript.findings[0].id == "lost.gpu-fallen-off-bus"
        await pilot.press("N")
    assert app.next_node == "gpu-h100-07"

    # the node walk replays the same bundle (no cluster behind a bundle or a demo)
    launched: list[tuple[str, str]] = []

    def run_app(self: TriageApp) -> None:
        launched.append(
            (self.session.description, self.facts_builder.__name__ if self.facts_builder else "")
        )

    monkeypatch.setattr(TriageApp, "run", run_app)
    following = node_after(session, app.next_node, TriageOptions())
    assert (following.kind, following.name) == ("node", "gpu-h100-07")
    assert run_triage(following, TriageOptions()) == 0
    assert launched == [(f"node bundle {SCENARIOS / 'lost-xid79'}", "_node_facts")]


async def test_triage_node_refused_when_the_verdict_is_not_the_nodes(tmp_path: Path) -> None:
    app = TriageApp(
        BundleSession(SCENARIOS / "oom-time-sliced"),
        walker_factory=playbook_walker,
        notes_path=tmp_path / "n.json",
        export_dir=tmp_path / "out",
    )
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(pilot, app)
        assert app.transcript is not None
        assert not app.transcript.findings[0].id.startswith(("lost.", "node."))
        await pilot.press("N")
        await pilot.pause()
        assert app.is_running and app.next_node == ""
