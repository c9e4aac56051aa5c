"""CEL conditions: fact paths read from the source, syntax errors located, evaluation never
raises, unknown groups make a condition UNKNOWN (not false)."""

from __future__ import annotations

import pytest

from gputriage.playbook.conditions import (
    CelSyntaxError,
    Truth,
    compile_condition,
    fact_refs,
    new_context,
)

CONTEXT = {
    "pod": {
        "known": True,
        "reason": "",
        "phase": "Pending",
        "gpu_total": 2,
        "containers": [{"name": "main", "waiting_reason": "ContainerCreating", "restart_count": 0}],
        "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    },
    "kernel": {"known": False, "reason": "dmesg: timeout", "xids": [], "latest_xid": {}},
}


@pytest.mark.parametrize(
    ("source", "paths"),
    [
        ('pod.phase == "Pending"', ["pod.phase"]),
        (
            "kernel.known && kernel.xids.exists(x, x.code == 79 && x.pci != '')",
            ["kernel.known", "kernel.xids"],
        ),
        ('pod.containers.exists(c, c.waiting_reason == "kernel.xids")', ["pod.containers"]),
        ('pod.node_selector["nvidia.com/gpu.product"].startsWith("NVIDIA")', ["pod.node_selector"]),
        (
            "size(pod.containers) > 0 && has(pod.phase) && int(pod.gpu_total) >= 1",
            ["pod.containers", "pod.phase", "pod.gpu_total"],
        ),
        ("kernel.latest_xid.pci in ['0000:3b:00'] || 0x1F > 3u", ["kernel.latest_xid.pci"]),
        ("pod.containers.map(c, c.restart_count).exists(n, n > 3)", ["pod.containers"]),
        ('r"pod.phase" == b"x" || """kernel.xids""" == \'\'', []),
        ("!kernel.known", ["kernel.known"]),
    ],
)
def test_fact_paths_skip_macro_variables_functions_and_strings(
    source: str, paths: list[str]
) -> None:
    assert list(compile_condition(source).paths) == paths


def test_fact_refs_carry_offsets_into_the_source() -> None:
    source = "size(kernel.xids) > 0 &&\n  kernel.latest_xid.pci == 'x'"
    refs = fact_refs(source)
    assert [(r.path, source[r.offset : r.offset + r.length]) for r in refs] == [
        ("kernel.xids", "kernel.xids"),
        ("kernel.latest_xid.pci", "kernel.latest_xid.pci"),
    ]
    assert [(r.group, r.field) for r in refs] == [("kernel", "xids"), ("kernel", "latest_xid")]


def test_groups_read_ignores_known_and_reason() -> None:
    assert compile_condition("!kernel.known || kernel.reason != ''").groups == ()
    assert compile_condition("kernel.known && size(kernel.xids) > 0").groups == ("kernel",)


@pytest.mark.parametrize(
    ("source", "line", "col", "message"),
    [
        (
            'pod.phase == "Pending" &&',
            1,
            26,
            "CEL syntax error: the condition ends where CEL expects an operand",
        ),
        ('pod.phase ==\n  "x" )', 2, 7, "CEL syntax error: extraneous input ')' expecting <EOF>"),
        ('"abc', 1, 1, "CEL syntax error: token recognition error at: '\"abc'"),
        ("pod.phase = 1", 1, 11, "CEL syntax error: token recognition error at: '= '"),
    ],
)
def test_syntax_errors_keep_cel_positions(source: str, line: int, col: int, message: str) -> None:
    with pytest.raises(CelSyntaxError) as err:
        compile_condition(source)
    assert (err.value.line, err.value.col, err.value.message) == (line, col, message)


def test_offset_of_a_syntax_error_in_a_multiline_source() -> None:
    source = 'pod.phase ==\n  "x" )'
    with pytest.raises(CelSyntaxError) as err:
        compile_condition(source)
    assert source[err.value.offset_in(source)] == ")"


def test_trailing_newline_of_a_block_scalar_is_not_part_of_the_source() -> None:
    assert compile_condition('pod.phase == "Pending"\n').source == 'pod.phase == "Pending"'


def test_evaluation_true_false_and_unknown() -> None:
    ctx = new_context(CONTEXT)
    unknown = frozenset({"kernel"})
    creating = compile_condition(
        'pod.containers.exists(c, c.waiting_reason == "ContainerCreating")'
    )
    assert creating.evaluate(ctx, unknown).truth is Truth.TRUE
    assert compile_condition("pod.gpu_total > 2").evaluate(ctx, unknown).truth is Truth.FALSE
    result = compile_condition("size(kernel.xids) == 0").evaluate(ctx, unknown)
    # Reading an unknown group is UNKNOWN even though its default ([]) would say true.
    assert (result.truth, result.unknown_groups, result.error) == (Truth.UNKNOWN, ("kernel",), "")
    assert compile_condition("!kernel.known").evaluate(ctx, unknown).truth is Truth.TRUE


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ("pod.nope == 1", "no such key: nope"),
        ("pod.phase + 1 == 2", "TypeError: Unsupported operation: string + int"),
        ("pod.phase", "the condition gave str 'Pending', not a bool"),
        (
            'pod.phase.matches("(")',
            "RuntimeError: Function 'matches' error: '(' not a valid regex: "
            "regex parse error: ( error: unclosed group",
        ),
        ("pod.gpu_total / 0 == 1", "ZeroDivisionError: division by zero in CEL expression"),
    ],
)
def test_runtime_errors_are_unknown_with_a_reason_never_raised(source: str, error: str) -> None:
    result = compile_condition(source).evaluate(new_context(CONTEXT), frozenset())
    assert result.truth is Truth.UNKNOWN
    assert result.error == error
