"""Per-probe results of the selector benchmarks (``memsim bench selectors`` and selector sweeps): the probe table's
rows, the row ids, and the TREC run and qrels files.

A probe is one query of the synthetic world; its metrics are the per-query values of
:func:`benchmarks.metrics.per_query` (``R@1``, ``R@4``, ``R@8``, ``P@8``, ``nDCG@10``, ``MRR``, ``neg_share@8``),
whose means are the benchmark's table. Every metric is a mean of per-query fractions (kind ``mean``: bootstrap
intervals), never a 0/1 outcome.

Ids (no text from the world: the query's question is never stored): ``cluster`` is the query's task family
(``f12``: queries of one family share their relevant cases), ``probe`` the query's index, ``category`` the
family's entity type; in a sweep the cluster is the size (``s0``) and the table has a ``seed``.

TREC files (:mod:`harness.trec`) have one level, ``case``: documents are bank cases ``c<index>`` and the qrels
carry the graded relevance (2 = same family and a correct plan, 1 = same family and a wrong plan; grade 0 is
left out), so trec_eval's ``recall``, ``P``, ``recip_rank`` (relevance level 1) and ``ndcg_cut`` (gain = grade)
give this benchmark's R@k, P@8, MRR and nDCG@10. A run file lists the ranking to the benchmark's full depth,
which MRR reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.metrics import per_query

METRICS = ("R@1", "R@4", "R@8", "P@8", "nDCG@10", "MRR", "neg_share@8")
"""The per-query metrics, in the order of the benchmark's table."""
PAIR_METRICS = ("P@8", "nDCG@10", "MRR", "neg_share@8")
"""The metrics of the Differences section (R@k is P@8 rescaled by each query's number of relevant cases)."""
LEVEL = "case"
STEPS = ("oracle", "np_pooler", "np_mean", "bm25", "rrf", "recency", "random", "pm")
"""The selector steps, in the order they run (``rrf`` fuses the rankings of ``bm25`` and ``np_mean``)."""
STEP_ROWS: dict[str, tuple[str, ...]] = {
    "oracle": ("oracle (hidden truth)",), "np_pooler": ("NP faithful (pooler)",), "np_mean": ("NP mean-pooling",),
    "bm25": ("BM25 (bm25s)",), "rrf": ("hybrid RRF (BM25 + mean)",), "recency": ("recency",), "random": ("random",),
    "pm": ("PM untrained head (bootstrap ckpt)", "PM classifier (burn-in pairs)", "PM classifier (family labels)"),
}
"""The rows each step gives, by display name (``pm`` gives three)."""
ROW_IDS: dict[str, str] = {
    "oracle (hidden truth)": "oracle", "NP faithful (pooler)": "np-pooler", "NP mean-pooling": "np-mean",
    "BM25 (bm25s)": "bm25", "hybrid RRF (BM25 + mean)": "rrf", "recency": "recency", "random": "random",
    "PM untrained head (bootstrap ckpt)": "pm-untrained", "PM classifier (burn-in pairs)": "pm-burn-in",
    "PM classifier (family labels)": "pm-family",
}
"""Display name of each selector row -> its row id (the ``row`` of the probe table and the run file's name)."""
NAMES = {v: k for k, v in ROW_IDS.items()}
ARMS = {"oracle": "oracle", "np-pooler": "np_pooler", "np-mean": "np_mean", "bm25": "bm25", "rrf": "rrf",
        "recency": "recency", "random": "random", "pm-untrained": "pm", "pm-burn-in": "pm", "pm-family": "pm"}
"""Row id -> the selector step that produced it (the probe table's ``arm``)."""
PAIRS: tuple[tuple[str, str], ...] = (
    ("np-pooler", "np-mean"),
    ("np-pooler", "bm25"),
    ("np-mean", "bm25"),
    ("rrf", "bm25"),
    ("rrf", "np-mean"),
    ("pm-burn-in", "pm-untrained"),
    ("pm-burn-in", "random"),
    ("pm-family", "pm-burn-in"),
    ("pm-family", "random"),
)
"""The comparator pairs of ``memsim bench selectors``, fixed before any run: NP's faithful pooling against the
fixed variant (mean pooling), each learned selector against the named baselines BM25 and hybrid RRF (which
against its two parts), and the PM classifier rows against the untrained head, random and each other."""


def row_id(name: str) -> str:
    """The row id of a selector's display name (a name without an id is used as it is)."""
    return ROW_IDS.get(name, name)


def name_of(row: str) -> str:
    return NAMES.get(row, row)


def probe_rows(rankings: Mapping[str, Sequence[Sequence[int]]], qrels: Sequence[np.ndarray],
               positive_label: np.ndarray, query_family: Sequence[int], entity_types: Sequence[str], *,
               cluster: Callable[[int], str] | None = None, seed: int | None = None) -> list[dict[str, Any]]:
    """One flat probe-table row per (query, row id): the ids and every per-query metric. ``cluster(j)`` names
    query j's cluster (default: its family ``f<family>``); ``seed`` is set in a sweep."""
    out: list[dict[str, Any]] = []
    for row, ranks in rankings.items():
        per = per_query([list(r) for r in ranks], qrels, positive_label)
        for j, rel in enumerate(qrels):
            fam = int(query_family[j])
            rec: dict[str, Any] = {"workload": "selectors", "cluster": cluster(j) if cluster else f"f{fam}",
                                   "probe": str(j), "category": str(entity_types[fam]), "abstention": False,
                                   "has_evidence": bool((rel >= 1).any()), "row": row, "arm": ARMS.get(row, row)}
            if seed is not None:
                rec["seed"] = int(seed)
            rec.update({m: per[m][j] for m in METRICS if m in per})
            out.append(rec)
    return out


def trec_inputs(rankings: Mapping[str, Sequence[Sequence[int]]], qrels: Sequence[np.ndarray],
                qids: Sequence[str]) -> tuple[dict[str, dict[str, dict[str, list[str]]]],
                                              dict[str, dict[str, dict[str, int]]]]:
    """``(runs, qrels)`` for :func:`harness.trec.write_trec` at the ``case`` level: each ranking in full, the
    graded qrels of every query (cases of grade >= 1)."""
    runs = {row: {LEVEL: {qid: [f"c{int(i)}" for i in r] for qid, r in zip(qids, ranks, strict=True)}}
            for row, ranks in rankings.items()}
    rel = {LEVEL: {qid: {f"c{int(i)}": int(g[i]) for i in np.flatnonzero(g >= 1)}
                   for qid, g in zip(qids, qrels, strict=True)}}
    return runs, rel


def write_trec_files(folder: Path, runs: Mapping[str, Any], qrels: Mapping[str, Any]) -> list[Path]:
    """The run and qrels files in ``folder`` (``runs/<row>.case.trec``, ``qrels.case.trec``)."""
    from harness.trec import write_trec

    return write_trec(folder, runs, qrels)


def data_label(world_config: Mapping[str, Any], n_cases: int, n_queries: int) -> str:
    """The data label of a selectors table: the world's parameters and sizes (a synthetic world, no file)."""
    keys = ("n_families", "seed", "p_correct", "label_noise", "wrong_sibling_share")
    return "cbr-world " + " ".join(f"{k}={world_config[k]}" for k in keys if k in world_config) + \
        f" n_cases={n_cases} n_queries={n_queries}"
