"""Render an incident summary (see ``summary.build_summary``) as Markdown for a ticket.

Text that came from the cluster or a node only ever appears inside fenced code blocks whose
fence is longer than any backtick run in the text, so it can neither format nor break the
document.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_SEVERITY_MARK = {"critical": "🟥", "high": "🟧", "medium": "🟨", "low": "🟦", "info": "⬜"}


def fence(lines: Iterable[str], lang: str = "") -> str:
    body = "\n".join(lines)
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{body}\n{ticks}"


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~])")


def md_text(text: Any) -> str:
    """Text from the cluster as literal Markdown: every formatting character escaped."""
    return _MD_SPECIAL.sub(r"\\\1", str(text).replace("\n", " "))


def _cell(text: Any) -> str:
    return md_text(text)


def render_markdown(s: dict[str, Any]) -> str:
    t = s["target"]
    title = (f"{t['namespace']}/{t['pod']}" if t.get("pod") else
             f"{t['namespace']}/{t['owner']}" if t.get("owner") else t.get("session", ""))
    out: list[str] = [f"# GPU incident summary: {md_text(title)}", ""]
    v = s["verdict"]
    if v["status"] == "finding":
        mark = _SEVERITY_MARK.get(v.get("severity", ""), "")
        sure = f", {v['confidence']}" if v.get("confidence") else ""
        out.append(f"**Verdict:** {mark} {v['headline']} (`{v['finding']}`, {v['severity']}"
                   f"{sure})")
    else:
        out.append(f"**Verdict:** {v['status']}: {v['headline']}")
    out += ["", "| | |", "|---|---|"]
    gpu = ", ".join(f"{k}={n}" for k, n in (t.get("gpu_request") or {}).items()) or "none"
    for label, value in (("Pod", title), ("Node", t.get("node") or "(not scheduled)"),
                         ("Phase", t.get("phase") or "?"), ("GPU request", gpu),
                         ("Owner", t.get("owner") or "-"), ("Context", t.get("context") or "-"),
                         ("Evidence", t.get("session", ""))):
        out.append(f"| {label} | {_cell(value)} |")
    out.append("")

    out.append("## Findings")
    if not s["findings"]:
        out.append("No finding yet.")
    for f in s["findings"]:
        out += ["", f"### {f['title']}", f"`{f['id']}` · severity **{f['severity']}**", "",
                f["summary"].strip(), ""]
        if f.get("collect_next"):
            out.append("**Collect next:**")
            out += [f"- {_cell(c)}" for c in f["collect_next"]]
            out.append("")
        fix = f.get("fix") or {}
        if fix.get("summary"):
            out += [f"**Fix:** {fix['summary'].strip()}", ""]
        if fix.get("commands"):
            out += [fence(fix["commands"], "sh"), ""]
        if f.get("evidence"):
            out += ["Evidence:", "", fence(_ref_line(r) for r in f["evidence"]), ""]
        if f.get("references"):
            out.append("References: " + ", ".join(f["references"]))
            out.append("")

    out += _differential(s.get("differential") or {})

    from gputriage.report.gpu_section import render_gpu_markdown  # issue 13

    out += render_gpu_markdown(s.get("gpus") or {}, _cell)
    out += ["", "## How we got here", ""]
    for i, visit in enumerate(s["walk"], 1):
        line = f"{i}. **{visit['title']}** → `{visit['target'] or 'waiting'}`"
        if visit["overridden"]:
            line += f" (**overridden** by the SRE; the engine proposed `{visit['proposed']}`)"
        elif visit["because"]:
            line += f": {md_text(visit['because'])}"
        if visit["unknown_facts"]:
            line += f" _(could not see: {', '.join(visit['unknown_facts'])})_"
        out.append(line)
    if s.get("question"):
        q = s["question"]
        out += ["", f"**Waiting for an answer:** {md_text(q['prompt'])}"]
        out += [f"- `{c['value']}`: {c['label']}" for c in q["choices"]]

    if s["notes"]:
        out += ["", "## Notes", ""]
        for n in s["notes"]:
            where = f" (at `{n['step']}`)" if n["step"] else ""
            out += [f"- {n['time']}{where}:", "", fence(n["text"].splitlines()), ""]

    if s["timeline"]:
        out += ["", "## Timeline (UTC)", ""]
        out.append(fence(f"{e['time']}  {e['source']:<13} {e['text']}" for e in s["timeline"]))

    if s["excerpts"]:
        out += ["", "## Evidence excerpts", ""]
        for ex in s["excerpts"]:
            out += [f"`{ex['source']}`", "",
                    fence(f"{ln['line']:>6}  {ln['text']}" if ln["line"] else ln["text"]
                          for ln in ex["lines"]), ""]

    if s["unreadable"]:
        out += ["", "## What gputriage could not see", ""]
        for src in s["unreadable"]:
            out.append(f"- **{src['what']}** ({src['status']}): {_cell(src['detail'])}")
    if s["warnings"]:
        out += ["", "## Warnings", ""] + [f"- {_cell(w)}" for w in s["warnings"]]
    out += ["", f"_Generated by gputriage {s['tool']['version']} at {s['generated_at']}._", ""]
    return "\n".join(out)


def _differential(d: dict[str, Any]) -> list[str]:
    """"Also consistent with the evidence" and "Ruled out, because ..." beside the verdict."""
    out: list[str] = []
    for key, heading in (("consistent", "Also consistent with the evidence"),
                         ("ruled_out", "Ruled out")):
        if not d.get(key):
            continue
        out += ["", f"## {heading}", ""]
        for a in d[key]:
            sure = f" ({a['confidence']})" if a.get("confidence") else ""
            out.append(f"- `{a['id']}`{sure}: {md_text(a['title'])}: {md_text(a['because'])}")
            out += [f"  - {_cell(_ref_line(r))}" for r in a.get("evidence", [])[:3]]
    return out


def _ref_line(r: dict[str, Any]) -> str:
    where = f"{r['source']}:{r['line']}" if r.get("line") else r["source"]
    return f"{where}: {r['text']}"
