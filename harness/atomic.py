"""One atomic file write for the whole project: a temp file in the same folder, then a rename.

A crash (or an injected fault) leaves the old file or the new one, never half of one. ``fault_hook(step)`` runs just
before the rename, so fault injection (:mod:`harness.faults`) can stop the write at its one durable step. The
benchmarks re-export it from ``benchmarks.common``; harness code imports it from here (imports point down).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomic(path: Path, data: bytes, fault_hook: Callable[[str], None] | None = None,
                 step: str = "results.write") -> None:
    """Write ``data`` to ``path`` through a temp file in the same folder and a rename, so a crash leaves the old file
    or the new one, never half of one; ``fault_hook(step)`` runs just before the rename (fault injection)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        if fault_hook:
            fault_hook(step)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
