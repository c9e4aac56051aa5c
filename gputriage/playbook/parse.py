"""One playbook file's data -> a :class:`Playbook`, or located problems.

Checks, in order, everything that can be checked inside one file: the shape (keys, kinds,
required keys, enums, id patterns, exactly one of ``goto``/``conclude``), that every CEL
condition compiles, that every fact path read by a condition, a ``cite``, a ``needs`` or a
``{{template}}`` is declared, and that templates in commands are not inside quotes. References
between steps, playbooks and findings are checked later, on the whole set
(:mod:`gputriage.playbook.references`), because they may cross files.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gputriage.playbook.conditions import CelSyntaxError, Condition, compile_condition
from gputriage.playbook.model import (
    FORMAT_VERSION,
    SHAPES,
    Ask,
    AskChoice,
    Branch,
    CommandSpec,
    FindingSpec,
    FixSpec,
    KeySpec,
    Otherwise,
    Playbook,
    Route,
    RuleOut,
    Step,
    Target,
)
from gputriage.playbook.mutating import mutating_reason
from gputriage.playbook.problems import Problem, did_you_mean
from gputriage.playbook.source_map import SourceMap, YamlPath
from gputriage.playbook.templating import literal_problem, quoted_templates, template_refs

_KIND_WORDS = {
    "string": "a string",
    "text": "a string",
    "cel": "a CEL condition (a string)",
    "integer": "an integer",
    "strings": "a list of strings",
    "cels": "a CEL condition or a non-empty list of them",
    "boolean": "true or false",
}


@dataclass
class ParsedFile:
    """A playbook file after per-file checks: the playbook (None when broken) and its sites."""

    file: str
    smap: SourceMap
    playbook: Playbook | None
    problems: list[Problem]
    #: Every goto/conclude as written, with the YAML path of its value.
    sites: list[tuple[YamlPath, Target]] = field(default_factory=list)
    #: The file's conditions as the checks compiled them (for the load cache to remember).
    conditions: list[Condition] = field(default_factory=list)


class FactPaths:
    """The declared fact paths (``group.field``) and their groups, for reference checks."""

    def __init__(self, paths: set[str]) -> None:
        self.paths = frozenset(paths)
        self.groups = frozenset(p.partition(".")[0] for p in paths)

    def problem(self, path: str) -> tuple[str, str] | None:
        """(message, hint) when ``path`` (``group[.field[...]]``) is not declared."""
        parts = path.split(".")
        if parts[0] not in self.groups:
            return f"unknown fact group '{parts[0]}'", did_you_mean(parts[0], self.groups)
        if len(parts) > 1:
            name = f"{parts[0]}.{parts[1]}"
            if name not in self.paths:
                return f"unknown fact '{name}'", did_you_mean(name, self.paths)
        return None


def parse_playbook(
    data: Any,
    smap: SourceMap,
    facts: FactPaths,
    *,
    shipped: bool = False,
    checked: dict[str, Condition] | None = None,
) -> ParsedFile:
    """Check one file's data and build its playbook.

    ``checked``: the conditions of this very data as an earlier run's checks found them
    (:func:`gputriage.playbook.load_cache.checked_conditions`): the playbook is built without
    checking again. Should one be missing, the data is checked in full after all.
    """
    if checked is not None and isinstance(data, dict):
        trusted = _Checker(smap, facts, checked)
        try:
            trusted.semantics(data)
            playbook, sites = _build(data, trusted.conditions, smap.file, shipped)
        except _NotChecked:
            pass
        else:
            return ParsedFile(smap.file, smap, playbook, [], sites)
    checker = _Checker(smap, facts)
    if not isinstance(data, dict):
        checker.add((), f"a playbook is a YAML mapping, got {_kind_of(data)}")
        return ParsedFile(smap.file, smap, None, checker.problems)
    version = data.get("format_version")
    if isinstance(version, int) and not isinstance(version, bool) and version != FORMAT_VERSION:
        checker.add(
            ("format_version",),
            f"unsupported format_version {version}: this "
            f"gputriage reads format_version {FORMAT_VERSION}",
        )
        return ParsedFile(smap.file, smap, None, checker.problems)
    checker.shape(data, "playbook", (), "the playbook")
    checker.semantics(data)
    if checker.problems:
        return ParsedFile(smap.file, smap, None, checker.problems)
    playbook, sites = _build(data, checker.conditions, smap.file, shipped)
    return ParsedFile(smap.file, smap, playbook, [], sites, list(checker.conditions.values()))


class _NotChecked(Exception):
    """A condition the earlier run's checks did not record: check the file in full."""


