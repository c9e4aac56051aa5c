"""Kubeconfig, contexts, exec credentials, in-cluster config, and what 401/403/timeouts say;
deploy/rbac.yaml grants exactly what gputriage reads."""

from __future__ import annotations

import argparse
import base64
import json
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from gputriage.cli import build_parser
from gputriage.errors import GputriageError
from gputriage.evidence import kube_client
from gputriage.evidence.model import Key, Status
from tests.integration.conftest import RBAC_FILE, node_overrides
from tests.kubeapi import Cluster, KubeAPI, KubeContext
from tests.kubeapi.rbac import load_rbac_rules
from tests.live import open_live

pytestmark = pytest.mark.integration

Args = Callable[..., argparse.Namespace]


def args_for(*argv: str, cluster: Cluster | None = None) -> argparse.Namespace:
    extra = node_overrides(cluster) if cluster else []
    return build_parser().parse_args(["triage", *argv, "--ssh", "off", *extra])


def test_contexts_namespaces_and_kubeconfig_env(
    kube_api: KubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = kube_api.write_kubeconfig(tmp_path / "a", [KubeContext("prod", namespace="ml")])
    second = kube_api.write_kubeconfig(
        tmp_path / "b", [KubeContext("dev", namespace="ml-dev")], current="dev"
    )
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    session = open_live(args_for("trainer-0"))  # current-context of the first file
    session.close()
    assert session.description == "context prod (ml/trainer-0)"
    session = open_live(args_for("trainer-0", "--context", "dev"))
    ev = session.collect_all()
    session.close()
    assert (session.context, session.namespace) == ("dev", "ml-dev")
    assert ev[Key.POD].data["status"]["phase"] == "Pending"
    session = open_live(args_for("trainer-0", "--context", "dev", "-n", "ml"))
    session.close()
    assert session.namespace == "ml"  # -n wins over the context's namespace


def test_bad_context_and_missing_kubeconfig(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(GputriageError) as info:
        open_live(args_for("trainer-0", "--kubeconfig", str(kubeconfig), "--context", "tset"))
    assert info.value.title == "bad context"
    assert "(available: test). Did you mean test?" in info.value.message
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nowhere"))
    with pytest.raises(GputriageError) as info:
        open_live(args_for("trainer-0"))
    assert info.value.title == "no kubeconfig"
    assert str(tmp_path / "nowhere") in info.value.message


def test_in_cluster_service_account(
    kube_api: KubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(kube_api.token)
    (account / "ca.crt").write_bytes(kube_api.ca_pem)
    (account / "namespace").write_text("ml")
    monkeypatch.setattr(kube_client, "SERVICE_ACCOUNT_DIR", str(account))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(kube_api.port))
    session = open_live(args_for("trainer-0", cluster=kube_api.cluster))
    ev = session.collect_all()
    session.close()
    assert session.description == "context in-cluster (ml/trainer-0)"
    assert ev[Key.EVENTS].ok and ev[Key.NODE].ok


def test_exec_credential_plugin_refreshes_tokens(kube_api: KubeAPI, tmp_path: Path) -> None:
    """An exec plugin whose token expires at once: the client re-runs it before requests, on
    the param_serialize/call_api path gputriage uses instead of CoreV1Api."""
    for n in range(1, 200):
        kube_api.add_user(f"exec-{n}", token=f"exec-token-{n}")
    counter = tmp_path / "runs"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        textwrap.dedent(f"""\
        import datetime, json, pathlib
        runs = pathlib.Path({str(counter)!r})
        n = int(runs.read_text()) + 1 if runs.exists() else 1
        runs.write_text(str(n))
        soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=1)
        expiry = soon.strftime("%Y-%m-%dT%H:%M:%SZ")
        print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1",
                          "kind": "ExecCredential",
                          "status": {{"token": f"exec-token-{{n}}",
                                     "expirationTimestamp": expiry}}}}))
        """)
    )
    config = kube_api.write_kubeconfig(
        tmp_path / "kc",
        [KubeContext("sso", namespace="ml", exec_command=(sys.executable, str(plugin)))],
    )
    session = open_live(
        args_for("trainer-0", "--kubeconfig", str(config), cluster=kube_api.cluster)
    )
    ev = session.collect_all()
    session.close()
    assert ev[Key.EVENTS].ok and ev[Key.NODES].ok and ev[Key.KUBELET_LOG].ok
    users = {r.user for r in kube_api.requests}
    assert len(users) > 3 and all(u.startswith("exec-") for u in users)
    assert all(r.status != 401 for r in kube_api.requests)
    assert int(counter.read_text()) > 3


def test_oidc_auth_provider_token(kube_api: KubeAPI, tmp_path: Path) -> None:
    """An unexpired OIDC id-token from the kubeconfig's auth-provider is sent as bearer."""

    def part(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    id_token = ".".join(
        [
            part({"alg": "RS256", "typ": "JWT"}),
            part({"iss": "https://sso.example", "sub": "sre-7", "exp": int(time.time()) + 3600}),
            "c2lnbmF0dXJl",
        ]
    )
    kube_api.add_user("oidc:sre-7", token=id_token)
    config = kube_api.write_kubeconfig(tmp_path / "kc")
    data = yaml.safe_load(config.read_text())
    data["users"][0]["user"] = {
        "auth-provider": {
            "name": "oidc",
            "config": {
                "id-token": id_token,
                "idp-issuer-url": "https://sso.example",
                "client-id": "k8s",
            },
        }
    }
    config.write_text(json.dumps(data))
    session = open_live(
        args_for("trainer-0", "--kubeconfig", str(config), cluster=kube_api.cluster)
    )
    ev = session.collect_all()
    session.close()
    assert ev[Key.EVENTS].ok and ev[Key.NODE_PODS].ok
    assert {r.user for r in kube_api.requests} == {"oidc:sre-7"}


def test_a_failing_credential_plugin_is_named(kube_api: KubeAPI, tmp_path: Path) -> None:
    plugin = tmp_path / "login.py"
    plugin.write_text(
        "import sys\nsys.stderr.write('session expired: run `corp-login`')\nsys.exit(3)\n"
    )
    config = kube_api.write_kubeconfig(
        tmp_path / "kc",
        [KubeContext("sso", namespace="ml", exec_command=(sys.executable, str(plugin)))],
    )
    with pytest.raises(GputriageError) as info:
        open_live(args_for("trainer-0", "--kubeconfig", str(config)))
    assert info.value.title == "permission denied"
    assert "401 Unauthorized" in info.value.message
    assert "the credential plugin reported: exec: process returned 3" in info.value.message
    assert "session expired: run `corp-login`" in info.value.message


def test_unauthorized_and_forbidden_pod(kube_api: KubeAPI, tmp_path: Path) -> None:
    nobody = kube_api.add_user("nobody", rules=[])
    config = kube_api.write_kubeconfig(
        tmp_path / "kc",
        [
            KubeContext("bad", token="stolen", namespace="ml"),
            KubeContext("nobody", token=nobody, namespace="ml"),
        ],
    )
    with pytest.raises(GputriageError) as info:
        open_live(args_for("trainer-0", "--kubeconfig", str(config)))
    assert info.value.title == "permission denied"
    assert info.value.message.startswith(
        "cannot read pod ml/trainer-0: the API server refused our credentials (401 Unauthorized)"
    )
    with pytest.raises(GputriageError) as info:
        open_live(args_for("trainer-0", "--kubeconfig", str(config), "--context", "nobody"))
    assert info.value.message.startswith(
        "cannot read pod ml/trainer-0: needs `get` on `pods` in namespace ml: add it to the "
        'ClusterRole, see deploy/rbac.yaml (pods "trainer-0" is forbidden: User "nobody" '
        'cannot get resource "pods"'
    )


def test_unreachable_timeout_and_wrong_ca(kube_api: KubeAPI, tmp_path: Path) -> None:
    kube_api.delay(r"/pods/trainer-0$", 2.0)
    config = kube_api.write_kubeconfig(tmp_path / "kc")
    with pytest.raises(GputriageError) as info:
        open_live(args_for("trainer-0", "--kubeconfig", str(config), "--request-timeout", "0.3"))
    assert info.value.title == "API server timeout"
    assert (
        "did not answer within 0.3 s (GET /api/v1/namespaces/ml/pods/trainer-0)"
        in info.value.message
    )
    with KubeAPI(Cluster()) as closed:
        dead = closed.write_kubeconfig(tmp_path / "dead")
    with pytest.raises(GputriageError) as info:
        open_live(args_for("trainer-0", "--kubeconfig", str(dead)))
    assert info.value.title == "API server error"
    assert "cannot reach the API server: connection refused" in info.value.message
    other_ca = yaml.safe_load(config.read_text())
    with KubeAPI(Cluster(), own_ca=True) as stranger:  # a CA that did not sign kube_api
        other_ca["clusters"][0]["cluster"]["certificate-authority-data"] = yaml.safe_load(
            stranger.write_kubeconfig(tmp_path / "s").read_text()
        )["clusters"][0]["cluster"]["certificate-authority-data"]
    (tmp_path / "wrong-ca").write_text(yaml.safe_dump(other_ca))
    with pytest.raises(GputriageError) as info:
        open_live(args_for("trainer-0", "--kubeconfig", str(tmp_path / "wrong-ca")))
    assert "TLS certificate verification failed" in info.value.message


def test_namespace_scoped_user_gets_named_gaps(kube_api: KubeAPI, tmp_path: Path) -> None:
    token = kube_api.add_user(
        "ml-dev-team",
        namespaces=["ml"],
        rules=[
            {
                "apiGroups": [""],
                "resources": ["pods", "pods/log", "resourcequotas"],
                "verbs": ["get", "list"],
            }
        ],
    )
    config = kube_api.write_kubeconfig(tmp_path / "kc", [KubeContext("t", token, "ml")])
    session = open_live(
        args_for("trainer-0", "--kubeconfig", str(config), cluster=kube_api.cluster)
    )
    ev = session.collect_all()
    session.close()
    assert ev[Key.CONTAINER_LOG].ok and ev[Key.QUOTA].ok
    events = ev[Key.EVENTS]
    assert events.status is Status.FORBIDDEN
    assert events.detail.startswith(
        "needs `list` on `events` in namespace ml: add it to the "
        "ClusterRole, see deploy/rbac.yaml (events is forbidden: "
    )
    assert ev[Key.NODES].detail.startswith("needs `list` on `nodes` (cluster-wide): add it")
    assert ev[Key.RUNTIME_CLASSES].detail.startswith(
        "needs `list` on `runtimeclasses` (API group node.k8s.io) (cluster-wide)"
    )
    assert ev[Key.DEVICE_PLUGIN_LOG].detail.startswith(
        "finding the device-plugin pod: needs `list` on `pods` (cluster-wide)"
    )
    kubelet = ev[Key.KUBELET_LOG]
    assert kubelet.status is Status.FORBIDDEN
    assert (
        "needs `get` on `nodes/proxy` (cluster-wide): grant the optional nodes/proxy rule "
        "in deploy/rbac.yaml, or use --ssh" in kubelet.detail
    )
    owner = ev[Key.OWNER_EVENTS]
    assert owner.status is Status.FORBIDDEN  # owner events need events too
    assert owner.detail.startswith("events of StatefulSet/trainer: needs `list` on `events`")


def test_rbac_yaml_is_read_only_and_marks_nodes_proxy_optional() -> None:
    docs = list(yaml.safe_load_all(RBAC_FILE.read_text()))
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    assert set(roles) == {
        "gputriage-reader",
        "gputriage-node-log-reader",
        "gputriage-prometheus-proxy",
    }
    verbs = {v for role in roles.values() for rule in role["rules"] for v in rule["verbs"]}
    assert verbs <= {"get", "list", "watch"}
    reader = {r for rule in roles["gputriage-reader"]["rules"] for r in rule["resources"]}
    assert "nodes/proxy" not in reader and "*" not in reader
    assert roles["gputriage-node-log-reader"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]}
    ]
    text = RBAC_FILE.read_text()
    optional = text[text.index("# OPTIONAL") : text.index("name: gputriage-node-log-reader")]
    assert "powerful" in optional
    assert {d["kind"] for d in docs} == {"ClusterRole", "ClusterRoleBinding"}


