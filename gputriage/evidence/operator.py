"""The NVIDIA GPU Operator on one node, through the API (GET only).

On Operator-managed nodes the driver, the container toolkit, the device plugin, DCGM exporter,
MIG manager and GPU feature discovery all run as pods, and the operator validator's init
containers (``driver-validation``, ``toolkit-validation``, ``cuda-validation``,
``plugin-validation``) say which layer is not ready. :func:`collect_operator` reads, for one
node: those component pods (one list call, set-based label selector on ``app``), the log of
every validator init container that has not succeeded (``GET pods/log``, tail-bounded), and the
``ClusterPolicy`` objects' ``status.state``. The result is one JSON document
(``gpu-operator.json``, kind :data:`KIND`); a cluster without the Operator is a valid answer
(no pods, no ClusterPolicy), not an error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gputriage.evidence.bundle import decode
from gputriage.evidence.kube_client import KubeClient, shown
from gputriage.evidence.kube_errors import failed
from gputriage.evidence.model import Evidence, Key, Status

KIND = "GpuOperatorState"
#: ``app`` label of each Operator component's pods (the Operator's own manifests).
COMPONENTS: dict[str, str] = {
    "nvidia-driver-daemonset": "driver",
    "nvidia-container-toolkit-daemonset": "toolkit",
    "nvidia-device-plugin-daemonset": "device-plugin",
    "nvidia-operator-validator": "validator",
    "nvidia-dcgm-exporter": "dcgm-exporter",
    "nvidia-dcgm": "dcgm",
    "nvidia-mig-manager": "mig-manager",
    "gpu-feature-discovery": "gpu-feature-discovery",
}
CLUSTER_POLICIES = "/apis/nvidia.com/v1/clusterpolicies"
VALIDATOR_LOG_LINES = 200
VALIDATOR_LOG_BYTES = 256 * 1024


def collect_operator(client: KubeClient, node: str) -> Evidence:
    """The Operator's state on ``node``. Blocking, bounded by the client's timeouts, never
    raises."""
    key = Key.GPU_OPERATOR
    selector = f"app in ({','.join(COMPONENTS)})"
    reply, data = client.list_all(
        "/api/v1/pods", {"labelSelector": selector, "fieldSelector": f"spec.nodeName={node}"}
    )
    if data is None:
        return failed(key, reply, "GPU Operator pods: ")
    pods = [_slim(p) for p in data.get("items") or [] if isinstance(p, dict)]
    logs = []
    for pod in pods:
        if pod["component"] != "validator":
            continue
        for name in _unfinished_inits(pod):
            logs.append(_init_log(client, pod, name))
    policies, policy_note = _cluster_policies(client)
    document = {
        "apiVersion": "gputriage/v1",
        "kind": KIND,
        "node": node,
        "clusterPolicies": policies,
        "clusterPolicyNote": policy_note,
        "pods": pods,
        "validatorLogs": logs,
    }
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    ev = decode(key, text.encode(), source=f"{shown('/api/v1/pods')} (GPU Operator on {node})")
    return (
        ev.with_status(
            ev.status,
            f"{len(pods)} Operator pods on {node}; "
            f"{len(policies)} ClusterPolicy; "
            f"{len(logs)} validator logs",
        )
        if ev.ok
        else ev
    )


def _slim(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta, spec, status = (_m(pod.get(k)) for k in ("metadata", "spec", "status"))
    app = str(_m(meta.get("labels")).get("app") or "")
    return {
        "name": str(meta.get("name") or ""),
        "namespace": str(meta.get("namespace") or ""),
        "app": app,
        "component": COMPONENTS.get(app, app),
        "phase": str(status.get("phase") or ""),
        "initContainers": [
            str(c.get("name")) for c in spec.get("initContainers") or [] if isinstance(c, dict)
        ],
        "initContainerStatuses": _statuses(status.get("initContainerStatuses")),
        "containerStatuses": _statuses(status.get("containerStatuses")),
    }


def _statuses(value: Any) -> list[dict[str, Any]]:
    out = []
    for s in value if isinstance(value, list) else []:
        if isinstance(s, dict):
            out.append(
                {k: s[k] for k in ("name", "ready", "restartCount", "state", "lastState") if k in s}
            )
    return out


def _unfinished_inits(pod: Mapping[str, Any]) -> list[str]:
    """Validator init containers that have not terminated with exit code 0, in order."""
    done = {
        str(s.get("name"))
        for s in pod["initContainerStatuses"]
        if _m(_m(s.get("state")).get("terminated")).get("exitCode") == 0
    }
    states = {str(s.get("name")): s for s in pod["initContainerStatuses"]}
    return [n for n in pod["initContainers"] if n not in done and n in states]


def _init_log(client: KubeClient, pod: Mapping[str, Any], container: str) -> dict[str, Any]:
    path = f"/api/v1/namespaces/{pod['namespace']}/pods/{pod['name']}/log"
    reply = client.get(
        path,
        {
            "container": container,
            "tailLines": VALIDATOR_LOG_LINES,
            "limitBytes": VALIDATOR_LOG_BYTES,
        },
        max_bytes=VALIDATOR_LOG_BYTES,
    )
    entry: dict[str, Any] = {
        "pod": pod["name"],
        "namespace": pod["namespace"],
        "container": container,
        "source": reply.shown,
    }
    if reply.ok:
        entry["log"] = reply.body.decode("utf-8", errors="replace")
    else:
        entry["error"] = f"HTTP {reply.status}: {reply.message()[:200]}"
    return entry


def _cluster_policies(client: KubeClient) -> tuple[list[dict[str, Any]], str]:
    reply, data = client.list_all(CLUSTER_POLICIES)
    if data is None:
        if reply.status == 404:
            return [], "the API does not serve nvidia.com/v1 ClusterPolicy: no GPU Operator"
        return [], f"could not read ClusterPolicy: HTTP {reply.status}"
    out = []
    for item in data.get("items") or []:
        if isinstance(item, dict):
            status = _m(item.get("status"))
            out.append(
                {
                    "name": str(_m(item.get("metadata")).get("name") or ""),
                    "state": str(status.get("state") or ""),
                    "conditions": [
                        c for c in status.get("conditions") or [] if isinstance(c, dict)
                    ],
                }
            )
    return out, ""


def _m(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def unavailable(detail: str) -> Evidence:
    return Evidence(Key.GPU_OPERATOR, Status.UNAVAILABLE, detail, "", "kube")
