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
  at n = 30 cannot hit 95% exactly, and its exact coverage is shown beside the simulated one). A bound equal to
  the truth up to floating-point rounding (1e-9) holds it: a truth such as 0.8 - 0.7 is computed as
  0.10000000000000009 while a mean of 30 probes that is exactly 3/30 is 0.1. Each interval scenario also
  records the interval's mean width;
- **paired differences, method by method**: each paired-difference scenario (but the two-level sweep, where no t
  interval is defined and the expanded percentile is used alone) also scores, on the same simulated runs, the
  expanded percentile interval alone, the Student t interval alone and BCa, so the page shows what the chosen
  interval (the wider of the first two on each side) gains over each and what it costs in width;
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
    Interval,
    Resampler,
    detectable_difference,
    difference_intervals,
    hodges_lehmann,
    median_interval,
    row_intervals,
    sign_flip_pvalues,
    t_bounds,
)
from harness.stats.intervals import bootstrap_intervals

NAME = "stats-coverage"
RUNS, QUICK_RUNS = 2000, 300
BATCH = 250  # simulated runs per block (bounds the resample x run matrices)
TOLERANCE = 1e-9
"""A bound this close to the truth holds it (floating-point rounding of the truth; see the module doc)."""
ALTERNATIVES = ("expanded-percentile", "t", "bca")
"""Paired-difference intervals scored beside the chosen one, each on its own."""
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


PAIRED = "paired bootstrap, expanded percentile widened to t"
"""The method of the paired-difference scenarios (:func:`harness.stats.difference_intervals`)."""


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
                 f"{PAIRED}, stratified", lo, paired=True),
        Scenario("recall difference, mostly ties, LoCoMo headline", "interval", "two-sided",
                 _draw_pair(rec, _by_conv(_shifted(CONV_LEVELS, 0.05), lo, recall_like), lo, 0.9),
                 f"{PAIRED}, stratified", lo, paired=True),
        Scenario("0/1 difference, LoCoMo headline", "interval", "two-sided",
                 _draw_pair(_by_conv(CONV_LEVELS, lo, _bernoulli),
                            _by_conv(_shifted(CONV_LEVELS, 0.04), lo, _bernoulli), lo, 0.6),
                 f"{PAIRED}, stratified", lo, paired=True),
        Scenario("recall difference, LongMemEval slice", "interval", "two-sided",
                 _draw_pair([recall_like(0.7)], [recall_like(0.6)], lme, 0.6), PAIRED, lme, paired=True),
        Scenario("recall difference, mostly ties, LongMemEval slice", "interval", "two-sided",
                 _draw_pair([recall_like(0.8)], [recall_like(0.7)], lme, 0.9), PAIRED, lme, paired=True),
        Scenario("recall difference, nearly all ties, LongMemEval slice", "interval", "two-sided",
                 _draw_pair([recall_like(0.9)], [recall_like(0.8)], lme, 0.95), PAIRED, lme, paired=True),
        Scenario("0/1 difference, mostly ties, LongMemEval slice", "interval", "two-sided",
                 _draw_pair([_bernoulli(0.8)], [_bernoulli(0.72)], lme, 0.9), PAIRED, lme, paired=True),
        Scenario("0/1 difference, 5 sweep seeds x 100 probes", "interval", "two-sided", _sweep_draw,
                 "paired bootstrap, expanded percentile, two levels (seeds, then probes)", [100] * 5, paired=True,
                 clusters="random"),
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


def covers(lo: float | None, hi: float | None, truth: float) -> bool:
    """Whether [lo, hi] holds the truth, up to :data:`TOLERANCE`."""
    tol = TOLERANCE * max(1.0, abs(truth))
    return lo is not None and hi is not None and lo - tol <= truth <= hi + tol


def _intervals(sc: Scenario, x: np.ndarray, rs: Resampler | None) -> list[Interval]:
    if sc.binary:
        return row_intervals(x, "binary", None)
    if sc.paired:  # differences of values in [0, 1]: width 1 (the bound of a difference that is constant)
        return difference_intervals(x, rs, width=[1.0] * len(x))  # type: ignore[arg-type]
    return bootstrap_intervals(x, rs, method="bca")  # type: ignore[arg-type]


def _alternatives(x: np.ndarray, rs: Resampler, chosen: list[Interval]) -> dict[str, list[tuple[float, float]]]:
    """The bounds of each of :data:`ALTERNATIVES` on these runs (a run whose differences are all equal keeps the
    chosen interval: no bootstrap or t interval exists there)."""
    t_lo, t_hi = t_bounds(x, rs)
    out: dict[str, list[tuple[float, float]]] = {
        "expanded-percentile": [(iv.lo, iv.hi) for iv in bootstrap_intervals(x, rs, method="expanded-percentile")],
        "t": [(min(a, iv.estimate), max(b, iv.estimate)) if np.isfinite(a) else (iv.lo, iv.hi)  # type: ignore[type-var]
              for a, b, iv in zip(t_lo, t_hi, chosen, strict=True)],
        "bca": [(iv.lo, iv.hi) for iv in bootstrap_intervals(x, rs, method="bca")]}
    for name, bounds in out.items():
        out[name] = [(iv.lo, iv.hi) if iv.method.startswith("constant") else b  # type: ignore[misc]
                     for b, iv in zip(bounds, chosen, strict=True)]
    return out


