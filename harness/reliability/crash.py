"""Crash-point explorer: enumerate every crash point of a durable write sequence and check what survives.

A :class:`Scenario` drives one design through its public API with a fault hook, records which items were
acknowledged to the caller, and knows how to restart the design from disk and check its invariants. The
explorer

1. runs the scenario once with a recording :class:`CrashHook` to list its durable steps (each ``hook(step)``
   call before a write, and each ``hook.after_write(step, path, offset)`` report after one; see the
   ``durable`` helper of each simulator);
2. re-runs it once per crash point: *before* each step, *after* each write, and *torn* variants of every write
   whose new bytes are known (the file keeps only a prefix of them: 0, 1, half, all but one byte);
3. after each crash, calls the scenario's ``check``, which restarts the design through its own loaders and
   reports: did it start (or fail with a clear error naming the file), which acknowledged items are lost,
   which items are duplicated, which files disagree.

The crash is a ``BaseException`` (:class:`Crash`), so no ``except Exception`` handler in a simulator can
swallow it: the process "dies" with the files as they are. Real kills (SIGKILL in a child process) live in
``harness.reliability.kill``; concurrent writers in ``harness.reliability.concurrent``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODES = ("faithful", "hardened")


class Crash(BaseException):  # noqa: N818 - a process death, not an error: must escape ``except Exception``
    """Raised by :class:`CrashHook` at the chosen crash point."""

    def __init__(self, point: CrashPoint):
        super().__init__(f"crash {point.label()}")
        self.point = point


@dataclass(frozen=True)
class CrashPoint:
    """``kind``: before | after | torn; ``index``: the event number in the recorded run; ``keep``: bytes of
    the new data left in the file (torn only); ``step``: the step name (for reports)."""

    kind: str
    index: int
    step: str
    keep: int | None = None

    def label(self) -> str:
        extra = f" keep={self.keep}" if self.kind == "torn" else ""
        return f"{self.kind} #{self.index} {self.step}{extra}"


@dataclass
class Event:
    index: int
    kind: str  # "before" (hook(step)) or "after" (hook.after_write)
    step: str
    path: str | None = None
    nbytes: int | None = None  # new bytes written (None: a rename / commit, nothing to tear)


class CrashHook:
    """Fault hook for the explorer. Records every event; crashes at ``target`` when given.

    ``hook(step)`` is the ordinary fault-hook call (before a durable write). ``hook.after_write(step, path,
    offset)`` is the optional report a simulator's durable helper makes after writing (``offset``: where the
    new bytes start; ``None`` for renames and commits). ``on_event`` (optional) is called for every event
    before the crash check (the kill harness uses it to SIGKILL the process instead)."""

    def __init__(self, target: CrashPoint | None = None,
                 on_event: Callable[[Event], None] | None = None) -> None:
        self.target = target
        self.events: list[Event] = []
        self.fired: CrashPoint | None = None
        self.on_event = on_event

    def _next(self, kind: str, step: str, path: str | None = None, nbytes: int | None = None) -> Event:
        ev = Event(len(self.events), kind, step, path, nbytes)
        self.events.append(ev)
        if self.on_event is not None:
            self.on_event(ev)
        return ev

    def __call__(self, step: str) -> None:
        ev = self._next("before", step)
        t = self.target
        if t is not None and t.kind == "before" and t.index == ev.index:
            self.fired = t
            raise Crash(t)

    def after_write(self, step: str, path: str | os.PathLike[str] | None, offset: int | None) -> None:
        nbytes = None
        if path is not None and offset is not None:
            try:
                nbytes = os.path.getsize(path) - offset
            except OSError:
                nbytes = None
        ev = self._next("after", step, None if path is None else str(path), nbytes)
        t = self.target
        if t is None or t.index != ev.index:
            return
        if t.kind == "torn" and path is not None and offset is not None and t.keep is not None:
            os.truncate(path, offset + t.keep)
        if t.kind in ("after", "torn"):
            self.fired = t
            raise Crash(t)


def crash_points(events: Iterable[Event]) -> list[CrashPoint]:
    """Before every ``before`` event; after every ``after`` event; torn (0, 1, half, all but one byte of the new
    data) for every ``after`` event that wrote bytes."""
    points: list[CrashPoint] = []
    for ev in events:
        if ev.kind == "before":
            points.append(CrashPoint("before", ev.index, ev.step))
            continue
        points.append(CrashPoint("after", ev.index, ev.step))
        if ev.nbytes:
            for keep in sorted({0, 1, ev.nbytes // 2, ev.nbytes - 1}):
                if 0 <= keep < ev.nbytes:
                    points.append(CrashPoint("torn", ev.index, ev.step, keep))
    return points


@dataclass(frozen=True)
class KillPlan:
    """A real-kill plan (run by ``harness.reliability.kill``): kill at the ``occurrence``-th event of ``kind`` (before | after) with step name ``step``."""

    sequence: str
    mode: str
    kind: str
    step: str
    occurrence: int
    why: str

    def label(self) -> str:
        return f"{self.kind} {self.step} #{self.occurrence}"


@dataclass
class Check:
    """What a restart found. ``start``: ok | clear_error (failed, naming the file) | unclear_error;
    ``lost``: acknowledged items missing; ``duplicates``: items stored more than once; ``disagree``: files that
    must agree and do not; ``notes``: anything else worth reporting (warnings, leftover temp files)."""

    start: str = "ok"
    lost: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    disagree: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    acked: int = 0  # items acknowledged before the crash (set by the explorer, not by the scenario's check)

    @property
    def outcome(self) -> str:
        bad = [name for name, value in (("start_error", self.start == "unclear_error"), ("lost", self.lost),
                                        ("duplicate", self.duplicates), ("disagree", self.disagree)) if value]
        return "+".join(bad) if bad else "ok"


class Acks(list[str]):
    """Items acknowledged to the caller (the API call returned), in order."""


class _TimedAcks(Acks):
    """Acks that note how many hook events had happened when each item was acknowledged."""

    def __init__(self, hook: CrashHook) -> None:
        super().__init__()
        self.hook = hook
        self.at: list[int] = []

    def append(self, item: str) -> None:
        super().append(item)
        self.at.append(len(self.hook.events))


RunFn = Callable[[Path, Any, str, Acks], None]
CheckFn = Callable[[Path, list[str], str], Check]


@dataclass
class Scenario:
    """One durable write sequence. ``run(root, hook, mode, acks)`` drives the design under ``root`` with
    ``hook`` as its fault hook in ``mode`` (faithful | hardened), appending every acknowledged item to
    ``acks``. ``check(root, acks, mode)`` restarts the design from ``root`` and returns a :class:`Check`."""

    design: str
    sequence: str
    description: str
    run: RunFn
    check: CheckFn
    modes: tuple[str, ...] = MODES
    hardened_option: str = ""


@dataclass
class PointResult:
    point: CrashPoint
    outcome: str
    fired: bool
    acked: int
    check: Check


@dataclass
class SequenceResult:
    design: str
    sequence: str
    mode: str
    description: str
    hardened_option: str
    steps: list[str]
    points: list[PointResult]
    seconds: float
    step_events: int = 0

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.points:
            out[p.outcome] = out.get(p.outcome, 0) + 1
        return out

    @property
    def lost_points(self) -> int:
        return sum(1 for p in self.points if p.check.lost)

    @property
    def duplicate_points(self) -> int:
        return sum(1 for p in self.points if p.check.duplicates)

    def as_dict(self) -> dict[str, Any]:
        return {
            "design": self.design, "sequence": self.sequence, "mode": self.mode,
            "description": self.description, "hardened_option": self.hardened_option,
            "steps": self.steps, "step_count": len(self.steps), "step_events": self.step_events,
            "crash_points": len(self.points),
            "outcomes": self.counts(), "lost_points": self.lost_points,
            "duplicate_points": self.duplicate_points,
            "refused_restarts": sum(1 for p in self.points if p.check.start == "clear_error"),
            "seconds": round(self.seconds, 2),
            "failures": [{"point": p.point.label(), "outcome": p.outcome, "acked": p.acked,
                          "lost": p.check.lost[:5], "duplicates": p.check.duplicates[:5],
                          "disagree": p.check.disagree[:5], "start": p.check.start, "notes": p.check.notes[:3]}
                         for p in self.points if p.outcome != "ok"],
        }


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the designs' own console warnings (e.g. AgentFly's ``[WARN] Failed to parse line``) and log
    records while hundreds of crash points run; the checks observe files, not console text."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        previous = logging.root.manager.disable
        logging.disable(logging.CRITICAL)
        try:
            yield
        finally:
            logging.disable(previous)


def _fresh_dir(base: Path | None, name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"crash-{name}-", dir=base))


def record(scenario: Scenario, mode: str, base: Path | None = None) -> tuple[list[Event], Check, list[str]]:
    """One clean run with a recording hook: its events, the restart check, and the acknowledged items."""
    root = _fresh_dir(base, scenario.sequence)
    try:
        hook = CrashHook()
        acks = Acks()
        with _quiet():
            scenario.run(root, hook, mode, acks)
            return hook.events, scenario.check(root, list(acks), mode), list(acks)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def clean_crash_points(scenario: Scenario, mode: str, base: Path | None = None) -> tuple[list[Event], list[CrashPoint]]:
    """The clean run's events and its crash points; ``RuntimeError`` when the clean run fails its own checks."""
    events, clean, _ = record(scenario, mode, base)
    if clean.outcome != "ok":
        raise RuntimeError(f"{scenario.sequence} ({mode}): the clean run already fails its checks: {clean}")
    return events, crash_points(events)


