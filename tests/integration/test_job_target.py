"""A distributed job as the target, against the local HTTPS API and a real sshd behind a
ProxyJump bastion: a two-node PyTorchJob where rank 3 (on gpu-node-1, whose kernel log has
Xid 79) failed first and ranks 0-2 (on gpu-node-2) failed later with NCCL watchdog timeouts is
triaged on rank 3's pod and node: the verdict is the lost GPU, not NCCL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gputriage.cli import main
from tests.conftest import require_tool
from tests.kubeapi import Cluster, KubeAPI
from tests.kubeapi import cluster as c
from tests.sshd import SshLab

pytestmark = pytest.mark.integration

NCCL_TIMEOUT = (
    "[rank{r}]:[E1102 09:{m}:03.118000 1 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:616] "
    "[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=48213, "
    "OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600078 "
    "milliseconds before timing out.\n"
)
CUDA_FAILURE = (
    "step 9000 loss 1.71\nRuntimeError: CUDA error: unspecified launch failure\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so "
    "the stacktrace below might be incorrect.\n"
)


def _failed(minutes: float) -> dict[str, Any]:
    return {
        "name": "pytorch",
        "state": c.terminated("Error", 1, minutes=minutes),
        "lastState": {},
        "ready": False,
        "restartCount": 0,
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "imageID": "",
        "started": False,
    }


def two_node_job(cl: Cluster) -> None:
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "llama",
            "namespace": "ml",
            "uid": c.uid_for("PyTorchJob", "ml", "llama"),
        },
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4}}},
        "status": {"conditions": [{"type": "Failed", "status": "True"}]},
    }
    cl.add(job)
    tolerate = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    for rank in range(4):
        node = "gpu-node-1" if rank == 3 else "gpu-node-2"
        # rank 3 lost its GPU at minute 30; the others timed out ten minutes later
        finished = 30 if rank == 3 else 40 + rank
        p = c.pod(
            f"llama-worker-{rank}",
            node=node,
            gpus=2,
            owner=job,
            phase="Failed",
            labels={
                "training.kubeflow.org/job-name": "llama",
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": str(rank),
            },
            containers=[c.container("pytorch", gpus=2)],
            statuses=[_failed(finished)],
            tolerations=tolerate,
        )
        cl.add(p)
        cl.add_log(
            p,
            CUDA_FAILURE if rank == 3 else NCCL_TIMEOUT.format(r=rank, m=finished),
            container="pytorch",
        )


@pytest.fixture
def kube_cluster() -> Cluster:
    cl = c.gpu_cluster()
    two_node_job(cl)
    return cl


def test_the_rank_that_failed_first_is_triaged_on_its_node(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    require_tool("sshd", "/usr/sbin/sshd")
    with SshLab(tmp_path / "ssh") as lab:
        out = tmp_path / "r.json"
        rc = main(
            ["pytorchjob/llama", *lab.cli_flags(kubeconfig), "--report", "json", "-o", str(out)]
        )
    report = json.loads(out.read_text())
    assert rc == 0
    assert report["target"]["pod"] == "llama-worker-3"
    assert report["target"]["node"] == "gpu-node-1"
    first = report["findings"][0]
    assert first["id"].startswith("lost."), first["id"]
    assert "nccl" not in first["id"]
    assert "Xid" in json.dumps(report["walk"]) or "79" in json.dumps(first)
    # One row per pod, the first failure first; the healthy ranks' logs show NCCL timeouts.
    rows = report["placement"]["job_pods"]
    assert [(r["name"], r["node"], r["signature"], r["is_target"]) for r in rows] == [
        ("llama-worker-3", "gpu-node-1", "cuda_error", True),
        ("llama-worker-0", "gpu-node-2", "nccl_timeout", False),
        ("llama-worker-1", "gpu-node-2", "nccl_timeout", False),
        ("llama-worker-2", "gpu-node-2", "nccl_timeout", False),
    ]
    assert rows[0]["rank"] == "replica-index=3,replica-type=worker"


def test_collect_and_replay_of_the_job_give_the_same_verdict(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    from gputriage.evidence.bundle import read_bundle
    from gputriage.evidence.model import Key
    from gputriage.facts.build import build_facts

    require_tool("sshd", "/usr/sbin/sshd")
    with SshLab(tmp_path / "ssh") as lab:
        common = lab.cli_flags(kubeconfig)
        live = tmp_path / "live.json"
        rc_live = main(["pytorchjob/llama", *common, "--report", "json", "-o", str(live)])
        bundle = tmp_path / "bundle"
        assert main(["collect", "pytorchjob/llama", *common, "-o", str(bundle)]) == 0
    replay = tmp_path / "replay.json"
    rc_replay = main(
        ["llama-worker-3", "--from", str(bundle), "--report", "json", "-o", str(replay)]
    )
    a, b = json.loads(live.read_text()), json.loads(replay.read_text())
    assert rc_live == rc_replay == 0
    assert [f["id"] for f in a["findings"]] == [f["id"] for f in b["findings"]]
    assert [(w["id"], w["target"]) for w in a["walk"]] == [
        (w["id"], w["target"]) for w in b["walk"]
    ]
    assert a["placement"]["job_pods"] == b["placement"]["job_pods"]
    job = build_facts(read_bundle(bundle)).groups["job"].values
    assert job["peers_timed_out_after_first"] and job["target_failed_first"]
    assert (bundle / "job-pods.json").is_file()
    assert read_bundle(bundle)[Key.JOB_PODS].ok


def test_the_notice_names_the_first_failure_and_the_other_ranks(
    kube_api: KubeAPI, kubeconfig: Path
) -> None:
    from gputriage.evidence.kube_client import KubeClient, load_config
    from gputriage.evidence.kube_target import resolve_target

    client = KubeClient(load_config(str(kubeconfig), None), timeout=10)
    try:
        target = resolve_target(client, "ml", "pytorchjob/llama")
    finally:
        client.close()
    assert (target.pod, target.via) == ("llama-worker-3", "pytorchjob/llama")
    assert target.notice.startswith(
        "pytorchjob/llama has 4 pods: llama-worker-3 (Failed, failed at 2026-11-02T09:30:00Z), "
        "llama-worker-0 (Failed, failed at 2026-11-02T09:40:00Z), llama-worker-1 (Failed, "
        "failed at 2026-11-02T09:41:00Z)"
    )
    assert target.notice.endswith(
        "Triaging llama-worker-3, the first to fail (2026-11-02T09:30:00Z, on gpu-node-1); the "
        "others may only have timed out waiting for it."
    )
    assert [
        r.param("labelSelector")
        for r in kube_api.requests
        if r.path == "/api/v1/namespaces/ml/pods"
    ] == ["training.kubeflow.org/job-name=llama"]


def test_a_pytorchjob_that_does_not_exist_says_so(kube_api: KubeAPI, kubeconfig: Path) -> None:
    from gputriage.errors import GputriageError
    from gputriage.evidence.kube_client import KubeClient, load_config
    from gputriage.evidence.kube_target import resolve_target

    client = KubeClient(load_config(str(kubeconfig), None), timeout=10)
    try:
        with pytest.raises(GputriageError, match='pytorchjob "lama" not found'):
            resolve_target(client, "ml", "pytorchjob/lama")
    finally:
        client.close()
