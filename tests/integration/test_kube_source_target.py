"""What the user typed becomes one pod, or an error that helps (before any walk starts)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from gputriage.cli import main
from gputriage.errors import GputriageError
from gputriage.evidence.live import LiveSession
from gputriage.evidence.model import Key
from tests.kubeapi import Cluster, KubeAPI
from tests.kubeapi import cluster as c
from tests.live import open_live

pytestmark = pytest.mark.integration

Args = Callable[..., argparse.Namespace]


def resolve(live_args: Args, *argv: str) -> LiveSession:
    session = open_live(live_args(*argv))
    session.close()
    return session


def failure(live_args: Args, *argv: str) -> GputriageError:
    with pytest.raises(GputriageError) as info:
        open_live(live_args(*argv))
    return info.value


def test_a_mistyped_pod_gets_close_names_and_other_namespaces(live_args: Args) -> None:
    err = failure(live_args, "trainer-1")
    assert err.title == "pod not found"
    assert err.message.splitlines() == [
        'pod "trainer-1" not found in namespace "ml".',
        "  did you mean: trainer-0?",
    ]
    err = failure(live_args, "trainer-0", "-n", "default")
    assert (
        'a pod named "trainer-0" exists in namespace "ml": gputriage trainer-0 -n ml' in err.message
    )
    assert 'exists in namespace "ml-dev": gputriage trainer-0 -n ml-dev' in err.message


def test_a_workload_name_given_as_a_pod_is_pointed_at(live_args: Args) -> None:
    err = failure(live_args, "llm-serve")
    lines = err.message.splitlines()
    assert lines[1] == (
        "  did you mean: llm-serve-6d5f7c9b8-2xkqp, llm-serve-6d5f7c9b8-7hfzc, "
        "llm-serve-6d5f7c9b8-q9wrt?"
    )
    assert lines[2] == "  llm-serve is a Deployment: gputriage deploy/llm-serve -n ml"
    assert (
        "trainer is a StatefulSet: gputriage sts/trainer -n ml"
        in failure(live_args, "trainer").message
    )


def test_a_deployment_resolves_to_its_worst_pod(live_args: Args) -> None:
    session = resolve(live_args, "deploy/llm-serve")
    assert session.pod == "llm-serve-6d5f7c9b8-7hfzc"
    assert session.description == (
        "context test (ml/llm-serve-6d5f7c9b8-7hfzc via deploy/llm-serve)"
    )
    assert session.notice == (
        "deploy/llm-serve has 3 pods: llm-serve-6d5f7c9b8-7hfzc (CrashLoopBackOff), "
        "llm-serve-6d5f7c9b8-q9wrt (Pending, Unschedulable), llm-serve-6d5f7c9b8-2xkqp "
        "(Running). Triaging llm-serve-6d5f7c9b8-7hfzc, the one in the worst state."
    )
    assert resolve(live_args, "deployments/llm-serve").pod == "llm-serve-6d5f7c9b8-7hfzc"
    assert resolve(live_args, "rs/llm-serve-6d5f7c9b8").pod == "llm-serve-6d5f7c9b8-7hfzc"


def test_pending_beats_running_and_single_pods_need_no_notice(
    kube_cluster: Cluster, live_args: Args
) -> None:
    crash = kube_cluster.get("", "pods", "ml", "llm-serve-6d5f7c9b8-7hfzc")
    assert crash is not None
    kube_cluster.remove(crash)
    assert resolve(live_args, "deploy/llm-serve").pod == "llm-serve-6d5f7c9b8-q9wrt"
    for ref, pod in (
        ("sts/trainer", "trainer-0"),
        ("statefulset/trainer", "trainer-0"),
        ("job/finetune", "finetune-x8k2p"),
        ("pod/trainer-0", "trainer-0"),
        ("po/trainer-0", "trainer-0"),
    ):
        session = resolve(live_args, ref)
        assert (session.pod, session.notice) == (pod, "")
    ds = resolve(live_args, "ds/nvidia-device-plugin-daemonset", "-n", "gpu-operator")
    assert ds.pod == "nvidia-device-plugin-daemonset-4e7f7"


def test_a_deployment_blocked_by_quota_says_why(live_args: Args) -> None:
    err = failure(live_args, "deploy/quota-demo")
    assert err.title == "no pods"
    assert err.message.splitlines() == [
        'deployment "quota-demo" in namespace "ml" has no pods, so there is no pod to triage.',
        "  its controllers reported:",
        f"    replicaset/quota-demo-654649bb45 FailedCreate: {c.QUOTA_REJECTION}",
    ]


def test_unknown_kinds_and_missing_workloads(live_args: Args) -> None:
    err = failure(live_args, "svc/llm-serve")
    assert err.title == "bad target" and "cannot triage a 'svc'" in err.message
    err = failure(live_args, "deploy/llm-srve")
    assert err.title == "deployment not found"
    assert err.message.splitlines()[1] == "  did you mean: deploy/llm-serve?"
    assert failure(live_args, "deploy/").title == "bad target"


def test_the_cli_prints_the_error_and_exits_2(
    kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "collect",
            "deploy/quota-demo",
            "-o",
            str(kubeconfig.parent / "out"),
            "--kubeconfig",
            str(kubeconfig),
            "--ssh",
            "off",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith('gputriage: error: no pods: deployment "quota-demo"')
    assert "exceeded quota: gpu-quota" in err
    assert not (kubeconfig.parent / "out").exists()


def test_corpus_quota_case_surfaces_the_real_rejection(corpus_dir: Path, tmp_path: Path) -> None:
    case = yaml.safe_load(
        (corpus_dir / "k8s/cases/pending-021-quota-exceeded-inference-gpu-quota.yaml").read_text()
    )
    deploy = c.deployment("quota-exceed-inference-demo", "inference")
    cl = Cluster().add(c.namespace("inference"), deploy)
    for i, e in enumerate(case["events"]):
        kind, name = e["from"].split("/")
        rs = c.replicaset(
            name, "inference", owner=deploy, labels={"app": "quota-exceed-inference-demo"}
        )
        assert kind == "replicaset"
        cl.add(
            rs,
            c.event(
                rs,
                e["reason"],
                e["message"],
                type=e["type"],
                minutes=i,
                component="replicaset-controller",
            ),
        )
    with KubeAPI(cl) as api:
        config = api.write_kubeconfig(tmp_path / "kc")
        from gputriage.cli import build_parser

        args = build_parser().parse_args(
            [
                "triage",
                "deploy/quota-exceed-inference-demo",
                "-n",
                "inference",
                "--kubeconfig",
                str(config),
                "--ssh",
                "off",
            ]
        )
        with pytest.raises(GputriageError) as info:
            open_live(args)
    reported = info.value.message.splitlines()[2:]
    assert len(reported) == 2  # two FailedCreate events, newest first, each once
    for e in case["events"]:
        assert any(line.endswith(f"FailedCreate: {e['message']}") for line in reported)


def test_corpus_device_plugin_xid_lines_reach_the_evidence(
    corpus_dir: Path, tmp_path: Path
) -> None:
    case = yaml.safe_load(
        (corpus_dir / "k8s/cases/lost-001-k8sdp-189-xid69-device-unhealthy.yaml").read_text()
    )
    node = c.gpu_node("gpu-a", gpus=4, allocatable=3)
    victim = c.pod("victim", "default", node="gpu-a", statuses=[c.running("main")])
    plugin = c.device_plugin_pod(
        "gpu-a",
        namespace="kube-system",
        name="nvidia-dp-x7",
        labels={"name": "nvidia-device-plugin-ds"},
        container_name="nvidia-device-plugin-ctr",
    )
    cl = Cluster(dra_version=None).add(node, victim, plugin)
    cl.add_log(
        plugin,
        "".join(f"{line}\n" for line in case["device_plugin_log"]),
        container="nvidia-device-plugin-ctr",
    )
    with KubeAPI(cl) as api:
        config = api.write_kubeconfig(tmp_path / "kc", current="")
        from gputriage.cli import build_parser

        args = build_parser().parse_args(
            [
                "triage",
                "victim",
                "-n",
                "default",
                "--kubeconfig",
                str(config),
                "--ssh",
                "off",
                "--node-address",
                "gpu-a=127.0.0.1",
            ]
        )
        session = open_live(args)
        ev = session.collect_all()
        session.close()
    log = ev[Key.DEVICE_PLUGIN_LOG]
    assert log.lines() == case["device_plugin_log"]
    assert log.find_line("XidCriticalError: Xid=69").line == 1
    assert "kube-system/nvidia-dp-x7" in log.detail
