"""Hybrid point search (spec §2.6 [SIM], after upstream): RRF(k=60) of a lexical and an exact-cosine leg."""

from __future__ import annotations

import bisect
import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import changes
from .config import READ_TERMINAL
from .store import SCAN_CHUNK, TortoiseStore
from .text import significant_tokens

__all__ = ["SearchTrace", "search_points", "RRF_K", "VECTOR_THRESHOLD", "CacheGuard", "cache_update"]

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
    cached: bool | None = None,
) -> tuple[list[dict[str, Any]], SearchTrace]:
    """Default = exact brute-force cosine; ``SimConfig.vector_index=True`` takes the vector leg's candidates
    from Kuzu's (approximate) vector index over the ``PointVec`` side table, then re-ranks them exactly.

    Population = plain claims with content and a status not excluded (NULL status = live). Lexical leg:
    >= 1 shared significant token, by shared count desc, id asc. Vector leg: exact cosine >= 0.3 over stored
    embeddings, desc, id asc. Score = sum 1/(60 + rank); order score desc, id asc; cut to ``limit``.
    ``force_breaker_open`` is the test hook for ``trace.breaker_open`` (returns no hits).

    ``cached`` (default ``SimConfig.search_cache``, True): answer from the exact per-process cache of
    :func:`_search_cached` (same hits, order, scores and trace counts); False = the per-call Kuzu scan below,
    kept as the reference. ``vector_index=True`` always takes the scan path."""
    trace = SearchTrace()
    if force_breaker_open:
        trace.breaker_open = True
        return [], trace
    use_cache = store.cfg.search_cache if cached is None else cached
    if use_cache and not store.cfg.vector_index:
        out = _search_cached(store, query, limit, exclude_statuses, exclude_outdated_flag)
        if out is not None:
            return out
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


# ---------------------------------------------------------------------------------------------------------------
# Exact per-process cache (``SimConfig.search_cache=True``, the default)
#
# The scan above reads every live claim's content and embedding out of Kuzu, tokenises every content and builds
# the float64 matrix on every call. The cache keeps, per store, the whole claim population (every plain claim
# with content, whatever its status), a token inverted index and the float32 embeddings as stored, and follows
# the store's writes: with the default ``search_cache_mode="incremental"`` the Points a write touched (named by
# ``tortoise_sim.changes``) are re-read by primary key and applied in place (new claims appended, status /
# content / embedding changes updated, removed ones tombstoned); a write it cannot attribute, or mode
# ``"rebuild"`` (the previous behaviour, kept to measure against), rebuilds the whole cache. Filters are boolean
# masks.
#
# Exactness of the vector leg. Cosines from a subset of rows are not bit-identical to the scan's (BLAS gemv
# results depend on a row's position in the matrix; measured). So: (1) a float32 pass over the stored matrix
# (divided by the row norms) keeps every row within ``_MARGIN`` of the threshold (float32 error on a 384-d dot
# product is < 1e-4 of the norms); (2) those candidates get float64 cosines computed the scan's way; they differ
# from the scan's by < 1e-12, so the hit set and the order agree with the scan's unless two hits lie within
# ``_TOL`` of each other or one lies within ``_TOL`` of the threshold; (3) in that case, when the near tie could
# change a returned hit or score (or the hit count near the threshold), the vector leg is recomputed exactly as
# the scan does it, on a float64 matrix rebuilt for that call from the float32 rows (same rows in the scan's id
# order, same values), so the result is the scan's bit for bit. Only the float32 matrix is kept.
#
# Near-tie engines (``store.search_tie_mode``): "rows" (default) recomputes only the rows whose order or hit
# membership the near tie leaves open, bit-identical to the scan: a row's scan cosine depends on its position in
# the scan's matrix only through the BLAS kernel's fixed row blocks, so the scan's value of the row at position p
# is the value computed on the aligned chunk of scan rows around p (the same rows, the same float64 values; the
# last chunk ends where the scan's matrix ends). That holds for a single-threaded BLAS (a threaded gemv splits
# rows at unaligned offsets), so "rows" is used only while every BLAS pool reports one thread and a one-time probe
# on random matrices (every length modulo 32, every position) picks the smallest chunk of ``_CHUNKS`` for which
# chunk == whole matrix on this BLAS; otherwise, and with mode "rescan" (the previous engine, kept to measure
# against), the whole vector leg is recomputed as above. The chunks a search needs are stacked into a few
# products (a chunk placed at a multiple of the chunk size keeps its rows' values; the probe checks that too).
# Rows whose cosines are >= ``_TOL`` apart (and >= ``_TOL`` from the threshold) keep their order and membership
# from the fast pass: its cosines are within 1e-12 of the scan's.
#
# Distinct rows (``store.search_dedup``, default True): where many stored texts repeat (at most half as many
# distinct embedding rows as slots, from ``_DEDUP_MIN_ROWS`` slots up; looked for when the resident service
# refreshes its caches, or once a cache has answered a few searches: a one-shot process does not pay the
# ``np.unique`` over its rows), the float32 pass and the candidates'
# float64 cosines are computed once per distinct row and spread to the slots holding it (the same values within
# the bounds above; near ties are still settled from the scan's own per-position values). On a store of short
# template decisions at 1e5 points (2,000 distinct texts) this replaced a 1e5-row pass and a float64 copy of
# ~20,000 candidates per search (measured with ``memsim bench serve``'s decision store).

