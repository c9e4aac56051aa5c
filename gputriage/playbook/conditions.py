"""CEL conditions: compiled once at load, evaluated against one context per facts snapshot.

CEL (the expression language of Kubernetes admission policies and DRA selectors) is safe and
side-effect free. We use the ``common-expression-language`` package's compiled module, loaded
on first use without the package's command-line tool (:mod:`gputriage.playbook.cel_runtime`).

Besides compiling, we read the *fact paths* a condition uses (``pod.phase``,
``kernel.xids``) straight from its source, skipping string literals, function and method names
and the variables bound by macros (the ``x`` in ``kernel.xids.exists(x, x.code == 79)``). The
loader checks those paths against the declared fact fields; the engine uses them to tell which
fact groups a condition reads (unknown groups make it UNKNOWN, not false) and which evidence
lines to cite.
"""

from __future__ import annotations

import enum
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gputriage.playbook.cel_runtime import cel_module

if TYPE_CHECKING:
    import cel

#: Macros whose first argument binds a variable: ``list.exists(x, pred)``.
MACROS = frozenset(
    {"all", "exists", "exists_one", "map", "filter", "transformList", "transformMap"}
)
#: Words that look like identifiers but are not variables.
RESERVED = frozenset(
    {
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    }
)
#: Fields every group has besides its declared ones; reading only these never makes a
#: condition unknown (``!kernel.known`` is how a playbook branches on missing evidence).
META_FIELDS = frozenset({"known", "reason"})

_TOKEN = re.compile(
    r"""(?P<string>[rRbB]{0,2}(?:\"\"\"(?:\\.|[^\\])*?\"\"\"|'''(?:\\.|[^\\])*?'''
                         |"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
      |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      |(?P<number>0[xX][0-9a-fA-F]+[uU]?|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[uU]?)
      |(?P<space>\s+)
      |(?P<punct>.)""",
    re.VERBOSE | re.DOTALL,
)
#: Limits on a condition, checked from its source before CEL sees it: CEL has no cost limit,
#: so a short condition can run for minutes, take gigabytes, or (a deep enough expression
#: tree) crash the process. Every shipped playbook is far inside them (docs/playbooks.md).
MAX_CONDITION_CHARS = 4096
#: Brackets (``(``, ``[``, ``{``) open at once.
MAX_NESTING = 16
#: Operators (``+``, ``&&``, ``==``, ``!``, ``?``...) in one condition.
MAX_OPERATORS = 64
#: Macros (``all``, ``exists``, ``map``...) inside one another, and in one condition.
MAX_MACRO_NESTING = 3
MAX_MACROS = 8
#: Macros over the same list inside one another (``x.all(a, x.all(b, ...))`` is 2).
MAX_SAME_LIST_NESTING = 2
#: Items of one list or map literal.
MAX_LITERAL_ITEMS = 64
_OPERATORS = frozenset(
    {"&&", "||", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "?"}
)
_OPEN = {"(": ")", "[": "]", "{": "}"}
_CEL_ERROR = re.compile(r"<input>:(\d+):(\d+): (.*)")

#: The run-time budget. CEL (this library) has no evaluation limit, and a condition inside
#: every load-time limit still multiplies list sizes it cannot know at load (700 Xids iterated
#: inside 700 Xids, each through a ``filter`` that copies the list, ran for minutes). Before a
#: condition runs, its cost is estimated from the real sizes of the lists it iterates: each
#: macro costs the product of the sizes of the lists around it, times a weight (``filter`` and
#: ``map`` build a new list: about 20 times an ``all``/``exists`` step, measured). Over
#: budget, the condition is UNKNOWN with the reason, never run. Units are about 2 us here.
MAX_CONDITION_COST = 1_000_000
MAX_WALK_COST = 5_000_000
#: Wall-clock budget of one walk's conditions; checked before each one runs.
MAX_WALK_SECONDS = 10.0
_MACRO_WEIGHT = {"filter": 20, "map": 20, "transformList": 20, "transformMap": 20}


