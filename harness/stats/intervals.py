"""95% intervals for per-row means of per-probe results: the unit is the probe, the estimate the row's mean.

- **0/1 outcomes** (all-evidence, hit at k): the Wilson score interval (:func:`wilson`), which keeps its nominal
  coverage near 0 and 1 where the normal (Wald) interval does not. A row whose probes all score the same (all 0 or
  all 1) gets the exact binomial Clopper-Pearson interval instead (:func:`clopper_pearson`): with k = n Wilson
  reaches 1 as well, but only Clopper-Pearson is exact there, and neither is ever ``[1.000, 1.000]``.
- **Other means** (evidence recall, nDCG, tokens, latency): a bootstrap over probes (:class:`Resampler`): ONE
  matrix of resample counts (10,000 resamples, fixed seed) shared by every row and every pair of a call, so the
  rows' intervals and their differences come from the same resampled probe sets and a rerun gives the same
  numbers. The interval is BCa (bias-corrected and accelerated; the bias from the share of resampled means below
  the estimate, ties counted half, the acceleration from the jackknife) where it is defined, the percentile
  interval otherwise (the bias correction is infinite when no resampled mean falls on one side of the estimate).
  Paired differences (:mod:`harness.stats.paired`) use ``method="expanded-percentile-t"``: each bound is the
  farther of the *expanded* percentile interval's (:func:`expanded_tail`) and the Student t interval's
  (:func:`t_bounds`). On 30 probes whose differences are mostly ties each one alone under-covers in simulation,
  the bootstrap where few differences are non-zero (its resampled means take few values), the t interval where
  they are skewed; the wider of the two covers in every simulated shape, and at 582 probes the two nearly
  coincide (``benchmarks.stats_coverage`` measures all three).
  A row constant at 0 or 1 gets Clopper-Pearson as above (for values in [0, 1] the binomial is the extreme case);
  a row constant at any other value gets the one-point interval, marked ``constant``.
- **Clusters**: probes of one conversation share its history. ``clusters="fixed"`` resamples probes within each
  cluster (stratified): the inference is conditional on these clusters (these conversations, as they are), which
  is what a page about a fixed data set can claim. ``clusters="random"`` resamples clusters first, then probes
  within each chosen cluster (two levels): for seeds of a sweep, where the seeds themselves are a sample.

Null values (a probe without evidence has no recall) are left out of a row's mean: the bootstrap mean is then
the resampled sum over the non-null probes divided by their resampled count (the same resample for every row).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 10_000
SEED = 0
_CHUNK = 2048  # resamples per block of the count matrix product (bounds the float64 temporaries)
_WHOLE = 8_000_000  # count matrices up to this many entries (64 MB as float64) are kept as float64 once


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval. ``method``: wilson, clopper-pearson, bca, percentile, expanded-percentile,
    expanded-percentile-t, constant, constant-bound (a paired difference that is the same on every probe, see
    :func:`harness.stats.paired.difference_intervals`), hodges-lehmann, order-statistic or empty (no value:
    estimate and bounds None)."""

    estimate: float | None
    lo: float | None
    hi: float | None
    n: int
    method: str
    confidence: float = CONFIDENCE

    def format(self, digits: int = 3) -> str:
        """``0.559 [0.521, 0.597]``; ``n/a`` without a value."""
        return format_interval(self.estimate, self.lo, self.hi, digits)

    def __str__(self) -> str:
        return self.format()

    def contains(self, value: float) -> bool:
        return self.lo is not None and self.hi is not None and self.lo <= value <= self.hi

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def format_interval(estimate: float | None, lo: float | None, hi: float | None, digits: int = 3) -> str:
    """The one format of every table: ``0.559 [0.521, 0.597]`` (``n/a`` without an estimate)."""
    if estimate is None or lo is None or hi is None:
        return "n/a"
    return f"{estimate:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _z(confidence: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(1 - (1 - confidence) / 2))


