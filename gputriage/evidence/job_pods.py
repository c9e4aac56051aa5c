"""Every pod of a distributed job, through the API (GET only): ``job-pods.json``.

One list call by the job's pod label selector, each pod trimmed to what the ``job`` facts read
(name, node, phase, labels naming the rank, container states with exit codes and times), plus
the tail of the log of each pod that failed (at most :data:`MAX_LOGS` pods, each at most
:data:`LOG_TAIL_LINES` lines / :data:`LOG_LIMIT_BYTES`), so NCCL watchdog timeouts on the
healthy ranks can be told from the rank that really failed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gputriage.evidence.bundle import decode
from gputriage.evidence.job_target import failed_at, node_of
from gputriage.evidence.kube_client import KubeClient, shown
from gputriage.evidence.kube_errors import failed
from gputriage.evidence.model import Evidence, Key

KIND = "JobPodList"
MAX_LOGS = 16
LOG_TAIL_LINES = 200
LOG_LIMIT_BYTES = 64 * 1024
#: Labels that name a pod's rank or role, by controller.
RANK_LABELS = (
    "training.kubeflow.org/replica-index",
    "training.kubeflow.org/replica-type",
    "training.kubeflow.org/job-role",
    "batch.kubernetes.io/job-completion-index",
    "jobset.sigs.k8s.io/job-index",
    "leaderworkerset.sigs.k8s.io/worker-index",
    "ray.io/node-type",
)


def collect_job_pods(client: KubeClient, namespace: str, selector: str) -> Evidence:
    """The job's pods and the log tails of the failed ones. Blocking, bounded, never raises."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    reply, data = client.list_all(path, {"labelSelector": selector})
    if data is None:
        return failed(Key.JOB_PODS, reply, "the job's pods: ")
    pods = sorted(
        (_slim(p) for p in data.get("items") or [] if isinstance(p, dict)),
        key=lambda p: (p["failedAt"] or "~", p["name"]),
    )
    for pod in [p for p in pods if p["failedAt"]][:MAX_LOGS]:
        pod["logTail"] = _log_tail(client, namespace, pod)
    document = {"apiVersion": "gputriage/v1", "kind": KIND, "selector": selector, "items": pods}
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    ev = decode(Key.JOB_PODS, text.encode(), source=shown(path, {"labelSelector": selector}))
    if not ev.ok:
        return ev
    failed_pods = sum(1 for p in pods if p["failedAt"])
    return ev.with_status(ev.status, f"{len(pods)} pods of the job, {failed_pods} failed")


def _slim(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta, spec, status = (_m(pod.get(k)) for k in ("metadata", "spec", "status"))
    labels = _m(meta.get("labels"))
    containers = [
        str(c.get("name"))
        for c in spec.get("containers") or []
        if isinstance(c, dict) and c.get("name")
    ]
    states = []
    for s in status.get("containerStatuses") or []:
        if isinstance(s, dict):
            states.append(
                {k: s[k] for k in ("name", "restartCount", "state", "lastState") if k in s}
            )
    return {
        "name": str(meta.get("name") or ""),
        "node": node_of(pod),
        "phase": str(status.get("phase") or ""),
        "rank": {k: str(v) for k, v in labels.items() if k in RANK_LABELS},
        "containers": containers,
        "containerStatuses": states,
        "failedAt": failed_at(pod),
    }


def _log_tail(client: KubeClient, namespace: str, pod: Mapping[str, Any]) -> dict[str, Any]:
    container = _failed_container(pod) or (pod["containers"][0] if pod["containers"] else "")
    query: dict[str, object] = {
        "container": container,
        "tailLines": LOG_TAIL_LINES,
        "limitBytes": LOG_LIMIT_BYTES,
    }
    statuses = [s for s in pod["containerStatuses"] if s.get("name") == container]
    if statuses and not _m(_m(statuses[0].get("state")).get("terminated")):
        query["previous"] = True  # restarted since: the failure is in the previous run
    reply = client.get(
        f"/api/v1/namespaces/{namespace}/pods/{pod['name']}/log", query, max_bytes=LOG_LIMIT_BYTES
    )
    entry: dict[str, Any] = {"container": container, "source": reply.shown}
    if reply.ok:
        entry["text"] = reply.body.decode("utf-8", errors="replace")
    else:
        entry["error"] = f"HTTP {reply.status}: {reply.message()[:200]}"
    return entry


def _failed_container(pod: Mapping[str, Any]) -> str:
    for s in pod["containerStatuses"]:
        for state in (s.get("state"), s.get("lastState")):
            term = _m(_m(state).get("terminated"))
            if term.get("exitCode") not in (0, None):
                return str(s.get("name") or "")
    return ""


def _m(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}
