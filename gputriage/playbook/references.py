"""References between steps, playbooks and findings, checked on a whole set of playbooks.

For each playbook: ``start`` names a step; every ``goto`` names a step of the same playbook, a
playbook (its start step) or ``playbook/step``; every ``conclude`` names a finding of some
playbook; every step is reachable from ``start``; every finding is concluded by some branch;
finding ids are unique across playbooks.

A shipped playbook can only break here because a user playbook overrides one it refers to (and
dropped the step or finding it needs). The blame then goes to the override, so the user's file
is reported and skipped, and the shipped playbooks keep working.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from gputriage.playbook.model import Ask, AskChoice, Otherwise, Playbook, Step, Target
from gputriage.playbook.parse import ParsedFile
from gputriage.playbook.problems import Problem, did_you_mean
from gputriage.playbook.source_map import YamlPath


@dataclass(frozen=True)
class Blame:
    """A problem, and the id of the playbook to drop because of it."""

    culprit: str
    problem: Problem


def check_references(
    books: Mapping[str, ParsedFile], shipped: Mapping[str, ParsedFile]
) -> list[Blame]:
    """Every broken reference in ``books`` (id -> parsed file with a playbook).

    ``shipped`` holds the shipped originals of playbooks that user files override; a finding
    concluded only by a shipped original still counts as used.
    """
    blames: list[Blame] = []
    all_findings: dict[str, str] = {}
    for pid, pf in books.items():
        for fid in _playbook(pf).findings:
            other = all_findings.get(fid)
            if other is not None:
                other_file = books[other].file
                blames.append(
                    Blame(
                        pid,
                        pf.smap.problem(
                            ("findings", fid),
                            f"finding id '{fid}' is already defined in playbook "
                            f"'{other}' ({other_file})",
                            at_key=True,
                        ),
                    )
                )
            else:
                all_findings[fid] = pid
    concluded = {
        t.raw for pf in [*books.values(), *shipped.values()] for _, t in pf.sites if t.conclude
    }
    for pid, pf in books.items():
        blames += _check_one(pid, pf, books, shipped, all_findings, concluded)
    return blames


def resolve(pf: ParsedFile, books: Mapping[str, ParsedFile]) -> Playbook:
    """The playbook of ``pf`` with every goto resolved to ``playbook/step``."""
    book = _playbook(pf)

    def fix(t: Target) -> Target:
        if t.conclude:
            return t
        pid, sid = _split(t.raw, book, books)
        return replace(t, playbook=pid, step=sid)

    def fix_step(step: Step) -> Step:
        branches = tuple(replace(b, target=fix(b.target)) for b in step.branches)
        otherwise = (
            Otherwise(fix(step.otherwise.target), step.otherwise.because)
            if step.otherwise
            else None
        )
        ask = (
            Ask(
                step.ask.question,
                tuple(AskChoice(c.value, c.label, fix(c.target)) for c in step.ask.choices),
                step.ask.help,
            )
            if step.ask
            else None
        )
        return replace(step, branches=branches, otherwise=otherwise, ask=ask)

    return replace(book, steps={sid: fix_step(s) for sid, s in book.steps.items()})


def _playbook(pf: ParsedFile) -> Playbook:
    assert pf.playbook is not None, "only parsed files with a playbook are cross-checked"
    return pf.playbook


def _split(raw: str, book: Playbook, books: Mapping[str, ParsedFile]) -> tuple[str, str]:
    """``(playbook, step)`` a goto names; a step of this playbook wins over a playbook id."""
    if "/" in raw:
        pid, _, sid = raw.partition("/")
        return pid, sid
    if raw in book.steps:
        return book.id, raw
    other = books.get(raw)
    if other is not None and other.playbook is not None:
        return raw, other.playbook.start
    return book.id, raw


def _check_one(
    pid: str,
    pf: ParsedFile,
    books: Mapping[str, ParsedFile],
    shipped: Mapping[str, ParsedFile],
    all_findings: Mapping[str, str],
    concluded: set[str],
) -> list[Blame]:
    book = _playbook(pf)
    out: list[Blame] = []

    def blame_here(path: YamlPath, message: str, hint: str = "", at_key: bool = False) -> None:
        out.append(Blame(pid, pf.smap.problem(path, message, hint, at_key=at_key)))

    if book.start not in book.steps:
        blame_here(
            ("start",),
            f"'start' names a step that does not exist: '{book.start}'",
            did_you_mean(book.start, book.steps),
        )
    for path, target in pf.sites:
        if target.conclude:
            if target.raw in all_findings and len(path) > 1 and path[-2] == "otherwise":
                spec = _playbook(books[all_findings[target.raw]]).findings[target.raw]
                if not spec.requires or any(c.source.strip() == "true" for c in spec.requires):
                    blame_here(
                        path,
                        f"'otherwise' concludes '{target.raw}' without evidence: "
                        "that finding declares no 'requires'",
                        "give the finding a 'requires' condition (the evidence it "
                        "needs), or make 'otherwise' go to a step that checks it",
                    )
            if target.raw not in all_findings:
                override = _override_defining_finding(target.raw, books, shipped)
                if book.shipped and override:
                    out.append(
                        _blame_override(
                            override, books, pf, path, f"finding '{target.raw}'", "concludes"
                        )
                    )
                else:
                    blame_here(
                        path,
                        f"'conclude' names a finding that does not exist: '{target.raw}'",
                        did_you_mean(target.raw, all_findings),
                    )
            continue
        other_id, sid = _split(target.raw, book, books)
        other = books.get(other_id)
        if other is None or other.playbook is None:
            blame_here(
                path,
                f"'goto' names a playbook that does not exist: '{other_id}'",
                did_you_mean(other_id, books),
            )
            continue
        if sid not in other.playbook.steps:
            if book.shipped and not other.playbook.shipped and other_id in shipped:
                out.append(_blame_override(other_id, books, pf, path, f"step '{sid}'", "goes to"))
                continue
            candidates = list(other.playbook.steps)
            if "/" not in target.raw:
                candidates += list(books)
            what = "a step" if "/" not in target.raw else f"a step of '{other_id}'"
            blame_here(
                path,
                f"'goto' names {what} that does not exist: '{sid}'",
                did_you_mean(sid, candidates),
            )
            continue
        step_id = path[1] if len(path) > 1 and path[0] == "steps" else ""
        if other_id == pid and sid == step_id:
            blame_here(path, f"'goto' leads back to step '{sid}' itself: the walk would loop")
    for sid in _unreachable(book, pf.sites) if book.start in book.steps else ():
        blame_here(
            ("steps", sid),
            f"step '{sid}' is not reachable from 'start' ('{book.start}')",
            at_key=True,
        )
    for fid in book.findings:
        if fid not in concluded:
            blame_here(
                ("findings", fid), f"finding '{fid}' is never concluded by any branch", at_key=True
            )
    return out


def _unreachable(book: Playbook, sites: list[tuple[YamlPath, Target]]) -> list[str]:
    edges: dict[str, set[str]] = {sid: set() for sid in book.steps}
    for path, target in sites:
        if target.conclude or len(path) < 2 or path[0] != "steps":
            continue
        raw = target.raw
        local = raw.partition("/")[2] if raw.startswith(f"{book.id}/") else raw
        if local in book.steps:
            edges[str(path[1])].add(local)
    seen: set[str] = set()
    todo = [book.start] if book.start in book.steps else []
    while todo:
        sid = todo.pop()
        if sid not in seen:
            seen.add(sid)
            todo += sorted(edges[sid] - seen)
    return [sid for sid in book.steps if sid not in seen]


def _override_defining_finding(
    fid: str, books: Mapping[str, ParsedFile], shipped: Mapping[str, ParsedFile]
) -> str:
    """The id of a user override whose shipped original defines ``fid`` ("" when none)."""
    for pid, original in shipped.items():
        if (
            original.playbook
            and fid in original.playbook.findings
            and pid in books
            and not _playbook(books[pid]).shipped
        ):
            return pid
    return ""


def _blame_override(
    override: str,
    books: Mapping[str, ParsedFile],
    referrer: ParsedFile,
    path: YamlPath,
    what: str,
    verb: str,
) -> Blame:
    """Blame the user file overriding ``override`` for a shipped playbook's broken reference."""
    pf = books[override]
    ref = referrer.smap.problem(path, "")
    return Blame(
        override,
        pf.smap.problem(
            ("id",),
            f"overrides shipped playbook '{override}' but has no {what}, which shipped "
            f"playbook '{_playbook(referrer).id}' {verb} ({ref.where})",
        ),
    )
