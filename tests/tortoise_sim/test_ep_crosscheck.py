"""Independent cross-check of the EP engine against exact marginals (issue 6).

Exact reference: the same model p(x) ∝ Π_c Beta(x_c; prior_c) · Π_f ψ_f(x) (§9.2 potentials, uniform prior for
claims without evidence) integrated by brute force on a tensor-product Gauss-Legendre grid over the unit cube
(120 nodes per axis). The integrand is a smooth polynomial times an exponential of a quadratic, so the grid is
converged to ~1e-14 (checked below against 80 nodes); it shares no code with the engine (no Jacobi nodes, no
moment matching, no messages).

EP is an approximation, and the reference engine adds a deliberate IMPL message boost (§9.4 step 6) that moves its
fixed point away from the model's marginals. So:
* tree-shaped graphs, plain EP (`impl_boost=False`): |EP mean - exact mean| <= TREE_TOL (0.01) for every claim
  (measured when written: <= 1.5e-3 on the named trees, worst 5.5e-3 over 12 seeded random 3-claim trees with
  weights up to 8; EP on a tree is not exact because each message is projected onto a Beta);
* tree-shaped NAND-only graphs, faithful engine (the boost does not apply): same tolerance;
* loopy graphs and the faithful boosted engine on IMPL trees: the error is recorded (printed with -s and kept
  as a loose sanity bound), not asserted tight. Measured when written: plain EP on a NAND triangle 1.1e-3, on a
  mixed triangle 1.5e-3; faithful engine on §14.1 6.0e-2 (B 0.2546 vs exact 0.1945), single IMPL 4.3e-2.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import roots_legendre

from tortoise_sim.ep import Claim, Factor, FactorGraph, factor_pairs, run_ep

TREE_TOL = 1e-2
LOOPY_BOUND = 0.1


def exact_means(claims: dict[str, Claim], factors: list[Factor], n: int = 120) -> dict[str, float]:
    ids = list(claims)
    d = len(ids)
    u, w = roots_legendre(n)
    x, w = (u + 1.0) / 2.0, w / 2.0
    grids = np.meshgrid(*([x] * d), indexing="ij")
    weights = np.ones([n] * d)
    for i in range(d):
        shape = [1] * d
        shape[i] = n
        weights = weights * w.reshape(shape)
    dens = np.ones([n] * d)
    for i, c in enumerate(ids):
        a, b = claims[c].prior or (1.0, 1.0)
        dens = dens * grids[i] ** (a - 1.0) * (1.0 - grids[i]) ** (b - 1.0)
    for f in factors:
        for s, t in factor_pairs(f):
            xs, xt = grids[ids.index(s)], grids[ids.index(t)]
            dens = dens * (np.exp(-f.weight * xs * xt) if f.kind == "NAND" else np.exp(-f.weight * (xs - xt) ** 2))
    z = (weights * dens).sum()
    return {c: float((weights * dens * grids[i]).sum() / z) for i, c in enumerate(ids)}


def _cl(cid: str, prior: tuple[float, float] | None) -> Claim:
    return Claim(cid, prior, prior or (1.0, 1.0))


def _f(key: str, kind: str, w: float, ins: list[str]) -> Factor:
    return Factor(key, kind, w, "bidirectional", ins)


TREES = {
    "acceptance-14.1": ({"A": (10, 1), "B": None, "C": (5, 1)},
                        [_f("O1", "IMPL", 1.0, ["A", "B"]), _f("O2", "NAND", 8.0, ["B", "C"])]),
    "nand-chain": ({"A": (10, 1), "B": (2, 2), "C": (5, 1)},
                   [_f("O1", "NAND", 8.0, ["A", "B"]), _f("O2", "NAND", 8.0, ["B", "C"])]),
    "impl-chain": ({"A": (10, 1), "B": None, "C": (1, 3)},
                   [_f("O1", "IMPL", 1.0, ["A", "B"]), _f("O2", "IMPL", 1.0, ["B", "C"])]),
    "single-nand": ({"A": (3, 1), "B": (10, 1)}, [_f("O1", "NAND", 8.0, ["A", "B"])]),
    "single-impl": ({"A": (3, 1), "B": (1, 4)}, [_f("O1", "IMPL", 2.0, ["A", "B"])]),
    "nand-star": ({"A": (6, 2), "B": (3, 1), "C": (2, 3)},
                  [_f("O1", "NAND", 4.0, ["A", "B"]), _f("O2", "NAND", 4.0, ["A", "C"])]),
}
LOOPY = {
    "triangle-nand": ({"A": (4, 1), "B": (3, 1), "C": (5, 2)},
                      [_f("O1", "NAND", 8.0, ["A", "B"]), _f("O2", "NAND", 8.0, ["B", "C"]),
                       _f("O3", "NAND", 8.0, ["A", "C"])]),
    "triangle-mixed": ({"A": (10, 1), "B": None, "C": (5, 1)},
                       [_f("O1", "IMPL", 1.0, ["A", "B"]), _f("O2", "NAND", 8.0, ["B", "C"]),
                        _f("O3", "IMPL", 1.0, ["A", "C"])]),
}


def _graph(spec: tuple[dict, list[Factor]]) -> tuple[dict[str, Claim], list[Factor]]:
    priors, factors = spec
    return {c: _cl(c, p) for c, p in priors.items()}, factors


def _err(claims: dict[str, Claim], factors: list[Factor], **kw: object) -> tuple[float, dict[str, float]]:
    res = run_ep(FactorGraph(claims, factors), **kw)  # type: ignore[arg-type]
    assert res.converged
    ex = exact_means(claims, factors)
    return max(abs(res.mean(c) - ex[c]) for c in claims), ex


def test_grid_is_converged() -> None:
    claims, factors = _graph(TREES["acceptance-14.1"])
    a, b = exact_means(claims, factors, 120), exact_means(claims, factors, 80)
    assert max(abs(a[c] - b[c]) for c in a) < 1e-10


@pytest.mark.parametrize("name", sorted(TREES))
def test_plain_ep_matches_exact_marginals_on_trees(name: str) -> None:
    claims, factors = _graph(TREES[name])
    err, _ = _err(claims, factors, impl_boost=False)
    print(f"{name}: plain EP max |mean error| = {err:.2e}")
    assert err <= TREE_TOL


@pytest.mark.parametrize("name", ["nand-chain", "single-nand", "nand-star"])
def test_faithful_engine_matches_exact_on_nand_trees(name: str) -> None:
    claims, factors = _graph(TREES[name])
    err, _ = _err(claims, factors)
    assert err <= TREE_TOL


def test_random_trees_plain_ep() -> None:
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(12):
        priors = {c: (None if rng.random() < 0.3 else (float(rng.uniform(1, 10)), float(rng.uniform(1, 4))))
                  for c in "ABC"}
        hub = str(rng.choice(list("ABC")))
        leaves = [c for c in "ABC" if c != hub]
        factors = [_f(f"O{i}", str(rng.choice(["IMPL", "NAND"])), float(rng.uniform(0.5, 8.0)), [hub, leaf])
                   for i, leaf in enumerate(leaves)]
        err, _ = _err({c: _cl(c, p) for c, p in priors.items()}, factors, impl_boost=False)
        worst = max(worst, err)
    print(f"random 3-claim trees: worst plain-EP error {worst:.2e}")
    assert worst <= TREE_TOL


@pytest.mark.parametrize("name", sorted(LOOPY))
def test_loopy_graphs_error_recorded(name: str) -> None:
    claims, factors = _graph(LOOPY[name])
    plain, _ = _err(claims, factors, impl_boost=False)
    faithful, _ = _err(claims, factors)
    print(f"{name}: plain EP error {plain:.2e}, faithful (boosted) error {faithful:.2e}")
    assert plain < LOOPY_BOUND and faithful < LOOPY_BOUND


def test_boost_moves_faithful_engine_off_the_exact_marginal() -> None:
    """The recorded deviation: on §14.1 the faithful engine's B differs from the exact marginal by > 0.05."""
    claims, factors = _graph(TREES["acceptance-14.1"])
    err, ex = _err(claims, factors)
    print(f"14.1 faithful error {err:.3f}; exact means {ex}")
    assert 0.05 < err < LOOPY_BOUND
