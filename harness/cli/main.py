"""The root ``memsim`` typer app (typer + rich): mounts one sub-app per design, ``bench``, ``data`` and ``crash``,
and holds the ``claims``, ``fuzz`` and ``version`` commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

import harness  # noqa: F401  (sets offline environment variables first)
from harness.cli import agentfly, bench, data, fractal, hosts, tortoise
from harness.cli import compare as compare_cmd
from harness.cli import crash as crash_cmd
from harness.cli import explore as explore_cmd
from harness.cli.boundary import BoundaryTyper, bad_option, fail, make_console, styled
from harness.cli.help_format import TidyGroup

# TidyGroup: value placeholders and reflowed prose in every command's --help (harness/cli/help_format.py).
app = BoundaryTyper(help="memsim: executable reference simulators of three agent-memory designs (Fractal, "
                       "AgentFly/Memento, Tortoise), a claims ledger that demonstrates their analysis reports, "
                       "benchmarks on LoCoMo, LongMemEval and synthetic worlds, the designs' hooks inside real agent "
                       "hosts (Claude Code, Codex), and reliability tools (crash points, fuzzing).",
                  no_args_is_help=True, pretty_exceptions_enable=False, cls=TidyGroup)
app.add_typer(fractal.app, name="fractal")
app.add_typer(agentfly.app, name="agentfly")
app.add_typer(tortoise.app, name="tortoise")
app.add_typer(bench.app, name="bench")
app.add_typer(data.app, name="data")
app.add_typer(hosts.app, name="hosts", help="Agent hosts memsim drives offline (Claude Code, Codex): install them "
                                            "pinned with npm into memsim's cache folder ($MEMSIM_HOSTS_DIR), list "
                                            "them, and run scenarios in them against a loopback model server with "
                                            "the Tortoise hooks.")
app.command("crash")(crash_cmd.crash)
app.command("compare")(compare_cmd.compare)
app.command("explore")(explore_cmd.explore)

console = make_console()  # markup and emoji off: paths, ids and messages print as given
_STYLE = {"holds": "green", "refuted": "yellow", "error": "bold red", "skipped": "dim"}


@app.command()
def version() -> None:
    """Print the memsim version and the versions of the libraries the simulators run on."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as v

    console.print(f"memsim {harness.__version__}")
    for pkg in ("dspy", "torch", "transformers", "sentence-transformers", "kuzu", "pydantic", "numpy"):
        try:
            console.print(f"  {pkg} {v(pkg)}")
        except PackageNotFoundError:
            console.print(f"  {pkg} (not installed)")


