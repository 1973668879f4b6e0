"""The Tortoise arm with LoCoMo's recorded LM facts replayed as extraction (rows tortoise-recorded-*)."""

from __future__ import annotations

import pytest
import torch

from harness.workloads.base import ArmContext
from harness.workloads.locomo import Observation, find_locomo_path, load_locomo
from harness.workloads.runner import run_conversation
from harness.workloads.tortoise_arm import TortoiseArm, TortoiseRecordedArm
from harness.workloads.tortoise_recorded import recorded_observations
from tests.harness.locomo_arms_fixture import ALL_IDS, tiny_conversation
from tortoise_sim.text import pt_id

torch.set_num_threads(1)

FACTS = [
    Observation(session=1, speaker="Alice", text="Alice adopted a golden retriever puppy called Biscuit.",
                ids=["D1:1"], evidence=["D1:1"]),
    # tagged with two turns, the later one first: the point is sourced to D1:3 (window index 2), credits both
    Observation(session=1, speaker="Bob", text="Bob plays the cello and his teacher praises his ear.",
                ids=["D1:3", "D1:2"], evidence=["D1:3", "D1:2"]),
    Observation(session=2, speaker="Bob", text="Bob's sister teaches chemistry in Lisbon.", ids=["D2:2", "D9:9"],
                evidence=["D2:2"], invalid_ids=["D9:9"]),
]


def recorded_conversation():
    return tiny_conversation().model_copy(update={"observations": list(FACTS)})


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    a = TortoiseRecordedArm(ArmContext(workdir=tmp_path_factory.mktemp("rec")), pool_limit=20,
                            volunteer_min_confidence=0.3)
    a.ingest(recorded_conversation())
    yield a
    a.close()


def test_recording_maps_each_fact_to_one_point_sourced_to_its_first_tagged_turn():
    conv = recorded_conversation()
    a = recorded_observations(conv, lambda s: f"x-s{s.index}")
    b = recorded_observations(conv, lambda s: f"x-s{s.index}")
    assert a.recorded == b.recorded and a.provenance == b.provenance  # deterministic
    s1 = a.recorded.sessions["x-s1"].payload
    assert [p.content for p in s1.points] == [FACTS[0].text, FACTS[1].text]
    cello = s1.points[1].model_dump()
    assert cello["source_turn_id"] == 2 and cello["about_entities"] == ["Bob"] and "operators" not in cello
    assert s1.operators == [] and s1.events == [] and s1.supersessions == []
    assert a.provenance[pt_id(FACTS[1].text)] == ("D1:3", "D1:2")
    assert a.provenance[pt_id(FACTS[2].text)] == ("D2:2",)  # an id naming no turn credits nothing
    assert (a.facts, a.facts_unsourced, a.facts_merged) == (3, 0, 0)


def test_facts_are_admitted_as_derived_points_through_capture(arm):
    assert [c["extraction_mode"] for c in arm.captures] == ["replay:locomo-observation"] * 2
    assert [c["extracted"] for c in arm.captures] == [2, 1]
    rows = arm.t.store.query(
        "MATCH (s:Session)-[:CONTAINS]->(p:Point) WHERE p.pointKind = 'observation' RETURN s.id AS sid, "
        "p.id AS id, p.content AS c, p.session_id AS ps, p.source_turn_id AS t, p.is_episodic AS ep, "
        "p.status AS st, p.extractedFrom AS x ORDER BY c")
    got = {r["c"]: r for r in rows}
    assert set(got) == {f.text for f in FACTS}
    cello = got[FACTS[1].text]
    assert (cello["sid"], cello["ps"], cello["t"], cello["ep"]) == ("tiny-1-s1", "tiny-1-s1", 2, False)
    assert cello["st"] == "live" and cello["x"] == "session:tiny-1-s1"
    assert arm._turn_for_point(cello["id"]) == "D1:3"
    turns = arm.t.store.query("MATCH (p:Point) WHERE p.pointKind = 'event' RETURN count(*) AS n")[0]["n"]
    assert turns == 6  # every turn is still stored verbatim as a turn Point


