"""How a results-writing command (``memsim bench ...``, ``claims``, ``crash``, ``fuzz``) runs: :func:`published_run`,
and an output folder that a failed command does not leave behind.

:func:`published_run` is the run-ownership rule of :mod:`harness.runs` at the command line: the ``--out`` folder
checked before any work, SIGTERM handled like Ctrl-C, everything written into a staging folder that is published
over the run's own names only when the run finishes (removed, with the earlier results left as they were, when it
fails or is stopped), long earlier work refused without ``--overwrite`` (one ``error:`` line), and one line on
stderr saying what a stopped run left. The CLI boundary (``harness.cli.boundary.guarded``) then exits 143 for
SIGTERM and 130 for Ctrl-C. A command prints ``wrote`` lines after the block, with :func:`harness.runs.final_path`.


Commands check (and create) their ``--out`` folder before any work starts, so that an unwritable path fails at
once rather than after a long run. A run that then fails (an exception, or a non-zero exit) before writing anything
used to leave that folder behind, empty. :func:`removed_if_empty_on_failure` wraps such a command: on failure it
removes the folders the run created that are still empty (the ``--out`` folder, the parents it created, and the
sub-folders it made), deepest first. Files are never removed, and neither is a folder that existed before the run
or one that now holds a file: what a failed run did write (a per-conversation result, a partial report) stays.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from harness.cli.boundary import CLICK_EXITS, check_output_dir, err_console, fail
from harness.runs import RunRefused, Terminated, owned_run, terminated_as_interrupt

LONG_RUN_S = 30 * 60
"""A run that would replace an earlier run of one of its names that recorded at least this wall time stops
unless ``--overwrite`` (bench, crash and fuzz; see docs/cli.md)."""


@contextmanager
def published_run(out: Path, names: Sequence[str], *, overwrite: bool = False,
                  refuse_longer_than_s: float | None = None, flag: str = "--out") -> Iterator[Path]:
    """Run a command's work under :func:`harness.runs.owned_run` (see the module doc); yields the staging folder,
    laid out as ``out``. A folder the run created is removed again when the run fails before publishing."""
    out = Path(out)
    with removed_if_empty_on_failure(out):
        check_output_dir(out, flag)
        try:
            with terminated_as_interrupt(), owned_run(out, names, refuse_longer_than_s=refuse_longer_than_s,
                                                      overwrite=overwrite) as stage:
                yield stage
        except RunRefused as exc:
            raise fail(str(exc)) from None
        except KeyboardInterrupt as exc:
            how = "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C"
            err_console.print(f"stopped by {how}: nothing of this run was kept; earlier results in {out} are as "
                              f"they were", soft_wrap=True)
            raise


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
