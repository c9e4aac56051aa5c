"""Field and label selectors with the apiserver's grammar and semantics.

Field selectors: ``a=b``, ``a==b``, ``a!=b`` joined by commas (``\\,`` escapes a comma).
Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``.
As in Kubernetes, ``k!=v`` and ``k notin (...)`` also match objects without the label.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.kubeapi.resources import FIELD_ALIASES, FIELD_LABELS


class SelectorError(ValueError):
    """A selector the apiserver would reject with 400 BadRequest."""


Predicate = Callable[[Mapping[str, Any]], bool]


@dataclass(frozen=True)
class FieldTerm:
    field: str
    op: str  # "=" or "!="
    value: str


def parse_field_selector(text: str, plural: str) -> list[FieldTerm]:
    terms: list[FieldTerm] = []
    for raw in _split_unescaped(text, ","):
        if not raw.strip():
            continue
        m = re.match(r"^\s*([^!=\s]+)\s*(==|!=|=)\s*(.*?)\s*$", raw)
        if not m:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{raw}'")
        field, op, value = m.group(1), m.group(2), _unescape(m.group(3))
        allowed = FIELD_LABELS.get(plural, frozenset()) | {"metadata.name", "metadata.namespace"}
        if field not in allowed:
            raise SelectorError(f"field label not supported: {field}")
        terms.append(FieldTerm(field, "!=" if op == "!=" else "=", value))
    return terms


def field_value(obj: Mapping[str, Any], plural: str, field: str) -> str:
    """The string the apiserver compares a field selector against ("" when absent)."""
    path = FIELD_ALIASES.get((plural, field), field)
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_predicate(text: str, plural: str) -> Predicate:
    terms = parse_field_selector(text, plural)

    def match(obj: Mapping[str, Any]) -> bool:
        for t in terms:
            equal = field_value(obj, plural, t.field) == t.value
            if equal != (t.op == "="):
                return False
        return True

    return match


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return has
        if self.op == "!exists":
            return not has
        if self.op in ("=", "in"):
            return has and value in self.values
        return not has or value not in self.values  # "!=" and "notin"


_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"


def parse_label_selector(text: str) -> list[LabelRequirement]:
    reqs: list[LabelRequirement] = []
    for raw in _split_outside_parens(text):
        part = raw.strip()
        if not part:
            continue
        reqs.append(_parse_requirement(part, text))
    return reqs


def _parse_requirement(part: str, whole: str) -> LabelRequirement:
    if part.startswith("!"):
        key = part[1:].strip()
        _check_key(key, whole)
        return LabelRequirement(key, "!exists")
    m = re.match(r"^(\S+)\s+(in|notin)\s*\((.*)\)$", part)
    if m:
        key, op = m.group(1), m.group(2)
        _check_key(key, whole)
        values = frozenset(v.strip() for v in m.group(3).split(","))
        for v in values:
            _check_value(v, whole)
        return LabelRequirement(key, op, values)
    m = re.match(r"^([^!=\s]+)\s*(==|!=|=)\s*(\S*)$", part)
    if m:
        key, op, value = m.group(1), m.group(2), m.group(3)
        _check_key(key, whole)
        _check_value(value, whole)
        return LabelRequirement(key, "!=" if op == "!=" else "=", frozenset({value}))
    if re.fullmatch(_KEY, part):
        return LabelRequirement(part, "exists")
    raise SelectorError(f"unable to parse requirement: found '{part}' in selector '{whole}'")


def _check_key(key: str, whole: str) -> None:
    name = key.rsplit("/", 1)[-1]
    if not re.fullmatch(_KEY, key) or len(name) > 63:
        raise SelectorError(
            f"unable to parse requirement: invalid label key \"{key}\" in selector '{whole}'"
        )


def _check_value(value: str, whole: str) -> None:
    if not re.fullmatch(_VALUE, value) or len(value) > 63:
        raise SelectorError(
            f"unable to parse requirement: invalid label value: \"{value}\" in selector '{whole}'"
        )


def label_predicate(text: str) -> Predicate:
    reqs = parse_label_selector(text)

    def match(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r.matches(labels) for r in reqs)

    return match


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, cur, i = [], "", 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            cur += text[i : i + 2]
            i += 2
            continue
        if c == sep:
            parts.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    parts.append(cur)
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def _split_outside_parens(text: str) -> list[str]:
    parts, cur, depth = [], "", 0
    for c in text:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    parts.append(cur)
    return parts
