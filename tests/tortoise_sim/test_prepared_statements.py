"""The store's prepared-statement cache (``tortoise_sim.connection``) changes nothing but the time: captures,
operators, commits, searches and the LongMemEval arm write the same graph and feed and deliver the same texts with
the cache as with a fresh preparation per statement; a schema change and a failing statement behave as before."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.tortoise_sim.simkit import make_sim
from tests.tortoise_sim.test_priors import _dump, _session
from tests.tortoise_sim.test_search_cache import _text
from tortoise_sim.search import search_points
from tortoise_sim.store import KEYED_MAX


def _sequence(prepared: bool) -> tuple[list, dict, list, int]:
    rng = random.Random(5)
    sim = make_sim(require_calibration=False)
    sim.store.prepared_statements = prepared
    made = [sim.create_point("statement", _text(rng), status="live") for _ in range(10)]
    stored = [r["content"] for r in made]
    sim.create_operator("IMPL", made[0]["id"], [made[1]["id"], made[2]["id"]])
    resp: list = []
    for i in range(6):
        resp.append(_session(sim, rng, i, stored))
        if i % 2 == 1:
            stored.append(sim.create_point("decision", _text(rng))["content"])
            sim.store.mark_dirty([made[1]["id"], made[3]["id"]])
        resp.append(search_points(sim.store, _text(rng), 5, cached=False)[0])
    resp.append(sim.commit_payload({"session_id": "commit", "points": [{"content": stored[0]},
                                                                       {"content": "a brand new point"}]}))
    long = [{"role": "user", "content": f"decision: {_text(rng)} {k}"} for k in range(KEYED_MAX + 3)]
    resp.append(sim.capture_session(long, session_id="long"))
    resp.append(sim.capture_session(long[:3], session_id="long"))
    resp.append(sim.dream())
    return resp, _dump(sim.store), sorted(sim.store.dirty_roots), sim.store.conn.prepared_hits


def test_captures_write_the_same_graph_feed_and_responses_with_and_without_the_cache():
    on, off = _sequence(True), _sequence(False)
    assert on[3] > 100 and off[3] == 0  # the cache answered most statements; without it none
    assert on[:3] == off[:3]


def test_a_schema_change_empties_the_cache_and_later_reads_see_it():
    for prepared in (True, False):
        sim = make_sim()
        store = sim.store
        store.prepared_statements = prepared
        store.execute("CREATE (t:Tag {name: $n})", {"n": "a"})
        read = "MATCH (t:Tag {name: $n}) RETURN t"
        assert store.query(read, {"n": "a"}) == [{"t": {"name": "a"}}]
        store.execute("ALTER TABLE Tag ADD colour STRING")
        store.execute("MATCH (t:Tag {name: $n}) SET t.colour = $c", {"n": "a", "c": "red"})
        assert store.query(read, {"n": "a"}) == [{"t": {"name": "a", "colour": "red"}}], prepared


def test_a_failing_statement_fails_as_before_and_is_not_kept():
    messages = []
    for prepared in (True, False):
        sim = make_sim()
        sim.store.prepared_statements = prepared
        for _ in range(2):
            with pytest.raises(RuntimeError) as exc:
                sim.store.query("MATCH (n:NoSuchTable {id: $id}) RETURN n", {"id": "x"})
            messages.append(str(exc.value))
        assert "MATCH (n:NoSuchTable {id: $id}) RETURN n" not in sim.store.conn._prepared
    assert len(set(messages)) == 1, messages


def test_the_longmemeval_arm_stores_and_delivers_the_same_with_and_without_the_cache(tmp_path: Path):
    from benchmarks.worlds import longmemeval as gen
    from harness.workloads.base import ArmContext
    from harness.workloads.lme_workload import to_conversation
    from harness.workloads.longmemeval import iter_questions
    from harness.workloads.tortoise_arm import PrecomputedEncoder, TortoiseArm
    from tortoise_sim.embed import HashingEncoder

    data = tmp_path / "lme.json"
    gen.write_file(data, 2, seed=3, sessions=8)
    got = {}
    for prepared in (True, False):
        out = []
        for q in iter_questions(data):
            conv = to_conversation(q)
            arm = TortoiseArm(ArmContext(workdir=tmp_path / f"w{prepared}{q.index}", workload="longmemeval"))
            arm.encoder = PrecomputedEncoder(HashingEncoder())
            arm.t.store.encoder = arm.encoder
            arm.t.store.prepared_statements = prepared
            arm.ingest(conv)
            delivered = {p.index: {r: (d.text, sorted(d.dia_ids)) for r, d in arm.deliver(p).items()}
                         for p in conv.probes}
            out.append((delivered, sorted(arm.stored()), _dump(arm.t.store), arm.t.store.conn.prepared_hits > 0))
            arm.close()
        got[prepared] = out
    assert all(x[3] for x in got[True]) and not any(x[3] for x in got[False])
    assert [x[:3] for x in got[True]] == [x[:3] for x in got[False]]
