"""``gputriage facts --from BUNDLE [--json] [GROUP...]``: the facts playbooks can read.

For playbook authors: every fact group built from a bundle, known or unknown (with the reason),
with each field's value, so a CEL condition can be written against real data.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputriage.errors import GputriageError

if TYPE_CHECKING:
    from gputriage.facts.model import FactGroup, FactSet

HELP = "print the facts built from an evidence bundle (what playbook conditions can read)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--from",
        dest="from_bundle",
        metavar="DIR",
        help="evidence bundle directory (see `gputriage collect`)",
    )
    p.add_argument(
        "--doc",
        action="store_true",
        help="print the reference of every fact group and field (docs/facts.md)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument(
        "groups", nargs="*", metavar="GROUP", help="only these fact groups (default: all)"
    )


def run(args: argparse.Namespace) -> int:
    from gputriage.evidence.bundle import read_bundle
    from gputriage.facts.build import build_facts

    if args.doc:
        from gputriage.facts.doc import render_facts_doc

        sys.stdout.write(render_facts_doc())
        return 0
    if not args.from_bundle:
        raise GputriageError("give --from DIR (an evidence bundle) or --doc", title="facts")
    facts = build_facts(read_bundle(Path(args.from_bundle)))
    names = select_groups(facts, args.groups)
    text = facts_json(facts, names) if args.json else facts_text(facts, names)
    sys.stdout.write(text)
    return 0


def select_groups(facts: FactSet, wanted: Sequence[str]) -> list[str]:
    """The group names to print, in build order; an unknown name is an error with a hint."""
    from gputriage.playbook.problems import did_you_mean

    for name in wanted:
        if name not in facts.groups:
            hint = did_you_mean(name, facts.groups)
            raise GputriageError(
                f"no fact group '{name}'"
                + (f"; {hint}" if hint else "")
                + f" (groups: {', '.join(facts.groups)})",
                title="facts",
            )
    return [n for n in facts.groups if not wanted or n in wanted]


def facts_text(facts: FactSet, names: Sequence[str]) -> str:
    """One block per group: ``name: known`` or ``name: UNKNOWN: reason``, then its fields."""
    out: list[str] = []
    for name in names:
        group = facts.groups[name]
        out.append(f"{name}: known" if group.known else f"{name}: UNKNOWN: {group.reason}")
        for field, value in group.values.items():
            out.append(f"  {name}.{field} = {_compact(value)}")
            out += [f"      cites {ref}" for ref in group.cites.get(field, ())]
        out.append("")
    return "\n".join(out)


def facts_json(facts: FactSet, names: Sequence[str]) -> str:
    """``{"target": {...}, "groups": {name: {known, reason, values, cites}}}``."""
    target = facts.target
    doc = {
        "target": {
            "namespace": target.namespace,
            "pod": target.pod,
            "uid": target.uid,
            "node": target.node,
            "containers": list(target.containers),
        },
        "groups": {name: _group_json(facts.groups[name]) for name in names},
    }
    return json.dumps(doc, indent=2, default=str) + "\n"


def _group_json(group: FactGroup) -> dict[str, Any]:
    return {
        "known": group.known,
        "reason": group.reason,
        "values": dict(group.values),
        "cites": {field: [str(r) for r in refs] for field, refs in group.cites.items()},
    }


def _compact(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)
