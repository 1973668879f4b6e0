"""What a long benchmark is doing, on stderr: a live display in a terminal, plain lines in a log.

Every benchmark's ``run`` gets a ``track`` (``benchmarks.common.progress_bar`` yields one). It is a
:class:`Tracker`:

- ``track(iterable, description, total=None, unit="")`` shows a loop: items done of the total, elapsed, ETA;
- ``track.phase(description, total=None, unit="")`` (a context manager) shows a long step that reports how far
  it got through the :class:`Phase` it yields (``phase.update(done, total=..., status=...)``), or through
  ``harness.progress.report`` from code deep inside the step (the runner installs the phase of an arm's ingest
  that way, so the arm reports turns done without knowing about displays).

Two displays, chosen by whether stderr is a terminal:

- **terminal** (:class:`RichTracker`): one rich progress line per open phase (description and status, bar,
  done/total with the unit, elapsed, ETA), redrawn several times a second, so the elapsed time moves even while
  a step reports nothing. A phase opened while another is open (an arm's ingest inside the questions loop) is
  removed when it ends; an outermost phase stays on screen with its final count.
- **no terminal** (:class:`PlainTracker`: CI, ``nohup``, ``2> log``): every ``interval_s`` (30 s by default) one
  plain line per open phase (outermost first, nested ones indented), whether or not anything advanced, and one
  line when a phase ends: always for an outermost phase, and for a nested one that was shown in a periodic line
  (a nested phase that ends sooner would only add noise). With nothing open, the periodic line says how long the
  run has been working. Lines are broken between words at 80 columns.

Work in worker processes reports through a queue (:func:`worker_tracker` in the worker, :class:`Relay` in the
parent, which turns the events into phases of the parent's tracker and echoes the workers' lines).
"""

from __future__ import annotations

import itertools
import os
import queue
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

DEFAULT_INTERVAL_S = 30.0
"""Longest gap between two plain progress lines when stderr is not a terminal."""
WIDTH = 80
"""Plain lines are broken between words at this width."""