@pytest.mark.parametrize(
    "roles", [("gputriage-reader", "gputriage-node-log-reader"), ("gputriage-reader",)]
)
def test_rbac_yaml_grants_everything_gputriage_reads(
    kube_api: KubeAPI, tmp_path: Path, roles: tuple[str, ...]
) -> None:
    token = kube_api.add_user("oncall", rules=load_rbac_rules(RBAC_FILE, roles=roles))
    config = kube_api.write_kubeconfig(tmp_path / "kc", [KubeContext("t", token, "ml")])
    forbidden: list[str] = []
    for target in ("trainer-0", "deploy/llm-serve", "job/finetune"):
        session = open_live(args_for(target, "--kubeconfig", str(config), cluster=kube_api.cluster))
        ev = session.collect_all()
        session.close()
        forbidden += [f"{target}:{k.value}" for k, e in ev.items() if e.status is Status.FORBIDDEN]
    for broken in ("trainer-1", "deploy/quota-demo", "deploy/llm-srve"):
        with pytest.raises(GputriageError) as info:
            open_live(args_for(broken, "--kubeconfig", str(config)))
        assert info.value.title != "permission denied"
    denied = sorted({r.path for r in kube_api.requests if r.status == 403})
    if len(roles) == 2:
        assert (forbidden, denied) == ([], [])
    else:  # without the optional role only the node log query is refused
        assert forbidden == [
            "trainer-0:kubelet",
            "deploy/llm-serve:kubelet",
            "job/finetune:kubelet",
        ]
        assert denied == [
            "/api/v1/nodes/gpu-node-1/proxy/logs/",
            "/api/v1/nodes/gpu-node-2/proxy/logs/",
        ]