_MARGIN = 1e-3
_TOL = 1e-9
CACHE_MODES = ("incremental", "rebuild")
TIE_MODES = ("rows", "rescan")


def cache_mode(store: TortoiseStore) -> str:
    """How the search and why-block caches follow writes: ``store.search_cache_mode`` (a per-store attribute, set
    it to "rebuild" for the previous rebuild-on-every-write behaviour), else "incremental"; validated."""
    mode = getattr(store, "search_cache_mode", None) or "incremental"
    if mode not in CACHE_MODES:
        raise ValueError(f"search_cache_mode must be one of {CACHE_MODES}, got {mode!r}")
    return mode


def tie_mode(store: TortoiseStore) -> str:
    """How a near tie is resolved exactly: ``store.search_tie_mode`` (a per-store attribute: "rows" = recompute
    only the undecided rows, "rescan" = the previous whole-matrix recomputation), else "rows"; validated."""
    mode = getattr(store, "search_tie_mode", None) or "rows"
    if mode not in TIE_MODES:
        raise ValueError(f"search_tie_mode must be one of {TIE_MODES}, got {mode!r}")
    return mode


_SPLIT_MIN_ROWS = 32_768  # below this the float32 pass is a few milliseconds: one thread


def pass_threads(store: TortoiseStore) -> int:
    """Threads of the float32 pass: ``store.search_pass_threads`` (1 = one matrix-vector product, the previous
    engine), else 2 where this process may run on two or more CPUs. The pass only picks candidates with a margin
    (every hit is re-scored in float64 afterwards, see above), so splitting the rows between threads changes no
    output; it halves a memory-bound scan of the whole matrix."""
    n = getattr(store, "search_pass_threads", None)
    if n is None:
        try:
            n = 2 if len(os.sched_getaffinity(0)) >= 2 else 1
        except (AttributeError, OSError):
            n = 2 if (os.cpu_count() or 1) >= 2 else 1
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"search_pass_threads must be a positive int, got {n!r}")
    return n


_POOL: dict[int, Any] = {}
_POOL_LOCK = threading.Lock()


def _dots(mat: np.ndarray, v: np.ndarray, threads: int) -> np.ndarray:
    """``mat @ v``; with ``threads`` > 1 and enough rows, row blocks in parallel (numpy releases the GIL)."""
    if threads <= 1 or len(mat) < _SPLIT_MIN_ROWS:
        return mat @ v
    from concurrent.futures import ThreadPoolExecutor

    with _POOL_LOCK:
        pool = _POOL.get(threads)
        if pool is None:
            pool = _POOL[threads] = ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="search-pass")
    bounds = np.linspace(0, len(mat), threads + 1).astype(int)
    out = np.empty(len(mat), dtype=np.result_type(mat, v))
    futs = [pool.submit(np.matmul, mat[a:b], v, out=out[a:b]) for a, b in zip(bounds[1:-1], bounds[2:], strict=True)]
    np.matmul(mat[: bounds[1]], v, out=out[: bounds[1]])
    for f in futs:
        f.result()
    return out


