from __future__ import annotations

from tests.tortoise_sim.simkit import make_sim


def _fill(sim):
    ids = [sim.create_point("decision", f"deploy pipeline rule {i} about canary releases")["id"] for i in range(5)]
    sim.create_point("decision", "unrelated gardening tips")
    return ids


def test_rrf_order_and_exclusions():
    sim = make_sim()
    ids = _fill(sim)
    sim.retract_point(ids[0])
    hits, trace = sim.search_points("canary releases deploy", 10)
    assert ids[0] not in [h["id"] for h in hits] and trace.population == 5
    assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    hits2, _ = sim.search_points("canary releases deploy", 10, exclude_statuses=["superseded"])
    assert ids[0] in [h["id"] for h in hits2]
    _, forced = sim.search_points("x", 3, force_breaker_open=True)
    assert forced.breaker_open


def test_vector_index_option_matches_exact_search_and_follows_updates():
    exact, indexed = make_sim(), make_sim(vector_index=True)
    e_ids, i_ids = _fill(exact), _fill(indexed)
    q = "canary releases deploy"
    assert [h["id"] for h in exact.search_points(q, 3)[0]] == [h["id"] for h in indexed.search_points(q, 3)[0]]
    exact.update_point(e_ids[0], content="gardening only now")
    indexed.update_point(i_ids[0], content="gardening only now")
    he, _ = exact.search_points(q, 3)
    hi, trace = indexed.search_points(q, 3)
    assert [h["id"] for h in he] == [h["id"] for h in hi] and trace.index_candidates == 6
    assert indexed.store.query("MATCH (v:PointVec) RETURN count(v) AS c")[0]["c"] == 6