@dataclass(frozen=True)
class Macro:
    """A macro call in a condition: the list it iterates and the macros it sits inside."""

    name: str
    range: str  # dotted path iterated ("kernel.xids"), "" when not a plain path
    outer: tuple[int, ...]  # indexes of the enclosing macros (their bodies hold this one)


@dataclass
class Budget:
    """The run-time cost budget of one walk over one facts snapshot (see
    :data:`MAX_CONDITION_COST`)."""

    variables: Mapping[str, Any]
    per_condition: int = MAX_CONDITION_COST
    per_walk: int = MAX_WALK_COST
    seconds: float = MAX_WALK_SECONDS
    spent: int = 0
    started: float = field(default_factory=time.monotonic)
    _sizes: dict[str, int] = field(default_factory=dict)
    _largest: int = -1

    def size(self, path: str) -> int:
        """Items in the list at ``path``; the largest list anywhere when it is not a fact
        path (a macro variable's field, a call's result)."""
        if path in self._sizes:
            return self._sizes[path]
        value: Any = self.variables
        for part in path.split(".") if path else ["\0"]:
            value = value.get(part) if isinstance(value, Mapping) else None
        n = len(value) if isinstance(value, list | dict | str) else self.largest()
        self._sizes[path] = n
        return n

    def largest(self) -> int:
        if self._largest < 0:
            self._largest = max(_list_sizes(self.variables), default=0)
        return self._largest

    def cost(self, macros: tuple[Macro, ...]) -> int:
        total = 0
        for m in macros:
            n = self.size(m.range) * _MACRO_WEIGHT.get(m.name, 1)
            for i in m.outer:
                n *= max(self.size(macros[i].range), 1)
            total += n
        return total


def _list_sizes(value: Any, depth: int = 0) -> Iterator[int]:
    if depth > 6:
        return
    if isinstance(value, list):
        yield len(value)
        for v in value[:64]:
            yield from _list_sizes(v, depth + 1)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _list_sizes(v, depth + 1)


class Truth(enum.Enum):
    TRUE = "true"
    FALSE = "false"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class FactRef:
    """A fact path read by a condition, and where it is written in the condition's source."""

    path: str  # "pod.phase", "kernel.latest_xid.pci", or just "pod"
    offset: int
    length: int

    @property
    def group(self) -> str:
        return self.path.partition(".")[0]

    @property
    def field(self) -> str:
        """The group's field (``phase`` for ``pod.phase.size()``); "" for a bare group."""
        return self.path.split(".")[1] if "." in self.path else ""


@dataclass(frozen=True)
class Evaluation:
    """The result of one condition: TRUE, FALSE or UNKNOWN, with why it is unknown."""

    truth: Truth
    unknown_groups: tuple[str, ...] = ()
    error: str = ""


