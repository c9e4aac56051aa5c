"""``gputriage collect``: the bundle it writes reads back into the same evidence and facts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputriage.cli import main
from gputriage.evidence.bundle import read_bundle
from gputriage.evidence.collect import bundle_name, write_bundle
from gputriage.evidence.model import Evidence, EvidenceSet, Key, Status
from gputriage.facts.build import build_facts
from tests.integration.conftest import node_overrides
from tests.kubeapi import KubeAPI
from tests.live import open_live

pytestmark = pytest.mark.integration


def cli_args(kubeconfig: Path, api: KubeAPI, *argv: str) -> list[str]:
    return [
        "collect",
        *argv,
        "--kubeconfig",
        str(kubeconfig),
        "--ssh",
        "off",
        *node_overrides(api.cluster),
    ]


def test_collect_writes_the_bundle_layout(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bundle"
    assert main(cli_args(kubeconfig, kube_api, "trainer-0", "-o", str(out))) == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted(
        [
            "pod.json",
            "events.json",
            "node.json",
            "nodes.json",
            "node-pods.json",
            "node-events.json",
            "quota.json",
            "owner-events.json",
            "runtimeclasses.json",
            "resourceclaims.json",
            "resourceslices.json",
            "deviceclasses.json",
            "device-plugin.log",
            "container.log",
            "container-previous.log",
            "kubelet.log",
            "gpu-operator.json",
            "meta.json",
        ]
    )
    meta = json.loads((out / "meta.json").read_text())
    assert meta["tool"] == "gputriage" and meta["context"] == "test"
    assert meta["target"] == {
        "namespace": "ml",
        "pod": "trainer-0",
        "node": "gpu-node-1",
        "uid": json.loads((out / "pod.json").read_text())["metadata"]["uid"],
    }
    assert set(meta["sources"]) == {k.value for k in Key}
    assert meta["sources"]["events"]["status"] == "ok"
    assert meta["sources"]["events"]["file"] == "events.json"
    assert meta["sources"]["dmesg"]["status"] == "unavailable"
    assert meta["sources"]["dmesg"]["file"] is None
    printed = capsys.readouterr()
    assert f"wrote 17 of {len(Key)} pieces of evidence" in printed.out
    assert "replay: gputriage trainer-0 -n ml --from" in printed.out
    assert "collecting from context test (ml/trainer-0)" in printed.err


def test_replayed_bundle_gives_the_same_evidence_and_facts(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    from gputriage.cli import build_parser

    args = build_parser().parse_args(
        [
            "triage",
            "deploy/llm-serve",
            "--kubeconfig",
            str(kubeconfig),
            "--ssh",
            "off",
            *node_overrides(kube_api.cluster),
        ]
    )
    session = open_live(args)
    live = session.collect_all()
    session.close()
    write_bundle(live, tmp_path / "b", meta={"context": session.context})
    replay = read_bundle(tmp_path / "b")
    for key in Key:
        a, b = live[key], replay[key]
        assert (a.status, a.raw, a.data) == (b.status, b.raw, b.data), key
        if not a.ok:
            assert b.detail == a.detail, key
    assert build_facts(replay).to_context() == build_facts(live).to_context()
    assert build_facts(replay).target.pod == "llm-serve-6d5f7c9b8-7hfzc"


def test_refuses_a_non_empty_directory_unless_forced(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "b"
    out.mkdir()
    (out / "notes.md").write_text("mine")
    (out / "dmesg.log").write_text("stale kernel log from another incident\n")
    (out / "pod.yaml").write_text("kind: Pod\n")
    assert main(cli_args(kubeconfig, kube_api, "trainer-0", "-o", str(out))) == 2
    assert "is not empty" in capsys.readouterr().err
    assert kube_api.requests == []  # refused before touching the cluster
    assert main(cli_args(kubeconfig, kube_api, "trainer-0", "-o", str(out), "--force")) == 0
    assert (out / "notes.md").read_text() == "mine"  # not a bundle file: left alone
    assert not (out / "dmesg.log").exists()  # stale evidence must not pass for current
    assert not (out / "pod.yaml").exists()  # pod.json is preferred but would be shadowed
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]
    replay = read_bundle(out)
    assert replay[Key.DMESG].status is Status.UNAVAILABLE
    assert "only serves the kubelet journal" in replay[Key.DMESG].detail  # from meta.json


def test_collect_from_a_workload_reports_the_choice(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    """The installed entry point, in a fresh interpreter, as an SRE would run it."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputriage",
            "collect",
            "deploy/llm-serve",
            "-o",
            str(tmp_path / "b"),
            "--ssh",
            "off",
            *node_overrides(kube_api.cluster),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "deploy/llm-serve has 3 pods" in result.stderr
    pod = json.loads((tmp_path / "b" / "pod.json").read_text())
    assert pod["metadata"]["name"] == "llm-serve-6d5f7c9b8-7hfzc"
    assert {r.agent.split()[0] for r in kube_api.requests} == {"gputriage/0.1.0"}


def test_bundle_names_follow_the_format() -> None:
    xml = Evidence(Key.NVIDIA_SMI, Status.OK, "", "<?xml", "x", None, "xml")
    text = Evidence(Key.NVIDIA_SMI, Status.OK, "", "No devices were found", "x", None, "text")
    yml = Evidence(Key.POD, Status.OK, "", "kind: Pod", "x", {}, "yaml")
    assert [bundle_name(e) for e in (xml, text, yml)] == [
        "nvidia-smi.xml",
        "nvidia-smi.txt",
        "pod.yaml",
    ]
    assert bundle_name(Evidence(Key.DMESG, Status.OK, "", "x", "", None, "text")) == "dmesg.log"


def test_nvidia_smi_error_text_round_trips(tmp_path: Path) -> None:
    pod = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ml"},
            "spec": {},
        }
    )
    from gputriage.evidence.bundle import decode

    smi = decode(Key.NVIDIA_SMI, b"No devices were found\n", source="ssh n1: nvidia-smi -q -x")
    evidence = EvidenceSet([decode(Key.POD, pod.encode(), source="api"), smi])
    write_bundle(evidence, tmp_path / "b")
    assert (tmp_path / "b" / "nvidia-smi.txt").read_text() == "No devices were found\n"
    assert read_bundle(tmp_path / "b")[Key.NVIDIA_SMI].raw == smi.raw
