"""How far a long step got, reported from deep inside it without passing a callback through every call.

A caller that shows progress (the benchmarks' ``track``, see ``benchmarks.progress``) opens a phase for a long
step, such as an arm's ingest of one conversation, and installs the phase's update function with
:func:`reporting` for the length of the step. Code inside the step (an arm's ``ingest``, an encoder cache) calls
:func:`report` with what it knows: how many units are done (the phase's unit, e.g. turns), the total when it
learns it, or a short status (``"encoding 992 texts"``, ``"capturing session 12/48"``). Outside any phase,
:func:`report` does nothing, so an arm runs the same with or without a progress display.

The sink is held in a ``contextvars.ContextVar``: a thread the step starts does not inherit it (report from the
thread that runs the step), and two steps running in two threads report to their own phases.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

Sink = Callable[..., None]
"""``sink(done=None, *, total=None, status=None)``: a phase's update function."""

_SINK: ContextVar[Sink | None] = ContextVar("memsim_progress_sink", default=None)


def report(done: int | None = None, *, total: int | None = None, status: str | None = None) -> None:
    """Tell the phase that is showing progress (if any) how far the current step got: ``done`` units of
    ``total`` (either may be left out) and a short ``status`` (``""`` clears it). Never raises for lack of a
    display; a failing display is the display's problem, not the step's."""
    sink = _SINK.get()
    if sink is None:
        return
    kwargs: dict[str, Any] = {}
    if total is not None:
        kwargs["total"] = total
    if status is not None:
        kwargs["status"] = status
    try:
        sink(done, **kwargs)
    except Exception:  # a progress display must never fail the work it shows
        pass


@contextmanager
def reporting(sink: Sink | None) -> Iterator[None]:
    """For the length of the block, :func:`report` goes to ``sink`` (``None``: nowhere)."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)
