"""Ranking metrics computed in-house (cross-checked against pytrec_eval in ``tests/benchmarks/test_metrics.py``).

Conventions (the TREC ones, so the cross-check is exact):
- a case is *relevant* for Recall and MRR iff its graded relevance is >= 1 (``rel_threshold``);
- ``Recall@k`` = relevant cases in the top k / all relevant cases of the query (0 when the query has none);
- ``MRR`` = 1 / rank of the first relevant case (0 when none is ranked);
- ``P@8`` = relevant cases among the top 8 / 8 (trec_eval's ``P_8``): with tens of relevant cases per query,
  Recall@8 is capped at 8 / (relevant cases), so P@8 says more about what the planner is shown;
- ``nDCG@10`` uses linear gains (gain = grade) and ``1/log2(rank+1)`` discounts, normalised by the ideal ranking
  of the query's full relevance list (trec_eval's ``ndcg_cut_10``);
- ``neg_share@8`` = share of cases labelled negative among the delivered top 8 (the stored label, i.e. what the
  planner is told), a property of the delivery rather than of relevance.

A run is ranked case indices per query (best first); ties must already be broken by the selector.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CUTOFFS = (1, 4, 8)


def recall_at(ranking: Sequence[int], rel: np.ndarray, k: int, rel_threshold: int = 1) -> float:
    n_rel = int((rel >= rel_threshold).sum())
    if n_rel == 0:
        return 0.0
    top = np.asarray(ranking[:k], dtype=np.int64)
    return float((rel[top] >= rel_threshold).sum()) / n_rel


def precision_at(ranking: Sequence[int], rel: np.ndarray, k: int, rel_threshold: int = 1) -> float:
    top = np.asarray(ranking[:k], dtype=np.int64)
    return float((rel[top] >= rel_threshold).sum()) / k


def reciprocal_rank(ranking: Sequence[int], rel: np.ndarray, rel_threshold: int = 1) -> float:
    for r, i in enumerate(ranking, start=1):
        if rel[int(i)] >= rel_threshold:
            return 1.0 / r
    return 0.0


def ndcg_at(ranking: Sequence[int], rel: np.ndarray, k: int = 10) -> float:
    top = np.asarray(ranking[:k], dtype=np.int64)
    gains = rel[top].astype(np.float64)
    disc = 1.0 / np.log2(np.arange(2, len(top) + 2))
    dcg = float((gains * disc).sum())
    ideal = np.sort(rel[rel > 0].astype(np.float64))[::-1][:k]
    idcg = float((ideal * (1.0 / np.log2(np.arange(2, len(ideal) + 2)))).sum())
    return dcg / idcg if idcg > 0 else 0.0


def negative_share(ranking: Sequence[int], positive_label: np.ndarray, k: int = 8) -> float:
    top = np.asarray(ranking[:k], dtype=np.int64)
    if len(top) == 0:
        return 0.0
    return float((~positive_label[top]).sum()) / len(top)


def per_query(rankings: Sequence[Sequence[int]], qrels: Sequence[np.ndarray],
              positive_label: np.ndarray | None = None) -> dict[str, list[float]]:
    """Every metric of every query, in query order: ``R@1, R@4, R@8, P@8, nDCG@10, MRR`` and, given labels,
    ``neg_share@8`` (the per-probe values a bench writes to its per-probe table)."""
    if len(rankings) != len(qrels):
        raise ValueError("one ranking per query")
    per: dict[str, list[float]] = {f"R@{k}": [] for k in CUTOFFS}
    per["P@8"] = []
    per["nDCG@10"] = []
    per["MRR"] = []
    if positive_label is not None:
        per["neg_share@8"] = []
    for ranking, rel in zip(rankings, qrels, strict=True):
        for k in CUTOFFS:
            per[f"R@{k}"].append(recall_at(ranking, rel, k))
        per["P@8"].append(precision_at(ranking, rel, 8))
        per["nDCG@10"].append(ndcg_at(ranking, rel, 10))
        per["MRR"].append(reciprocal_rank(ranking, rel))
        if positive_label is not None:
            per["neg_share@8"].append(negative_share(ranking, positive_label, 8))
    return per


def evaluate_run(rankings: Sequence[Sequence[int]], qrels: Sequence[np.ndarray],
                 positive_label: np.ndarray | None = None) -> dict[str, float]:
    """Mean metrics over queries (:func:`per_query`): ``R@1, R@4, R@8, P@8, nDCG@10, MRR`` and, given labels,
    ``neg_share@8``."""
    return {k: float(np.mean(v)) if v else 0.0 for k, v in per_query(rankings, qrels, positive_label).items()}


def top_k_from_scores(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, best first; ties broken by lower index (stable)."""
    k = min(k, scores.shape[0])
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    if k < scores.shape[0]:
        part = np.argpartition(-scores, k - 1)[:k]
        # include every index tied with the k-th score, then stable-sort, so tie breaking is by index
        kth = scores[part].min()
        cand = np.flatnonzero(scores >= kth)
    else:
        cand = np.arange(scores.shape[0])
    order = cand[np.lexsort((cand, -scores[cand]))]
    return order[:k]
