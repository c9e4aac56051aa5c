"""Typed options: the command line becomes frozen dataclasses once, with one set of defaults;
the pipeline describes every kind of walk with them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gputriage.cli import build_parser
from gputriage.commands.options import triage_options_from_args
from gputriage.errors import GputriageError
from gputriage.options import (
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_SINCE,
    ClusterAccess,
    NodeAccess,
    ReportOptions,
    TriageOptions,
    WalkOptions,
)
from gputriage.pipeline import (
    EXIT_FINDING,
    Triage,
    node_after,
    node_triage,
    pod_triage,
)
from gputriage.report.notes import default_notes_path
from gputriage.session import BundleSession

SCENARIOS = Path(__file__).resolve().parents[2] / "gputriage" / "scenarios"


def options(*argv: str) -> TriageOptions:
    return triage_options_from_args(build_parser().parse_args(list(argv)))


@pytest.mark.parametrize("command", [["triage", "trainer-0"], ["node", "gpu-7"]])
def test_no_flags_give_the_dataclass_defaults(command: list[str]) -> None:
    """The parser's defaults and the dataclasses' are the same ones (gputriage/options.py)."""
    assert options(*command) == TriageOptions()
    assert (NodeAccess().since, ClusterAccess().request_timeout) == (
        DEFAULT_SINCE,
        DEFAULT_REQUEST_TIMEOUT,
    )


def test_every_flag_lands_in_its_field() -> None:
    got = options(
        "triage",
        "deploy/llm",
        "-n",
        "ml",
        "--context",
        "prod",
        "--kubeconfig",
        "k",
        "--request-timeout",
        "3",
        "--ssh",
        "off",
        "--ssh-config",
        "c",
        "--ssh-user",
        "sre",
        "--node-address",
        "gpu-7=jump",
        "--known-hosts",
        "kh",
        "--accept-new-host-key",
        "--sudo",
        "--since",
        "30m",
        "--playbooks",
        "pb",
        "--notes",
        "n.md",
        "--report",
        "json",
        "-o",
        "out.json",
        "--answer",
        "oom-cuda/params=7e9",
        "--override",
        "triage/phase=oom",
        "--from",
        "b",
    )
    assert got.cluster == ClusterAccess("ml", "prod", "k", 3.0)
    assert got.node == NodeAccess(
        ssh=False,
        ssh_config="c",
        ssh_user="sre",
        node_addresses={"gpu-7": "jump"},
        known_hosts="kh",
        accept_new_host_key=True,
        sudo=True,
        since="30m",
    )
    assert got.walk == WalkOptions((Path("pb"),), Path("n.md"))
    assert got.report == ReportOptions(
        "json", Path("out.json"), {"oom-cuda/params": "7e9"}, {"triage/phase": "oom"}
    )
    assert got.bundle == Path("b")
    assert options("triage", "p", "--local").node.local


def test_options_are_frozen_all_the_way_down() -> None:
    got = options("triage", "p", "--node-address", "a=b", "--report", "md")
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.cluster.namespace = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        got.node.node_addresses["c"] = "d"  # type: ignore[index]
    assert got.report is not None
    with pytest.raises(TypeError):
        got.report.answers["s"] = "v"  # type: ignore[index]


def test_malformed_pairs_fail_before_anything_runs() -> None:
    with pytest.raises(GputriageError, match="--answer expects STEP=VALUE"):
        options("triage", "p", "--report", "md", "--answer", "nope")
    with pytest.raises(GputriageError, match="--node-address wants NODE=HOST"):
        options("node", "n", "--node-address", "nope")


def test_one_triage_shape_for_pods_workloads_and_nodes(tmp_path: Path) -> None:
    opts = TriageOptions(bundle=SCENARIOS / "lost-xid79")
    pod = pod_triage("llama-pretrain-worker-3", opts)
    owner, node = pod_triage("deploy/x", opts), node_triage("n", opts)
    assert [t.kind for t in (pod, owner, node)] == ["pod", "owner", "node"]
    assert {t.entry for t in (pod, owner, node)} == {None}  # the playbooks' routes choose
    assert pod.notes_path("ctx") is None  # the pod's notes path comes from the facts
    assert node.notes_path("ctx") == default_notes_path("ctx", "node", "n")
    assert node.notes_path("") == default_notes_path("bundle", "node", "n")
    session = pod.open_session()
    assert isinstance(session, BundleSession) and session.path == SCENARIOS / "lost-xid79"
    assert isinstance(owner.open_session(), BundleSession)  # any pod of a workload
    # a pod name the bundle does not hold is refused, unless the name is not the SRE's (demo)
    with pytest.raises(GputriageError, match="holds pod ml-prod/llama-pretrain-worker-3"):
        pod_triage("other-pod", opts).open_session()
    assert pod_triage("lost-xid79", opts, check_bundle=False).open_session() is not None
    # a node blamed by a bundle's walk is walked from the same bundle
    after = node_after(session, "gpu-h100-07", TriageOptions())
    assert after.kind == "node" and getattr(after.open_session(), "path", None) == session.path


def test_the_headless_runner_serves_a_node_walk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import shutil

    from gputriage.pipeline import run_headless

    bundle = tmp_path / "node"
    shutil.copytree(SCENARIOS / "lost-xid79", bundle)
    for name in ("pod.json", "events.json", "container.log"):
        (bundle / name).unlink()
    opts = TriageOptions(bundle=bundle)
    report = ReportOptions("json")
    assert run_headless(node_triage("gpu-h100-07", opts), opts, report) == EXIT_FINDING
    summary = json.loads(capsys.readouterr().out)
    assert summary["inventory"]["node"] == "gpu-h100-07"  # the node walk's report extras
    assert summary["target"]["node"] == "gpu-h100-07"  # the node walk's facts builder
    assert summary["findings"][0]["id"] == "lost.gpu-fallen-off-bus"


def test_a_walk_is_only_what_it_describes(tmp_path: Path) -> None:
    """A Triage with a fixed entry walks from there, whatever the routes say."""
    from gputriage.pipeline import run_headless

    opts = TriageOptions(bundle=SCENARIOS / "lost-xid79")
    base = pod_triage("llama-pretrain-worker-3", opts)
    fixed = dataclasses.replace(base, entry="node-onboarding")
    out = tmp_path / "s.json"
    assert isinstance(fixed, Triage)
    rc = run_headless(fixed, opts, ReportOptions("json", output=out))
    import json

    summary = json.loads(out.read_text())
    assert rc in (0, 3, 4)
    assert summary["walk"][0]["id"] == "node-onboarding/driver"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["trainer-0", "-n", "ml"], ["triage", "trainer-0", "-n", "ml"]),
        # kubectl hands a plugin its arguments as typed: `kubectl gputriage -n ml trainer-0`
        (["-n", "ml", "trainer-0"], ["triage", "-n", "ml", "trainer-0"]),
        (
            ["--context", "prod", "-n", "ml", "deploy/x"],
            ["triage", "--context", "prod", "-n", "ml", "deploy/x"],
        ),
        (["scan", "-A"], ["scan", "-A"]),
        (["xid", "79"], ["xid", "79"]),
        (["--version"], ["--version"]),
        (["-h"], ["-h"]),
        ([], []),
    ],
)
def test_a_pod_or_a_leading_option_means_triage(argv: list[str], expected: list[str]) -> None:
    from gputriage.cli import _normalise

    assert _normalise(argv) == expected


def test_options_before_the_pod_reach_the_triage(tmp_path: Path) -> None:
    from gputriage.cli import main

    out = tmp_path / "r.json"
    bundle = SCENARIOS / "lost-xid79"
    argv = ["-n", "ml-prod", "llama-pretrain-worker-3", "--from", str(bundle)]
    assert main([*argv, "--report", "json", "-o", str(out)]) == EXIT_FINDING
    assert '"lost.gpu-fallen-off-bus"' in out.read_text()
