"""Fixtures for tests against the local HTTPS Kubernetes API (tests/kubeapi).

* ``kube_cluster``: the standard small GPU cluster (:func:`tests.kubeapi.cluster.gpu_cluster`);
  a test may add objects before the server answers.
* ``kube_api``: the server for it; on teardown asserts that nothing but GET reached it.
* ``kubeconfig``: a kubeconfig file for ``kube_api`` (context ``test``, namespace ``ml``).
* ``live_args``: argv -> parsed ``gputriage triage`` arguments against that kubeconfig, with SSH
  off and every fixture node's address overridden to 127.0.0.1 (fixture nodes carry private
  10.x addresses that must never be dialled).
* at the end of the session: no test server anywhere saw a write, and every request gputriage
  made is granted by deploy/rbac.yaml.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.kubeapi import KubeAPI
from tests.kubeapi.cluster import Cluster, gpu_cluster
from tests.kubeapi.rbac import load_rbac_rules, uncovered
from tests.kubeapi.server import ALL_REQUESTS

ROOT = Path(__file__).resolve().parents[2]
RBAC_FILE = ROOT / "deploy" / "rbac.yaml"


@pytest.fixture(scope="session", autouse=True)
def _kube_api_reads_only() -> Iterator[None]:
    yield
    writes = [f"{r.method} {r.path}" for r in ALL_REQUESTS if r.method != "GET"]
    assert not writes, f"a test API server received non-GET requests: {writes}"
    ours = [r for r in ALL_REQUESTS if r.agent.startswith("gputriage/")]
    missing = uncovered(ours, load_rbac_rules(RBAC_FILE))
    assert not missing, f"deploy/rbac.yaml does not grant requests gputriage made: {missing}"


@pytest.fixture
def kube_cluster() -> Cluster:
    return gpu_cluster()


@pytest.fixture
def kube_api(kube_cluster: Cluster) -> Iterator[KubeAPI]:
    with KubeAPI(kube_cluster) as api:
        yield api
        assert not api.mutations(), f"non-GET requests: {api.mutations()}"


@pytest.fixture
def kubeconfig(kube_api: KubeAPI, tmp_path: Path) -> Path:
    return kube_api.write_kubeconfig(tmp_path / "kubeconfig")


def node_overrides(cluster: Cluster) -> list[str]:
    return [f"--node-address={name}=127.0.0.1" for _, name in cluster.keys("", "nodes")]


@pytest.fixture
def live_args(kubeconfig: Path, kube_cluster: Cluster) -> Callable[..., argparse.Namespace]:
    from gputriage.cli import build_parser

    def make(*argv: str, config: Path | None = None) -> argparse.Namespace:
        words = [
            "triage",
            *argv,
            "--kubeconfig",
            str(config or kubeconfig),
            "--ssh",
            "off",
            *node_overrides(kube_cluster),
        ]
        return build_parser().parse_args(words)

    return make
