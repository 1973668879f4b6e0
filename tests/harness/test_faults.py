from __future__ import annotations

import pytest

from harness.faults import FaultInjected, FaultPlan, inject_faults


def test_nth_call_of_named_step_raises_and_order_is_recorded() -> None:
    plan = FaultPlan({"b": 2})
    plan("a")
    plan("b")
    plan("a")
    with pytest.raises(FaultInjected) as info:
        plan("b")
    assert (info.value.step, info.value.call) == ("b", 2)
    assert plan.calls == ["a", "b", "a", "b"] and plan.fired == [("b", 2)] and plan.steps() == ["a", "b"]
    plan("b")  # third call passes


def test_sets_of_calls_context_manager_and_validation() -> None:
    with inject_faults({"w": {1, 3}}) as plan:
        with pytest.raises(FaultInjected):
            plan("w")
        plan("w")
        with pytest.raises(FaultInjected):
            plan("w")
    with pytest.raises(ValueError):
        FaultPlan({"w": 0})
    empty = FaultPlan()
    empty("anything")
    assert empty.calls == ["anything"]
