"""The official LongMemEval retrieval protocol (harness.workloads.lme_retrieval), checked on hand-computed cases."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from harness.workloads import lme_retrieval as R
from harness.workloads.longmemeval import LmeQuestion, LmeSession, LmeTurn, LongMemEvalDataError
from tests.harness import lme_fixture as fx


def to_question(obj: dict[str, Any], index: int = 0, source: str = "fixture.json") -> LmeQuestion:
    """A fixture dict as an LmeQuestion (a local stand-in for the loader: the released fields, nothing checked)."""
    sessions = [LmeSession(session_id=sid, date=d, position=i,
                           turns=[LmeTurn(role=t["role"], content=t["content"], has_answer=t.get("has_answer"))
                                  for t in turns])
                for i, (sid, d, turns) in enumerate(zip(obj["haystack_session_ids"], obj["haystack_dates"],
                                                        obj["haystack_sessions"], strict=True))]
    return LmeQuestion(question_id=obj["question_id"], question_type=obj["question_type"], question=obj["question"],
                       answer=str(obj["answer"]), question_date=obj["question_date"], sessions=sessions,
                       answer_session_ids=obj.get("answer_session_ids"), source=source, index=index)


def one(sessions: list[tuple[str, list[dict[str, Any]]]], qid: str = "q1", text: str = "what?") -> LmeQuestion:
    return to_question(fx.question(qid, "single-session-user", text, "x", "2023/05/30 (Tue) 21:56",
                                   [(sid, "2023/05/01 (Mon) 10:00", turns) for sid, turns in sessions]))


# ------------------------------------------------------------------------------------------------ DCG and NDCG
def test_spec_ndcg_checks() -> None:
    ids = ["answer_a", "s1", "s2", "s3"]
    assert R.ndcg_any([1, 0, 2, 3], ["answer_a"], ids, 10) == pytest.approx(1.0)  # gold at rank 2
    assert R.ndcg_any([1, 2, 0, 3], ["answer_a"], ids, 10) == pytest.approx(0.631, abs=5e-4)  # rank 3
    ids2 = ["answer_a", "answer_b", "s1", "s2"]
    # gold at ranks 1 and 3: (1 + 1/log2 3) / (1 + 1)
    assert R.ndcg_any([0, 2, 1, 3], ["answer_a", "answer_b"], ids2, 10) == pytest.approx(0.815, abs=5e-4)
    assert R.dcg([0, 0, 1]) == pytest.approx(1 / math.log2(3))
    assert R.dcg([0, 1]) == 1.0 and R.dcg([]) == 0.0


def test_no_gold_conventions() -> None:
    m = R.evaluate([1, 0, 2], ["noans_a", "s1", "s2"])
    for k in R.KS:
        assert (m[f"recall_any@{k}"], m[f"recall_all@{k}"], m[f"ndcg_any@{k}"]) == (0.0, 1.0, 0.0)
    assert list(m) == R.METRIC_NAMES


def test_k_beyond_corpus_and_ideal_cut_at_k() -> None:
    ids = ["s0", "answer_a", "answer_b"]
    m = R.evaluate([0, 1, 2], ids)
    # k=1: nothing; ideal cut at 1 is [1]
    assert (m["recall_any@1"], m["recall_all@1"], m["ndcg_any@1"]) == (0.0, 0.0, 0.0)
    # k=3 (and 50 > 3): ranked gains [0,1,1] -> 1 + 1/log2 3; ideal [1,1,0] -> 2
    want = (1 + 1 / math.log2(3)) / 2
    for k in (3, 10, 50):
        assert m[f"recall_all@{k}"] == 1.0 and m[f"ndcg_any@{k}"] == pytest.approx(want)


# ------------------------------------------------------------------------------------------------------ corpus
def test_turn_ids_count_assistant_turns_and_noans_rename() -> None:
    q = one([("answer_x_1", [fx.assistant("hi", False), fx.user("I own a cat", True),
                             fx.assistant("nice", False), fx.user("ok", False)]),
             ("sharegpt_f", [fx.user("u1"), fx.assistant("a1"), fx.user("u2")])])
    texts, ids = R.build_corpus(q, "turn")
    assert ids == ["answer_x_1_2", "noans_x_1_4", "sharegpt_f_1", "sharegpt_f_3"]
    assert texts == ["I own a cat", "ok", "u1", "u2"]
    texts, ids = R.build_corpus(q, "session")
    assert ids == ["answer_x_1", "sharegpt_f"] and texts == ["I own a cat ok", "u1 u2"]


def test_replace_renames_every_occurrence_and_duplicates_stay() -> None:
    q = one([("answer_answer_7", [fx.user("nothing here", False), fx.assistant("the answer", True)]),
             ("f", [fx.user("a")]), ("f", [fx.user("a")])])
    _, ids = R.build_corpus(q, "session")
    assert ids == ["noans_noans_7", "f", "f"]  # assistant evidence does not count; duplicate kept
    _, ids = R.build_corpus(q, "turn")
    assert ids == ["noans_noans_7_1", "f_1", "f_1"]


def test_evidence_session_without_user_turn_is_noans_empty_document() -> None:
    # the official all(...) over no user turns is true: the session is renamed and its document is ''
    q = one([("answer_z", [fx.assistant("only me", True)]), ("f", [fx.user("b")])])
    texts, ids = R.build_corpus(q, "session")
    assert ids == ["noans_z", "f"] and texts == ["", "b"]
    assert R.build_corpus(q, "turn") == (["b"], ["f_1"])
    assert R.Bm25Retriever().rank(texts, "b") == [1, 0]  # an empty document is indexed as [''], no crash


def test_missing_has_answer_in_evidence_session_is_one_line_error() -> None:
    q = one([("answer_m", [fx.user("no flag")])], qid="q_bad")
    for gran in ("session", "turn"):
        with pytest.raises(LongMemEvalDataError) as e:
            R.build_corpus(q, gran)  # type: ignore[arg-type]
        msg = str(e.value)
        assert "\n" not in msg and "fixture.json" in msg and "q_bad" in msg and "answer_m" in msg


def test_a_haystack_without_user_turns_is_one_line_error() -> None:
    q = one([("f", [fx.assistant("only the assistant")])], qid="q_empty")
    assert R.build_corpus(q, "turn") == ([], [])
    with pytest.raises(LongMemEvalDataError, match="q_empty.*turn corpus is empty"):
        R.question_rows(q, {"bm25": R.Bm25Retriever()})


# ------------------------------------------------------------------------------------------------ turn2session
def test_turn2session_hand_computed() -> None:
    ids = ["noans_A_1", "answer_A_3", "f1_1", "f1_3", "f2_1", "answer_B_1"]
    ranking = [2, 3, 0, 1, 4, 5]
    m = R.evaluate_turn2session(ranking, ids)
    assert (m["recall_any@1"], m["recall_all@1"], m["ndcg_any@1"]) == (0.0, 0.0, 0.0)
    # k=3: {f1, noans_A} only 2 distinct in top 3 -> effective k 4, answer_A at rank 4
    assert R.effective_k(ranking, [R.strip_turn_id(i) for i in ids], 3) == 4
    assert (m["recall_any@3"], m["recall_all@3"]) == (1.0, 0.0)
    assert m["ndcg_any@3"] == pytest.approx((1 / math.log2(4)) / 2)
    # k=5: effective k 6 (the whole corpus): gains at ranks 4 and 6
    want = (1 / math.log2(4) + 1 / math.log2(6)) / 2
    assert m["recall_all@5"] == 1.0 and m["ndcg_any@5"] == pytest.approx(want)
    assert m["ndcg_any@10"] == pytest.approx(want) and m["recall_all@50"] == 1.0
    t = R.evaluate(ranking, ids)  # the same ranking scored per turn: nothing gold in the top 3
    assert (t["recall_any@3"], t["ndcg_any@3"]) == (0.0, 0.0)


def test_turn2session_ideal_counts_every_evidence_turn() -> None:
    ids = ["answer_A_1", "answer_A_3", "f_1"]
    m = R.evaluate_turn2session([0, 2, 1], ids)
    assert m["ndcg_any@1"] == 1.0
    # k=3: all three turns; gains [1,0,1] over the ideal [1,1,0] (not 1.0 as deduplicated sessions would give)
    assert m["ndcg_any@3"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert m["recall_all@3"] == 1.0


# ------------------------------------------------------------------------------------------------------- BM25
def test_bm25_ranks_and_ties_as_reversed_argsort() -> None:
    r = R.Bm25Retriever()
    assert r.rank(["a b", "c d", "e f"], "a") == [0, 2, 1]  # equal zeros: argsort [1, 2] reversed
    assert r.rank(["x", "y", "z"], "nothing") == [2, 1, 0]
    assert r.rank(["Cat", "cat"], "cat")[0] == 1  # no lowercasing
    assert r.rank([], "q") == []


# ------------------------------------------------------------------------------------------- rows and averaging
def test_question_rows_and_paper_vs_strict_averaging() -> None:
    qs = [to_question(o, i) for i, o in enumerate(fx.quirky_questions())]
    rows = [row for q in qs for row in R.question_rows(q, {"bm25": R.Bm25Retriever()})]
    assert len(rows) == 5 * 3
    asst = [r for r in rows if r["question_id"] == "q_asst_1" and r["granularity"] == "session"][0]
    assert asst["metrics"]["recall_all@5"] == 1.0 and asst["metrics"]["ndcg_any@5"] == 0.0  # no user gold
    agg = R.aggregate(rows)
    assert [(a["granularity"], a["scored_as"], a["averaging"]) for a in agg] == [
        ("session", "session", "paper"), ("session", "session", "strict"), ("turn", "turn", "paper"),
        ("turn", "turn", "strict"), ("turn", "session", "paper"), ("turn", "session", "strict")]
    assert {a["averaging"]: a["questions"] for a in agg} == {"paper": 4, "strict": 3}
    paper = agg[0]
    per_q = [r["metrics"]["ndcg_any@1"] for r in rows if r["granularity"] == "session" and not r["abstention"]]
    assert paper["metrics"]["ndcg_any@1"] == pytest.approx(sum(per_q) / 4)
    assert sum(v["questions"] for v in paper["types"].values()) == 4


def test_parse_retrievers_and_encoder_errors(tmp_path) -> None:
    assert R.parse_retrievers("bm25, minilm") == ["bm25", "minilm"]
    for bad in ("bm25,tfidf", " , "):
        with pytest.raises(ValueError):
            R.parse_retrievers(bad)
    with pytest.raises(ValueError, match="not 'minilm'"):
        R.resolve_encoder(str(tmp_path))
    label, path = R.resolve_encoder(None)
    assert label == "minilm" and (path / "config.json").is_file()
    assert R.resolve_encoder(str(path)) == ("dense:" + path.name, path)  # a local model folder by path


# ------------------------------------------------------------------------------------------------------ dense
@pytest.fixture(scope="module")
def dense() -> R.DenseRetriever:
    import torch

    torch.set_num_threads(1)
    return R.DenseRetriever("minilm", cache=True)  # the weights package is a dependency: no skip


def test_dense_cache_agrees_with_one_batch(dense: R.DenseRetriever) -> None:
    texts = ["I adopted a border collie named Rex.", "short", "", "Plan a weekend hiking trip near Denver " * 20,
             "How do I bake sourdough bread?"]
    one_batch = dense._encode_batches(texts)
    dense.encode(texts[1:2])  # cache one text first, encoded on its own (different padding)
    dense.encode(texts[3:])
    cached = dense.encode(texts)
    assert float(np.max(np.abs(cached - one_batch))) < 1e-5
    assert dense.hits >= 3
    dense.cache_max = 3  # a full cache is emptied and refilled: the same vectors
    assert float(np.max(np.abs(dense.encode(texts) - one_batch))) < 1e-5
    assert dense.max_length == 512
    norms = np.linalg.norm(one_batch, axis=1)
    assert not np.allclose(norms, 1.0)  # no normalisation (mean-pooled MiniLM vectors are not unit length)


def test_dense_ranking_is_raw_dot_product_descending(dense: R.DenseRetriever) -> None:
    texts = ["My dog is a border collie.", "The stock market fell today.", "I like pasta with tomatoes."]
    ranking = dense.rank(texts, "What breed is my dog?")
    docs = dense._encode_batches(texts)
    q = dense._encode_batches(["What breed is my dog?"])[0]
    scores = docs @ q
    assert ranking[0] == 0 and all(scores[ranking[i]] >= scores[ranking[i + 1]] for i in range(2))


def test_the_protocol_encodes_as_the_official_code_unless_the_cache_is_asked_for() -> None:
    """The default dense retriever keeps no vector between calls (every corpus is encoded in batches of 128 in
    corpus order, as the official code does); the text cache is the named ``--dense-cache`` option."""
    import torch

    torch.set_num_threads(1)
    plain = R.make_retriever("minilm")
    assert isinstance(plain, R.DenseRetriever) and plain._cache is None
    texts = ["a blank-ish turn", "a blank-ish turn", "another one"]
    plain.encode(texts)
    plain.encode(texts)
    assert (plain.hits, plain.misses) == (0, 0)
    assert R.make_retriever("minilm", cache=True)._cache == {}
