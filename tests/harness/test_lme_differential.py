"""LongMemEval's official retrieval evaluation, twice: the test-only reference (``lme_reference.py``, written from
the spec alone) checked on cases worked by hand, then compared number for number with memsim's implementation on
generated files and on hypothesis-made haystacks."""

from __future__ import annotations

import math

import pytest

from tests.harness import lme_fixture as fx
from tests.harness import lme_reference as ref

# ---- the reference on hand-worked cases ---------------------------------------------------------------------


def test_reference_ndcg_matches_the_spec_checks():
    ids = ["d0", "d1", "d2", "d3"]
    # one gold document at rank 2 -> 1.0 (ranks 1 and 2 both weigh 1)
    assert ref.ndcg([0, 1, 2, 3], ["d1"], ids, 3) == pytest.approx(1.0)
    # at rank 3 -> 1/log2(3) = 0.631
    assert ref.ndcg([0, 1, 2, 3], ["d2"], ids, 3) == pytest.approx(0.6309, abs=1e-4)
    # two gold at ranks 1 and 3 -> (1 + 0.631) / (1 + 1) = 0.815
    assert ref.ndcg([0, 1, 2, 3], ["d0", "d2"], ids, 3) == pytest.approx(0.8155, abs=1e-4)
    # a gold document below the cut does not count; the ideal is cut at k too
    assert ref.ndcg([0, 1, 2, 3], ["d3"], ids, 3) == 0.0
    assert ref.ndcg([3, 0, 1, 2], ["d3", "d0"], ids, 1) == pytest.approx(1.0)


def test_reference_without_gold_scores_recall_all_one():
    assert ref.evaluate_retrieval([1, 0], [], ["a", "b"], 1) == (0.0, 1.0, 0.0)


def test_reference_recall_any_and_all():
    ids = ["answer_a", "x", "answer_b"]
    gold = ["answer_a", "answer_b"]
    assert ref.evaluate_retrieval([0, 1, 2], gold, ids, 1)[:2] == (1.0, 0.0)
    assert ref.evaluate_retrieval([0, 1, 2], gold, ids, 3)[:2] == (1.0, 1.0)
    assert ref.evaluate_retrieval([1, 0, 2], gold, ids, 1)[:2] == (0.0, 0.0)


def test_reference_turn2session_worked_by_hand():
    # turns of s1 (two), an evidence session A (turn 1 evidence, turn 3 not), s2, an evidence session B
    ids = ["s1_1", "s1_3", "answer_A_1", "noans_A_3", "s2_1", "answer_B_2"]
    gold = ["answer_A_1", "answer_B_2"]
    ranking = [0, 1, 3, 2, 4, 5]  # stripped: s1 s1 noans_A answer_A s2 answer_B
    # k=1: one turn covers one session id: nothing gold
    assert ref.evaluate_retrieval_turn2session(ranking, gold, ids, 1) == (0.0, 0.0, 0.0)
    # k=3: the top 3 turns cover 2 ids (s1, noans_A); at 4 turns 3 ids -> effective k 4: answer_A found at rank 4;
    # DCG 1/log2(4) = 0.5, ideal (two evidence turns) 1 + 1 = 2
    ra, rl, nd = ref.evaluate_retrieval_turn2session(ranking, gold, ids, 3)
    assert (ra, rl) == (1.0, 0.0) and nd == pytest.approx(0.25)
    # k=5: effective k 6 (5 distinct ids: s1 noans_A answer_A s2 answer_B); DCG 0.5 + 1/log2(6)
    expected = (0.5 + 1 / math.log2(6)) / 2
    ra, rl, nd = ref.evaluate_retrieval_turn2session(ranking, gold, ids, 5)
    assert (ra, rl) == (1.0, 1.0) and nd == pytest.approx(expected)
    # k=10: never 10 distinct ids; the whole corpus is used
    ra, rl, nd = ref.evaluate_retrieval_turn2session(ranking, gold, ids, 10)
    assert (ra, rl) == (1.0, 1.0) and nd == pytest.approx(expected)
    # not "deduplicate then score": deduplicated sessions would put answer_A at rank 3, not rank 4
    assert nd != pytest.approx((1 / math.log2(3) + 1 / math.log2(5)) / 2)


