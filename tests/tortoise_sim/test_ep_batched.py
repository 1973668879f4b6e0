"""The batched EP engine against the reference engine (issue 12 item 3).

Two kinds of evidence:

* every graph the existing EP tests build (test_ep, test_ep_crosscheck, test_ep_properties, test_dream's pure
  14.1 graph) is run through both engines: the existing test functions are called with their module's `run_ep`
  replaced by a wrapper that runs both engines on the same arguments, compares them, and hands the batched result
  to the test (so the test's own assertions also hold for the batched engine);
* seeded random graphs (binary and n-ary IMPL/NAND, both directions, direct unidirectional edges with back
  messages, stored messages, stale sums, boundary claims), with and without censoring.

Agreement: beliefs, boundary beliefs and messages equal bit for bit (the issue asks for 1e-10; the batched rules
reproduce scipy's floating-point operations, so the engines agree exactly), iteration counts, convergence flags
and censoring counts equal.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.tortoise_sim import test_dream, test_ep, test_ep_crosscheck, test_ep_properties
from tortoise_sim import ep
from tortoise_sim.ep import Claim, EPResult, Factor, FactorGraph, gauss_jacobi_batch, gauss_jacobi_nodes


def assert_same(ref: EPResult, bat: EPResult) -> None:
    assert (ref.iterations, ref.converged, ref.warm_skipped) == (bat.iterations, bat.converged, bat.warm_skipped)
    for a, b in ((ref.beliefs, bat.beliefs), (ref.boundary_beliefs, bat.boundary_beliefs), (ref.msgs, bat.msgs)):
        assert set(a) == set(b)
        for k in a:
            assert a[k] == b[k], (k, a[k], b[k])


class _Both:
    """`run_ep` stand-in: runs the reference and the batched engine, asserts agreement, returns the batched one."""

    def __init__(self) -> None:
        self.compared = 0

    def __call__(self, fg: FactorGraph, **kw: Any) -> EPResult:
        if "engine" in kw or kw.get("batch") is False:
            return ep.run_ep(fg, **kw)
        ref = ep.run_ep(fg, engine="reference", **kw)
        bat = ep.run_ep(fg, engine="batched", **kw)
        assert_same(ref, bat)
        self.compared += 1
        return bat


def _calls(fn: Callable[..., Any]) -> list[dict[str, Any]]:
    """Keyword sets for a test function: one empty call, or one per `pytest.mark.parametrize` value."""
    marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
    if not marks:
        return [{}]
    names, values = marks[0].args[0], marks[0].args[1]
    names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    out = []
    for v in values:
        v = v.values if hasattr(v, "values") else v
        out.append(dict(zip(names, v if len(names) > 1 else [v], strict=True)))
    return out


def _pure_tests(mod: ModuleType) -> list[tuple[str, Callable[..., Any], dict[str, Any]]]:
    out = []
    for name, fn in inspect.getmembers(mod, inspect.isfunction):
        if not name.startswith("test_") or fn.__module__ != mod.__name__:
            continue
        params = set(inspect.signature(fn).parameters)
        calls = _calls(fn)
        if hasattr(fn, "hypothesis") or all(params <= set(c) for c in calls):
            out.extend((name, fn, c) for c in calls)
    return out


CASES = [(mod, name, fn, kw) for mod in (test_ep, test_ep_crosscheck, test_ep_properties)
         for name, fn, kw in _pure_tests(mod)]


def _case_ids(cases: list[tuple[ModuleType, str, Callable[..., Any], dict[str, Any]]]) -> list[str]:
    """Test ids that are the same in every process (pytest-xdist workers compare them): plain values are shown, any
    other value (a lambda, an object) by its position among the cases of the same test."""
    ids, seen = [], {}
    for m, n, _, k in cases:
        key = f"{m.__name__.split('.')[-1]}::{n}"
        plain = all(isinstance(v, str | int | float | bool | type(None)) for v in k.values())
        index = seen[key] = seen.get(key, -1) + 1
        ids.append(f"{key}{sorted(k.values())}" if plain else f"{key}[case{index}]")
    return ids


@pytest.mark.parametrize("mod, name, fn, kw", CASES, ids=_case_ids(CASES))
def test_existing_ep_tests_agree_under_both_engines(mod: ModuleType, name: str, fn: Callable[..., Any],
                                                    kw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    both = _Both()
    monkeypatch.setattr(mod, "run_ep", both)
    fn(**kw)
    if "run_ep(" in inspect.getsource(fn) and "engine=" not in inspect.getsource(fn) and "raises" not in name:
        assert both.compared > 0 or "bad_input" in name


def test_pure_14_1_graph_of_test_dream() -> None:
    both = _Both()
    res = both(test_dream.pure_14_1())
    assert res.iterations == 35 and both.compared == 1


def random_graph(seed: int) -> FactorGraph:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 40))
    ids = [f"c{i:03d}" for i in range(n)]
    claims: dict[str, Claim] = {}
    for c in ids:
        prior = None if rng.random() < 0.4 else (float(rng.uniform(0.2, 12)), float(rng.uniform(0.2, 12)))
        init = (float(rng.uniform(0.01, 15)), float(rng.uniform(0.01, 15)))
        claims[c] = Claim(c, prior, init, boundary=bool(rng.random() < 0.15))
    factors: list[Factor] = []
    msgs: dict[tuple[str, str], tuple[float, float]] = {}
    back: dict[tuple[str, str], tuple[float, float]] = {}
    for k in range(int(rng.integers(1, 2 * n))):
        arity = 2 if rng.random() < 0.7 else int(rng.integers(3, min(6, n) + 1))
        ins = [str(x) for x in rng.choice(ids, size=arity, replace=False)]
        kind = "IMPL" if rng.random() < 0.6 else "NAND"
        direction = "bidirectional" if rng.random() < 0.7 else "unidirectional"
        direct = arity == 2 and rng.random() < 0.4
        key = f"direct:{kind}:{ins[0]}:{ins[1]}" if direct else f"op{k:03d}"
        if any(f.key == key for f in factors):
            continue
        weight = float(rng.uniform(0.1, 10.0)) if rng.random() < 0.8 else 8.0
        factors.append(Factor(key, kind, weight, direction, ins))
        for c in ins:
            if rng.random() < 0.5:
                msgs[(key, c)] = (float(rng.uniform(-4, 4)), float(rng.uniform(-4, 4)))
        if direct and direction == "unidirectional" and rng.random() < 0.7:
            back[(key, ins[0])] = (float(rng.uniform(-2, 2)), float(rng.uniform(-2, 2)))
    stale = {c: (float(rng.uniform(-1, 1)), float(rng.uniform(-1, 1))) for c in ids if rng.random() < 0.2}
    return FactorGraph(claims, factors, msgs, stale, back)


@pytest.mark.parametrize("seed", range(16))
def test_batched_equals_reference_on_random_graphs(seed: int) -> None:
    fg = random_graph(seed)
    warm = bool(seed % 2)
    ref = ep.run_ep(fg, engine="reference", warm_start=warm)
    bat = ep.run_ep(fg, warm_start=warm)  # the default engine is the batched one
    assert_same(ref, bat)
    if seed % 4 == 0:
        no_boost = ep.run_ep(fg, engine="batched", impl_boost=False, max_iter=10)
        assert_same(ep.run_ep(fg, engine="reference", impl_boost=False, max_iter=10), no_boost)


def test_batched_rules_match_scipy_rules() -> None:
    rng = np.random.default_rng(7)
    alpha = np.concatenate([10 ** rng.uniform(-2, 3.3, 400), [1.0, 2.0, 5.0]])
    beta = np.concatenate([10 ** rng.uniform(-2, 3.3, 400), [1.0, 2.0, 0.5]])
    x, w = gauss_jacobi_batch(alpha, beta)
    cache: dict = {}
    x2, w2 = gauss_jacobi_batch(np.concatenate([alpha, alpha[:50]]), np.concatenate([beta, beta[:50]]), cache=cache)
    assert np.array_equal(x2[:-50], x) and np.array_equal(x2[-50:], x[:50]) and len(cache) == alpha.size
    for i in range(alpha.size):
        xr, wr = gauss_jacobi_nodes(float(alpha[i]), float(beta[i]))
        ok = np.isfinite(wr)
        assert np.array_equal(ok, np.isfinite(w[i]))
        assert np.array_equal(x[i], xr) and np.array_equal(w[i], wr, equal_nan=True)


def test_unknown_engine_is_rejected() -> None:
    with pytest.raises(ValueError, match="engine"):
        ep.run_ep(test_ep.acceptance_graph(), engine="fast")