@app.command()
def claims(
    design: Annotated[str | None, typer.Option(help="Only this design: harness, fractal, agentfly, tortoise or cross.")] = None,
    id: Annotated[list[str] | None, typer.Option("--id", help="Only these claim ids (repeatable), e.g. FRA-01.")] = None,
    kind: Annotated[str | None, typer.Option(help="Only 'mechanism' or 'consequence' claims.")] = None,
    out: Annotated[Path, typer.Option(help="Directory for ledger.json, ledger.md and ledger.html.")] = Path("ledger"),
    data_dir: Annotated[Path | None, typer.Option(
        help="AgentFly corpora folder (default: $MEMSIM_AGENTFLY_DATA, else the copy `memsim data fetch agentfly` "
             "placed in the data folder; claims that need it are skipped without it).")] = None,
    seed: Annotated[int, typer.Option(help="Seed passed to every demonstration.")] = 0,
    quick: Annotated[bool, typer.Option(help="Ask demonstrations for their smallest scenario sizes.")] = False,
    list_only: Annotated[bool, typer.Option("--list", help="List the selected claims without running them.")] = False,
) -> None:
    """Run the claims ledger: one demonstration per report claim, each in a fresh temporary directory.

    Writes ledger.json, ledger.md and a self-contained sortable ledger.html to --out and prints a summary.
    Exit status is 1 when any claim errors (a refuted claim is a finding about the design, not an error).
    """
    from harness.claims import DESIGNS, all_claims
    from harness.ledger import find_data_dir, run_claims, write_all

    if design and design not in DESIGNS:
        raise bad_option("--design", design, DESIGNS)
    if kind and kind not in ("mechanism", "consequence"):
        raise bad_option("--kind", kind, ("mechanism", "consequence"))
    try:
        selected = all_claims(design=design, ids=id, kind=kind)
    except KeyError as exc:
        raise bad_option("--id", ",".join(id or []), str(exc.args[0])) from None
    if not selected:
        raise bad_option("--design/--id/--kind", None, "no claim matches these filters together")
    if list_only:
        for c in selected:
            console.print(f"{c.id}\t{c.design}\t{c.kind}\t{c.record}\t{c.statement}", soft_wrap=True)
        return
    if not 0 <= seed < 2**32:  # demonstrations seed numpy/torch
        raise bad_option("--seed", seed, f"must be in [0, {2**32 - 1}]")
    from harness.datapaths import DataPathError, find_locomo

    try:  # a mistyped --data-dir or data variable is an error before any claim runs, not a run of silent skips
        data = find_data_dir(data_dir)
        if any(c.design == "cross" for c in selected):
            find_locomo()
    except DataPathError as exc:
        raise fail(str(exc)) from None
    from harness.cli.run_output import published_run
    from harness.runs import final_path, run_record

    for name in ("ledger.json", "ledger.md", "ledger.html"):
        if (out / name).is_dir():
            raise fail(f"{out / name}: is a directory; the ledger cannot be written there")
    with published_run(out, ["ledger"]) as stage:  # never refused: a ledger is re-run, not kept (docs/cli.md)
        ledger = run_claims(selected, seed=seed, data_dir=data, quick=quick)
        ledger.run = run_record()
        written = write_all(ledger, stage)

    table = Table(title="memsim claims ledger", show_lines=False)
    for col in ("id", "kind", "verdict", "time (s)", "statement"):  # the unit named: seconds per claim
        table.add_column(col, overflow="fold", no_wrap=col != "statement",
                         justify="right" if col == "time (s)" else "left")
    for r in ledger.rows:
        table.add_row(r.id, r.kind, styled(r.verdict, _STYLE[r.verdict]), f"{r.seconds:.1f}",
                      r.statement if len(r.statement) < 110 else r.statement[:107] + "...")
    console.print(table)
    summary = Table(title="counts")
    summary.add_column("scope")
    for v in ("holds", "refuted", "error", "skipped"):
        summary.add_column(v, justify="right")
    for scope, c in sorted(ledger.counts().items(), key=lambda kv: (kv[0] == "all", kv[0])):
        summary.add_row(scope, *(str(c[v]) for v in ("holds", "refuted", "error", "skipped")))
    console.print(summary)
    for p in written:
        console.print(f"wrote {final_path(stage, out, p)}", soft_wrap=True)
    errors = [r.id for r in ledger.rows if r.verdict == "error"]
    if errors:
        console.print(Text.assemble(styled(f"{len(errors)} claim(s) errored:", "bold red"), " ", ", ".join(errors)))
        raise typer.Exit(1)


