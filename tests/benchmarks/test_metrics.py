"""In-house ranking metrics agree with pytrec_eval on a small synthetic run."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.metrics import (
    evaluate_run,
    ndcg_at,
    negative_share,
    recall_at,
    reciprocal_rank,
    top_k_from_scores,
)
from harness.worlds import CBRWorld

pytrec_eval = pytest.importorskip("pytrec_eval")


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
