"""An output folder that a failed command does not leave behind.

Commands check (and create) their ``--out`` folder before any work starts, so that an unwritable path fails at
once rather than after a long run. A run that then fails (an exception, or a non-zero exit) before writing anything
used to leave that folder behind, empty. :func:`removed_if_empty_on_failure` wraps such a command: on failure it
removes the folders the run created that are still empty (the ``--out`` folder, the parents it created, and the
sub-folders it made), deepest first. Files are never removed, and neither is a folder that existed before the run
or one that now holds a file: what a failed run did write (a per-conversation result, a partial report) stays.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.cli.boundary import CLICK_EXITS


def _dirs_under(root: Path) -> set[Path]:
    if not root.is_dir():
        return set()
    return {Path(d) for d, _, _ in os.walk(root)}


@contextmanager
def removed_if_empty_on_failure(out_dir: Path) -> Iterator[Path]:
    """Run the body; when it fails, remove the folders it created under and above ``out_dir`` that are empty."""
    out_dir = Path(out_dir)
    missing = [p for p in (out_dir, *out_dir.parents) if not p.exists()]  # deepest first
    before = _dirs_under(out_dir)
    try:
        yield out_dir
    except BaseException as exc:
        if not (isinstance(exc, CLICK_EXITS) and getattr(exc, "exit_code", 1) == 0):
            remove_new_empty_dirs(out_dir, before, missing)
        raise


def remove_new_empty_dirs(out_dir: Path, before: set[Path], missing: list[Path]) -> list[Path]:
    """Remove the empty folders under ``out_dir`` that are not in ``before``, then each of ``missing`` (folders
    that did not exist before, deepest first) when empty; returns what was removed."""
    removed: list[Path] = []
    for d in sorted(_dirs_under(out_dir) - before, key=lambda p: len(p.parts), reverse=True):
        try:
            d.rmdir()  # only succeeds on an empty folder
            removed.append(d)
        except OSError:
            pass
    for d in missing:
        if not d.exists():  # removed just above, or never created
            continue
        try:
            d.rmdir()
            removed.append(d)
        except OSError:
            break  # not empty (or not ours to remove): every parent above it holds it
    return removed
