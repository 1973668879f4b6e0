"""``memsim data ...``: check a user's AgentFly checkout and LoCoMo conversations before using them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from harness.commands import err_console, fail

app = typer.Typer(help="Data sets memsim reads: check an AgentFly checkout and LoCoMo conversations.",
                  no_args_is_help=True)
console = Console(highlight=False)


def _short(d: dict[str, object], limit: int = 4) -> str:
    items = list(d.items())
    text = "; ".join(f"{k or '(none)'}: {v}" for k, v in items[:limit])
    return text + (f"; +{len(items) - limit} more" if len(items) > limit else "")


def _facts(rep_facts: dict[str, object]) -> str:
    skip = {"malformed_lines", "blank_lines", "malformed_count", "layout"}
    parts = []
    for k, v in rep_facts.items():
        if k in skip or v in ({}, None):
            continue
        parts.append(f"{k}: {_short(v) if isinstance(v, dict) else v}")
    return "\n".join(parts)


@app.command()
def check(
    agentfly: Annotated[Path | None, typer.Option(
        "--agentfly", help="AgentFly checkout (memory/*.jsonl, data/deepresearcher.jsonl) or a folder holding "
                           "those files side by side. Default: $MEMSIM_AGENTFLY_DATA.")] = None,
    locomo: Annotated[Path | None, typer.Option(
        "--locomo", help="LoCoMo file (locomo10.json or conv-*.json) or a folder of them. "
                         "Default: $MEMSIM_LOCOMO_DATA.")] = None,
    json_out: Annotated[Path | None, typer.Option(
        "--json", help="Also write the full report (every count and quirk) to this JSON file.")] = None,
) -> None:
    """Check the data sets: rows, shapes and quirks of each file; one `error:` line per unusable file.

    Exit status 1 when any file is unusable. Nothing is modified.
    """
    from harness.datacheck import check_agentfly, check_locomo

    agentfly = agentfly or (Path(os.environ["MEMSIM_AGENTFLY_DATA"]) if os.environ.get("MEMSIM_AGENTFLY_DATA")
                            else None)
    locomo = locomo or (Path(os.environ["MEMSIM_LOCOMO_DATA"]) if os.environ.get("MEMSIM_LOCOMO_DATA") else None)
    if agentfly is None and locomo is None:
        raise fail("nothing to check: give --agentfly DIR and/or --locomo PATH (or set $MEMSIM_AGENTFLY_DATA / "
                   "$MEMSIM_LOCOMO_DATA)")
    reports = []
    if agentfly is not None:
        console.print(f"AgentFly: {agentfly}")
        reports += check_agentfly(agentfly)
    if locomo is not None:
        console.print(f"LoCoMo: {locomo}")
        reports += check_locomo(locomo)
    table = Table(title="memsim data check", show_lines=True)
    for col in ("file", "what", "rows", "shapes (keys: rows)", "facts", "quirks"):
        table.add_column(col, overflow="fold")
    for r in reports:
        table.add_row(r.path, r.kind, str(r.rows), _short(r.shapes, 3), _facts(r.facts),
                      "\n".join(r.quirks) if r.usable else "[bold red]unusable[/]")
    console.print(table)
    if json_out is not None:
        try:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps([r.to_dict() for r in reports], indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise fail(f"cannot write {json_out}: {exc.strerror or exc}") from None
        console.print(f"wrote {json_out}")
    bad = [(r.path, e) for r in reports for e in r.errors]
    for path, e in bad:
        err_console.print(f"[bold red]error:[/] {path}: {e}", soft_wrap=True)
    if bad:
        raise typer.Exit(1)
    console.print(f"{len(reports)} file(s) usable")
