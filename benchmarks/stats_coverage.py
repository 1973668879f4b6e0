"""Do memsim's intervals and tests mean what they say? Coverage and false-positive rates on simulated per-probe
results shaped like the real ones.

Each scenario draws many simulated runs (2,000; 300 with ``--quick``) from distributions whose true means are exact
(:mod:`benchmarks.worlds.probe_results`: 0/1-heavy recall values with ties, 0/1 outcomes, LoCoMo's 582 scored
headline probes in its 4 conversations, LongMemEval's 30-question slices), computes each run's interval or test
exactly as the benches do (the same 10,000-resample matrix and sign flips, from the same fixed seeds), and counts:

- **coverage**: the share of runs whose 95% interval holds the true value; it passes within 95% +- 2 standard
  errors of the simulation (sqrt(0.95 * 0.05 / runs)), or, for the intervals that are exact by construction
  (Hodges-Lehmann, order statistics), at least 95% - 2 standard errors; an interval that covers more than
  95% + 2 standard errors is marked ``conservative`` (wider than it needs to be, never too narrow; a 0/1 interval
  at n = 30 cannot hit 95% exactly, and its exact coverage is shown beside the simulated one);
- **false-positive rate** of the paired randomization test under the null (the two rows exchangeable on every
  probe): it passes at most 5% + 2 standard errors (a conservative test passes);
- **power at the detectable difference**: runs whose true mean difference equals the smallest difference
  :func:`harness.stats.detectable_difference` reports, tested at 5%: the share significant should be near 80%
  (reported; it passes within 80% +- 5 points).

The LoCoMo scenarios draw each conversation from its own distribution and resample within conversations
(stratified): the truth is the probe-weighted mean of the conversations' means, conditional on these
conversations, which is what the pages claim.

Run: ``python -m benchmarks.stats_coverage --out DIR [--quick]`` (writes ``stats-coverage.{json,md}``).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import machine_description, md_table, write_results
from benchmarks.worlds.probe_results import LOCOMO_HEADLINE, Discrete, recall_like
from harness.stats import (
    Resampler,
    detectable_difference,
    hodges_lehmann,
    median_interval,
    row_intervals,
    sign_flip_pvalues,
)
from harness.stats.intervals import bootstrap_intervals

NAME = "stats-coverage"
RUNS, QUICK_RUNS = 2000, 300
BATCH = 250  # simulated runs per block (bounds the resample x run matrices)
CONV_LEVELS = (0.45, 0.6, 0.5, 0.55)
"""Per-conversation level of the LoCoMo-shaped scenarios (their share of full recall grows with it)."""


def locomo_sizes() -> list[int]:
    """Scored headline probes per conversation: 584 less the 2 without evidence (one each in conv-26 and conv-41)."""
    sizes = [sum(c) for c in LOCOMO_HEADLINE.values()]
    sizes[0] -= 1
    sizes[2] -= 1
    return sizes


def _strata(sizes: list[int]) -> np.ndarray | None:
    return None if len(sizes) == 1 else np.repeat(np.arange(len(sizes)), sizes)


def _paired(rng: np.random.Generator, a: Discrete, b: Discrete, shape: tuple[int, int], rho: float
            ) -> tuple[np.ndarray, np.ndarray]:
    """Draws of (a, b) with the exact marginals ``a`` and ``b``, correlated: with probability ``rho`` both come
    from one uniform (a probe easy or hard for both rows), else from independent ones."""
    u = rng.random(shape)
    v = np.where(rng.random(shape) < rho, u, rng.random(shape))

    def quantile(d: Discrete, w: np.ndarray) -> np.ndarray:
        edges = np.cumsum(d.probs)
        return np.asarray(d.values)[np.minimum(np.searchsorted(edges, w, side="right"), len(d.values) - 1)]

    return quantile(a, u), quantile(b, v)


@dataclass
class Scenario:
    name: str
    kind: str  # interval | null | power
    rule: str  # two-sided | at-least | at-most | near-80
    draw: Callable[[np.random.Generator, int], tuple[np.ndarray, float]]  # (runs x n values or diffs, truth)
    method: str
    sizes: list[int]
    binary: bool = False
    paired: bool = False
    clusters: str = "fixed"  # how a bootstrap treats several clusters: fixed (stratified) or random (two-level)


def _by_conv(levels: tuple[float, ...], sizes: list[int], make: Callable[[float], Discrete]) -> list[Discrete]:
    return [make(levels[i % len(levels)]) for i in range(len(sizes))]


def _draw_single(dists: list[Discrete], sizes: list[int]) -> Callable[[np.random.Generator, int], Any]:
    def draw(rng: np.random.Generator, runs: int) -> tuple[np.ndarray, float]:
        x = np.concatenate([d.draw(rng, (runs, s)) for d, s in zip(dists, sizes, strict=True)], axis=1)
        return x, float(np.dot([d.mean for d in dists], sizes) / sum(sizes))
    return draw


def _draw_pair(da: list[Discrete], db: list[Discrete], sizes: list[int], rho: float
               ) -> Callable[[np.random.Generator, int], Any]:
    def draw(rng: np.random.Generator, runs: int) -> tuple[np.ndarray, float]:
        parts = [_paired(rng, a, b, (runs, s), rho) for a, b, s in zip(da, db, sizes, strict=True)]
        d = np.concatenate([p[0] - p[1] for p in parts], axis=1)
        truth = float(np.dot([a.mean - b.mean for a, b in zip(da, db, strict=True)], sizes) / sum(sizes))
        return d, truth
    return draw


def _bernoulli(p: float) -> Discrete:
    return Discrete((0.0, 1.0), (1 - p, p))


def _shifted(levels: tuple[float, ...], shift: float) -> tuple[float, ...]:
    return tuple(min(1.0, v + shift) for v in levels)


def _lognormal_cells(rng: np.random.Generator, runs: int) -> tuple[np.ndarray, float]:
    base = rng.lognormal(math.log(200.0), 0.3, (runs, 10))
    cell = rng.lognormal(math.log(200.0), 0.3, (runs, 10)) + 50.0
    return np.concatenate([cell, base], axis=1), 50.0


def _sweep_draw(rng: np.random.Generator, runs: int) -> tuple[np.ndarray, float]:
    """Paired 0/1 differences of 5 seeds x 100 probes: each seed's true difference is 0.05 plus a seed effect
    (sd 0.05), so the seeds are a sample and the truth is the mean over seeds, 0.05."""
    p = 0.05 + np.repeat(rng.normal(0, 0.05, (runs, 5)), 100, axis=1)
    u = rng.random((runs, 500))
    return np.where(u < 0.2 + p / 2, 1.0, np.where(u < 0.4, -1.0, 0.0)), 0.05


def scenarios() -> list[Scenario]:
    lo = locomo_sizes()
    lme = [30]
    rec = _by_conv(CONV_LEVELS, lo, recall_like)
    return [
        Scenario("evidence recall, LoCoMo headline", "interval", "two-sided", _draw_single(rec, lo),
                 "BCa bootstrap, stratified by conversation", lo),
        Scenario("all-evidence (0/1), LoCoMo headline", "interval", "two-sided",
                 _draw_single(_by_conv(CONV_LEVELS, lo, _bernoulli), lo), "Wilson score", lo, binary=True),
        Scenario("hit at 5 (0/1), LongMemEval slice", "interval", "two-sided",
                 _draw_single([_bernoulli(0.8)], lme), "Wilson score (Clopper-Pearson when all equal)", lme,
                 binary=True),
        Scenario("evidence recall, LongMemEval slice", "interval", "two-sided",
                 _draw_single([recall_like(0.7)], lme), "BCa bootstrap", lme),
        Scenario("recall difference, LoCoMo headline", "interval", "two-sided",
                 _draw_pair(rec, _by_conv(_shifted(CONV_LEVELS, 0.05), lo, recall_like), lo, 0.6),
                 "paired expanded-percentile bootstrap, stratified", lo, paired=True),
        Scenario("0/1 difference, LoCoMo headline", "interval", "two-sided",
                 _draw_pair(_by_conv(CONV_LEVELS, lo, _bernoulli),
                            _by_conv(_shifted(CONV_LEVELS, 0.04), lo, _bernoulli), lo, 0.6),
                 "paired expanded-percentile bootstrap, stratified", lo, paired=True),
        Scenario("recall difference, LongMemEval slice", "interval", "two-sided",
                 _draw_pair([recall_like(0.7)], [recall_like(0.6)], lme, 0.6),
                 "paired expanded-percentile bootstrap", lme, paired=True),
        Scenario("recall difference, mostly ties, LongMemEval slice", "interval", "two-sided",
                 _draw_pair([recall_like(0.8)], [recall_like(0.7)], lme, 0.9),
                 "paired expanded-percentile bootstrap", lme, paired=True),
        Scenario("0/1 difference, 5 sweep seeds x 100 probes", "interval", "two-sided", _sweep_draw,
                 "paired bootstrap, two levels (seeds, then probes)", [100] * 5, paired=True, clusters="random"),
        Scenario("recall, null (rows exchangeable), LoCoMo headline", "null", "at-most",
                 _draw_pair(rec, rec, lo, 0.6), "paired randomization test", lo),
        Scenario("recall, null, LongMemEval slice", "null", "at-most",
                 _draw_pair([recall_like(0.7)], [recall_like(0.7)], lme, 0.6), "paired randomization test", lme),
        Scenario("0/1 outcome, null, LongMemEval slice", "null", "at-most",
                 _draw_pair([_bernoulli(0.8)], [_bernoulli(0.8)], lme, 0.5), "paired randomization test", lme),
        Scenario("power at the detectable difference, LoCoMo headline", "power", "near-80", _power_draw(lo),
                 "paired randomization test at 5%", lo),
        Scenario("latency shift, 10 runs per cell", "latency", "at-least", _lognormal_cells,
                 "Hodges-Lehmann (exact Mann-Whitney order statistics)", [10, 10]),
        Scenario("latency median, 10 runs", "median", "at-least",
                 lambda rng, runs: (rng.lognormal(math.log(200.0), 0.3, (runs, 10)), 200.0),
                 "order statistics (binomial)", [10]),
    ]


_NULL_NOISE = Discrete((-1.0, -0.5, 0.0, 0.5, 1.0), (0.12, 0.04, 0.68, 0.04, 0.12))
"""Symmetric 0/1-heavy paired differences (mostly ties) for the power scenario."""


def power_shift(n: int) -> float:
    """The detectable difference (two-sided 5%, 80% power) of ``n`` differences with the spread of
    :data:`_NULL_NOISE`: :func:`harness.stats.detectable_difference` of a large draw, scaled from its size to n."""
    big = _NULL_NOISE.draw(np.random.default_rng(12345), 200_000)
    return float(detectable_difference(big, 0.05)) * math.sqrt(len(big) / n)  # type: ignore[arg-type]


def _power_draw(sizes: list[int]) -> Callable[[np.random.Generator, int], Any]:
    def draw(rng: np.random.Generator, runs: int) -> tuple[np.ndarray, float]:
        n = sum(sizes)
        shift = power_shift(n)
        return _NULL_NOISE.draw(rng, (runs, n)) + shift, shift
    return draw


def evaluate(sc: Scenario, runs: int, seed: int) -> dict[str, Any]:
    """Simulate ``runs`` runs of one scenario and count coverage (or rejections)."""
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    hits = 0
    methods: dict[str, int] = {}
    strata = _strata(sc.sizes) if sc.kind in ("interval", "null", "power") else None
    rs = (Resampler(sum(sc.sizes), strata, clusters=sc.clusters)  # type: ignore[arg-type]
          if sc.kind == "interval" and not sc.binary else None)
    for start in range(0, runs, BATCH):
        k = min(BATCH, runs - start)
        x, truth = sc.draw(rng, k)
        if sc.kind == "interval":
            ivs = (row_intervals(x, "binary", None) if sc.binary else
                   bootstrap_intervals(x, rs, method="expanded-percentile" if sc.paired else "bca"))  # type: ignore[arg-type]
            hits += sum(iv.contains(truth) for iv in ivs)
            for iv in ivs:
                methods[iv.method] = methods.get(iv.method, 0) + 1
        elif sc.kind in ("null", "power"):
            hits += int((sign_flip_pvalues(x) < 0.05).sum())
        elif sc.kind == "latency":
            for row in x:
                iv = hodges_lehmann(row[:10], row[10:])
                hits += iv.contains(truth)
                methods[iv.method] = methods.get(iv.method, 0) + 1
        else:
            for row in x:
                iv = median_interval(row)
                hits += iv.contains(truth)
                methods[iv.method] = methods.get(iv.method, 0) + 1
    rate = hits / runs
    target = {"null": 0.05, "power": 0.80}.get(sc.kind, 0.95)
    se = math.sqrt(target * (1 - target) / runs)
    ok = {"two-sided": abs(rate - target) <= 2 * se, "at-least": rate >= target - 2 * se,
          "at-most": rate <= target + 2 * se, "near-80": abs(rate - target) <= 0.05}[sc.rule]
    conservative = sc.rule == "two-sided" and rate > target + 2 * se
    return {"scenario": sc.name, "kind": sc.kind, "method": sc.method, "n": sum(sc.sizes),
            "clusters": len(sc.sizes) if sc.kind in ("interval", "null", "power") else 1, "runs": runs,
            "rate": rate, "target": target, "se": se, "rule": sc.rule, "passes": bool(ok),
            "outcome": "pass" if ok else ("conservative" if conservative else "FAIL"),
            "exact": exact_coverage(sc), "methods": methods, "seconds": time.perf_counter() - t0}


def exact_coverage(sc: Scenario) -> float | None:
    """The exact coverage of a 0/1 scenario's interval without clusters (a sum over the binomial outcomes), else
    None: it tells the method's own coverage at this n and p apart from simulation noise."""
    if not (sc.binary and len(sc.sizes) == 1):
        return None
    from scipy.stats import binom

    from harness.stats import proportion_interval

    x, p = sc.draw(np.random.default_rng(0), 1)
    n = sc.sizes[0]
    return float(sum(binom.pmf(k, n, p) for k in range(n + 1) if proportion_interval(k, n).contains(p)))


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, track: Callable[..., Any] | None = None
        ) -> list[Path]:
    from harness.runs import run_record

    runs = QUICK_RUNS if quick else RUNS
    t0 = time.perf_counter()
    scs = scenarios()
    it = track(scs, "coverage scenarios", total=len(scs)) if track else scs
    results = [evaluate(sc, runs, seed + i) for i, sc in enumerate(it)]
    payload = {"name": NAME, "runs": runs, "results": results,
               "passes": all(r["passes"] for r in results), "quick": quick,
               "meta": {"machine": machine_description(), "seeds": {"seed": seed}, "quick": quick},
               "run": run_record(time.perf_counter() - t0)}
    return write_results(out_dir, NAME, payload, render_markdown(payload), None)


