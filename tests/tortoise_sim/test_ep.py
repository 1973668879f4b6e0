"""Pure EP engine and graph rules (spec §9.1-§9.6), no database."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tortoise_sim.ep import (
    Claim,
    EdgeRow,
    Factor,
    FactorGraph,
    GraphSnapshot,
    PointRow,
    gauss_jacobi_nodes,
    run_ep,
)


def acceptance_graph() -> FactorGraph:
    return FactorGraph(
        claims={"A": Claim("A", (10, 1), (10, 1)), "B": Claim("B", None, (1, 1)), "C": Claim("C", (5, 1), (5, 1))},
        factors=[Factor("O1", "IMPL", 1.0, "bidirectional", ["A", "B"]),
                 Factor("O2", "NAND", 8.0, "bidirectional", ["B", "C"])],
    )


def acceptance_snapshot(**kw: object) -> GraphSnapshot:
    pts = [
        PointRow("A", status="live", point_kind="statement", baseline_set=True, ep_alpha=10.0, ep_beta=1.0),
        PointRow("B", status="live", point_kind="statement"),
        PointRow("C", status="live", point_kind="statement", baseline_set=True, ep_alpha=5.0, ep_beta=1.0),
        PointRow("O1", is_operator=True, op_type="IMPL", direction="bidirectional", status=None),
        PointRow("O2", is_operator=True, op_type="NAND", direction="bidirectional", status=None),
    ]
    edges = [EdgeRow("IMPL", "O1", "A", idx=0), EdgeRow("IMPL", "O1", "B", idx=1),
             EdgeRow("NAND", "O2", "B", idx=0), EdgeRow("NAND", "O2", "C", idx=1)]
    return GraphSnapshot(pts, edges, **kw)  # type: ignore[arg-type]


def test_acceptance_14_1_pure_engine() -> None:
    res = run_ep(acceptance_graph())
    assert (res.iterations, res.converged) == (35, True)
    means = {c: round(res.mean(c), 6) for c in "ABC"}
    assert means == {"A": 0.897152, "B": 0.254643, "C": 0.778180}
    post = {c: (round(a, 4), round(b, 4)) for c, (a, b) in res.beliefs.items()}
    assert post == {"A": (9.1303, 1.0467), "B": (0.5462, 1.5987), "C": (3.5164, 1.0023)}


def test_acceptance_14_1_through_snapshot_loader() -> None:
    lg = acceptance_snapshot().load(["O1", "O2"], max_hops=2)
    assert lg.affected == {"A", "B", "C"}
    assert sorted((f.key, f.kind, f.weight, f.inputs[0]) for f in lg.fg.factors) == [
        ("O1", "IMPL", 1.0, "A"), ("O2", "NAND", 8.0, "B")]
    res = run_ep(lg.fg)
    ref = run_ep(acceptance_graph())
    assert res.beliefs == ref.beliefs and res.iterations == 35


def test_batched_quadrature_is_bit_identical() -> None:
    rng = np.random.default_rng(3)
    ids = [f"c{i}" for i in range(12)]
    claims = {c: Claim(c, (float(rng.uniform(1, 9)), float(rng.uniform(1, 4))) if i % 3 else None, (1.0, 1.0))
              for i, c in enumerate(ids)}
    factors = []
    for k in range(10):
        n = 2 if k % 3 else 4
        ins = [str(x) for x in rng.choice(ids, size=n, replace=False)]
        factors.append(Factor(f"f{k:02d}", "IMPL" if k % 2 else "NAND", float(rng.uniform(0.5, 8)),
                              "unidirectional" if k % 4 == 1 else "bidirectional", ins))
    fg = FactorGraph(claims, factors)
    a, b = run_ep(fg, batch=True, engine="reference"), run_ep(fg, batch=False)  # reference engine batching
    assert a.beliefs == b.beliefs and a.msgs == b.msgs and a.iterations == b.iterations


def test_gauss_jacobi_nodes_halved_not_normalised() -> None:
    x, w = gauss_jacobi_nodes(1.0, 1.0)
    assert math.isclose(w.sum(), 1.0)  # Legendre weights sum to 2, halved -> 1 = B(1,1)
    x, w = gauss_jacobi_nodes(10.0, 1.0)
    assert math.isclose(w.sum(), 2.0 ** 9 * (1 / 10), rel_tol=1e-9)  # 2^(a+b-2) B(a,b), not 1
    assert np.all((x > 0) & (x < 1))


def test_warm_start_from_persisted_messages_converges_faster() -> None:
    """TOR-16 at engine level: reuse the messages of a converged run."""
    first = run_ep(acceptance_graph())
    fg = acceptance_graph()
    for c, cl in fg.claims.items():
        cl.init = first.beliefs[c] if cl.prior is None else cl.init
    fg.msgs = dict(first.msgs)
    second = run_ep(fg)
    assert second.converged and second.iterations < first.iterations
    assert max(abs(second.mean(c) - first.mean(c)) for c in "ABC") < 1e-3


def test_censoring_skips_settled_factors() -> None:
    fg = acceptance_graph()
    fg.claims["D"] = Claim("D", (3, 1), (3, 1))
    fg.claims["E"] = Claim("E", (2, 1), (2, 1))
    fg.factors.append(Factor("O3", "IMPL", 1.0, "bidirectional", ["D", "E"]))
    plain = run_ep(fg)
    cens = run_ep(fg, warm_start=True)
    assert cens.warm_skipped > 0 and plain.warm_skipped == 0
    assert max(abs(cens.mean(c) - plain.mean(c)) for c in plain.beliefs) < 0.02


def test_unidirectional_binary_source_keeps_its_stored_message() -> None:
    fg = acceptance_graph()
    fg.factors[1].direction = "unidirectional"
    fg.msgs[("O2", "B")] = (0.25, -0.5)
    res = run_ep(fg)
    assert res.msgs[("O2", "B")] == (0.25, -0.5)
    assert res.msgs[("O2", "C")] != (0.0, 0.0)


def test_unidirectional_direct_edge_back_message_only_in_cavity() -> None:
    claims = {"S": Claim("S", (4, 1), (4, 1)), "T": Claim("T", (4, 1), (4, 1))}
    key = "direct:NAND:S:T"
    base = FactorGraph(dict(claims), [Factor(key, "NAND", 8.0, "unidirectional", ["S", "T"])])
    with_back = FactorGraph(dict(claims), [Factor(key, "NAND", 8.0, "unidirectional", ["S", "T"])],
                            back_cavity={(key, "S"): (2.0, 0.0)})
    a, b = run_ep(base), run_ep(with_back)
    assert (key, "S") not in a.msgs and (key, "S") not in b.msgs
    assert a.beliefs["S"] == b.beliefs["S"] == (4.0, 1.0)  # the source's posterior ignores the edge entirely
    assert a.beliefs["T"] != b.beliefs["T"]  # but its stored back message shaped the source cavity


def test_nary_star_scaling_and_source_reset() -> None:
    claims = {c: Claim(c, (3, 1), (3, 1)) for c in "SXYZ"}
    uni = FactorGraph(dict(claims), [Factor("op", "IMPL", 1.0, "unidirectional", ["S", "X", "Y", "Z"])],
                      msgs={("op", "S"): (5.0, 5.0)})
    res = run_ep(uni)
    assert res.msgs[("op", "S")] == (0.0, 0.0)
    bi = run_ep(FactorGraph(dict(claims), [Factor("op", "NAND", 8.0, "bidirectional", ["S", "X", "Y", "Z"])]))
    # symmetric clique (every claim gets 3 pair messages x 2/(n(n-1))): identical beliefs up to rounding
    for c in "SYZ":
        assert bi.beliefs[c] == pytest.approx(bi.beliefs["X"], rel=1e-9)
    assert bi.mean("X") < 0.75  # pushed down from the prior mean by the NAND


def test_stale_messages_enter_the_posterior() -> None:
    fg = FactorGraph({"B": Claim("B", None, (1, 1))}, [], stale={"B": (0.5, 2.0)})
    res = run_ep(fg)
    assert res.beliefs["B"] == (1.5, 3.0) and res.iterations == 2 and res.converged


def test_degenerate_prior_at_floor_is_finite() -> None:
    fg = acceptance_graph()
    fg.claims["A"] = Claim("A", (0.01, 0.01), (0.01, 0.01))
    res = run_ep(fg)
    assert all(math.isfinite(a) and math.isfinite(b) and a >= 0.01 and b >= 0.01 for a, b in res.beliefs.values())


@pytest.mark.parametrize("bad", [
    lambda fg: setattr(fg.claims["A"], "prior", (float("nan"), 1.0)),
    lambda fg: setattr(fg.claims["B"], "init", (float("inf"), 1.0)),
    lambda fg: fg.msgs.__setitem__(("O1", "A"), (float("nan"), 0.0)),
    lambda fg: fg.factors.append(Factor("self", "IMPL", 1.0, "bidirectional", ["A", "A"])),
    lambda fg: fg.factors.append(Factor("one", "IMPL", 1.0, "bidirectional", ["A"])),
    lambda fg: fg.factors.append(Factor("ghost", "NAND", 8.0, "bidirectional", ["A", "Q"])),
    lambda fg: setattr(fg.factors[0], "kind", "supports"),
])
def test_bad_input_raises_value_error(bad: object) -> None:
    fg = acceptance_graph()
    bad(fg)  # type: ignore[operator]
    with pytest.raises(ValueError):
        run_ep(fg)


def test_max_iter_reports_not_converged() -> None:
    res = run_ep(acceptance_graph(), max_iter=5)
    assert (res.iterations, res.converged) == (5, False)
    with pytest.raises(ValueError):
        run_ep(acceptance_graph(), max_iter=0)


# -- graph rules ----------------------------------------------------------------------------------------------------

def test_liveness_drafts_and_terminal_claims() -> None:
    snap = acceptance_snapshot()
    snap.points["C"].status = "retracted"
    lg = snap.load(["O1", "O2"])
    assert lg.affected == {"A", "B"}
    assert [f.key for f in lg.fg.factors] == ["O1"]  # O2 lost C: single live input -> skipped
    assert "operator_skipped_inputs:O2" in lg.warnings
    snap2 = acceptance_snapshot(exclude_terminal=False)
    snap2.points["C"].status = "retracted"
    lg2 = snap2.load(["O1", "O2"])
    assert lg2.affected == {"A", "B", "C"} and lg2.fg.claims["C"].prior is None  # uniform: no evidence
    snap3 = acceptance_snapshot()
    snap3.points["O2"].status = "draft"
    assert [f.key for f in snap3.load(["O1", "O2"]).fg.factors] == ["O1"]


def test_stale_sum_from_deactivated_operator() -> None:
    """TOR-29 mechanism: O2's stored message to B survives O2's deactivation."""
    snap = acceptance_snapshot()
    for e in snap.edges:
        if e.src == "O2":
            e.msg = (0.3, 1.7)
    snap.points["C"].status = "retracted"
    lg = snap.load(["B"])
    assert lg.fg.stale["B"] == (0.3, 1.7)


def test_operator_weights() -> None:
    snap = acceptance_snapshot()
    snap.points["O3"] = PointRow("O3", is_operator=True, op_type="NAND", direction="bidirectional", status="live")
    snap.edges += [EdgeRow("NAND", "O3", "O1", idx=0), EdgeRow("NAND", "O3", "C", idx=1)]
    snap = GraphSnapshot(snap.points.values(), snap.edges)
    assert snap.operator_weight("O1") == 1.0 and snap.operator_weight("O2") == 8.0
    assert snap.operator_weight("O3") == 10.0  # 8 x 2 = 16 clamped to 10
    lg = snap.load(["O3"])
    assert "O1" in lg.affected  # operator-targets-operator: O1 is a variable


def test_direct_edges_self_edge_and_defaults() -> None:
    pts = [PointRow(c, status="live") for c in "PQ"]
    edges = [EdgeRow("NAND", "P", "Q", direction=None), EdgeRow("IMPL", "P", "P")]
    lg = GraphSnapshot(pts, edges).load(["P"])
    assert [(f.key, f.weight, f.direction) for f in lg.fg.factors] == [("direct:NAND:P:Q", 8.0, "bidirectional")]
    assert "self_edge_skipped:IMPL:P" in lg.warnings


def test_affected_set_hops_and_boundary() -> None:
    pts = [PointRow(c, status="live") for c in "ABCDE"]
    edges = [EdgeRow("IMPL", "A", "B"), EdgeRow("IMPL", "B", "C"), EdgeRow("IMPL", "C", "D"), EdgeRow("IMPL", "D", "E")]
    snap = GraphSnapshot(pts, edges)
    assert snap.affected_set(["A"], 2)[0] == {"A", "B", "C"}
    assert snap.affected_set(["A"], None)[0] == set("ABCDE")
    assert snap.affected_set(["A"], 0)[0] == {"A"}
    lg = snap.load(["A"], 1)
    assert lg.fg.claims["C"].boundary and not lg.fg.claims["B"].boundary
    res = run_ep(lg.fg)
    assert "C" not in res.beliefs and "C" in res.boundary_beliefs


def test_closure_guard_truncates_large_graphs() -> None:
    n = 600
    pts = [PointRow(f"c{i:04d}", status="live") for i in range(n)]
    edges = [EdgeRow("IMPL", f"c{i:04d}", f"c{i + 1:04d}") for i in range(n - 1)]
    hub = [EdgeRow("NAND", "c0000", f"c{i:04d}") for i in range(2, 260)]
    cset, truncated = GraphSnapshot(pts, edges + hub).affected_set(["c0000"], None)
    assert truncated and len(cset) < n


def test_selector_directions() -> None:
    pts = [PointRow(c, status="live") for c in "ABCD"]
    pts.append(PointRow("OP", is_operator=True, op_type="IMPL", direction="bidirectional", status="live"))
    pts.append(PointRow("DR", is_operator=True, op_type="IMPL", direction="bidirectional", status="draft"))
    edges = [EdgeRow("IMPL", "B", "A", direction="unidirectional"), EdgeRow("NAND", "C", "A"),
             EdgeRow("IMPL", "OP", "A", idx=0), EdgeRow("IMPL", "OP", "D", idx=1),
             EdgeRow("IMPL", "DR", "A", idx=0), EdgeRow("IMPL", "DR", "B", idx=1)]
    snap = GraphSnapshot(pts, edges)
    ops, direct = snap.select_operators(["A"], 2, 200)
    assert ops == ["OP"]
    assert [(e.type, e.src, e.tgt) for e in direct] == [("NAND", "C", "A")]  # unidirectional IMPL not walked back
    ops_b, direct_b = snap.select_operators(["B"], 2, 200)
    assert ("IMPL", "B", "A") in [(e.type, e.src, e.tgt) for e in direct_b] and ops_b == ["OP"]
    assert snap.select_operators(["A"], 2, 0)[0] == []
