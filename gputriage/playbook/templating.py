"""``{{group.field}}`` templates in prompts, findings and fix commands, filled from facts.

Rules (documented in docs/playbooks.md):

* a path is ``group.field`` followed by map keys or list indexes: ``{{kernel.latest_xid.pci}}``,
  ``{{pod.containers.0.name}}``;
* alternatives follow ``|``: ``{{node.name|pod.node|NODE}}`` renders the first path that has
  a value, else the last alternative when it is not a fact path (words in text, an upper-case
  metavariable such as ``NODE`` in commands). This is how a text is written for the case where
  a fact is unknown;
* a value that is missing, empty, or in an unknown fact group, with no literal alternative,
  renders as the placeholder ``<group.field>`` (rendering never fails); the shipped playbooks
  are tested to never let one reach the output (tests/test_fix_commands.py);
* in commands, every value is shell-quoted where it lands (``shlex.quote``), so a pod named
  ``x; rm -rf /`` cannot turn a copied command into two. A template therefore must not sit
  inside quotes in a command; the loader rejects that.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_TEMPLATE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$")


@dataclass(frozen=True)
class TemplateRef:
    """A ``{{path}}`` in a text: the path, and the offset/length of the whole ``{{...}}``."""

    path: str
    offset: int
    length: int
    alternatives: tuple[str, ...] = ()  # more fact paths, tried in order after ``path``
    literal: str | None = None  # the words used when no path has a value


_METAVARIABLE = re.compile(r"^[A-Z][A-Z0-9_]*$")


def literal_problem(ref: TemplateRef, *, shell: bool) -> str:
    """Why ``ref``'s literal alternative is not allowed where it is ("" when fine)."""
    if ref.literal is None:
        return ""
    if not ref.literal.strip():
        return "empty alternative after '|' in a template"
    if shell and not _METAVARIABLE.match(ref.literal):
        return (
            f"alternative '{ref.literal}' in a command must be an upper-case placeholder "
            "such as NODE (it lands unquoted)"
        )
    return ""


@dataclass(frozen=True)
class TemplateError:
    """A malformed template, at ``offset`` in the text."""

    offset: int
    length: int
    message: str


def template_refs(text: str) -> tuple[list[TemplateRef], list[TemplateError]]:
    """The templates in ``text``, and whatever is malformed about them."""
    refs: list[TemplateRef] = []
    errors: list[TemplateError] = []
    end = 0
    for m in _TEMPLATE.finditer(text):
        end = m.end()
        parts = [p.strip() for p in m.group(1).split("|")]
        literal = parts.pop() if len(parts) > 1 and not _PATH.match(parts[-1]) else None
        if not all(_PATH.match(p) for p in parts):
            errors.append(
                TemplateError(
                    m.start(),
                    len(m.group(0)),
                    f"template '{m.group(0)}' is not a fact path like '{{{{pod.namespace}}}}'",
                )
            )
            continue
        refs.append(TemplateRef(parts[0], m.start(), len(m.group(0)), tuple(parts[1:]), literal))
    unclosed = text.find("{{", end)
    if unclosed >= 0:
        errors.append(TemplateError(unclosed, 2, "unclosed template: '{{' without '}}'"))
    return refs, errors


def quoted_templates(command: str) -> list[TemplateRef]:
    """Templates that sit inside single or double quotes in a shell command."""
    refs, _ = template_refs(command)
    inside: list[TemplateRef] = []
    for ref in refs:
        quote = ""
        i = 0
        while i < ref.offset:
            ch = command[i]
            if quote == "'":
                quote = "" if ch == "'" else quote
            elif ch == "\\":
                i += 1
            elif ch in "'\"":
                quote = "" if quote == ch else (quote or ch)
            i += 1
        if quote:
            inside.append(ref)
    return inside


def render(text: str, context: Mapping[str, Any], *, shell: bool = False) -> str:
    """``text`` with every template filled from ``context`` (``FactSet.to_context()``)."""

    def fill(m: re.Match[str]) -> str:
        parts = [p.strip() for p in m.group(1).split("|")]
        for path in parts:
            if not _PATH.match(path):  # the literal alternative, written by the author
                return path
            value = lookup(context, path)
            if value is not None:
                word = _text(value)
                return shlex.quote(word) if shell else word
        return f"<{parts[0]}>"

    return _TEMPLATE.sub(fill, text)


def missing(text: str, context: Mapping[str, Any]) -> list[str]:
    """The template paths in ``text`` that would render as a ``<placeholder>``."""
    refs, _ = template_refs(text)
    return [
        r.path
        for r in refs
        if r.literal is None and all(lookup(context, p) is None for p in (r.path, *r.alternatives))
    ]


def lookup(context: Mapping[str, Any], path: str) -> Any:
    """The value at ``path``; None when absent, empty, or in an unknown group."""
    parts = path.split(".")
    group = context.get(parts[0])
    if not isinstance(group, Mapping) or group.get("known") is False:
        return None
    cur: Any = group
    for part in parts[1:]:
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    if cur is None or (isinstance(cur, str | list | dict) and not cur):
        return None
    return cur


def _text(value: Any) -> str:
    """Words for a value: scalars as CEL writes them, flat maps as ``k=v, ...``, lists joined."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, Mapping) and all(_flat(v) for v in value.values()):
        return ", ".join(f"{k}={_text(v)}" for k, v in value.items())
    if isinstance(value, list) and all(_flat(v) for v in value):
        return ", ".join(_text(v) for v in value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _flat(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)