_RULE = {"two-sided": "within 2 SE of", "at-least": "at least (2 SE)", "at-most": "at most (+2 SE)",
         "near-80": "within 5 points of"}


def render_markdown(p: dict[str, Any]) -> str:
    """The page: one table of every scenario, rendered from the JSON."""
    rows = [[r["scenario"], r["method"], r["n"], r["clusters"],
             "coverage" if r["kind"] not in ("null", "power") else
             ("false positives" if r["kind"] == "null" else "power"),
             f"{100 * r['rate']:.1f}%" + (f" (exact {100 * r['exact']:.1f}%)" if r.get("exact") else ""),
             f"{_RULE[r['rule']]} {100 * r['target']:.0f}% (SE {100 * r['se']:.2f})", r["outcome"]]
            for r in p["results"]]
    counts = {k: sum(r["outcome"] == k for r in p["results"]) for k in ("pass", "conservative", "FAIL")}
    verdict = (f"{counts['pass']} scenario(s) pass, {counts['conservative']} cover more than the criterion allows "
               f"(conservative: wider than needed, never too narrow) and {counts['FAIL']} fail (too narrow, or too "
               "many false positives).")
    from harness.runs import describe_code

    return "\n\n".join([
        "# Statistics checks: coverage and false positives",
        f"{p['runs']:,} simulated runs per scenario; each run's interval or test computed as the benches compute "
        "them (10,000 shared bootstrap resamples, sign flips from a fixed seed). " + verdict,
        md_table(["scenario", "method", "probes", "clusters", "measured", "rate", "criterion", "result"], rows),
        f"Code: {describe_code(p['run'])}. Seeds: {p['meta']['seeds']}.",
    ])


def main(argv: list[str] | None = None) -> list[Path]:
    from benchmarks.common import default_out_dir
    from harness.runs import final_path, owned_run, terminated_as_interrupt

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="results folder (default: the bench run folder)")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_RUNS} simulated runs per scenario")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    out = args.out or default_out_dir(args.quick)
    with terminated_as_interrupt(), owned_run(out, [NAME]) as stage:
        paths = run(stage, quick=args.quick, seed=args.seed)
    paths = [final_path(stage, out, p) for p in paths]
    for p in paths:
        print(f"wrote {p}")
    return paths


if __name__ == "__main__":
    main()
