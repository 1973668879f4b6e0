"""Paired comparisons of rows measured on the same probes: the difference of two rows' means, its interval, a test.

For rows A and B and the probes both scored (their paired differences d = a - b):

- **mean difference** with a **paired bootstrap** 95% interval (:func:`difference_intervals`): the bootstrap of
  the mean of d over the same shared resamples as the rows' own intervals
  (:class:`~harness.stats.intervals.Resampler`; stratified within clusters, or two-level for seeds, when the
  resampler is), as the expanded percentile interval (:func:`~harness.stats.intervals.expanded_tail`) widened on
  either side to the Student t interval of the mean of d (:func:`~harness.stats.intervals.t_bounds`, with the
  stratified standard error when the resampling is stratified; two-level resampling keeps the expanded percentile
  alone). Why: on 30 probes whose differences are mostly ties, BCa, the plain and the expanded percentile
  interval and the t interval each under-cover in some simulated shape, the wider of the last two in none; at
  582 probes the two nearly coincide. A difference that is the same on every probe gets the *constant bound*
  (see :func:`difference_intervals`), never a one-point or one-sided interval. Unadjusted for multiplicity (a
  page says so).
- **two-sided paired randomization test**: under the null hypothesis that A and B are exchangeable on every
  probe, each d keeps its size and takes either sign; the p-value is (b + 1) / (m + 1) where b of m random sign
  flips give a |sum| at least the observed one (Smucker, Allan and Carterette, CIKM 2007: randomization, bootstrap
  and t tests agree on IR metrics; the sign and Wilcoxon tests should not be used). One sign matrix is shared by
  every pair of a call; m is large enough that the call's smallest Holm threshold is resolvable
  (:func:`permutations_for`).
- **Holm's step-down correction** (:func:`holm`) over every pair and metric of the call (its family).
- **wins / ties / losses**: probes where A scores more / the same / less than B.
- **per cluster** (conversation, or seed of a sweep): each cluster's mean difference and how many agree in sign
  with the overall one.
- **smallest detectable difference** at 80% power (:func:`detectable_difference`): (z_{1-alpha'/2} + z_{0.8}) *
  sd(d) / sqrt(n), the normal approximation of the test on these probes with the observed spread of d, at
  alpha' = alpha / (family size), the strictest Holm step (so it holds for every pair of the family).

A verdict (:meth:`PairResult.verdict`): ``A > B`` or ``A < B`` when the Holm-adjusted p < alpha, else
``inconclusive``: not significant, which is absence of evidence, not evidence of no difference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from harness.stats.intervals import CONFIDENCE, SEED, Interval, Resampler, bootstrap_intervals

ALPHA = 0.05
POWER = 0.80
MIN_PERMUTATIONS = 10_000
RESOLUTION = 20
"""m + 1 >= RESOLUTION * family / alpha: the smallest p-value, 1/(m + 1), is a twentieth of the strictest Holm
threshold alpha / family (and never fewer than :data:`MIN_PERMUTATIONS` - 1 flips)."""
_CHUNK = 4096


DIFFERENCE_METHOD = "expanded-percentile-t"
"""The bootstrap method of a paired difference's interval (see the module doc)."""


def difference_intervals(diffs: np.ndarray, resampler: Resampler, *, width: Sequence[float | None] | None = None,
                         confidence: float = CONFIDENCE) -> list[Interval]:
    """The interval of the mean of each row of paired differences ``diffs`` (pairs, n; NaN = not scored by both)
    over the shared resamples (:data:`DIFFERENCE_METHOD`).

    A row whose differences are all the same value c (all ties, or every probe won by the same margin) has no
    spread to resample. When its pair's values are known to lie in an interval of length ``width[row]`` (1 for
    every rate and recall, whose values lie in [0, 1]), every difference lies in [-w, w], so the share q of probes
    whose difference is not c bounds the mean: it lies in [c - q (w + c), c + q (w - c)]. q is bounded by the
    exact binomial (one-sided Clopper-Pearson) bound of 0 such probes in n, 1 - (1 - confidence)^(1/n) (about
    3 / n), which gives the ``constant-bound`` interval; at c = 0 it is symmetric, [-u w, u w]. Without a width
    the interval is the one point c, marked ``constant``."""
    d = np.atleast_2d(np.asarray(diffs, dtype=np.float64))
    widths = [None] * d.shape[0] if width is None else list(width)
    if len(widths) != d.shape[0]:
        raise ValueError(f"width: {len(widths)} values for {d.shape[0]} rows of differences")
    out = bootstrap_intervals(d, resampler, confidence=confidence, method=DIFFERENCE_METHOD)
    for r, iv in enumerate(out):
        if iv.method not in ("clopper-pearson", "constant"):
            continue
        c, n, w = float(iv.estimate), iv.n, widths[r]  # type: ignore[arg-type]
        if w is None:
            out[r] = Interval(c, c, c, n, "constant", confidence)
            continue
        u = 1 - (1 - confidence) ** (1 / n)
        out[r] = Interval(c, max(-w, c - u * (w + c)), min(w, c + u * (w - c)), n, "constant-bound", confidence)
    return out