class _SearchCache:
    """Claim population snapshot at ``seq`` (= ``store.write_seq`` when built or last brought up to date).

    Rows are slots: the population in id order when built, then appended rows; ``alive`` marks current members
    (a removed claim keeps a dead slot until the next rebuild). ``py_rank`` is each slot's rank in Python string
    order (the scan's tie-break and, Kuzu comparing strings bytewise, its ORDER BY id)."""

    def __init__(self, store: TortoiseStore) -> None:
        self.log = changes.attach(store)
        self.seq = store.write_seq
        # read in id ranges (TortoiseStore.scan_arrow; the same table as one statement): a whole-store result with
        # the embeddings left ~700 MiB of Kuzu memory resident at 1e5 points after it was closed (measured)
        tbl = store.scan_arrow(
            "n.is_operator = false AND n.op_type IS NULL AND n.content IS NOT NULL",
            "n.id AS id, n.content AS content, n.pointKind AS point_kind, n.status AS status, "
            "n.session_id AS session_id, n.outdated AS outdated, n.embedding AS embedding",
            chunk=getattr(store, "scan_chunk", SCAN_CHUNK),
        )
        self.ids: list[str] = tbl.column("id").to_pylist()
        self.contents: list[str] = tbl.column("content").to_pylist()
        self.kinds: list[str | None] = tbl.column("point_kind").to_pylist()
        self.statuses: list[str | None] = tbl.column("status").to_pylist()
        self.session_ids: list[str | None] = tbl.column("session_id").to_pylist()
        n = len(self.ids)
        self.n = n
        self.sorted_ids = list(self.ids)
        # incremental updates rank new ids by Python order, which must be Kuzu's ORDER BY id order
        self.orderable = all(self.sorted_ids[i] < self.sorted_ids[i + 1] for i in range(n - 1))
        if not self.orderable:
            self.sorted_ids.sort()
        self.slot = {pid: i for i, pid in enumerate(self.ids)}
        self.alive = np.ones(n, dtype=bool)
        self.status_code_of: dict[str | None, int] = {}
        self.status_codes = np.array([self._code(st) for st in self.statuses], dtype=np.int32)
        self.outdated = np.array([o is True for o in tbl.column("outdated").to_pylist()], dtype=bool)
        self.py_rank = np.empty(n, dtype=np.int64)
        self.py_rank[sorted(range(n), key=self.ids.__getitem__)] = np.arange(n)
        postings: dict[str, list[int]] = {}
        for i, c in enumerate(self.contents):
            for t in set(significant_tokens(c)):
                postings.setdefault(t, []).append(i)
        self.postings = {t: np.asarray(v, dtype=np.int64) for t, v in postings.items()}
        col = tbl.column("embedding").combine_chunks()
        has = ~np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool) if n else np.zeros(0, bool)
        self.has_emb = has
        self.dim = col.type.list_size if n else 0
        if has.any():
            vals = np.asarray(col.values.to_numpy(zero_copy_only=False), dtype=np.float32)
            vals = vals[col.offset * self.dim:(col.offset + n) * self.dim].reshape(n, self.dim)
            self.raw = np.ascontiguousarray(np.where(has[:, None], vals, np.float32(0.0)))  # stored FLOAT values
        else:
            self.raw = np.zeros((n, self.dim), dtype=np.float32)
        self.norms = np.linalg.norm(self.raw.astype(np.float64), axis=1) if n else np.zeros(0)
        self.uniq: _UniqueRows | None = None  # built by prepare_dedup (see there)
        self._dedup_tried = False
        self._reserve(n + _slack(n))  # room for appended rows: no reallocation on the first writes
        self._masks: dict[tuple[tuple[str, ...], bool], np.ndarray] = {}
        self._pass: tuple[Any, ...] | None = None  # (query, seq, n, q, c32) of the last float32 pass
        self._by_rank: np.ndarray | None = None  # slots in id order (inverse of py_rank), until the next write
        self.pass_threads = pass_threads(store)
        self.searches = 0  # searches answered from this cache
        self.exact_fallbacks = 0  # searches whose vector leg was recomputed the scan's way (near ties)
        self.exact_rows = 0  # rows recomputed by the "rows" near-tie engine (all its fallbacks together)
        self.updates = 0  # incremental refreshes applied
        self.updated_rows = 0

    def prepare_dedup(self, store: TortoiseStore) -> None:
        """Find the distinct rows (once per cache, where :func:`dedup_mode` allows): called by the long-lived
        resident service when it refreshes its caches, and by a search once the cache has answered
        ``_DEDUP_AFTER_SEARCHES`` searches, so a one-shot process (the cold hook: one prompt) never pays it."""
        if self._dedup_tried:
            return
        self._dedup_tried = True
        if dedup_mode(store):
            self.uniq = _UniqueRows.build(self.raw, self.n)

    def _code(self, status: str | None) -> int:
        code = self.status_code_of.get(status)
        if code is None:
            code = self.status_code_of[status] = len(self.status_code_of)
        return code

    @property
    def nbytes(self) -> int:
        """Bytes held by the numeric arrays (the float32 matrix dominates)."""
        arrays = [self.raw, self.norms, self.alive, self.outdated, self.py_rank, self.has_emb, self.status_codes]
        return int(sum(a.nbytes for a in arrays) + sum(v.nbytes for v in self.postings.values()))

    # -- incremental maintenance ----------------------------------------------------------------------------------
    def refresh(self, store: TortoiseStore) -> bool:
        """Bring the cache up to ``store.write_seq`` from the touched rows; False = a rebuild is needed."""
        if not self.orderable:
            return False
        touched = self.log.touched_since(self.seq)
        if touched is None:
            return False
        seq = store.write_seq
        for pid in sorted(touched):
            self._apply(pid, changes.point_row(store, pid))
        self.seq = seq
        self._masks.clear()
        self._pass = self._by_rank = None
        self.updates += 1
        self.updated_rows += len(touched)
        return True

    def _apply(self, pid: str, row: dict[str, Any] | None) -> None:
        member = (row is not None and row["is_operator"] is False and row["op_type"] is None
                  and row["content"] is not None)
        i = self.slot.get(pid)
        if not member:
            if i is not None:
                self.alive[i] = False
                del self.slot[pid]
            return
        assert row is not None
        if i is None:
            i = self._append(pid)
        else:
            old = set(significant_tokens(self.contents[i]))
            for t in old:
                post = self.postings[t]
                self.postings[t] = post[post != i]
        self.contents[i] = row["content"]
        self.kinds[i] = row["pointKind"]
        self.statuses[i] = row["status"]
        self.status_codes[i] = self._code(row["status"])
        self.session_ids[i] = row["session_id"]
        self.outdated[i] = row["outdated"] is True
        for t in set(significant_tokens(row["content"])):
            post = self.postings.get(t)
            self.postings[t] = np.array([i], dtype=np.int64) if post is None else np.append(post, i)
        emb = row["embedding"]
        if emb is None:
            self.has_emb[i] = False
            if self.raw.shape[1]:
                self.raw[i] = 0.0
            self.norms[i] = 0.0
        else:
            vec = np.asarray(emb, dtype=np.float32)
            if self.raw.shape[1] != vec.shape[0]:
                if self.has_emb[: self.n].any():
                    raise ValueError("embedding dimension changed")
                self.raw = np.zeros((self.raw.shape[0], vec.shape[0]), dtype=np.float32)
                self.dim = vec.shape[0]
                self.uniq = None  # the distinct rows were of the old width: no dedup until the next rebuild
            self.raw[i] = vec
            self.has_emb[i] = True
            self.norms[i] = float(np.linalg.norm(vec.astype(np.float64)))
        if self.uniq is not None:
            self.uniq.uid[i] = self.uniq.find_or_add(self.raw[i])

    def _append(self, pid: str) -> int:
        i = self.n
        if i >= self.raw.shape[0]:
            self._reserve(i + _slack(i))
        self.n = i + 1
        self.ids.append(pid)
        self.contents.append("")
        self.kinds.append(None)
        self.statuses.append(None)
        self.session_ids.append(None)
        self.alive[i] = True
        self.slot[pid] = i
        r = bisect.bisect_left(self.sorted_ids, pid)
        self.sorted_ids.insert(r, pid)
        ranks = self.py_rank[:i]
        ranks[ranks >= r] += 1
        self.py_rank[i] = r
        return i

    def _reserve(self, cap: int) -> None:
        self.raw = _grow(self.raw, cap)
        self.norms, self.alive = _grow(self.norms, cap), _grow(self.alive, cap)
        self.outdated, self.has_emb = _grow(self.outdated, cap), _grow(self.has_emb, cap)
        self.py_rank, self.status_codes = _grow(self.py_rank, cap), _grow(self.status_codes, cap)
        if self.uniq is not None:
            self.uniq.uid = _grow(self.uniq.uid, cap)

    def by_rank(self) -> np.ndarray:
        """Slot indices in id order (``py_rank`` is a permutation of the slots)."""
        if self._by_rank is None or len(self._by_rank) != self.n:
            inv = np.empty(self.n, dtype=np.int64)
            inv[self.py_rank[: self.n]] = np.arange(self.n)
            self._by_rank = inv
        return self._by_rank

    def float32_pass(self, query: str, q: np.ndarray) -> np.ndarray:
        """Every slot's float32 cosine estimate (row . q/|q| / row norm); the filters do not enter it, so the
        volunteer pipeline's second search (same query, other filters) reuses the first one's pass."""
        p = self._pass
        if p is not None and p[0] == query and p[1] == self.seq and p[2] == self.n and np.array_equal(p[3], q):
            return p[4]
        qn = np.linalg.norm(q) or 1.0
        q32 = (q / qn).astype(np.float32)
        norms = self.norms[: self.n]
        u = self.uniq
        with np.errstate(divide="ignore", invalid="ignore"):
            if u is None:
                c32 = _dots(self.raw[: self.n], q32, self.pass_threads) / np.where(norms > 0, norms, 1.0).astype(
                    np.float32)
            else:  # once per distinct row, then spread to the slots holding it
                un = u.norms[: u.u]
                c32 = (_dots(u.rows[: u.u], q32, self.pass_threads) / np.where(un > 0, un, 1.0).astype(
                    np.float32))[u.uid[: self.n]]
        self._pass = (query, self.seq, self.n, q, c32)
        return c32

    def fast_cos(self, cand: np.ndarray, q: np.ndarray, qn: float) -> np.ndarray:
        """float64 cosines of the ``cand`` slots, within 1e-12 of the scan's (see the exactness note above): per
        distinct row when the cache deduplicates (a row's cosine does not depend on which slot holds it), in row
        blocks of ``_COS_BLOCK`` (no float64 copy of every candidate at once)."""
        u = self.uniq
        if u is None:
            cn = self.norms[cand] * qn
            return np.divide(_gathered_dots(self.raw, cand, q), cn, out=np.zeros(len(cand)), where=cn > 0)
        uc = u.uid[cand]
        need = np.zeros(u.u, dtype=bool)
        need[uc] = True
        uu = np.flatnonzero(need)
        cn = u.norms[uu] * qn
        full = np.zeros(u.u)
        full[uu] = np.divide(_gathered_dots(u.rows, uu, q), cn, out=np.zeros(len(uu)), where=cn > 0)
        return full[uc]

    def mask(self, exclude_statuses: Sequence[str] | None, exclude_outdated_flag: bool) -> np.ndarray:
        key = (tuple(exclude_statuses) if exclude_statuses else (), bool(exclude_outdated_flag))
        m = self._masks.get(key)
        if m is None:
            m = self.alive[: self.n].copy()
            codes = [self.status_code_of[st] for st in set(key[0]) if st in self.status_code_of]
            if codes:
                m &= ~np.isin(self.status_codes[: self.n], codes)
            if key[1]:
                m &= ~self.outdated[: self.n]
            self._masks[key] = m
        return m


