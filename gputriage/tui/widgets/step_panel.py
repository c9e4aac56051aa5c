"""The current step: its question, the branch the engine chose and why, and the cited lines.

At the verdict it shows the finding instead: what it means, and the evidence it rests on. Every
piece of text that came from the cluster (cited lines, reasons) is inert plain text; the cited
lines are highlighted where they are shown.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from gputriage.evidence.model import LineRef
from gputriage.playbook.transcript import Alternative, Finding, Outcome, Transcript, Visit
from gputriage.textsafe import inert, inert_line
from gputriage.tui import walkstate
from gputriage.tui.view import TriageView

Part = str | tuple[str, str]

OUTCOME_WORDS: dict[Outcome, str] = {
    Outcome.CONDITION: "a condition fired",
    Outcome.OTHERWISE: "no condition fired: the default branch",
    Outcome.ANSWER: "your answer",
    Outcome.OVERRIDE: "your choice",
    Outcome.UNKNOWN: "evidence to decide is missing",
    Outcome.WAITING: "needs your judgement",
}

SEVERITY_STYLES: dict[str, str] = {
    "critical": "bold $error",
    "high": "bold $error",
    "medium": "bold $warning",
    "low": "bold $secondary",
    "info": "bold $text-muted",
}


def cited_lines(refs: Iterable[LineRef]) -> list[Part]:
    """``source:line`` then the line itself, highlighted: the evidence shown in place."""
    parts: list[Part] = []
    for ref in refs:
        where = f"{ref.source}:{ref.line}" if ref.line else ref.source
        parts += [
            "\n  ",
            (inert_line(where), "$text-muted"),
            "  ",
            (inert_line(ref.text), "bold $text-warning on $warning-muted"),
        ]
    return parts


def step_content(view: TriageView, visit: Visit, transcript: Transcript) -> Content:
    n = len(transcript.visits)
    parts: list[Part] = [
        (
            f"Step {view.cursor + 1} of {n} · {inert_line(visit.ref)} · "
            f"{OUTCOME_WORDS[visit.outcome]}",
            "$text-muted",
        ),
        "\n",
        (inert_line(visit.prompt or visit.ref), "bold"),
        "\n",
    ]
    if view.cursor == 0 and transcript.entry_reason:
        parts += [
            ("Entered    ", "bold"),
            inert_line(f"{transcript.entry}, because {transcript.entry_reason}"),
            "\n",
        ]
    target = walkstate.describe_target(visit.target, transcript)
    if visit.outcome is Outcome.OVERRIDE:
        proposed = walkstate.describe_target(visit.proposed, transcript)
        parts += [
            ("Taken      ", "bold $warning"),
            inert_line(target),
            "\n",
            ("Engine     ", "bold"),
            inert_line(proposed),
            "\n",
        ]
    elif visit.outcome is Outcome.WAITING:
        parts += [("Waiting    ", "bold $accent"), "press a to answer:"]
        parts += [f"\n  • {inert_line(c.label)}" for c in visit.choices]
        parts.append("\n")
    else:
        parts += [("Next       ", "bold"), inert_line(target), "\n"]
    if visit.because:
        parts += [("Because    ", "bold"), inert(visit.because), "\n"]
    if visit.condition:
        parts += [("Condition  ", "bold"), (inert_line(visit.condition), "$text-accent"), "\n"]
    if visit.citations:
        parts += [("Evidence", "bold"), *cited_lines(visit.citations), "\n"]
    if visit.unknown_facts:
        parts += [("Unknown    ", "bold $warning"), inert_line(", ".join(visit.unknown_facts))]
        parts += [*_unknown_reasons(view, visit.unknown_facts), "\n"]
    if len(visit.choices) > 1 and not walkstate.is_ask(visit):
        parts += [(f"{len(visit.choices)} branches: o takes another.", "$text-muted")]
    return Content.assemble(*parts).rstrip()


def _unknown_reasons(view: TriageView, names: Iterable[str]) -> list[Part]:
    parts: list[Part] = []
    for name in names:
        group = view.facts.groups.get(name) if view.facts is not None else None
        if group is not None and group.reason:
            parts += ["\n  ", (f"{name}: ", "bold"), inert_line(group.reason)]
    return parts


def finding_parts(finding: Finding) -> list[Part]:
    severity = finding.severity.lower()
    parts: list[Part] = [
        (f" {severity.upper()} ", f"reverse {SEVERITY_STYLES.get(severity, 'bold')}"),
        "  ",
        (inert_line(finding.title), "bold"),
        "\n",
        (inert_line(finding.id), "$text-muted"),
    ]
    if finding.playbook or finding.step:
        parts.append(
            (f"  (from {inert_line(finding.playbook)}/{inert_line(finding.step)})", "$text-muted")
        )
    parts += ["\n\n", inert(finding.summary)]
    if finding.collect_next:
        parts += ["\n\n", ("Collect next", "bold underline")]
        parts += [f"\n  • {inert_line(c)}" for c in finding.collect_next]
    if finding.evidence:
        parts += ["\n\n", ("Evidence", "bold underline"), *cited_lines(finding.evidence)]
    if finding.references:
        parts += ["\n\n", ("References", "bold underline")]
        parts += [f"\n  {inert_line(r)}" for r in finding.references]
    return parts


def alternative_parts(alt: Alternative, open_: bool) -> list[Part]:
    """One other finding: id, title, how sure, why; its evidence when the list is open."""
    severity = alt.severity.lower()
    parts: list[Part] = [
        "\n  • ",
        (inert_line(alt.id), SEVERITY_STYLES.get(severity, "bold")),
        "  ",
        inert_line(alt.title),
    ]
    if alt.confidence:
        parts.append((f"  [{inert_line(alt.confidence)}]", "$text-muted"))
    if alt.because:
        parts += ["\n    ", (inert_line(alt.because), "italic")]
    if alt.branch:
        parts += ["\n    ", (f"reached by o at {inert_line(alt.branch)}", "$text-muted")]
    if open_:
        if alt.evidence:
            parts += [part if part != "\n  " else "\n      " for part in cited_lines(alt.evidence)]
        else:
            parts += ["\n      ", ("no cited lines", "$text-muted")]
    return parts


def differential_parts(transcript: Transcript, open_: bool) -> list[Part]:
    """ "Also consistent" and "ruled out" beside the verdict (``x`` opens their evidence)."""
    parts: list[Part] = []
    if transcript.confidence:
        parts += ["\n\n", ("Confidence ", "bold"), inert_line(transcript.confidence)]
    hint = "x hides their evidence" if open_ else "x shows their evidence"
    for label, alts in (
        ("Also consistent", transcript.consistent),
        ("Ruled out", transcript.ruled_out),
    ):
        if not alts:
            continue
        parts += [
            "\n\n",
            (f"{label} ({len(alts)})", "bold underline"),
            (f"  {hint}", "$text-muted"),
        ]
        for alt in alts:
            parts += alternative_parts(alt, open_)
    return parts


def verdict_content(transcript: Transcript, differential_open: bool = False) -> Content:
    label = "Undetermined" if transcript.undetermined else "Verdict"
    parts: list[Part] = [(label, "bold"), ("  ·  e exports the incident summary", "$text-muted")]
    for finding in transcript.findings:
        parts += ["\n\n", *finding_parts(finding)]
    parts += differential_parts(transcript, differential_open)
    return Content.assemble(*parts)


def panel_content(view: TriageView) -> Content:
    t = view.transcript
    if t is None:  # the verdict's skeleton: what the panel will hold, and what it waits for
        return Content.assemble(
            ("Verdict", "bold"), ("  ·  not yet", "$text-muted"), "\n", inert_line(view.walk_status)
        )
    if view.at_verdict:
        return verdict_content(t, view.differential_open)
    visit = view.visit
    if visit is None:
        reason = "; ".join(t.warnings) or "no playbook matched this pod yet"
        return Content.assemble(("Walk", "bold"), "\n", inert_line(reason))
    return step_content(view, visit, t)


class StepPanel(VerticalScroll, can_focus=False):
    """The step under the cursor, or the verdict."""

    ALLOW_MAXIMIZE = True  # ``f`` / ``z``: the whole screen for it

    view: reactive[TriageView | None] = reactive(None, always_update=True)

    def compose(self) -> ComposeResult:
        yield Static(id="step-text")

    def watch_view(self, view: TriageView | None) -> None:
        if view is not None and self.is_mounted:
            self.query_one("#step-text", Static).update(panel_content(view))
