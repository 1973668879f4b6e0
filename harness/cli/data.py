"""``memsim data ...``: fetch the public data sets memsim reads, and check a user's copies before using them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from harness.cli.boundary import bad_option, err_console, error_line, fail, make_console, styled, warn

if TYPE_CHECKING:
    from harness.datafetch import FetchResult

app = typer.Typer(help="Data sets memsim reads: fetch LoCoMo, the AgentFly corpora and LongMemEval (pinned, "
                       "checksummed) and check a copy before using it.", no_args_is_help=True)
console = make_console()  # markup and emoji off: paths and messages print as given


def _short(d: dict[str, object], limit: int = 4) -> str:
    items = list(d.items())
    text = "; ".join(f"{k or '(none)'}: {v}" for k, v in items[:limit])
    return text + (f"; +{len(items) - limit} more" if len(items) > limit else "")


FACT_ENTRIES = 12
"""Entries of one fact shown in full (LongMemEval's six question types with room for unknown ones); a longer
fact shows its first ``FACT_ENTRIES - 2`` and how many more (every entry is in ``--json``)."""


def _facts(rep_facts: dict[str, object]) -> str:
    skip = {"malformed_lines", "blank_lines", "malformed_count", "layout"}
    parts = []
    for k, v in rep_facts.items():
        if k in skip or v in ({}, None):
            continue
        limit = len(v) if isinstance(v, dict) and len(v) <= FACT_ENTRIES else FACT_ENTRIES - 2
        parts.append(f"{k}: {_short(v, limit) if isinstance(v, dict) else v}")
    return "\n".join(parts)


def _looked_up(title: str, dataset: str, option: str, fetch_name: str | None = None) -> Path | None:
    """Say where ``dataset`` was looked for and what was found (found or not), and return its path or ``None``."""
    from harness.datapaths import lookup

    path, source, looked = lookup(dataset)
    if path is not None:
        console.print(f"{title}: {path} ({source})", soft_wrap=True)
    else:
        console.print(f"{title}: not found (run `memsim data fetch {fetch_name or dataset}`, or give {option})",
                      soft_wrap=True)
    for where in looked:  # one line each, never wrapped: the place (a path) and what was found there stay together
        console.print(f"  looked at {where}", soft_wrap=True)
    return path


def report_blocks(reports: list, width: int) -> list[str]:  # type: ignore[type-arg]
    """The check's findings as one block per file for a pipe or a narrow terminal: the full path on its own line,
    then what it is, its rows, shapes, facts and quirks as labelled lines wrapped between words to ``width``."""
    import textwrap

    width = max(40, width)
    lines: list[str] = []

    def say(label: str, text: str) -> None:
        head = f"  {label}: "
        pad = " " * len(head)
        for i, part in enumerate(t for t in text.split("\n") if t):
            lines.extend(textwrap.wrap(part, width, initial_indent=head if i == 0 else pad, subsequent_indent=pad,
                                       break_long_words=False, break_on_hyphens=False))

    for r in reports:
        lines.append(r.path)
        say("what", f"{r.kind}, {r.rows} row(s)" + ("" if r.usable else ", UNUSABLE"))
        if r.shapes:
            say("shapes", "; ".join(f"{k}: {v} row(s)" for k, v in list(r.shapes.items())[:3]))
        if _facts(r.facts):
            say("facts", _facts(r.facts))
        if r.quirks:
            say("quirks", "\n".join(r.quirks))
        for e in r.errors:
            say("error", e)
    return lines


@app.command()
def check(
    agentfly: Annotated[Path | None, typer.Option(
        "--agentfly", help="AgentFly checkout (memory/*.jsonl, data/deepresearcher.jsonl) or a folder holding "
                           "those files side by side. Default: $MEMSIM_AGENTFLY_DATA.")] = None,
    locomo: Annotated[Path | None, typer.Option(
        "--locomo", help="LoCoMo file (locomo10.json or conv-*.json) or a folder of them. "
                         "Default: $MEMSIM_LOCOMO_DATA.")] = None,
    longmemeval: Annotated[Path | None, typer.Option(
        "--longmemeval", help="LongMemEval file (longmemeval_s_cleaned.json, ..., or any file in its schema). "
                              "Default: $MEMSIM_LONGMEMEVAL_DATA.")] = None,
    json_out: Annotated[Path | None, typer.Option(
        "--json", help="Also write the full report (every count and quirk) to this JSON file.")] = None,
) -> None:
    """Check the data sets: rows, shapes and quirks of each file; one `error:` line per unusable file.

    Without options it checks what the other commands would read: $MEMSIM_AGENTFLY_DATA, $MEMSIM_LOCOMO_DATA and
    $MEMSIM_LONGMEMEVAL_DATA, else the copies `memsim data fetch` placed in the data folder. Exit status 1 when
    any file is unusable (a folder holding the same LoCoMo conversation twice is refused). A LongMemEval file is
    streamed, never loaded whole. Nothing is modified.
    """
    from harness.datacheck import DIRECTORY, check_agentfly, check_locomo, check_longmemeval
    from harness.datapaths import AGENTFLY_ENV, LOCOMO_ENV, LONGMEMEVAL_ENV

    if agentfly is None and locomo is None and longmemeval is None:  # what every command would read
        agentfly = _looked_up("AgentFly", "agentfly", "--agentfly DIR")
        locomo = _looked_up("LoCoMo", "locomo", "--locomo PATH")
        longmemeval = _looked_up("LongMemEval", "longmemeval", "--longmemeval FILE", "longmemeval-oracle")
        if agentfly is None and locomo is None and longmemeval is None:
            raise fail(f"nothing to check: give --agentfly DIR, --locomo PATH and/or --longmemeval FILE (or set "
                       f"${AGENTFLY_ENV} / ${LOCOMO_ENV} / ${LONGMEMEVAL_ENV}, or run `memsim data fetch`)")
    else:
        for name, given in (("AgentFly", agentfly), ("LoCoMo", locomo), ("LongMemEval", longmemeval)):
            if given is not None:
                console.print(f"{name}: {given}", soft_wrap=True)
    reports = []
    if agentfly is not None:
        reports += check_agentfly(agentfly)
    if locomo is not None:
        reports += check_locomo(locomo)
    if longmemeval is not None:
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

        with Progress(TextColumn("reading {task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                      console=err_console, transient=True, disable=not err_console.is_terminal) as bar:
            task = bar.add_task(Path(longmemeval).name, total=None)
            reports += check_longmemeval(longmemeval, progress=lambda done, total: bar.update(
                task, completed=done, total=total))
    if console.is_terminal and console.width >= 120:
        table = Table(title="memsim data check", show_lines=True)
        for col in ("file", "what", "rows", "shapes (keys: rows)", "facts", "quirks"):
            table.add_column(col, overflow="fold")
        for r in reports:
            table.add_row(r.path, r.kind, str(r.rows), _short(r.shapes, 3), _facts(r.facts),
                          "\n".join(r.quirks) if r.usable else styled("unusable", "bold red"))
        console.print(table)
    else:  # piped, or a narrow terminal: one block per file, full paths, text wrapped between words
        for line in report_blocks(reports, console.width):
            console.print(line, soft_wrap=True)
    if json_out is not None:
        from harness.atomic import write_atomic

        try:  # atomic (temp file + rename), fault-hook step data.check.report
            write_atomic(json_out, (json.dumps([r.to_dict() for r in reports], indent=2) + "\n").encode("utf-8"),
                         step="data.check.report")
        except OSError as exc:
            raise fail(f"cannot write {json_out}: {exc.strerror or exc}") from None
        console.print(f"wrote {json_out}", soft_wrap=True)
    bad = [(r.path, e) for r in reports for e in r.errors]
    for path, e in bad:
        err_console.print(error_line(f"{path}: {e}"), soft_wrap=True)
    if bad:
        raise typer.Exit(1)
    console.print(f"{sum(r.kind != DIRECTORY for r in reports)} file(s) usable")


@app.command()
def fetch(
    dataset: Annotated[str, typer.Argument(
        help="Which data: all (the default: locomo, agentfly and longmemeval-oracle), locomo, agentfly, "
             "longmemeval-oracle, longmemeval-s, longmemeval-m or longmemeval-s-original.")] = "all",
    if_reachable: Annotated[bool, typer.Option(
        "--if-reachable", help="A server that cannot be reached is one warning line per file and exit status 0 "
                               "(for a first run that must also work offline; the commands then skip what needs "
                               "the missing data and say so). Checksum and transfer failures stay errors.")] = False,
    timeout: Annotated[float, typer.Option(min=1.0, help="Seconds to wait for a server to connect or send "
                                                         "before giving up on it.")] = 30.0,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a download progress bar.")] = True,
    list_only: Annotated[bool, typer.Option(
        "--list", help="Print each file's URL, where it goes and its sha256 (to place it by hand), and whether it is "
                       "there already; download nothing.")] = False,
) -> None:
    """Download LoCoMo (locomo10.json, all ten conversations), the AgentFly corpora (memory, training_data,
    dummy_memo, deepresearcher) and LongMemEval, each pinned to one upstream revision and checked against its
    sha256. Of LongMemEval a bare fetch takes the oracle file (15 MB) only; S (265 MiB, cleaned or original) and M
    (2.5 GiB) are fetched when named.

    Files go to the data folder ($MEMSIM_DATA_DIR, else the user cache folder) as locomo/locomo10.json,
    agentfly/<file>.jsonl and longmemeval/<file>.json; every command finds them there without flags
    ($MEMSIM_LOCOMO_DATA / $MEMSIM_AGENTFLY_DATA / $MEMSIM_LONGMEMEVAL_DATA, or a command's own --data /
    --data-dir, take precedence). A file already there with the
    pinned checksum is not downloaded again. A file whose checksum differs is refused and nothing is stored; an
    interrupted download leaves nothing behind. Offline, place a file by hand: the error names where and its
    sha256.
    """
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from harness.datafetch import FetchError, RichBar, files_for
    from harness.datafetch import fetch as fetch_files
    from harness.datapaths import AGENTFLY_ENV, LOCOMO_ENV, LONGMEMEVAL_ENV, data_home

    try:
        files = files_for(dataset)
    except ValueError as exc:  # an unknown data set name: a usage error
        raise bad_option("DATASET", dataset, str(exc).partition("; ")[2] or str(exc)) from None
    if list_only:
        from harness.datafetch import sha256_of

        for f in files:
            dest = f.destination()
            state = ("present" if sha256_of(dest) == f.sha256 else "checksum differs") if dest.is_file() else "absent"
            console.print(f"{f.dataset}/{f.name}: {state}\n  url    {f.url}\n  place  {dest}\n  sha256 {f.sha256}",
                          soft_wrap=True)
        return
    got: list[FetchResult] = []

    def report(r: FetchResult) -> None:
        got.append(r)
        if r.status == "unreachable":
            warn(r.message)

    prog = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                    console=err_console, disable=not progress)
    try:
        with prog:
            fetch_files(dataset, if_reachable=if_reachable, timeout=timeout, on_result=report,
                        progress=lambda f: RichBar(prog, f"{f.dataset}/{f.name}", f.size))
    except FetchError as exc:
        _print_paths(got)
        raise fail(str(exc)) from None
    _print_paths(got)
    console.print(f"data folder: {data_home()}", soft_wrap=True)
    for name, env in (("locomo", LOCOMO_ENV), ("agentfly", AGENTFLY_ENV), ("longmemeval", LONGMEMEVAL_ENV)):
        if os.environ.get(env) and any(r.file.dataset == name for r in got):
            console.print(f"note: ${env} is set ({os.environ[env]}); commands read it instead of the fetched "
                          f"{name} copy", soft_wrap=True)
    missing = [r for r in got if r.status == "unreachable"]
    if missing:
        console.print(f"{len(missing)} file(s) not fetched (server unreachable); commands that need them skip "
                      "or say so", soft_wrap=True)


def _print_paths(results: list[FetchResult]) -> None:
    for r in results:
        if r.status == "fetched":
            console.print(f"wrote {r.path}", soft_wrap=True)
        elif r.status == "present":
            console.print(f"present {r.path} (checksum ok)", soft_wrap=True)
