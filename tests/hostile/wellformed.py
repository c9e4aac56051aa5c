"""What a well-formed parser result looks like, whatever the input was.

Parsers never raise; beyond that, what they return must be safe to hand on: plain data
(strings, ints, floats, bools, None, enums, lists/tuples/dicts, dataclasses of those), line
numbers inside the text and counts that are not negative. (Python and the CEL engine both
hold any integer, so a 30-digit "version" is odd but not malformed.)
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

#: Field names that hold 1-based line numbers (0 = "no line").
LINE_FIELDS = frozenset({"line", "end_line", "version_line", "ignored_xids_line", "_line"})
#: Field names whose integer values count things.
COUNT_FIELDS = frozenset(
    {
        "count",
        "lines_scanned",
        "total_nodes",
        "not_helpful",
        "no_victims",
        "replicas",
        "requested",
        "available",
    }
)


def check_plain(value: Any, where: str = "result", *, max_line: int | None = None) -> None:
    """Recursively assert that ``value`` is plain data with sane numbers."""
    _check(value, where, max_line, "", 0)


def _check(value: Any, where: str, max_line: int | None, name: str, depth: int) -> None:
    assert depth < 64, f"{where}: nested deeper than 64 levels"
    if value is None or isinstance(value, (str, bool, enum.Enum)):
        return
    if isinstance(value, int):
        if name in LINE_FIELDS and max_line is not None:
            assert 0 <= value <= max_line, (
                f"{where} = {value}: not a line of the text (1..{max_line})"
            )
        if name in COUNT_FIELDS:
            assert value >= 0, f"{where} = {value}: a negative count"
        return
    if isinstance(value, float):
        assert not math.isnan(value), f"{where} is NaN"
        return
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _check(getattr(value, f.name), f"{where}.{f.name}", max_line, f.name, depth + 1)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            assert isinstance(k, (str, int)), f"{where}: key {k!r} is {type(k).__name__}"
            _check(v, f"{where}[{k!r}]", max_line, str(k), depth + 1)
        return
    if isinstance(value, (list, tuple)):
        # Lists of line numbers ("lines", "pod_lines") are named by their parent field.
        item_name = name if name in LINE_FIELDS else ("line" if name.endswith("lines") else "")
        for i, v in enumerate(value):
            _check(v, f"{where}[{i}]", max_line, item_name, depth + 1)
        return
    raise AssertionError(f"{where} is a {type(value).__name__}, not plain data")


def line_count(text: str) -> int:
    """The number of lines a parser may cite, however it splits them."""
    return max(len(text.splitlines()), text.count("\n") + 1)
