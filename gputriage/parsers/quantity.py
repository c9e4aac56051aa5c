"""Kubernetes resource quantities (``500m``, ``16Gi``, ``1e3``, ``98868448Ki``) as numbers.

The grammar is the apimachinery ``resource.Quantity`` one: an optionally signed decimal number,
then either a binary suffix (``Ki Mi Gi Ti Pi Ei``), a decimal suffix (``n u m k M G T P E``)
or a decimal exponent (``e3``, ``E-2``). Values are parsed exactly with :class:`Decimal`; the
helpers round the way the API server does for each use (counts and bytes round up, as
``Quantity.Value()`` does). Nothing here raises: unparseable input yields ``None``.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<dec>[numkMGTPE]?))$"
)
#: Refuse absurd exponents instead of building gigantic Decimals (``1e999999999``).
_MAX_EXPONENT = 40


def parse_quantity(value: object) -> Decimal | None:
    """The exact value of a quantity string or number; ``None`` when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(str(value)) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    m = _QUANTITY.match(value.strip())
    if not m:
        return None
    try:
        number = Decimal(m["num"])
        if m["bin"]:
            return number * _BINARY[m["bin"]]
        if m["exp"]:
            exponent = int(m["exp"][1:])
            if abs(exponent) > _MAX_EXPONENT:
                return None
            return number.scaleb(exponent)
        return number * _DECIMAL[m["dec"] or ""]
    except (InvalidOperation, ValueError):
        return None


def to_int(value: object) -> int | None:
    """A quantity rounded up to a whole number (counts, bytes); ``None`` when unparseable."""
    q = parse_quantity(value)
    if q is None:
        return None
    return int(q.to_integral_value(rounding="ROUND_CEILING"))


def to_millis(value: object) -> int | None:
    """A quantity in thousandths, rounded up (CPU: ``"2"`` -> 2000, ``"250m"`` -> 250)."""
    q = parse_quantity(value)
    if q is None:
        return None
    return int((q * 1000).to_integral_value(rounding="ROUND_CEILING"))


def to_bytes(value: object) -> int | None:
    """A memory or storage quantity in bytes (alias of :func:`to_int`, for readability)."""
    return to_int(value)
