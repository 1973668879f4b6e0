"""LongMemEval as a loader of the one workload protocol: ``to_conversation`` on the quirky fixture questions (ids
with ``#2`` for a repeated session, the date header line, roles, both-roles and user-only evidence, a session that
starts with the assistant), the generic probe properties, and every design arm ingesting and delivering on one
small LongMemEval conversation."""

from __future__ import annotations

from pathlib import Path

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


def test_turn_text_helpers_drop_an_empty_date_only() -> None:
    from harness.workloads.arm_text import dated_line, turn_snippets
    from harness.workloads.fractal_arm import session_header
    from harness.workloads.tortoise_arm import dated_point
    from tests.harness.locomo_arms_fixture import tiny_conversation

    c = _conv("q_user_1")
    s = c.sessions[1]
    assert dated_line(s.turns[1], s) == "assistant: Congratulations on Rex!"
    assert session_header(2, "") == "" and dated_point("", "user", "hi") == "user: hi"
    loc = tiny_conversation()
    ls = loc.sessions[0]
    assert dated_line(ls.turns[0], ls) == ("[1:56 pm on 8 May, 2023] Alice: I adopted a golden retriever puppy "
                                          "named Biscuit last week.")
    assert session_header(1, ls.date_time) == "(session 1: 1:56 pm on 8 May, 2023)"
    assert dated_point("d", "Bob", "x") == "[d] Bob: x"
    snippets = turn_snippets(c)
    assert snippets["ultrachat_bb22:4"] == ""  # a blank turn has no snippet: never "delivered"
    assert snippets["ultrachat_bb22:2"] == "user: Plan a weekend hiking trip near Denver."


def test_fractal_pairs_a_user_turn_with_the_assistant_reply() -> None:
    from harness.workloads.fractal_arm import pair_turns
    from tests.harness.locomo_arms_fixture import tiny_conversation

    s = _conv("q_user_1").sessions[2]  # assistant, user, assistant, user(blank)
    got = [(u.dia_id, r.dia_id if r else None) for u, r in pair_turns(s.turns)]
    assert got == [("ultrachat_bb22:1", None), ("ultrachat_bb22:2", "ultrachat_bb22:3"), ("ultrachat_bb22:4", None)]
    loc = tiny_conversation().sessions[0]  # Alice, Bob, Bob: a pair and a leftover, as before
    assert [(u.dia_id, r.dia_id if r else None) for u, r in pair_turns(loc.turns)] == [("D1:1", "D1:2"),
                                                                                    ("D1:3", None)]


def _run(conv: Conversation, arms: list[str], tmp: Path, **kw: object) -> tuple[dict, dict]:
    from harness.workloads.runner import run_conversation

    seen: dict = {}

    def keep(row: str, probe: Probe, d: object) -> None:
        seen[row] = d

    res = run_conversation(conv, arms, tmp, k_values=(2,), quick=True, on_delivery=keep, **kw)
    return res, seen


def test_every_design_arm_ingests_and_delivers_a_longmemeval_question(tmp_path: Path) -> None:
    conv = _conv("q_user_1")
    arms = ["full", "bm25", "oracle", "fractal", "np-pooler", "np-mean", "tortoise", "tortoise-recorded"]
    res, seen = _run(conv, arms, tmp_path)
    status = {a: i["status"] for a, i in res["arms"].items()}
    assert status == {**{a: "ok" for a in arms}, "tortoise-recorded": "unavailable"}, res["arms"]
    assert "LongMemEval records no LM facts" in res["arms"]["tortoise-recorded"]["message"]
    assert res["question_types"] == {"single-session-user": 1}
    rows = {r["row"]: r for r in res["records"]}
    assert set(rows) == {"full", "bm25@2", "oracle", "fractal", "np-pooler@2", "np-mean@2", "tortoise-volunteer",
                         "tortoise-eval", "tortoise-eval-noexp"}
    for row, d in seen.items():
        assert "[] " not in d.text and "(session " not in d.text, row  # no arm adds an empty date form
        if row not in ("full", "bm25@2"):  # the baselines deliver it by id, its tagged line is in the text
            assert "ultrachat_bb22:4" not in d.dia_ids, row  # content-matched provenance never credits a blank
    assert seen["oracle"].dia_ids == {"answer_1111_1:1"} and rows["oracle"]["recall"] == 1.0
    assert rows["full"]["stored_recall"] == 1.0 and rows["full"]["delivered_turns"] == 10
    assert "Session date: 2023/05/10 (Wed) 08:00" in seen["fractal"].text
    assert "Current date: 2023/05/30 (Tue) 21:56" in seen["fractal"].text
    for r in rows.values():
        assert r["question_type"] == "single-session-user" and r["category"] == 0 and r["abstention"] is False
        assert r["n_official_evidence"] == 1 and r["n_evidence_sessions"] == 1
    # the expansion only widens the pool: every pool hit is still delivered, the text only grows
    ev, noexp = seen["tortoise-eval"].meta, seen["tortoise-eval-noexp"].meta
    assert ev["expansion_ran"] is True and ev["is_temporal"] is False and noexp["expansion"] is False
    assert ev["pool_size"] == noexp["pool_size"] and ev["expanded_size"] == ev["pool_size"] + ev["expansion_added"]
    assert len(noexp["ranked_ids"]) == noexp["pool_size"] and len(ev["ranked_ids"]) == ev["expanded_size"]
    assert set(noexp["ranked_ids"]) <= set(ev["ranked_ids"])
    assert len(seen["tortoise-eval-noexp"].text) <= len(seen["tortoise-eval"].text)
    assert seen["tortoise-eval-noexp"].dia_ids <= seen["tortoise-eval"].dia_ids


