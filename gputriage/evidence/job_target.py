"""Distributed jobs as targets: ``pytorchjob/NAME``, ``mpijob/``, ``jobset/``, ``lws/``,
``raycluster/``, ``tfjob/`` (and ``job/``): all their pods, and which one failed first.

A distributed job usually dies on one rank (a GPU falls off the bus, a process hits an Xid)
while the healthy ranks time out in NCCL minutes later and fail too. The worst-looking pod is
then often a healthy rank whose log says only "Watchdog caught collective operation timeout".
So for these targets the pod triaged is the one whose failure came first: the earliest
``finishedAt`` of a failed container (terminated with a non-zero exit, current or last state),
then Failed pods without a time, then the usual worst-state order. The notice names it, its
node, and the other pods with their state.

Custom resources carry no ``spec.selector``; their pods are found by the label each operator
puts on them (:data:`CRD_WORKLOADS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Pod labels that say which job a pod belongs to, by controller.
PYTORCHJOB_LABEL = "training.kubeflow.org/job-name"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
LWS_LABEL = "leaderworkerset.sigs.k8s.io/name"
RAY_LABEL = "ray.io/cluster"


@dataclass(frozen=True)
class CrdWorkload:
    """A custom-resource workload: where to GET it and how its pods are labelled."""

    alias: str
    kind: str
    path: str  # the object's collection path with {ns}
    pod_label: str  # pods carry pod_label=NAME


_PYTORCH = CrdWorkload(
    "pytorchjob",
    "PyTorchJob",
    "/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs",
    PYTORCHJOB_LABEL,
)
_TF = CrdWorkload(
    "tfjob", "TFJob", "/apis/kubeflow.org/v1/namespaces/{ns}/tfjobs", PYTORCHJOB_LABEL
)
_MPI = CrdWorkload(
    "mpijob", "MPIJob", "/apis/kubeflow.org/v2beta1/namespaces/{ns}/mpijobs", PYTORCHJOB_LABEL
)
_JOBSET = CrdWorkload(
    "jobset", "JobSet", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets", JOBSET_LABEL
)
_LWS = CrdWorkload(
    "lws",
    "LeaderWorkerSet",
    "/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets",
    LWS_LABEL,
)
_RAY = CrdWorkload(
    "raycluster", "RayCluster", "/apis/ray.io/v1/namespaces/{ns}/rayclusters", RAY_LABEL
)

#: Every spelling accepted for them (kubectl's plural, singular and short names).
CRD_WORKLOADS: dict[str, CrdWorkload] = {
    **dict.fromkeys(("pytorchjob", "pytorchjobs"), _PYTORCH),
    **dict.fromkeys(("tfjob", "tfjobs"), _TF),
    **dict.fromkeys(("mpijob", "mpijobs"), _MPI),
    **dict.fromkeys(("jobset", "jobsets", "js"), _JOBSET),
    **dict.fromkeys(("lws", "leaderworkerset", "leaderworkersets"), _LWS),
    **dict.fromkeys(("raycluster", "rayclusters"), _RAY),
}

#: Kinds whose pods run one program together: the first failure is the one to triage.
JOB_KINDS = frozenset({"Job", *(w.kind for w in CRD_WORKLOADS.values())})


def failed_at(pod: Mapping[str, Any]) -> str:
    """The earliest ``finishedAt`` (RFC 3339) of a container of ``pod`` that terminated with a
    non-zero exit code (current or last state); '' when none did."""
    raw = pod.get("status")
    status: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    times = []
    for field in ("initContainerStatuses", "containerStatuses"):
        for s in status.get(field) or []:
            if not isinstance(s, dict):
                continue
            for state in (s.get("state"), s.get("lastState")):
                term = state.get("terminated") if isinstance(state, dict) else None
                if (
                    isinstance(term, dict)
                    and term.get("exitCode") not in (0, None)
                    and term.get("finishedAt")
                ):
                    times.append(str(term["finishedAt"]))
    return min(times) if times else ""


def first_failure_order(
    pod: Mapping[str, Any], state_rank: int, name: str
) -> tuple[int, str, int, str]:
    """Sort key: pods with a failure time first (earliest first), then by worst state."""
    when = failed_at(pod)
    return (0 if when else 1, when, state_rank, name)


def node_of(pod: Mapping[str, Any]) -> str:
    spec = pod.get("spec")
    return str(spec.get("nodeName") or "") if isinstance(spec, dict) else ""
