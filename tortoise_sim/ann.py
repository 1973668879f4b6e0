"""Approximate candidates for the vector leg of the cached search (``SimConfig.ann_index="hnsw"``; off by default).

The faithful vector leg (``tortoise_sim.search``) scores every live claim with an embedding: a float32 pass over
the whole matrix picks the rows near or above the 0.3 threshold, which then get the exact float64 cosine. That
pass is linear in the population. This option replaces only the candidate step: a FAISS HNSW graph
(``IndexHNSWFlat``, inner product over L2-normalised vectors, i.e. cosine) returns the top ``ann_candidates``
points for the query, and those candidates go through the same exact rule as before (float64 cosine, threshold
0.3, order by cosine then id, the same near-tie handling, the same RRF with the lexical leg). So every returned
vector hit is a true hit with its exact cosine and rank among the candidates; what the approximation can do is
miss a hit the graph did not return (a recall loss), or return fewer than all hits when more than
``ann_candidates`` points pass the threshold. ``benchmarks/ann.py`` (``memsim bench ann``) measures that recall
against exact search at up to a million points. When ``ann_candidates`` covers the population (and the graph is
connected, as an incrementally built HNSW graph is in practice), the candidates are every embedded live point and
the hits equal the exact path's.

The index follows the store's writes through the search cache: rows appended to the cache are added; a row whose
embedding changed is added again under a new FAISS id (the old id is ignored from then on: HNSW cannot delete);
removed rows and rows filtered out by status drop out because candidates are intersected with the search's
population mask. A rebuilt search cache (mode "rebuild" or an unattributable write) rebuilds the index.

The index is held in memory by the process (the resident service), never written to disk: no durable write.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

__all__ = ["ANN_KINDS", "HnswIndex", "DEFAULT_M", "DEFAULT_EF_CONSTRUCTION", "DEFAULT_EF_SEARCH", "ann_candidates"]

ANN_KINDS = ("hnsw",)
DEFAULT_M = 32
"""HNSW graph degree (FAISS ``M``); chosen with ``memsim bench ann`` (see ``benchmarks/results/ann.md``)."""
DEFAULT_EF_CONSTRUCTION = 100
DEFAULT_EF_SEARCH = 32
"""Search beam width (FAISS ``efSearch``; raised to the candidate count when that is larger)."""


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x[None]
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.where(n > 0, n, 1.0), dtype=np.float32)


class HnswIndex:
    """FAISS ``IndexHNSWFlat`` over unit vectors (inner product = cosine), labelled by caller slots.

    ``put(slots, vecs)`` (re)sets the vectors of ``slots`` (a slot given again gets a new FAISS id, its old one is
    ignored); ``drop(slots)`` forgets them; ``search(q, k)`` returns up to ``k`` distinct live slots by inner
    product, best first, with their inner products."""

    def __init__(self, dim: int, m: int = DEFAULT_M, ef_construction: int = DEFAULT_EF_CONSTRUCTION,
                 ef_search: int = DEFAULT_EF_SEARCH) -> None:
        import faiss

        self._faiss = faiss
        self.dim = dim
        self.index = faiss.IndexHNSWFlat(dim, m, faiss.METRIC_INNER_PRODUCT)
        self.index.hnsw.efConstruction = ef_construction
        self.ef_search = ef_search
        self.slot_of = np.zeros(0, dtype=np.int64)  # FAISS id -> slot
        self.fid_of = np.zeros(0, dtype=np.int64)  # slot -> current FAISS id (-1 = none)
        self.dead = 0  # FAISS ids no longer current (re-put or dropped slots)

    def __len__(self) -> int:
        return int(np.count_nonzero(self.fid_of >= 0))

    def _fit(self, top: int) -> None:
        if top >= len(self.fid_of):
            grown = np.full(max(top + 1, 2 * len(self.fid_of)), -1, dtype=np.int64)
            grown[: len(self.fid_of)] = self.fid_of
            self.fid_of = grown

    def put(self, slots: np.ndarray, vecs: np.ndarray) -> None:
        slots = np.asarray(slots, dtype=np.int64)
        if not len(slots):
            return
        self._fit(int(slots.max()))
        self.drop(slots)
        start = self.index.ntotal
        self.index.add(_unit(vecs))
        self.slot_of = np.concatenate([self.slot_of, slots])
        self.fid_of[slots] = np.arange(start, start + len(slots))

    def drop(self, slots: np.ndarray) -> None:
        slots = np.asarray(slots, dtype=np.int64)
        slots = slots[slots < len(self.fid_of)]
        had = self.fid_of[slots] >= 0
        self.dead += int(np.count_nonzero(had))
        self.fid_of[slots] = -1

    def search(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        total = self.index.ntotal
        if total == 0 or k < 1:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        kk = min(total, k + self.dead)  # room for ids that are no longer current
        params = self._faiss.SearchParametersHNSW(efSearch=max(self.ef_search, kk))
        scores, ids = self.index.search(_unit(q), kk, params=params)
        ids, scores = ids[0], scores[0]
        ok = ids >= 0
        ids, scores = ids[ok], scores[ok]
        slots = self.slot_of[ids]
        current = self.fid_of[slots] == ids
        return slots[current][:k], scores[current][:k]


class _AnnState:
    """The HNSW index of one search cache (``cache``), brought up to the cache's ``seq``."""

    def __init__(self, cache: Any, cfg: Any) -> None:
        self.cache = cache
        self.lock = threading.Lock()
        self.index = HnswIndex(cache.raw.shape[1], m=cfg.ann_m, ef_search=cfg.ann_ef_search)
        self.seq = -1
        self.n = 0

    def sync(self) -> None:
        c = self.cache
        if self.seq == c.seq and self.n == c.n:
            return
        n = c.n
        touched = None if self.seq < 0 else c.log.touched_since(self.seq)
        if touched is None:
            cand = np.arange(n)  # compare every row
        else:
            known = [c.slot[p] for p in touched if p in c.slot]
            cand = np.union1d(np.asarray(known, dtype=np.int64), np.arange(self.n, n))
        has = c.has_emb[cand]
        gone = cand[~has]
        self.index.drop(gone)
        live = cand[has]
        fids = self._fid(live)
        stale = fids < 0
        if np.any(~stale):  # compare with the unit vectors the index holds (no second copy of the matrix)
            held = self.index.index.reconstruct_batch(fids[~stale])
            stale[~stale] = np.any(held != _unit(c.raw[live[~stale]]), axis=1)
        changed = live[stale]
        if len(changed):
            self.index.put(changed, c.raw[changed])
        self.seq, self.n = c.seq, n

    def _fid(self, slots: np.ndarray) -> np.ndarray:
        f = self.index.fid_of
        out = np.full(len(slots), -1, dtype=np.int64)
        inside = slots < len(f)
        out[inside] = f[slots[inside]]
        return out


def ann_candidates(store: Any, cache: Any, emb_sel: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The approximate candidate step of the cached vector leg: ``(emb_sel restricted to the candidates,
    candidate slots ascending)``. The candidates are the top ``SimConfig.ann_candidates`` slots of the HNSW index
    by cosine with ``q`` (see the module doc), intersected with ``emb_sel`` (the search's population mask)."""
    cfg = store.cfg
    if cfg.ann_index not in ANN_KINDS:
        raise ValueError(f"ann_index must be one of {ANN_KINDS} or None, got {cfg.ann_index!r}")
    st = getattr(store, "_ann_state", None)
    if st is None or st.cache is not cache:
        st = _AnnState(cache, cfg)
        store._ann_state = st
    with st.lock:
        st.sync()
        slots, _ = st.index.search(q, int(cfg.ann_candidates))
    slots = slots[slots < len(emb_sel)]
    slots = np.sort(slots[emb_sel[slots]])
    sel = np.zeros_like(emb_sel)
    sel[slots] = True
    return sel, slots
