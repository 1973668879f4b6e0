"""``memsim compare RUN [RUN2] --rows A,B[,C...]``: every pair of rows on the probes they share, with the paired
bootstrap interval of the difference, the randomization test's p-value, Holm's correction, wins/ties/losses.

RUN names a per-probe table: ``<folder>/<name>`` (the run's name: ``benchmarks/results/locomo``),
``<folder>/<name>.json`` (its results JSON) or the ``.probes.parquet`` file itself. With one run, every pair of
the listed rows is compared. With two runs, a row may be written ``1:A`` or ``2:A`` (that run's row) and a bare
``A`` stands for both, so ``--rows hybrid@8`` compares hybrid@8 of RUN with hybrid@8 of RUN2; the runs must carry
the same data label and are compared on the probe ids they share.
"""

from __future__ import annotations

import json
from itertools import combinations
from typing import Annotated, Any

import typer

from harness.cli.boundary import bad_option, fail, make_console

console = make_console()


def _load(arg: str) -> Any:
    from harness.probes import ProbeTableError, read_probes, resolve_run

    path = resolve_run(arg)
    try:
        return read_probes(path)
    except ProbeTableError as exc:
        if not path.exists():
            raise fail(f"{path}: no per-probe table there (RUN is <folder>/<name>, <folder>/<name>.json or a "
                       f".probes.parquet file)") from None
        raise fail(str(exc)) from None


