"""The CEL run-time budget: costs from real list sizes, UNKNOWN with a reason when over."""

from __future__ import annotations

from gputriage.playbook.conditions import (
    Budget,
    Macro,
    Truth,
    compile_condition,
    macros,
    new_context,
)


def facts(n: int) -> dict[str, object]:
    return {
        "kernel": {"known": True, "reason": "", "xids": [{"code": 79}] * n},
        "pod": {"known": True, "reason": "", "containers": [{"env": [1, 2, 3]}] * 2},
    }


def test_macros_see_through_filter_chains_and_bound_variables() -> None:
    found = macros("kernel.xids.all(a, kernel.xids.filter(z, true).all(b, b.code == a.code))")
    assert found == (
        Macro("all", "kernel.xids", ()),
        Macro("filter", "kernel.xids", (0,)),
        Macro("all", "kernel.xids", (0,)),
    )
    assert macros('pod.containers.exists(c, c.env.exists(e, e == "(")) && true') == (
        Macro("exists", "pod.containers", ()),
        Macro("exists", "c.env", (0,)),
    )


def test_cost_is_the_product_of_real_sizes() -> None:
    budget = Budget(facts(700))
    found = macros("kernel.xids.all(a, kernel.xids.filter(z, true).all(b, b.code == a.code))")
    assert budget.cost(found) == 700 + 700 * 700 * 20 + 700 * 700
    # A bound variable's list is not a fact path: the largest list stands for it.
    assert budget.cost(macros("pod.containers.exists(c, c.env.exists(e, e == 1))")) == 2 + 2 * 700


def test_over_budget_is_unknown_with_a_reason_and_never_runs() -> None:
    cond = compile_condition(
        "kernel.xids.all(a, kernel.xids.filter(z, true).all(b, b.code == a.code))"
    )
    variables = facts(700)
    result = cond.evaluate(new_context(variables), frozenset(), Budget(variables))
    assert result.truth is Truth.UNKNOWN
    assert "estimated cost (10,290,700 steps" in result.error
    small = facts(10)
    assert cond.evaluate(new_context(small), frozenset(), Budget(small)).truth is Truth.TRUE


def test_the_walk_budget_is_shared_and_the_clock_counts() -> None:
    cond = compile_condition("kernel.xids.exists(x, x.code == 79)")
    variables = facts(600)
    budget = Budget(variables, per_walk=1000)
    ctx = new_context(variables)
    assert cond.evaluate(ctx, frozenset(), budget).truth is Truth.TRUE
    second = cond.evaluate(ctx, frozenset(), budget)
    assert second.truth is Truth.UNKNOWN and "walk's cost budget" in second.error
    late = Budget(variables, seconds=0.0)
    assert "time budget" in cond.evaluate(ctx, frozenset(), late).error