def acked_before(scenario: Scenario, mode: str, base: Path | None = None) -> list[tuple[CrashPoint, int]]:
    """Every crash point of a clean run with the number of items the run had acknowledged before it: a point
    with 0 can only test that nothing half-done survives, a point after an acknowledgement also tests that
    nothing acknowledged is lost. ``RuntimeError`` when the clean run fails its own checks."""
    root = _fresh_dir(base, scenario.sequence)
    try:
        hook = CrashHook()
        acks = _TimedAcks(hook)
        with _quiet():
            scenario.run(root, hook, mode, acks)
            clean = scenario.check(root, list(acks), mode)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if clean.outcome != "ok":
        raise RuntimeError(f"{scenario.sequence} ({mode}): the clean run already fails its checks: {clean}")
    return [(p, sum(1 for a in acks.at if a <= p.index)) for p in crash_points(hook.events)]


def crash_at(scenario: Scenario, mode: str, root: Path, point: CrashPoint) -> Check:
    """Run ``scenario`` under ``root`` (an empty folder) crashing at ``point``, then its restart check. Unlike
    :func:`explore` it keeps ``root`` and lets any other exception of the run or the check propagate."""
    acks = Acks()
    try:
        scenario.run(root, CrashHook(point), mode, acks)
    except Crash:
        pass
    check = scenario.check(root, list(acks), mode)
    check.acked = len(acks)
    return check


