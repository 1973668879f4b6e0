"""Dream edge writes: the default delete-and-create write (`edge_write="rewrite"`) leaves the same store as the
previous in-place SET (`edge_write="update"`): every Point's EP columns, every edge with all its properties (the
ones a dream never writes included, duplicates and edges to Events too), the order a snapshot reads the edges
in, the feed, and the dream results; through both store I/O paths and two dreams in a row. The Kuzu failure that
made it the default is tested in tests/benchmarks/test_dream_abort.py (child processes)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import ep_scaling as es
from benchmarks.ep_engine import _store_state
from tortoise_sim import dream as dr
from tortoise_sim.config import SimConfig
from tortoise_sim.store import StepClock, TortoiseStore

N_FACTORS = 300  # IMPL rows above BULK_MIN_ROWS, NAND rows below: the bulk path writes both ways


def _store(n: int) -> TortoiseStore:
    """The ep_scaling graph, plus what it lacks: edge properties a dream never writes (label, confidence,
    batch_id, weight), direct claim -> claim edges, a duplicated edge, and an IMPL edge from an operator to an
    Event."""
    s = TortoiseStore(config=SimConfig(embedder="none"), clock=StepClock(), seed=0)
    es.bulk_load(s, es.generate(n, 0))
    s.execute("MATCH (o:Point)-[r:IMPL]->(x:Point) WHERE o.id IN ['op000003', 'op000010'] "
              "SET r.label = 'kept', r.confidence = 0.25, r.batch_id = 'b1', r.weight = 1.5")
    s.execute("MATCH (a:Point {id: 'c000001'}), (b:Point {id: 'c000002'}) "
              "CREATE (a)-[:IMPL {direction: 'bidirectional', weight: 2.0, label: 'direct'}]->(b)")
    s.execute("MATCH (a:Point {id: 'c000004'}), (b:Point {id: 'c000009'}) "
              "CREATE (a)-[:NAND {direction: 'unidirectional', weight: 0.5}]->(b), "
              "(a)-[:NAND {direction: 'unidirectional', weight: 0.5, batch_id: 'dup'}]->(b)")
    s.execute("CREATE (:Event {id: 'e1', name: 'event'})")
    s.execute("MATCH (o:Point {id: 'op000005'}), (e:Event {id: 'e1'}) CREATE (o)-[:IMPL {idx: 9, label: 'ev'}]->(e)")
    return s


def _all_edges(s: TortoiseStore) -> list[dict[str, Any]]:
    """Every IMPL/NAND edge with every property, in Kuzu's scan order (no ORDER BY)."""
    cols = [c for c, _ in dr._edge_columns()]
    return s.query("MATCH (a:Point)-[r:IMPL|NAND]->(b) RETURN a.id AS s, label(r) AS rel, b.id AS t, "
                   "label(b) AS tl, " + ", ".join(f"r.{c} AS {c}" for c in cols))


def _run(edge_write: str, store_io: str) -> tuple[Any, ...]:
    s = _store(N_FACTORS)
    claims = [r["id"] for r in s.query("MATCH (n:Point) WHERE n.is_operator = false RETURN n.id AS id")]
    results = [dr.dream(s, mode="local", budget=N_FACTORS, require_calibration=False, store_io=store_io,
                        edge_write=edge_write).as_dict()]
    s.mark_dirty(claims[::2])
    results.append(dr.dream(s, mode="local", budget=N_FACTORS, require_calibration=False, store_io=store_io,
                            edge_write=edge_write).as_dict())
    order = [(e.type, e.src, e.tgt, e.idx, e.direction, e.weight, e.msg, e.back_msg, e.tgt_is_event)
             for e in dr.snapshot(s).edges]
    out = (_store_state(s), _all_edges(s), order, results)
    s.close()
    return out


@pytest.mark.parametrize("store_io", ["bulk", "unwind"])
def test_rewrite_leaves_the_same_store_as_update(store_io: str) -> None:
    old, new = _run("update", store_io), _run("rewrite", store_io)
    state_old, edges_old, order_old, results_old = old
    state_new, edges_new, order_new, results_new = new
    assert results_new == results_old and results_old[1]["affected_claims"]
    assert state_new == state_old
    assert edges_new == edges_old
    assert order_new == order_old
    # the comparison covers the extras (the in-place path never writes them), and the dreams wrote messages
    assert sum(1 for e in edges_new if e["label"] == "kept" and e["confidence"] == 0.25 and e["batch_id"] == "b1"
               and e["weight"] == 1.5) >= 2
    assert [e["batch_id"] for e in edges_new if e["s"] == "c000004" and e["t"] == "c000009"] in ([None, "dup"],
                                                                                                 ["dup", None])
    assert [e for e in edges_new if e["tl"] == "Event"][0]["label"] == "ev"
    assert sum(1 for e in edges_new if e["msg_alpha"] is not None) > N_FACTORS


def test_unknown_edge_write_is_refused_before_anything_is_written() -> None:
    s = _store(20)
    before = _store_state(s)
    with pytest.raises(ValueError, match="edge_write"):
        dr.dream(s, mode="local", require_calibration=False, edge_write="inplace")
    assert _store_state(s) == before
    s.close()
