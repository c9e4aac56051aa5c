"""The "placement" part of the incident summary: which physical GPUs the pod has, which pods sit on
a faulty GPU (UUID, PCI bus id, serial, board part number: what an RMA needs), and, for an
unscheduled pod, which candidate nodes were examined and why.

Pure: reads the ``gpu_assignment`` and ``candidates`` fact groups; the summary makes every
string inert and redacted afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputriage.facts.model import FactSet

_GPU_FIELDS = ("uuid", "pci", "serial", "board_part_number", "product", "fault")


def gpu_section(facts: FactSet) -> dict[str, Any]:
    """``{}`` when neither the checkpoint nor candidate nodes were read."""
    out: dict[str, Any] = {}
    assignment = facts.groups.get("gpu_assignment")
    if assignment is not None and assignment.known:
        v = assignment.values
        out["pod_gpus"] = [{"container": g.get("container", ""), **_gpu(g)} for g in v["pod_gpus"]]
        out["faulty_gpus"] = [
            {**_gpu(g), "pods": [_pod(p) for p in g.get("pods", [])]} for g in v["faulty_gpus"]
        ]
    job = facts.groups.get("job")
    if job is not None and job.known:
        out["job_pods"] = [
            {
                k: r.get(k)
                for k in (
                    "name",
                    "node",
                    "rank",
                    "phase",
                    "failed_at",
                    "exit_code",
                    "signature",
                    "is_target",
                )
            }
            for r in job.values["pods"]
        ]
    candidates = facts.groups.get("candidates")
    if candidates is not None and candidates.known:
        v = candidates.values
        out["candidate_nodes"] = {
            "examined": [{"name": n["name"], "reasons": n["reasons"]} for n in v["examined"]],
            "not_examined": v["not_examined"],
            "faults": [
                {
                    k: f.get(k)
                    for k in ("node", "uuid", "pci", "serial", "xid", "immediate_action", "line")
                }
                for f in v["faults"]
            ],
        }
    return out


def _gpu(g: Mapping[str, Any]) -> dict[str, Any]:
    return {k: g.get(k, "") for k in _GPU_FIELDS}


def _pod(p: Mapping[str, Any]) -> str:
    name = f"{p.get('namespace')}/{p.get('name')}" if p.get("name") else f"uid {p.get('uid')}"
    return f"{name} ({p.get('container')})" if p.get("container") else name


def render_gpu_markdown(section: Mapping[str, Any], cell: Any) -> list[str]:
    """Markdown lines for the section (``cell`` escapes cluster text for a table cell)."""
    if not section:
        return []
    out = ["", "## Placement: which GPUs, which nodes, which pods"]
    rows = [("this pod", g.get("container", ""), g) for g in section.get("pod_gpus", [])]
    rows += [
        ("faulty", ", ".join(g.get("pods", [])) or "no pod", g)
        for g in section.get("faulty_gpus", [])
    ]
    cand = section.get("candidate_nodes")
    rows += [
        (
            f"faulty on candidate {f['node']}",
            "-",
            {
                "uuid": f.get("uuid"),
                "pci": f.get("pci"),
                "serial": f.get("serial"),
                "board_part_number": "",
                "fault": f"Xid {f.get('xid')} ({f.get('immediate_action')})",
            },
        )
        for f in (cand or {}).get("faults", [])
    ]
    if rows:
        out += [
            "",
            "| | pods / container | UUID | PCI | serial | board part | fault |",
            "|---|---|---|---|---|---|---|",
        ]
        out += [
            f"| {cell(what)} | {cell(who)} | {cell(g['uuid'])} | {cell(g['pci'])} | "
            f"{cell(g['serial'])} | {cell(g['board_part_number'])} | {cell(g['fault'])} |"
            for what, who, g in rows
        ]
    if section.get("job_pods"):
        out += [
            "",
            "Pods of the job, the first failure first:",
            "",
            "| pod | node | rank | phase | failed at | exit | log says |",
            "|---|---|---|---|---|---|---|",
        ]
        out += [
            f"| {cell(p['name'])}{' (triaged)' if p['is_target'] else ''} | "
            f"{cell(p['node'])} | {cell(p['rank'])} | {cell(p['phase'])} | "
            f"{cell(p['failed_at'])} | {p['exit_code'] if p['exit_code'] != -1 else ''} | "
            f"{cell(p['signature'])} |"
            for p in section["job_pods"]
        ]
    if cand:
        out += ["", "Candidate nodes examined (the pod is not scheduled):", ""]
        out += [
            f"- {cell(n['name'])}: {cell('; '.join(n['reasons']))}" for n in cand["examined"]
        ] or ["- none"]
        out += [
            f"- not examined: {cell(n['name'])}: {cell(n['why'])}" for n in cand["not_examined"]
        ]
    return out
