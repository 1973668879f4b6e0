"""The HNSW candidate option of the cached vector leg (``SimConfig.ann_index``) against the exact default."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from tests.tortoise_sim.simkit import make_sim
from tortoise_sim.ann import HnswIndex

faiss.omp_set_num_threads(1)

TOPICS = ("deploy pipeline canary release", "gardening tomato seedlings", "billing invoice refund",
          "postgres index vacuum", "kubernetes pod eviction", "coffee grinder settings", "travel visa lisbon")
QUERIES = ("canary release deploy", "tomato garden", "refund an invoice", "vacuum the postgres index",
           "pod eviction in kubernetes", "espresso grinder", "visa for lisbon", "release pipeline rollback")


def _fill(sim, n=70):
    ids = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        ids.append(sim.create_point("decision", f"{topic} note {i} with detail {i * 7 % 11}")["id"])
    return ids


def _hits(sim, q, limit=10, **kw):
    hits, trace = sim.search_points(q, limit, **kw)
    return [(h["id"], h["rank"], h["score"]) for h in hits], (trace.lexical_hits, trace.vector_hits,
                                                             trace.population)


def test_covering_candidate_count_returns_the_exact_hits():
    exact, ann = make_sim(), make_sim(ann_index="hnsw", ann_candidates=1000)
    e_ids, a_ids = _fill(exact), _fill(ann)
    assert e_ids == a_ids
    for sim in (exact, ann):
        sim.retract_point(e_ids[3])
        sim.update_point(e_ids[5], content="gardening tomato seedlings moved to the balcony")
    for q in QUERIES:
        assert _hits(ann, q) == _hits(exact, q)
        assert _hits(ann, q, 50, exclude_statuses=["superseded"]) == _hits(exact, q, 50,
                                                                         exclude_statuses=["superseded"])
    assert ann.store._ann_state.index.index.ntotal >= len(a_ids)
    assert getattr(exact.store, "_ann_state", None) is None  # the default never builds an index


def test_small_candidate_count_keeps_only_true_vector_hits():
    exact, ann = make_sim(), make_sim(ann_index="hnsw", ann_candidates=4)
    _fill(exact)
    _fill(ann)
    for q in QUERIES:
        _, (_, ev, _) = _hits(exact, q, 200)
        _, (_, av, _) = _hits(ann, q, 200)
        assert av <= min(4, ev)
    # every hit of the ANN path is a hit of the exact path (candidates only narrow the vector leg)
    e_ids = [h["id"] for h in exact.search_points("tomato garden", 200)[0]]
    a_ids = [h["id"] for h in ann.search_points("tomato garden", 200)[0]]
    assert set(a_ids) <= set(e_ids)


def test_index_follows_writes():
    sim = make_sim(ann_index="hnsw", ann_candidates=1000)
    ids = _fill(sim, 30)
    sim.search_points("quantum chromodynamics lattice", 5)  # builds the index
    state = sim.store._ann_state
    before = state.index.index.ntotal
    new = sim.create_point("decision", "quantum chromodynamics lattice simulation budget")["id"]
    hits = [h["id"] for h in sim.search_points("quantum chromodynamics lattice", 5)[0]]
    assert hits[0] == new and sim.store._ann_state.index.index.ntotal == before + 1
    sim.update_point(ids[0], content="zebra migration serengeti")
    hits = [h["id"] for h in sim.search_points("zebra migration serengeti", 5)[0]]
    assert hits[0] == ids[0]
    idx = sim.store._ann_state.index
    assert idx.index.ntotal == before + 2 and idx.dead == 1 and len(idx) == before + 1  # re-added, old id ignored
    sim.retract_point(new)
    hits = [h["id"] for h in sim.search_points("quantum chromodynamics lattice", 5)[0]]
    assert new not in hits
    exact = make_sim()
    e_ids = _fill(exact, 30)
    exact.create_point("decision", "quantum chromodynamics lattice simulation budget")
    exact.update_point(e_ids[0], content="zebra migration serengeti")
    exact.retract_point(new)
    for q in QUERIES + ("zebra migration serengeti", "quantum chromodynamics lattice"):
        assert _hits(sim, q) == _hits(exact, q)


def test_hnsw_index_reput_and_drop():
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((50, 16)).astype(np.float32)
    idx = HnswIndex(16, m=8, ef_search=64)
    idx.put(np.arange(50), vecs)
    slots, scores = idx.search(vecs[7], 3)
    assert slots[0] == 7 and scores[0] == pytest.approx(1.0, abs=1e-5)
    idx.put(np.array([7]), vecs[8])  # slot 7 now holds vector 8
    slots, _ = idx.search(vecs[7], 50)
    assert len(set(slots.tolist())) == len(slots) == 50
    slots, _ = idx.search(vecs[8], 2)
    assert set(slots.tolist()) == {7, 8}
    idx.drop(np.array([8]))
    slots, _ = idx.search(vecs[8], 50)
    assert 8 not in slots.tolist() and len(slots) == 49 and len(idx) == 49


def test_rebuilt_search_cache_rebuilds_the_index():
    sim = make_sim(ann_index="hnsw", ann_candidates=1000)
    _fill(sim, 20)
    first = _hits(sim, "tomato garden")
    state = sim.store._ann_state
    sim.store.search_cache_mode = "rebuild"
    sim.create_point("decision", "tomato garden compost schedule")
    second = _hits(sim, "tomato garden")
    assert sim.store._ann_state is not state and sim.store._ann_state.index.index.ntotal == 21
    assert second != first and second == _hits(make_sim_like(sim), "tomato garden")


def make_sim_like(sim):
    exact = make_sim()
    _fill(exact, 20)
    exact.create_point("decision", "tomato garden compost schedule")
    return exact