def test_tortoise_skips_the_expansion_for_temporal_questions(tmp_path: Path) -> None:
    res, seen = _run(_conv("q_temp_1_abs"), ["tortoise"], tmp_path)
    assert res["arms"]["tortoise"]["status"] == "ok"
    ev, noexp = seen["tortoise-eval"], seen["tortoise-eval-noexp"]
    assert ev.meta["is_temporal"] is True and ev.meta["expansion_ran"] is False
    assert ev.text == noexp.text and ev.meta["ranked_ids"] == noexp.meta["ranked_ids"]
    rec = next(r for r in res["records"] if r["row"] == "tortoise-eval")
    assert rec["answer_present"] is None  # abstention: no gold answer


def test_locomo_tortoise_has_no_noexp_row(tmp_path: Path) -> None:
    from harness.workloads.base import ArmContext
    from harness.workloads.tortoise_arm import TortoiseArm

    arm = TortoiseArm(ArmContext(workdir=tmp_path))
    try:
        assert arm.rows == ("tortoise-volunteer", "tortoise-eval")
    finally:
        arm.close()


def test_pm_loads_a_trained_model_without_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.workloads import agentfly_arm

    train = [_conv(q) for q in ("q_user_1", "q_multi_1", "q_ku_1")]
    folder = agentfly_arm.train_pm_model(train, tmp_path / "model", seed=0, quick=True)
    assert (folder / agentfly_arm.PM_INFO).is_file() and (folder / "last.pt").is_file()

    def no_training(*a: object, **k: object) -> None:
        raise AssertionError("the PM arm trained although a model was given")

    monkeypatch.setattr(agentfly_arm, "_train_classifier", no_training)
    res, seen = _run(_conv("q_asst_1"), ["pm"], tmp_path / "run", pm_model=folder)
    assert res["arms"]["pm"]["status"] == "ok", res["arms"]
    meta = seen["pm@2"].meta
    assert meta["pm_model_loaded"] is True and meta["train_conversations"] == 3
    # user evidence of the three training questions: one positive each in q_user_1 and q_ku_1, two in q_multi_1
    assert meta["positives"] == 4 and meta["pairs"] == 8  # one negative per positive with quick
    assert not (tmp_path / "run" / "q_asst_1" / "pm" / "agentfly-pm" / "memory" / "pairs.jsonl").exists()
    assert len(meta["ranked_ids"]) == 2
    with pytest.raises(ValueError, match="not a PM model folder"):
        agentfly_arm.load_pm_model(tmp_path)


def test_lme_record_fields_by_hand() -> None:
    from harness.workloads.base import Delivery
    from harness.workloads.metrics import probe_record

    conv = _conv("q_multi_1")  # evidence answer_3333_1:1 (user), answer_3333_2:2 (user); sessions 1, 2 evidence
    [p] = conv.probes
    session_of = {t.dia_id: t.session for t in conv.turns()}
    d = Delivery(text="I started learning the violin.", dia_ids=frozenset({"answer_3333_1:1", "answer_3333_1:2"}))
    stored = frozenset({"answer_3333_1:1", "answer_3333_2:1"})
    rec = probe_record(conv.sample_id, p, "x", d, stored, 1.0, session_of=session_of)
    assert rec["recall"] == 0.5 and rec["official_recall"] == 0.5 and rec["official_all_evidence"] is False
    assert rec["stored_recall"] == 0.5 and rec["official_stored_recall"] == 0.5
    assert rec["session_recall"] == 0.5  # session 1 has a delivered turn, session 2 none
    assert rec["session_stored_recall"] == 1.0  # a stored turn in each (answer_3333_2:1 is not evidence)
    assert rec["answer_present"] == 0.0  # "2" is not in the text
    asst = _conv("q_asst_1")
    rec2 = probe_record(asst.sample_id, asst.probes[0], "x", d, stored, 1.0)
    assert rec2["official_recall"] is None and rec2["session_recall"] is None and rec2["n_official_evidence"] == 0


def test_the_docs_example_arm_runs_on_a_longmemeval_question(tmp_path: Path) -> None:
    import re
    import sys

    page = (Path(__file__).resolve().parents[2] / "docs" / "own-arm.md").read_text(encoding="utf-8")
    [code] = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    (tmp_path / "doc_arms_lme.py").write_text(code, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        from harness.workloads.arms import load_arm_class

        spec = load_arm_class("doc_arms_lme:OverlapArm")
        res, seen = _run(_conv("q_asst_1"), [spec], tmp_path / "run")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("doc_arms_lme", None)
    assert res["arms"]["overlap"]["status"] == "ok", res["arms"]
    d = seen["overlap@2"]
    # "trail" and "suggest" are shared with the first turn of answer_2222_1 ("Suggest a trail near Denver.")
    assert d.meta["ranked_ids"][0] == "answer_2222_1:1"
    assert "[answer_2222_1:1] user: Session date: 2023/05/20 (Sat) 18:30" in d.text
