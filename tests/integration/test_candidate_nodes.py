"""A Pending pod whose only candidate node lost a GPU, against the local HTTPS API and a real
sshd behind a ProxyJump bastion: the verdict names the node, the GPU, the Xid line and NVIDIA's
action, all cited; ``collect`` writes the node's evidence under ``nodes/<name>/`` and the
replay of that bundle gives the same verdict. The API sees only GETs (conftest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputriage.cli import main
from tests.conftest import require_tool
from tests.kubeapi import Cluster, KubeAPI
from tests.kubeapi import cluster as c
from tests.sshd import NODE_PRIVATE_IP, SshLab

pytestmark = pytest.mark.integration

PENDING = "bigtrain-0"  # asks for 8 GPUs; gpu-node-1 offers 7 of its 8, gpu-node-2 is tainted
LOST_UUID = "GPU-4a1b7c2e-9d3f-5e6a-8b0c-1d2e3f4a5b6c"  # the GPU at 0000:3b:00 (sshd fixture)


def only_candidate_lost_a_gpu(cl: Cluster) -> None:
    """gpu-node-1 (8 GPUs, 7 allocatable: the sshd fixture's kernel log has Xid 79 for one of
    them) holds no GPU pod; gpu-node-2 carries a taint the pending pod does not tolerate."""
    for name in ("trainer-0", "llm-serve-6d5f7c9b8-2xkqp", "llm-serve-6d5f7c9b8-7hfzc"):
        obj = cl.get("", "pods", "ml", name)
        assert obj is not None
        cl.remove(obj)
    message = (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match "
        "Pod's node affinity/selector, 1 node(s) had untolerated taint {nvidia.com/gpu: "
        "present}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for "
        "scheduling."
    )
    # The plugin names the same GPU the kernel log does (fixture consistency).
    plugin = cl.get("", "pods", "gpu-operator", "nvidia-device-plugin-daemonset-4e7f7")
    assert plugin is not None
    cl.add_log(
        plugin,
        c.XID_PLUGIN_LOG.replace("GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8", LOST_UUID),
        container="nvidia-device-plugin",
    )
    pod = c.pod(PENDING, gpus=8, unschedulable=message)
    cl.add(pod, c.event(pod, "FailedScheduling", message, count=5, minutes=12))


@pytest.fixture
def kube_cluster() -> Cluster:
    cl = c.gpu_cluster()
    only_candidate_lost_a_gpu(cl)
    return cl


def test_pending_pod_is_diagnosed_from_its_candidate_node(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    require_tool("sshd", "/usr/sbin/sshd")
    with SshLab(tmp_path / "ssh") as lab:
        flags = lab.cli_flags(kubeconfig)
        live = tmp_path / "live.json"
        rc_live = main([PENDING, *flags, "--report", "json", "-o", str(live)])
        bundle = tmp_path / "bundle"
        assert main(["collect", PENDING, *flags, "-o", str(bundle)]) == 0
        commands = lab.node.commands()
    report = json.loads(live.read_text())
    assert rc_live == 0
    finding = report["findings"][0]
    assert finding["id"] == "pending.candidate-gpu-fault"
    text = finding["summary"]
    assert "gpu-node-1" in text and LOST_UUID in text and "0000:3B:00" in text
    assert "Xid 79" in text and "1652923017935" in text  # the board serial, for an RMA
    assert "Reboot (power-cycle) the node" in text  # NVIDIA's action for Xid 79
    # The step that concluded it cites the kernel line of the node, read over SSH.
    step = next(
        w
        for w in report["walk"]
        if w.get("target") == "pending.candidate-gpu-fault" or w["id"].endswith("unhealthy")
    )
    cited = json.dumps(step)
    assert "Xid (PCI:0000:3b:00): 79" in cited and "ssh gpu-node-1" in cited
    # Only the troubled candidate was read: gpu-node-2 is tainted, the pod does not tolerate it.
    assert any("journalctl" in c and "-k" in c for c in commands)
    assert any("nvidia-smi" in c for c in commands)
    sources = {s["key"]: s for s in report["sources"]}
    assert sources["candidate-nodes"]["status"] == "ok"
    assert "examined 1 (at most 3): gpu-node-1" in sources["candidate-nodes"]["detail"]
    assert NODE_PRIVATE_IP not in json.dumps(sources)
    # The device-plugin log of the candidate node came through the API (GET pods/log).
    assert any(
        r.path.endswith("/pods/nvidia-device-plugin-daemonset-4e7f7/log") for r in kube_api.requests
    )

    # The bundle holds the node's evidence where a reader expects it, and replays the same.
    assert (bundle / "candidate-nodes.json").is_file()
    assert "Xid (PCI:0000:3b:00): 79" in (bundle / "nodes" / "gpu-node-1" / "dmesg.log").read_text()
    assert (bundle / "nodes" / "gpu-node-1" / "nvidia-smi.xml").is_file()
    assert (bundle / "nodes" / "gpu-node-1" / "device-plugin.log").is_file()
    replay = tmp_path / "replay.json"
    rc_replay = main([PENDING, "--from", str(bundle), "--report", "json", "-o", str(replay)])
    again = json.loads(replay.read_text())
    assert rc_replay == rc_live
    assert [f["id"] for f in again["findings"]] == [f["id"] for f in report["findings"]]
    assert [(w["id"], w["target"]) for w in again["walk"]] == [
        (w["id"], w["target"]) for w in report["walk"]
    ]
    assert LOST_UUID in again["findings"][0]["summary"]


def test_nodes_zero_reads_no_candidate(kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path) -> None:
    require_tool("sshd", "/usr/sbin/sshd")
    with SshLab(tmp_path / "ssh") as lab:
        out = tmp_path / "r.json"
        main(
            [
                PENDING,
                *lab.cli_flags(kubeconfig),
                "--nodes",
                "0",
                "--report",
                "json",
                "-o",
                str(out),
            ]
        )
        commands = lab.node.commands()
    report = json.loads(out.read_text())
    assert commands == []
    sources = {s["key"]: s for s in report["sources"]}
    assert sources["candidate-nodes"]["status"] == "unavailable"
    assert "--nodes 0" in sources["candidate-nodes"]["detail"]
    assert report["findings"][0]["id"] != "pending.candidate-gpu-fault"
