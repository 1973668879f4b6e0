"""LongMemEval as a loader of the one workload protocol: ``to_conversation`` on the quirky fixture questions (ids
with ``#2`` for a repeated session, the date header line, roles, both-roles and user-only evidence, a session that
starts with the assistant), the generic probe properties, and every design arm ingesting and delivering on one
small LongMemEval conversation."""

from __future__ import annotations

import pytest
import torch

from harness.workloads.lme_workload import to_conversation
from harness.workloads.locomo import Conversation, Probe
from harness.workloads.longmemeval import LmeQuestion, parse_question
from tests.harness.lme_fixture import quirky_questions

torch.set_num_threads(1)


def _questions() -> dict[str, LmeQuestion]:
    return {o["question_id"]: parse_question(o, source="quirky.json", index=i)
            for i, o in enumerate(quirky_questions())}


def _conv(qid: str) -> Conversation:
    return to_conversation(_questions()[qid])


def test_turn_ids_roles_and_the_date_header() -> None:
    c = _conv("q_asst_1")  # haystack: answer_2222_1, sharegpt_aa11_0, sharegpt_aa11_0 (listed twice)
    assert c.sample_id == "q_asst_1" and c.workload == "longmemeval" and c.source == "quirky.json"
    assert [s.session_id for s in c.sessions] == ["answer_2222_1", "sharegpt_aa11_0", "sharegpt_aa11_0"]
    assert [s.index for s in c.sessions] == [1, 2, 3]
    assert [t.dia_id for t in c.turns()] == ["answer_2222_1:1", "answer_2222_1:2", "sharegpt_aa11_0:1",
                                             "sharegpt_aa11_0:2", "sharegpt_aa11_0#2:1", "sharegpt_aa11_0#2:2"]
    assert len(c.turn_map()) == 6  # unique ids although a session id repeats
    assert [t.speaker for t in c.turns()] == ["user", "assistant"] * 3
    assert all(t.role == t.speaker for t in c.turns())
    first, second = c.sessions[0].turns
    assert first.text == "Session date: 2023/05/20 (Sat) 18:30\nSuggest a trail near Denver."
    assert second.text == "Mount Falcon has a lovely loop."  # only the first turn carries the header
    assert all(s.date_time == "" for s in c.sessions)
    assert (first.has_answer, second.has_answer) == (False, True)
    assert c.sessions[1].turns[0].has_answer is None  # filler turns carry no flag


def test_session_starting_with_the_assistant_keeps_its_order_and_blank_turn() -> None:
    c = _conv("q_user_1")
    s = c.sessions[2]
    assert s.session_id == "ultrachat_bb22"
    assert [(t.dia_id, t.role) for t in s.turns] == [("ultrachat_bb22:1", "assistant"), ("ultrachat_bb22:2", "user"),
                                                     ("ultrachat_bb22:3", "assistant"), ("ultrachat_bb22:4", "user")]
    assert s.turns[0].text == "Session date: 2023/05/03 (Wed) 09:15\nWelcome back! What shall we plan today?"
    assert s.turns[3].text == ""


def test_probe_question_evidence_and_properties() -> None:
    c = _conv("q_asst_1")
    [p] = c.probes
    assert p.question == "Current date: 2023/06/02 (Fri) 12:00\nWhat trail did you suggest to me?"
    assert p.answer == "Mount Falcon" and p.category == 0 and p.type_name == "single-session-assistant"
    assert p.evidence == ["answer_2222_1:2"]  # the assistant's turn
    assert p.official_evidence == []  # no user evidence turn
    assert p.evidence_sessions == [1]
    assert p.has_gold and not p.is_temporal and not p.abstention

    multi = _conv("q_multi_1").probes[0]  # evidence in both answer sessions, one of them starting with the assistant
    assert multi.evidence == ["answer_3333_1:1", "answer_3333_2:2"] == multi.official_evidence
    assert multi.evidence_sessions == [1, 2] and multi.answer == "2"

    ku = _conv("q_ku_1").probes[0]  # answer_5555_1 is an evidence session without any has_answer turn
    assert ku.evidence == ["answer_5555_2:1"] and ku.evidence_sessions == [1, 2]

    abs_q = _conv("q_temp_1_abs").probes[0]
    assert abs_q.abstention and not abs_q.has_gold and abs_q.is_temporal and abs_q.type_name == "temporal-reasoning"
    assert abs_q.evidence == ["answer_4444_1:1"]


def test_locomo_probe_properties_keep_the_category_meaning() -> None:
    def p(cat: int) -> Probe:
        return Probe(index=0, question="q", category=cat)

    assert [p(c).has_gold for c in (1, 2, 3, 4, 5)] == [True, True, True, True, False]
    assert [p(c).is_temporal for c in (1, 2, 3, 4, 5)] == [False, True, False, False, False]
    assert p(2).type_name == "temporal" and p(5).type_name == "adversarial"
    assert p(2).official_evidence is None and p(2).question_type is None


def test_recorded_facts_are_unavailable_with_the_reason() -> None:
    c = _conv("q_user_1")
    reason = c.recorded_unavailable("observation")
    assert reason is not None and "LongMemEval records no LM facts" in reason and "q_user_1" in reason
    assert "session summaries" in str(c.recorded_unavailable("summary"))
    with pytest.raises(ValueError):
        c.recorded_unavailable("other")
