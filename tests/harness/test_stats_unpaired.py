"""Unpaired tests of harness.stats: Mann-Whitney's exact null against enumeration and published critical values,
Hodges-Lehmann and the order-statistic median interval, the two-sample and one-sample tests."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sst

from harness.stats import Interval, hodges_lehmann, median_interval, one_sample, two_sample, within_level
from harness.stats.unpaired import _mw_rank, mann_whitney_null


def test_mann_whitney_null_matches_enumeration():
    m, n = 3, 4
    counts = np.zeros(m * n + 1)
    for xs in itertools.combinations(range(m + n), m):  # positions of the x sample among the pooled ranks
        u = sum(1 for x in xs for y in set(range(m + n)) - set(xs) if x > y)
        counts[u] += 1
    assert mann_whitney_null(m, n) == pytest.approx(counts / counts.sum())
    assert mann_whitney_null(10, 10).sum() == pytest.approx(1.0)


@pytest.mark.parametrize("m,n,critical", [(5, 5, 2), (8, 8, 13), (10, 10, 23), (10, 12, 29)])
def test_mann_whitney_critical_values_of_the_published_table(m, n, critical):
    """Two-sided 5% critical values of U (reject when U <= critical): the interval uses the next order statistic."""
    assert _mw_rank(m, n, 0.95) == critical + 1


def test_hodges_lehmann_at_ten_and_ten():
    rng = np.random.default_rng(0)
    x, y = rng.lognormal(5, 0.3, 10) + 40, rng.lognormal(5, 0.3, 10)
    iv = hodges_lehmann(x, y)
    d = np.sort((x[:, None] - y[None, :]).ravel())
    assert iv.estimate == pytest.approx(np.median(d))
    assert (iv.lo, iv.hi) == (d[23], d[100 - 24])  # the 24th and 77th of the 100 ordered differences
    assert iv.method == "hodges-lehmann" and iv.lo <= iv.estimate <= iv.hi
    assert hodges_lehmann([1.0, 2.0], [3.0]).lo is None  # too few for any 95% interval


def test_hodges_lehmann_coverage_is_at_least_nominal():
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(400):
        x = rng.exponential(100, 10) + 30
        y = rng.exponential(100, 10)
        hits += hodges_lehmann(x, y).contains(30.0)
    assert hits / 400 >= 0.92  # exact level 95.7% at 10 and 10; 400 runs have an SE of about 1 point


def test_median_interval_order_statistics():
    iv = median_interval(np.arange(1.0, 11.0))
    assert (iv.lo, iv.hi, iv.estimate) == (2.0, 9.0, 5.5)
    assert median_interval([1.0, 2.0, 3.0]).lo is None


def test_two_sample_permutation_test():
    rng = np.random.default_rng(1)
    same = two_sample(rng.random(80), rng.random(90), permutations=1999)
    apart = two_sample(rng.random(80) + 0.3, rng.random(90), permutations=1999)
    assert same.p > 0.05 and apart.p == pytest.approx(1 / 2000)
    assert apart.estimate.lo <= apart.estimate.estimate <= apart.estimate.hi
    with pytest.raises(ValueError):
        two_sample([1.0], [1.0, 2.0])


def test_one_sample_binary_is_the_exact_binomial_test():
    x = np.r_[np.ones(24), np.zeros(6)]
    got = one_sample(x, 0.6, "binary")
    assert got.p == pytest.approx(sst.binomtest(24, 30, 0.6).pvalue) and got.estimate.method == "wilson"


def test_one_sample_mean_p_agrees_with_its_interval():
    rng = np.random.default_rng(2)
    x = rng.choice([0.0, 0.5, 1.0], p=[0.3, 0.1, 0.6], size=200)
    res = {t: one_sample(x, t, "mean") for t in (0.3, 0.55, 0.65, 0.8)}
    iv = res[0.3].estimate
    for t, r in res.items():
        assert (r.p < 0.05) == (not iv.contains(t)), (t, r.p, iv)


def test_one_sample_on_constant_values():
    ones = one_sample(np.ones(30), 0.8, "mean")
    assert ones.test == "exact binomial" and ones.p == pytest.approx(sst.binomtest(30, 30, 0.8).pvalue)
    flat = one_sample(np.full(30, 0.4), 0.8, "mean")
    assert flat.p == 1.0 and flat.estimate.method == "constant"


def test_a_level_passes_only_on_the_upper_bound():
    iv = Interval(250.0, 180.0, 320.0, 20, "hodges-lehmann")
    assert within_level(iv, 300.0) is False and within_level(iv, 320.0) is True
    assert within_level(Interval(250.0, None, None, 4, "hodges-lehmann"), 300.0) is None
