"""Paired comparisons of harness.stats: Holm against textbook examples, the randomization test against exact
enumeration, and the comparison record (difference, interval, wins/ties/losses, clusters, verdict)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.stats import (
    Resampler,
    cluster_differences,
    compare,
    detectable_difference,
    difference_intervals,
    holm,
    permutations_for,
    sign_flip_pvalues,
)


def test_holm_wikipedia_example():
    """The Holm-Bonferroni article's example: four hypotheses, p = 0.01, 0.04, 0.03, 0.005, alpha 0.05: the
    first and fourth are rejected, then 0.03 > 0.05 / 2 stops the procedure."""
    adj = holm([0.01, 0.04, 0.03, 0.005])
    assert adj == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert [a < 0.05 for a in adj] == [True, False, False, True]


def test_holm_matches_r_p_adjust():
    """R: p.adjust(c(0.01, 0.02, 0.03, 0.04, 0.05), "holm") is 0.05 0.08 0.09 0.09 0.09."""
    assert holm([0.01, 0.02, 0.03, 0.04, 0.05]) == pytest.approx([0.05, 0.08, 0.09, 0.09, 0.09])
    assert holm([]) == []
    with pytest.raises(ValueError):
        holm([0.5, 1.5])


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_holm_is_monotone_and_bounded(ps):
    adj = holm(ps)
    order = np.argsort(ps, kind="stable")
    ranked = [adj[i] for i in order]
    assert all(a <= b for a, b in itertools.pairwise(ranked))  # monotone in the raw p order
    assert all(p <= a <= 1 for p, a in zip(ps, adj, strict=True))
    assert min(adj) == pytest.approx(min(1.0, min(ps) * len(ps)))  # the first step is Bonferroni


def _exact_sign_flip_p(d):
    obs = abs(sum(d))
    hits = sum(abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= obs - 1e-12
               for signs in itertools.product((-1, 1), repeat=len(d)))
    return hits / 2 ** len(d)


@pytest.mark.parametrize("d", [[1, 1, 1, 0, 1, -1, 1, 1, 0.5, 1], [0.2, -0.1, 0.4, 0.3, -0.2, 0.1, 0.5, 0.3]])
def test_sign_flip_p_matches_exact_enumeration(d):
    exact = _exact_sign_flip_p(d)
    got = sign_flip_pvalues(np.array([d], dtype=float), permutations=199_999)[0]
    assert got == pytest.approx(exact, abs=0.004)  # Monte Carlo error of 200k flips


def test_sign_flip_p_is_one_for_ties_and_small_for_a_clear_difference():
    p = sign_flip_pvalues(np.vstack([np.zeros(50), np.ones(50), np.r_[np.ones(25), -np.ones(25)]]))
    assert p[0] == 1.0 and p[1] == pytest.approx(1 / 10_000) and p[2] == 1.0


@given(st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0, np.nan]), min_size=1, max_size=40))
@settings(max_examples=40, deadline=None)
def test_sign_flip_p_lies_in_zero_one(d):
    p = sign_flip_pvalues(np.array([d]), permutations=999)[0]
    assert 0 < p <= 1 and p >= 1 / 1000


def test_permutations_resolve_the_smallest_holm_threshold():
    assert permutations_for(1) == 9_999
    for family in (1, 12, 120, 400):
        m = permutations_for(family)
        assert 1 / (m + 1) <= 0.05 / family / 20


def test_detectable_difference_formula():
    d = np.array([1.0, -1.0] * 50)
    assert detectable_difference(d) == pytest.approx((1.959964 + 0.841621) * d.std(ddof=1) / 10, rel=1e-5)
    assert detectable_difference(np.array([1.0])) is None


def test_cluster_differences_count_agreement():
    d = np.array([1, 1, 0, -1, 1, 1, np.nan, 1.0])
    labels = ["a", "a", "b", "b", "c", "c", "d", "d"]
    cl, agree = cluster_differences(d, labels)
    assert [c["cluster"] for c in cl] == ["a", "b", "c", "d"]
    assert [c["diff"] for c in cl] == [1.0, -0.5, 1.0, 1.0] and agree == 3


def _rows(seed=0, n=120):
    rng = np.random.default_rng(seed)
    base = rng.random(n)
    return {"good": (base + 0.3 > rng.random(n)).astype(float), "bad": (base > rng.random(n) + 0.2).astype(float),
            "copy": (base + 0.3 > rng.random(n)).astype(float)}


def test_compare_reports_difference_interval_test_and_counts():
    rows = _rows()
    strata = np.repeat(["c1", "c2", "c3"], 40)
    res = compare({"m": rows}, [("good", "bad"), ("good", "good")], Resampler(120, strata))
    gb, same = res
    d = rows["good"] - rows["bad"]
    assert gb.diff.estimate == pytest.approx(d.mean()) and gb.n == 120
    assert gb.diff.lo <= gb.diff.estimate <= gb.diff.hi and gb.diff.method == "expanded-percentile-t"
    assert (gb.wins, gb.ties, gb.losses) == ((d > 0).sum(), (d == 0).sum(), (d < 0).sum())
    assert gb.p < 0.001 and gb.p_holm == pytest.approx(min(1, 2 * gb.p)) and gb.verdict() == "good > bad"
    assert len(gb.clusters) == 3 and gb.clusters_agree == 3
    assert same.p == 1.0 and same.verdict() == "inconclusive" and same.ties == 120
    u = 1 - 0.05 ** (1 / 120)  # all ties: symmetric about 0, never one-sided
    assert (same.diff.lo, same.diff.hi) == pytest.approx((-u, u)) and same.diff.method == "constant-bound"
    assert gb.family == 2 and gb.permutations == permutations_for(2)


def test_compare_swapping_the_sides_flips_the_verdict():
    rows = _rows(3)
    rs = Resampler(120)
    ab, ba = compare({"m": rows}, [("good", "bad"), ("bad", "good")], rs)
    assert ab.diff.estimate == pytest.approx(-ba.diff.estimate) and ab.p == ba.p
    assert ab.verdict() == "good > bad" and ba.verdict() == "bad < good"


def test_compare_holm_family_spans_metrics():
    rows = _rows(4)
    res = compare({"m1": rows, "m2": {k: 1 - v for k, v in rows.items()}}, [("good", "copy"), ("good", "bad")],
                  Resampler(120))
    assert len(res) == 4 and all(r.family == 4 for r in res)
    assert [r.p_holm for r in res] == pytest.approx(holm([r.p for r in res]))


def test_compare_uses_only_probes_both_rows_scored():
    a = np.array([1.0, 0.0, 1.0, np.nan, 1.0, 0.0])
    b = np.array([0.0, 0.0, 1.0, 1.0, np.nan, 1.0])
    (r,) = compare({"m": {"a": a, "b": b}}, [("a", "b")], Resampler(6))
    assert r.n == 4 and r.diff.estimate == pytest.approx(0.0) and (r.wins, r.ties, r.losses) == (1, 2, 1)


def test_a_difference_constant_on_every_probe_gets_the_bound_of_its_width():
    n = 30
    u = 1 - 0.05 ** (1 / n)
    d = np.vstack([np.zeros(n), np.ones(n), -np.ones(n), np.full(n, 0.5), np.full(n, 40.0)])
    ties, wins, losses, half, tokens = difference_intervals(d, Resampler(n), width=[1, 1, 1, 1, None])
    assert (ties.lo, ties.hi) == pytest.approx((-u, u))
    assert (wins.lo, wins.hi) == pytest.approx((1 - 2 * u, 1.0))
    assert (losses.lo, losses.hi) == pytest.approx((-1.0, -1 + 2 * u))
    assert (half.lo, half.hi) == pytest.approx((0.5 - 1.5 * u, 0.5 + 0.5 * u))
    assert (tokens.lo, tokens.hi, tokens.method) == (40.0, 40.0, "constant")
    assert {i.method for i in (ties, wins, losses, half)} == {"constant-bound"}
    with pytest.raises(ValueError):
        difference_intervals(d, Resampler(n), width=[1])


def test_compare_bounds_ties_only_for_values_in_zero_one():
    ties = np.zeros(20)
    (r01, rtok) = compare({"m": {"a": np.ones(20), "b": np.ones(20)}, "tok": {"a": ties + 50, "b": ties + 50}},
                          [("a", "b")], Resampler(20))
    assert r01.diff.method == "constant-bound" and r01.diff.lo < 0 < r01.diff.hi
    assert rtok.diff.method == "constant" and rtok.diff.lo == rtok.diff.hi == 0.0
