"""One durable-write function for every file Fractal writes (the crash-point explorer's seam).

``write_file(path, data, step=..., hook=..., mode=...)`` calls ``hook(step)`` immediately before the write (the
fault-hook contract of ``harness.faults``), writes, and then, when the hook also has an ``after_write``
attribute, reports where the new bytes landed: ``hook.after_write(step, path, offset)`` (the new bytes are
``path``'s content from ``offset`` on; ``offset=None`` means a rename, which has no bytes to tear). A plain
``FaultPlan`` has no ``after_write``, so it sees exactly the calls it always saw.

Modes:
- ``"overwrite"`` (faithful, FRA-17): truncate and write in place, same inode, no temp file, no fsync.
  Byte-identical to ``Path.write_text(text, encoding="utf-8")`` on POSIX.
- ``"atomic"`` (hardened, named option ``durability="atomic"``): write ``.<name>.tmp-<pid>`` in the same
  folder, fsync it, ``os.replace`` onto the target, fsync the folder. The reported steps are
  ``<step>.tmp`` (the temp file's bytes) and ``<step>.replace`` (the rename).

The simulators never import each other, so agentfly_sim and tortoise_sim carry their own copy of this helper.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

DURABILITY_MODES = ("faithful", "atomic")


def _after(hook: Any, step: str, path: Path, offset: int | None) -> None:
    after = getattr(hook, "after_write", None)
    if after is not None:
        after(step, path, offset)


def fsync_dir(folder: Path) -> None:
    """fsync a directory so a rename inside it is durable (no-op where directories cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def temp_path_for(path: Path) -> Path:
    """The hardened writer's temp file: hidden, same folder, not matching ``*.json`` (listing skips it)."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def write_file(path: Path, data: bytes, *, step: str, hook: Callable[[str], None] | None,
               mode: str = "overwrite") -> None:
    """Write ``data`` to ``path`` as described in the module docstring (``mode``: overwrite | atomic)."""
    if hook is not None:
        hook(step)
    if mode == "overwrite":
        with open(path, "wb") as fh:
            fh.write(data)
        _after(hook, step, path, 0)
        return
    if mode != "atomic":
        raise ValueError(f"unknown write mode {mode!r}; expected 'overwrite' or 'atomic'")
    tmp = temp_path_for(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    _after(hook, step + ".tmp", tmp, 0)
    os.replace(tmp, path)
    fsync_dir(path.parent)
    _after(hook, step + ".replace", path, None)
