"""``gputriage scan --report md|json``: the scan result as one plain structure, and its text.

JSON keys are stable: ``tool``, ``generated_at``, ``context``, ``scope``, ``complete``,
``summary``, ``listings``, ``troubles`` (one row per pod or node, see
:meth:`gputriage.scan.model.Row.to_dict`) and ``inventory`` (the GPU inventory of every node a
trouble row names). Text from the cluster goes through ``textsafe`` (no terminal escapes,
secrets redacted); in Markdown it only appears escaped (``md_cell``) or inside fences.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from gputriage import __version__
from gputriage.evidence.model import Status
from gputriage.report.markdown import fence
from gputriage.scan.collect import Listing, Scope
from gputriage.scan.fleet import Fleet
from gputriage.scan.inventory import inventory_lines
from gputriage.scan.model import NODE, short_age
from gputriage.textsafe import clean_obj, md_cell, md_code


def build_report(
    fleet: Fleet,
    listings: Sequence[Listing],
    scope: Scope,
    *,
    context: str,
    now: float | None = None,
) -> dict[str, Any]:
    """The scan result as JSON-ready data."""
    now = fleet.now if now is None else now
    rows = fleet.sorted_rows()
    involved = sorted({r.node for r in rows if r.node})
    inventory = [inv for name in involved if (inv := fleet.inventory(name)) is not None]
    report = {
        "tool": {"name": "gputriage", "version": __version__},
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "context": context,
        "scope": {
            "namespace": scope.namespace,
            "all_namespaces": not scope.namespace,
            "selector": scope.selector,
            "stuck_after_s": scope.stuck_after,
        },
        "complete": all(ls.status is Status.OK for ls in listings),
        "summary": fleet.summary(),
        "listings": [ls.to_dict() for ls in listings],
        "troubles": [r.to_dict(now) for r in rows],
        "inventory": inventory,
    }
    return clean_obj(report)  # escapes stripped, secrets redacted


def render_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"


def _cell(value: Any) -> str:
    return md_cell(value)


def render_markdown(report: dict[str, Any]) -> str:
    s = report["summary"]
    scope = report["scope"]
    where = f"namespace {_cell(scope['namespace'])}" if scope["namespace"] else "all namespaces"
    if scope["selector"]:
        where += f", pods matching {_cell(scope['selector'])}"
    out = [
        f"# GPU scan: {_cell(report['context'] or 'cluster')} ({where})",
        "",
        f"{s['pods_in_trouble']} GPU pods and {s['nodes_in_trouble']} GPU nodes in trouble; "
        f"{s['gpu_pods']} GPU pods among {s['pods_listed']} pods listed, {s['gpu_nodes']} "
        f"GPU nodes among {s['nodes_listed']} nodes. Generated {report['generated_at']}.",
        "",
    ]
    failed = [ls for ls in report["listings"] if ls["status"] != Status.OK.value]
    if failed:
        out += ["**Incomplete:** some lists could not be read:", ""]
        out += [f"- {_cell(ls['what'])}: {ls['status']}: {_cell(ls['detail'])}" for ls in failed]
        out.append("")
    out += ["## Troubles", ""]
    if not report["troubles"]:
        out.append("No GPU pod or GPU node in trouble.")
    else:
        out += [
            "| kind | name | family | troubles | age | reason | triage |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in report["troubles"]:
            name = r["name"] if r["kind"] == NODE else f"{r['namespace']}/{r['name']}"
            out.append(
                f"| {r['kind']} | {_cell(name)} | {r['family']} | "
                f"{', '.join(r['troubles'])} | {short_age(r['age_s'])} | "
                f"{_cell(r['reason'])} | {md_code(r['triage'])} |"
            )
    if report["inventory"]:
        out += ["", "## GPU inventory of the nodes involved", ""]
        for inv in report["inventory"]:
            out += [fence(inventory_lines(inv)), ""]
    return "\n".join(out).rstrip() + "\n"
