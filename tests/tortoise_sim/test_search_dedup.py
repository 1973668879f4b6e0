"""The search cache on a near-duplicate store (short decisions from templates, as ``memsim bench serve``'s decision
store): the per-distinct-row passes and the stacked-chunk near-tie settlement answer like the per-call scan, bit
for bit, before and after writes."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tests.tortoise_sim.test_search_cache import _assert_same, _one_blas_thread, _RandomEncoder
from tortoise_sim import search as search_mod
from tortoise_sim.admission import bulk_create_points
from tortoise_sim.search import search_points

TEMPLATES = ("decision the {a} team uses {b} for {c}", "decision {a} moves the {b} to {c}",
             "decision we keep {b} as the {c} default", "decision {a} owns the {b} service",
             "decision release {b} every {c}", "decision {a} picks {b} for {c}")
SLOTS = {"a": ("platform", "billing", "search", "data"), "b": ("canary", "schema", "index", "replica", "cache"),
         "c": ("monday", "rollback", "latency", "budget")}


LIMITS = (3, 24)  # 24 = the volunteer pipeline's pool for three pointers


def _decision(rng: random.Random) -> str:
    return rng.choice(TEMPLATES).format(**{k: rng.choice(v) for k, v in SLOTS.items()})


def _store(seed: int, n: int, monkeypatch):
    from tortoise_sim import SimConfig, StepClock, Tortoise

    monkeypatch.setattr(search_mod, "_DEDUP_MIN_ROWS", 64)
    rng = random.Random(seed)
    sim = Tortoise(config=SimConfig(embedder="none"), encoder=_RandomEncoder(), clock=StepClock(), seed=0)
    bulk_create_points(sim.store, [{"kind": "decision", "content": _decision(rng), "status": "live"}
                                   for _ in range(n)])
    return sim, rng


def test_near_duplicate_store_equals_the_scan_with_and_without_dedup(monkeypatch):
    sim, rng = _store(0, 900, monkeypatch)
    queries = [_decision(rng) for _ in range(4)] + ["which index does the search team use for latency?",
                                                    "what did we decide about the canary?"]
    rescans: list[int] = []
    orig = search_mod._vector_leg_as_scan
    monkeypatch.setattr(search_mod, "_vector_leg_as_scan", lambda *a: rescans.append(1) or orig(*a))
    with _one_blas_thread():
        _assert_same(sim.store, queries, LIMITS)
        c = sim.store._search_cache
        assert c.uniq is not None and c.uniq.u == len(set(c.contents)) < c.n / 2  # one row per distinct text
        assert c.exact_fallbacks > 0 and c.exact_rows > 0 and not rescans
        # writes: repeated texts, a new text, an embedding dropped, statuses changed (incremental refresh)
        ids = [h["id"] for h in search_points(sim.store, queries[0], 40)[0]]
        for _ in range(5):
            sim.create_point("decision", _decision(rng), status=rng.choice(["live", "draft"]))
        sim.create_point("decision", "decision the quorum shard moves to graph", status="live")
        sim.retract_point(ids[0])
        sim.store.set_point_props(ids[1], {"embedding": None})
        sim.store.set_point_props(ids[2], {"status": "superseded"})
        _assert_same(sim.store, queries, LIMITS)
        c = sim.store._search_cache
        assert c.updates > 0 and c.uniq is not None
        slots = np.flatnonzero(c.has_emb[: c.n])
        assert np.array_equal(c.uniq.rows[c.uniq.uid[slots]], c.raw[slots])  # every slot maps to its own row
        sim.store.search_dedup = False  # the previous engine: one pass row per slot
        sim.store._search_cache = None
        _assert_same(sim.store, queries, LIMITS)
        assert sim.store._search_cache.uniq is None and not rescans
    sim.store.search_dedup = "yes"
    with pytest.raises(ValueError, match="search_dedup"):
        search_mod.dedup_mode(sim.store)


def test_float32_pass_and_rescoring_run_once_per_distinct_row(monkeypatch):
    """On a store whose texts repeat, the float32 pass multiplies the distinct rows only (not every slot), and the
    candidates' float64 cosines are computed per distinct row."""
    sim, rng = _store(3, 600, monkeypatch)
    seen: list[int] = []
    orig_dots, orig_gather = search_mod._dots, search_mod._gathered_dots
    monkeypatch.setattr(search_mod, "_dots", lambda mat, v, threads: seen.append(len(mat)) or orig_dots(mat, v,
                                                                                                       threads))
    gathered: list[int] = []
    monkeypatch.setattr(search_mod, "_gathered_dots", lambda mat, idx, q: gathered.append(len(idx))
                        or orig_gather(mat, idx, q))
    q = "which index does the search team use for latency?"
    with _one_blas_thread():
        for _ in range(search_mod._DEDUP_AFTER_SEARCHES):  # a fresh cache's first searches: one row per slot
            search_points(sim.store, q, 10)
        c = sim.store._search_cache
        assert c.uniq is None and seen == [c.n]  # (the pass is reused by the same query)
        search_points(sim.store, q + "?", 10)
    c = sim.store._search_cache
    assert seen == [c.n, c.uniq.u] and c.uniq.u == len(set(c.contents)) < c.n / 2
    assert gathered and max(gathered[-1:]) <= c.uniq.u


def test_stacked_chunks_equal_the_whole_matrix_at_any_positions():
    """``_cos_at`` (the chunk size the probe chose, blocks stacked in groups) equals the whole-matrix cosines at
    arbitrary, unordered, repeated positions of matrices whose last block is short or whole."""
    with _one_blas_thread():
        chunk = search_mod._chunk_rows()
        assert chunk in search_mod._CHUNKS and search_mod._rows_exact_ok()
        rng = np.random.default_rng(5)
        for n in (1, chunk, 3 * chunk + 1, 1000, 2051):
            raw = rng.standard_normal((n, 384)).astype(np.float32)
            q = rng.standard_normal(384)
            whole = search_mod._scan_cos(raw.astype(np.float64), q)
            pos = rng.integers(0, n, size=min(n, 300))
            for batch in (1, 2, search_mod._BATCH_CHUNKS):
                assert np.array_equal(search_mod._cos_at(raw.__getitem__, pos, n, q, chunk, batch), whole[pos])
