"""The engine: facts, answers and overrides in; a walk transcript out. Pure, no I/O.

``walk`` is recomputed from scratch whenever facts, answers or overrides change; it builds one
CEL context per call and evaluates the compiled conditions against it (microseconds each).

At each step, branches are tried in order:

* TRUE: the branch is taken; the visit cites the evidence lines behind every fact path the
  condition reads, plus the branch's ``cite`` paths;
* FALSE: the next branch is tried;
* UNKNOWN (the condition reads a fact group that could not be built, or fails at run time):
  with ``if_unknown: skip`` the next branch is tried, and in a step with ``ask`` the SRE is
  asked; otherwise the walk stops with an explicit ``undetermined`` finding that says what to
  collect next. Unknown is never read as false.

When no branch holds, ``otherwise`` is taken; an ``ask`` step asks the SRE instead (the walk
waits in ``Transcript.question`` until ``answers`` holds a choice); with neither, the walk ends
undetermined. An override (``"playbook/step" -> target``) replaces whatever the engine chose
there and is recorded as such. A step visited twice ends the walk with a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gputriage.facts.lineref import LineRef
from gputriage.facts.model import FactSet
from gputriage.playbook.conditions import Budget, Condition, Evaluation, Truth, new_context
from gputriage.playbook.fix_render import render_command
from gputriage.playbook.model import (
    UNDETERMINED,
    FindingSpec,
    FixSpec,
    Playbook,
    PlaybookSet,
    Step,
    Target,
)
from gputriage.playbook.templating import render
from gputriage.playbook.transcript import (
    Alternative,
    Choice,
    Finding,
    Fix,
    Outcome,
    Question,
    Transcript,
    Visit,
)

if TYPE_CHECKING:
    import cel


def walk(
    playbooks: PlaybookSet,
    facts: FactSet,
    answers: Mapping[str, str] | None = None,
    overrides: Mapping[str, str] | None = None,
    entry: str | None = None,
) -> Transcript:
    """Walk from the entry playbook (by route, unless ``entry`` names one) to a conclusion.

    ``entry`` may be a playbook id or ``playbook/step``. Never raises for facts, answers or
    overrides it cannot use: those become warnings in the transcript.
    """
    walker = _Walker(playbooks, facts, dict(answers or {}), dict(overrides or {}))
    return walker.run(entry)


@dataclass
class _Walker:
    playbooks: PlaybookSet
    facts: FactSet
    answers: dict[str, str]
    overrides: dict[str, str]
    visits: list[Visit] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)
    cel_context: cel.Context | None = None
    budget: Budget | None = None  # the walk's CEL run-time budget
    unknown: dict[str, str] = field(default_factory=dict)  # unknown group -> reason
    unknown_groups: frozenset[str] = frozenset()
    _sites: dict[str, str] = field(default_factory=dict)

    def run(self, entry: str | None) -> Transcript:
        self.context = self.facts.to_context()
        self.unknown = {
            name: g.reason or "not collected"
            for name, g in self.facts.groups.items()
            if not g.known
        }
        for group in sorted(_groups_read(self.playbooks) - set(self.context)):
            # Playbooks may read groups this snapshot has no builder for: unknown, not an error.
            reason = "no facts were built for this group"
            self.context[group] = {"known": False, "reason": reason}
            self.unknown[group] = reason
        self.unknown_groups = frozenset(self.unknown)
        self.cel_context = new_context(self.context)
        self.budget = Budget(self.context)
        self._check_refs()
        start, entry_reason = self._entry(entry)
        if start is None:
            finding = self._undetermined("", "", entry_reason, self._route_unknowns())
            return Transcript(
                entry="",
                findings=(finding,),
                warnings=tuple(self.warnings),
                entry_reason=entry_reason,
            )
        ended, question = self._walk_from(start)
        walked = Transcript(
            entry=start.partition("/")[0],
            visits=tuple(self.visits),
            findings=(ended,) if ended else (),
            question=question,
            warnings=tuple(self.warnings),
            entry_reason=entry_reason,
        )
        return self._differential(walked)

    # -- the differential -------------------------------------------------------------------

    def _differential(self, walked: Transcript) -> Transcript:
        """Weigh every finding against the evidence, and hold the walk's verdict to it.

        A verdict whose ``requires`` is false, or that a ``ruled_out_by`` rule fires against,
        is withdrawn (unless the SRE chose it by override); a walk that ends undetermined or
        at a question proposes the best-supported consistent finding instead.
        """
        consistent: list[tuple[int, int, Alternative]] = []
        ruled_out: dict[str, Alternative] = {}
        required: dict[str, Truth] = {}
        unproposable: set[str] = set()
        for order, spec in enumerate(self.playbooks.findings()):
            rule = self._ruling_out(spec)
            if rule is not None:
                ruled_out[spec.id] = rule
                continue
            if not spec.requires:
                continue
            truth, held = self._requires(spec)
            required[spec.id] = truth
            if truth is Truth.TRUE and held is not None:
                if not spec.propose or spec.severity == "info":
                    unproposable.add(spec.id)
                alt = Alternative(
                    spec.id,
                    self._text(spec.title),
                    spec.severity,
                    "possible",
                    "the evidence it requires holds",
                    self._citations(held, ()),
                    self._site(spec.id),
                    " ".join(held.source.split()),
                )
                consistent.append((-len(set(held.paths)), order, alt))
        consistent.sort(key=lambda t: (t[0], t[1]))
        ranked = [alt for _, _, alt in consistent]
        proposable = [a for a in ranked if a.id not in unproposable]
        verdict = walked.findings[0] if walked.findings else None
        # The SRE's own choice (an override or an answer) is evidence the differential cannot
        # see: such a verdict is kept, with the differential shown beside it.
        overridden = bool(self.visits) and self.visits[-1].outcome in (
            Outcome.OVERRIDE,
            Outcome.ANSWER,
        )
        findings = walked.findings
        confidence = ""
        if verdict is not None and not verdict.undetermined:
            rule = ruled_out.get(verdict.id)
            verdict_truth = required.get(verdict.id)
            if overridden:
                confidence = "likely" if verdict_truth is Truth.TRUE else "possible"
            elif rule is not None or verdict_truth is Truth.FALSE:  # withdrawn
                why = rule.because if rule is not None else "the evidence it requires does not hold"
                self.warnings.append(f"the walk reached '{verdict.id}', but it is withdrawn: {why}")
                proposal, confidence = self._propose_from(proposable)
                findings = (
                    (proposal,)
                    if proposal
                    else (
                        self._undetermined(
                            f"{verdict.playbook}/{verdict.step}",
                            "",
                            f"the walk reached '{verdict.id}', but the evidence rules it out "
                            f"({why})",
                            (),
                        ),
                    )
                )
            elif verdict_truth is Truth.TRUE:
                doubtful = any(
                    v.outcome in (Outcome.OTHERWISE, Outcome.UNKNOWN) for v in self.visits
                )
                confidence = "likely" if doubtful else "certain"
            else:
                confidence = "possible"
        elif proposable and (verdict is None or verdict.undetermined):
            proposal, confidence = self._propose_from(proposable)
            if proposal is not None:
                findings = (proposal,)
        first = findings[0].id if findings else ""
        return replace(
            walked,
            findings=findings,
            warnings=tuple(self.warnings),
            confidence=confidence,
            consistent=tuple(a for a in ranked if a.id != first),
            ruled_out=tuple(ruled_out.values()),
        )

    def _requires(self, spec: FindingSpec) -> tuple[Truth, Condition | None]:
        """Any-of over the alternatives: TRUE (with the one that held), FALSE, or UNKNOWN."""
        unknown = False
        for condition in spec.requires:
            truth = self._evaluate(condition, f"requires of finding '{spec.id}'").truth
            if truth is Truth.TRUE:
                return truth, condition
            unknown = unknown or truth is Truth.UNKNOWN
        return (Truth.UNKNOWN if unknown else Truth.FALSE), None

    def _ruling_out(self, spec: FindingSpec) -> Alternative | None:
        for rule in spec.ruled_out_by:
            result = self._evaluate(rule.when, f"ruled_out_by of finding '{spec.id}'")
            if result.truth is Truth.TRUE:
                return Alternative(
                    spec.id,
                    self._text(spec.title),
                    spec.severity,
                    "",
                    self._text(rule.because),
                    self._citations(rule.when, rule.cite),
                    self._site(spec.id),
                    " ".join(rule.when.source.split()),
                )
        return None

    def _propose_from(self, proposable: list[Alternative]) -> tuple[Finding | None, str]:
        """The best-supported consistent finding, as if the walk had reached it, and its
        confidence (``likely`` without a rival, else ``possible``).

        Only findings the walk could still reach from where it stopped, within that step's
        playbook, are candidates, so a proposal answers the question the walk was asking and
        never an unrelated one.
        """
        stop = self.visits[-1].ref if self.visits else ""
        reachable = self._reachable(stop) if stop else set()
        candidates = [a for a in proposable if a.id in reachable]
        if not candidates:
            return None, ""
        best = candidates[0]
        pid, _, sid = best.branch.partition("/")
        book = self.playbooks.get(pid)
        step = book.steps.get(sid) if book else None
        if book is None or step is None:
            return None, ""
        finding = self._finding(best.id, book, step)
        self.warnings.append(
            f"the walk did not conclude; the evidence supports '{best.id}' "
            f"(reached from '{best.branch}')"
        )
        evidence = tuple(dict.fromkeys((*best.evidence, *finding.evidence)))
        return replace(finding, evidence=evidence), "likely" if len(candidates) == 1 else "possible"

    def _reachable(self, start: str) -> set[str]:
        """Findings reachable from step ``start`` without leaving its playbook."""
        found: set[str] = set()
        seen: set[str] = set()
        todo = [start]
        book = start.partition("/")[0]
        while todo:
            ref = todo.pop()
            if ref in seen:
                continue
            seen.add(ref)
            step = self.playbooks.step(ref)
            for target in step.targets() if step is not None else ():
                if target.conclude:
                    found.add(target.raw)
                elif target.playbook == book:
                    todo.append(f"{target.playbook}/{target.step}")
        return found

    def _site(self, fid: str) -> str:
        """The first ``playbook/step`` whose branch, otherwise or choice concludes ``fid``."""
        if not self._sites:
            for book in self.playbooks:
                for sid, step in book.steps.items():
                    for target in step.targets():
                        if target.conclude:
                            self._sites.setdefault(target.raw, f"{book.id}/{sid}")
        return self._sites.get(fid, "")

    # -- entry ------------------------------------------------------------------------------

    def _entry(self, entry: str | None) -> tuple[str | None, str]:
        """(``playbook/step`` to start at, why); None when nothing fits."""
        if entry:
            pid, _, sid = entry.partition("/")
            book = self.playbooks.get(pid)
            if book is None or (sid and sid not in book.steps):
                self.warnings.append(f"entry '{entry}' names no loaded playbook or step")
                return None, f"no playbook or step named '{entry}' is loaded"
            return f"{pid}/{sid or book.start}", f"chosen by the caller: {entry}"
        best: tuple[int, int, Playbook, str] | None = None
        for order, book in enumerate(self.playbooks):
            for route in book.routes:
                result = self._evaluate(route.when, f"route of playbook '{book.id}'")
                if result.truth is not Truth.TRUE:
                    continue
                key = (route.priority, -order)
                if best is None or key > (best[0], best[1]):
                    because = self._text(route.because) or route.when.source
                    best = (route.priority, -order, book, because)
        if best is None:
            return None, "no playbook's route matches these facts"
        return f"{best[2].id}/{best[2].start}", best[3]

    def _route_unknowns(self) -> tuple[str, ...]:
        groups = {
            g
            for book in self.playbooks
            for r in book.routes
            for g in r.when.groups
            if g in self.unknown
        }
        return tuple(self._collect(g) for g in sorted(groups))

    # -- walking ----------------------------------------------------------------------------

    def _walk_from(self, ref: str) -> tuple[Finding | None, Question | None]:
        seen: set[str] = set()  # each step at most once, so every walk ends
        while True:
            if ref in seen:
                self.warnings.append(
                    f"loop: step '{ref}' was reached twice; the walk stops "
                    "there (a playbook bug, or overrides that go in circles)"
                )
                return self._undetermined(ref, "", f"the walk reached '{ref}' twice", ()), None
            seen.add(ref)
            pid, _, sid = ref.partition("/")
            book = self.playbooks.get(pid)
            step = book.steps.get(sid) if book else None
            if book is None or step is None:
                self.warnings.append(f"step '{ref}' does not exist")
                return self._undetermined(ref, "", f"step '{ref}' does not exist", ()), None
            visit, target = self._decide(book, step)
            self.visits.append(visit)
            if visit.outcome is Outcome.WAITING:
                return None, self._question(step, visit)
            if target is None:
                return self._undetermined_at(book, step, visit), None
            if target.conclude:
                return self._finding(target.raw, book, step), None
            ref = target.ref

    def _decide(self, book: Playbook, step: Step) -> tuple[Visit, Target | None]:
        """The visit of ``step`` and where it leads (None: undetermined or waiting)."""
        ref = f"{book.id}/{step.id}"
        choices = self._choices(step)
        needs_unknown = tuple(g for g in step.needs if g in self.unknown)
        base = Visit(
            ref=ref,
            playbook=book.id,
            step=step.id,
            prompt=self._text(step.prompt),
            outcome=Outcome.UNKNOWN,
            target="",
            choices=choices,
            unknown_facts=needs_unknown,
        )
        proposed, visit = self._propose(step, base)
        override = self.overrides.get(ref)
        if override is not None:
            target = self._override_target(book, ref, override)
            if target is not None:
                return _replace_visit(
                    visit,
                    outcome=Outcome.OVERRIDE,
                    target=target.ref,
                    proposed=proposed.ref if proposed else visit.target,
                    because=f"overridden by the SRE (the engine proposed: "
                    f"{visit.because or visit.outcome.value})",
                ), target
        return visit, proposed

    def _propose(self, step: Step, base: Visit) -> tuple[Target | None, Visit]:
        unknown: list[str] = list(base.unknown_facts)
        for branch in step.branches:
            result = self._evaluate(branch.when, f"step '{base.ref}'")
            unknown += result.unknown_groups
            truth = result.truth
            if truth is Truth.TRUE:
                cites = self._citations(branch.when, branch.cite)
                return branch.target, _replace_visit(
                    base,
                    outcome=Outcome.CONDITION,
                    target=branch.target.ref,
                    because=self._text(branch.because),
                    condition=branch.when.source,
                    citations=cites,
                    unknown_facts=tuple(dict.fromkeys(unknown)),
                )
            # Unknown stops the walk, unless the branch says skip or the SRE can be asked.
            if truth is Truth.UNKNOWN and branch.if_unknown != "skip" and step.ask is None:
                return None, _replace_visit(
                    base,
                    outcome=Outcome.UNKNOWN,
                    target=f"finding:{UNDETERMINED}",
                    because=self._cannot_decide(result),
                    condition=branch.when.source,
                    unknown_facts=tuple(dict.fromkeys(unknown)),
                )
        unknown_facts = tuple(dict.fromkeys(unknown))
        if step.ask is not None:
            answer = self.answers.get(base.ref)
            choice = next((c for c in step.ask.choices if c.value == answer), None)
            if answer is not None and choice is None:
                values = ", ".join(c.value for c in step.ask.choices)
                self.warnings.append(f"answer '{answer}' for '{base.ref}' is not one of: {values}")
            if choice is None:
                return None, _replace_visit(
                    base, outcome=Outcome.WAITING, unknown_facts=unknown_facts
                )
            return choice.target, _replace_visit(
                base,
                outcome=Outcome.ANSWER,
                target=choice.target.ref,
                because=f"answered: {self._text(choice.label)}",
                unknown_facts=unknown_facts,
            )
        if step.otherwise is not None:
            return step.otherwise.target, _replace_visit(
                base,
                outcome=Outcome.OTHERWISE,
                target=step.otherwise.target.ref,
                because=self._text(step.otherwise.because) or "no branch condition held",
                unknown_facts=unknown_facts,
            )
        return None, _replace_visit(
            base,
            outcome=Outcome.UNKNOWN,
            target=f"finding:{UNDETERMINED}",
            because="no branch condition held and the step has no 'otherwise'",
            unknown_facts=unknown_facts,
        )

    def _evaluate(self, condition: Condition, where: str) -> Evaluation:
        assert self.cel_context is not None
        result = condition.evaluate(self.cel_context, self.unknown_groups, self.budget)
        if result.error:
            self.warnings.append(
                f"{where}: condition `{condition.source}` could not be evaluated: {result.error}"
            )
        return result

    def _cannot_decide(self, result: Evaluation) -> str:
        if result.error:
            return f"the condition could not be evaluated ({result.error})"
        groups = "; ".join(f"'{g}' ({self.unknown[g]})" for g in result.unknown_groups)
        return f"cannot decide: unknown fact group {groups}"

    # -- what the walk produces -------------------------------------------------------------

    def _choices(self, step: Step) -> tuple[Choice, ...]:
        if step.ask is not None:
            return tuple(
                Choice(c.value, self._text(c.label), c.target.ref) for c in step.ask.choices
            )
        out = [Choice(b.target.ref, self._text(b.because), b.target.ref) for b in step.branches]
        if step.otherwise is not None:
            t = step.otherwise.target
            out.append(Choice(t.ref, self._text(step.otherwise.because) or "otherwise", t.ref))
        return tuple(dict.fromkeys(out))

    def _override_target(self, book: Playbook, ref: str, value: str) -> Target | None:
        """The target an override names: ``finding:<id>``, ``step``, ``playbook[/step]``."""
        if value.startswith("finding:"):
            fid = value.removeprefix("finding:")
            if self.playbooks.finding(fid) is not None:
                return Target(fid, conclude=True)
        else:
            if "/" in value:
                pid, _, sid = value.partition("/")
            elif value in book.steps:
                pid, sid = book.id, value
            else:
                pid, sid = value, ""
            other = self.playbooks.get(pid)
            if other is not None and (sid or other.start) in other.steps:
                return Target(value, conclude=False, playbook=pid, step=sid or other.start)
        self.warnings.append(f"override for '{ref}' names no step or finding: '{value}'")
        return None

    def _question(self, step: Step, visit: Visit) -> Question:
        assert step.ask is not None
        return Question(
            visit.ref, self._text(step.ask.question), visit.choices, self._text(step.ask.help)
        )

    def _finding(self, fid: str, book: Playbook, step: Step) -> Finding:
        spec = self.playbooks.finding(fid)
        if spec is None:  # the loader checked; only a hand-built set can get here
            return self._undetermined(
                f"{book.id}/{step.id}", step.prompt, f"finding '{fid}' is not defined", ()
            )
        return Finding(
            id=spec.id,
            severity=spec.severity,
            title=self._text(spec.title),
            summary=self._text(spec.summary),
            fix=self._fix(spec.fix),
            references=spec.references,
            evidence=self._walk_citations(),
            playbook=book.id,
            step=step.id,
        )

    def _fix(self, spec: FixSpec) -> Fix:
        records = tuple(render_command(c, self.context) for c in spec.commands)
        return Fix(self._text(spec.summary), tuple(r.text for r in records if r.text), records)

    def _undetermined_at(self, book: Playbook, step: Step, visit: Visit) -> Finding:
        return self._undetermined(
            visit.ref,
            visit.prompt,
            visit.because,
            tuple(self._collect(g) for g in visit.unknown_facts),
        )

    def _undetermined(self, ref: str, prompt: str, why: str, collect: tuple[str, ...]) -> Finding:
        pid, _, sid = ref.partition("/")
        question = f" ({prompt})" if prompt else ""
        summary = f"The walk stopped at '{ref}'{question}: {why}." if ref else f"{why}."
        if collect:
            summary += " Collect the evidence listed below and run the triage again."
        return Finding(
            id=UNDETERMINED,
            severity="info",
            title="Undetermined: not enough evidence to decide",
            summary=summary,
            fix=Fix(
                "Collect what is missing (see collect_next), or answer/override the step "
                "if you know the answer."
            ),
            evidence=self._walk_citations(),
            playbook=pid,
            step=sid,
            undetermined=True,
            collect_next=collect,
        )

    def _collect(self, group: str) -> str:
        return f"{group}: {self.unknown.get(group) or 'no facts were built for this group'}"

    def _citations(self, condition: Condition, cite: tuple[str, ...]) -> tuple[LineRef, ...]:
        refs: dict[tuple[str, int, str], LineRef] = {}
        for path in (*condition.paths, *cite):
            for r in self.facts.citations(path):
                refs.setdefault((r.source, r.line, r.text), r)
        return tuple(refs.values())

    def _walk_citations(self) -> tuple[LineRef, ...]:
        """Evidence behind the whole walk: the last visit's lines first."""
        refs: dict[tuple[str, int, str], LineRef] = {}
        for visit in reversed(self.visits):
            for r in visit.citations:
                refs.setdefault((r.source, r.line, r.text), r)
        return tuple(refs.values())

    def _text(self, text: str) -> str:
        return render(text, self.context) if "{{" in text else text

    def _check_refs(self) -> None:
        for kind, pairs in (("answer", self.answers), ("override", self.overrides)):
            for ref in pairs:
                if self.playbooks.step(ref) is None:
                    self.warnings.append(f"{kind} for '{ref}': no such step (use playbook/step)")


def _groups_read(playbooks: PlaybookSet) -> set[str]:
    """Every fact group any condition or ``needs`` of the set mentions."""
    groups: set[str] = set()
    for book in playbooks:
        conditions = [r.when for r in book.routes]
        for step in book.steps.values():
            groups.update(step.needs)
            conditions += [b.when for b in step.branches]
        for spec in book.findings.values():
            conditions += [r.when for r in spec.ruled_out_by]
            conditions += list(spec.requires)
        for condition in conditions:
            groups.update(ref.group for ref in condition.refs)
    return groups


def _replace_visit(visit: Visit, **changes: Any) -> Visit:
    return replace(visit, **changes)