# ------------------------------------------------------------------------------------------------ proportions
def wilson(k: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """The Wilson score interval of k successes in n trials (every k, including 0 and n)."""
    if n <= 0:
        return Interval(None, None, None, 0, "empty", confidence)
    if not 0 <= k <= n:
        raise ValueError(f"k = {k} successes out of n = {n}")
    z = _z(confidence)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), n, "wilson", confidence)


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """The exact binomial (Clopper-Pearson) interval: at k = n it is ``[(alpha/2)^(1/n), 1]``."""
    from scipy.special import betaincinv  # the beta quantile (scipy.stats.beta.ppf) without scipy.stats

    if n <= 0:
        return Interval(None, None, None, 0, "empty", confidence)
    if not 0 <= k <= n:
        raise ValueError(f"k = {k} successes out of n = {n}")
    a = 1 - confidence
    lo = 0.0 if k == 0 else float(betaincinv(k, n - k + 1, a / 2))
    hi = 1.0 if k == n else float(betaincinv(k + 1, n - k, 1 - a / 2))
    return Interval(k / n, lo, hi, n, "clopper-pearson", confidence)


def proportion_interval(k: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """Wilson, or Clopper-Pearson when every trial scored the same (k = 0 or k = n)."""
    return clopper_pearson(k, n, confidence) if k in (0, n) else wilson(k, n, confidence)


# ------------------------------------------------------------------------------------------------ bootstrap
def _codes(strata: Sequence[Any] | np.ndarray | None, n: int) -> np.ndarray | None:
    if strata is None:
        return None
    arr = np.asarray(strata)
    if arr.shape != (n,):
        raise ValueError(f"strata: {arr.shape[0] if arr.ndim else 0} labels for {n} probes")
    _, codes = np.unique(arr, return_inverse=True)
    return codes.astype(np.int64)


def _row_counts(rng: np.random.Generator, b: int, k: int) -> np.ndarray:
    """(b, k) counts of k draws with replacement from k items, per resample."""
    idx = rng.integers(0, k, size=(b, k))
    flat = (np.arange(b, dtype=np.int64)[:, None] * k + idx).ravel()
    return np.bincount(flat, minlength=b * k).reshape(b, k)


class Resampler:
    """One matrix of bootstrap resamples of ``n`` probes (as counts: how often each probe is drawn), shared by
    every row and pair computed with it.

    ``strata`` (one label per probe, e.g. the conversation) with ``clusters="fixed"`` resamples within each
    stratum (its size kept); with ``clusters="random"`` it resamples the strata with replacement, then the probes
    of each chosen stratum (two levels; a stratum drawn twice gets two independent inner resamples). Without
    strata, probes are resampled from all ``n``. The matrix is built once, from ``seed``, on first use."""

    def __init__(self, n: int, strata: Sequence[Any] | np.ndarray | None = None, *, resamples: int = RESAMPLES,
                 seed: int = SEED, clusters: Literal["fixed", "random"] = "fixed") -> None:
        if n < 1:
            raise ValueError("a resampler needs at least one probe")
        if resamples < 100:
            raise ValueError(f"resamples = {resamples}: use at least 100")
        if clusters not in ("fixed", "random"):
            raise ValueError(f"clusters = {clusters!r}: 'fixed' or 'random'")
        self.n = n
        self.resamples = resamples
        self.seed = seed
        self.clusters = clusters
        self.strata = _codes(strata, n)
        self.labels = None if strata is None else np.asarray(strata)
        self._counts: np.ndarray | None = None
        self._counts64: np.ndarray | None = None

    @property
    def stratified(self) -> bool:
        return self.strata is not None and int(self.strata.max()) > 0

    def describe(self) -> str:
        """One phrase for a page: what was resampled and how."""
        base = f"{self.resamples:,} bootstrap resamples of the probes (seed {self.seed})"
        if not self.stratified:
            return base
        k = int(self.strata.max()) + 1  # type: ignore[union-attr]
        if self.clusters == "fixed":
            return f"{base}, stratified within {k} clusters (conditional on these clusters)"
        return f"{base}, two-level: {k} clusters resampled, then probes within each"

    @property
    def counts(self) -> np.ndarray:
        """(resamples, n) float32 counts; row b says how often each probe appears in resample b."""
        if self._counts is None:
            self._counts = self._build()
        return self._counts

    def _build(self) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        b, n = self.resamples, self.n
        out = np.zeros((b, n), dtype=np.float32)
        if self.strata is None:
            for s in range(0, b, _CHUNK):
                e = min(b, s + _CHUNK)
                out[s:e] = _row_counts(rng, e - s, n)
            return out
        members = [np.flatnonzero(self.strata == c) for c in range(int(self.strata.max()) + 1)]
        if self.clusters == "fixed":
            for m in members:
                out[:, m] = _row_counts(rng, b, len(m))
            return out
        k = len(members)
        chosen = _row_counts(rng, b, k)  # (b, k): how often each stratum is drawn
        for c, m in enumerate(members):
            draws = chosen[:, c] * len(m)
            out[:, m] = rng.multinomial(draws, np.full(len(m), 1.0 / len(m)))
        return out

    def means(self, values: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """(resamples, rows) bootstrap means of ``values`` (rows, n), counting only probes where ``mask`` is
        true (default: not NaN)."""
        x, m = _masked(values, mask, self.n)
        patterns, which = np.unique(m, axis=0, return_inverse=True)  # rows share a few null patterns
        sums = np.empty((self.resamples, x.shape[0]))
        cnts = np.empty((self.resamples, len(patterns)))
        xm = (x * m).T
        pt = patterns.T.astype(np.float64)
        for s, block in self._blocks():
            sums[s:s + len(block)] = block @ xm
            cnts[s:s + len(block)] = block @ pt
        with np.errstate(invalid="ignore", divide="ignore"):
            return sums / cnts[:, np.asarray(which).ravel()]

    def _blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """The count matrix as float64 blocks of resamples (all at once when it is small)."""
        c = self.counts
        if c.size <= _WHOLE:
            if self._counts64 is None:
                self._counts64 = c.astype(np.float64)
            yield 0, self._counts64
            return
        for s in range(0, self.resamples, _CHUNK):
            yield s, c[s:s + _CHUNK].astype(np.float64)


def _masked(values: np.ndarray, mask: np.ndarray | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.atleast_2d(np.asarray(values, dtype=np.float64))
    if x.shape[1] != n:
        raise ValueError(f"values have {x.shape[1]} probes, the resampler {n}")
    m = ~np.isnan(x) if mask is None else np.atleast_2d(np.asarray(mask, dtype=bool)) & ~np.isnan(x)
    return np.where(m, x, 0.0), m


def _ndtr(x: np.ndarray) -> np.ndarray:
    from scipy.special import ndtr

    return ndtr(x)


def _ndtri(x: np.ndarray) -> np.ndarray:
    from scipy.special import ndtri

    return ndtri(x)


def bca_parameters(boot: np.ndarray, estimate: np.ndarray, values: np.ndarray, mask: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the bias correction z0 (from the share of resampled means below the estimate, ties counted
    half), the jackknife acceleration a, and whether both are defined (finite, the values not all equal, more
    than two of them). ``boot`` is (resamples, rows); ``values`` and ``mask`` (rows, n) as the resampler saw them."""
    b = boot.shape[0]
    tol = 1e-12 * np.maximum(1.0, np.abs(estimate))
    below = (boot < estimate - tol).sum(0)
    ties = (np.abs(boot - estimate) <= tol).sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z0 = _ndtri((below + 0.5 * ties) / b)
        cnt = mask.sum(1).astype(np.float64)
        total = (values * mask).sum(1)
        loo = (total[:, None] - values) / (cnt[:, None] - 1)  # leave-one-out means (jackknife)
        loo_mean = np.where(mask, loo, 0.0).sum(1) / cnt
        u = np.where(mask, loo_mean[:, None] - loo, 0.0)
        s2 = (u ** 2).sum(1)
        accel = (u ** 3).sum(1) / (6 * s2 ** 1.5)
    ok = np.isfinite(z0) & np.isfinite(accel) & (s2 > 0) & (cnt > 2)
    return np.where(ok, z0, 0.0), np.where(ok, accel, 0.0), ok


def bca_levels(boot: np.ndarray, estimate: np.ndarray, values: np.ndarray, mask: np.ndarray,
               confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, the lower and upper percentile levels of the BCa interval and whether BCa is defined there
    (else the percentile levels are returned for that row); arguments as :func:`bca_parameters`."""
    z0, accel, ok = bca_parameters(boot, estimate, values, mask)
    a = 1 - confidence
    zl, zh = _ndtri(np.array([a / 2, 1 - a / 2]))
    lo_p = np.full(boot.shape[1], a / 2)
    hi_p = np.full(boot.shape[1], 1 - a / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        dl = 1 - accel * (z0 + zl)
        dh = 1 - accel * (z0 + zh)
        ok = ok & (dl > 0) & (dh > 0)
        lo_b = _ndtr(z0 + (z0 + zl) / dl)
        hi_b = _ndtr(z0 + (z0 + zh) / dh)
    ok &= np.isfinite(lo_b) & np.isfinite(hi_b)
    return np.where(ok, lo_b, lo_p), np.where(ok, hi_b, hi_p), ok


def sorted_quantiles(sorted_boot: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Per column of an axis-0-sorted matrix, its quantile at that column's level (linear interpolation)."""
    b = sorted_boot.shape[0]
    pos = np.clip(levels, 0.0, 1.0) * (b - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, b - 1)
    frac = pos - lo
    cols = np.arange(sorted_boot.shape[1])
    return sorted_boot[lo, cols] * (1 - frac) + sorted_boot[hi, cols] * frac


def expanded_tail(n: np.ndarray, confidence: float = CONFIDENCE) -> np.ndarray:
    """The lower percentile level of the expanded percentile interval of n values: alpha'/2 = Phi(-sqrt(n/(n-1))
    * t_{n-1, 1-alpha/2}), which undoes the bootstrap's narrowness at small n (Hesterberg, The American
    Statistician 2015); at n = 582 the interval is the percentile one widened by 0.2%."""
    from scipy.special import stdtrit  # Student t quantile (scipy.stats.t.ppf) without scipy.stats

    n = np.maximum(np.asarray(n, dtype=np.float64), 2.0)
    return _ndtr(-np.sqrt(n / (n - 1)) * stdtrit(n - 1, 1 - (1 - confidence) / 2))


def t_bounds(values: np.ndarray, resampler: Resampler, *, mask: np.ndarray | None = None,
             confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``values`` (rows, n; NaN = no value), the Student t interval of its mean, laid out as the
    resampler resamples: mean +- t_{df, 1 - alpha/2} * se. Without strata se = sd / sqrt(n) and df = n - 1; with
    fixed strata (stratified resampling) the stratified se, sqrt(sum_h (n_h / n)^2 * s_h^2 / n_h) over the
    strata h with their own sd s_h, and df = n - (strata with values). NaN bounds where it is not defined:
    two-level resampling (whose spread comes from the clusters, not the probes), or df < 1."""
    from scipy.special import stdtrit

    x, m = _masked(values, mask, resampler.n)
    rows = x.shape[0]
    nan = np.full(rows, np.nan)
    if resampler.stratified and resampler.clusters == "random":
        return nan, nan.copy()
    codes = resampler.strata if resampler.stratified else np.zeros(resampler.n, dtype=np.int64)
    onehot = np.zeros((resampler.n, int(codes.max()) + 1))  # type: ignore[union-attr]
    onehot[np.arange(resampler.n), codes] = 1.0
    mf = m.astype(np.float64)
    cnt_h = mf @ onehot  # (rows, strata)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_h = (x * mf) @ onehot / cnt_h
        dev = np.where(m, x - np.nan_to_num(mean_h)[:, codes], 0.0)  # two passes: deviations from each mean
        var_h = np.where(cnt_h > 1, (dev * dev) @ onehot / (cnt_h - 1), 0.0)
        cnt = cnt_h.sum(1)
        est = (x * mf).sum(1) / cnt
        se = np.sqrt((var_h * cnt_h).sum(1)) / cnt  # sum_h (n_h / n)^2 s_h^2 / n_h = sum_h n_h s_h^2 / n^2
        df = cnt - (cnt_h > 0).sum(1)
        half = np.where(df >= 1, stdtrit(np.maximum(df, 1.0), 1 - (1 - confidence) / 2), np.nan) * se
    return est - half, est + half


def bootstrap_intervals(values: np.ndarray, resampler: Resampler, *, mask: np.ndarray | None = None,
                        confidence: float = CONFIDENCE,
                        method: Literal["bca", "expanded-percentile", "expanded-percentile-t", "percentile"] = "bca"
                        ) -> list[Interval]:
    """One bootstrap interval per row of ``values`` (rows, n; NaN = no value) from the shared resamples (see
    the module doc for constant rows): BCa (percentile where BCa is undefined), the expanded percentile interval
    (:func:`expanded_tail`), the expanded percentile interval widened on each side to the Student t interval
    (:func:`t_bounds`; for paired differences; the plain expanded percentile where t is not defined) or the plain
    percentile interval."""
    x, m = _masked(values, mask, resampler.n)
    cnt = m.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        est = (x * m).sum(1) / cnt
    out: list[Interval | None] = [None] * x.shape[0]
    varied = []
    for r in range(x.shape[0]):
        if cnt[r] == 0:
            out[r] = Interval(None, None, None, 0, "empty", confidence)
            continue
        vals = x[r][m[r]]
        if np.all(vals == vals[0]):
            out[r] = _constant(float(vals[0]), int(cnt[r]), confidence)
        else:
            varied.append(r)
    if varied:
        boot = resampler.means(x[varied], m[varied])
        if method == "bca":
            lo_l, hi_l, ok = bca_levels(boot, est[varied], x[varied], m[varied], confidence)
        elif method in ("expanded-percentile", "expanded-percentile-t"):
            lo_l = expanded_tail(cnt[varied], confidence)
            hi_l = 1 - lo_l
            ok = np.ones(len(varied), dtype=bool)
        elif method == "percentile":
            a = 1 - confidence
            lo_l = np.full(len(varied), a / 2)
            hi_l = np.full(len(varied), 1 - a / 2)
            ok = np.zeros(len(varied), dtype=bool)
        else:
            raise ValueError(f"method = {method!r}: bca, expanded-percentile, expanded-percentile-t or percentile")
        srt = np.sort(boot, axis=0)
        lo = sorted_quantiles(srt, lo_l)
        hi = sorted_quantiles(srt, hi_l)
        names = [method if method != "bca" else ("bca" if k else "percentile") for k in ok]
        if method == "expanded-percentile-t":
            t_lo, t_hi = t_bounds(x[varied], resampler, mask=m[varied], confidence=confidence)
            has_t = np.isfinite(t_lo) & np.isfinite(t_hi)
            lo = np.where(has_t, np.fmin(lo, t_lo), lo)
            hi = np.where(has_t, np.fmax(hi, t_hi), hi)
            names = [n if h else "expanded-percentile" for n, h in zip(names, has_t, strict=True)]
        for j, r in enumerate(varied):
            name = names[j]
            out[r] = Interval(float(est[r]), float(min(lo[j], est[r])), float(max(hi[j], est[r])), int(cnt[r]),
                              name, confidence)
    return [i for i in out if i is not None]


def _constant(value: float, n: int, confidence: float) -> Interval:
    if value in (0.0, 1.0):
        return clopper_pearson(int(value) * n, n, confidence)
    return Interval(value, value, value, n, "constant", confidence)


def row_intervals(values: np.ndarray, kind: Literal["binary", "mean"], resampler: Resampler | None = None, *,
                  confidence: float = CONFIDENCE) -> list[Interval]:
    """The interval of every row of one metric: ``binary`` (0/1 outcomes) by :func:`proportion_interval`,
    ``mean`` by :func:`bootstrap_intervals` over ``resampler`` (required then)."""
    x = np.atleast_2d(np.asarray(values, dtype=np.float64))
    if kind == "binary":
        out = []
        for row in x:
            v = row[~np.isnan(row)]
            if np.any((v != 0) & (v != 1)):
                raise ValueError("a binary metric holds a value other than 0 and 1")
            out.append(proportion_interval(int(v.sum()), len(v), confidence))
        return out
    if kind != "mean":
        raise ValueError(f"kind = {kind!r}: 'binary' or 'mean'")
    if resampler is None:
        raise ValueError("a bootstrap interval needs the shared resampler")
    return bootstrap_intervals(x, resampler, confidence=confidence)
