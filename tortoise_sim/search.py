"""Hybrid point search (spec §2.6 [SIM], after upstream): RRF(k=60) of a lexical and an exact-cosine leg."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .config import READ_TERMINAL
from .store import TortoiseStore
from .text import significant_tokens

__all__ = ["SearchTrace", "search_points", "RRF_K", "VECTOR_THRESHOLD"]

RRF_K = 60
VECTOR_THRESHOLD = 0.3


@dataclass
class SearchTrace:
    breaker_open: bool = False
    lexical_hits: int = 0
    vector_hits: int = 0
    population: int = 0
    index_candidates: int | None = None


def search_points(
    store: TortoiseStore,
    query: str,
    limit: int = 10,
    exclude_statuses: Sequence[str] | None = tuple(READ_TERMINAL),
    exclude_outdated_flag: bool = True,
    *,
    force_breaker_open: bool = False,
) -> tuple[list[dict[str, Any]], SearchTrace]:
    """Default = exact brute-force cosine; ``SimConfig.vector_index=True`` takes the vector leg's candidates
    from Kuzu's (approximate) vector index over the ``PointVec`` side table, then re-ranks them exactly.

    Population = plain claims with content and a status not excluded (NULL status = live). Lexical leg:
    >= 1 shared significant token, by shared count desc, id asc. Vector leg: exact cosine >= 0.3 over stored
    embeddings, desc, id asc. Score = sum 1/(60 + rank); order score desc, id asc; cut to ``limit``.
    ``force_breaker_open`` is the test hook for ``trace.breaker_open`` (returns no hits)."""
    trace = SearchTrace()
    if force_breaker_open:
        trace.breaker_open = True
        return [], trace
    where = "n.is_operator = false AND n.op_type IS NULL AND n.content IS NOT NULL"
    params: dict[str, Any] = {}
    if exclude_statuses:
        where += " AND (n.status IS NULL OR NOT n.status IN $ex)"
        params["ex"] = list(exclude_statuses)
    if exclude_outdated_flag:
        where += " AND (n.outdated IS NULL OR n.outdated = false)"
    rows = store.query(
        f"MATCH (n:Point) WHERE {where} RETURN n.id AS id, n.content AS content, n.pointKind AS point_kind, "
        "n.status AS status, n.session_id AS session_id, n.embedding AS embedding ORDER BY id",
        params,
    )
    trace.population = len(rows)
    qtok = set(significant_tokens(query))
    lexical = []
    for r in rows:
        shared = len(qtok & set(significant_tokens(r["content"])))
        if shared:
            lexical.append((-shared, r["id"]))
    lexical.sort()
    vector: list[tuple[float, str]] = []
    emb_rows = [r for r in rows if r["embedding"] is not None]
    if emb_rows and store.cfg.vector_index:
        # explicit option: approximate HNSW candidates from Kuzu's vector index, re-ranked by exact cosine below
        qv0 = store.embed([query])[0]
        if qv0 is None:
            emb_rows = []
        else:
            store.sync_point_vectors()
            allowed = set(store.query_point_vectors(qv0, max(4 * limit, 50)))
            emb_rows = [r for r in emb_rows if r["id"] in allowed]
            trace.index_candidates = len(allowed)
    if emb_rows:
        qv = store.embed([query])[0]
        if qv is not None:
            q = np.asarray(qv, dtype=np.float64)
            mat = np.asarray([r["embedding"] for r in emb_rows], dtype=np.float64)
            norms = np.linalg.norm(mat, axis=1) * (np.linalg.norm(q) or 1.0)
            cos = np.divide(mat @ q, norms, out=np.zeros(len(emb_rows)), where=norms > 0)
            vector = sorted((-float(c), r["id"]) for c, r in zip(cos, emb_rows, strict=True)
                            if c >= VECTOR_THRESHOLD)
    trace.lexical_hits, trace.vector_hits = len(lexical), len(vector)
    score: dict[str, float] = {}
    for leg in (lexical, vector):
        for rank, (_, pid) in enumerate(leg, start=1):
            score[pid] = score.get(pid, 0.0) + 1.0 / (RRF_K + rank)
    order = sorted(score, key=lambda i: (-score[i], i))[:limit]
    by_id = {r["id"]: r for r in rows}
    hits = []
    for rank, pid in enumerate(order, start=1):
        r = by_id[pid]
        hits.append({"id": pid, "content": r["content"], "point_kind": r["point_kind"], "status": r["status"],
                     "rank": rank, "session_id": r["session_id"], "score": score[pid]})
    return hits, trace
