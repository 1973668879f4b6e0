"""Bulk dream write-back (issue 12 item 3): `TortoiseStore.emit_events` writes the same feed rows as one
`emit_event` per claim, and a dream pass leaves the same store either way."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tortoise_sim.test_dream import EP_COLS, build_14_1, make_store
from tortoise_sim import admission as adm
from tortoise_sim import dream as dr
from tortoise_sim.config import FaultHooks
from tortoise_sim.store import TortoiseStore


def _one_by_one(store: TortoiseStore) -> None:
    def emit_events(type_: str, payloads: list[dict[str, Any]]) -> None:
        for p in payloads:
            store.emit_event(type_, p)

    store.emit_events = emit_events  # type: ignore[method-assign]


def _dreamed(per_event: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    s = make_store()
    ids = build_14_1(s)
    extra = [adm.create_point(s, "statement", f"claim {i}", status="live")["id"] for i in range(4)]
    for i in range(3):
        adm.create_operator(s, "IMPL" if i % 2 else "NAND", extra[i], [extra[i + 1], ids["B"]])
    if per_event:
        _one_by_one(s)
    res = dr.dream(s, mode="full", require_calibration=False)
    assert res.events >= 7 and not s.event_failures
    pts = s.query("MATCH (n:Point) RETURN n.id AS id, " + ", ".join(f"n.{c} AS {c}" for c in EP_COLS)
                  + " ORDER BY id")
    return s.feed(), pts


def test_bulk_events_equal_one_event_per_claim() -> None:
    bulk_feed, bulk_pts = _dreamed(False)
    one_feed, one_pts = _dreamed(True)
    assert [e for e in bulk_feed if e["type"] == "ConfidenceChanged"]
    assert bulk_feed == one_feed and bulk_pts == one_pts


def test_bulk_events_fall_back_per_event_under_a_fault_hook() -> None:
    steps: list[str] = []
    s = TortoiseStore(config=make_store().cfg, faults=FaultHooks(step=steps.append))
    s.emit_events("ConfidenceChanged", [{"id": "a"}, {"id": "b"}, {"id": "c"}])
    assert steps.count("event.feed") == 3 and [e["payload"]["id"] for e in s.feed()] == ["a", "b", "c"]
    seqs = [e["seq"] for e in s.feed()]
    s.emit_events("ConfidenceChanged", [{"id": "d"}, {"id": "e"}])
    assert [e["seq"] for e in s.feed()] == seqs + [seqs[-1] + 1, seqs[-1] + 2]


def _scaling_store(n_factors: int, seed: int) -> TortoiseStore:
    from benchmarks import ep_scaling as es

    s = make_store()
    es.bulk_load(s, es.generate(n_factors, seed))
    return s


def test_bulk_store_io_leaves_the_same_store_as_unwind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 400-factor local dream (with `BULK_MIN_ROWS` lowered so that every statement of the bulk path writes with
    LOAD FROM and reads whole columns): the previous statements with the previous EP engine leave every Point,
    edge message and feed row exactly as the new defaults do."""
    from benchmarks.ep_engine import _store_state

    monkeypatch.setattr(dr, "BULK_MIN_ROWS", 16)

    states, loads = [], []
    for opts in ({"ep_engine": "batched", "store_io": "unwind"}, {}):
        s = _scaling_store(400, 3)
        calls: list[str] = []
        bulk = s.bulk_load

        def spy(cypher: str, table: Any, params: dict[str, Any] | None = None, _bulk: Any = bulk,
                _calls: list[str] = calls) -> list[dict[str, Any]]:
            _calls.append(cypher)
            return _bulk(cypher, table, params)

        s.bulk_load = spy  # type: ignore[method-assign]
        res = dr.dream(s, mode="local", budget=400, require_calibration=False, **opts)
        assert res.events > 300 and not s.event_failures
        states.append(_store_state(s))
        loads.append(calls)
    assert loads[0] == []  # the unwind path never bulk-loads
    assert [sum(f"[r:{rel}]" in c for c in loads[1]) for rel in ("IMPL", "NAND")] == [1, 1]
    assert sum("MATCH (n:Point {id: id})" in c for c in loads[1]) == 3  # plain and baseline claims, write-back
    (pts_u, edges_u, feed_u), (pts_b, edges_b, feed_b) = states
    assert any(p["c"] is not None for p in pts_b) and any(e["ma"] is not None for e in edges_b)
    assert pts_u == pts_b and edges_u == edges_b and feed_u == feed_b


def test_unknown_store_io_is_rejected() -> None:
    s = make_store()
    try:
        dr.dream(s, mode="local", store_io="copy")
    except ValueError as exc:
        assert "store_io" in str(exc)
    else:
        raise AssertionError("an unknown write path was accepted")


def _snap_rows(snap: Any) -> tuple[list[str], list[str]]:
    return sorted(repr(p) for p in snap.points.values()), sorted(repr(e) for e in snap.edges)


def test_arrow_snapshot_equals_the_row_by_row_snapshot() -> None:
    empty = make_store()
    assert _snap_rows(dr.snapshot(empty)) == _snap_rows(dr.snapshot(empty, store_io="unwind")) == ([], [])
    s = make_store()
    ids = build_14_1(s)
    extra = [adm.create_point(s, "statement", f"claim {i}", status="live")["id"] for i in range(4)]
    adm.create_operator(s, "NAND", extra[0], [extra[1], ids["B"]])
    s.execute("MATCH (a:Point {id: $a}), (b:Point {id: $b}) CREATE (a)-[:IMPL {direction: 'unidirectional', "
              "weight: 2.5, back_msg_alpha: 0.25}]->(b)", {"a": extra[2], "b": extra[3]})
    dr.dream(s, mode="full", require_calibration=False)
    bulk, rows = dr.snapshot(s), dr.snapshot(s, store_io="unwind")
    assert _snap_rows(bulk) == _snap_rows(rows)
    assert any(e.msg is not None for e in bulk.edges) and any(p.posterior_alpha is not None
                                                             for p in bulk.points.values())
    assert any(e.weight == 2.5 and e.back_msg == (0.25, 0.0) for e in bulk.edges)
