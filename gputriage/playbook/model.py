"""The playbook format (``format_version: 1``): its shape, and the compiled objects.

:data:`SHAPES` declares every object of the format once: its keys, their kinds, which are
required, and a doc string. The loader validates YAML against it (unknown keys get a "did you
mean"), and :mod:`gputriage.playbook.schema` turns the same table into the JSON Schema that
editors use. ``docs/playbooks.md`` is the prose reference for the same format.

The dataclasses below are what a loaded playbook becomes: conditions compiled, targets resolved
to ``playbook/step`` or a finding id. They are immutable; the engine only reads them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from gputriage.playbook.conditions import Condition
from gputriage.playbook.problems import Problem

FORMAT_VERSION = 1
SEVERITIES = ("critical", "high", "medium", "low", "info")
MATURITIES = ("stable", "beta", "experimental")
IF_UNKNOWN = ("stop", "skip")
#: Where a fix command runs: the SRE's machine, the GPU node (rendered ``ssh NODE ...``), or
#: against the cluster's API (kubectl, helm).
RUN_WHERE = ("local", "node", "cluster")
#: Playbook and step ids: kebab-case.
ID_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"
#: Finding ids: ``family.kebab-case`` (``pending.insufficient-gpu``).
FINDING_ID_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*\.[a-z0-9]+(-[a-z0-9]+)*$"
#: Answer values: what an SRE types after ``--answer STEP=``.
CHOICE_VALUE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$"
#: The finding id the engine uses when evidence is insufficient to decide.
UNDETERMINED = "undetermined"


@dataclass(frozen=True)
class KeySpec:
    """One key of an object in the format.

    ``kind`` is ``string``, ``text`` (a string that may hold ``{{fact.path}}`` templates),
    ``cel`` (a CEL condition), ``integer``, ``strings`` (a list of strings), ``object:NAME``,
    ``list:NAME`` (a list of NAME objects) or ``map:NAME`` (id -> NAME object).
    """

    kind: str
    doc: str
    required: bool = False
    enum: tuple[str, ...] = ()
    pattern: str = ""
    default: object = None


@dataclass(frozen=True)
class Shape:
    """An object of the format: its keys, and keys of which exactly one must be present."""

    doc: str
    keys: Mapping[str, KeySpec]
    one_of: tuple[str, ...] = ()


_GOTO = KeySpec(
    "string",
    "Where the walk goes next: `step`, `other-playbook` (its start step) or `other-playbook/step`.",
)
_CONCLUDE = KeySpec(
    "string", "The finding id this concludes (`family.kebab-case`).", pattern=FINDING_ID_PATTERN
)

SHAPES: dict[str, Shape] = {
    "playbook": Shape(
        "A gputriage playbook: a diagnosis tree over facts.",
        {
            "format_version": KeySpec(
                "integer",
                "Version of this format; must be 1.",
                required=True,
                enum=(str(FORMAT_VERSION),),
            ),
            "id": KeySpec(
                "string",
                "Stable kebab-case id; a user playbook with the same id overrides the shipped one.",
                required=True,
                pattern=ID_PATTERN,
            ),
            "title": KeySpec("string", "One line for lists and headers.", required=True),
            "description": KeySpec("string", "What this playbook diagnoses, for authors."),
            "tags": KeySpec("strings", "Free-form tags (family, layer)."),
            "maturity": KeySpec(
                "string",
                "How much the verdicts can be trusted.",
                enum=MATURITIES,
                default="experimental",
            ),
            "routes": KeySpec("list:route", "Symptoms that make this the entry playbook."),
            "start": KeySpec("string", "The step the walk starts at.", required=True),
            "steps": KeySpec("map:step", "Steps by kebab-case id.", required=True),
            "findings": KeySpec("map:finding", "Findings (root causes) by global id."),
        },
    ),
    "route": Shape(
        "When this playbook is the place to start; the highest priority match wins.",
        {
            "when": KeySpec("cel", "CEL condition over facts.", required=True),
            "priority": KeySpec("integer", "Higher wins among matching routes.", default=0),
            "because": KeySpec("text", "Why these symptoms belong here, in plain words."),
        },
    ),
    "step": Shape(
        "One question of the diagnosis tree.",
        {
            "prompt": KeySpec(
                "text", "The question this step answers, for the SRE.", required=True
            ),
            "help": KeySpec("text", "More words for the SRE: what is being checked and why."),
            "needs": KeySpec(
                "strings", "Fact groups this step reads; unknown ones are recorded on the visit."
            ),
            "branches": KeySpec("list:branch", "Tried in order; the first that holds is taken."),
            "otherwise": KeySpec(
                "object:otherwise",
                "Taken when no branch holds. Absent: the walk ends undetermined.",
            ),
            "ask": KeySpec("object:ask", "Ask the SRE when no branch holds."),
        },
    ),
    "branch": Shape(
        "A condition and where it leads.",
        {
            "when": KeySpec("cel", "CEL condition over facts.", required=True),
            "because": KeySpec(
                "text", "The reason shown to the SRE when this branch is taken.", required=True
            ),
            "cite": KeySpec("strings", "Extra fact paths whose evidence lines to cite."),
            "if_unknown": KeySpec(
                "string",
                "When a fact group the condition reads is unknown: "
                "`stop` the walk undetermined (default) or `skip` "
                "to the next branch.",
                enum=IF_UNKNOWN,
                default="stop",
            ),
            "goto": _GOTO,
            "conclude": _CONCLUDE,
        },
        one_of=("goto", "conclude"),
    ),
    "otherwise": Shape(
        "Where the walk goes when no branch holds.",
        {
            "because": KeySpec("text", "The reason shown to the SRE."),
            "goto": _GOTO,
            "conclude": _CONCLUDE,
        },
        one_of=("goto", "conclude"),
    ),
    "ask": Shape(
        "A question for the SRE, when the evidence cannot decide.",
        {
            "question": KeySpec("text", "The question, in plain words.", required=True),
            "help": KeySpec("text", "How to find the answer."),
            "choices": KeySpec("list:choice", "The possible answers.", required=True),
        },
    ),
    "choice": Shape(
        "One answer to an ask step.",
        {
            "value": KeySpec(
                "string",
                "What `--answer STEP=VALUE` passes.",
                required=True,
                pattern=CHOICE_VALUE_PATTERN,
            ),
            "label": KeySpec("text", "The answer in words.", required=True),
            "goto": _GOTO,
            "conclude": _CONCLUDE,
        },
        one_of=("goto", "conclude"),
    ),
    "finding": Shape(
        "A root cause the walk can conclude.",
        {
            "requires": KeySpec(
                "cels",
                "The evidence that must hold for this finding, on its "
                "own (not relying on the path that leads here): a CEL "
                "condition, or a list of alternatives of which one must "
                "hold. The walk may conclude the finding only when it "
                "holds; the differential check may propose it when it "
                "holds and nothing rules it out.",
            ),
            "propose": KeySpec(
                "boolean",
                "Whether the differential check may propose this "
                "finding on its own evidence when the walk does not "
                "conclude (false for findings that need the SRE's "
                "answer, and for all-clear findings).",
                default=True,
            ),
            "ruled_out_by": KeySpec(
                "list:rule_out", "Evidence that rules this finding out, whatever the walk says."
            ),
            "severity": KeySpec("string", "How bad it is.", required=True, enum=SEVERITIES),
            "title": KeySpec("text", "One line naming the root cause.", required=True),
            "summary": KeySpec(
                "text", "What it means, for the on-call reader at 3 a.m.", required=True
            ),
            "fix": KeySpec("object:fix", "What to do about it.", required=True),
            "references": KeySpec("strings", "Links to upstream docs, issues, runbooks."),
        },
    ),
    "rule_out": Shape(
        "Evidence that contradicts a finding.",
        {
            "when": KeySpec(
                "cel",
                "CEL condition over facts; when it holds, the finding is ruled out.",
                required=True,
            ),
            "because": KeySpec(
                "text", "Why this evidence rules the finding out, in plain words.", required=True
            ),
            "cite": KeySpec("strings", "Extra fact paths whose evidence lines to cite."),
        },
    ),
    "fix": Shape(
        "What to do about a finding.",
        {
            "summary": KeySpec("text", "The remedy in words.", required=True),
            "commands": KeySpec(
                "list:command",
                "Commands to run, in order: look first, then "
                "act (cordon/drain before anything that puts a "
                "GPU back in service).",
            ),
        },
    ),
    "command": Shape(
        "One fix command, as data: where it runs and whether it changes anything.",
        {
            "cmd": KeySpec(
                "text",
                "The command; `{{group.field}}` templates are filled from "
                "facts and shell-quoted. A `run: node` command is written "
                "without `ssh`: the renderer adds `ssh NODE`.",
                required=True,
            ),
            "run": KeySpec(
                "string",
                "Where it runs: `local` (the SRE's machine), `node` (the "
                "GPU node, rendered `ssh NODE ...`) or `cluster` "
                "(kubectl/helm against the API).",
                required=True,
                enum=RUN_WHERE,
            ),
            "mutates": KeySpec(
                "boolean",
                "True when the command changes state (deletes, "
                "restarts, relabels, resets...). The loader refuses a "
                "known mutating verb without `mutates: true`; the TUI "
                "marks these and asks before copying one.",
                required=True,
            ),
            "why": KeySpec("text", "Why this command, and its caveat (what it disrupts)."),
            "order": KeySpec(
                "integer",
                "Position among the fix's commands (default: list order); lower runs first.",
            ),
            "if_unknown": KeySpec(
                "text",
                "The command to show instead when a fact `cmd` reads "
                "is unknown (same `run`, same `mutates`).",
            ),
        },
    ),
}


# -- compiled objects ----------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where a branch, an otherwise or a choice leads, as written and as resolved."""

    raw: str  # as written: "step", "playbook", "playbook/step", or a finding id
    conclude: bool  # True: ``raw`` is a finding id
    playbook: str = ""  # resolved (for goto)
    step: str = ""  # resolved (for goto)

    @property
    def ref(self) -> str:
        """``playbook/step`` or ``finding:<id>``: the form used in transcripts and overrides."""
        return f"finding:{self.raw}" if self.conclude else f"{self.playbook}/{self.step}"


