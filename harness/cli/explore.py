"""``memsim explore RUN``: the per-question explorer page of a LoCoMo or LongMemEval design run
(:mod:`harness.explore`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.boundary import bad_option, fail, make_console

console = make_console()


def explore(
    run: Annotated[Path, typer.Argument(
        help="The run: its folder (when it holds one run), <folder>/<name>, or its <name>.json.", show_default=False)],
    rows: Annotated[str | None, typer.Option(
        help="Rows a question view shows first, comma-separated (default: the design rows and the comparator rows "
             "the run names); every row stays selectable on the page.")] = None,
    types: Annotated[str | None, typer.Option(
        help="Only questions of these LoCoMo categories (number or name) or LongMemEval types, comma-separated.")] = None,
    limit: Annotated[int | None, typer.Option(help="Only the first N questions (after --types).")] = None,
    ledger: Annotated[Path | None, typer.Option(
        help="A ledger.json of `memsim claims`: its XD claims' quoted probes become a filter.")] = None,
) -> None:
    """Write <name>.explore.html into the run folder: every question with what each row delivered, evidence marked.

    The page is self-contained (no network; it opens from file://): a question list with filters (category or
    type, text, row A delivers all evidence and row B does not, the probes a claim quoted) and, per question, each
    selected row's exact delivered text with the evidence highlighted, the evidence it missed, what it stored but
    did not deliver, its tokens and ranks. A page over 25 MB is refused: choose fewer questions with --limit or
    --types."""
    from harness.explore import ExploreError, find_run, write_explorer

    if limit is not None and limit < 1:
        raise bad_option("--limit", limit, "at least 1")
    if ledger is not None and not ledger.is_file():
        raise fail(f"{ledger}: --ledger is not a file")
    picked = [r.strip() for r in rows.split(",") if r.strip()] if rows is not None else None
    if picked is not None and not picked:
        raise bad_option("--rows", rows, "name at least one row")
    chosen = [t.strip() for t in types.split(",") if t.strip()] if types is not None else None
    try:
        run_dir, name = find_run(run)
        path = write_explorer(run_dir, name, rows=picked, types=chosen, limit=limit, ledger=ledger)
    except ExploreError as exc:
        raise fail(str(exc)) from None
    console.print(f"wrote {path}", soft_wrap=True)
