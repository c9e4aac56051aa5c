"""Render an incident summary (see ``summary.build_summary``) as Markdown for a ticket.

Text that came from the cluster or a node appears either inside fenced code blocks whose fence
is longer than any backtick run in the text, or escaped for CommonMark and HTML by
``textsafe.md_prose``/``md_cell`` (titles and summaries templated with cluster values): it can
neither format nor break the document, and never becomes a live link, image or HTML.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from gputriage.textsafe import md_cell, md_code, md_prose

_SEVERITY_MARK = {"critical": "🟥", "high": "🟧", "medium": "🟨", "low": "🟦", "info": "⬜"}


def fence(lines: Iterable[str], lang: str = "") -> str:
    body = "\n".join(lines)
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{body}\n{ticks}"


def md_text(text: Any) -> str:
    """Text from the cluster as literal Markdown (one line): see :func:`textsafe.md_cell`."""
    return md_cell(text)


def _cell(text: Any) -> str:
    return md_cell(text)


def render_markdown(s: dict[str, Any]) -> str:
    t = s["target"]
    title = (
        f"{t['namespace']}/{t['pod']}"
        if t.get("pod")
        else f"{t['namespace']}/{t['owner']}"
        if t.get("owner")
        else t.get("session", "")
    )
    out: list[str] = [f"# GPU incident summary: {md_text(title)}", ""]
    v = s["verdict"]
    if v["status"] == "finding":
        mark = _SEVERITY_MARK.get(v.get("severity", ""), "")
        sure = f", {md_cell(v['confidence'])}" if v.get("confidence") else ""
        out.append(
            f"**Verdict:** {mark} {md_prose(v['headline'])} ({md_code(v['finding'])}, "
            f"{md_cell(v['severity'])}{sure})"
        )
    else:
        out.append(f"**Verdict:** {v['status']}: {md_cell(v['headline'])}")
    ws = s.get("walk_status") or {}
    if ws:
        out += ["", f"**How it was reached:** {md_cell(ws['words'])}."]
    out += ["", "| | |", "|---|---|"]
    gpu = ", ".join(f"{k}={n}" for k, n in (t.get("gpu_request") or {}).items()) or "none"
    for label, value in (
        ("Pod", title),
        ("Node", t.get("node") or "(not scheduled)"),
        ("Phase", t.get("phase") or "?"),
        ("GPU request", gpu),
        ("Owner", t.get("owner") or "-"),
        ("Context", t.get("context") or "-"),
        ("Evidence", t.get("session", "")),
    ):
        out.append(f"| {label} | {_cell(value)} |")
    out.append("")

    if s.get("gpus"):
        out += [
            "## GPUs involved",
            "",
            "| PCI | UUID | Serial | Model | State |",
            "|---|---|---|---|---|",
        ]
        for g in s["gpus"]:
            out.append(
                "| "
                + " | ".join(
                    _cell(x or "-")
                    for x in (g["pci"], g["uuid"], g["serial"], g["name"], gpu_state(g))
                )
                + " |"
            )
        xid_lines = [
            f"{x['source']}: {x['line']}" if x["source"] else x["line"]
            for g in s["gpus"]
            for x in g["xids"]
        ]
        if xid_lines:
            out += ["", "Xid lines:", "", fence(xid_lines)]
        out.append("")

    out.append("## Findings")
    if not s["findings"]:
        out.append("No finding yet.")
    for f in s["findings"]:
        out += [
            "",
            f"### {md_cell(f['title'])}",
            f"{md_code(f['id'])} · severity **{md_cell(f['severity'])}**",
            "",
            md_prose(f["summary"].strip()),
            "",
        ]
        if f.get("collect_next"):
            out.append("**Collect next:**")
            out += [f"- {_cell(c)}" for c in f["collect_next"]]
            out.append("")
        fix = f.get("fix") or {}
        if fix.get("summary"):
            out += [f"**Fix:** {md_prose(fix['summary'].strip())}", ""]
        if fix.get("steps") or fix.get("commands"):
            out += [fence(command_lines(fix), "sh"), ""]
        if f.get("evidence"):
            more = f.get("evidence_more") or 0
            out += ["Evidence:", "", fence(_ref_line(r) for r in f["evidence"]), ""]
            if more:
                out += [f"({more} more cited lines in the JSON report)", ""]
        if f.get("references"):
            out.append("References:")
            out += [f"- {md_code(ref)}" for ref in f["references"]]
            out.append("")

    out += _differential(s.get("differential") or {})

    from gputriage.report.gpu_section import render_gpu_markdown  # issue 13

    out += render_gpu_markdown(s.get("placement") or {}, _cell)

    out += ["", "## How we got here", ""]
    for i, visit in enumerate(s["walk"], 1):
        line = f"{i}. **{md_cell(visit['title'])}** → {md_code(visit['target'] or 'waiting')}"
        if visit["overridden"]:
            line += (
                f" (**overridden** by the SRE; the engine proposed {md_code(visit['proposed'])})"
            )
        elif visit["because"]:
            line += f": {md_text(visit['because'])}"
        if visit["unknown_facts"]:
            line += f" _(could not see: {md_cell(', '.join(visit['unknown_facts']))})_"
        out.append(line)
    if s.get("question"):
        q = s["question"]
        out += ["", f"**Waiting for an answer:** {md_text(q['prompt'])}"]
        out += [f"- {md_code(c['value'])}: {md_cell(c['label'])}" for c in q["choices"]]

    if s["notes"]:
        out += ["", "## Notes", ""]
        for n in s["notes"]:
            where = f" (at {md_code(n['step'])})" if n["step"] else ""
            out += [f"- {n['time']}{where}:", "", fence(n["text"].splitlines()), ""]

    if s["timeline"]:
        out += ["", "## Timeline (UTC)", ""]
        if any(e.get("zone", "UTC") != "UTC" for e in s["timeline"]):
            out += [TIMELINE_LOCAL_NOTE, ""]
        out.append(fence(timeline_line(e) for e in s["timeline"]))

    if s["excerpts"]:
        out += ["", "## Evidence excerpts", ""]
        for ex in s["excerpts"]:
            out += [
                md_code(ex["source"]),
                "",
                fence(
                    f"{ln['line']:>6}  {ln['text']}" if ln["line"] else ln["text"]
                    for ln in ex["lines"]
                ),
                "",
            ]
            if ex.get("more"):
                out += [f"({ex['more']} more cited lines in the JSON report)", ""]

    if s["unreadable"]:
        out += ["", "## What gputriage could not see", ""]
        for src in s["unreadable"]:
            out.append(f"- **{md_cell(src['what'])}** ({src['status']}): {_cell(src['detail'])}")
    if s["warnings"]:
        out += ["", "## Warnings", ""] + [f"- {_cell(w)}" for w in s["warnings"]]
    out += ["", f"_Generated by gputriage {s['tool']['version']} at {s['generated_at']}._", ""]
    return "\n".join(out)


#: Said above a timeline that holds times printed without a zone.
TIMELINE_LOCAL_NOTE = (
    "Times marked `local` were printed without a time zone (dmesg -T, "
    "journal short format): they are the node's local clock, offset from UTC "
    "unknown; collect with `journalctl -o short-iso` or `dmesg --time-format "
    "iso` to place them exactly."
)


def timeline_line(e: dict[str, Any]) -> str:
    when = e["time"] if e.get("zone", "UTC") == "UTC" else f"{e['time']} local"
    return f"{when:<25} {e['source']:<7} {e['text']}"


def gpu_state(g: dict[str, Any]) -> str:
    parts = []
    if g.get("lost"):
        parts.append("lost to nvidia-smi")
    if g.get("xids"):
        codes = sorted({str(x["code"]) for x in g["xids"]})
        parts.append("Xid " + ", ".join(codes))
    if g.get("unhealthy"):
        parts.append(f"unhealthy in the device plugin ({g['unhealthy']})")
    return "; ".join(parts)


def command_lines(fix: dict[str, Any]) -> list[str]:
    """A fix's commands for a shell block: a comment line marks each one that changes state
    (with its caveat), and says which were left out because a fact they need is unknown."""
    steps = fix.get("steps") or [
        {"command": c, "mutates": False, "why": "", "missing": []}
        for c in fix.get("commands") or []
    ]
    lines: list[str] = []
    for st in steps:
        one_line = " ".join(str(st.get("why") or "").split())
        if st.get("missing"):
            needs = ", ".join(st["missing"])
            lines.append(f"# (left out: it needs {needs}, which the evidence does not hold)")
            continue
        if st.get("mutates"):
            lines.append(f"# CHANGES STATE: {one_line}" if one_line else "# CHANGES STATE")
        elif one_line:
            lines.append(f"# {one_line}")
        lines.append(st["command"])
    return lines


def _differential(d: dict[str, Any]) -> list[str]:
    """ "Also consistent with the evidence" and "Ruled out, because ..." beside the verdict."""
    out: list[str] = []
    for key, heading in (
        ("consistent", "Also consistent with the evidence"),
        ("ruled_out", "Ruled out"),
    ):
        if not d.get(key):
            continue
        out += ["", f"## {heading}", ""]
        for a in d[key]:
            sure = f" ({a['confidence']})" if a.get("confidence") else ""
            out.append(
                f"- `{a['id']}`{sure}: {md_text(a['title'])}: {md_text(a['because'])}"
                + (f" ({md_code(a['condition'])})" if a.get("condition") else "")
            )
            out += [f"  - {_cell(_ref_line(r))}" for r in a.get("evidence", [])[:3]]
    return out


def _ref_line(r: dict[str, Any]) -> str:
    where = f"{r['source']}:{r['line']}" if r.get("line") else r["source"]
    return f"{where}: {r['text']}"
