"""``memsim crash``: the crash-point explorer, real kills and concurrent writers (``harness.reliability.crash*``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.cli.boundary import bad_option, make_console
from harness.results_dir import default_out

console = make_console(stderr=True)  # markup and emoji off: paths and messages print as given
DESIGNS = ("fractal", "agentfly", "tortoise")


def summary_line(r: dict) -> str:
    """One sequence's counts on one line of at most 80 characters (no trailing space)."""
    return (f"{r['sequence']:<20} {r['mode']:<9} steps {r['step_count']:>2}  points {r['crash_points']:>4}  "
            f"lost {r['lost_points']:>3}  duplicate {r['duplicate_points']:>3}")


def outcome_text(outcomes: dict) -> str:
    """The restart outcomes counted per kind, as words (``ok 12, refused naming the file 3``), never a raw dict."""
    return ", ".join(f"{str(k).replace('_', ' ')} {v}" for k, v in outcomes.items()) or "none"


def crash(
    design: Annotated[str | None, typer.Option(help="Only this design: fractal, agentfly or tortoise.")] = None,
    sequence: Annotated[list[str] | None, typer.Option(
        "--sequence", help="Only these sequences (repeatable), e.g. agentfly.pm.")] = None,
    hardened: Annotated[bool, typer.Option(
        help="Also run every sequence with its hardened option (atomic saves, AgentFly journal, transactional "
             "Tortoise events) beside the faithful default.")] = False,
    kill: Annotated[bool, typer.Option(
        help="Also run the real-kill scenarios (a child process SIGKILLs itself at a chosen step, then a fresh "
             "process restarts the design).")] = False,
    concurrency: Annotated[bool, typer.Option(
        help="Also run the concurrent-writer cases (two processes per design).")] = False,
    out: Annotated[Path | None, typer.Option(help="Directory for crash.json and crash.md (default "
                                                  "./memsim-results/crash, or $MEMSIM_RESULTS_DIR/crash).")] = None,
    max_points: Annotated[int | None, typer.Option(
        help="At most this many crash points per sequence and mode (a quick look; omit for the full run).")] = None,
    merge: Annotated[bool, typer.Option(
        help="Update the crash.json already in --out (the same folder it writes): replace the sequences, kills and "
             "concurrency cases run now, keep the others (for re-running one sequence). The one option that reads "
             "an earlier run's results.")] = False,
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="Replace an earlier crash.json in --out even when its run took 30 minutes or more "
                            "(without it, or --merge, such a run stops before any work).")] = False,
) -> None:
    """Enumerate every crash point of each durable write sequence, crash there, restart from disk, check.

    For each sequence: a clean run records the durable steps; then one run per crash point (before each step,
    after each write, torn writes keeping 0, 1, half or all but one new byte). After each crash the design
    restarts through its own loaders and the check counts lost acknowledged items, duplicates, files that
    disagree, and restarts that fail without naming the file. Writes crash.json and crash.md to --out (default: the
    ``crash`` run folder, ./memsim-results/crash or $MEMSIM_RESULTS_DIR/crash).
    """
    from harness.reliability.crash import all_scenarios, explore
    from harness.reliability.crash_report import build_report, merge_reports, write_report

    if design is not None and design not in DESIGNS:
        raise bad_option("--design", design, DESIGNS)
    if max_points is not None and max_points < 1:
        raise bad_option("--max-points", max_points, "at least 1")
    scenarios = all_scenarios(design)
    if sequence:
        known = {s.sequence for s in scenarios}
        unknown = [s for s in sequence if s not in known]
        if unknown:
            raise bad_option("--sequence", unknown[0], sorted(known))
        scenarios = [s for s in scenarios if s.sequence in sequence]
    if out is None:
        out = default_out("crash")
        console.print(f"writing results to {out} (the default run folder; --out to change)", soft_wrap=True)
    from harness.cli.run_output import LONG_RUN_S, published_run
    from harness.runs import final_path, run_record

    with published_run(out, ["crash"], overwrite=overwrite or merge, refuse_longer_than_s=LONG_RUN_S) as stage:
        modes = ("faithful", "hardened") if hardened else ("faithful",)
        t0 = time.perf_counter()
        results = []
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console) as progress:
            for sc in scenarios:
                for mode in modes:
                    task = progress.add_task(f"{sc.sequence} ({mode})", total=None)

                    def tick(done: int, total: int, task: int = task) -> None:
                        progress.update(task, completed=done, total=total)

                    results.append(explore(sc, mode, progress=tick, max_points=max_points))
        kills = []
        if kill:
            from harness.reliability.kill import KILL_PLANS, kill_run
            from harness.reliability.kill_service import SERVICE_KILL_PLANS

            for plan in [*KILL_PLANS, *SERVICE_KILL_PLANS]:
                if (design is None or plan.sequence.startswith(design + ".")) and plan.mode in modes:
                    console.print(f"kill: {plan.sequence} ({plan.mode}) at {plan.label()}")
                    kills.append(kill_run(plan))
        conc = []
        if concurrency:
            from harness.reliability.concurrent import CASES

            for d, fn in CASES.items():
                if design is None or design == d:
                    for mode in modes:
                        console.print(f"concurrency: {d} ({mode})")
                        conc.append({"design": d, **fn(mode)})
        report = build_report(results, kills, conc, time.perf_counter() - t0)
        if merge:  # the documented exception: it reads the crash.json published in --out
            report = merge_reports(out / "crash.json", report)
        report["run"] = run_record()
        written = write_report(report, stage)
    for r in report["sequences"]:
        console.print(summary_line(r), soft_wrap=True)
        console.print(f"  outcomes: {outcome_text(r['outcomes'])}")
    for p in written:
        console.print(f"wrote {final_path(stage, out, p)}", soft_wrap=True)
