"""Comparisons that are not paired: two different probe sets, one probe set against a stated threshold, and
latency cells measured in separate sessions.

- :func:`two_sample`: the difference of two groups' means (e.g. one row's category 1 probes against its category 2
  probes): a percentile bootstrap interval (each group resampled on its own) and a two-sided permutation test
  (group labels shuffled; p = (b + 1) / (m + 1)). Probes are treated as independent.
- :func:`one_sample`: a mean against a stated threshold: for 0/1 outcomes the exact binomial test with the
  Wilson / Clopper-Pearson interval; otherwise the BCa bootstrap interval and the p-value that inverts it (the
  largest level at which the two-sided interval still holds the threshold), so "the interval excludes the
  threshold" and "p < 0.05" say the same thing.
- :func:`hodges_lehmann`: the shift between two latency samples (cell minus baseline): the Hodges-Lehmann estimate
  (median of all pairwise differences) and its distribution-free interval from the exact Mann-Whitney null
  distribution (order statistics of the pairwise differences; valid for any sample sizes, 10 and 10 included,
  for continuous latencies that differ by a shift; its coverage is at least the nominal one).
- :func:`median_interval`: a distribution-free interval for one cell's median (binomial order statistics).
- :func:`within_level`: a level such as "served overhead p50 <= 300 ms" passes only when the upper bound does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from harness.stats.intervals import (
    CONFIDENCE,
    RESAMPLES,
    SEED,
    Interval,
    Resampler,
    _ndtr,
    _ndtri,
    bca_parameters,
    proportion_interval,
    row_intervals,
    sorted_quantiles,
)
from harness.stats.paired import MIN_PERMUTATIONS

_CHUNK = 2048


def _clean(x: Sequence[float] | np.ndarray) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64).ravel()
    return a[~np.isnan(a)]


@dataclass(frozen=True)
class TestResult:
    """A test's estimate (with its interval) and two-sided p-value; ``reference`` is the threshold of a
    one-sample test."""

    estimate: Interval
    p: float
    test: str
    reference: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["estimate"] = self.estimate.to_dict()
        return out


def two_sample(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, *, resamples: int = RESAMPLES,
               permutations: int = MIN_PERMUTATIONS - 1, seed: int = SEED, confidence: float = CONFIDENCE
               ) -> TestResult:
    """mean(x) - mean(y) for two different probe sets (see the module doc)."""
    a, b = _clean(x), _clean(y)
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"two-sample test: {len(a)} and {len(b)} values; each group needs two")
    est = float(a.mean() - b.mean())
    boot = (Resampler(len(a), resamples=resamples, seed=seed).means(a[None])[:, 0]
            - Resampler(len(b), resamples=resamples, seed=seed + 1).means(b[None])[:, 0])
    srt = np.sort(boot)[:, None]
    al = 1 - confidence
    lo, hi = sorted_quantiles(srt, np.array([al / 2]))[0], sorted_quantiles(srt, np.array([1 - al / 2]))[0]
    pooled = np.concatenate([a, b])
    total, na, nb = pooled.sum(), len(a), len(b)
    tol = 1e-9 * max(1.0, abs(est))
    rng = np.random.default_rng(seed)
    hits = done = 0
    while done < permutations:
        k = min(_CHUNK, permutations - done)
        perm = np.argsort(rng.random((k, len(pooled))), axis=1)[:, :na]
        sx = pooled[perm].sum(1)
        hits += int((np.abs(sx / na - (total - sx) / nb) >= abs(est) - tol).sum())
        done += k
    p = (hits + 1) / (permutations + 1)
    return TestResult(Interval(est, float(min(lo, est)), float(max(hi, est)), na + nb, "percentile", confidence),
                      float(p), "permutation")


def one_sample(x: Sequence[float] | np.ndarray, threshold: float, kind: Literal["binary", "mean"], *,
               resamples: int = RESAMPLES, seed: int = SEED, strata: Sequence[Any] | None = None,
               confidence: float = CONFIDENCE) -> TestResult:
    """mean(x) against ``threshold`` (see the module doc); ``strata`` stratifies the bootstrap of a mean."""
    a = np.asarray(x, dtype=np.float64).ravel()
    keep = ~np.isnan(a)
    v = a[keep]
    if len(v) == 0:
        raise ValueError("one-sample test: no values")
    if kind == "binary":
        from scipy.stats import binomtest

        k = int(v.sum())
        return TestResult(proportion_interval(k, len(v), confidence),
                          float(binomtest(k, len(v), threshold).pvalue), "exact binomial", threshold)
    labels = None if strata is None else np.asarray(strata)[keep]
    rs = Resampler(len(v), labels, resamples=resamples, seed=seed)
    (iv,) = row_intervals(v[None], "mean", rs, confidence=confidence)
    if iv.method == "clopper-pearson":  # every value 0, or every value 1: the exact binomial test applies
        from scipy.stats import binomtest

        k = int(round(float(iv.estimate or 0.0) * len(v)))
        return TestResult(iv, float(binomtest(k, len(v), threshold).pvalue), "exact binomial", threshold)
    if iv.method == "constant":  # no spread at all: nothing to test with, so never significant
        return TestResult(iv, 1.0, "constant values (no test)", threshold)
    boot = rs.means(v[None])
    z0, acc, _ = bca_parameters(boot, np.array([v.mean()]), v[None], np.ones((1, len(v)), dtype=bool))
    b = boot.shape[0]
    q = (float((boot[:, 0] < threshold).sum()) + 0.5 * float((boot[:, 0] == threshold).sum()) + 0.5) / (b + 1)
    u = float(_ndtri(np.array([q]))[0]) - float(z0[0])
    w = float(_ndtr(np.array([u / (1 + float(acc[0]) * u) - float(z0[0])]))[0])
    return TestResult(iv, float(min(1.0, 2 * min(w, 1 - w))), "bootstrap (inverted BCa)", threshold)


# ------------------------------------------------------------------------------------------------ latency cells
def mann_whitney_null(m: int, n: int) -> np.ndarray:
    """P(U = u), u = 0..m*n, of the Mann-Whitney statistic of samples of sizes m and n without ties (the
    coefficients of the Gaussian binomial [m + n choose m]_q over C(m + n, m))."""
    deg = m * n
    c = np.zeros(deg + 1)
    c[0] = 1.0
    for i in range(1, m + 1):
        # multiply by (1 - q^(n+i)), then divide by (1 - q^i): each partial product is [n+i choose i]_q
        s = n + i
        if s <= deg:
            c[s:] -= c[:-s].copy()
        for r in range(i):  # division by (1 - q^i): a running sum over each residue class mod i
            c[r::i] = np.cumsum(c[r::i])
    return c / math.comb(m + n, m)


def _mw_rank(m: int, n: int, confidence: float) -> int:
    """The largest k with P(U <= k - 1) <= (1 - confidence) / 2 (0 when even k = 1 is too wide a tail)."""
    half = (1 - confidence) / 2
    if m * n > 40_000:  # normal approximation for large samples
        z = float(_ndtri(np.array([1 - half]))[0])
        return max(0, int(math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12))))
    cdf = np.cumsum(mann_whitney_null(m, n))
    return int(np.searchsorted(cdf, half + 1e-12, side="right"))


def hodges_lehmann(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray,
                   confidence: float = CONFIDENCE) -> Interval:
    """The shift x - y: the Hodges-Lehmann estimate and its distribution-free interval
    [D_(k), D_(mn + 1 - k)] over the sorted pairwise differences D (see the module doc). Too few values for any
    interval at this confidence: the estimate with no bounds."""
    a, b = _clean(x), _clean(y)
    if len(a) == 0 or len(b) == 0:
        return Interval(None, None, None, 0, "empty", confidence)
    d = np.sort((a[:, None] - b[None, :]).ravel())
    est = float(np.median(d))
    k = _mw_rank(len(a), len(b), confidence)
    if k < 1:
        return Interval(est, None, None, len(a) + len(b), "hodges-lehmann", confidence)
    return Interval(est, float(d[k - 1]), float(d[len(d) - k]), len(a) + len(b), "hodges-lehmann", confidence)


def within_level(interval: Interval, limit: float) -> bool | None:
    """A level "value <= limit" passes only when the interval's upper bound is within it (None: no bound, no
    verdict). Used for latency levels, where the point estimate alone would pass on luck."""
    return None if interval.hi is None else interval.hi <= limit


def median_interval(x: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE) -> Interval:
    """One sample's median with the order-statistic interval [x_(j), x_(n + 1 - j)], j the largest with
    P(Binomial(n, 1/2) <= j - 1) <= (1 - confidence) / 2 (at n = 10: the 2nd and 9th values, 97.9% coverage)."""
    from scipy.stats import binom

    v = np.sort(_clean(x))
    n = len(v)
    if n == 0:
        return Interval(None, None, None, 0, "empty", confidence)
    est = float(np.median(v))
    cdf = binom.cdf(np.arange(n), n, 0.5)
    j = int(np.searchsorted(cdf, (1 - confidence) / 2 + 1e-12, side="right"))
    if j < 1:
        return Interval(est, None, None, n, "order-statistic", confidence)
    return Interval(est, float(v[j - 1]), float(v[n - j]), n, "order-statistic", confidence)
