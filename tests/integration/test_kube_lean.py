"""The lean API path (stdlib HTTPS for token / client-certificate kubeconfigs) against the
official client (exec, OIDC...), both against the local HTTPS API: which one is chosen, and
that both give the same evidence and the same facts."""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from gputriage.cli import build_parser
from gputriage.evidence.kube_client import KubeClient, load_config
from gputriage.evidence.kube_lean import LeanAuth, lean_config
from gputriage.evidence.model import EvidenceSet, Key
from gputriage.facts.build import build_facts
from tests.integration.conftest import node_overrides
from tests.kubeapi import KubeAPI, KubeContext
from tests.kubeapi.server import _certificates
from tests.live import open_live

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _args(config: Path, kube_api: KubeAPI, *extra: str) -> argparse.Namespace:
    return build_parser().parse_args(
        [
            "triage",
            "trainer-0",
            "--kubeconfig",
            str(config),
            "--ssh",
            "off",
            *node_overrides(kube_api.cluster),
            *extra,
        ]
    )


def _exec_kubeconfig(kube_api: KubeAPI, tmp_path: Path) -> Path:
    """The same user as the token kubeconfig, logged in through an exec credential plugin."""
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        textwrap.dedent(f"""\
        import json
        print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1",
                          "kind": "ExecCredential", "status": {{"token": {kube_api.token!r}}}}}))
        """)
    )
    return kube_api.write_kubeconfig(
        tmp_path / "exec-kc",
        [KubeContext("test", namespace="ml", exec_command=(sys.executable, str(plugin)))],
    )


def _collect(config: Path, kube_api: KubeAPI) -> tuple[EvidenceSet, Any]:
    session = open_live(_args(config, kube_api))
    try:
        evidence = session.collect_all()
    finally:
        session.close()
    return evidence, session


#: The journal window's start is "now - 2h": it moves between the two collections.
_SINCE = re.compile(r"sinceTime=[0-9T:Z-]+")


def _comparable(evidence: EvidenceSet) -> dict[str, tuple[str, str, str, str, Any]]:
    return {
        key.value: (
            ev.status.value,
            ev.detail,
            _SINCE.sub("sinceTime=T", ev.source),
            ev.raw,
            ev.data,
        )
        for key, ev in evidence.items()
    }


def test_a_token_kubeconfig_takes_the_lean_path(kubeconfig: Path) -> None:
    config = load_config(str(kubeconfig))
    assert isinstance(config.configuration, LeanAuth)
    assert (config.context, config.namespace) == ("test", "ml")
    assert "admin-token" not in repr(config.configuration)


def test_an_exec_kubeconfig_takes_the_official_client(kube_api: KubeAPI, tmp_path: Path) -> None:
    config = load_config(str(_exec_kubeconfig(kube_api, tmp_path)))
    assert not isinstance(config.configuration, LeanAuth)
    assert type(config.configuration).__module__.startswith("kubernetes.")


