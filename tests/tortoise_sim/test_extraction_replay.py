"""Record/replay extraction: ReplayExtractor and RecordingExtractor through the real capture -> admission path."""

from __future__ import annotations

import json

import pytest

from harness.faults import FaultInjected, FaultPlan
from tests.tortoise_sim.simkit import make_sim
from tortoise_sim import MarkerExtractor
from tortoise_sim.extraction import (
    RecordedExtractionError,
    RecordedExtractions,
    RecordingExtractor,
    ReplayExtractor,
    load_recorded,
    turns_digest,
)
from tortoise_sim.text import pt_id

CONV = [{"role": "user", "content": "decision: use Kuzu for the graph\nentity: Kuzu"},
        {"role": "assistant", "content": "plan: pin kuzu 0.11\nhypothesis: the vector index is slow"},
        {"role": "user", "content": "impl: 1 -> 2"}]
PAYLOAD = {"entities": [{"name": "Kuzu", "kind": "core:tool"}],
           "points": [{"content": "Kuzu stores the graph", "pointKind": "observation", "source_turn_id": 1,
                       "about_entities": ["Kuzu"], "search_keys": ["kuzu", "graph"]},
                      {"content": "The store is embedded", "pointKind": "not-a-kind", "source_turn_id": 0}]}


def _points(sim):
    rows = sim.store.query("MATCH (p:Point) WHERE p.is_episodic = false AND p.is_operator = false "
                           "RETURN p.id AS id, p.content AS c, p.pointKind AS k, p.session_id AS s, "
                           "p.source_turn_id AS t, p.status AS st, p.extractedFrom AS x ORDER BY id")
    return [dict(r) for r in rows]


def test_replay_is_deterministic_and_never_mutated_by_admission():
    rep = ReplayExtractor({"s1": PAYLOAD})
    a = rep.extract(CONV, "s1")
    a["points"].clear()  # a caller mutating what it got ...
    b = rep.extract(CONV, "s1")
    assert len(b["points"]) == 2 and b == rep.extract(CONV, "s1")  # ... never changes the next replay
    runs = []
    for _ in range(2):
        sim = make_sim(extractor=ReplayExtractor({"s1": PAYLOAD}))
        res = sim.capture_session(CONV, "s1")
        runs.append((res["extracted"], res["warnings"], _points(sim)))
    assert runs[0] == runs[1] and runs[0][0] == 2


def test_replayed_points_go_through_the_real_admission_gates_and_writers():
    sim = make_sim(extractor=ReplayExtractor({"s1": PAYLOAD, "s2": PAYLOAD}))
    res = sim.capture_session(CONV, "s1")
    assert res["ok"] and res["extraction_mode"] == "replay:recorded"
    assert "point_kind_repaired:not-a-kind" in res["warnings"]  # gate 1 ran on the recorded payload
    row = sim.get_point(pt_id("Kuzu stores the graph"))
    assert row["pointKind"] == "observation" and row["session_id"] == "s1" and row["source_turn_id"] == 1
    assert row["extractedFrom"] == "session:s1" and row["status"] == "live"  # promoted by capture (§3.9)
    assert sim.store.query("MATCH (s:Session {id:'s1'})-[:CONTAINS]->(p:Point {id:$id}) RETURN p.id AS id",
                           {"id": row["id"]})
    assert sim.get_point("s1_t2")["content"] == "[user] impl: 1 -> 2"  # turns are written as ever
    again = sim.capture_session(CONV, "s2")  # same facts in a later session: consolidation NOOP (gate 3)
    assert again["extracted"] == 0 and any(w.startswith("consolidated_noop:") for w in again["warnings"])


def test_missing_session_is_a_failed_extraction_with_turns_kept():
    sim = make_sim(extractor=ReplayExtractor({"s1": PAYLOAD}))
    res = sim.capture_session(CONV, "other")
    assert res["extraction_mode"] == "error" and not res["ok"]
    assert "no recorded extraction for session 'other'" in res["errors"][0]
    assert sim.get_point("other_t0") is not None
    empty = make_sim(extractor=ReplayExtractor({}, on_missing="empty")).capture_session(CONV, "other")
    assert empty["ok"] and empty["extracted"] == 0