class _Checker:
    def __init__(
        self, smap: SourceMap, facts: FactPaths, checked: dict[str, Condition] | None = None
    ) -> None:
        self.smap = smap
        self.facts = facts
        self.problems: list[Problem] = []
        self.conditions: dict[YamlPath, Condition] = {}
        #: Set when rebuilding data that passed these checks before: conditions come from
        #: here and nothing else is checked.
        self.checked = checked

    def add(self, path: YamlPath, message: str, hint: str = "", **kw: Any) -> None:
        self.problems.append(self.smap.problem(path, message, hint, **kw))

    # -- shape --------------------------------------------------------------------------

    def shape(self, value: Any, name: str, path: YamlPath, where: str) -> bool:
        """Check ``value`` against ``SHAPES[name]``; True when it is usable."""
        shape = SHAPES[name]
        if not isinstance(value, dict):
            self.add(path, f"{where} must be a mapping, got {_kind_of(value)}")
            return False
        ok = True
        for key in value:
            if key not in shape.keys:
                self.add(
                    (*path, key),
                    f"unknown key '{key}' in {where}",
                    did_you_mean(key, shape.keys),
                    at_key=True,
                )
                ok = False
        for key, spec in shape.keys.items():
            if spec.required and key not in value:
                self.add(path, f"{where} is missing required key '{key}'", at_key=bool(path))
                ok = False
        if shape.one_of:
            present = [k for k in shape.one_of if k in value]
            if not present:
                words = " or ".join(f"'{k}'" for k in shape.one_of)
                self.add(path, f"{where} needs one of {words}", at_key=bool(path))
                ok = False
            elif len(present) > 1:
                self.add(
                    (*path, present[1]),
                    f"{where} has both '{present[0]}' and '{present[1]}': keep one",
                    at_key=True,
                )
                ok = False
        for key, spec in shape.keys.items():
            if key in value:
                ok = self.value(value[key], spec, (*path, key), key, where) and ok
        return ok

    def value(self, value: Any, spec: KeySpec, path: YamlPath, key: str, where: str) -> bool:
        kind, _, inner = spec.kind.partition(":")
        if kind == "object":
            return self.shape(value, inner, path, f"'{key}' of {where}")
        if kind == "list":
            if not isinstance(value, list):
                self.add(path, f"'{key}' of {where} must be a list, got {_kind_of(value)}")
                return False
            ok = True
            for i, item in enumerate(value):
                if inner == "command" and isinstance(item, str):
                    continue  # shorthand: {cmd: ITEM, run: local, mutates: false}
                ok = self.shape(item, inner, (*path, i), f"{inner} {i + 1} of {where}") and ok
            return ok
        if kind == "map":
            return self.id_map(value, inner, path, key)
        return self.scalar(value, spec, path, key, where)

    def id_map(self, value: Any, inner: str, path: YamlPath, key: str) -> bool:
        from gputriage.playbook.model import FINDING_ID_PATTERN, ID_PATTERN

        if not isinstance(value, dict):
            self.add(path, f"'{key}' must be a mapping of id -> {inner}, got {_kind_of(value)}")
            return False
        pattern, example = (
            (FINDING_ID_PATTERN, "'family.kebab-case'")
            if inner == "finding"
            else (ID_PATTERN, "kebab-case")
        )
        ok = True
        for item_id, item in value.items():
            if not re.match(pattern, item_id):
                self.add((*path, item_id), f"{inner} id '{item_id}' is not {example}", at_key=True)
                ok = False
            ok = self.shape(item, inner, (*path, item_id), f"{inner} '{item_id}'") and ok
        return ok

    def scalar(self, value: Any, spec: KeySpec, path: YamlPath, key: str, where: str) -> bool:
        if spec.kind == "integer":
            good = isinstance(value, int) and not isinstance(value, bool)
        elif spec.kind == "strings":
            if isinstance(value, list):
                bad = [i for i, v in enumerate(value) if not isinstance(v, str)]
                for i in bad:
                    self.add(
                        (*path, i),
                        f"'{key}' of {where} must hold strings, got {_kind_of(value[i])}",
                        _quote_hint(value[i]),
                    )
                return not bad
            good = False
        elif spec.kind == "cel":
            good = isinstance(value, str | bool)
        elif spec.kind == "boolean":
            good = isinstance(value, bool)
        elif spec.kind == "cels":
            good = isinstance(value, str | bool) or (
                isinstance(value, list)
                and bool(value)
                and all(isinstance(v, str | bool) for v in value)
            )
        else:
            good = isinstance(value, str)
        if not good:
            hint = _quote_hint(value) if spec.kind in ("string", "text") else ""
            if spec.kind == "strings" and isinstance(value, str):
                hint = f"write a list: [{value}]"
            self.add(
                path,
                f"'{key}' of {where} must be {_KIND_WORDS[spec.kind]}, got {_kind_of(value)}",
                hint,
            )
            return False
        if spec.enum and key != "format_version" and value not in spec.enum:
            choices = ", ".join(spec.enum)
            self.add(
                path,
                f"'{key}' must be one of: {choices}; got '{value}'",
                did_you_mean(str(value), spec.enum),
            )
            return False
        if spec.pattern and isinstance(value, str) and not re.match(spec.pattern, value):
            self.add(path, _pattern_message(key, value))
            return False
        if spec.required and isinstance(value, str) and not value.strip():
            self.add(path, f"'{key}' of {where} must not be empty")
            return False
        return True

    # -- conditions, fact paths, templates ----------------------------------------------

    def semantics(self, data: dict[str, Any]) -> None:
        """Compile conditions and check fact paths wherever the values have the right kind."""
        for i, route in enumerate(_list(data.get("routes"))):
            if isinstance(route, dict):
                self.condition(route.get("when"), ("routes", i, "when"))
                self.templates(route.get("because"), ("routes", i, "because"))
        for sid, step in _dict(data.get("steps")).items():
            if not isinstance(step, dict):
                continue
            base: YamlPath = ("steps", sid)
            for key in ("prompt", "help"):
                self.templates(step.get(key), (*base, key))
            for i, group in enumerate(_list(step.get("needs"))):
                if isinstance(group, str) and group not in self.facts.groups:
                    self.add(
                        (*base, "needs", i),
                        f"unknown fact group '{group}'",
                        did_you_mean(group, self.facts.groups),
                    )
            for i, branch in enumerate(_list(step.get("branches"))):
                if not isinstance(branch, dict):
                    continue
                bpath: YamlPath = (*base, "branches", i)
                self.condition(branch.get("when"), (*bpath, "when"))
                self.templates(branch.get("because"), (*bpath, "because"))
                for j, cite in enumerate(_list(branch.get("cite"))):
                    if isinstance(cite, str):
                        self.fact_path(cite, (*bpath, "cite", j))
            otherwise = step.get("otherwise")
            if isinstance(otherwise, dict):
                self.templates(otherwise.get("because"), (*base, "otherwise", "because"))
            ask = step.get("ask")
            if isinstance(ask, dict):
                for key in ("question", "help"):
                    self.templates(ask.get(key), (*base, "ask", key))
                for i, choice in enumerate(_list(ask.get("choices"))):
                    if isinstance(choice, dict):
                        self.templates(choice.get("label"), (*base, "ask", "choices", i, "label"))
            self.step_rules(step, base, sid)
        for fid, finding in _dict(data.get("findings")).items():
            if not isinstance(finding, dict):
                continue
            base = ("findings", fid)
            for key in ("title", "summary"):
                self.templates(finding.get(key), (*base, key))
            requires = finding.get("requires")
            if isinstance(requires, list):
                for i, alternative in enumerate(requires):
                    self.condition(alternative, (*base, "requires", i))
            else:
                self.condition(requires, (*base, "requires"))
            for i, rule in enumerate(_list(finding.get("ruled_out_by"))):
                if isinstance(rule, dict):
                    self.condition(rule.get("when"), (*base, "ruled_out_by", i, "when"))
                    self.templates(rule.get("because"), (*base, "ruled_out_by", i, "because"))
                    for j, cite in enumerate(_list(rule.get("cite"))):
                        if isinstance(cite, str):
                            self.fact_path(cite, (*base, "ruled_out_by", i, "cite", j))
            fix = finding.get("fix")
            if isinstance(fix, dict):
                self.templates(fix.get("summary"), (*base, "fix", "summary"))
                for i, command in enumerate(_list(fix.get("commands"))):
                    self.command(command, (*base, "fix", "commands", i))

    def command(self, command: Any, path: YamlPath) -> None:
        """Templates of one fix command, and a mutating verb without ``mutates: true``."""
        if self.checked is not None:
            return
        record = {"cmd": command} if isinstance(command, str) else _dict(command)
        texts = [(key, record.get(key)) for key in ("cmd", "if_unknown")]
        for key, text in texts:
            where = path if isinstance(command, str) else (*path, key)
            self.templates(text, where, shell=True)
            if not isinstance(text, str):
                continue
            reason = mutating_reason(text)
            if reason and record.get("mutates") is not True:
                hint = (
                    "write it as a record: {cmd: ..., run: ..., mutates: true, why: ...}"
                    if isinstance(command, str)
                    else "add 'mutates: true' and say in 'why' what it disrupts"
                )
                self.add(
                    where,
                    f"command can change state ({reason}) but is not marked 'mutates: true'",
                    hint,
                )
        self.templates(record.get("why"), (*path, "why"))

    def step_rules(self, step: dict[str, Any], path: YamlPath, sid: str) -> None:
        if self.checked is not None:
            return
        if "ask" in step and "otherwise" in step:
            self.add(
                (*path, "otherwise"),
                f"step '{sid}' has both 'ask' and 'otherwise': the "
                "question is what happens when no branch holds; keep one",
                at_key=True,
            )
        elif not any(k in step for k in ("branches", "otherwise", "ask")):
            self.add(
                path,
                f"step '{sid}' has no 'branches', 'otherwise' or 'ask': the walk "
                "could never leave it",
                at_key=True,
            )

    def condition(self, source: Any, path: YamlPath) -> None:
        if isinstance(source, bool):
            source = "true" if source else "false"
        if not isinstance(source, str):
            return
        if self.checked is not None:
            known = self.checked.get(source.rstrip())
            if known is None:
                raise _NotChecked(source)
            self.conditions[path] = known
            return
        try:
            condition = compile_condition(source)
        except CelSyntaxError as exc:
            self.add(path, exc.message, offset=exc.offset_in(source))
            return
        self.conditions[path] = condition
        for ref in condition.refs:
            found = self.facts.problem(ref.path)
            if found:
                self.add(path, found[0], found[1], offset=ref.offset, length=ref.length)

    def fact_path(self, path_text: str, path: YamlPath) -> None:
        if self.checked is not None:
            return
        found = self.facts.problem(path_text)
        if found:
            self.add(path, found[0], found[1])

    def templates(self, text: Any, path: YamlPath, *, shell: bool = False) -> None:
        if not isinstance(text, str) or self.checked is not None:
            return
        refs, errors = template_refs(text)
        for error in errors:
            self.add(path, error.message, offset=error.offset, length=error.length)
        for ref in refs:
            found = self.facts.problem(ref.path)
            if found:
                self.add(path, found[0], found[1], offset=ref.offset, length=ref.length)
        for ref in refs:
            for alt in ref.alternatives:
                found = self.facts.problem(alt)
                if found:
                    self.add(path, found[0], found[1], offset=ref.offset, length=ref.length)
            bad = literal_problem(ref, shell=shell)
            if bad:
                self.add(path, bad, offset=ref.offset, length=ref.length)
        if shell:
            for ref in quoted_templates(text):
                self.add(
                    path,
                    "template inside quotes: values are shell-quoted already; "
                    "remove the quotes around it",
                    offset=ref.offset,
                    length=ref.length,
                )