class CelSyntaxError(ValueError):
    """A condition that does not compile; ``line``/``col`` are 1-based in its source."""

    def __init__(self, message: str, line: int, col: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col

    def offset_in(self, source: str) -> int:
        """The character offset of (line, col) in ``source``."""
        lines = source.split("\n")
        before = sum(len(text) + 1 for text in lines[: self.line - 1])
        return before + max(self.col - 1, 0)


class CelLimitError(CelSyntaxError):
    """A condition over one of the limits (:data:`MAX_CONDITION_CHARS` and friends)."""

    @classmethod
    def at(cls, source: str, offset: int, message: str) -> CelLimitError:
        line = source.count("\n", 0, offset) + 1
        col = offset - (source.rfind("\n", 0, offset) + 1) + 1
        return cls(message, line, col)


@dataclass(frozen=True, eq=False)
class Condition:
    """A CEL condition: its source, the fact paths and macros it reads, and its program.

    ``compiled`` is None for a condition that was checked and compiled by an earlier run
    (:func:`checked_condition`, from the playbook cache): its program is compiled the first
    time it runs.
    """

    source: str
    refs: tuple[FactRef, ...]
    compiled: cel.Program | None = field(default=None, repr=False)
    macros: tuple[Macro, ...] = ()

    @property
    def program(self) -> cel.Program:
        if self.compiled is None:
            object.__setattr__(self, "compiled", cel_module().compile(self.source))
        assert self.compiled is not None
        return self.compiled

    @property
    def paths(self) -> tuple[str, ...]:
        """Distinct fact paths read, in source order."""
        return tuple(dict.fromkeys(r.path for r in self.refs))

    @property
    def groups(self) -> tuple[str, ...]:
        """Fact groups whose fields (beyond ``known``/``reason``) the condition reads."""
        return tuple(dict.fromkeys(r.group for r in self.refs if r.field not in META_FIELDS))

    def evaluate(
        self, context: cel.Context, unknown_groups: frozenset[str], budget: Budget | None = None
    ) -> Evaluation:
        """TRUE or FALSE; UNKNOWN when it reads an unknown group, fails at run time, or would
        exceed ``budget`` (its estimated cost, the walk's cost or time).

        Never raises: a CEL run-time error (a missing key, a type mismatch, a bad regex) is
        reported in ``error`` and counts as unknown.
        """
        unknown = tuple(g for g in self.groups if g in unknown_groups)
        if unknown:
            return Evaluation(Truth.UNKNOWN, unknown)
        if budget is not None:
            over = self._over_budget(budget)
            if over:
                return Evaluation(Truth.UNKNOWN, (), over)
        try:
            value = self.program.execute(context)
        except Exception as exc:
            return Evaluation(Truth.UNKNOWN, (), _runtime_message(exc))
        if value is True:
            return Evaluation(Truth.TRUE)
        if value is False:
            return Evaluation(Truth.FALSE)
        return Evaluation(
            Truth.UNKNOWN, (), f"the condition gave {type(value).__name__} {value!r}, not a bool"
        )

    def _over_budget(self, budget: Budget) -> str:
        elapsed = time.monotonic() - budget.started
        if elapsed > budget.seconds:
            return (
                f"not run: the walk's time budget ({budget.seconds:g} s) is spent ({elapsed:.1f} s)"
            )
        cost = budget.cost(self.macros) if self.macros else 0
        if cost > budget.per_condition:
            return (
                f"not run: its estimated cost ({cost:,} steps over these facts' list "
                f"sizes) is over the budget of {budget.per_condition:,} per condition"
            )
        if budget.spent + cost > budget.per_walk:
            return f"not run: the walk's cost budget ({budget.per_walk:,} steps) is spent"
        budget.spent += cost
        return ""


def compile_condition(source: str) -> Condition:
    """Compile ``source``; raises :class:`CelSyntaxError` with the position CEL reports."""
    cel = cel_module()

    text = source.rstrip()
    check_limits(text)
    try:
        program = cel.compile(text)
    except Exception as exc:
        raise _syntax_error(str(exc)) from None
    # The tokenizer is ours; CEL's own variable list keeps it honest about what is a variable.
    variables = set(program.variables())
    refs = tuple(r for r in fact_refs(text) if r.group in variables)
    return Condition(text, refs, program, macros(text))


def checked_condition(
    source: str, refs: tuple[FactRef, ...], macro_calls: tuple[Macro, ...]
) -> Condition:
    """A condition :func:`compile_condition` accepted before (same source, same checker),
    rebuilt from what it found; CEL compiles it on first use."""
    return Condition(source.rstrip(), refs, None, macro_calls)


def check_limits(source: str) -> None:
    """Raise :class:`CelLimitError` where ``source`` is over a limit, at the offending token.

    Reads the source only (CEL's parser and evaluator are what deep or huge conditions break).
    """
    if len(source) > MAX_CONDITION_CHARS:
        raise CelLimitError.at(
            source,
            0,
            f"the condition is {len(source)} characters long: "
            f"at most {MAX_CONDITION_CHARS}; split it into steps",
        )
    tokens = [(m.lastgroup or "", m.group(), m.start()) for m in _TOKEN.finditer(source)]
    tokens = [t for t in tokens if t[0] != "space"]
    # Open brackets: (closing char, macro range or None, is a list/map literal, items so far);
    # a macro's range is the dotted path it iterates ("kernel.xids"), "" for anything else.
    stack: list[tuple[str, str | None, bool, int]] = []
    operators = macros = 0
    i = 0
    while i < len(tokens):
        kind, text, start = tokens[i]
        prev = tokens[i - 1] if i else ("", "", 0)
        if (
            kind == "punct"
            and i + 1 < len(tokens)
            and text + tokens[i + 1][1] in _OPERATORS
            and tokens[i + 1][2] == start + 1
        ):
            text = text + tokens[i + 1][1]
            i += 1
        if kind == "punct" and text in _OPERATORS:
            operators += 1
            if operators > MAX_OPERATORS:
                raise CelLimitError.at(
                    source,
                    start,
                    f"more than {MAX_OPERATORS} operators in one condition; split it into steps",
                )
        elif text in _OPEN:
            macro = None
            if (
                text == "("
                and i >= 2
                and prev[0] == "ident"
                and prev[1] in MACROS
                and tokens[i - 2][1] == "."
            ):
                macro = _macro_range(tokens, i - 2)
                _check_macro(source, prev, macro, [m for _, m, _, _ in stack if m is not None])
                macros += 1
                if macros > MAX_MACROS:
                    raise CelLimitError.at(
                        source,
                        prev[2],
                        f"more than {MAX_MACROS} macros in one condition; split it into steps",
                    )
            # '[' after an operand indexes it; otherwise it starts a list literal.
            literal = text == "{" or (
                text == "["
                and not (
                    (prev[0] in ("ident", "string", "number") and prev[1] not in RESERVED)
                    or prev[1] in (")", "]", "}")
                )
            )
            stack.append((_OPEN[text], macro, literal, 0))
            if len(stack) > MAX_NESTING:
                raise CelLimitError.at(
                    source, start, f"brackets nested more than {MAX_NESTING} deep"
                )
        elif stack and text == stack[-1][0]:
            stack.pop()
        elif text == "," and stack and stack[-1][2]:
            close, macro, literal, items = stack[-1]
            stack[-1] = (close, macro, literal, items + 1)
            if items + 1 >= MAX_LITERAL_ITEMS:
                raise CelLimitError.at(
                    source, start, f"a literal of more than {MAX_LITERAL_ITEMS} items"
                )
        i += 1


def macros(source: str) -> tuple[Macro, ...]:
    """Every macro call of ``source`` with the list it iterates and the macros around it."""
    tokens = [(m.lastgroup or "", m.group(), m.start()) for m in _TOKEN.finditer(source)]
    tokens = [t for t in tokens if t[0] != "space"]
    found: list[Macro] = []
    stack: list[int | None] = []  # per open bracket: the index of its macro, or None
    for i, (kind, text, _) in enumerate(tokens):
        if kind == "string":
            continue
        if text in _OPEN:
            index = None
            if (
                text == "("
                and i >= 2
                and tokens[i - 1][0] == "ident"
                and tokens[i - 1][1] in MACROS
                and tokens[i - 2][1] == "."
            ):
                outer = tuple(m for m in stack if m is not None)
                found.append(Macro(tokens[i - 1][1], _macro_range(tokens, i - 2), outer))
                index = len(found) - 1
            stack.append(index)
        elif text in _OPEN.values() and stack:
            stack.pop()
    return tuple(found)


def _macro_range(tokens: list[tuple[str, str, int]], dot: int) -> str:
    """The dotted path before ``tokens[dot]`` (the ``.`` of ``.all(``), or "".

    Through a chain of macros: ``kernel.xids.filter(z, p).all(`` iterates ``kernel.xids``
    (a filter never grows the list), so nesting limits and costs see through it."""
    if dot >= 1 and tokens[dot - 1][1] == ")":
        depth, j = 0, dot - 1
        while j >= 0:
            depth += {")": 1, "(": -1}.get(tokens[j][1], 0) if tokens[j][0] == "punct" else 0
            if depth == 0:
                break
            j -= 1
        if (
            j >= 2
            and tokens[j - 1][0] == "ident"
            and tokens[j - 1][1] in MACROS
            and tokens[j - 2][1] == "."
        ):
            return _macro_range(tokens, j - 2)
        return ""
    parts: list[str] = []
    j = dot - 1
    while j >= 0 and tokens[j][0] == "ident":
        parts.append(tokens[j][1])
        if j >= 1 and tokens[j - 1][1] == ".":
            j -= 2
            continue
        return ".".join(reversed(parts)) if j == 0 or tokens[j - 1][1] != "]" else ""
    return ""


def _check_macro(source: str, name: tuple[str, str, int], rng: str, open_: list[str]) -> None:
    """Refuse macros nested too deep, or iterating a list already iterated twice around them."""
    if len(open_) >= MAX_MACRO_NESTING:
        raise CelLimitError.at(
            source,
            name[2],
            f"'{name[1]}' nests macros more than "
            f"{MAX_MACRO_NESTING} deep: a walk could run for minutes",
        )
    if rng and open_.count(rng) >= MAX_SAME_LIST_NESTING:
        raise CelLimitError.at(
            source,
            name[2],
            f"'{name[1]}' iterates '{rng}' inside "
            f"{MAX_SAME_LIST_NESTING} macros over it already: a walk over a "
            "long list could run for minutes",
        )


def new_context(variables: dict[str, Any]) -> cel.Context:
    """One evaluation context for a facts snapshot (building it converts every value once)."""
    context: cel.Context = cel_module().Context(variables)
    return context


def fact_refs(source: str) -> tuple[FactRef, ...]:
    """Every ``group.field...`` path read by the condition, with its place in ``source``."""
    tokens = [(m.lastgroup or "", m.group(), m.start()) for m in _TOKEN.finditer(source)]
    tokens = [t for t in tokens if t[0] != "space"]
    bound = _macro_variables(tokens)
    refs: list[FactRef] = []
    i = 0
    while i < len(tokens):
        kind, text, start = tokens[i]
        prev = tokens[i - 1][1] if i else ""
        if (
            kind != "ident"
            or prev == "."
            or text in RESERVED
            or text in bound
            or _is_call(tokens, i)
        ):
            i += 1
            continue
        parts, end, j = [text], start + len(text), i + 1
        while (
            j + 1 < len(tokens)
            and tokens[j][1] == "."
            and tokens[j + 1][0] == "ident"
            and not _is_call(tokens, j + 1)
        ):
            parts.append(tokens[j + 1][1])
            end = tokens[j + 1][2] + len(tokens[j + 1][1])
            j += 2
        refs.append(FactRef(".".join(parts), start, end - start))
        i = j
    return tuple(refs)


def _is_call(tokens: list[tuple[str, str, int]], i: int) -> bool:
    return i + 1 < len(tokens) and tokens[i + 1][1] == "("


def _macro_variables(tokens: list[tuple[str, str, int]]) -> frozenset[str]:
    """Names bound by macros: the identifier right after ``.exists(`` and friends."""
    bound = set()
    for i in range(1, len(tokens) - 3):
        if (
            tokens[i - 1][1] == "."
            and tokens[i][1] in MACROS
            and tokens[i + 1][1] == "("
            and tokens[i + 2][0] == "ident"
            and tokens[i + 3][1] == ","
        ):
            bound.add(tokens[i + 2][1])
    return frozenset(bound)


def _syntax_error(text: str) -> CelSyntaxError:
    """The first ``<input>:L:C: message`` of CEL's error text, without its own caret lines."""
    for line in text.splitlines():
        m = _CEL_ERROR.search(line)
        if m:
            message = m.group(3).removeprefix("Syntax error: ")
            # ANTLR lists every token it could accept; past a few that is noise.
            message = re.sub(r" expecting \{[^}]{40,}\}", " expecting an operand", message)
            message = message.replace(
                "mismatched input '<EOF>' expecting", "the condition ends where CEL expects"
            )
            return CelSyntaxError(f"CEL syntax error: {message}", int(m.group(1)), int(m.group(2)))
    return CelSyntaxError(f"CEL syntax error: {text.strip()}", 1, 1)


def _runtime_message(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no such key: {exc.args[0] if exc.args else exc}"
    # One line: drop caret lines, join the rest, keep the first sentence (the rest is advice).
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip().strip("^")]
    text = " ".join(lines).split(". ", 1)[0].strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
