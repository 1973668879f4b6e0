"""Time of the Tortoise store: the fixed-width ISO-8601 stamps (spec §1.6) and the deterministic test clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["iso", "StepClock", "system_clock"]


def iso(dt: datetime) -> str:
    """Fixed-width ISO-8601 with microseconds and ``+00:00`` (spec §1.6; compared lexicographically)."""
    return dt.astimezone(UTC).isoformat(timespec="microseconds")


class StepClock:
    """Deterministic injected clock: every call returns the current instant, then advances by ``step``."""

    def __init__(self, start: datetime | str = "2026-03-01T09:00:00+00:00", step: float = 1.0) -> None:
        self.t = datetime.fromisoformat(start) if isinstance(start, str) else start
        if self.t.tzinfo is None:
            self.t = self.t.replace(tzinfo=UTC)
        self.step = timedelta(seconds=step)

    def __call__(self) -> datetime:
        t = self.t
        self.t = self.t + self.step
        return t

    def advance(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)


def _system_clock() -> datetime:
    return datetime.now(UTC)


system_clock = _system_clock
