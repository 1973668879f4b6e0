"""Property tests of the EP engine over random small factor graphs (hypothesis)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tortoise_sim.ep import MSG_CLIP, Claim, Factor, FactorGraph, run_ep

beta_param = st.floats(0.01, 30.0, allow_nan=False)


@st.composite
def graphs(draw: st.DrawFn) -> FactorGraph:
    n = draw(st.integers(2, 6))
    ids = [f"c{i}" for i in range(n)]
    claims = {}
    for c in ids:
        prior = draw(st.one_of(st.none(), st.tuples(beta_param, beta_param)))
        init = draw(st.tuples(beta_param, beta_param))
        claims[c] = Claim(c, prior, init, boundary=draw(st.booleans()) and draw(st.booleans()))
    factors = []
    for k in range(draw(st.integers(0, 6))):
        arity = draw(st.integers(2, min(4, n)))
        inputs = draw(st.permutations(ids))[:arity]
        factors.append(Factor(f"f{k}", draw(st.sampled_from(["IMPL", "NAND"])),
                              draw(st.floats(0.1, 10.0)), draw(st.sampled_from(["bidirectional", "unidirectional"])),
                              list(inputs)))
    msgs = {}
    for f in factors:
        for c in f.inputs:
            if draw(st.booleans()):
                msgs[(f.key, c)] = (draw(st.floats(-5, 5)), draw(st.floats(-5, 5)))
    stale = {c: (draw(st.floats(-2, 2)), draw(st.floats(-2, 2))) for c in ids if draw(st.booleans())}
    return FactorGraph(claims, factors, msgs, stale)


@settings(max_examples=40, deadline=None)
@given(graphs(), st.booleans())
def test_engine_invariants(fg: FactorGraph, warm: bool) -> None:
    res = run_ep(fg, warm_start=warm, max_iter=20, engine="reference")
    again = run_ep(fg, warm_start=warm, max_iter=20, batch=False)
    assert res.beliefs == again.beliefs and res.msgs == again.msgs  # deterministic, batch-independent
    assert 1 <= res.iterations <= 20
    assert set(res.beliefs) == {c for c, cl in fg.claims.items() if not cl.boundary}
    for a, b in list(res.beliefs.values()) + list(res.boundary_beliefs.values()):
        assert math.isfinite(a) and math.isfinite(b) and a >= 0.01 and b >= 0.01
    for m in res.msgs.values():
        assert all(math.isfinite(x) and abs(x) <= MSG_CLIP for x in m)
    for c, cl in fg.claims.items():
        if cl.boundary:
            assert res.boundary_beliefs[c] == (max(cl.init[0], 0.01), max(cl.init[1], 0.01))
    if res.converged:
        assert res.delta < 1e-4