_DEDUP_MIN_ROWS = 4096  # below this every pass is a few milliseconds: no dedup
_DEDUP_MAX_SHARE = 0.5  # dedup only when the distinct rows are at most this share of the slots
_DEDUP_AFTER_SEARCHES = 4  # a cache that answered this many searches looks for its distinct rows
_COS_BLOCK = 4096  # candidate rows converted to float64 per matrix-vector product


def dedup_mode(store: TortoiseStore) -> bool:
    """Whether the search cache computes the float32 pass and the candidates' float64 cosines once per distinct
    embedding row: ``store.search_dedup`` (False = once per slot, the previous engine), else True. Either way the
    cosines are within 1e-12 of the scan's and near ties are settled from the scan's own values, so no output
    changes; it pays off where many stored texts repeat (templates), and is skipped when the distinct rows are
    more than half of the slots (then the cache holds no second copy of them)."""
    mode = getattr(store, "search_dedup", None)
    if mode is None:
        return True
    if not isinstance(mode, bool):
        raise ValueError(f"search_dedup must be a bool, got {mode!r}")
    return mode


class _UniqueRows:
    """The distinct float32 rows of a search cache's matrix (``rows[:u]``, with their float64 norms) and each
    slot's row index ``uid``; rows added by later writes are found by their bytes (a hash index, built on the
    first write) or appended. A row that no slot holds any more stays until the next rebuild."""

    def __init__(self, rows: np.ndarray, uid: np.ndarray) -> None:
        self.rows = rows
        self.u = len(rows)
        self.norms = np.linalg.norm(rows.astype(np.float64), axis=1) if self.u else np.zeros(0)
        self.uid = uid
        self._index: dict[int, list[int]] | None = None

    @classmethod
    def build(cls, raw: np.ndarray, n: int) -> _UniqueRows | None:
        """The distinct rows of ``raw[:n]`` (``uid`` sized to ``raw``'s capacity), or None below
        ``_DEDUP_MIN_ROWS`` slots or above ``_DEDUP_MAX_SHARE`` distinct rows."""
        if n < _DEDUP_MIN_ROWS or not raw.shape[1]:
            return None
        keys = np.ascontiguousarray(raw[:n]).view(np.dtype((np.void, raw.shape[1] * raw.itemsize))).ravel()
        _, first, inv = np.unique(keys, return_index=True, return_inverse=True)
        if len(first) > _DEDUP_MAX_SHARE * n:
            return None
        uid = np.zeros(len(raw), dtype=np.int64)
        uid[:n] = np.asarray(inv, dtype=np.int64).ravel()
        return cls(np.ascontiguousarray(raw[first]), uid)

    def find_or_add(self, vec: np.ndarray) -> int:
        if self._index is None:
            self._index = {}
            for j in range(self.u):
                self._index.setdefault(hash(self.rows[j].tobytes()), []).append(j)
        b = vec.tobytes()
        h = hash(b)
        for j in self._index.get(h, ()):
            if self.rows[j].tobytes() == b:
                return j
        j = self.u
        if j >= len(self.rows):
            self.rows, self.norms = _grow(self.rows, j + _slack(j)), _grow(self.norms, j + _slack(j))
        self.rows[j] = vec
        self.norms[j] = float(np.linalg.norm(vec.astype(np.float64)))
        self.u = j + 1
        self._index.setdefault(h, []).append(j)
        return j


