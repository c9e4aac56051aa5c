"""Kubernetes quantities as the API server reads them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gputriage.parsers.quantity import parse_quantity, to_bytes, to_int, to_millis


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Decimal(1)),
        ("500m", Decimal("0.5")),
        ("16Gi", Decimal(16 * 2**30)),
        ("98868448Ki", Decimal(98868448 * 1024)),
        ("47093746742", Decimal(47093746742)),
        ("1e3", Decimal(1000)),
        ("1.5E-2", Decimal("0.015")),
        ("2k", Decimal(2000)),
        ("100M", Decimal(100_000_000)),
        ("1Ti", Decimal(2**40)),
        ("250u", Decimal("0.00025")),
        ("+4", Decimal(4)),
        (".5", Decimal("0.5")),
        (8, Decimal(8)),
        (0.25, Decimal("0.25")),
    ],
)
def test_parses_every_suffix(text: object, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "junk",
    [
        "",
        "Gi",
        "1.2.3",
        "5 Gi",
        "1Kb",
        "abc",
        "1e999999999",
        None,
        True,
        [1],
        {"a": 1},
        float("nan"),
    ],
)
def test_junk_is_none(junk: object) -> None:
    assert parse_quantity(junk) is None
    assert to_int(junk) is None


def test_rounding_follows_the_api_server() -> None:
    assert to_millis("2") == 2000
    assert to_millis("250m") == 250
    assert to_millis("0.0001") == 1  # rounds up like Quantity.MilliValue
    assert to_int("1500m") == 2
    assert to_int("4") == 4
    assert to_bytes("1Mi") == 1_048_576
    assert to_bytes("1M") == 1_000_000