def first_mismatch(a: Any, b: Any, path: str = "data") -> str | None:
    """The first place two data labels differ (``data.file``), or None when they are equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(dict.fromkeys([*a, *b])):
            got = first_mismatch(a.get(k), b.get(k), f"{path}.{k}")
            if got:
                return got
        return None
    return None if a == b else path


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _entries(runs: list[Any], rows_opt: str) -> list[tuple[str, Any, str]]:
    asked = _split(rows_opt)
    entries: list[tuple[str, Any, str]] = []
    for item in asked:
        which, _, row = item.partition(":") if item[:2] in ("1:", "2:") else ("", "", item)
        targets = [int(which) - 1] if which else list(range(len(runs)))
        if which and int(which) > len(runs):
            raise bad_option("--rows", item, "a '2:' row needs a second run")
        for i in targets:
            if row not in runs[i].rows:
                raise bad_option("--rows", item, runs[i].rows)
            label = f"{i + 1}:{row}" if len(runs) > 1 else row
            if label not in [e[0] for e in entries]:
                entries.append((label, runs[i], row))
    if len(entries) < 2:
        raise bad_option("--rows", rows_opt, "at least two rows to compare (with two runs, one row names both)")
    return entries


def _default_metric(run: Any) -> str:
    for m in [*(run.meta.get("headline_metrics") or []), "evidence_recall"]:
        if m in run.metrics:
            return str(m)
    raise bad_option("--metric", None, f"this run has no headline metric; choose from {', '.join(run.metrics)}")


def _p(p: float) -> str:
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def render(report: dict[str, Any], title: str) -> list[str]:
    """The report as plain lines (every number from the report)."""
    meth = report["method"]
    from harness.stats import format_interval

    lines = [title, f"probe set {report['probe_set']}: {report['n_probes']} probes; {meth['resampling']}"]
    for metric, rows in report["rows"].items():
        lines.append(f"{metric} ({meth['kinds'][metric]}): mean and 95% interval per row")
        width = max(len(r) for r in rows)
        for row, iv in rows.items():
            lines.append(f"  {row:<{width}}  {format_interval(iv['estimate'], iv['lo'], iv['hi'])}  "
                         f"n {iv['n']}  {iv['method']}")
    lines.append(f"differences A - B: paired bootstrap 95% interval (unadjusted); p: {meth['test']}; "
                 f"{meth['correction']}")
    for r in report["pairs"]:
        d = r["diff"]
        diff = "n/a" if d["estimate"] is None else f"{d['estimate']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"
        clusters = f"  clusters agreeing {r['clusters_agree']}/{len(r['clusters'])}" if r["clusters"] else ""
        det = "" if r["detectable"] is None else f"  detectable at 80% power {r['detectable']:.3f}"
        lines.append(f"  {r['a']} - {r['b']}  {r['metric']}  n {r['n']}  {diff}  p {_p(r['p'])}  "
                     f"Holm p {_p(r['p_holm'])}  wins/ties/losses {r['wins']}/{r['ties']}/{r['losses']}"
                     f"{clusters}{det}  -> {r['verdict']}")
    return lines


def compare(
    run: Annotated[str, typer.Argument(help="A per-probe table: <folder>/<name>, <folder>/<name>.json or a "
                                            ".probes.parquet file.")],
    run2: Annotated[str | None, typer.Argument(help="A second run on the same data (compared on the probes both "
                                                    "have).")] = None,
    rows: Annotated[str, typer.Option(help="Rows to compare, comma-separated (every pair is compared); with two "
                                           "runs, 1:A or 2:A names one run's row and A both.")] = "",
    metric: Annotated[str | None, typer.Option(help="Metric column(s), comma-separated (default: the run's "
                                                     "first headline metric).")] = None,
    probes: Annotated[str | None, typer.Option(help="Probe set: a name the run defines (e.g. headline) or all "
                                                    "(default: headline when defined, else all).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document instead of lines.")] = False,
) -> None:
    """Compare rows of a run (or the same rows of two runs) on the probes they share.

    For every pair: the mean difference with its paired bootstrap 95% interval (stratified within conversations
    where the run says so), the two-sided paired randomization test's p-value, Holm's adjustment over every pair
    and metric of the call, wins/ties/losses, per-cluster agreement and the smallest difference the test detects
    at 80% power. A difference is reported as A > B or A < B only when its Holm-adjusted p < 0.05, else as
    inconclusive.
    """
    from harness.comparisons import comparison_report

    if not rows:
        raise bad_option("--rows", None, "name the rows to compare, e.g. --rows hybrid@8,bm25@8")
    runs = [_load(run)] + ([_load(run2)] if run2 else [])
    if len(runs) == 2:
        where = first_mismatch(runs[0].meta.get("data"), runs[1].meta.get("data"))
        if where:
            raise fail(f"{runs[1].path}: {where} is {_show(runs[1].meta, where)}, {runs[0].path} has "
                       f"{_show(runs[0].meta, where)}; runs compare only on the same data")
        w0, w1 = (sorted(set(r.table.column("workload").to_pylist())) for r in runs)
        if w0 != w1:
            raise fail(f"{runs[1].path}: workload {', '.join(w1)}, {runs[0].path} has {', '.join(w0)}")
    entries = _entries(runs, rows)
    metrics = _split(metric) if metric else [_default_metric(runs[0])]
    for m in metrics:
        for r in runs:
            if m not in r.metrics:
                raise bad_option("--metric", m, r.metrics)
    sets = ["all", *(runs[0].meta.get("probe_sets") or {})]
    name = probes or ("headline" if "headline" in sets else "all")
    if name not in sets:
        raise bad_option("--probes", name, sets)
    pairs = list(combinations([e[0] for e in entries], 2))
    try:
        report = comparison_report(entries, pairs, metrics, runs[0].probe_set(name), probe_set=name)
    except ValueError as exc:
        raise fail(f"{runs[-1].path}: {exc}") from None
    report["runs"] = [{"path": str(r.path), "data": r.meta.get("data"), "code": r.meta.get("code")} for r in runs]
    if as_json:
        typer.echo(json.dumps(report, indent=1, allow_nan=False))
        return
    title = "memsim compare: " + " vs ".join(str(r.path) for r in runs)
    for line in render(report, title):
        console.print(line, soft_wrap=True)


def _show(meta: dict[str, Any], where: str) -> str:
    cur: Any = meta
    for part in where.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return repr(cur)

