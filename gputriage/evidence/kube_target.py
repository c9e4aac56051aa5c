"""Turn what the user typed (``trainer-0``, ``deploy/llm-serve``) into one pod, or say why not.

Failures here are :class:`GputriageError` raised before the walk starts, and they try to be
the answer rather than a dead end: a mistyped pod gets the close names in its namespace and
the namespaces where that name exists; a workload with several pods gets its worst pod (and a
notice naming the others); a workload without pods gets its controller's warnings, which is
where quota and admission rejections are reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gputriage.errors import GputriageError
from gputriage.evidence.job_target import (
    CRD_WORKLOADS,
    JOB_KINDS,
    failed_at,
    first_failure_order,
    node_of,
)
from gputriage.evidence.kube import controller_of, fetch_pod
from gputriage.evidence.kube_client import KubeClient
from gputriage.evidence.kube_errors import Reply, failure_status
from gputriage.evidence.model import Evidence, Status


@dataclass(frozen=True)
class Workload:
    alias: str  # what kubectl calls it in KIND/NAME ("deploy")
    kind: str
    path: str  # list path with {ns}


_DEPLOY = Workload("deploy", "Deployment", "/apis/apps/v1/namespaces/{ns}/deployments")
_STS = Workload("sts", "StatefulSet", "/apis/apps/v1/namespaces/{ns}/statefulsets")
_JOB = Workload("job", "Job", "/apis/batch/v1/namespaces/{ns}/jobs")
_RS = Workload("rs", "ReplicaSet", "/apis/apps/v1/namespaces/{ns}/replicasets")
_DS = Workload("ds", "DaemonSet", "/apis/apps/v1/namespaces/{ns}/daemonsets")

#: Every spelling kubectl accepts for the workload kinds gputriage resolves.
WORKLOADS: dict[str, Workload] = {
    **dict.fromkeys(("deploy", "deployment", "deployments"), _DEPLOY),
    **dict.fromkeys(("sts", "statefulset", "statefulsets"), _STS),
    **dict.fromkeys(("job", "jobs"), _JOB),
    **dict.fromkeys(("rs", "replicaset", "replicasets"), _RS),
    **dict.fromkeys(("ds", "daemonset", "daemonsets"), _DS),
}
POD_KINDS = frozenset({"po", "pod", "pods"})

#: Waiting reasons that mean a container is failing, not just starting.
FAILING_WAITING = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "CreateContainerError",
        "CreateContainerConfigError",
        "RunContainerError",
        "InvalidImageName",
        "StartError",
        "ContainerCannotRun",
        "PreCreateHookError",
        "PostStartHookError",
    }
)


@dataclass(frozen=True)
class ResolvedTarget:
    """The pod to triage, its object as read, and how it was chosen."""

    namespace: str
    pod: str
    pod_evidence: Evidence
    via: str = ""  # "deploy/llm-serve" when the user named a workload
    notice: str = ""  # which pods the workload had and why this one
    #: For a distributed job (issue 13): the label selector of all its pods, else ''.
    job_selector: str = ""


def resolve_target(client: KubeClient, namespace: str, ref: str) -> ResolvedTarget:
    """Resolve ``NAME`` or ``KIND/NAME`` in ``namespace``; raise GputriageError when there
    is no pod to triage."""
    kind, sep, name = ref.partition("/")
    if not sep:
        return _resolve_pod(client, namespace, ref)
    if not name:
        raise GputriageError(
            f"{ref!r} names no object: use KIND/NAME, e.g. deploy/llm-serve", title="bad target"
        )
    if kind.lower() in POD_KINDS:
        return _resolve_pod(client, namespace, name)
    workload = WORKLOADS.get(kind.lower())
    if workload is None:
        crd = CRD_WORKLOADS.get(kind.lower())  # issue 13: distributed jobs
        if crd is not None:
            return _resolve_workload(
                client,
                namespace,
                Workload(crd.alias, crd.kind, crd.path),
                name,
                pod_label=crd.pod_label,
            )
        raise GputriageError(
            f"gputriage cannot triage a {kind!r}: give a pod name or deploy/, sts/, job/, rs/, "
            "ds/, pytorchjob/, mpijob/, tfjob/, jobset/, lws/ or raycluster/NAME",
            title="bad target",
        )
    return _resolve_workload(client, namespace, workload, name)


def _resolve_pod(client: KubeClient, namespace: str, name: str) -> ResolvedTarget:
    reply, pod = fetch_pod(client, namespace, name)
    if pod.ok:
        return ResolvedTarget(namespace, name, pod)
    if reply.ok:
        raise GputriageError(
            f"the API answered {reply.shown} with something that is not a pod: {pod.detail}",
            title="API server error",
        )
    if reply.status == 404:
        raise GputriageError(_pod_not_found(client, namespace, name), title="pod not found")
    raise cannot_read(client, f"pod {namespace}/{name}", reply)


def cannot_read(client: KubeClient, what: str, reply: Reply) -> GputriageError:
    """The error for an API answer that stops the triage before it starts."""
    status, detail = failure_status(reply)
    title = {
        Status.FORBIDDEN: "permission denied",
        Status.TIMEOUT: "API server timeout",
        Status.UNAVAILABLE: "not found",
    }.get(status, "API server error")
    message = f"cannot read {what}: {detail}"
    if reply.status == 401 and client.config.notes:
        message += f"\n  the credential plugin reported: {'; '.join(client.config.notes)}"
    return GputriageError(message, title=title)


def _names(
    client: KubeClient, path: str, query: Mapping[str, object] | None = None
) -> list[tuple[str, str]]:
    """(namespace, name) of a list; empty when it cannot be read (hints are best effort)."""
    _, data = client.list_all(path, query)
    items = (data or {}).get("items") or []
    return [
        (
            str((i.get("metadata") or {}).get("namespace") or ""),
            str((i.get("metadata") or {}).get("name") or ""),
        )
        for i in items
        if isinstance(i, dict)
    ]


def _close(name: str, candidates: list[str]) -> list[str]:
    import difflib  # only for a name that was not found

    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    prefixed = [c for c in candidates if c.startswith(name) and c not in close]
    return (close + prefixed)[:5]


def _pod_not_found(client: KubeClient, namespace: str, name: str) -> str:
    lines = [f'pod "{name}" not found in namespace "{namespace}".']
    names = [n for _, n in _names(client, f"/api/v1/namespaces/{namespace}/pods")]
    suggestions = _close(name, names)
    if suggestions:
        lines.append(f"did you mean: {', '.join(suggestions)}?")
    for workload in (_DEPLOY, _STS, _JOB, _DS):
        path = workload.path.format(ns=namespace)
        if client.get(f"{path}/{name}").ok:
            lines.append(
                f"{name} is a {workload.kind}: gputriage {workload.alias}/{name} -n {namespace}"
            )
    elsewhere = sorted(
        {
            ns
            for ns, _ in _names(client, "/api/v1/pods", {"fieldSelector": f"metadata.name={name}"})
            if ns != namespace
        }
    )
    for ns in elsewhere:
        lines.append(f'a pod named "{name}" exists in namespace "{ns}": gputriage {name} -n {ns}')
    return "\n  ".join(lines)


def label_selector(selector: Any) -> str:
    """``spec.selector`` (matchLabels and matchExpressions) as a label selector string."""
    if not isinstance(selector, dict):
        return ""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op = expr.get("key"), expr.get("operator")
        values = ",".join(expr.get("values") or [])
        parts.append(
            {
                "In": f"{key} in ({values})",
                "NotIn": f"{key} notin ({values})",
                "Exists": f"{key}",
                "DoesNotExist": f"!{key}",
            }.get(op, "")
        )
    return ",".join(p for p in parts if p)


def _resolve_workload(
    client: KubeClient, namespace: str, workload: Workload, name: str, *, pod_label: str = ""
) -> ResolvedTarget:
    path = workload.path.format(ns=namespace)
    what = f"{workload.kind.lower()} {name!r}"
    reply = client.get(f"{path}/{name}")
    if reply.status == 404:
        lines = [f'{workload.kind.lower()} "{name}" not found in namespace "{namespace}".']
        suggestions = _close(name, [n for _, n in _names(client, path)])
        if suggestions:
            named = ", ".join(f"{workload.alias}/{s}" for s in suggestions)
            lines.append(f"did you mean: {named}?")
        raise GputriageError("\n  ".join(lines), title=f"{workload.kind.lower()} not found")
    if not reply.ok:
        raise cannot_read(client, f"{workload.kind} {namespace}/{name}", reply)
    obj = reply.json()
    spec = obj.get("spec") if isinstance(obj, dict) else None
    selector = (
        f"{pod_label}={name}"
        if pod_label
        else label_selector(spec.get("selector") if isinstance(spec, dict) else None)
    )
    if not selector:
        raise GputriageError(
            f"{what} has no pod selector, so its pods cannot be found", title="no pods"
        )
    listing, data = client.list_all(
        f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": selector}
    )
    if data is None:
        raise cannot_read(client, f"the pods of {workload.kind} {namespace}/{name}", listing)
    pods = [
        p
        for p in data.get("items") or []
        if isinstance(p, dict) and isinstance(p.get("metadata"), dict) and p["metadata"].get("name")
    ]
    if not pods:
        raise GputriageError(
            _no_pods(client, namespace, workload, name, obj if isinstance(obj, dict) else {}),
            title="no pods",
        )
    ranked = sorted(
        ((pod_state(p), str(p["metadata"]["name"])) for p in pods), key=lambda t: (t[0][0], t[1])
    )
    chosen = ranked[0][1]
    why = "the one in the worst state"
    if workload.kind in JOB_KINDS:  # issue 13: the rank that failed first, not the loudest
        by_name = {str(p["metadata"]["name"]): p for p in pods}
        first = min(
            pods, key=lambda p: first_failure_order(p, pod_state(p)[0], str(p["metadata"]["name"]))
        )
        if failed_at(first):
            chosen = str(first["metadata"]["name"])
            ranked.sort(key=lambda t: first_failure_order(by_name[t[1]], t[0][0], t[1]))
            ranked = [
                (
                    (
                        rank,
                        f"{words}, failed at {failed_at(by_name[n])}"
                        if failed_at(by_name[n])
                        else words,
                    ),
                    n,
                )
                for (rank, words), n in ranked
            ]
            node = node_of(first)
            why = (
                f"the first to fail ({failed_at(first)}"
                + (f", on {node}" if node else "")
                + "); the others may only have timed out waiting for it"
            )
    ref = f"{workload.alias}/{name}"
    notice = ""
    if len(ranked) > 1:
        listed = ", ".join(f"{n} ({w})" for (_, w), n in ranked[:10])
        more = f" and {len(ranked) - 10} more" if len(ranked) > 10 else ""
        notice = f"{ref} has {len(ranked)} pods: {listed}{more}. Triaging {chosen}, {why}."
    pod_reply, pod = fetch_pod(client, namespace, chosen)
    if not pod.ok:
        raise cannot_read(client, f"pod {namespace}/{chosen}", pod_reply)
    return ResolvedTarget(
        namespace,
        chosen,
        pod,
        ref,
        notice,
        job_selector=selector if workload.kind in JOB_KINDS else "",
    )


def pod_state(pod: Mapping[str, Any]) -> tuple[int, str]:
    """(rank, words): 0 failing (CrashLoopBackOff, image pull, Failed), 1 Pending, 2 running
    but restarting or not ready, 3 running, 4 succeeded."""
    status = pod.get("status") or {}
    phase = str(status.get("phase") or "Unknown")
    statuses = [(s, "Init:") for s in status.get("initContainerStatuses") or []] + [
        (s, "") for s in status.get("containerStatuses") or []
    ]
    for s, prefix in statuses:
        reason = ((s.get("state") or {}).get("waiting") or {}).get("reason")
        if reason in FAILING_WAITING:
            return 0, f"{prefix}{reason}"
    if phase == "Failed":
        return 0, str(status.get("reason") or "Failed")
    if phase in ("Pending", "Unknown"):
        for cond in status.get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                return 1, f"{phase}, {cond.get('reason') or 'not scheduled'}"
        reasons = [((s.get("state") or {}).get("waiting") or {}).get("reason") for s, _ in statuses]
        first = next((r for r in reasons if r), "")
        return 1, f"{phase}, {first}" if first else phase
    if phase == "Succeeded":
        return 4, "Succeeded"
    running = [s for s, prefix in statuses if not prefix]
    restarts = sum(int(s.get("restartCount") or 0) for s in running)
    if restarts:
        last = next(
            (
                ((s.get("lastState") or {}).get("terminated") or {}).get("reason")
                for s in running
                if (s.get("lastState") or {}).get("terminated")
            ),
            "",
        )
        return 2, f"{phase}, {restarts} restarts" + (f", last {last}" if last else "")
    if not all(s.get("ready") for s in running):
        return 2, f"{phase}, not ready"
    return 3, phase


def _no_pods(
    client: KubeClient, namespace: str, workload: Workload, name: str, obj: Mapping[str, Any]
) -> str:
    owners = [(workload.kind, name)]
    if workload is _DEPLOY:
        uid = (obj.get("metadata") or {}).get("uid")
        _, data = client.list_all(
            _RS.path.format(ns=namespace),
            {"labelSelector": label_selector((obj.get("spec") or {}).get("selector"))},
        )
        sets = [
            rs["metadata"]
            for rs in (data or {}).get("items") or []
            if isinstance(rs, dict)
            and isinstance(rs.get("metadata"), dict)
            and (controller_of(rs) or {}).get("uid") == uid
        ]
        sets.sort(key=lambda meta: str(meta.get("creationTimestamp") or ""), reverse=True)
        owners += [("ReplicaSet", str(meta.get("name"))) for meta in sets[:2]]
    warnings: list[tuple[str, str]] = []
    for kind, owner in owners:
        _, data = client.list_all(
            f"/api/v1/namespaces/{namespace}/events",
            {"fieldSelector": f"involvedObject.kind={kind},involvedObject.name={owner}"},
        )
        events = [
            e
            for e in (data or {}).get("items") or []
            if isinstance(e, dict) and e.get("type") == "Warning"
        ]
        events.sort(
            key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""), reverse=True
        )
        for e in events:
            line = f"{kind.lower()}/{owner} {e.get('reason')}: {e.get('message')}"
            if line not in (w for _, w in warnings):
                warnings.append((kind, line))
    lines = [
        f'{workload.kind.lower()} "{name}" in namespace "{namespace}" has no pods, so '
        "there is no pod to triage."
    ]
    if warnings:
        lines.append("its controllers reported:")
        lines += [f"  {w}" for _, w in warnings[:3]]
    else:
        lines.append(f"see `kubectl describe {workload.alias}/{name} -n {namespace}`")
    return "\n  ".join(lines)
