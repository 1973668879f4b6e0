"""``memsim tortoise dream`` and ``memsim tortoise confidence``: EP maintenance commands (spec tortoise §9).

Both work on the same on-disk store as the other ``memsim tortoise`` commands (``--db PATH``, default
``$MEMSIM_TORTOISE_DB`` or ``./.memsim/tortoise.kuzu``); ``harness.cli.tortoise`` mounts them on its app.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.cli.boundary import bad_option, check_choice, cli_errors, fail, make_console
from harness.cli.tortoise_store import PRESETS, DbOpt, PresetOpt, db_path, open_sim

console = make_console(soft_wrap=True)  # markup and emoji off: paths and ids print as given


def dream(
    mode: Annotated[str | None, typer.Option(help="local | window | full (default: local when claims are dirty or "
                                                   "the graph has many operators, else full).")] = None,
    budget: Annotated[int | None, typer.Option(help="Operator budget; 0 or less is a no-op.")] = None,
    max_hops: Annotated[int, typer.Option(help="Affected-set / selector hops.")] = 2,
    calibration: Annotated[bool, typer.Option("--calibration/--no-calibration",
                                              help="Require baselines on live statements first.")] = True,
    warm_start: Annotated[bool, typer.Option("--censoring/--no-censoring",
                                             help="Warm-start censoring of EP messages.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    db: DbOpt = None,
    preset: PresetOpt = "analysed",
) -> None:
    """Run one dream pass: EP over the affected claims, flush, write-back; prints convergence, batches, budget
    used and the affected claims."""
    from tortoise_sim import dream as dr

    if max_hops < 0:
        raise bad_option("--max-hops", max_hops, "0 or more")
    if mode is not None and mode not in ("local", "window", "full"):
        raise bad_option("--mode", mode, ("local", "window", "full"))
    check_choice("--preset", preset, PRESETS)  # a usage error, before the store is looked at
    path = db_path(db)
    if not path.exists():
        raise fail(f"{path}: no Tortoise store (create one with `memsim tortoise capture` or `create-point`)")
    sim = open_sim(path, preset)
    try:
        with cli_errors(dr.CalibrationError, dr.BudgetExceededError, ValueError, OSError):
            if mode in ("window", "full") and not as_json:
                with Progress(TextColumn("dream {task.description}"), BarColumn(), MofNCompleteColumn(),
                              TimeElapsedColumn(), console=make_console(stderr=True)) as bar:
                    task = bar.add_task(mode, total=None)

                    def tick(done: int, total: int) -> None:
                        bar.update(task, completed=done, total=total)

                    res = dr.dream(sim.store, mode=mode, budget=budget, max_hops=max_hops,
                                   require_calibration=calibration, warm_start=warm_start, progress=tick)
            else:
                res = dr.dream(sim.store, mode=mode, budget=budget, max_hops=max_hops,
                               require_calibration=calibration, warm_start=warm_start)
    finally:
        sim.close()
    out = res.as_dict()
    if as_json:
        sys.stdout.write(json.dumps(out, default=str) + "\n")
        return
    _print_result(out)
    console.print(f"store: {path}", soft_wrap=True)


def _print_result(out: dict[str, Any]) -> None:
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    if out["noop"]:
        table.add_row("result", "no-op (nothing to dream, or budget <= 0)")
    table.add_row("mode", out["mode"])
    table.add_row("converged", f"{out['converged_all']} (last batch {out['converged']})")
    table.add_row("batches", str(out["batches"]))
    table.add_row("iterations", str(out["iterations"]))
    table.add_row("budget used", f"{out['budget_used']} operators")
    if out["coverage"] is not None:
        table.add_row("coverage", f"{out['coverage']:.2f}")
    table.add_row("flush skipped", str(out["flush_skipped"]))
    table.add_row("ConfidenceChanged", str(out["events"]))
    if out["stale_unresolved"]:
        table.add_row("stale unresolved", ", ".join(out["stale_unresolved"]))
    table.add_row("affected claims", str(len(out["affected_claims"])))
    console.print(table)
    for cid in out["affected_claims"][:50]:
        console.print(f"  {cid}")
    if len(out["affected_claims"]) > 50:
        console.print(f"  ... {len(out['affected_claims']) - 50} more")


def confidence(
    point_id: Annotated[str, typer.Argument(help="Point id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    db: DbOpt = None,
    preset: PresetOpt = "analysed",
) -> None:
    """Belief of one claim: {mean, variance, alpha, beta, effective_n}; a dirty claim first gets a non-stamping
    local EP pass first."""
    from tortoise_sim.errors import UnknownPoint

    check_choice("--preset", preset, PRESETS)  # a usage error, before the store is looked at
    path = db_path(db)
    if not path.exists():
        raise fail(f"{path}: no Tortoise store")
    sim = open_sim(path, preset)
    try:
        with cli_errors(UnknownPoint, ValueError, OSError):
            res = sim.get_confidence(point_id)
    finally:
        sim.close()
    if as_json:
        sys.stdout.write(json.dumps(res) + "\n")
        return
    console.print(f"{point_id}: mean {res['mean']:.4f}  variance {res['variance']:.6f}  "
                  f"Beta({res['alpha']:.4f}, {res['beta']:.4f})  effective_n {res['effective_n']:.4f}")
