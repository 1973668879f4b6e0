"""Durable-write seam of tortoise_sim (the crash-point explorer's seam; see also ``SimConfig.event_durability``).

Every durable write calls the fault hook ``hook(step)`` immediately before writing (``harness.faults``
contract) and, when the hook has an ``after_write`` attribute, reports the finished write:
``hook.after_write(step, path, offset)`` (new bytes = ``path``'s content from ``offset``; ``path=None``,
``offset=None`` for a Kuzu COMMIT or a rename, which have no bytes to tear). A plain ``FaultPlan`` has no
``after_write`` and sees exactly the calls it always saw.

fractal_sim and agentfly_sim carry their own copy of this seam (the simulators never import each other).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def after_write(hook: Any, step: str, path: str | os.PathLike[str] | None, offset: int | None) -> None:
    after = getattr(hook, "after_write", None)
    if after is not None:
        after(step, path, offset)


def append_text(path: Path, text: str, *, step: str, hook: Callable[[str], None] | None,
                fsync: bool = False) -> None:
    """UTF-8 append between the before/after hook calls; ``fsync=True`` in the transactional event mode."""
    if hook is not None:
        hook(step)
    try:
        offset = path.stat().st_size
    except OSError:
        offset = 0
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())
    after_write(hook, step, path, offset)
