"""Admission priors (TOR-07 gate 3): the incrementally maintained index answers exactly what the full scan answers,
and a capture sequence writes the same graph, feed and responses with either."""

from __future__ import annotations

import random

import pytest

from tests.tortoise_sim.simkit import make_sim
from tests.tortoise_sim.test_search_cache import _incremental_ops, _text
from tortoise_sim.capture import execute_embed
from tortoise_sim.priors import PRIOR_MODES, prior_ids, prior_index_for
from tortoise_sim.store import ID_IO, KEYED_MAX
from tortoise_sim.text import normalise_content


def _all_keys(store) -> set[str]:
    """Every key the store's contents have now or had before (a stale index entry under an old key must show)."""
    seen = store.__dict__.setdefault("_test_keys", {"no such content at all", ""})
    seen |= {normalise_content(r["c"]) for r in store.query("MATCH (n:Point) WHERE n.content IS NOT NULL "
                                                            "RETURN n.content AS c")}
    return set(seen)


def _assert_index_equals_scan(store) -> None:
    keys = _all_keys(store)
    assert prior_ids(store, keys, "index") == prior_ids(store, keys, "scan")


@pytest.mark.parametrize("seed", [0, 1])
def test_prior_index_equals_the_scan_under_random_writes_and_captures(seed):
    rng = random.Random(300 + seed)
    sim = make_sim()
    store = sim.store
    ids = [sim.create_point(rng.choice(["statement", "decision"]), _text(rng),
                            status=rng.choice(["draft", "live"]))["id"] for _ in range(15)]
    _assert_index_equals_scan(store)
    for step in range(30):
        if step % 4 == 0:  # a capture whose decision repeats a stored content in another case / spacing
            prior = (store.get_point(rng.choice(ids)) or {}).get("content") or _text(rng)
            sim.capture_session([{"role": "user", "content": f"decision: {prior.upper()}"},
                                 {"role": "user", "content": f"decision:   {_text(rng)}  "}],
                                session_id=f"s{step % 3}")
        else:
            _incremental_ops(sim, rng, ids)
        _assert_index_equals_scan(store)
    assert store._prior_index.updates > 0  # the incremental path was used


def test_rolled_back_writes_leave_the_index_equal_to_the_scan():
    sim = make_sim()
    store = sim.store
    pid = sim.create_point("statement", "alpha beta gamma")["id"]
    _assert_index_equals_scan(store)
    with pytest.raises(RuntimeError), store.transaction():
        store.set_point_props(pid, {"content": "changed inside a rolled back transaction"})
        _assert_index_equals_scan(store)  # read inside the transaction
        raise RuntimeError("roll back")
    _assert_index_equals_scan(store)
    assert prior_ids(store, {"alpha beta gamma"}) == {"alpha beta gamma": pid}


def _dump(store) -> dict:
    def clean(v):
        return {k: x for k, x in v.items() if not k.startswith("_")} if isinstance(v, dict) else v

    out = {}
    for label in ("Point", "Session", "Event", "Object", "Source", "Tag", "EpMeta"):
        rows = store.query(f"MATCH (n:{label}) RETURN n")
        out[label] = sorted(repr(sorted(clean(r["n"]).items())) for r in rows)
    rows = store.query("MATCH (a)-[r]->(b) RETURN label(r) AS t, r AS r, a AS a, b AS b")
    out["edges"] = sorted(repr((r["t"], sorted(clean(r["r"]).items()), sorted(clean(r["a"]).items()),
                                sorted(clean(r["b"]).items()))) for r in rows)
    out["feed"] = [(e["seq"], e["type"], e["payload"]) for e in store.feed()]
    return out


def _session(sim, rng, i, stored):
    turns = [{"role": "user", "content": f"decision: {rng.choice(stored)}"},
             {"role": "assistant", "content": f"decision: {_text(rng)}"},
             {"role": "user", "content": f"Decision:  {rng.choice(stored).title()} "}]
    return sim.capture_session(turns, session_id=f"cap-{i % 4}")