# -- building -----------------------------------------------------------------------------


def _build(
    data: dict[str, Any], conditions: dict[YamlPath, Condition], file: str, shipped: bool
) -> tuple[Playbook, list[tuple[YamlPath, Target]]]:
    sites: list[tuple[YamlPath, Target]] = []

    def target(obj: dict[str, Any], path: YamlPath) -> Target:
        key = "goto" if "goto" in obj else "conclude"
        t = Target(obj[key], conclude=key == "conclude")
        sites.append(((*path, key), t))
        return t

    steps: dict[str, Step] = {}
    for sid, raw in data["steps"].items():
        base: YamlPath = ("steps", sid)
        branches = tuple(
            Branch(
                conditions[(*base, "branches", i, "when")],
                _s(b["because"]),
                target(b, (*base, "branches", i)),
                tuple(b.get("cite", ())),
                b.get("if_unknown", "stop"),
            )
            for i, b in enumerate(raw.get("branches", ()))
        )
        otherwise = None
        if "otherwise" in raw:
            o = raw["otherwise"]
            otherwise = Otherwise(target(o, (*base, "otherwise")), _s(o.get("because")))
        ask = None
        if "ask" in raw:
            a = raw["ask"]
            choices = tuple(
                AskChoice(c["value"], _s(c["label"]), target(c, (*base, "ask", "choices", i)))
                for i, c in enumerate(a["choices"])
            )
            ask = Ask(_s(a["question"]), choices, _s(a.get("help")))
        steps[sid] = Step(
            sid,
            _s(raw["prompt"]),
            _s(raw.get("help")),
            tuple(raw.get("needs", ())),
            branches,
            otherwise,
            ask,
        )
    findings = {
        fid: _finding(fid, f, data["id"], conditions)
        for fid, f in (data.get("findings") or {}).items()
    }
    routes = tuple(
        Route(conditions[("routes", i, "when")], r.get("priority", 0), _s(r.get("because")))
        for i, r in enumerate(data.get("routes", ()))
    )
    playbook = Playbook(
        id=data["id"],
        title=_s(data["title"]),
        start=data["start"],
        steps=steps,
        findings=findings,
        description=_s(data.get("description")),
        tags=tuple(data.get("tags", ())),
        maturity=data.get("maturity", "experimental"),
        routes=routes,
        format_version=data["format_version"],
        file=file,
        shipped=shipped,
    )
    return playbook, sites


