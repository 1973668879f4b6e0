"""Ranking metrics: the in-house ones agree with pytrec_eval; the LoCoMo delivered-text metrics (cl100k tokens,
LongMemEval ranked metrics) on hand-made cases."""

from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval

from benchmarks.metrics import (
    evaluate_run,
    ndcg_at,
    negative_share,
    recall_at,
    reciprocal_rank,
    top_k_from_scores,
)
from benchmarks.worlds import CBRWorld


def _trec_inputs(rankings, qrels):
    qrel = {f"q{i}": {f"d{j}": int(r) for j, r in enumerate(rel) if r > 0} for i, rel in enumerate(qrels)}
    run = {}
    for i, ranking in enumerate(rankings):
        # distinct, strictly decreasing scores so trec_eval keeps our order
        run[f"q{i}"] = {f"d{int(d)}": float(len(ranking) - r) for r, d in enumerate(ranking)}
    return qrel, run


def test_metrics_match_pytrec_eval_on_world_run() -> None:
    world = CBRWorld(n_families=8, seed=3)
    bank = world.bank(120, seed=3)
    queries = world.queries(15, seed=4)
    qrels = world.qrels(queries, bank)
    rng = np.random.default_rng(0)
    rankings = []
    for rel in qrels:  # a noisy selector: relevance plus noise, so metrics are neither 0 nor 1
        scores = rel + rng.normal(0, 1.2, size=rel.shape[0])
        rankings.append(list(top_k_from_scores(scores, 30)))
    ours = evaluate_run(rankings, qrels, positive_label=bank.label)

    qrel, run = _trec_inputs(rankings, qrels)
    # relevance_level 1: grades >= 1 count as relevant for recall / reciprocal rank
    ev = pytrec_eval.RelevanceEvaluator(qrel, {"recall.1,4,8", "P.8", "ndcg_cut.10", "recip_rank"}, relevance_level=1)
    res = ev.evaluate(run)
    mean = {m: float(np.mean([res[q][m] for q in res])) for m in
            ("recall_1", "recall_4", "recall_8", "P_8", "ndcg_cut_10", "recip_rank")}
    assert ours["R@1"] == pytest.approx(mean["recall_1"], abs=1e-9)
    assert ours["R@4"] == pytest.approx(mean["recall_4"], abs=1e-9)
    assert ours["R@8"] == pytest.approx(mean["recall_8"], abs=1e-9)
    assert ours["P@8"] == pytest.approx(mean["P_8"], abs=1e-9)
    assert ours["nDCG@10"] == pytest.approx(mean["ndcg_cut_10"], abs=1e-9)
    assert ours["MRR"] == pytest.approx(mean["recip_rank"], abs=1e-9)
    assert 0.0 < ours["nDCG@10"] < 1.0
    assert 0.0 <= ours["neg_share@8"] <= 1.0


def test_hand_computed_values() -> None:
    rel = np.array([0, 2, 1, 0, 2], dtype=np.int8)
    ranking = [0, 1, 3, 2, 4]
    assert recall_at(ranking, rel, 1) == 0.0
    assert recall_at(ranking, rel, 4) == pytest.approx(2 / 3)
    assert reciprocal_rank(ranking, rel) == 0.5
    dcg = 2 / np.log2(3) + 1 / np.log2(5) + 2 / np.log2(6)
    idcg = 2 / np.log2(2) + 2 / np.log2(3) + 1 / np.log2(4)
    assert ndcg_at(ranking, rel, 10) == pytest.approx(dcg / idcg)
    labels = np.array([True, False, True, False, True])
    assert negative_share(ranking, labels, 4) == 0.5


def test_top_k_is_stable_among_ties() -> None:
    scores = np.array([0.5, 0.9, 0.9, 0.1, 0.9])
    assert list(top_k_from_scores(scores, 3)) == [1, 2, 4]
    assert list(top_k_from_scores(scores, 10)) == [1, 2, 4, 0, 3]