def test_record_then_replay_reproduces_the_run(tmp_path):
    rec = RecordingExtractor(MarkerExtractor())
    live = make_sim(extractor=rec)
    live_res = live.capture_session(CONV, "s1")
    path = rec.save(tmp_path / "rec.json")
    assert rec.route == "scripted" and live_res["extraction_mode"] == "scripted"
    loaded = load_recorded(path)
    assert loaded.route == "scripted" and loaded.sessions["s1"].turns_sha256 == turns_digest(CONV)
    replay = make_sim(extractor=ReplayExtractor.from_file(path))
    res = replay.capture_session(CONV, "s1")
    assert res["extraction_mode"] == "replay:scripted"
    assert _points(replay) == _points(live) and len(res["operators"]) == len(live_res["operators"]) == 1
    changed = [dict(CONV[0]), CONV[1], CONV[2]]
    changed[0]["content"] += " (edited)"
    bad = make_sim(extractor=ReplayExtractor(loaded)).capture_session(changed, "s1")
    assert bad["extraction_mode"] == "error" and "differ from the recorded" in bad["errors"][0]
    ok = make_sim(extractor=ReplayExtractor(loaded, check_turns=False)).capture_session(changed, "s1")
    assert ok["ok"] and ok["extracted"] == res["extracted"]


def test_recorder_never_changes_the_run():
    class Odd:
        route = "odd"

        def extract(self, turns, session_id, search=None):
            return {"points": [{"content": "x", "extra": {1, 2}}]}  # a set: not JSON

    rec = RecordingExtractor(Odd())
    out = rec.extract(CONV, "s1")
    assert out == {"points": [{"content": "x", "extra": {1, 2}}]}
    assert "s1" not in rec.sessions and "s1" in rec.unrecordable

    class Fails:
        route = "fails"

        def extract(self, turns, session_id, search=None):
            raise RuntimeError("model down")

    with pytest.raises(RuntimeError, match="model down"):
        RecordingExtractor(Fails()).extract(CONV, "s1")


def test_save_is_atomic_under_a_fault(tmp_path):
    rec = RecordingExtractor(MarkerExtractor())
    rec.extract(CONV, "s1")
    path = rec.save(tmp_path / "rec.json")
    before = path.read_bytes()
    rec.extract(CONV, "s2")
    plan = FaultPlan({"extraction.record": 1})
    with pytest.raises(FaultInjected):
        rec.save(path, fault_hook=plan)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["rec.json"]
    rec.save(path, fault_hook=FaultPlan())
    assert set(load_recorded(path).sessions) == {"s1", "s2"}


@pytest.mark.parametrize(("content", "fragment"), [
    ("not json", "not JSON (line 1"),
    ("[1, 2]", "expected a JSON object with 'sessions', got list"),
    ('{"sessions": {"s1": {"payload": {"points": [{"pointKind": "plan"}]}}}}',
     "sessions.s1.payload.points.0.content: Field required"),
    ('{"sessions": {"s1": {"payload": {"points": "x"}}}}', "sessions.s1.payload.points"),
    ('{"sessions": [], "extra": 1}', "sessions: Input should be a valid dictionary"),
    ('{"version": 2, "sessions": {}}', "version: Input should be 1"),
])
def test_bad_recorded_file_is_one_line_naming_the_file(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(RecordedExtractionError) as info:
        load_recorded(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: ") and fragment in msg and "\n" not in msg
    with pytest.raises(RecordedExtractionError, match="no such file"):
        load_recorded(tmp_path / "absent.json")


def test_recorded_shape_round_trips():
    rec = RecordedExtractions.model_validate({"route": "llm:x", "sessions": {"s1": {"payload": PAYLOAD}}})
    again = RecordedExtractions.model_validate(json.loads(rec.model_dump_json()))
    assert again == rec and again.sessions["s1"].payload.points[0].model_dump()["about_entities"] == ["Kuzu"]