def _finding(
    fid: str, raw: dict[str, Any], playbook: str, conditions: dict[YamlPath, Condition]
) -> FindingSpec:
    commands = [_command(c, i) for i, c in enumerate(raw["fix"].get("commands", ()))]
    commands.sort(key=lambda c: c.order)  # stable: equal orders keep list order
    fix = FixSpec(_s(raw["fix"]["summary"]), tuple(commands))
    base: YamlPath = ("findings", fid)
    rules = tuple(
        RuleOut(
            conditions[(*base, "ruled_out_by", i, "when")],
            _s(r["because"]),
            tuple(r.get("cite", ())),
        )
        for i, r in enumerate(raw.get("ruled_out_by", ()))
    )
    requires = raw.get("requires")
    alternatives = (
        (conditions[(*base, "requires", i)] for i in range(len(requires)))
        if isinstance(requires, list)
        else (conditions[(*base, "requires")],)
        if requires is not None
        else ()
    )
    return FindingSpec(
        fid,
        raw["severity"],
        _s(raw["title"]),
        _s(raw["summary"]),
        fix,
        tuple(raw.get("references", ())),
        playbook,
        requires=tuple(alternatives),
        ruled_out_by=rules,
        propose=bool(raw.get("propose", True)),
    )


def _command(raw: Any, index: int) -> CommandSpec:
    if isinstance(raw, str):
        return CommandSpec(_s(raw), order=index)
    return CommandSpec(
        _s(raw["cmd"]),
        raw["run"],
        raw["mutates"],
        _s(raw.get("why")),
        raw.get("order", index),
        _s(raw.get("if_unknown")),
    )


