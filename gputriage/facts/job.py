"""Fact group ``job``: a distributed job's pods, which failed first, and what the others say.

Built from ``job-pods.json`` (:mod:`gputriage.evidence.job_pods`), written when the target was
a job (``pytorchjob/NAME``, ``jobset/``, ``job/``...). Pods are ordered by when they failed; the
tail of each failed pod's log is scanned for the two signatures that matter here: an NCCL
watchdog/collective timeout (a healthy rank that waited for a peer) and a CUDA error (the rank
whose GPU went away). Healthy ranks timing out after another rank's CUDA error point at that
rank, not at NCCL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import EvidenceSet, Key, LineRef
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    reason_for,
    unknown,
)

_NCCL_TIMEOUT = re.compile(
    r"Watchdog caught collective operation timeout|NCCL (?:communicator|"
    r"operation).*(?:timed out|timeout)|ProcessGroupNCCL.*Timeout\(ms\)",
    re.I,
)
_CUDA_ERROR = re.compile(r"CUDA error|cudaError|CUDA_ERROR|NVML.*Unknown Error|Xid", re.I)

SPEC = GroupSpec(
    name="job",
    doc="The pods of a distributed job target, first failure first: node, rank, when and how "
    "each failed, and whether its log shows an NCCL timeout (waiting for a peer) or a CUDA "
    "error (its own GPU).",
    sources=(Key.JOB_PODS,),
    fields={
        "pod_count": FieldSpec("int", 0, "Pods of the job."),
        "failed_count": FieldSpec("int", 0, "Pods with a container that exited non-zero."),
        "pods": FieldSpec(
            "list<map>",
            [],
            "One map per pod, the earliest failure first: name, "
            "node, phase, rank (the rank/role labels joined), "
            "failed_at ('' when it did not fail), exit_code "
            "(-1 when none), reason, signature (nccl_timeout | "
            "cuda_error | ''), line (the matching log line), "
            "is_target.",
        ),
        "first_failure": FieldSpec("map", {}, "pods[0] when it failed, else {}."),
        "target_failed_first": FieldSpec(
            "bool", False, "The pod under triage is the first failure."
        ),
        "nccl_timeout_pods": FieldSpec("list<string>", [], "Pods whose log shows an NCCL timeout."),
        "peers_timed_out_after_first": FieldSpec(
            "bool",
            False,
            "Other pods failed later with NCCL timeouts while the first failure "
            "was not one: they waited for the rank that failed first.",
        ),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    ev = evidence.get_or_missing(Key.JOB_PODS)
    if not ev.ok or not isinstance(ev.data, dict):
        return unknown(SPEC, reason_for(ev) if not ev.ok else f"{ev.source}: not an object")
    rows: list[dict[str, Any]] = []
    cites: dict[str, list[LineRef]] = {}
    for pod in ev.data.get("items") or []:
        if not isinstance(pod, dict):
            continue
        row = _row(pod, target)
        rows.append(row)
        if row["line"]:
            ref = ev.find_line(max(re.split(r'["\\]', row["line"]), key=len)[:80].strip())
            if ref.line:
                key = "nccl_timeout_pods" if row["signature"] == "nccl_timeout" else "pods"
                cites.setdefault(key, []).append(ref)
    rows.sort(key=lambda r: (r["failed_at"] or "~", r["name"]))
    first = rows[0] if rows and rows[0]["failed_at"] else {}
    nccl = [r["name"] for r in rows if r["signature"] == "nccl_timeout"]
    peers = (
        bool(first)
        and first["signature"] != "nccl_timeout"
        and any(r["name"] != first["name"] and r["signature"] == "nccl_timeout" for r in rows)
    )
    if first and cites.get("pods"):
        cites["first_failure"] = cites["pods"][:1]
    if peers:
        cites["peers_timed_out_after_first"] = (
            cites.get("pods", [])[:1] + cites.get("nccl_timeout_pods", [])[:3]
        )
    return known(
        SPEC,
        {
            "pod_count": len(rows),
            "failed_count": sum(1 for r in rows if r["failed_at"]),
            "pods": rows,
            "first_failure": first,
            "target_failed_first": bool(first) and first["is_target"],
            "nccl_timeout_pods": nccl,
            "peers_timed_out_after_first": peers,
        },
        cites,
    )


def _row(pod: Mapping[str, Any], target: Target) -> dict[str, Any]:
    exit_code, reason = -1, ""
    for s in pod.get("containerStatuses") or []:
        if not isinstance(s, dict):
            continue
        for state in (s.get("state"), s.get("lastState")):
            term = state.get("terminated") if isinstance(state, dict) else None
            if isinstance(term, dict) and term.get("exitCode") not in (0, None):
                code = term.get("exitCode")
                exit_code = code if isinstance(code, int) and not isinstance(code, bool) else -1
                reason = str(term.get("reason") or "")
                break
        if exit_code != -1:
            break
    log = pod.get("logTail")
    text = str(log.get("text") or "") if isinstance(log, dict) else ""
    signature, line = "", ""
    for candidate in text.splitlines():
        if _NCCL_TIMEOUT.search(candidate):
            signature, line = "nccl_timeout", candidate.strip()
            break
        if not signature and _CUDA_ERROR.search(candidate):
            signature, line = "cuda_error", candidate.strip()
    labels = pod.get("rank")
    rank: Mapping[str, Any] = labels if isinstance(labels, dict) else {}
    name = str(pod.get("name") or "")
    return {
        "name": name,
        "node": str(pod.get("node") or ""),
        "phase": str(pod.get("phase") or ""),
        "rank": ",".join(f"{k.rsplit('/', 1)[-1]}={v}" for k, v in sorted(rank.items())),
        "failed_at": str(pod.get("failedAt") or ""),
        "exit_code": exit_code,
        "reason": reason,
        "signature": signature,
        "line": line[:500],
        "is_target": name == target.pod,
    }