def evaluate(sc: Scenario, runs: int, seed: int, *, alternatives: bool = True) -> dict[str, Any]:
    """Simulate ``runs`` runs of one scenario and count coverage (or rejections); ``alternatives``: also score
    :data:`ALTERNATIVES` on a paired-difference scenario."""
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    hits = 0
    width = 0.0
    methods: dict[str, int] = {}
    alt = ({a: [0, 0.0] for a in ALTERNATIVES}
           if alternatives and sc.kind == "interval" and sc.paired and sc.clusters == "fixed" else {})
    strata = _strata(sc.sizes) if sc.kind in ("interval", "null", "power") else None
    rs = (Resampler(sum(sc.sizes), strata, clusters=sc.clusters)  # type: ignore[arg-type]
          if sc.kind == "interval" and not sc.binary else None)
    for start in range(0, runs, BATCH):
        k = min(BATCH, runs - start)
        x, truth = sc.draw(rng, k)
        if sc.kind == "interval":
            ivs = _intervals(sc, x, rs)
            hits += sum(covers(iv.lo, iv.hi, truth) for iv in ivs)
            width += sum(iv.hi - iv.lo for iv in ivs)  # type: ignore[operator]
            for iv in ivs:
                methods[iv.method] = methods.get(iv.method, 0) + 1
            if alt:
                for name, bounds in _alternatives(x, rs, ivs).items():  # type: ignore[arg-type]
                    alt[name][0] += sum(covers(a, b, truth) for a, b in bounds)
                    alt[name][1] += sum(b - a for a, b in bounds)
        elif sc.kind in ("null", "power"):
            hits += int((sign_flip_pvalues(x) < 0.05).sum())
        elif sc.kind == "latency":
            for row in x:
                iv = hodges_lehmann(row[:10], row[10:])
                hits += covers(iv.lo, iv.hi, truth)
                methods[iv.method] = methods.get(iv.method, 0) + 1
        else:
            for row in x:
                iv = median_interval(row)
                hits += covers(iv.lo, iv.hi, truth)
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
            "width": width / runs if sc.kind == "interval" else None,
            "alternatives": {name: {"rate": h / runs, "width": w / runs, "outcome": _outcome(h / runs, se)}
                             for name, (h, w) in alt.items()},
            "exact": exact_coverage(sc), "methods": methods, "seconds": time.perf_counter() - t0}


def _outcome(rate: float, se: float, target: float = 0.95) -> str:
    """A two-sided coverage criterion's outcome: pass, conservative (above) or FAIL (below)."""
    if abs(rate - target) <= 2 * se:
        return "pass"
    return "conservative" if rate > target else "FAIL"


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
    return write_results(out_dir, NAME, payload, render_markdown, None)


_RULE = {"two-sided": "within 2 SE of", "at-least": "at least (2 SE)", "at-most": "at most (+2 SE)",
         "near-80": "within 5 points of"}


_ALT_NAMES = {"expanded-percentile": "expanded percentile alone", "t": "t interval alone", "bca": "BCa"}


def _cell(rate: float, width: float | None, outcome: str) -> str:
    w = "" if width is None else f", width {width:.3f}"
    return f"{100 * rate:.1f}%{w}" + ("" if outcome == "pass" else f" ({outcome})")


def paired_table(p: dict[str, Any]) -> str:
    """Each paired-difference scenario: the chosen interval's coverage and mean width beside each alternative's."""
    res = [r for r in p["results"] if r.get("alternatives")]
    if not res:
        return ""
    rows = [[r["scenario"], r["n"], _cell(r["rate"], r["width"], r["outcome"]),
             *(_cell(a["rate"], a["width"], a["outcome"]) for a in (r["alternatives"][k] for k in ALTERNATIVES))]
            for r in res]
    return md_table(["scenario", "probes", "chosen: expanded percentile widened to t",
                     *(_ALT_NAMES[k] for k in ALTERNATIVES)], rows)


def render_markdown(p: dict[str, Any]) -> str:
    """The page: one table of every scenario, then the paired-difference methods side by side, from the JSON."""
    rows = [[r["scenario"], r["method"], r["n"], r["clusters"],
             "coverage" if r["kind"] not in ("null", "power") else
             ("false positives" if r["kind"] == "null" else "power"),
             f"{100 * r['rate']:.1f}%" + (f" (exact {100 * r['exact']:.1f}%)" if r.get("exact") else ""),
             "" if r.get("width") is None else f"{r['width']:.3f}",
             f"{_RULE[r['rule']]} {100 * r['target']:.0f}% (SE {100 * r['se']:.2f})", r["outcome"]]
            for r in p["results"]]
    counts = {k: sum(r["outcome"] == k for r in p["results"]) for k in ("pass", "conservative", "FAIL")}
    verdict = (f"{counts['pass']} scenario(s) pass, {counts['conservative']} cover more than the criterion allows "
               f"(conservative: wider than needed, never too narrow) and {counts['FAIL']} fail (too narrow, or too "
               "many false positives).")
    from harness.runs import describe_code

    paired = paired_table(p)
    return "\n\n".join([
        "# Statistics checks: coverage and false positives",
        f"{p['runs']:,} simulated runs per scenario; each run's interval or test computed as the benches compute "
        "them (10,000 shared bootstrap resamples, sign flips from a fixed seed). " + verdict,
        md_table(["scenario", "method", "probes", "clusters", "measured", "rate", "mean width", "criterion",
                  "result"], rows),
        *([("## Paired differences: the chosen interval against each method alone\n\n"
            "On the same simulated runs, each method's coverage and mean width (a run whose differences are all "
            "equal gets the same bound from every method). The chosen interval takes, on each side, the farther "
            "bound of the expanded percentile bootstrap and the Student t interval (with the stratified standard "
            "error where the bootstrap is stratified)."), paired] if paired else []),
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
