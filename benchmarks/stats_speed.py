"""How long the statistics of a full LoCoMo design run take: the headline intervals of 21 rows and every headline
pair, on a synthetic table of the real shape (584 headline probes in 4 conversations x 21 rows,
:mod:`benchmarks.worlds.probe_results`).

Timed, from the per-probe table already in memory: building the shared resample matrix (10,000 resamples,
stratified by conversation), the 95% interval of every row on every headline metric, and every pair the page
compares (each design row against bm25 and hybrid at the same K; the unranked design rows against bm25@8 and
hybrid@8; Tortoise's recorded rows against the plain ones), each on the family's metrics, with its paired
bootstrap interval, randomization test (enough sign flips for the family's smallest Holm threshold), Holm's
correction, per-conversation agreement and detectable difference. The time is printed and recorded with the level
it is held to (the whole set within :data:`LEVEL_S` seconds on a 2-core machine), and the page says whether the
run met it; no test asserts it (a shared machine's timings vary).

Run: ``python -m benchmarks.stats_speed --out DIR`` (writes ``stats-speed.{json,md}``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import machine_description, md_table, write_results
from benchmarks.worlds.probe_results import ROWS_21, locomo_table_rows
from harness.probes import ProbeRun, infer_kinds, probe_table

NAME = "stats-speed"
LEVEL_S = 10.0
"""The level: every headline interval and pair of a full LoCoMo design run within this many seconds."""
HEADLINE_METRICS = ("evidence_recall", "all_evidence", "stored_recall", "tokens_cl100k", "answer_present",
                    "turn.recall_any@5", "turn.recall_all@5", "turn.ndcg_any@5", "turn.recall_any@10",
                    "turn.recall_all@10", "turn.ndcg_any@10")
"""Metrics of the headline and ranked tables (each gets an interval per row)."""
FAMILY_METRICS = ("evidence_recall", "all_evidence", "tokens_cl100k", "answer_present")
"""Metrics of the Differences section (the Holm family is pairs x these)."""


def headline_pairs() -> list[tuple[str, str]]:
    """The comparator pairs a LoCoMo page fixes before any run."""
    pairs = []
    for k in (4, 8):
        for row in (f"np-pooler@{k}", f"np-mean@{k}", f"pm@{k}", f"mean@{k}"):
            pairs += [(row, f"bm25@{k}"), (row, f"hybrid@{k}")]
        pairs.append((f"hybrid@{k}", f"bm25@{k}"))
    for row in ("fractal", "tortoise-volunteer", "tortoise-eval", "tortoise-recorded-volunteer",
                "tortoise-recorded-eval"):
        pairs += [(row, "bm25@8"), (row, "hybrid@8")]
    pairs += [("tortoise-recorded-eval", "tortoise-eval"), ("tortoise-recorded-volunteer", "tortoise-volunteer")]
    return pairs


def measure(seed: int = 0) -> dict[str, Any]:
    """Build the synthetic table, then time the intervals and the pairs (from the table in memory)."""
    from harness.comparisons import comparison_report

    table = probe_table(locomo_table_rows(seed))
    run = ProbeRun(Path("synthetic"), table, {"kinds": infer_kinds(table), "stratify": True})
    where = {"category": ["1", "2", "3", "4"]}
    entries = [(r, run, r) for r in ROWS_21]
    t0 = time.perf_counter()
    rows = comparison_report(entries, [], list(HEADLINE_METRICS), where, seed=seed)["rows"]
    t1 = time.perf_counter()
    pairs = headline_pairs()
    report = comparison_report(entries, pairs, list(FAMILY_METRICS), where, seed=seed)
    t2 = time.perf_counter()
    return {"rows": len(ROWS_21), "probes": report["n_probes"], "clusters": report["n_clusters"],
            "interval_metrics": len(HEADLINE_METRICS), "intervals": sum(len(v) for v in rows.values()),
            "pairs": len(pairs), "family": len(report["pairs"]), "permutations": report["pairs"][0]["permutations"],
            "intervals_s": t1 - t0, "pairs_s": t2 - t1, "total_s": t2 - t0}


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, track: Callable[..., Any] | None = None
        ) -> list[Path]:
    from harness.runs import run_record

    t0 = time.perf_counter()
    m = measure(seed)
    payload = {"name": NAME, "result": m, "quick": quick, "level_s": LEVEL_S, "meets_level": m["total_s"] <= LEVEL_S,
               "meta": {"machine": machine_description(), "seeds": {"seed": seed}, "quick": quick},
               "run": run_record(time.perf_counter() - t0)}
    return write_results(out_dir, NAME, payload, render_markdown, None)


def render_markdown(p: dict[str, Any]) -> str:
    from harness.runs import describe_code

    r = p["result"]
    mach = p["meta"]["machine"]
    return "\n\n".join([
        "# Statistics speed: a full LoCoMo design run's intervals and paired tests",
        f"A synthetic per-probe table of the real shape: {r['probes']} headline probes in {r['clusters']} "
        f"conversations x {r['rows']} rows.",
        md_table(["what", "count", "seconds"], [
            [f"95% intervals ({r['interval_metrics']} metrics x {r['rows']} rows, shared resamples)",
             r["intervals"], f"{r['intervals_s']:.2f}"],
            [f"paired comparisons ({r['pairs']} pairs x {r['family'] // max(1, r['pairs'])} metrics, "
             f"{r['permutations']:,} sign flips each)", r["family"], f"{r['pairs_s']:.2f}"],
            ["total", "", f"{r['total_s']:.2f}"]]),
        f"Level: all of it within {p['level_s']:g} s: {'met' if p['meets_level'] else 'NOT met'} "
        f"({r['total_s']:.2f} s).",
        f"Machine: {mach.get('cpu')}, {mach.get('affinity_cpus') or mach.get('cpu_count')} cores. "
        f"Code: {describe_code(p['run'])}.",
    ])


def main(argv: list[str] | None = None) -> list[Path]:
    from benchmarks.common import default_out_dir
    from harness.runs import final_path, owned_run, terminated_as_interrupt

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="results folder (default: the bench run folder)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    out = args.out or default_out_dir()
    with terminated_as_interrupt(), owned_run(out, [NAME]) as stage:
        paths = run(stage, seed=args.seed)
        import json

        r = json.loads((stage / f"{NAME}.json").read_text(encoding="utf-8"))["result"]
    print(f"intervals {r['intervals_s']:.2f} s, pairs {r['pairs_s']:.2f} s, total {r['total_s']:.2f} s "
          f"({r['intervals']} intervals, {r['family']} comparisons, {r['permutations']:,} sign flips)")
    paths = [final_path(stage, out, p) for p in paths]
    for p in paths:
        print(f"wrote {p}")
    return paths


if __name__ == "__main__":
    main()
