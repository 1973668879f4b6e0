"""One durable-write seam for the files the drivers and the trainer write (the crash-point explorer's seam).

Every durable write calls ``hook(step)`` immediately before writing (the ``harness.faults`` contract), writes,
and then, when the hook has an ``after_write`` attribute, reports where the new bytes landed:
``hook.after_write(step, path, offset)`` (new bytes = ``path``'s content from ``offset``; ``None`` for a rename).
A plain ``FaultPlan`` or ``FaultSchedule`` has no ``after_write`` and sees exactly the calls it always saw.

- ``append_text``: the faithful upstream append (UTF-8 text mode, no fsync, no lock; spec §2); ``fsync=True`` is
  the journalled mode's durable append.
- ``write_with``: a whole-file write done by ``writer(path)`` (``torch.save``, ``json.dump``); ``atomic=True``
  (hardened) writes ``.<name>.tmp-<pid>`` in the same folder, fsyncs it, ``os.replace``s it onto the target and
  fsyncs the folder (steps ``<step>.tmp`` and ``<step>.replace``).

fractal_sim and tortoise_sim carry their own copy of this seam (the simulators never import each other).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

Hook = Callable[[str], None] | None


def after_write(hook: Any, step: str, path: str | os.PathLike[str] | None, offset: int | None) -> None:
    """Report a finished write to hooks that want it (see module docstring)."""
    after = getattr(hook, "after_write", None)
    if after is not None:
        after(step, path, offset)


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def file_size(path: str | os.PathLike[str]) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def append_text(path: str | os.PathLike[str], text: str, *, step: str | None, hook: Hook,
                fsync: bool = False) -> None:
    """``open(path, "a", encoding="utf-8").write(text)`` between the before/after hook calls (``step=None``: the
    caller already called the before hook)."""
    if hook is not None and step is not None:
        hook(step)
    offset = file_size(path)
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    if step is not None:
        after_write(hook, step, path, offset)


def write_with(path: str | os.PathLike[str], writer: Callable[[str], None], *, step: str, hook: Hook,
               atomic: bool = False) -> None:
    """Whole-file write by ``writer(path)``: in place (faithful) or atomic replace (hardened)."""
    if hook is not None:
        hook(step)
    if not atomic:
        writer(str(path))
        after_write(hook, step, path, 0)
        return
    p = Path(path)
    tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}")
    writer(str(tmp))
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    after_write(hook, step + ".tmp", tmp, 0)
    os.replace(tmp, p)
    fsync_dir(p.parent)
    after_write(hook, step + ".replace", p, None)