def unit_width(*rows: np.ndarray) -> float | None:
    """1 when every value of the rows (NaN aside) lies in [0, 1] (rates, recalls, 0/1 outcomes), else None:
    the ``width`` of :func:`difference_intervals` for a pair of these rows."""
    v = np.concatenate([np.asarray(r, dtype=np.float64).ravel() for r in rows])
    v = v[~np.isnan(v)]
    return 1.0 if len(v) and bool(np.all((v >= 0) & (v <= 1))) else None


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: sort ascending, multiply the i-th smallest
    (1-based) by (K - i + 1), take the running maximum, cap at 1. Rejecting where the adjusted p < alpha is Holm's
    procedure at family-wise level alpha."""
    p = np.asarray(pvalues, dtype=np.float64)
    k = len(p)
    if k == 0:
        return []
    if np.any(np.isnan(p)) or np.any(p < 0) or np.any(p > 1):
        raise ValueError("p-values must lie in [0, 1]")
    order = np.argsort(p, kind="stable")
    adj = np.maximum.accumulate(np.minimum(1.0, p[order] * (k - np.arange(k))))
    out = np.empty(k)
    out[order] = adj
    return [float(v) for v in out]


def permutations_for(family: int, alpha: float = ALPHA) -> int:
    """Random sign flips for a family of ``family`` tests (see :data:`RESOLUTION`)."""
    return max(MIN_PERMUTATIONS, math.ceil(RESOLUTION * max(1, family) / alpha)) - 1


def sign_flip_pvalues(diffs: np.ndarray, *, permutations: int = MIN_PERMUTATIONS - 1, seed: int = SEED
                      ) -> np.ndarray:
    """Two-sided paired randomization p-values, one per row of ``diffs`` (pairs, n; NaN = not scored by both):
    (b + 1) / (m + 1), b = sign flips whose |sum of d| reaches the observed |sum| (ties count). The same flips
    (from ``seed``) serve every row."""
    d = np.atleast_2d(np.asarray(diffs, dtype=np.float64))
    d = np.where(np.isnan(d), 0.0, d)  # a probe not scored by both contributes nothing under any sign
    obs = np.abs(d.sum(1))
    tol = 1e-9 * np.maximum(1.0, np.abs(d).sum(1))
    rng = np.random.default_rng(seed)
    b = np.zeros(d.shape[0], dtype=np.int64)
    dt = d.T
    n = d.shape[1]
    done = 0
    while done < permutations:
        k = min(_CHUNK, permutations - done)
        bits = np.unpackbits(rng.integers(0, 256, size=(k, (n + 7) // 8), dtype=np.uint8), axis=1)[:, :n]
        signs = bits.astype(np.float64) * 2 - 1  # one random bit per sign
        b += (np.abs(signs @ dt) >= obs - tol).sum(0)
        done += k
    return (b + 1) / (permutations + 1)


def detectable_difference(diffs: np.ndarray, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The smallest true mean difference the two-sided test at level ``alpha`` detects with probability
    ``power`` on these probes: (z_{1-alpha/2} + z_power) * sd(d) / sqrt(n) (normal approximation, the observed sd
    of the paired differences). None with fewer than two differences; 0 when they are all equal."""
    from scipy.special import ndtri

    d = np.asarray(diffs, dtype=np.float64)
    d = d[~np.isnan(d)]
    if len(d) < 2:
        return None
    return float((ndtri(1 - alpha / 2) + ndtri(power)) * d.std(ddof=1) / math.sqrt(len(d)))


