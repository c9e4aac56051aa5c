"""Render an incident summary (see ``summary.build_summary``) as plain text for a ticket.

No Markdown, no escaping: what a chat message or a ticket field that does not render Markdown
shows as it is. The summary's strings are inert already (``build_summary``), so cluster text
cannot carry terminal escapes here either. Commands come one per line, each mutating one under
a ``# CHANGES STATE`` comment line (see :func:`gputriage.report.markdown.command_lines`).
"""

from __future__ import annotations

import textwrap
from typing import Any

from gputriage.report.markdown import (
    TIMELINE_LOCAL_NOTE,
    command_lines,
    gpu_state,
    timeline_line,
)

WIDTH = 100


def render_text(s: dict[str, Any]) -> str:
    t = s["target"]
    title = f"{t['namespace']}/{t['pod']}" if t.get("pod") else t.get("session", "")
    out: list[str] = [f"GPU incident summary: {title}", "=" * min(WIDTH, 22 + len(title)), ""]
    v = s["verdict"]
    if v["status"] == "finding":
        out.append(f"Verdict: {v['headline']} ({v['finding']}, {v['severity']})")
    else:
        out.append(f"Verdict: {v['status']}: {v['headline']}")
    ws = s.get("walk_status") or {}
    if ws:
        out.append(f"How it was reached: {ws['words']}.")
    out.append("")
    gpu = ", ".join(f"{k}={n}" for k, n in (t.get("gpu_request") or {}).items()) or "none"
    for label, value in (("Pod", title), ("Node", t.get("node") or "(not scheduled)"),
                         ("Phase", t.get("phase") or "?"), ("GPU request", gpu),
                         ("Owner", t.get("owner") or "-"), ("Context", t.get("context") or "-"),
                         ("Evidence", t.get("session", ""))):
        out.append(f"  {label + ':':<13}{value}")

    if s.get("gpus"):
        out += ["", "GPUs involved", "-------------"]
        for g in s["gpus"]:
            out.append(f"  PCI {g['pci']}  UUID {g['uuid'] or '-'}  serial {g['serial'] or '-'}"
                       + (f"  ({g['name']})" if g.get("name") else ""))
            out.append(f"    {gpu_state(g)}")
            out += [f"    {x['source']}: {x['line']}" if x["source"] else f"    {x['line']}"
                    for x in g["xids"]]

    out += ["", "Findings", "--------"]
    if not s["findings"]:
        out.append("No finding yet.")
    for f in s["findings"]:
        out += ["", f"{f['title']} [{f['id']}, {f['severity']}]", *_para(f["summary"])]
        if f.get("collect_next"):
            out.append("  Collect next:")
            out += [f"    - {c}" for c in f["collect_next"]]
        fix = f.get("fix") or {}
        if fix.get("summary"):
            out += ["", *_para("Fix: " + fix["summary"])]
        if fix.get("steps") or fix.get("commands"):
            out += ["", *(f"    {line}" for line in command_lines(fix))]
        if f.get("evidence"):
            out += ["", "  Evidence:"]
            out += [f"    {_ref(r)}" for r in f["evidence"]]
            if f.get("evidence_more"):
                out.append(f"    ({f['evidence_more']} more cited lines in the JSON report)")
        if f.get("references"):
            out += ["", "  References:"] + [f"    {ref}" for ref in f["references"]]

    out += ["", "How we got here", "---------------"]
    for i, visit in enumerate(s["walk"], 1):
        line = f"{i}. {visit['title']} -> {visit['target'] or 'waiting'}"
        if visit["overridden"]:
            line += f" (overridden by the SRE; the engine proposed {visit['proposed']})"
        elif visit["because"]:
            line += f": {visit['because']}"
        if visit["unknown_facts"]:
            line += f" (could not see: {', '.join(visit['unknown_facts'])})"
        out += textwrap.wrap(line, WIDTH, subsequent_indent="   ") or [line]
    if s.get("question"):
        q = s["question"]
        out += ["", f"Waiting for an answer: {q['prompt']}"]
        out += [f"  {c['value']}: {c['label']}" for c in q["choices"]]

    if s["notes"]:
        out += ["", "Notes", "-----"]
        for n in s["notes"]:
            where = f" (at {n['step']})" if n["step"] else ""
            out.append(f"  {n['time']}{where}:")
            out += [f"    {ln}" for ln in n["text"].splitlines()]

    if s["timeline"]:
        out += ["", "Timeline (UTC)", "--------------"]
        if any(e.get("zone", "UTC") != "UTC" for e in s["timeline"]):
            out += [*_para(TIMELINE_LOCAL_NOTE.replace("`", "")), ""]
        out += [f"  {timeline_line(e)}" for e in s["timeline"]]

    if s["excerpts"]:
        out += ["", "Evidence excerpts", "-----------------"]
        for ex in s["excerpts"]:
            out.append(f"  {ex['source']}")
            out += [f"    {ln['line']:>6}  {ln['text']}" if ln["line"] else f"    {ln['text']}"
                    for ln in ex["lines"]]
            if ex.get("more"):
                out.append(f"    ({ex['more']} more cited lines in the JSON report)")

    if s["unreadable"]:
        out += ["", "What gputriage could not see", "----------------------------"]
        out += [f"  - {src['what']} ({src['status']}): {src['detail']}"
                for src in s["unreadable"]]
    if s["warnings"]:
        out += ["", "Warnings", "--------"] + [f"  - {w}" for w in s["warnings"]]
    out += ["", f"Generated by gputriage {s['tool']['version']} at {s['generated_at']}.", ""]
    return "\n".join(out)


def _para(text: str) -> list[str]:
    return textwrap.wrap(" ".join(str(text).split()), WIDTH, initial_indent="  ",
                         subsequent_indent="  ")


def _ref(r: dict[str, Any]) -> str:
    where = f"{r['source']}:{r['line']}" if r.get("line") else r["source"]
    return f"{where}: {r['text']}"
