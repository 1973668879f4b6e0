from __future__ import annotations

import pytest

from tests.tortoise_sim.simkit import make_sim, t0
from tortoise_sim import (
    CheckpointValidationError,
    DuplicatePointId,
    FaultHooks,
    LifecycleError,
    QuotaError,
    SimConfig,
    StepClock,
    Tortoise,
    UnknownPoint,
)


def test_create_point_rules():
    sim = make_sim()
    with pytest.raises(ValueError):
        sim.create_point("decision", "x", sourcePath="/etc")
    with pytest.raises(TypeError):
        sim.create_point("decision", "x", context="y")
    p = sim.create_point("decision", "x", id="fixed'id", tags=["a", "b"], search_keys=["k1", "k2"], meta={"a": 1})
    assert p["search_keys"] == "k1 k2" and p["tags"] == ["a", "b"] and '"meta.a": 1' in p["extra_props"]
    with pytest.raises(DuplicatePointId):
        sim.create_point("decision", "y", id="fixed'id")
    assert sim.store.count("TAGGED") == 2
    again = sim.create_point_tool("decision", "x")  # MCP flavour dedups by hash + kind
    assert again["id"] == "fixed'id"
    other_kind = sim.create_point_tool("statement", "x")
    assert other_kind["id"] != "fixed'id"


def test_update_point_only_draft_to_live():
    sim = make_sim()
    p = sim.create_point("decision", "x")["id"]
    sim.update_point(p, status="live")
    with pytest.raises(LifecycleError):
        sim.update_point(p, status="draft")
    with pytest.raises(UnknownPoint):
        sim.update_point("missing", status="live")


def test_credibility_tiers_and_baseline_invalidates_all_messages():
    sim = make_sim()
    a = sim.create_point("statement", "a", credibility="T1")
    assert (a["ep_alpha"], a["ep_beta"], a["baseline_set"]) == (5.0, 1.0, True)
    b = sim.create_point("statement", "b", credibility="bogus")
    assert (b["ep_alpha"], b["ep_beta"]) == (1.0, 1.0)
    c = sim.create_point("statement", "c")["id"]
    op = sim.create_operator("IMPL", a["id"], [b["id"]])
    sim.store.set_edge_messages("IMPL", op, b["id"], msg=(1.0, 1.0))
    sim.set_point_baseline(c, 2, 1)
    assert all(r["msg_alpha"] is None for r in sim.store.operator_edge_rows())


def test_operator_promotes_source_only_and_direct_edge_merge():
    sim = make_sim()
    s = sim.create_point("statement", "s")["id"]
    t = sim.create_point("statement", "t")["id"]
    sim.create_operator("IMPL", s, [t])
    assert sim.get_point(s)["status"] == "live" and sim.get_point(t)["status"] == "draft"
    with pytest.raises(UnknownPoint):
        sim.create_operator("IMPL", s, ["nope"])
    u = sim.create_point("statement", "u")["id"]
    r1 = sim.create_direct_edge(u, t, "NAND")
    r2 = sim.create_direct_edge(u, t, "NAND", weight=3.0)
    assert r1["created"] and not r2["created"] and r1["direction"] == "unidirectional"
    edges = [e for e in sim.store.direct_edge_rows() if e["rel"] == "NAND"]
    assert len(edges) == 1 and edges[0]["weight"] == 3.0
    sim.retract_point(t)
    with pytest.raises(LifecycleError):
        sim.create_direct_edge(u, t, "IMPL")


def test_mitigation_idempotent():
    sim = make_sim()
    s = sim.create_point("statement", "s")["id"]
    t = sim.create_point("statement", "t")["id"]
    op = sim.create_operator("IMPL", s, [t])
    m1 = sim.mitigate_operator(op, "reason", 0.3)
    m2 = sim.mitigate_operator(op, "reason", 0.4)
    assert m1 == m2 and sim.get_point(m1)["mitigation_strength"] == 0.4
    assert sim.get_point(m1)["content"] == "[MITIGATION] reason" and sim.get_point(m1)["status"] is None


def test_checkpoint_quota_and_malformed():
    sim = make_sim()
    with pytest.raises(QuotaError):
        sim.checkpoint([{"content": str(i)} for i in range(501)])
    for bad in ("notalist", [1], [{"content": ""}], [{"content": "a", "wing": 3}], [{"content": None}]):
        before = sim.store.table_counts()
        with pytest.raises(CheckpointValidationError):
            sim.checkpoint(bad)
        assert sim.store.table_counts() == before


def test_retract_dry_run_and_cas_and_decay():
    sim = make_sim(terminal_decay=True)
    p = t0(sim, "decision", "d")
    sim.set_point_baseline(p, 10, 1)
    row = sim.retract_point(p)
    assert row["confidence"] == 0.5 and row["posterior_alpha"] == 1.0 and row["ep_alpha"] == 10.0
    ep_before = sim.store.ep_version()
    q = t0(sim, "decision", "e")
    epoch = sim.store.ep_version()
    sim.retract_point(q)
    assert sim.store.ep_version() == epoch > ep_before  # retract does not mark dirty


def test_supersede_guards():
    sim = make_sim()
    a = t0(sim, "decision", "a")
    with pytest.raises(LifecycleError) as e:
        sim.supersede_point(a, a)
    assert e.value.code == "same_point"
    with pytest.raises(LifecycleError) as e:
        sim.supersede_point(a, "missing")
    assert e.value.code == "not_found"


def test_delete_point_marks_co_inputs_and_clears_messages():
    sim = make_sim()
    a, b = t0(sim, "statement", "a"), t0(sim, "statement", "b")
    op = sim.create_operator("IMPL", a, [b])
    sim.store.set_edge_messages("IMPL", op, a, msg=(1.0, 2.0))
    sim.store.dirty_roots.clear()
    sim.delete_point(b)
    assert a in sim.store.dirty_roots and b not in sim.store.dirty_roots
    assert all(r["msg_alpha"] is None for r in sim.store.operator_edge_rows())
    assert [e["payload"]["id"] for e in sim.store.feed(["PointRetracted"])] == [b]


def test_invalidate_point():
    sim = make_sim()
    a, b = t0(sim, "statement", "a"), t0(sim, "statement", "b")
    sim.invalidate_point(a, b)
    row = sim.get_point(a)
    assert row["outdated"] is True and row["status"] == "live" and row["validTo"]
    assert sim.store.query("MATCH (n)-[:CORRECTS]->(o {id:$a}) RETURN n.id AS n", {"a": a})[0]["n"] == b


def test_checkpoint_precheck_runs_before_store_access(tmp_path):
    calls = []
    faults = FaultHooks(step=calls.append)
    sim = Tortoise(tmp_path / "x.kuzu", config=SimConfig(embedder="hashing"), clock=StepClock(), faults=faults)
    with pytest.raises(CheckpointValidationError):
        sim.checkpoint([{"content": "a"}, {"wing": "w"}])
    assert calls == []
