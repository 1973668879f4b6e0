"""Intervals of harness.stats: Wilson and Clopper-Pearson against their defining equations, the shared bootstrap
against scipy's own implementation, the resampling layouts (stratified, two-level) and the constant-row rules."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sst

from harness.stats import (
    Resampler,
    bootstrap_intervals,
    clopper_pearson,
    proportion_interval,
    row_intervals,
    wilson,
)
from harness.stats.intervals import expanded_tail, format_interval, t_bounds

Z = 1.959963984540054


@pytest.mark.parametrize("k,n", [(1, 10), (52, 100), (300, 582), (29, 30)])
def test_wilson_bounds_solve_the_score_equation(k, n):
    iv = wilson(k, n)
    p = k / n
    for bound in (iv.lo, iv.hi):  # the score test is exactly at its critical value on both bounds
        assert (p - bound) ** 2 == pytest.approx(Z * Z * bound * (1 - bound) / n, rel=1e-9)
    assert iv.lo < p < iv.hi and iv.method == "wilson"


@pytest.mark.parametrize("k,n", [(0, 30), (30, 30), (5, 30), (581, 582)])
def test_clopper_pearson_is_the_exact_binomial_interval(k, n):
    iv = clopper_pearson(k, n)
    if k < n:
        assert sst.binom.cdf(k, n, iv.hi) == pytest.approx(0.025, rel=1e-7)
    else:
        assert iv.hi == 1.0 and iv.lo == pytest.approx(0.025 ** (1 / n), rel=1e-12)
    if k > 0:
        assert sst.binom.sf(k - 1, n, iv.lo) == pytest.approx(0.025, rel=1e-7)
    else:
        assert iv.lo == 0.0 and iv.hi == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-12)


@given(st.integers(1, 700), st.data())
@settings(max_examples=200, deadline=None)
def test_proportion_interval_holds_its_estimate_and_is_never_a_point(n, data):
    k = data.draw(st.integers(0, n))
    iv = proportion_interval(k, n)
    assert 0.0 <= iv.lo <= iv.estimate <= iv.hi <= 1.0
    assert iv.hi - iv.lo > 0  # never [1.000, 1.000] or [0.000, 0.000]
    assert iv.method == ("clopper-pearson" if k in (0, n) else "wilson")


def test_all_ones_row_gets_clopper_pearson_not_a_point():
    (iv,) = row_intervals(np.ones((1, 582)), "binary")
    assert iv.method == "clopper-pearson" and iv.hi == 1.0 and iv.lo < 1.0
    assert iv.format() == f"1.000 [{0.025 ** (1 / 582):.3f}, 1.000]"
    (mean_iv,) = row_intervals(np.ones((1, 30)), "mean", Resampler(30))  # a [0, 1] mean constant at 1
    assert mean_iv.method == "clopper-pearson" and mean_iv.lo < 1.0
    (tok,) = row_intervals(np.full((1, 30), 8.0), "mean", Resampler(30))
    assert (tok.lo, tok.hi, tok.method) == (8.0, 8.0, "constant")


def test_binary_metric_refuses_other_values():
    with pytest.raises(ValueError, match="other than 0 and 1"):
        row_intervals(np.array([[0.0, 0.5, 1.0]]), "binary")


def test_format():
    assert format_interval(0.5590901, 0.5212, 0.5971) == "0.559 [0.521, 0.597]"
    assert format_interval(None, None, None) == "n/a"


def test_bootstrap_matches_scipy_on_the_same_data():
    """Our BCa and percentile intervals agree with scipy.stats.bootstrap's (different resamples: within their
    Monte Carlo error)."""
    rng = np.random.default_rng(1)
    x = rng.choice([0.0, 1 / 3, 0.5, 2 / 3, 1.0], p=[0.4, 0.05, 0.05, 0.05, 0.45], size=200)
    rs = Resampler(200, resamples=20_000, seed=3)
    for method, theirs in (("bca", "BCa"), ("percentile", "percentile")):
        (iv,) = bootstrap_intervals(x[None], rs, method=method)
        ref = sst.bootstrap((x,), np.mean, n_resamples=20_000, method=theirs, random_state=4).confidence_interval
        assert iv.method == method
        assert iv.lo == pytest.approx(ref.low, abs=0.006) and iv.hi == pytest.approx(ref.high, abs=0.006)


def test_shared_resamples_make_rows_independent_of_each_other_and_reruns_identical():
    rng = np.random.default_rng(2)
    x = rng.random((5, 120))
    strata = np.repeat(["a", "b", "c"], 40)
    all_rows = bootstrap_intervals(x, Resampler(120, strata))
    alone = bootstrap_intervals(x[2:3], Resampler(120, strata))
    a, b = all_rows[2], alone[0]
    assert (a.method, a.n) == (b.method, b.n)
    assert [a.estimate, a.lo, a.hi] == pytest.approx([b.estimate, b.lo, b.hi], rel=1e-12)  # BLAS blocking only
    assert bootstrap_intervals(x, Resampler(120, strata)) == all_rows


def test_stratified_resamples_keep_each_stratum_size():
    strata = np.repeat([0, 1, 2, 3], [152, 81, 152, 199])
    c = Resampler(584, strata, resamples=500).counts
    for s, size in enumerate([152, 81, 152, 199]):
        assert np.all(c[:, strata == s].sum(1) == size)


def test_two_level_resamples_draw_whole_strata_then_probes():
    strata = np.repeat([0, 1, 2, 3, 4], 20)
    c = Resampler(100, strata, resamples=2000, clusters="random").counts
    per = np.stack([c[:, strata == s].sum(1) for s in range(5)], axis=1)
    assert np.all(per % 20 == 0) and np.all(per.sum(1) == 100)  # each stratum drawn a whole number of times
    assert (per == 0).any()  # some resamples leave a stratum out entirely
    fixed = Resampler(100, strata, resamples=2000).counts
    x = np.repeat(np.arange(5.0), 20)[None]  # the strata differ, the probes within them do not
    assert bootstrap_intervals(x, Resampler(100, strata, resamples=2000))[0].hi == pytest.approx(2.0)
    assert np.all((fixed[:, strata == 0]).sum(1) == 20)
    two = bootstrap_intervals(x, Resampler(100, strata, resamples=2000, clusters="random"))[0]
    assert two.hi - two.lo > 1.0  # between-seed spread enters only when the seeds are resampled


def test_nulls_are_left_out_of_the_mean():
    x = np.array([[1.0, 0.0, np.nan, 1.0, 0.0, 1.0]])
    (iv,) = bootstrap_intervals(x, Resampler(6))
    assert iv.estimate == pytest.approx(0.6) and iv.n == 5


def test_bca_falls_back_to_percentile_where_undefined():
    (iv,) = bootstrap_intervals(np.array([[0.0, 1.0]]), Resampler(2))  # two values: no jackknife acceleration
    assert iv.method == "percentile"


def test_expanded_tail_matches_t_at_small_n_and_normal_at_large_n():
    assert expanded_tail(np.array([30.0]))[0] < 0.025
    assert sst.norm.ppf(expanded_tail(np.array([30.0]))[0]) == pytest.approx(
        -math.sqrt(30 / 29) * sst.t.ppf(0.975, 29))
    assert expanded_tail(np.array([100_000.0]))[0] == pytest.approx(0.025, abs=1e-4)


@given(st.lists(st.sampled_from([0.0, 1 / 3, 0.5, 2 / 3, 1.0]), min_size=3, max_size=40))
@settings(max_examples=60, deadline=None)
def test_bootstrap_interval_contains_its_estimate(values):
    x = np.asarray(values)[None]
    for method in ("bca", "expanded-percentile", "expanded-percentile-t", "percentile"):
        (iv,) = bootstrap_intervals(x, Resampler(len(values), resamples=500), method=method)
        assert iv.lo <= iv.estimate <= iv.hi


def test_t_bounds_are_student_t_and_stratified_where_the_resampling_is():
    rng = np.random.default_rng(0)
    x = rng.random((2, 40))
    x[1, 3] = np.nan
    lo, hi = t_bounds(x, Resampler(40))
    for r in range(2):
        v = x[r][~np.isnan(x[r])]
        assert (lo[r], hi[r]) == pytest.approx(sst.t.interval(0.95, len(v) - 1, v.mean(), sst.sem(v)))
    strata = np.repeat([0, 1, 2], [10, 10, 20])
    x[0, :10] += 3.0  # strata far apart: the pooled sd would be much larger than the stratified se
    (slo,), (shi,) = t_bounds(x[:1], Resampler(40, strata))
    parts = [x[0][strata == h] for h in range(3)]
    se = math.sqrt(sum((len(p) / 40) ** 2 * p.var(ddof=1) / len(p) for p in parts))
    assert (slo, shi) == pytest.approx((x[0].mean() - sst.t.ppf(0.975, 37) * se,
                                        x[0].mean() + sst.t.ppf(0.975, 37) * se))
    rlo, rhi = t_bounds(x[:1], Resampler(40, strata, clusters="random"))
    assert np.isnan(rlo).all() and np.isnan(rhi).all()  # two levels: no t interval


def test_expanded_percentile_t_takes_the_farther_bound_on_each_side():
    """A fixed-seed check of the construction on 30 paired differences, most of them ties."""
    rng = np.random.default_rng(5)
    d = np.where(rng.random((6, 30)) < 0.8, 0.0, rng.choice([-1.0, -0.5, 1 / 3, 0.5, 1.0], (6, 30)))
    rs = Resampler(30)
    exp = bootstrap_intervals(d, rs, method="expanded-percentile")
    got = bootstrap_intervals(d, rs, method="expanded-percentile-t")
    t_lo, t_hi = t_bounds(d, rs)
    for e, g, a, b in zip(exp, got, t_lo, t_hi, strict=True):
        assert (g.lo, g.hi) == pytest.approx((min(e.lo, a), max(e.hi, b)))
        assert g.method == "expanded-percentile-t" and g.estimate == e.estimate
    assert any(g.lo < e.lo for e, g in zip(exp, got, strict=True))  # t is the wider side somewhere here
    (two,) = bootstrap_intervals(d[:1], Resampler(30, np.repeat([0, 1], 15), clusters="random"),
                                 method="expanded-percentile-t")
    assert two.method == "expanded-percentile"
