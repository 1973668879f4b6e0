"""Runs that own their names: what a results-writing command may read, write and replace in its output folder.

Several runs share one output folder (every ``memsim bench ...`` writes ``<out>/<name>.{json,md,png}`` and maybe
``<out>/<name>/``; ``benchmarks/results/`` holds twenty of them). The rule every such command follows, through
:func:`owned_run`:

- **A run owns exactly its own names**: for each name ``n`` it declares, the entries ``<out>/n`` (a file or a
  folder) and ``<out>/n.*`` (``locomo.json``, ``locomo.probes.parquet``; not ``locomo-paper.json``, which is
  another name). A name may have folders in it (``pointer-delivery/claude-code``): it then owns
  ``<out>/pointer-delivery/claude-code`` and ``<out>/pointer-delivery/claude-code.*``.
- **It starts from fresh working state and never reads its earlier outputs**: everything it writes goes to a new
  staging folder ``<out>/.memsim-partial-<name>-<pid>-<token>/`` (laid out as ``<out>`` itself), so a store, a
  HOME or hook records left by an earlier run are never seen.
- **It replaces its earlier outputs only when it has finished**: on success the earlier entries of each name it
  wrote are removed (the ``.json`` first, so a reader never pairs an old JSON with new figures) and the staged
  entries moved into place (the ``.json`` last); a name it wrote nothing under keeps its earlier entries. Nothing
  outside its names is touched; a staged entry outside them is an error (a bug in the command), never published.
- **A run that fails, is interrupted (Ctrl-C) or terminated (SIGTERM) leaves nothing**: its staging folder is
  removed and the earlier outputs stay as they were. A run killed outright (SIGKILL, power loss) leaves only its
  hidden staging folder, which no reader opens (every name starts with ``.memsim-partial-``) and which the next run
  of the same name removes once its process is gone.
- **Replacing long work is refused**: a command family may pass ``refuse_longer_than_s``; when an earlier run of a
  name recorded a wall time at least that long (``run.wall_s`` in its ``<name>.json``, see :func:`run_record`),
  the run stops before any work with one line, unless ``overwrite`` is set (``--overwrite``).

State that is *meant* to outlive a run (the data cache, the hosts cache, the embedding store) lives outside run
folders, keyed and verified by its own module; docs/cli.md lists it.

:func:`terminated_as_interrupt` turns SIGTERM into :class:`Terminated` (a ``KeyboardInterrupt``), so the clean-up
above also runs for ``kill`` and job schedulers; the CLI exits 143 for it and 130 for Ctrl-C
(``harness.cli.run_output.published_run`` is this module at the command line). A run that quotes *another* run's
published results beside its own finds them through :func:`published_folder`.

:func:`run_record` is the provenance block every results JSON carries under ``run`` (memsim version, git commit, a
hash of the uncommitted package diff, the command line of :func:`command_line`, the wall time of the running
:func:`owned_run`); :func:`code_text` is what a page prints after ``Code:`` (``not recorded`` for older results).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

STAGE_PREFIX = ".memsim-partial-"
"""Leading part of every staging folder's name (hidden: no reader lists it, ``ls`` does not show it)."""

PACKAGE_DIRS = ("fractal_sim", "agentfly_sim", "tortoise_sim", "harness", "benchmarks")
"""The code whose uncommitted changes :func:`code_identity` hashes (not docs, tests or results)."""


class RunRefused(Exception):
    """A run would replace long work without ``overwrite`` (one line naming the file)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so every clean-up runs; the CLI exits 143 for it."""

    exit_code = 143


def exit_code_for(exc: BaseException) -> int:
    """The process exit status of an interruption: 143 for SIGTERM (:class:`Terminated`), 130 for Ctrl-C."""
    return 143 if isinstance(exc, Terminated) else 130


