"""Named errors and fault-injection primitives of agentfly_sim (spec §3.7, §6.7, §6.8)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any


class NotModelled(RuntimeError):
    """A reference surface that is out of scope (spec §1.2), e.g. the MCP servers other than the workspace tools."""


class DriverStartupError(RuntimeError):
    """The NP driver cannot start: ``np_model_device="cuda"`` without CUDA (upstream moves the model to CUDA at
    import, before the guarded memory import; AGF-14)."""


class ExecutorStalled(RuntimeError):
    """The bounded executor loop hit ``EXEC_EMPTY_REPLY_LIMIT`` or ``EXEC_MAX_CALLS_PER_TASK`` (spec §6.7,
    AGF-28). Not caught by the per-question handlers: the run stops, nothing is written for the question."""

    def __init__(self, event: dict[str, Any]):
        self.event = event
        super().__init__(f"executor stalled on {event.get('question')!r} step {event.get('plan_step_id')!r}: "
                         f"{event.get('empty_replies')} empty replies, {event.get('calls')} calls")


class SimulatedCrash(BaseException):  # noqa: N818 - a crash, not an error: it must escape ``except Exception``
    """A process crash: not an ``Exception``, so no driver handler catches it; files keep what was written."""


class TornWrite(SimulatedCrash):
    """Raised by a fault hook at ``agentfly.result_write``: the driver writes half the line, no newline, then
    crashes (spec §6.8)."""


class InjectedFailure(RuntimeError):
    """An ordinary injected exception (fault kind ``fail``), handled as upstream handles any exception there."""


FAULT_POINTS = ("process_query", "judge", "result_write", "pairs_write", "case_write", "reload",
                "after_result_write")
STEP_PREFIX = "agentfly."
FAULT_KINDS = ("fail", "crash", "torn")


class FaultSchedule:
    """Callable fault hook ``hook(step)`` for the drivers: ``FaultSchedule({("result_write", 2): "torn"})`` fails
    the 2nd call of ``agentfly.result_write`` with kind ``torn``. Kinds: ``fail`` -> ``InjectedFailure``,
    ``crash`` -> ``SimulatedCrash``, ``torn`` -> ``TornWrite`` (``result_write`` only). ``calls`` lists every step.
    Any other callable (e.g. the harness ``FaultPlan``) can be used instead; what it raises decides the kind."""

    def __init__(self, plan: Mapping[tuple[str, int], str]):
        for (point, _), kind in plan.items():
            if point not in FAULT_POINTS:
                raise ValueError(f"unknown fault point {point!r}; expected one of {FAULT_POINTS}")
            if kind not in FAULT_KINDS:
                raise ValueError(f"unknown fault kind {kind!r}; expected one of {FAULT_KINDS}")
            if kind == "torn" and point != "result_write":
                raise ValueError("fault kind 'torn' applies to result_write only")
            if point == "after_result_write" and kind != "crash":
                raise ValueError("after_result_write is crash-only")
        self.plan = dict(plan)
        self.counts: Counter[str] = Counter()
        self.calls: list[str] = []

    def __call__(self, step: str) -> None:
        self.calls.append(step)
        point = step.removeprefix(STEP_PREFIX)
        self.counts[point] += 1
        kind = self.plan.get((point, self.counts[point]))
        if kind == "fail":
            raise InjectedFailure(f"injected failure at {step} #{self.counts[point]}")
        if kind == "crash":
            raise SimulatedCrash(f"injected crash at {step} #{self.counts[point]}")
        if kind == "torn":
            raise TornWrite(f"injected torn write at {step} #{self.counts[point]}")
