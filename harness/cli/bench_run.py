"""What every ``memsim bench ...`` command shares: its common options, its console and :func:`run_bench`, which runs a
benchmark as a run that owns its names (``harness.cli.run_output.published_run``) and prints the paths it wrote.

The commands themselves are in :mod:`harness.cli.bench_workloads` (LoCoMo, LongMemEval) and
:mod:`harness.cli.bench_measures` (the rest); :mod:`harness.cli.bench` mounts them on one app."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from harness.cli.boundary import bad_option, describe_error, fail, make_console

T = TypeVar("T")

console = make_console()  # markup and emoji off: paths and messages print as given

QuickOpt = Annotated[bool, typer.Option("--quick", help="Small sizes (about a minute); results go to --out like "
                                                        "a full run's.")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="Output directory (default ./memsim-results/bench, or "
                                                          "$MEMSIM_RESULTS_DIR/bench).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="The run's own seed (sampling, arms, generated worlds).")]
ProgressOpt = Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")]
OverwriteOpt = Annotated[bool, typer.Option(
    "--overwrite", help="Replace an earlier run of this benchmark in --out even when it took 30 minutes or more "
                        "(without it such a run stops before any work).")]
EMBED_CHOICES = ("store", "per-call")
EmbedOpt = Annotated[str, typer.Option(
    "--embed", help="'store' (default): every arm that embeds reads its vectors from the embedding store, each "
                    "distinct text encoded once and kept on disk for later runs ($MEMSIM_EMBED_STORE, else the "
                    "user cache folder); 'per-call': the earlier per-process caches, nothing kept.")]
EmbedStoreOpt = Annotated[Path | None, typer.Option(
    "--embed-store", help="Folder of the embedding store (default $MEMSIM_EMBED_STORE, else memsim's user cache "
                          "folder); only with --embed store.")]
ExploreOpt = Annotated[bool, typer.Option(
    "--explore/--no-explore", help="Write the per-question explorer page <name>.explore.html beside the results "
                                   "(default; `memsim explore` writes it later from the run). The delivery store "
                                   "it reads is written either way.")]


def check_embed(embed: str, embed_store: Path | None) -> None:
    """``--embed`` and ``--embed-store`` as a usage error when they do not go together."""
    if embed not in EMBED_CHOICES:
        raise bad_option("--embed", embed, EMBED_CHOICES)
    if embed_store is not None and embed != "store":
        raise bad_option("--embed-store", None, "applies to --embed store only")


def echo(text: str) -> None:
    """A benchmark's line, whole: never broken across lines at the console's width (a pipe, 80 columns)."""
    console.print(text, soft_wrap=True)


def finish(paths: Sequence[Path]) -> None:
    """The ``wrote <path>`` lines, one per file (each path whole)."""
    for p in paths:
        console.print(f"wrote {p}", soft_wrap=True)


def out_folder(out: Path | None) -> Path:
    """``--out``, or the ``bench`` run folder (announced, so a user knows where to look)."""
    from benchmarks.common import default_out_dir

    if out is not None:
        return out
    out_dir = default_out_dir()
    console.print(f"writing results to {out_dir} (the default run folder; --out to change)", soft_wrap=True)
    return out_dir


def say(exc: BaseException) -> str:
    """One line for a benchmark's error, not led by the exception's class name (a file named when known)."""
    if isinstance(exc, OSError):
        return describe_error(exc) if exc.filename is not None else (exc.strerror or str(exc))
    return " ".join(str(exc).split()) or exc.__class__.__name__


def names_option(values: list[str] | None) -> list[str] | None:
    """A repeatable option whose values may also be comma-separated lists."""
    out = [v.strip() for raw in values or [] for v in raw.split(",") if v.strip()]
    return out or None


def run_bench(fn: Callable[..., Sequence[Path]], names: Sequence[str], out: Path | None, *, quick: bool,
              progress: bool, overwrite: bool = False, errors: tuple[type[BaseException], ...] = (),
              **kw: Any) -> None:
    """Run ``fn(stage, quick=..., track=..., **kw)`` as a run owning ``names`` in ``--out`` (see
    ``harness.cli.run_output.published_run``: staged, published when finished, nothing kept when it fails or is
    stopped, an earlier run of 30 minutes or more replaced only with ``--overwrite``), then print where each file
    it wrote now is. An ``OSError`` or ``ValueError`` (and ``errors``) of the run is one ``error:`` line naming the
    published path, never the staging folder."""
    from benchmarks.common import progress_bar
    from harness.cli.run_output import LONG_RUN_S, published_run
    from harness.runs import final_path

    out_dir = out_folder(out)
    stages: list[Path] = []
    try:
        with published_run(out_dir, names, overwrite=overwrite, refuse_longer_than_s=LONG_RUN_S) as stage:
            stages.append(stage)
            with progress_bar(progress) as track:
                paths = fn(stage, quick=quick, track=track, **kw)
    except (OSError, ValueError, *errors) as exc:
        message = say(exc)
        for stage in stages:
            message = message.replace(str(stage), str(out_dir))
        raise fail(message) from None
    finish([final_path(stages[0], out_dir, p) for p in paths])


# --arm-class errors about the command line itself; the others (a module that is not there or fails to import, a
# class that is missing or is no arm) are about what the option names, as an --arms arm that cannot be imported
_ARM_CLASS_USAGE = ("expected package.module:Class", "is already selected")


def arm_option_error(exc: ValueError, arms: str | None, arm_class: list[str] | None) -> typer.Exit:
    """The arm selection's one-line ``ValueError`` as a usage error (exit status 2, naming the option and its value)
    when it is about the command line: an unknown or empty --arms, a malformed --arm-class, an arm selected twice.
    An --arm-class whose module or class cannot be loaded is exit status 1, as an --arms arm that cannot be
    imported."""
    msg = " ".join(str(exc).split())
    if not msg.startswith("--arm-class"):
        return bad_option("--arms", arms, msg)
    if not any(k in msg for k in _ARM_CLASS_USAGE):
        return fail(msg)
    spec = next((s for s in arm_class or [] if s.strip() and (s.strip() in msg or repr(s) in msg)), None)
    for prefix in (f"--arm-class {spec!r}: ", f"--arm-class {(spec or '').strip()}: "):
        if spec is not None and msg.startswith(prefix):
            return bad_option("--arm-class", spec, msg[len(prefix):])
    return bad_option("--arm-class", spec, msg)


def checked_arms(select: Callable[[], list[T]], arms: str | None, arm_class: list[str] | None,
                 check_data: Callable[[], object], data_errors: tuple[type[Exception], ...]) -> list[T]:
    """The arm selection of a workload bench, checked before any work: ``select()`` failing is a usage error about
    ``--arms``/``--arm-class`` (:func:`arm_option_error`); then a selection none of whose arms can be imported, or
    data that ``check_data()`` cannot find (``data_errors``), is one ``error:`` line with exit status 1."""
    from harness.workloads.arms import require_runnable

    try:
        names = select()
    except ValueError as exc:
        raise arm_option_error(exc, arms, arm_class) from None
    try:
        require_runnable(names)  # type: ignore[arg-type]
        check_data()
    except (*data_errors, ValueError) as exc:
        raise fail(str(exc)) from None
    return names
