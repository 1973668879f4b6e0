from __future__ import annotations

import json

from tortoise_sim.config import FaultHooks, SimConfig
from tortoise_sim.store import StepClock, TortoiseStore


def _store(**kw):
    return TortoiseStore(config=SimConfig(embedder="hashing", **kw.pop("cfg", {})), clock=StepClock(), **kw)


def test_schema_and_singletons_and_reopen(tmp_path):
    path = tmp_path / "t.kuzu"
    s = TortoiseStore(path, config=SimConfig(embedder="none"), clock=StepClock())
    assert s.ep_version() == 0
    s.execute("CREATE (n:Point {id:$id, is_operator:false})", {"id": "x"})
    s.mark_dirty(["x"])
    s.close()
    s2 = TortoiseStore(path, config=SimConfig(embedder="none"), clock=StepClock())
    assert s2.ep_version() == 1 and s2.point_exists("x")
    assert s2.count("EpMeta") == 1 and s2.count("GraphEventMeta") == 1


def test_quoted_ids_are_parameters():
    s = _store()
    nasty = "a'}) DETACH DELETE n //"
    s.execute("CREATE (n:Point {id:$id, is_operator:false})", {"id": nasty})
    assert s.get_point(nasty)["id"] == nasty
    s.set_point_props(nasty, {"status": "live", "when": "today"})
    assert s.get_point(nasty)["when"] == "today"


def test_feed_seq_monotonic_and_journal(tmp_path):
    log = tmp_path / "j.jsonl"
    s = _store(cfg={"event_log_path": str(log)}, faults=FaultHooks(fail_graph_feed={"B"}, fail_journal={"C"}))
    for t in ["A", "B", "C", "D"]:
        s.emit_event(t, {"id": t})
    feed = s.feed()
    assert [r["type"] for r in feed] == ["A", "C", "D"]
    assert [r["seq"] for r in feed] == [1, 2, 3]
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["type"] for x in lines] == ["A", "B", "D"]


def test_mark_dirty_reaches_operator_co_inputs_and_invalidate():
    s = _store()
    for i in ["a", "b", "c"]:
        s.execute("CREATE (n:Point {id:$id, is_operator:false})", {"id": i})
    s.execute("CREATE (n:Point {id:'op', is_operator:true, op_type:'IMPL'})")
    for idx, i in enumerate(["a", "b"]):
        s.execute("MATCH (o:Point {id:'op'}),(x:Point {id:$i}) CREATE (o)-[:IMPL {idx:$k}]->(x)", {"i": i, "k": idx})
    s.set_edge_messages("IMPL", "op", "b", msg=(1.0, 2.0))
    e = s.mark_dirty(["a"])
    assert e == 1 and s.dirty_roots == {"a", "b"}
    assert s.get_point("b")["ep_dirty_at"] == 1 and s.get_point("c")["ep_dirty"] is None
    s.invalidate_messages(["a"])  # edges incident to a only
    assert [r["msg_alpha"] for r in s.operator_edge_rows() if r["input_id"] == "b"] == [1.0]
    s.invalidate_messages()
    assert all(r["msg_alpha"] is None for r in s.operator_edge_rows())


def test_transaction_rolls_back_on_error():
    s = _store()
    try:
        with s.transaction():
            s.execute("CREATE (n:Point {id:'z'})")
            s.execute("CREATE (n:Point {id:'z'})")
    except RuntimeError:
        pass
    assert not s.point_exists("z")


def test_presets():
    snap = SimConfig.preset("snapshot")
    assert snap.turn_writer == "snapshot" and not snap.capture_promotes and snap.spool_permanent == "quarantine"
    later = SimConfig.preset("later")
    assert later.terminal_decay and later.spool_permanent == "delete"
    assert SimConfig.preset("analysed") == SimConfig()


def test_scan_arrow_in_id_ranges_equals_one_statement():
    """``scan_arrow`` read in id ranges returns the table the single statement returns (rows, order, values)."""
    from tests.tortoise_sim.simkit import make_sim

    sim = make_sim()
    for i in range(23):
        sim.create_point("statement", f"point number {i} about {'kuzu' if i % 3 else 'arrow'}",
                         status="live" if i % 2 else "draft")
    store = sim.store
    where, returns = "n.content IS NOT NULL AND n.status = $st", "n.id AS id, n.content AS c, n.embedding AS e"
    whole = store.scan_arrow(where, returns, {"st": "live"}, chunk=None)
    assert whole.num_rows == 11
    for chunk in (1, 4, 11, 50):
        assert store.scan_arrow(where, returns, {"st": "live"}, chunk=chunk).to_pylist() == whole.to_pylist()
    assert store.scan_arrow("n.content IS NULL OR n.content = 'none'", "n.id AS id", chunk=2).num_rows == 0
