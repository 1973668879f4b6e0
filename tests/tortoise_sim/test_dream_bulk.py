"""Bulk dream write-back (issue 12 item 3): `TortoiseStore.emit_events` writes the same feed rows as one
`emit_event` per claim, and a dream pass leaves the same store either way."""

from __future__ import annotations

from typing import Any

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