def _gathered_dots(mat: np.ndarray, idx: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``mat[idx].astype(float64) @ q`` in blocks of ``_COS_BLOCK`` rows."""
    out = np.empty(len(idx))
    for s in range(0, len(idx), _COS_BLOCK):
        out[s:s + _COS_BLOCK] = mat[idx[s:s + _COS_BLOCK]].astype(np.float64) @ q
    return out


def _slack(n: int) -> int:
    return max(1024, n // 8)


def _grow(a: np.ndarray, cap: int) -> np.ndarray:
    out = np.zeros((cap,) + a.shape[1:], dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


class CacheGuard:
    """Lets readers use the read caches of a store as they stand while a writer works, and makes every update of
    those caches wait until such readers are done (the resident service's reads during a write).

    A writer ``open()``s the guard when the caches are current; a reader ``enter()``s (True) only while it is
    open and ``leave()``s when done. Any cache update (:func:`cache_update`, used by the search and why-block
    caches before they change in place or are replaced) closes the guard and waits for the readers inside, so a
    reader never sees a half-updated cache; ``close()`` does the same at the end of the write."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._open = False
        self._readers = 0

    def open(self) -> None:
        with self._cond:
            self._open = True

    def enter(self) -> bool:
        with self._cond:
            if not self._open:
                return False
            self._readers += 1
            return True

    def leave(self) -> None:
        with self._cond:
            self._readers -= 1
            if not self._readers:
                self._cond.notify_all()

    def close(self) -> None:
        """No new readers; returns once the readers inside have left."""
        with self._cond:
            self._open = False
            while self._readers:
                self._cond.wait()

    @property
    def is_open(self) -> bool:
        return self._open


@contextlib.contextmanager
def cache_update(store: TortoiseStore) -> Iterator[None]:
    """Around any change of ``store``'s read caches: closes the store's :class:`CacheGuard` (``store._cache_guard``,
    when one is attached) and waits for its readers first."""
    guard = getattr(store, "_cache_guard", None)
    if guard is not None:
        guard.close()
    yield


def search_cache_for(store: TortoiseStore) -> _SearchCache:
    """The store's cache brought up to ``store.write_seq``: updated from the touched rows (mode "incremental"),
    or rebuilt (mode "rebuild", or a write the change log cannot attribute)."""
    return cache_following_writes(store, "_search_cache", _SearchCache)


def cache_following_writes(store: TortoiseStore, attr: str, build: Any) -> Any:
    """The cache kept on ``store`` under ``attr``, brought up to ``store.write_seq``: returned as is when current,
    else ``cache.refresh(store)`` applies the change log (mode "incremental"), else ``build(store)`` replaces it
    (mode "rebuild", no cache yet, or a write the log cannot attribute). Shared by the search and why caches."""
    cache = getattr(store, attr, None)
    if cache is not None and cache.seq == store.write_seq:
        return cache
    with cache_update(store):
        if cache is None or cache_mode(store) == "rebuild" or not cache.refresh(store):
            cache = build(store)
            setattr(store, attr, cache)
    return cache


def _search_cached(
    store: TortoiseStore,
    query: str,
    limit: int,
    exclude_statuses: Sequence[str] | None,
    exclude_outdated_flag: bool,
) -> tuple[list[dict[str, Any]], SearchTrace] | None:
    """The cached twin of the scan; returns None (=> use the scan) for inputs it does not model exactly."""
    if not isinstance(limit, int) or limit < 1 or not isinstance(query, str):
        return None
    if exclude_statuses and not all(isinstance(s, str) for s in exclude_statuses):
        return None
    c = search_cache_for(store)
    c.searches += 1
    if c.searches > _DEDUP_AFTER_SEARCHES:
        c.prepare_dedup(store)
    trace = SearchTrace()
    m = c.mask(exclude_statuses, exclude_outdated_flag)
    trace.population = int(m.sum())
    # lexical leg: shared significant tokens via the inverted index
    qtok = set(significant_tokens(query))
    lists = [c.postings[t] for t in qtok if t in c.postings]
    if lists:
        shared = np.bincount(np.concatenate(lists), minlength=c.n)[: c.n]
        shared[~m] = 0
    else:
        shared = np.zeros(c.n, dtype=np.int64)
    lex_idx = _lexical_order(c, shared)
    # vector leg
    vec_idx = np.zeros(0, dtype=np.int64)
    cand, cos = np.zeros(0, dtype=np.int64), np.zeros(0)
    ties: list[tuple[int, int]] = []  # (first, last) 0-based positions of near-tie runs in the vector order
    exact_needed = False
    q = None
    emb_sel = m & c.has_emb[: c.n]
    if emb_sel.any():
        qv = store.embed([query])[0]
        if qv is not None:
            q = np.asarray(qv, dtype=np.float64)
            qn = np.linalg.norm(q) or 1.0
            if store.cfg.ann_index is not None:  # approximate candidates (tortoise_sim.ann), re-ranked exactly below
                emb_sel, cand = _ann_candidates(store, c, emb_sel, q)
            else:
                c32 = c.float32_pass(query, q)
                cand = np.flatnonzero(emb_sel & (c32 >= VECTOR_THRESHOLD - _MARGIN))
            if len(cand):
                cos = c.fast_cos(cand, q, qn)
                if np.any(np.abs(cos - VECTOR_THRESHOLD) < _TOL):
                    exact_needed = True  # hit membership (and the trace count) could differ
                hit = cos >= VECTOR_THRESHOLD
                pos, hcos = cand[hit], cos[hit]
                order = np.lexsort((c.py_rank[pos], -hcos))
                vec_idx, hcos = pos[order], hcos[order]
                close = np.flatnonzero(hcos[:-1] - hcos[1:] < _TOL)
                for j in close.tolist():
                    if ties and ties[-1][1] == j:
                        ties[-1] = (ties[-1][0], j + 1)
                    else:
                        ties.append((j, j + 1))
    score, ordered = _rrf(c, lex_idx, vec_idx, limit)
    if ties and not exact_needed:
        cut = score[ordered[-1]] if len(ordered) == limit else -np.inf
        lex_part = np.zeros(c.n)
        lex_part[lex_idx] = 1.0 / (RRF_K + np.arange(1, len(lex_idx) + 1))
        for first, last in ties:
            best = lex_part[vec_idx[first:last + 1]] + 1.0 / (RRF_K + first + 1)
            if np.any(best >= cut):
                exact_needed = True
                break
    if exact_needed and q is not None:
        c.exact_fallbacks += 1
        if tie_mode(store) == "rows" and _rows_exact_ok():
            vec_idx, score, ordered = _vector_leg_rows(c, emb_sel, q, cand, cos, lex_idx, limit)
        else:
            vec_idx = _vector_leg_as_scan(c, emb_sel, q)
            score, ordered = _rrf(c, lex_idx, vec_idx, limit)
    trace.lexical_hits, trace.vector_hits = len(lex_idx), len(vec_idx)
    hits = []
    for rank, i in enumerate(ordered.tolist(), start=1):
        hits.append({"id": c.ids[i], "content": c.contents[i], "point_kind": c.kinds[i], "status": c.statuses[i],
                     "rank": rank, "session_id": c.session_ids[i], "score": float(score[i])})
    return hits, trace


def _rrf(c: _SearchCache, lex_idx: np.ndarray, vec_idx: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores (slot-sized; 0 = unscored) and the top ``limit`` slots; same float operations as the scan's dict
    accumulation (0.0 + lexical, then + vector)."""
    score = np.zeros(c.n)
    score[lex_idx] += 1.0 / (RRF_K + np.arange(1, len(lex_idx) + 1))
    score[vec_idx] += 1.0 / (RRF_K + np.arange(1, len(vec_idx) + 1))
    scored = np.flatnonzero(score > 0)  # every scored id has a positive score
    if len(scored) > 4 * limit:  # only the top ``limit`` are ordered: every slot scoring at least the limit-th score
        vals = score[scored]
        kth = np.partition(vals, len(vals) - limit)[len(vals) - limit]
        scored = scored[vals >= kth]
    ordered = scored[np.lexsort((c.py_rank[scored], -score[scored]))][:limit]
    return score, ordered


def _lexical_order(c: _SearchCache, shared: np.ndarray) -> np.ndarray:
    """Slots with a shared token, by shared count desc, then id (the scan's lexical order): one pass per distinct
    count over the slots in id order (stable), instead of a two-key sort of every hit."""
    by_rank = c.by_rank()
    in_order = shared[by_rank]
    counts = np.unique(in_order[in_order > 0])[::-1]
    if not len(counts):
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([by_rank[in_order == k] for k in counts.tolist()])


def _vector_leg_as_scan(c: _SearchCache, emb_sel: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The scan's vector leg, bit for bit: the same float64 matrix (filtered rows with an embedding, in id order),
    built for this call from the float32 rows and dropped after it, the same norm / matmul / divide. Hits are
    ordered by (-cosine, id) like the scan's sort."""
    pos = np.flatnonzero(emb_sel)
    pos = pos[np.argsort(c.py_rank[pos], kind="stable")]
    mat = np.ascontiguousarray(c.raw[pos], dtype=np.float64)
    norms = np.linalg.norm(mat, axis=1) * (np.linalg.norm(q) or 1.0)
    cos = np.divide(mat @ q, norms, out=np.zeros(len(pos)), where=norms > 0)
    hit = np.flatnonzero(cos >= VECTOR_THRESHOLD)
    hp, hc = pos[hit], cos[hit]
    return hp[np.lexsort((c.py_rank[hp], -hc))]


def _scan_cos(mat: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The scan's cosine step on a float64 matrix (same operations as :func:`search_points`)."""
    norms = np.linalg.norm(mat, axis=1) * (np.linalg.norm(q) or 1.0)
    return np.divide(mat @ q, norms, out=np.zeros(len(mat)), where=norms > 0)


def _vector_leg_rows(c: _SearchCache, emb_sel: np.ndarray, q: np.ndarray, cand: np.ndarray, cos: np.ndarray,
                     lex_idx: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The scan's vector leg and RRF result, bit for bit, recomputing only undecided rows; returns
    ``(vec_idx, score, ordered)`` as :func:`_rrf` after the scan's vector leg.

    The candidates in fast-pass order form clusters (neighbours < ``_TOL`` apart); rows of different clusters
    keep their relative order and hit membership from the fast pass (its error is < 1e-12), so only a cluster's
    internal order (or, within ``_TOL`` of the threshold, its membership) is open. A cluster reaching within
    ``_TOL`` of the threshold is always resolved (the hit count is output). Another cluster of two or more is
    resolved when one of its members could score at or above the current cut (the ``limit``-th score): its best
    lexical part plus the vector part of the cluster's first rank; after resolving, the cut is recomputed and
    the check repeated until no unresolved cluster can reach it. An unresolved cluster's members then score
    below the cut under any internal order, so the returned hits and scores are the scan's.

    The vector order is kept as the candidates in fast-pass order with each resolved cluster's span re-sorted by
    (scan cosine, id): the same order as sorting every hit by (cosine, id), since the clusters keep their order."""
    o = np.lexsort((c.py_rank[cand], -cos))
    slots_o, exact_o = cand[o], cos[o]
    cid = (np.concatenate(([0], np.cumsum(exact_o[:-1] - exact_o[1:] >= _TOL))) if len(exact_o)
           else np.zeros(0, np.int64))
    ncl = int(cid[-1]) + 1 if len(cid) else 0
    sizes = np.bincount(cid, minlength=ncl)
    span_start = np.concatenate(([0], np.cumsum(sizes)[:-1])) if ncl else np.zeros(0, np.int64)
    multi = sizes > 1
    todo = np.zeros(ncl, dtype=bool)
    todo[cid[np.abs(exact_o - VECTOR_THRESHOLD) < _TOL]] = True
    done = np.zeros(ncl, dtype=bool)
    cluster_of = np.full(c.n, -1, dtype=np.int64)
    cluster_of[slots_o] = cid
    lex_part = np.zeros(c.n)
    lex_part[lex_idx] = 1.0 / (RRF_K + np.arange(1, len(lex_idx) + 1))
    while True:
        new = np.flatnonzero(todo & ~done)
        if len(new):
            at_o = np.concatenate([np.arange(span_start[k], span_start[k] + sizes[k]) for k in new.tolist()])
            exact_o[at_o] = _scan_rows(c, emb_sel, q, slots_o[at_o])
            c.exact_rows += len(at_o)
            done[new] = True
            for k in new.tolist():
                a, b = span_start[k], span_start[k] + sizes[k]
                within = np.lexsort((c.py_rank[slots_o[a:b]], -exact_o[a:b]))
                slots_o[a:b], exact_o[a:b] = slots_o[a:b][within], exact_o[a:b][within]
        vec_idx = slots_o[exact_o >= VECTOR_THRESHOLD]
        score, ordered = _rrf(c, lex_idx, vec_idx, limit)
        open_ = multi & ~done
        if not open_.any():
            return vec_idx, score, ordered
        cut = score[ordered[-1]] if len(ordered) == limit else -np.inf
        vc = cluster_of[vec_idx]
        at = np.flatnonzero(open_[vc])
        if not len(at):
            return vec_idx, score, ordered
        first = np.full(ncl, len(vec_idx), dtype=np.int64)
        np.minimum.at(first, vc[at], at)
        best_lex = np.zeros(ncl)
        np.maximum.at(best_lex, vc[at], lex_part[vec_idx[at]])
        ks = np.unique(vc[at])
        reach = ks[best_lex[ks] + 1.0 / (RRF_K + first[ks] + 1) >= cut]
        if not len(reach):
            return vec_idx, score, ordered
        todo[reach] = True


_BATCH_CHUNKS = 128  # aligned chunks stacked into one matrix-vector product by _scan_rows


def _scan_rows(c: _SearchCache, emb_sel: np.ndarray, q: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """The scan's cosines of ``slots`` (:func:`_cos_at` at their positions in the scan's matrix: filtered rows
    with an embedding, in id order)."""
    by_rank = c.by_rank()
    sel = emb_sel[by_rank]
    scan_slots = by_rank[sel]  # the scan's matrix rows, as slots
    at = np.cumsum(sel) - 1  # position in the scan's matrix, by id rank
    return _cos_at(lambda idx: c.raw[scan_slots[idx]], at[c.py_rank[slots]], len(scan_slots), q, _chunk_rows())


def _cos_at(rows_at: Any, pos: np.ndarray, total: int, q: np.ndarray, chunk: int,
            batch: int = _BATCH_CHUNKS) -> np.ndarray:
    """The scan's cosines (:func:`_scan_cos` on its whole ``total``-row matrix) at positions ``pos``, where
    ``rows_at(idx)`` gives the matrix's float32 rows at positions ``idx``. A row's dot product comes from the
    aligned ``chunk``-row block of the matrix that holds it: up to ``batch`` such blocks are stacked into one
    matrix (whole blocks at multiples of ``chunk``, the matrix's shorter last block at the end), which gives every
    row the value it has in the whole matrix (probed: :func:`_probe_chunks`); its norm is a row of its own (the
    same reduction as the scan's)."""
    starts = (pos // chunk) * chunk
    blocks = np.unique(starts)
    whole = blocks[blocks + chunk <= total]
    tail = blocks[blocks + chunk > total]  # the last block when it is shorter (at most one)
    dots = np.empty(len(pos))
    groups = max(1, -(-len(whole) // batch)) if len(blocks) else 0
    for g in range(groups):
        grp = whole[g * batch:(g + 1) * batch]
        idx = (grp[:, None] + np.arange(chunk)).ravel()
        last = g == groups - 1 and len(tail)
        if last:
            idx = np.concatenate((idx, np.arange(tail[0], total)))
        d = np.ascontiguousarray(rows_at(idx), dtype=np.float64) @ q
        here = np.flatnonzero(np.isin(starts, grp))
        dots[here] = d[np.searchsorted(grp, starts[here]) * chunk + (pos[here] - starts[here])]
        if last:
            here = np.flatnonzero(starts == tail[0])
            dots[here] = d[len(grp) * chunk + (pos[here] - tail[0])]
    norms = np.linalg.norm(np.asarray(rows_at(pos), dtype=np.float64), axis=1) * (np.linalg.norm(q) or 1.0)
    return np.divide(dots, norms, out=np.zeros(len(pos)), where=norms > 0)


_ROWS_OK: dict[str, Any] = {}


def _rows_exact_ok() -> bool:
    """Whether the "rows" engine is exact here: every BLAS pool of this process runs one thread (threadpoolctl)
    and, once per process, chunked cosines equal whole-matrix cosines on random matrices of a few sizes."""
    if "ctl" not in _ROWS_OK:
        try:
            from threadpoolctl import ThreadpoolController

            _ROWS_OK["ctl"] = ThreadpoolController()
        except Exception:  # noqa: BLE001 - no threadpoolctl: threads cannot be checked, take the whole rescan
            _ROWS_OK["ctl"] = None
    ctl = _ROWS_OK["ctl"]
    if ctl is None:
        return False
    blas = [lc for lc in ctl.lib_controllers if lc.user_api == "blas"]
    if not blas or any(lc.num_threads != 1 for lc in blas):
        return False
    return bool(_chunk_rows() and _ROWS_OK["probe"])


_CHUNKS = (4, 8, 16, 32)  # block sizes tried by the probe, smallest first


def _chunk_rows() -> int:
    """The block size of the "rows" engine: the smallest of ``_CHUNKS`` the probe confirms for this BLAS."""
    if "probe" not in _ROWS_OK:
        _ROWS_OK["probe"] = _probe_chunks()
    return int(_ROWS_OK["probe"] or _CHUNKS[-1])


def _probe_chunks() -> int:
    """The smallest block size of ``_CHUNKS`` whose :func:`_cos_at` equals the whole matrix's cosines at every
    position of random matrices of every length modulo 32 (and a few shorter and longer ones), the blocks stacked
    in groups of several sizes; 0 when none does (then the "rows" engine is not used)."""
    rng = np.random.default_rng(20261202)
    big = (rng.random((4099, 384), dtype=np.float32) - np.float32(0.5))
    q = rng.random(384) - 0.5
    cases = []
    for n in [3, 5, 7, *range(97, 129), 4099]:
        raw = big[:n]
        cases.append((raw, _scan_cos(raw.astype(np.float64), q), np.arange(n)))
    for chunk in _CHUNKS:
        if all(np.array_equal(_cos_at(raw.__getitem__, pos, len(raw), q, chunk, batch), whole)
               for raw, whole, pos in cases for batch in ((1, _BATCH_CHUNKS) if len(raw) < 1000 else (7, 333))):
            return chunk
    return 0


def _ann_candidates(store: TortoiseStore, c: _SearchCache, emb_sel: np.ndarray,
                    q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``SimConfig.ann_index`` set: the vector leg's candidates come from an HNSW index (``tortoise_sim.ann``), an
    approximation with measured recall; the exact cosine rule, threshold and near-tie handling then apply to them."""
    from .ann import ann_candidates

    return ann_candidates(store, c, emb_sel, q)
