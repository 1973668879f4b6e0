"""The fused EP engine (the default) against the batched engine it replaced, which stays `engine="batched"`.

Agreement is bit for bit: beliefs, boundary beliefs and messages as float arrays compared with `np.array_equal`
(never allclose), iteration, convergence and censoring counts with `==`; on seeded random graphs (n-ary factors,
both directions, direct unidirectional edges with back messages, stale sums, boundary claims) and on the
`benchmarks.ep_scaling` graphs of several sizes and seeds, with and without censoring. The pieces the fused engine
changes (Jacobi polynomial recurrences, deduplicated rules, one exponential per node pair) are checked against
the code they replace on their own too.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.special import eval_jacobi

from benchmarks.ep_engine import factor_graph, identical, result_arrays
from tests.tortoise_sim.test_ep_batched import random_graph
from tortoise_sim import ep, ep_fused
from tortoise_sim.ep import gauss_jacobi_batch, tilted_moments
from tortoise_sim.ep_fused import gauss_jacobi_rules, jacobi_coefficients, jacobi_eval, tilted_moments_fused


def assert_bitwise(a: ep.EPResult, b: ep.EPResult) -> None:
    assert (a.iterations, a.converged, a.warm_skipped) == (b.iterations, b.converged, b.warm_skipped)
    assert (sorted(a.beliefs), sorted(a.boundary_beliefs), sorted(a.msgs)) == (
        sorted(b.beliefs), sorted(b.boundary_beliefs), sorted(b.msgs))
    xa, xb = result_arrays(a), result_arrays(b)
    for k in xa:
        assert np.array_equal(xa[k], xb[k], equal_nan=True), k
    assert identical(a, b)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 8, 12])
def test_jacobi_recurrence_equals_scipy_eval_jacobi_bitwise(n: int) -> None:
    rng = np.random.default_rng(n)
    m = 3000
    a = (10 ** rng.uniform(-2, 3.3, m) - 1.0)[:, None]
    b = (10 ** rng.uniform(-2, 3.3, m) - 1.0)[:, None]
    x = np.concatenate([rng.uniform(-1, 1, (m, 6)), rng.uniform(-3, 3, (m, 2))], axis=1)
    for aa, bb in ((a, b), (a + 1, b + 1), (b, a)):
        ref = eval_jacobi(np.array(n, dtype=np.int64), aa, bb, x)
        assert np.array_equal(jacobi_eval(n, aa, bb, x), ref, equal_nan=True)


@pytest.mark.parametrize("n", [2, 3, 8, 12])
def test_shared_recurrence_factors_equal_scipy_eval_jacobi_bitwise(n: int) -> None:
    """The factors formed once for degree n serve degree n-1 (their first n-2 steps), as `_rules_general` uses them."""
    rng = np.random.default_rng(100 + n)
    m = 2000
    a = (10 ** rng.uniform(-2, 3.3, m) - 1.0)[:, None]
    b = (10 ** rng.uniform(-2, 3.3, m) - 1.0)[:, None]
    x = rng.uniform(-1, 1, (m, 8))
    coef = jacobi_coefficients(n, a, b)
    for deg, c in ((n, coef), (n - 1, coef[:, : n - 2])):
        ref = eval_jacobi(np.array(deg, dtype=np.int64), a, b, x)
        assert np.array_equal(jacobi_eval(deg, a, b, x, c), ref, equal_nan=True)


@pytest.mark.parametrize("n", [8, 5, 3])
def test_deduplicated_rules_equal_the_batched_rules_bitwise(n: int) -> None:
    rng = np.random.default_rng(11 + n)
    alpha = np.concatenate([10 ** rng.uniform(-2, 3.3, 500), [1.0, 2.0, 5.0, 0.01, 0.01, 7.5]])
    beta = np.concatenate([10 ** rng.uniform(-2, 3.3, 500), [1.0, 2.0, 0.5, 0.01, 3.0, 7.5]])
    alpha = np.concatenate([alpha, alpha[:80], beta[:20]])  # duplicates, and alpha == beta rows
    beta = np.concatenate([beta, beta[:80], beta[:20]])
    x_ref, w_ref = gauss_jacobi_batch(alpha, beta, n)
    x, w = gauss_jacobi_rules(alpha, beta, n)
    assert np.array_equal(x, x_ref, equal_nan=True) and np.array_equal(w, w_ref, equal_nan=True)
    assert np.isfinite(x).all()


def test_one_exponential_tilted_moments_equal_the_batched_ones_bitwise() -> None:
    rng = np.random.default_rng(5)
    p = 700
    a, b = 10 ** rng.uniform(-2, 2, p), 10 ** rng.uniform(-2, 2, p)
    x1, w1 = gauss_jacobi_batch(a, b)
    x2, w2 = gauss_jacobi_batch(b[::-1].copy(), a)
    nand = rng.random(p) < 0.4
    weight = np.where(rng.random(p) < 0.3, 8.0, 10 ** rng.uniform(-1, 2.5, p))
    ref = tilted_moments(x1, w1, x2, w2, nand, weight)
    got = tilted_moments_fused(x1, w1, x2, w2, nand, weight)
    for r, g in zip(ref, got, strict=True):
        assert np.array_equal(r, g, equal_nan=True)


@pytest.mark.parametrize("seed", range(12))
def test_fused_equals_batched_on_random_graphs(seed: int) -> None:
    fg = random_graph(100 + seed)
    for warm in (False, True):
        assert_bitwise(ep.run_ep(fg, engine="batched", warm_start=warm), ep.run_ep(fg, warm_start=warm))
    no_boost = {"impl_boost": False, "max_iter": 12}
    assert_bitwise(ep.run_ep(fg, engine="batched", **no_boost), ep.run_ep(fg, engine="fused", **no_boost))


@pytest.mark.parametrize("n_factors, seed", [(100, 0), (100, 1), (300, 2), (1000, 0)])
def test_fused_equals_batched_on_ep_scaling_graphs(n_factors: int, seed: int) -> None:
    fg = factor_graph(n_factors, seed)
    assert len(fg.factors) > 0.8 * n_factors
    for warm in (False, True):
        before = ep.run_ep(fg, engine="batched", warm_start=warm)
        after = ep.run_ep(fg, engine="fused", warm_start=warm)
        assert_bitwise(before, after)
        assert before.iterations > 1


def test_the_comparison_sees_a_one_ulp_difference() -> None:
    fg = factor_graph(100, 0)
    res = ep.run_ep(fg)
    c = sorted(res.beliefs)[3]
    a, b = res.beliefs[c]
    nudged = dataclasses.replace(res, beliefs={**res.beliefs, c: (float(np.nextafter(a, np.inf)), b)})
    assert identical(res, res) and not identical(res, nudged)
    with pytest.raises(AssertionError):
        assert_bitwise(res, nudged)


def test_engine_names() -> None:
    assert ep.ENGINES == ("fused", "batched", "reference")
    with pytest.raises(ValueError, match="engine"):
        ep.run_ep(factor_graph(100, 0), engine="numba")


def test_threaded_eigenvalues_equal_one_call_per_row(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    diag, off = rng.uniform(-1, 1, (1500, 8)), rng.uniform(0.01, 0.6, (1500, 7))
    one = ep.tridiagonal_eigvals(diag, off)
    for threads in (2, 3):
        assert np.array_equal(ep_fused.eigenvalues(diag, off, threads), one)
    fg = factor_graph(300, 4)
    monkeypatch.setattr(ep_fused, "EIG_THREADS", 1)
    single = ep.run_ep(fg)
    monkeypatch.setattr(ep_fused, "EIG_THREADS", 2)
    assert_bitwise(single, ep.run_ep(fg))


def test_threaded_eigenvalues_work_in_a_forked_child() -> None:
    """The eigenvalue pool is per process: a child forked after the parent used it makes its own (a pool inherited
    across fork has no worker threads and would never run the child's rows)."""
    import multiprocessing as mp

    rng = np.random.default_rng(9)
    diag, off = rng.uniform(-1, 1, (600, 8)), rng.uniform(0.01, 0.6, (600, 7))
    expected = ep.tridiagonal_eigvals(diag, off)
    assert np.array_equal(ep_fused.eigenvalues(diag, off, 2), expected)  # the parent's pool exists now
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(ep_fused.eigenvalues, (diag, off, 2)).get(timeout=60)
    assert np.array_equal(got, expected)