def explore(scenario: Scenario, mode: str, *, base: Path | None = None,
            progress: Callable[[int, int], None] | None = None,
            max_points: int | None = None) -> SequenceResult:
    """Run ``scenario`` once per crash point in ``mode`` and check each restart (see module docstring)."""
    if mode not in scenario.modes:
        raise ValueError(f"{scenario.sequence} has no {mode!r} mode")
    t0 = time.perf_counter()
    events, points = clean_crash_points(scenario, mode, base)
    if max_points is not None:
        points = points[:max_points]
    results: list[PointResult] = []
    for i, point in enumerate(points):
        root = _fresh_dir(base, scenario.sequence)
        try:
            hook = CrashHook(point)
            acks = Acks()
            acks_note = ""
            with _quiet():
                try:
                    scenario.run(root, hook, mode, acks)
                except Crash:
                    pass
                except Exception as exc:  # noqa: BLE001 - the crash hook made the design fail differently
                    if hook.fired is None:
                        raise
                    acks_note = f"run raised {type(exc).__name__}: {str(exc)[:120]} after the crash point"
                try:
                    check = scenario.check(root, list(acks), mode)
                except Exception as exc:  # noqa: BLE001 - a restart that dies without a clear error is an outcome
                    check = Check(start="unclear_error",
                                  notes=[f"restart raised {type(exc).__name__}: {str(exc)[:160]}"])
                if acks_note:
                    check.notes.append(acks_note)
                check.acked = len(acks)
            results.append(PointResult(point, check.outcome, hook.fired is not None, len(acks), check))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if progress is not None:
            progress(i + 1, len(points))
    steps = list(dict.fromkeys(ev.step for ev in events))
    return SequenceResult(scenario.design, scenario.sequence, mode, scenario.description,
                          scenario.hardened_option, steps, results, time.perf_counter() - t0,
                          step_events=len(events))


def leftover_temp_files(root: Path) -> list[str]:
    """Hardened writers' temp files (``.<name>.tmp-<pid>``) left under ``root`` by a crash."""
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*.tmp-*"))


def find_scenario(design: str, sequence: str) -> Scenario:
    """The registered sequence named ``sequence`` of ``design`` (``StopIteration`` when there is none)."""
    return next(s for s in all_scenarios(design) if s.sequence == sequence)


def all_scenarios(design: str | None = None) -> list[Scenario]:
    """Every registered sequence (imports the per-design scenario modules lazily)."""
    from harness.reliability.scenarios import SCENARIO_MODULES

    out: list[Scenario] = []
    for d, loader in SCENARIO_MODULES.items():
        if design is None or design == d:
            out.extend(loader())
    return out
