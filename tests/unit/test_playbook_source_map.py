"""YAML with positions: keys and values located, duplicates rejected, offsets inside scalars
mapped back to the file across quoting and block scalars."""

from __future__ import annotations

import pytest

from gputriage.playbook.source_map import parse_yaml

TEXT = """\
id: x
steps:
  a:
    plain: pod.phase == 1 &&
      zz
    single: 'pod.phase == ''x'' && zz'
    double: "pod.phase == \\"a\\" && zz"
    literal: |
      pod.phase == "Pending" &&
        pod.zz == 1
    folded: >-
      pod.phase == "Pending"
      && pod.zz
    list: [a, b]
"""


def test_data_and_positions() -> None:
    data, smap, problems = parse_yaml(TEXT, "f.yaml")
    assert problems == []
    step = data["steps"]["a"]
    assert step["plain"] == "pod.phase == 1 && zz"
    assert step["literal"] == 'pod.phase == "Pending" &&\n  pod.zz == 1\n'
    assert step["folded"] == 'pod.phase == "Pending" && pod.zz'
    assert step["list"] == ["a", "b"]
    span = smap.keys[("steps", "a", "literal")]
    assert (span.line, span.col) == (8, 5)
    span = smap.values[("steps", "a", "list", 1)]
    assert (span.line, span.col) == (14, 15)


@pytest.mark.parametrize(
    ("key", "line", "col"),
    [
        ("plain", 5, 7),
        ("single", 6, 36),
        ("double", 7, 36),
        ("literal", 10, 13),
        ("folded", 13, 14),
    ],
)
def test_offsets_inside_scalars_map_to_the_file(key: str, line: int, col: int) -> None:
    data, smap, _ = parse_yaml(TEXT, "f.yaml")
    value = data["steps"]["a"][key]
    needle = "zz" if "zz" in value else "pod.zz"
    assert smap.offset_position(("steps", "a", key), value.rindex(needle)) == (line, col)
    assert smap.line_text(line)[col - 1 :].startswith(needle)


def test_duplicate_keys_are_reported_at_the_second_one() -> None:
    _, _, problems = parse_yaml("a: 1\nb:\n  c: 1\n  c: 2\n", "d.yaml")
    assert [(p.line, p.col, p.message, p.hint) for p in problems] == [
        (
            4,
            3,
            "duplicate key 'c'",
            "first defined at line 3; YAML would silently keep the last one",
        )
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", (0, 0, "the file is empty: a playbook is a YAML mapping")),
        (
            "a: [1\n",
            (
                2,
                1,
                "YAML syntax error: did not find expected ',' or ']' (while parsing a "
                "flow sequence)",
            ),
        ),
        (
            "a: 'x\n",
            (
                2,
                1,
                "YAML syntax error: found unexpected end of stream (while scanning a "
                "quoted scalar)",
            ),
        ),
        ("a: *nope\n", (1, 4, "YAML syntax error: found undefined alias")),
        (
            "\tx: 1\n",
            (
                1,
                1,
                "YAML syntax error: found character that cannot start any token "
                "(while scanning for the next token)",
            ),
        ),
    ],
)
def test_bad_yaml_is_a_located_problem(text: str, expected: tuple[int, int, str]) -> None:
    data, _, problems = parse_yaml(text, "y.yaml")
    assert data is None
    assert [(p.line, p.col, p.message) for p in problems] == [expected]


def test_yaml_1_1_booleans_and_numbers_are_typed() -> None:
    data, _, _ = parse_yaml("a: yes\nb: 'yes'\nc: 010\nd: 1.5\ne: null\nyes: 1\n", "t.yaml")
    assert data == {"a": True, "b": "yes", "c": 8, "d": 1.5, "e": None, "yes": 1}


def test_complex_keys_are_problems() -> None:
    _, _, problems = parse_yaml("? [a, b]\n: 1\n", "k.yaml")
    assert [(p.line, p.col, p.message) for p in problems] == [
        (1, 3, "mapping keys must be plain strings")
    ]