def test_reference_turn2session_one_gold_session_from_many_evidence_turns():
    # two evidence turns of one session: one gold session id, but the ideal DCG counts both turns
    ids = ["answer_A_1", "answer_A_3", "s_1"]
    ra, rl, nd = ref.evaluate_retrieval_turn2session([2, 0, 1], ["answer_A_1", "answer_A_3"], ids, 1)
    # effective k 1 (one turn = one id), s found, A not
    assert (ra, rl, nd) == (0.0, 0.0, 0.0)
    ra, rl, nd = ref.evaluate_retrieval_turn2session([2, 0, 1], ["answer_A_1", "answer_A_3"], ids, 2)
    # top 2 turns cover s and answer_A; gains [0, 1], ideal [1, 1]
    assert (ra, rl) == (1.0, 1.0) and nd == pytest.approx(0.5)


def test_reference_corpus_rules_on_the_quirky_fixture():
    qs = {q["question_id"]: q for q in fx.quirky_questions()}
    texts, ids = ref.build_corpus(qs["q_user_1"], "session")
    assert ids == ["sharegpt_aa11_0", "answer_1111_1", "ultrachat_bb22"]
    assert texts[1] == "I just adopted a border collie named Rex! He loves frisbees."
    assert texts[2] == "Plan a weekend hiking trip near Denver. "  # the blank user turn joins as ''
    texts, ids = ref.build_corpus(qs["q_user_1"], "turn")
    assert ids == ["sharegpt_aa11_0_1", "answer_1111_1_1", "noans_1111_1_3", "ultrachat_bb22_2", "ultrachat_bb22_4"]
    assert texts[-1] == ""
    # evidence only in an assistant turn: the session is not gold; the listed-twice filler stays twice
    _, ids = ref.build_corpus(qs["q_asst_1"], "session")
    assert ids == ["noans_2222_1", "sharegpt_aa11_0", "sharegpt_aa11_0"]
    # an evidence session with no evidence turn becomes noans; assistant-first session: turn 2 is the user turn
    _, ids = ref.build_corpus(qs["q_ku_1"], "session")
    assert ids == ["noans_5555_1", "answer_5555_2", "sharegpt_aa11_0"]
    _, ids = ref.build_corpus(qs["q_multi_1"], "turn")
    assert ids == ["answer_3333_1_1", "answer_3333_2_2", "sharegpt_cc33_1_1"]


def test_reference_missing_has_answer_in_an_evidence_session_fails():
    q = fx.question("q1", "multi-session", "Q?", "a", "2023/05/30 (Tue) 21:56",
                    [("answer_1", "2023/05/01 (Mon) 10:00", [fx.user("no flag here")])])
    for gran in ("session", "turn"):
        with pytest.raises(ref.ReferenceDataError):
            ref.build_corpus(q, gran)


def test_reference_bm25_tokenises_on_single_spaces_only():
    # idf of 'dog' (1 of 3 documents) = ln(2.5 / 1.5); 'the dog' has average length, tf 1 -> score = idf
    scores = ref.bm25_scores(["the Dog", "the dog", "a cat."], "dog")
    assert scores[0] == 0.0 and scores[2] == 0.0  # no lowercasing
    assert scores[1] == pytest.approx(math.log(2.5 / 1.5))
    assert ref.rank(ref.bm25_scores(["cat.", "cat", "dog"], "cat"))[0] == 1  # no punctuation stripping


def test_reference_averaging_counts_on_the_quirky_fixture():
    logs = [(q, ref.evaluate_entry(q, "session")) for q in fx.quirky_questions()]
    n_paper, paper = ref.average(logs, "paper")
    n_strict, strict = ref.average(logs, "strict")
    assert (n_paper, n_strict) == (4, 3)  # the _abs question out; then q_asst_1 (assistant-only evidence) out
    # q_asst_1 has no gold: recall_all 1 and ndcg 0 in the paper average, so paper >= strict on recall_all@50
    per = {q["question_id"]: m for q, m in logs}
    assert per["q_asst_1"]["session"]["recall_all@50"] == 1.0 and per["q_asst_1"]["session"]["ndcg_any@50"] == 0.0
    assert paper["session"]["recall_all@50"] == 1.0 and strict["session"]["recall_all@50"] == 1.0