def _s(value: Any) -> str:
    """Text as the reader sees it: block scalars lose their trailing newline."""
    return value.strip() if isinstance(value, str) else ""


# -- words --------------------------------------------------------------------------------


def _kind_of(value: Any) -> str:
    words: dict[type, str] = {
        dict: "a mapping",
        list: "a list",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
    }
    if value is None:
        return "nothing (null)"
    return words.get(type(value), f"a {type(value).__name__}")


def _quote_hint(value: Any) -> str:
    """YAML 1.1 turns yes/no/on/off into booleans and 1.0 into a number: suggest quotes."""
    if isinstance(value, bool | int | float):
        return "quote it to make it a string"
    return ""


_PATTERN_WORDS: dict[str, Callable[[str], str]] = {
    "id": lambda v: f"playbook id '{v}' is not kebab-case (lowercase words joined by '-')",
    "conclude": lambda v: f"finding id '{v}' is not 'family.kebab-case'",
    "value": lambda v: (
        f"choice value '{v}' has characters that do not fit in --answer STEP="
        "VALUE (use letters, digits, '-', '_', '.', '+')"
    ),
}


def _pattern_message(key: str, value: str) -> str:
    words = _PATTERN_WORDS.get(key)
    return words(value) if words else f"'{key}' has an invalid value '{value}'"


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
