"""Does a node satisfy a pod's nodeSelector and required node affinity? The scheduler's rules.

Follows ``NodeAffinity`` in k8s.io/component-helpers (``scheduling/corev1/nodeaffinity``):

* every ``nodeSelector`` label must be present with exactly that value;
* the ``nodeSelectorTerms`` of ``requiredDuringSchedulingIgnoredDuringExecution`` are ORed, the
  expressions inside one term ANDed;
* ``In`` / ``NotIn`` compare the label value with the list (``NotIn`` also matches a node
  without the label); ``Exists`` / ``DoesNotExist`` test the key; ``Gt`` / ``Lt`` compare the
  label value and the single value as integers (a non-integer never matches);
* ``matchFields`` supports ``metadata.name`` (``In`` / ``NotIn``), the only field the API
  allows.

Input is the pod fact group's ``node_selector`` and ``affinity_terms`` (one map per expression,
with the index of its term), so a pod read from describe text is matched the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

#: Gt/Lt operands: 64-bit integers, as the API server validates them.
_INTEGER = re.compile(r"-?\d{1,18}")


def matches(
    labels: Mapping[str, str],
    name: str,
    node_selector: Mapping[str, str],
    affinity_terms: Iterable[Mapping[str, Any]],
) -> bool:
    """Whether a node (its labels and name) satisfies the pod's selector and affinity."""
    if any(labels.get(k) != v for k, v in node_selector.items()):
        return False
    terms: dict[int, list[Mapping[str, Any]]] = {}
    for expr in affinity_terms:
        if isinstance(expr, Mapping):
            index = expr.get("term")
            terms.setdefault(index if isinstance(index, int) else 0, []).append(expr)
    if not terms:
        return True
    return any(all(_expression(e, labels, name) for e in exprs) for exprs in terms.values())


def _expression(expr: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    key, operator = str(expr.get("key") or ""), str(expr.get("operator") or "")
    raw_values = expr.get("values")
    values = [str(v) for v in raw_values] if isinstance(raw_values, list) else []
    if expr.get("field"):
        value: str | None = name if key == "metadata.name" else None
    else:
        value = labels.get(key)
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if (
            value is None
            or len(values) != 1
            or not (_INTEGER.fullmatch(value) and _INTEGER.fullmatch(values[0]))
        ):
            return False
        return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])
    return False