def test_both_paths_give_identical_evidence_and_facts(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    lean, _ = _collect(kubeconfig, kube_api)
    n = len(kube_api.requests)
    official, _ = _collect(_exec_kubeconfig(kube_api, tmp_path), kube_api)
    requests = [
        (
            r.method,
            r.path,
            tuple(sorted((k, v) for k, v in r.query.items() if k != "sinceTime")),
            r.user,
            r.status,
            r.agent,
        )
        for r in kube_api.requests
    ]
    assert lean[Key.POD].ok and lean[Key.EVENTS].ok and lean[Key.NODE_PODS].ok
    assert _comparable(lean) == _comparable(official)
    assert build_facts(lean).to_context() == build_facts(official).to_context()
    # The same GETs (paths with their query strings), as the same user, on both paths.
    assert n > 10
    assert sorted(requests[:n]) == sorted(requests[n:])


def test_a_lean_headless_triage_never_imports_kubernetes(
    kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    code = textwrap.dedent("""\
        import json, sys
        from gputriage.cli import main
        rc = main(sys.argv[1:])
        print(json.dumps({"rc": rc, "kubernetes": sorted(m for m in sys.modules
                                                         if m.split('.')[0] == 'kubernetes')}))
        """)
    out = tmp_path / "r.json"
    argv = [
        "triage",
        "trainer-0",
        "--kubeconfig",
        str(kubeconfig),
        "--ssh",
        "off",
        *node_overrides(kube_api.cluster),
        "--report",
        "json",
        "-o",
        str(out),
    ]
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rc"] in (0, 3), done.stderr
    assert result["kubernetes"] == []
    assert json.loads(out.read_text())["target"]


def _kubeconfig(
    tmp_path: Path,
    user: dict[str, Any],
    cluster_extra: dict[str, Any] | None = None,
    name: str = "kc",
) -> Path:
    ca, _, _ = _certificates()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [
            {
                "name": "k",
                "cluster": {
                    "server": "https://127.0.0.1:6443",
                    "certificate-authority-data": base64.b64encode(ca).decode(),
                    **(cluster_extra or {}),
                },
            }
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u", "namespace": "team"}}],
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize(
    ("user", "cluster", "lean"),
    [
        ({"token": "t"}, {}, True),
        ({"exec": {"command": "login"}}, {}, False),
        ({"auth-provider": {"name": "oidc"}}, {}, False),
        ({"username": "a", "password": "b"}, {}, False),
        ({"token": "t", "as": "someone-else"}, {}, False),
        ({"token": "t"}, {"proxy-url": "http://proxy:3128"}, False),
        ({"token": "t"}, {"tls-server-name": "api.internal"}, False),
        ({"token": "t"}, {"server": "http://127.0.0.1:8080"}, False),
        ({"token": "t"}, {"insecure-skip-tls-verify": True}, True),
        ({}, {}, False),
    ],
)
def test_what_the_lean_path_serves(
    tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any], lean: bool
) -> None:
    path = _kubeconfig(tmp_path, user, cluster)
    assert (lean_config([str(path)], None) is not None) is lean


def test_a_proxy_in_the_environment_goes_to_the_official_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _kubeconfig(tmp_path, {"token": "t"})
    assert lean_config([str(path)], None) is not None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    assert lean_config([str(path)], None) is None


def test_token_file_and_client_certificate_files_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    _, cert, key = _certificates()
    (tmp_path / "creds").mkdir()
    (tmp_path / "creds" / "token").write_text("from-a-file\n")
    (tmp_path / "creds" / "tls.crt").write_bytes(cert)
    (tmp_path / "creds" / "tls.key").write_bytes(key)
    path = _kubeconfig(
        tmp_path,
        {
            "tokenFile": "creds/token",
            "client-certificate": "creds/tls.crt",
            "client-key": "creds/tls.key",
        },
    )
    config = lean_config([str(path)], None)
    assert config is not None and isinstance(config.configuration, LeanAuth)
    auth = config.configuration
    assert (auth.token, auth.cert_pem, auth.key_pem) == ("from-a-file", cert, key)
    client = KubeClient(config)  # builds the TLS context with the client certificate
    client.close()


def test_several_files_merge_as_kubectl_does(tmp_path: Path) -> None:
    first = _kubeconfig(tmp_path, {"token": "first"}, name="a")
    second_data = yaml.safe_load(_kubeconfig(tmp_path, {"token": "second"}, name="b").read_text())
    second_data["current-context"] = "other"
    second_data["contexts"].append({"name": "other", "context": {"cluster": "k", "user": "u"}})
    second = tmp_path / "b"
    second.write_text(yaml.safe_dump(second_data))
    config = lean_config([str(first), str(second)], None)
    assert config is not None and config.context == "c"  # the first current-context wins
    assert config.configuration.token == "first"  # the first user named 'u' wins
    other = lean_config([str(first), str(second)], "other")
    assert other is not None and (other.context, other.namespace) == ("other", "")
    assert lean_config([str(first)], "missing") is None  # the official loader words it