def cluster_differences(diffs: np.ndarray, strata: np.ndarray | Sequence[Any] | None
                        ) -> tuple[list[dict[str, Any]], int]:
    """Each cluster's mean difference (``cluster``, ``n``, ``diff``) and how many clusters have the sign of the
    overall mean difference (0 when that is 0)."""
    d = np.asarray(diffs, dtype=np.float64)
    if strata is None:
        return [], 0
    labels = np.asarray(strata)
    keep = ~np.isnan(d)
    total = float(d[keep].mean()) if keep.any() else 0.0
    out = []
    for lab in dict.fromkeys(labels[keep].tolist()):
        sel = keep & (labels == lab)
        out.append({"cluster": lab if isinstance(lab, str) else str(lab), "n": int(sel.sum()),
                    "diff": float(d[sel].mean())})
    agree = sum(1 for c in out if total != 0 and np.sign(c["diff"]) == np.sign(total))
    return out, agree


@dataclass
class PairResult:
    """One comparison of row ``a`` against row ``b`` on ``metric``: ``diff`` is mean(a - b) over the ``n``
    probes both scored, with its (unadjusted) interval; ``p`` the randomization p-value, ``p_holm`` adjusted over
    the call's family."""

    a: str
    b: str
    metric: str
    n: int
    mean_a: float | None
    mean_b: float | None
    diff: Interval
    p: float
    p_holm: float
    wins: int
    ties: int
    losses: int
    detectable: float | None
    family: int
    permutations: int
    clusters: list[dict[str, Any]] = field(default_factory=list)
    clusters_agree: int = 0

    def verdict(self, alpha: float = ALPHA) -> str:
        """``a > b`` / ``a < b`` (with the row names) when the Holm-adjusted p < alpha, else ``inconclusive``."""
        if self.p_holm < alpha and self.diff.estimate:
            return f"{self.a} > {self.b}" if self.diff.estimate > 0 else f"{self.a} < {self.b}"
        return "inconclusive"

    def to_dict(self, alpha: float = ALPHA) -> dict[str, Any]:
        out = asdict(self)
        out["diff"] = self.diff.to_dict()
        out["verdict"] = self.verdict(alpha)
        return out


def compare(values: Mapping[str, Mapping[str, np.ndarray]], pairs: Sequence[tuple[str, str]], resampler: Resampler,
            *, alpha: float = ALPHA, confidence: float = CONFIDENCE, permutations: int | None = None,
            seed: int = SEED) -> list[PairResult]:
    """Every pair on every metric: ``values[metric][row]`` is the row's per-probe values aligned with the
    resampler's probes (NaN = no value). The family of Holm's correction and of the detectable difference is
    every (pair, metric) of the call. Results are ordered metric by metric, pairs in the given order."""
    if not pairs:
        return []
    family = len(pairs) * len(values)
    m = permutations if permutations is not None else permutations_for(family, alpha)
    results: list[PairResult] = []
    all_diffs = {}
    for metric, rows in values.items():
        for a, b in pairs:
            for r in (a, b):
                if r not in rows:
                    raise KeyError(r)
        all_diffs[metric] = np.stack([np.asarray(rows[a], np.float64) - np.asarray(rows[b], np.float64)
                                      for a, b in pairs])
    pvals = sign_flip_pvalues(np.concatenate(list(all_diffs.values())), permutations=m, seed=seed)
    for mi, (metric, rows) in enumerate(values.items()):
        diffs = all_diffs[metric]
        intervals = difference_intervals(diffs, resampler, confidence=confidence,
                                         width=[unit_width(rows[a], rows[b]) for a, b in pairs])
        for j, (a, b) in enumerate(pairs):
            d = diffs[j]
            keep = ~np.isnan(d)
            xa = np.asarray(rows[a], np.float64)[keep]
            xb = np.asarray(rows[b], np.float64)[keep]
            cl, agree = cluster_differences(d, resampler.labels if resampler.stratified else None)
            results.append(PairResult(
                a=a, b=b, metric=metric, n=int(keep.sum()),
                mean_a=float(xa.mean()) if len(xa) else None, mean_b=float(xb.mean()) if len(xb) else None,
                diff=intervals[j], p=float(pvals[mi * len(pairs) + j]), p_holm=float("nan"),
                wins=int((d[keep] > 0).sum()), ties=int((d[keep] == 0).sum()), losses=int((d[keep] < 0).sum()),
                detectable=detectable_difference(d, alpha / family), family=family, permutations=m,
                clusters=cl, clusters_agree=agree))
    for r, adj in zip(results, holm([r.p for r in results]), strict=True):
        r.p_holm = adj
    return results