def test_a_delivered_fact_credits_its_tagged_turns(arm):
    text = f"- {FACTS[1].text}"
    assert TortoiseArm._ids(arm, text) == frozenset()  # a paraphrase names no turn by its text ...
    assert arm._ids(text) == {"D1:2", "D1:3"}  # ... its tags credit it
    probe = recorded_conversation().probes[1]
    d = arm.deliver(probe)["tortoise-recorded-eval"]
    assert FACTS[1].text in d.text and {"D1:2", "D1:3"} <= d.dia_ids
    assert {"D1:2", "D1:3"} <= set(d.meta["ids_via_facts"]) and d.meta["facts_delivered"] >= 1
    assert d.meta["stored_fact_points"] == 3 and d.meta["stored_turn_points"] == 6
    assert d.meta["stored_ids_via_turns"] == 6 and d.meta["stored_ids_via_facts"] == 4
    assert arm.stored() == ALL_IDS


def test_faithful_gate_keeps_facts_out_of_the_block(arm):
    probe = recorded_conversation().probes[0]
    out = arm.deliver(probe)
    assert set(out) == set(arm.rows) == {"tortoise-recorded-volunteer", "tortoise-recorded-eval",
                                         "tortoise-recorded-volunteer-min0.3"}
    assert out["tortoise-recorded-volunteer"].meta["pointers"] == []  # confidence 0.5 < 0.7
    opened = out["tortoise-recorded-volunteer-min0.3"]
    assert opened.meta["pointers"] and opened.meta["block_chars"] > 0


def test_conversation_without_observations_is_unavailable_with_the_reason(tmp_path):
    conv = tiny_conversation()
    assert conv.observations is None
    res = run_conversation(conv, ["tortoise-recorded"], tmp_path)
    info = res["arms"]["tortoise-recorded"]
    assert info["status"] == "unavailable" and res["records"] == []
    assert "has no 'observation' field" in info["message"] and "tiny-1" in info["message"]


def test_shipped_conversations_map_every_fact():
    path = find_locomo_path()
    if path is None:
        pytest.skip("LoCoMo data not found")
    for conv in load_locomo(path):
        if conv.observations is None:
            continue
        facts = recorded_observations(conv, lambda s: f"s{s.index}")
        assert facts.facts == len(conv.observations)
        assert len(facts.recorded.sessions) == len(conv.sessions)
        # a fact point that credits no turn must be one the adapter counted as unsourced
        assert sum(1 for ids in facts.provenance.values() if not ids) <= facts.facts_unsourced


@pytest.fixture
def claim_slice(monkeypatch):
    """XD-14/XD-15 on the ledger's own slice of the claim conversation: a shorter one has too few probes for XD-14's
    paired test to decide (inconclusive at 3-5 sessions), and costs about the same (the models' loading dominates)."""
    from harness.claims import cross_recorded

    if find_locomo_path() is None:
        pytest.skip("LoCoMo data not found")
    cross_recorded._observe.cache_clear()
    yield cross_recorded
    cross_recorded._observe.cache_clear()


def _verdicts():
    from harness.claims import all_claims, cross_recorded
    from harness.ledger import run_claim

    cross_recorded._observe.cache_clear()  # one fresh run per call, shared by both claims
    return {c.id: run_claim(c).verdict for c in all_claims(ids=["XD-14", "XD-15"])}


def test_recorded_claims_hold_and_turn_refuted_when_the_mechanism_breaks(claim_slice, monkeypatch):
    import tortoise_sim.why as why

    assert _verdicts() == {"XD-14": "holds", "XD-15": "holds"}
    # facts credit nothing (as if provenance were dropped) -> XD-14 refuted
    monkeypatch.setattr(TortoiseRecordedArm, "_fact_ids", lambda self, pids: frozenset())
    # every point reads as confident (as if capture calibrated facts) -> the faithful gate lets facts through
    real = why.ep_view
    monkeypatch.setattr(why, "ep_view", lambda row: {**real(row), "confidence_mean": 0.9})
    assert _verdicts() == {"XD-14": "refuted", "XD-15": "refuted"}
