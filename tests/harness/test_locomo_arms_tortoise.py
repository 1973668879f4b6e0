from __future__ import annotations

import pytest
import torch

from harness.workloads.base import ArmContext
from harness.workloads.locomo import Conversation, Probe, Session, Turn
from harness.workloads.tortoise_arm import TortoiseArm, turn_body
from tests.harness.locomo_arms_fixture import ALL_IDS, DATES, tiny_conversation

torch.set_num_threads(1)

LONG = ("Last autumn I finally finished restoring the old wooden sailboat my grandfather built in 1962, sanding "
        "every plank by hand, replacing the brass fittings and sewing a new canvas sail from a pattern he left me.")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    conv = tiny_conversation()
    arm = TortoiseArm(ArmContext(workdir=tmp_path_factory.mktemp("tortoise")), pool_limit=20,
                      volunteer_min_confidence=0.5)
    arm.ingest(conv)
    yield conv, arm
    arm.close()


def test_capture_stores_turns_and_one_point_per_turn(tiny):
    conv, arm = tiny
    assert set(arm.deliver(conv.probes[0])) == set(arm.rows)  # one Delivery per named row (Arm protocol)
    assert [c["extracted"] for c in arm.captures] == [3, 3]
    assert all(c["ok"] and c["extraction_mode"] == "scripted:turn-points" for c in arm.captures)
    rows = arm.t.store.query("MATCH (p:Point) WHERE p.content IS NOT NULL RETURN p.id AS id, p.content AS c, "
                             "p.pointKind AS k")
    turns = {r["c"] for r in rows if r["k"] == "event" and r["id"].endswith(("_t0", "_t1", "_t2"))}
    first = conv.sessions[0].turns[0]
    assert f"[{first.speaker}] {turn_body(first)}" in turns
    points = {r["c"] for r in rows if r["k"] == "observation"}
    assert f"[{DATES[0]}] {first.speaker}: {first.text}" in points and len(points) == 6
    assert arm.stored() == ALL_IDS


def test_faithful_gate_volunteers_nothing_and_the_digest_is_counted(tiny):
    conv, arm = tiny
    seq = arm.t.store.write_seq
    for probe in conv.probes:
        d = arm.deliver(probe)["tortoise-volunteer"]
        assert d.meta["pointers"] == [] and d.meta["block_chars"] == 0  # prior mean 0.5 < gate 0.7
        assert d.text.startswith(arm.digest) and d.text.endswith(probe.question)
        # the digest lists the 8 newest points cut to 160 chars: all six tiny points fit, so it carries every turn
        assert frozenset(d.meta["digest_ids"]) == ALL_IDS == d.dia_ids
    assert arm.t.store.write_seq == seq  # volunteering and search write nothing


def test_open_gate_row_points_at_the_evidence(tiny):
    conv, arm = tiny
    d = arm.deliver(conv.probes[0])[arm.rows[-1]]
    assert arm.rows[-1] == "tortoise-volunteer-min0.5" and d.meta["faithful"] is False
    assert 1 <= len(d.meta["pointers"]) <= 3
    assert "D1:1" in d.meta["named_ids"]
    assert d.meta["pointers"][0] in d.text


def test_eval_pool_with_expansion_carries_its_hits(tiny):
    conv, arm = tiny
    d = arm.deliver(conv.probes[2])["tortoise-eval"]
    assert d.meta["pool_size"] <= 20 and d.meta["expansion_ran"] is True
    assert d.dia_ids == frozenset(d.meta["ranked_ids"]) | frozenset(d.meta["digest_ids"])
    temporal = Probe(index=9, question="When did Alice buy new running shoes?", evidence=["D2:1"], category=2)
    t = arm.deliver(temporal)["tortoise-eval"]
    assert t.meta["is_temporal"] is True and t.meta["expansion_ran"] is False


def test_long_turn_is_named_but_not_carried(tmp_path):
    turns = [Turn(dia_id="D1:1", speaker="Alice", text=LONG, session=1, index_in_session=0),
             Turn(dia_id="D1:2", speaker="Bob", text="That sounds wonderful.", session=1, index_in_session=1)]
    turns += [Turn(dia_id=f"D1:{i + 3}", speaker="Alice" if i % 2 else "Bob", text=f"We talked about topic {i}.",
                   session=1, index_in_session=i + 2) for i in range(10)]
    conv = Conversation(sample_id="long", speaker_a="Alice", speaker_b="Bob",
                        sessions=[Session(index=1, date_time=DATES[0], turns=turns)],
                        probes=[Probe(index=0, question="Who built the wooden sailboat Alice restored?",
                                      evidence=["D1:1"], category=4)], source="<hand-made>")
    arm = TortoiseArm(ArmContext(workdir=tmp_path), volunteer_min_confidence=0.5)
    arm.ingest(conv)
    d = arm.deliver(conv.probes[0])[arm.rows[-1]]
    assert "D1:1" in d.meta["named_ids"]  # the pointer names the turn ...
    assert "D1:1" not in d.dia_ids  # ... but its 160-character synopsis cannot carry a 200-character turn
    ev = arm.deliver(conv.probes[0])["tortoise-eval"]
    assert "D1:1" in ev.dia_ids  # the evaluation pool carries whole contents
    arm.close()


def test_lm_extractor_failure_keeps_turns_and_is_reported(tmp_path):
    conv = tiny_conversation()
    arm = TortoiseArm(ArmContext(workdir=tmp_path, lm="openai/memsim-unreachable"),
                      lm_kwargs={"api_base": "http://127.0.0.1:9/v1", "api_key": "x", "num_retries": 0})
    assert arm.extractor.route == "llm:openai/memsim-unreachable"
    arm.ingest(conv)
    assert [c["extraction_mode"] for c in arm.captures] == ["error", "error"]
    assert arm.stored() == ALL_IDS  # turns are written before extraction and survive its failure (TOR-01)
    d = arm.deliver(conv.probes[0])["tortoise-eval"]
    assert d.meta["capture_errors"] == 2 and d.meta["extracted_points"] == 0
    arm.close()