@contextlib.contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """While the body runs, SIGTERM raises :class:`Terminated` in the main thread (a ``KeyboardInterrupt``), so
    ``finally`` blocks and :func:`owned_run` clean up instead of the process ending on the spot. Outside the main
    thread (where Python cannot install a handler) the body runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise Terminated(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# ------------------------------------------------------------------------------------------------- names
def _check_name(name: str) -> Path:
    rel = Path(name)
    if not name or rel.is_absolute() or any(p in ("", ".", "..") or p.startswith(".") for p in name.split("/")):
        raise ValueError(f"{name!r}: a run name is a relative path of plain names (no '.', '..' or hidden part)")
    return rel


def owned_entries(out: Path, name: str) -> list[Path]:
    """The entries of ``out`` that ``name`` owns: ``out/name`` and ``out/name.*`` that exist (sorted)."""
    rel = _check_name(name)
    parent = out / rel.parent
    if not parent.is_dir():
        return []
    base = rel.name
    return sorted(p for p in parent.iterdir() if p.name == base or p.name.startswith(base + "."))


def _stage_name(name: str) -> str:
    return STAGE_PREFIX + name.replace("/", "--")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_stages(out: Path, name: str) -> list[Path]:
    """Remove the staging folders of ``name`` in ``out`` whose process is gone (a run killed outright)."""
    removed = []
    prefix = _stage_name(name) + "-"
    if not out.is_dir():
        return removed
    for p in out.iterdir():
        if not (p.is_dir() and p.name.startswith(prefix)):
            continue
        pid_text = p.name[len(prefix):].split("-", 1)[0]
        if pid_text.isdigit() and not _pid_alive(int(pid_text)):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def earlier_wall_s(json_path: Path) -> float | None:
    """The wall time an earlier run recorded in its results JSON (``run.wall_s``, else ``meta.wall_s``, else a
    top-level ``wall_s``), or None when there is none or the file cannot be read."""
    try:
        data = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    for block in (data.get("run"), data.get("meta"), data):
        if isinstance(block, dict) and isinstance(block.get("wall_s"), int | float):
            return float(block["wall_s"])
    return None


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def check_replace(out: Path, names: Sequence[str], refuse_longer_than_s: float | None, overwrite: bool,
                  flag: str = "--overwrite") -> None:
    """Raise :class:`RunRefused` when an earlier run of one of ``names`` in ``out`` recorded a wall time of at
    least ``refuse_longer_than_s`` and ``overwrite`` is not set."""
    if overwrite or refuse_longer_than_s is None:
        return
    for name in names:
        jp = out / f"{name}.json"
        wall = earlier_wall_s(jp) if jp.is_file() else None
        if wall is not None and wall >= refuse_longer_than_s:
            raise RunRefused(f"{jp}: an earlier run that took {_hours(wall)} is there and would be replaced; "
                             f"pass {flag} to replace it, or --out another folder")


# ------------------------------------------------------------------------------------------------- the run
def _staged_entries(stage: Path, name: str) -> list[Path]:
    return owned_entries(stage, name)


def _json_last(paths: Sequence[Path]) -> list[Path]:
    return sorted(paths, key=lambda p: (p.suffix == ".json", p.name))


def publish(stage: Path, out: Path, names: Sequence[str]) -> list[Path]:
    """Move what ``stage`` holds for ``names`` into ``out``, replacing the earlier entries of each name the run
    wrote (a name it wrote nothing under keeps its earlier entries); returns the published paths. Raises
    ``ValueError`` (before touching ``out``) when ``stage`` holds anything else."""
    staged = {n: _staged_entries(stage, n) for n in names}
    expected = {p for ps in staged.values() for p in ps}
    stray = []
    for d, dirs, files in os.walk(stage):
        here = Path(d)
        for f in [*dirs, *files]:
            p = here / f
            if p in expected or any(p.is_relative_to(e) for e in expected):
                continue
            if p.is_dir() and any(e.is_relative_to(p) for e in expected):
                continue  # a parent folder of a nested name
            stray.append(p)
    if stray:
        raise ValueError(f"{out}: the run wrote {stray[0].relative_to(stage)}, which is not one of its names "
                         f"({', '.join(names)})")
    published: list[Path] = []
    for name in names:
        if not staged[name]:  # the run wrote nothing under this name: the earlier entries stay as they are
            continue
        old = owned_entries(out, name)
        for p in sorted(old, key=lambda p: p.suffix != ".json"):  # the JSON goes first
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
        target_parent = out / Path(name).parent
        target_parent.mkdir(parents=True, exist_ok=True)
        for src in _json_last(staged[name]):
            dst = target_parent / src.name
            os.replace(src, dst)
            published.append(dst)
    return published


def final_path(stage: Path, out: Path, path: Path) -> Path:
    """Where a path written under the staging folder ends up once published (a path outside it is returned
    unchanged): what a command prints after ``wrote``."""
    path = Path(path)
    return Path(out) / path.relative_to(stage) if path.is_relative_to(stage) else path


def published_folder(path: Path) -> Path:
    """The folder a path inside a staging folder is published to (``<out>/.memsim-partial-x-1-ab/sub`` ->
    ``<out>/sub``); any other path unchanged. For a run that quotes *another* run's published results beside its
    own (``bench cost`` quotes the ``engines.json`` of its output folder), never for its own earlier outputs."""
    path = Path(path)
    parts = path.parts
    for i, part in enumerate(parts):
        if part.startswith(STAGE_PREFIX):
            return Path(*parts[:i], *parts[i + 1:])
    return path


_STARTED: list[float] = []
"""Start times (``time.perf_counter``) of the :func:`owned_run` blocks running in this process, innermost last."""


def current_wall_s() -> float | None:
    """Seconds since the innermost running :func:`owned_run` started (None outside one): the wall time
    :func:`run_record` records for a run that does not pass its own."""
    return time.perf_counter() - _STARTED[-1] if _STARTED else None


@contextlib.contextmanager
def owned_run(out: Path, names: Sequence[str], *, refuse_longer_than_s: float | None = None,
              overwrite: bool = False) -> Iterator[Path]:
    """Run a command that writes ``names`` into ``out`` (see the module doc); yields the staging folder to write
    into, laid out as ``out`` (``<stage>/<name>.json``, ``<stage>/<name>/...``).

    Before the body: ``out`` is created, stale staging folders of these names are removed, and
    :func:`check_replace` may raise :class:`RunRefused`. After a body that returns: :func:`publish`. After one that
    raises (any exception, Ctrl-C, :class:`Terminated`, ``SystemExit``): the staging folder is removed and the
    exception goes on; the earlier outputs are untouched."""
    out = Path(out)
    if not names:
        raise ValueError("a run owns at least one name")
    for n in names:
        _check_name(n)
    out.mkdir(parents=True, exist_ok=True)
    for n in names:
        remove_stale_stages(out, n)
    check_replace(out, names, refuse_longer_than_s, overwrite)
    stage = out / f"{_stage_name(names[0])}-{os.getpid()}-{secrets.token_hex(4)}"
    stage.mkdir()
    _STARTED.append(time.perf_counter())
    try:
        yield stage
        publish(stage, out, names)
    finally:
        _STARTED.pop()
        shutil.rmtree(stage, ignore_errors=True)


# ------------------------------------------------------------------------------------------------- provenance
_IDENTITY: dict[str, Any] | None = None


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


def code_identity(refresh: bool = False) -> dict[str, Any]:
    """What code a result came from: memsim's version, the git commit of the source tree memsim runs from (None
    when it is not a git checkout, e.g. an installed wheel) and, when that tree has uncommitted changes to the
    package code (:data:`PACKAGE_DIRS`), the sha256 of ``git diff HEAD`` over them (else None). Results are usually
    measured before the commit that adds them: the commit plus the diff hash names the code exactly. Cached per
    process (``refresh`` recomputes)."""
    global _IDENTITY
    if _IDENTITY is not None and not refresh:
        return dict(_IDENTITY)
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver: str | None = version("memsim")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree without installing
        ver = None
    root = Path(__file__).resolve().parents[1]
    commit = diff_hash = None
    if (root / ".git").exists():
        head = _git(root, "rev-parse", "HEAD")
        commit = head.strip() if head else None
        if commit:
            diff = _git(root, "diff", "HEAD", "--binary", "--", *PACKAGE_DIRS)
            untracked = _git(root, "ls-files", "--others", "--exclude-standard", "--", *PACKAGE_DIRS)
            if diff or untracked:
                h = hashlib.sha256((diff or "").encode("utf-8"))
                for rel in sorted((untracked or "").split()):
                    h.update(rel.encode("utf-8"))
                    with contextlib.suppress(OSError):
                        h.update((root / rel).read_bytes())
                diff_hash = h.hexdigest()
    _IDENTITY = {"memsim": ver, "commit": commit, "diff_sha256": diff_hash}
    return dict(_IDENTITY)


_COMMAND_LINES: list[list[str]] = []
"""The command lines of the ``memsim`` invocations running in this process (innermost last; see
:func:`command_line`)."""


@contextlib.contextmanager
def command_line(argv: Sequence[str]) -> Iterator[None]:
    """While the body runs, :func:`run_record` records ``argv`` as the command (the CLI sets it to the ``memsim``
    command line it parses, which is also right when the app runs inside another program or a test runner)."""
    _COMMAND_LINES.append(list(argv))
    try:
        yield
    finally:
        _COMMAND_LINES.pop()


def run_record(wall_s: float | None = None, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The ``run`` block of a results JSON: :func:`code_identity`, the command line (``argv``, else the running
    :func:`command_line`, else the process's), the finish time (UTC) and the wall time in seconds (``wall_s``,
    else the running :func:`owned_run`'s so far, else none)."""
    if wall_s is None:
        wall_s = current_wall_s()
    if argv is None and _COMMAND_LINES:
        argv = _COMMAND_LINES[-1]
    args = list(sys.argv if argv is None else argv)
    if args:
        args[0] = Path(args[0]).name
    rec: dict[str, Any] = {**code_identity(), "command": shlex.join(args),
                           "finished_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
    if wall_s is not None:
        rec["wall_s"] = round(float(wall_s), 3)
    return rec


def describe_code(rec: dict[str, Any]) -> str:
    """One line naming the code of a ``run`` block: ``memsim 0.1.0, commit 87e26a3`` plus ``+ uncommitted changes
    (diff sha256 1a2b3c4d)`` when there were some; ``memsim 0.1.0 (not a git checkout)`` without a commit."""
    ver = rec.get("memsim") or "unknown version"
    if not rec.get("commit"):
        return f"memsim {ver} (not a git checkout)"
    text = f"memsim {ver}, commit {str(rec['commit'])[:7]}"
    if rec.get("diff_sha256"):
        text += f" + uncommitted changes (diff sha256 {str(rec['diff_sha256'])[:8]})"
    return text


def code_text(run: Mapping[str, Any] | None) -> str:
    """What a results page says about the code of the ``run`` block it renders: :func:`describe_code` for a
    :func:`run_record`; for results written before the record existed, ``not recorded`` (or, for a block that
    kept only a commit, that commit and whether the tree had changes, without a diff hash). Pages print it after
    ``Code:``."""
    if isinstance(run, Mapping) and "memsim" in run and "commit" in run:
        return describe_code(dict(run))
    legacy = run.get("code") if isinstance(run, Mapping) else None
    if isinstance(legacy, Mapping) and legacy.get("commit"):
        changes = " with uncommitted changes (no diff hash recorded)" if legacy.get("modified") else ""
        return f"commit {str(legacy['commit'])[:7]}{changes}"
    return "not recorded"