@dataclass(frozen=True)
class Branch:
    when: Condition
    because: str
    target: Target
    cite: tuple[str, ...] = ()
    if_unknown: str = "stop"


@dataclass(frozen=True)
class Otherwise:
    target: Target
    because: str = ""


@dataclass(frozen=True)
class AskChoice:
    value: str
    label: str
    target: Target


@dataclass(frozen=True)
class Ask:
    question: str
    choices: tuple[AskChoice, ...]
    help: str = ""


@dataclass(frozen=True)
class Step:
    id: str
    prompt: str
    help: str = ""
    needs: tuple[str, ...] = ()
    branches: tuple[Branch, ...] = ()
    otherwise: Otherwise | None = None
    ask: Ask | None = None

    def targets(self) -> Iterator[Target]:
        """Every target this step can lead to, in file order."""
        for b in self.branches:
            yield b.target
        if self.otherwise is not None:
            yield self.otherwise.target
        if self.ask is not None:
            for c in self.ask.choices:
                yield c.target


@dataclass(frozen=True)
class CommandSpec:
    """One fix command as written in the playbook (templates not yet filled)."""

    cmd: str
    run: str = "local"  # local | node | cluster
    mutates: bool = False
    why: str = ""
    order: int = 0
    if_unknown: str = ""


