"""Taint/toleration matching, exactly as the scheduler does it.

Follows ``Toleration.ToleratesTaint`` in k8s.io/component-helpers
(``scheduling/corev1/helpers.go``):

* a toleration with an effect only matches taints of that effect; an empty effect matches all;
* a toleration with a key only matches taints with that key; an empty key (with ``Exists``)
  matches every key;
* operator ``Exists`` matches any value; ``Equal`` (or empty) needs the exact value;
* ``Lt`` / ``Gt`` (k8s 1.35+, feature ``TaintTolerationComparisonOperators``) compare decimal
  integers: ``Lt`` tolerates when taint value < toleration value, ``Gt`` when greater.

Only ``NoSchedule`` and ``NoExecute`` taints keep a pod off a node; ``PreferNoSchedule`` only
lowers the score.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

#: Taint effects that make the scheduler refuse a node.
HARD_EFFECTS = ("NoSchedule", "NoExecute")
_DECIMAL = re.compile(r"-?(?:0|[1-9]\d*)")


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether one toleration tolerates one taint."""
    effect = _s(toleration.get("effect"))
    if effect and effect != _s(taint.get("effect")):
        return False
    key = _s(toleration.get("key"))
    if key and key != _s(taint.get("key")):
        return False
    operator = _s(toleration.get("operator"))
    value, taint_value = _s(toleration.get("value")), _s(taint.get("value"))
    if operator in ("", "Equal"):
        return value == taint_value
    if operator == "Exists":
        return True
    if operator in ("Lt", "Gt"):
        if not (_DECIMAL.fullmatch(value) and _DECIMAL.fullmatch(taint_value)):
            return False
        return (
            (int(taint_value) < int(value)) if operator == "Lt" else (int(taint_value) > int(value))
        )
    return False


def untolerated(
    taints: Iterable[Mapping[str, Any]],
    tolerations: Iterable[Mapping[str, Any]],
    effects: tuple[str, ...] = HARD_EFFECTS,
) -> list[dict[str, str]]:
    """The taints (``key``/``value``/``effect``) with one of ``effects`` no toleration covers."""
    tols = [t for t in tolerations if isinstance(t, Mapping)]
    out = []
    for taint in taints:
        if not isinstance(taint, Mapping) or _s(taint.get("effect")) not in effects:
            continue
        if not any(tolerates(t, taint) for t in tols):
            out.append(
                {
                    "key": _s(taint.get("key")),
                    "value": _s(taint.get("value")),
                    "effect": _s(taint.get("effect")),
                }
            )
    return out


def _s(value: Any) -> str:
    return value if isinstance(value, str) else ""