def _record_id_forms(store) -> list[tuple[int, frozenset[str]]]:
    """Wrap ``store.by_ids`` so each call records how many ids it was given and which of its two statements
    actually ran (``keyed`` / ``listed``, told apart by the statement text the store executes)."""
    forms: list[tuple[int, frozenset[str]]] = []
    real_by_ids = store.by_ids
    real_query = store.query

    def by_ids(ids, keyed, listed, params=None):
        ids = list(ids)
        ran: set[str] = set()

        def query(cypher, p=None):
            ran.add("keyed" if cypher == keyed else "listed" if cypher == listed else "other")
            return real_query(cypher, p)

        store.query = query  # by_ids runs its statements through self.query
        try:
            return real_by_ids(ids, keyed, listed, params)
        finally:
            del store.query
            forms.append((len(ids), frozenset(ran)))

    store.by_ids = by_ids
    return forms


def _assert_id_forms(forms: list[tuple[int, frozenset[str]]], id_io: str) -> None:
    """``keyed``: the keyed statement for 1..KEYED_MAX ids, the listed one above; ``listed``: always listed. Both
    sizes must have occurred (a window longer than KEYED_MAX included), so the check is never vacuous."""
    small = [ran for n, ran in forms if 0 < n <= KEYED_MAX]
    large = [ran for n, ran in forms if n > KEYED_MAX]
    assert small and large, forms
    assert all(ran == {"listed"} for ran in large)
    want = {"keyed"} if id_io == "keyed" else {"listed"}
    assert all(ran == want for ran in small), (id_io, sorted(set(small)))


def test_captures_write_the_same_graph_with_index_and_scan_priors_and_keyed_and_listed_id_io():
    """Every combination of the admission priors mode and the store's id statements (``by_ids``) gives the same
    responses, graph and feed; operators make ``mark_dirty`` follow co-inputs; a long window takes the listed
    form even under ``id_io="keyed"``. Which id statement ran and which priors path answered is observed, not
    assumed: a store that ignored either setting would make the combinations trivially equal."""
    results = {}
    for mode in PRIOR_MODES:
        for id_io in ID_IO:
            rng = random.Random(11)
            sim = make_sim()
            sim.store.admission_priors = mode
            sim.store.id_io = id_io
            forms = _record_id_forms(sim.store)
            made = [sim.create_point("statement", _text(rng), status="live") for _ in range(10)]
            stored = [r["content"] for r in made]
            sim.create_operator("IMPL", made[0]["id"], [made[1]["id"], made[2]["id"]])
            resp = []
            for i in range(8):
                resp.append(_session(sim, rng, i, stored))
                if i % 3 == 1:
                    stored.append(sim.create_point("decision", _text(rng))["content"])
                    sim.store.mark_dirty([made[1]["id"], made[3]["id"]])
                if i == 5:
                    resp.append(sim.commit_payload({"session_id": "commit", "points": [
                        {"content": stored[0]}, {"content": "a brand new point"}]}))
            long = [{"role": "user", "content": f"decision: {_text(rng)} {k}"} for k in range(KEYED_MAX + 3)]
            resp.append(sim.capture_session(long, session_id="long"))
            resp.append(sim.capture_session(long[:3], session_id="long"))  # re-capture: the surplus sweep
            results[(mode, id_io)] = (resp, _dump(sim.store), sorted(sim.store.dirty_roots))
            assert any("consolidated_noop" in w for r in resp for w in r.get("warnings", []))
            _assert_id_forms(forms, id_io)
            index = getattr(sim.store, "_prior_index", None)
            if mode == "index":
                assert index is not None  # the prior index answered (built, then kept or rebuilt)
            else:
                assert index is None  # the scan answered; no index was built
    first = results[("scan", "listed")]
    assert all(v == first for v in results.values())


def test_unknown_prior_mode_is_refused():
    sim = make_sim()
    with pytest.raises(ValueError, match="admission priors mode"):
        execute_embed(sim.store, {"points": [{"content": "x"}]}, priors="bogus")
    assert prior_index_for(sim.store).lookup(["x"]) == {}