@app.command()
def fuzz(
    target: Annotated[list[str] | None, typer.Option(
        "--target", help="Only these targets (repeatable); see --list. Default: every loader.")] = None,
    examples: Annotated[int, typer.Option(min=0, help="Generated inputs per target (after the fixed specials).")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the generated input stream.")] = 0,
    specials: Annotated[bool, typer.Option("--specials/--no-specials",
                                           help="Run the fixed specials (20 MB line, directory, ...) first.")] = True,
    out: Annotated[Path | None, typer.Option(help="Directory for fuzz.json and fuzz.md (default "
                                                  "./memsim-results/fuzz, or $MEMSIM_RESULTS_DIR/fuzz).")] = None,
    name: Annotated[str, typer.Option(
        help="File name stem of the report: writes <name>.json and <name>.md to --out (e.g. fuzz-10k).")] = "fuzz",
    list_only: Annotated[bool, typer.Option("--list", help="List the targets and their documented outcomes.")] = False,
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="Replace an earlier <name>.json in --out even when its run took 30 minutes or more "
                            "(without it such a run stops before any work).")] = False,
) -> None:
    """Fuzz every loader (hypothesis): Fractal session/replay files, AgentFly banks, pairs, pool and dataset, Tortoise
    hook stdin, spool files and CLI inputs, LoCoMo. Exit 1 when any input crashes or leaves a partial write."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from harness.reliability.fuzz import run_target, summarize, targets, write_report

    known = targets()
    if not list_only:
        import importlib.util

        if importlib.util.find_spec("hypothesis") is None:
            raise fail("memsim fuzz needs hypothesis, which the test extra installs: pip install -e '.[test]'")
    if list_only:
        for t in known.values():
            console.print(f"{t.name}\t{t.loader}\t{t.documented}", soft_wrap=True)
        return
    chosen = target or list(known)
    for tname in chosen:
        if tname not in known:
            raise bad_option("--target", tname, known)
    if not name or name.startswith(".") or any(c in name for c in "/\\") or name != name.strip():
        raise bad_option("--name", name, "a plain file name stem (no folder), e.g. fuzz-10k")
    if out is None:
        from harness.results_dir import default_out

        out = default_out("fuzz")
        console.print(f"writing results to {out} (the default run folder; --out to change)", soft_wrap=True)
    import shlex
    import tempfile

    from harness.cli.run_output import LONG_RUN_S, published_run
    from harness.runs import final_path

    argv = ["memsim", "fuzz", *(x for t in (target or []) for x in ("--target", t)), "--examples", str(examples),
            "--seed", str(seed), *([] if specials else ["--no-specials"]), "--out", str(out), "--name", name]
    report = {"examples": examples, "seed": seed, "name": name, "planned": chosen, "command": shlex.join(argv)}
    results = []
    # hypothesis's own files (its unicode tables, the constants it collects) belong to this run alone: a temporary
    # folder, removed with it, so a run never reads what an earlier one left
    with published_run(out, [name], overwrite=overwrite, refuse_longer_than_s=LONG_RUN_S) as stage, \
            tempfile.TemporaryDirectory(prefix="memsim-fuzz-hypothesis-") as hypothesis_dir:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=make_console(stderr=True)) as progress:
            bar = progress.add_task("fuzz targets", total=len(chosen))
            for tname in chosen:
                progress.update(bar, description=f"fuzz {tname}")
                results.append(run_target(tname, examples, seed, specials=specials,
                                          storage_dir=Path(hypothesis_dir)))
                progress.advance(bar)
        written = write_report(results, stage, **report)
    if console.is_terminal and console.width >= 120:
        table = Table(title=f"memsim fuzz ({examples} generated inputs per target)")
        for col in ("target", "examples", "accepted", "skipped", "rejected", "crash", "partial write", "time (s)"):
            table.add_column(col, justify="left" if col == "target" else "right", no_wrap=col == "target")
        for r in results:
            o = r["outcomes"]
            table.add_row(r["target"], str(r["examples"]), *(str(o[k]) for k in ("accepted", "skipped", "rejected",
                                                                                   "crash", "partial_write")),
                          f"{r['seconds']:.0f}")
        console.print(table)
    else:  # piped or narrow: one entry per target, its full name, the counts in words, wrapped between words
        for line in fuzz_lines(results, examples, console.width):
            console.print(line, soft_wrap=True)
    for p in written:
        console.print(f"wrote {final_path(stage, out, p)}", soft_wrap=True)
    bad = summarize(results)["failing_targets"]
    if bad:
        console.print(Text.assemble(styled("crash or partial write in:", "bold red"), " ", ", ".join(bad)))
        raise typer.Exit(1)


def fuzz_lines(results: list[dict], examples: int, width: int) -> list[str]:  # type: ignore[type-arg]
    """The fuzz summary without a table: each target's full name, then its counts as labelled words (time in
    seconds), continuation lines indented, nothing wider than ``width`` (a name is never cut)."""
    import textwrap

    width = max(40, width)
    pad = max(len(r["target"]) for r in results) + 2 if results else 2
    pad = pad if pad <= width // 2 else 4
    lines = [f"memsim fuzz ({examples} generated inputs per target)"]
    for r in results:
        o = r["outcomes"]
        items = [f"{r['examples']} examples:", *(f"{o[k]} {k.replace('_', ' ')}," for k in
                                                 ("accepted", "skipped", "rejected", "crash")),
                 f"{o['partial_write']} partial write;", f"{r['seconds']:.0f} s"]
        counts = " ".join(i.replace(" ", "\u00a0") for i in items)  # a count and its label stay on one line
        head = r["target"].ljust(pad)
        if len(head) > pad:  # a name longer than the column: the counts start on the next line
            lines.append(r["target"])
            head = " " * pad
        lines.extend(w.replace("\u00a0", " ") for w in textwrap.wrap(
            counts, width, initial_indent=head, subsequent_indent=" " * pad, break_long_words=False))
    return lines


def main() -> None:  # pragma: no cover - console entry point convenience
    app()