def clock(seconds: float | None) -> str:
    """``h:mm:ss`` (the form rich uses); ``?`` when unknown."""
    if seconds is None:
        return "?"
    s = max(0, int(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Phase:
    """One open task of a tracker: a loop's bar or a long step. ``update`` takes absolute ``done`` and/or
    ``advance`` (added), a new ``total`` and a ``status`` (``""`` clears it); ``close`` ends it (once)."""

    def __init__(self, tracker: Tracker | None, key: int, description: str, total: int | None, unit: str,
                 nested: bool) -> None:
        self.tracker, self.key = tracker, key
        self.description, self.total, self.unit, self.nested = description, total, unit, nested
        self.done = 0
        self.status = ""
        self.started = self.anchor = time.monotonic()
        self.shown = False
        self.closed = False

    def update(self, done: int | None = None, *, advance: int = 0, total: int | None = None,
               status: str | None = None) -> None:
        if done is not None:
            self.done = int(done)
        self.done += advance
        if self.done == 0:  # the rate (ETA) counts from the last word heard before the first unit was done
            self.anchor = time.monotonic()
        if total is not None:
            self.total = int(total)
        if status is not None:
            self.status = " ".join(str(status).split())
        if self.tracker is not None and not self.closed:
            self.tracker._changed(self)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.tracker is not None:
            self.tracker._closed(self)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def eta(self) -> float | None:
        """Seconds left at the rate so far (``None`` before the first unit, or without a total). The rate is
        measured from the last update before the first unit was done, so a slow start that reported itself (a
        model load, an encoding pass: ``update(0, status=...)``) does not inflate it."""
        if not self.total or self.done <= 0:
            return None
        return (time.monotonic() - self.anchor) / self.done * max(0, self.total - self.done)

    def count(self) -> str:
        """``done/total unit``; ``done unit`` without a total; empty for a step that counts nothing."""
        unit = f" {self.unit}" if self.unit else ""
        if self.total is None and self.done == 0:
            return ""
        return f"{self.done}/{self.total}{unit}" if self.total is not None else f"{self.done}{unit}"

    def label(self) -> str:
        return f"{self.description}: {self.status}" if self.status else self.description


class Tracker:
    """The ``track`` every benchmark gets. Subclasses draw; this class keeps the open phases and the API."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._keys = itertools.count()
        self.open_phases: dict[int, Phase] = {}

    # ----------------------------------------------------------------------------------------------- the API
    def __call__(self, it: Iterable[Any], description: str = "", total: int | None = None,
                 unit: str = "") -> Iterator[Any]:
        """Yield the items of ``it`` while a phase counts them (each counted once the loop body has run)."""
        if total is None:
            try:
                total = len(it)  # type: ignore[arg-type]
            except TypeError:
                total = None
        ph = self.open(description, total, unit)
        try:
            for x in it:
                yield x
                ph.update(advance=1)
        finally:
            ph.close()

    @contextmanager
    def phase(self, description: str, total: int | None = None, unit: str = "") -> Iterator[Phase]:
        """A long step that reports its own progress through the phase yielded."""
        ph = self.open(description, total, unit)
        try:
            yield ph
        finally:
            ph.close()

    def open(self, description: str, total: int | None = None, unit: str = "") -> Phase:
        with self._lock:
            ph = Phase(self, next(self._keys), description, total, unit, nested=bool(self.open_phases))
            self.open_phases[ph.key] = ph
            self._opened(ph)
            return ph

    def echo(self, text: str) -> None:
        """A line of a worker (see :class:`Relay`): printed on stderr above the display."""
        print(text, file=sys.stderr, flush=True)

    # ---------------------------------------------------------------------------------------- for subclasses
    def _opened(self, ph: Phase) -> None:
        pass

    def _changed(self, ph: Phase) -> None:
        pass

    def _closed(self, ph: Phase) -> None:
        with self._lock:
            self.open_phases.pop(ph.key, None)
        self._ended(ph)

    def _ended(self, ph: Phase) -> None:
        pass

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


class NullTracker(Tracker):
    """No display (``--no-progress``): loops are the iterables themselves, phases count for nobody."""

    def __call__(self, it: Iterable[Any], description: str = "", total: int | None = None,
                 unit: str = "") -> Iterable[Any]:
        return it

    def open(self, description: str, total: int | None = None, unit: str = "") -> Phase:
        return Phase(None, -1, description, total, unit, nested=False)


class FunctionTracker(Tracker):
    """A plain ``track(it, description, total)`` function behind the tracker API: its loops are shown as the
    function shows them; a phase becomes one loop of the function over the phase's units, driven from a thread
    of its own (each unit done is one item; a phase without a total is one step, done when it ends)."""

    def __init__(self, fn: Callable[..., Iterable[Any]]) -> None:
        super().__init__()
        self.fn = fn
        self._feeds: dict[int, tuple[queue.SimpleQueue[int | None], threading.Thread, list[int]]] = {}

    def __call__(self, it: Iterable[Any], description: str = "", total: int | None = None,
                 unit: str = "") -> Iterable[Any]:
        return self.fn(it, description=description, total=total)

    def _drive(self, steps: queue.SimpleQueue[int | None], description: str, total: int | None) -> None:
        for _ in self.fn(iter(steps.get, None), description=description, total=total):
            pass

    def _opened(self, ph: Phase) -> None:
        steps: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        total = ph.total if ph.total is not None else 1
        t = threading.Thread(target=self._drive, args=(steps, ph.description, total), daemon=True)
        self._feeds[ph.key] = (steps, t, [0])
        t.start()

    def _changed(self, ph: Phase) -> None:
        if ph.total is None:
            return
        steps, _, sent = self._feeds[ph.key]
        while sent[0] < ph.done:
            steps.put(1)
            sent[0] += 1

    def _ended(self, ph: Phase) -> None:
        self._changed(ph)
        steps, t, sent = self._feeds.pop(ph.key)
        if ph.total is None:
            steps.put(1)
        steps.put(None)
        t.join()


def as_tracker(track: Any) -> Tracker:
    """``track`` as a :class:`Tracker`: itself, a :class:`FunctionTracker` around a plain function, or a
    :class:`NullTracker` for ``None``."""
    if isinstance(track, Tracker):
        return track
    if track is None:
        return NullTracker()
    return FunctionTracker(track)


class StampedTracker(Tracker):
    """Forwards everything to ``inner`` and appends ``time.perf_counter()`` to ``stamps`` when the outermost loop
    starts and after each of its items (what ``longmemeval-scale`` times the design run's questions by)."""

    def __init__(self, inner: Any, stamps: list[float]) -> None:
        super().__init__()
        self.inner, self.stamps = as_tracker(inner), stamps
        self._depth = 0

    def __call__(self, it: Iterable[Any], description: str = "", total: int | None = None,
                 unit: str = "") -> Iterator[Any]:
        outer = self._depth == 0
        self._depth += 1
        try:
            if outer:
                self.stamps.append(time.perf_counter())
            for x in self.inner(it, description=description, total=total, unit=unit):
                yield x
                if outer:
                    self.stamps.append(time.perf_counter())
        finally:
            self._depth -= 1

    def open(self, description: str, total: int | None = None, unit: str = "") -> Phase:
        return self.inner.open(description, total, unit)


# ------------------------------------------------------------------------------------------------ terminal
class RichTracker(Tracker):
    """The terminal display: one rich ``Progress`` whose tasks are the open phases (see the module docstring)."""

    def __init__(self, console: Any) -> None:
        super().__init__()
        from rich.progress import (
            BarColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text

        class CountColumn(ProgressColumn):
            """``done/total unit`` (``done unit`` without a total)."""

            def render(self, task: Any) -> Text:
                unit = task.fields.get("unit") or ""
                done = int(task.completed)
                shown = f"{done}/{int(task.total)}" if task.total is not None else f"{done}"
                return Text(shown + (f" {unit}" if unit else ""), style="progress.download")

        self.console = console
        self.progress = Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                                 CountColumn(), TimeElapsedColumn(), TimeRemainingColumn(), console=console,
                                 transient=False)
        self._tasks: dict[int, Any] = {}

    def start(self) -> None:
        self.progress.start()

    def stop(self) -> None:
        self.progress.stop()

    def echo(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def _opened(self, ph: Phase) -> None:
        self._tasks[ph.key] = self.progress.add_task(_escape(ph.label()), total=ph.total, unit=ph.unit)

    def _changed(self, ph: Phase) -> None:
        task = self._tasks.get(ph.key)
        if task is not None:
            self.progress.update(task, completed=ph.done, total=ph.total, description=_escape(ph.label()))

    def _ended(self, ph: Phase) -> None:
        task = self._tasks.pop(ph.key, None)
        if task is None:
            return
        if ph.nested:
            self.progress.remove_task(task)
            return
        self.progress.update(task, completed=ph.done, total=ph.total if ph.total is not None else ph.done,
                             description=_escape(ph.label()))
        self.progress.stop_task(task)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


# ---------------------------------------------------------------------------------------------- no terminal
class PlainTracker(Tracker):
    """Plain lines for a log (see the module docstring); ``interval_s`` is the longest gap between two lines
    while the run works."""

    def __init__(self, stream: TextIO, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        super().__init__()
        if interval_s <= 0:
            raise ValueError(f"progress interval must be positive, got {interval_s}")
        self.stream, self.interval_s = stream, interval_s
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._beat, name="memsim-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def echo(self, text: str) -> None:
        self._write([text], wrap=False)

    def _beat(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.beat()

    def beat(self) -> None:
        """The periodic lines: every open phase, outermost first (what the thread prints each interval)."""
        with self._lock:
            phases = list(self.open_phases.values())
            for ph in phases:
                ph.shown = True
        if not phases:
            self._write([f"working: {clock(time.monotonic() - self.started)} since the start"])
            return
        lines = []
        for ph in phases:
            eta = ph.eta()
            count = f"{ph.count()}, " if ph.count() else ""
            line = (f"{'  ' if ph.nested else ''}{ph.description}: {count}{clock(ph.elapsed)} elapsed"
                    + (f", ETA {clock(eta)}" if eta is not None else ""))
            lines.append(line + (f"; {ph.status}" if ph.status else ""))
        self._write(lines)

    def _ended(self, ph: Phase) -> None:
        if ph.nested and not ph.shown:
            return
        finished = ph.total is None or ph.done >= ph.total
        how = (f"finished {ph.count()} in" if finished else f"stopped at {ph.count()} after").replace("  ", " ")
        self._write([f"{'  ' if ph.nested else ''}{ph.description}: {how} {clock(ph.elapsed)}"])

    def _write(self, lines: list[str], wrap: bool = True) -> None:
        out = []
        for line in lines:
            if wrap:
                indent = " " * (len(line) - len(line.lstrip(" ")))
                out += textwrap.wrap(line, WIDTH, subsequent_indent=indent + "    ", break_long_words=False,
                                     break_on_hyphens=False) or [line]
            else:
                out.append(line)
        with self._lock:
            try:
                self.stream.write("\n".join(out) + "\n")
                self.stream.flush()
            except (OSError, ValueError):  # a closed or broken stderr must not stop the work
                pass


# ---------------------------------------------------------------------------------------------- the factory
@contextmanager
def progress_bar(enabled: bool = True, *, interval_s: float = DEFAULT_INTERVAL_S,
                 stream: TextIO | None = None) -> Iterator[Tracker]:
    """Yield the run's :class:`Tracker`: the terminal display when ``stream`` (default: stderr) is a terminal,
    plain lines every ``interval_s`` otherwise, nothing when not ``enabled`` (``--no-progress``)."""
    if not enabled:
        yield NullTracker()
        return
    from rich.console import Console

    # on stderr: stdout keeps only the benchmark's own lines and the paths it wrote
    console = Console(file=stream, stderr=stream is None)
    tracker: Tracker = (RichTracker(console) if console.is_terminal
                        else PlainTracker(stream or sys.stderr, interval_s=interval_s))
    tracker.start()
    try:
        yield tracker
    finally:
        tracker.stop()


@contextmanager
def given_or_own(track: Any = None) -> Iterator[Tracker]:
    """``track`` (as a :class:`Tracker`) when a caller passed one (the CLI's display), else a display of this
    process's own (:func:`progress_bar`): a module run as a script shows its progress too, and never two displays
    at once."""
    if track is not None:
        yield as_tracker(track)
        return
    with progress_bar() as own:
        yield own


# ---------------------------------------------------------------------------------------- worker processes
class RemoteTracker(Tracker):
    """A worker process's tracker: every phase event goes to the parent's queue (see :class:`Relay`)."""

    def __init__(self, events: Any) -> None:
        super().__init__()
        self.events = events
        self._keys = _REMOTE_KEYS  # one count per process: a phase's id never repeats in the parent

    def open(self, description: str, total: int | None = None, unit: str = "") -> Phase:
        with self._lock:
            ph = Phase(self, next(self._keys), description, total, unit, nested=True)
            self.open_phases[ph.key] = ph
        self._put(("open", self._id(ph), description, total, unit))
        return ph

    def echo(self, text: str) -> None:
        self._put(("echo", text))

    def _id(self, ph: Phase) -> str:
        return f"{os.getpid()}:{ph.key}"

    def _state(self, ph: Phase) -> tuple[Any, ...]:
        return ("update", self._id(ph), ph.done, ph.total, ph.status)

    def _changed(self, ph: Phase) -> None:
        self._put(self._state(ph))

    def _ended(self, ph: Phase) -> None:
        self._put(self._state(ph))
        self._put(("close", self._id(ph)))

    def _put(self, event: tuple[Any, ...]) -> None:
        try:
            self.events.put(event)
        except (OSError, ValueError):  # the parent is gone or closed the queue: the work goes on unseen
            pass


_REMOTE_KEYS = itertools.count()


def worker_tracker(events: Any) -> RemoteTracker:
    """The tracker a worker process reports through (``events``: the queue the parent's :class:`Relay` reads)."""
    return RemoteTracker(events)


class Relay:
    """The parent's side of the workers' queue: each worker phase becomes a phase of ``tracker`` (driven from
    one reader thread), each worker line is passed to ``echo`` (``None``: dropped)."""

    def __init__(self, events: Any, tracker: Any, echo: Callable[[str], None] | None = None) -> None:
        self.events, self.tracker, self.echo = events, as_tracker(tracker), echo
        self.phases: dict[str, Phase] = {}
        self.reader = threading.Thread(target=self._read, name="memsim-progress-relay", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            ev = self.events.get()
            kind = ev[0]
            if kind == "stop":
                return
            if kind == "echo":
                if self.echo is not None:
                    self.echo(ev[1])
            elif kind == "open":
                self.phases[ev[1]] = self.tracker.open(ev[2], ev[3], ev[4])
            elif kind == "update" and ev[1] in self.phases:
                self.phases[ev[1]].update(ev[2], total=ev[3], status=ev[4])
            elif kind == "close" and ev[1] in self.phases:
                self.phases.pop(ev[1]).close()

    def close(self) -> None:
        """Stop reading (events already queued are handled first) and end what a worker left open."""
        self.events.put(("stop",))
        self.reader.join()
        for ph in self.phases.values():
            ph.close()
        self.phases.clear()
