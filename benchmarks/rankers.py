"""Selector baselines that rank a case bank for each query (best first), used by the selector and loop benchmarks.

Every ranker returns ``list[np.ndarray]`` (one int64 array of case indices per query, at most ``depth`` long).
Bank keys are the case *questions* (what NP embeds, agentfly spec 3.4); plans are never indexed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from benchmarks.metrics import top_k_from_scores


def rank_by_vectors(bank_vecs: np.ndarray, query_vecs: np.ndarray, depth: int) -> list[np.ndarray]:
    """Cosine (inner product of L2-normalised vectors), ties by lower index."""
    sims = query_vecs @ bank_vecs.T
    return [top_k_from_scores(row, depth) for row in sims]


def rank_bm25(bank_texts: Sequence[str], query_texts: Sequence[str], depth: int) -> list[np.ndarray]:
    """BM25 (bm25s, Lucene variant, English stopwords) over the bank questions."""
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(list(bank_texts), stopwords="en", show_progress=False), show_progress=False)
    k = min(depth, len(bank_texts))
    docs, scores = retriever.retrieve(bm25s.tokenize(list(query_texts), stopwords="en", show_progress=False),
                                      k=k, show_progress=False)
    out = []
    for d, s in zip(docs, scores, strict=True):
        d = np.asarray(d, dtype=np.int64)
        s = np.asarray(s, dtype=np.float64)
        order = np.lexsort((d, -s))  # deterministic tie-break by index
        out.append(d[order])
    return out


def rank_rrf(runs: Sequence[Sequence[np.ndarray]], depth: int, c: int = 60) -> list[np.ndarray]:
    """Reciprocal-rank fusion: score(d) = sum over runs of 1 / (c + rank), rank from 1 (Cormack et al. 2009)."""
    fused = []
    for per_query in zip(*runs, strict=True):
        score: dict[int, float] = {}
        for ranking in per_query:
            for r, d in enumerate(ranking, start=1):
                score[int(d)] = score.get(int(d), 0.0) + 1.0 / (c + r)
        items = sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]
        fused.append(np.array([d for d, _ in items], dtype=np.int64))
    return fused


def rank_recency(n_cases: int, n_queries: int, depth: int) -> list[np.ndarray]:
    """Newest first (case index = admission order)."""
    r = np.arange(n_cases - 1, max(-1, n_cases - 1 - depth), -1, dtype=np.int64)
    return [r.copy() for _ in range(n_queries)]


def rank_random(n_cases: int, n_queries: int, depth: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng([seed, 99])
    return [rng.permutation(n_cases)[:depth].astype(np.int64) for _ in range(n_queries)]


def rank_oracle(qrels: Sequence[np.ndarray], depth: int) -> list[np.ndarray]:
    """Upper bound that reads the hidden truth: grade 2 first, then 1, then 0; newest first within a grade."""
    out = []
    for rel in qrels:
        n = rel.shape[0]
        key = rel.astype(np.float64) * n + np.arange(n)  # grade dominates, recency breaks ties
        out.append(top_k_from_scores(key, depth))
    return out
