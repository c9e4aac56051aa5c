"""``gputriage playbooks list|validate|explain|schema|findings``: for playbook authors."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from gputriage.commands.options import add_playbook_arguments
from gputriage.errors import GputriageError

if TYPE_CHECKING:
    from gputriage.playbook.model import Playbook, PlaybookSet, Step, Target

HELP = "list, validate and explain playbooks; print their JSON Schema or findings catalog"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="the loaded playbooks and where they come from")
    add_playbook_arguments(listing)
    validate = sub.add_parser(
        "validate",
        help="check playbook files (default: every loaded playbook); exit 1 with "
        "file:line:col for each problem",
    )
    validate.add_argument(
        "files",
        nargs="*",
        type=Path,
        metavar="FILE",
        help="playbook files or directories to check along with the shipped ones",
    )
    add_playbook_arguments(validate)
    explain = sub.add_parser(
        "explain", help="print a playbook's tree: steps, branches, conditions, findings"
    )
    explain.add_argument("id", help="playbook id")
    add_playbook_arguments(explain)
    sub.add_parser("schema", help="print the JSON Schema of the playbook format")
    findings = sub.add_parser(
        "findings", help="print the findings catalog (docs/findings.md) as Markdown"
    )
    add_playbook_arguments(findings)
    findings.add_argument(
        "--shipped-only",
        action="store_true",
        help="only the shipped playbooks (how docs/findings.md is made)",
    )


def run(args: argparse.Namespace) -> int:
    if args.action == "schema":
        from gputriage.playbook.schema import shipped_schema_text

        sys.stdout.write(shipped_schema_text())
        return 0
    from gputriage.playbook.loader import load_playbooks

    extra = [Path(d) for d in getattr(args, "playbooks", []) or []]
    if args.action == "validate":
        playbooks = load_playbooks([*extra, *args.files], user_config=not args.files)
        return _validate(playbooks, [str(f) for f in args.files])
    if getattr(args, "shipped_only", False):
        playbooks = load_playbooks(user_config=False)
    else:
        playbooks = load_playbooks(extra)
    for problem in playbooks.problems:
        print(f"gputriage: warning: skipped playbook: {problem}", file=sys.stderr)
    if args.action == "list":
        print(_listing(playbooks), end="")
    elif args.action == "explain":
        print(explain(playbooks, args.id), end="")
    else:
        from gputriage.playbook.findings_doc import render_findings

        sys.stdout.write(render_findings(playbooks))
    return 0


def _validate(playbooks: PlaybookSet, files: list[str]) -> int:
    for problem in playbooks.problems:
        print(problem.render(), end="\n\n")
    books = list(playbooks)
    steps = sum(len(b.steps) for b in books)
    findings = sum(len(b.findings) for b in books)
    if playbooks.problems:
        n = len(playbooks.problems)
        print(f"{n} problem{'s' if n != 1 else ''}; {len(books)} playbooks loaded")
        return 1
    for book in books:
        if not book.shipped and book.file in files:
            print(f"{book.file}: ok: playbook '{book.id}'")
    print(f"ok: {len(books)} playbooks, {steps} steps, {findings} findings")
    return 0


def _listing(playbooks: PlaybookSet) -> str:
    rows = [("ID", "MATURITY", "STEPS", "FINDINGS", "FROM", "TITLE")]
    for book in playbooks:
        rows.append(
            (
                book.id,
                book.maturity,
                str(len(book.steps)),
                str(len(book.findings)),
                "shipped" if book.shipped else book.file,
                book.title,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = [
        "  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip()
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def explain(playbooks: PlaybookSet, playbook_id: str) -> str:
    """The tree of one playbook in words: routes, steps with their branches, findings."""
    from gputriage.playbook.fix_render import doc_line
    from gputriage.playbook.problems import did_you_mean

    book = playbooks.get(playbook_id)
    if book is None:
        hint = did_you_mean(playbook_id, [b.id for b in playbooks])
        raise GputriageError(
            f"no playbook '{playbook_id}' is loaded" + (f"; {hint}" if hint else ""),
            title="playbooks explain",
        )
    origin = "shipped" if book.shipped else "user"
    out = [f"{book.id}: {book.title}", f"  {book.maturity}, {origin}, {book.file}"]
    if book.description:
        out.append(textwrap.fill(book.description, 96, initial_indent="  ", subsequent_indent="  "))
    if book.routes:
        out += ["", "Entered when:"]
        for r in book.routes:
            out.append(
                f"  [priority {r.priority}] {r.when.source}"
                + (f"  ({r.because})" if r.because else "")
            )
    out += ["", f"Starts at: {book.start}"]
    for step in book.steps.values():
        out += ["", *(_step(playbooks, book, step))]
    if book.findings:
        out += ["", "Findings:"]
        for spec in book.findings.values():
            out.append(f"  {spec.id} [{spec.severity}] {spec.title}")
            out.append(f"    fix: {spec.fix.summary}")
            out += [f"      $ {doc_line(c, raw=True)}" for c in spec.fix.commands]
    return "\n".join(out) + "\n"


def _step(playbooks: PlaybookSet, book: Playbook, step: Step) -> list[str]:
    out = [f"Step {step.id}: {step.prompt}"]
    if step.needs:
        out.append(f"  needs: {', '.join(step.needs)}")
    for i, b in enumerate(step.branches, 1):
        unknown = "  [if unknown: skip to the next branch]" if b.if_unknown == "skip" else ""
        out.append(f"  {i}. when {' '.join(b.when.source.split())}{unknown}")
        out.append(f"     because {b.because}")
        if b.cite:
            out.append(f"     also cites {', '.join(b.cite)}")
        out.append(f"     -> {_target(playbooks, book, b.target)}")
    if step.otherwise is not None:
        because = f" ({step.otherwise.because})" if step.otherwise.because else ""
        out.append(f"  otherwise{because}")
        out.append(f"     -> {_target(playbooks, book, step.otherwise.target)}")
    elif step.ask is not None:
        out.append(f"  otherwise ask: {step.ask.question}")
        for c in step.ask.choices:
            out.append(f"     {c.value} ({c.label}) -> {_target(playbooks, book, c.target)}")
    else:
        out.append("  otherwise: undetermined")
    return out


def _target(playbooks: PlaybookSet, book: Playbook, target: Target) -> str:
    if target.conclude:
        spec = playbooks.finding(target.raw)
        words = f" [{spec.severity}] {spec.title}" if spec else ""
        return f"conclude {target.raw}{words}"
    if target.playbook == book.id:
        return f"goto step {target.step}"
    return f"goto playbook {target.playbook}, step {target.step}"
