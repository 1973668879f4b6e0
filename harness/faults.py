"""Fault injection: make the N-th call of a named write step raise.

Simulators accept ``fault_hook: Callable[[str], None] | None`` and call it immediately before each durable write
with a dotted step name (documented where the write happens). A ``FaultPlan`` is such a hook: it counts calls per
step, records the order of every step seen, and raises ``FaultInjected`` on the chosen call. Scenarios use it to
crash a write sequence at each point and observe what survived on disk.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager


class FaultInjected(RuntimeError):
    """Raised by a ``FaultPlan`` in place of a durable write."""

    def __init__(self, step: str, call: int):
        super().__init__(f"injected fault at {step} (call {call})")
        self.step = step
        self.call = call


class FaultPlan:
    """Callable hook: ``plan(step)`` raises ``FaultInjected`` on the n-th call of each step in ``faults``.

    ``faults`` maps a step name to the 1-based call number to fail (an int) or a set of call numbers.
    ``plan.calls`` is the ordered list of every step seen (including the one that raised);
    ``plan.fired`` lists ``(step, call)`` pairs that raised.
    """

    def __init__(self, faults: Mapping[str, int | set[int] | frozenset[int]] | None = None):
        self.faults: dict[str, frozenset[int]] = {}
        for step, when in (faults or {}).items():
            calls = frozenset({when}) if isinstance(when, int) else frozenset(when)
            if any(c < 1 for c in calls):
                raise ValueError(f"fault call numbers are 1-based, got {sorted(calls)} for {step!r}")
            self.faults[step] = calls
        self.counts: Counter[str] = Counter()
        self.calls: list[str] = []
        self.fired: list[tuple[str, int]] = []

    def __call__(self, step: str) -> None:
        self.counts[step] += 1
        self.calls.append(step)
        n = self.counts[step]
        if n in self.faults.get(step, ()):
            self.fired.append((step, n))
            raise FaultInjected(step, n)

    def steps(self) -> list[str]:
        """Distinct step names in first-seen order (a recording run's write sequence)."""
        return list(dict.fromkeys(self.calls))


@contextmanager
def inject_faults(faults: Mapping[str, int | set[int]] | None = None) -> Iterator[FaultPlan]:
    """Context-manager form: ``with inject_faults({"bank.append": 1}) as plan: sim = Sim(fault_hook=plan)``."""
    yield FaultPlan(faults)