@dataclass(frozen=True)
class FixSpec:
    summary: str
    commands: tuple[CommandSpec, ...] = ()


@dataclass(frozen=True)
class RuleOut:
    """Evidence that contradicts a finding: when ``when`` holds, the finding is ruled out."""

    when: Condition
    because: str
    cite: tuple[str, ...] = ()


@dataclass(frozen=True)
class FindingSpec:
    id: str
    severity: str
    title: str
    summary: str
    fix: FixSpec
    references: tuple[str, ...] = ()
    playbook: str = ""
    #: The positive evidence the finding needs: alternatives, one of which must hold.
    requires: tuple[Condition, ...] = ()
    ruled_out_by: tuple[RuleOut, ...] = ()
    propose: bool = True


@dataclass(frozen=True)
class Route:
    when: Condition
    priority: int = 0
    because: str = ""


@dataclass(frozen=True)
class Playbook:
    id: str
    title: str
    start: str
    steps: Mapping[str, Step]
    findings: Mapping[str, FindingSpec] = field(default_factory=dict)
    description: str = ""
    tags: tuple[str, ...] = ()
    maturity: str = "experimental"
    routes: tuple[Route, ...] = ()
    format_version: int = FORMAT_VERSION
    file: str = ""  # where it was loaded from
    shipped: bool = False  # True for the playbooks that come with gputriage


@dataclass(frozen=True)
class PlaybookSet:
    """Every loaded playbook by id, and the problems of those that were skipped."""

    playbooks: Mapping[str, Playbook] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()

    def __iter__(self) -> Iterator[Playbook]:
        return iter(self.playbooks.values())

    def __len__(self) -> int:
        return len(self.playbooks)

    def __contains__(self, playbook_id: object) -> bool:
        return playbook_id in self.playbooks

    def get(self, playbook_id: str) -> Playbook | None:
        return self.playbooks.get(playbook_id)

    def step(self, ref: str) -> Step | None:
        """The step at ``playbook/step`` (None when either does not exist)."""
        pid, _, sid = ref.partition("/")
        book = self.playbooks.get(pid)
        return book.steps.get(sid) if book else None

    def finding(self, finding_id: str) -> FindingSpec | None:
        for book in self.playbooks.values():
            spec = book.findings.get(finding_id)
            if spec is not None:
                return spec
        return None

    def findings(self) -> Iterator[FindingSpec]:
        for book in self.playbooks.values():
            yield from book.findings.values()

    def conditions(self) -> Iterator[Condition]:
        """Every condition, a playbook at a time: routes, branches, what findings require
        and what rules them out."""
        for book in self.playbooks.values():
            for route in book.routes:
                yield route.when
            for step in book.steps.values():
                for branch in step.branches:
                    yield branch.when
            for spec in book.findings.values():
                yield from spec.requires
                for rule in spec.ruled_out_by:
                    yield rule.when