# --------------------------------------------------------------------------------- LoCoMo delivered-text metrics
def test_cl100k_counts_equal_tiktoken_directly() -> None:
    import tiktoken

    from harness.workloads.metrics import TokenCounter

    counter = TokenCounter()  # loads cl100k_base from the file bundled with litellm (sets TIKTOKEN_CACHE_DIR)
    enc = tiktoken.get_encoding("cl100k_base")
    texts = ["", "hello world", "[D1:3] 1:56 pm on 8 May, 2023 | Caroline: I went to the LGBTQ support group.",
             "Ünïcödé — emoji 🐢 and <|endoftext|> as plain text", "a " * 500]
    for t in texts:
        assert counter.count_cl100k(t) == len(enc.encode(t, disallowed_special=()))
    assert counter.count_cl100k("hello world") == 2  # two cl100k tokens ("hello", " world")
    # WordPiece and cl100k are different units: the same text does not count the same in general
    long = texts[2]
    assert counter.count(long) != counter.count_cl100k(long)


def test_ranked_metrics_hand_made_case() -> None:
    from harness.workloads.metrics import delivered_ranking, ranked_metrics

    session_of = {f"D{s}:{t}": s for s in (1, 2, 3) for t in range(1, 5)}
    # rank 1 D1:1, rank 2 D1:2 (evidence), rank 3 a unit with no turn, rank 4 a repeat of D1:2, rank 5 D3:1,
    # rank 6 D2:1 (evidence)
    ranking = delivered_ranking({"ranked_ids": ["D1:1", "D1:2", "?", "D1:2", "D3:1", "D2:1"]})
    got = ranked_metrics(ranking, ["D1:2", "D2:1"], session_of)
    assert got is not None
    turn, sess = got["turn"], got["session"]
    # turn level: one of two evidence turns in the top 5 (at rank 2), both in the top 10 (ranks 2 and 6)
    assert turn["recall_any@5"] == 1.0 and turn["recall_all@5"] == 0.0
    assert turn["recall_any@10"] == 1.0 and turn["recall_all@10"] == 1.0
    idcg = 1 + 1 / np.log2(3)
    assert turn["ndcg_any@5"] == pytest.approx((1 / np.log2(3)) / idcg)
    assert turn["ndcg_any@10"] == pytest.approx((1 / np.log2(3) + 1 / np.log2(7)) / idcg)
    # session level: sessions by first occurrence S1, S3, S2 against evidence sessions {S1, S2}
    assert sess["recall_any@5"] == 1.0 and sess["recall_all@5"] == 1.0
    assert sess["ndcg_any@5"] == pytest.approx((1 + 1 / np.log2(4)) / idcg)
    # the repeat does not earn credit twice; a row that ranks nothing relevant scores 0
    miss = ranked_metrics(["D3:1", "D3:2"], ["D1:1"], session_of)
    assert miss["turn"]["recall_any@10"] == 0.0 and miss["session"]["ndcg_any@10"] == 0.0
    # a unit tagged with several turns is flattened in place; no valid evidence -> no ranked metrics
    assert delivered_ranking({"ranked": [["D1:1", "D1:2"], "D2:1"]}) == ["D1:1", "D1:2", "D2:1"]
    assert delivered_ranking({"k": 4}) is None
    assert ranked_metrics(["D1:1"], ["D9:9"], session_of) is None


def test_wordpiece_counts_equal_the_transformers_tokenizer() -> None:
    from transformers import AutoTokenizer

    from harness.embedding import minilm_model_path
    from harness.workloads.metrics import TokenCounter

    tok = AutoTokenizer.from_pretrained(str(minilm_model_path()))
    tok.model_max_length = 10**9
    counter = TokenCounter()
    for t in ["", "hello world", "[D1:3] 1:56 pm on 8 May, 2023 | Caroline: I went to the LGBTQ support group.",
              "Ünïcödé — emoji 🐢 [CLS] and [SEP] as text", "word " * 3000]:
        assert counter.count(t) == len(tok(t, add_special_tokens=False, truncation=False)["input_ids"])
