"""The exact search cache (``SimConfig.search_cache``) against the per-call scan, the store write counter, and
the bulk point loader against ``create_point``."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

from tests.tortoise_sim.simkit import make_sim
from tortoise_sim import search as search_mod
from tortoise_sim.admission import bulk_create_points, create_point
from tortoise_sim.config import READ_TERMINAL
from tortoise_sim.search import search_points

WORDS = ("canary deploy release pipeline rollback latency budget schema migration index vector cache token "
         "graph point claim status quorum replica shard").split()
FILTERS = [(tuple(READ_TERMINAL), True), (("retracted",), False), ((), False), (("live", "draft"), True)]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))


def _assert_same(store, queries, limits=(1, 3, 10, 40)):
    for q in queries:
        for ex, exo in FILTERS:
            for limit in limits:
                a = search_points(store, q, limit, list(ex), exo, cached=True)
                b = search_points(store, q, limit, list(ex), exo, cached=False)
                assert a[0] == b[0], (q, ex, exo, limit)
                assert vars(a[1]) == vars(b[1])


def _edit_point(sim, rng, op, pid) -> bool:
    """Apply ``op`` to point ``pid`` when it is one of the single-point edits both random walks share (retract,
    content, null_emb, status, outdated); False when it is not one of them."""
    store = sim.store
    if op == "retract":
        sim.retract_point(pid)
    elif op == "content":
        sim.update_point(pid, content=_text(rng))
    elif op == "null_emb":
        store.set_point_props(pid, {"embedding": None})
    elif op == "status":
        store.set_point_props(pid, {"status": rng.choice(["archived", "deprecated", None, "live"])})
    elif op == "outdated":
        store.set_point_props(pid, {"outdated": rng.choice([True, False, None])})
    else:
        return False
    return True


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cached_search_equals_scan_over_random_mutations(seed):
    rng = random.Random(seed)
    sim = make_sim()
    store = sim.store
    ids = []
    for _ in range(40):
        content = _text(rng) if rng.random() > 0.15 else rng.choice(["canary deploy", "rollback budget"])  # dups
        ids.append(sim.create_point(rng.choice(["decision", "statement", "option"]), content,
                                    status=rng.choice(["draft", "live"]))["id"])
    queries = [_text(rng) for _ in range(4)] + ["canary deploy", "nothing matches here"]
    _assert_same(store, queries)
    for _step in range(12):
        op = rng.choice(["retract", "supersede", "content", "null_emb", "status", "outdated", "new"])
        live = [i for i in ids if (store.get_point(i) or {}).get("status") in ("draft", "live")]
        pid = rng.choice(live)
        before = store.write_seq
        if op == "supersede":
            other = rng.choice([i for i in live if i != pid])
            sim.supersede_point(pid, other)
        elif op == "new":
            ids.append(sim.create_point("statement", _text(rng))["id"])
        else:
            _edit_point(sim, rng, op, pid)
        assert store.write_seq > before, op
        _assert_same(store, queries, limits=(3, 10))


def test_cache_is_reused_until_a_write_and_direct_conn_writes_count():
    sim = make_sim()
    store = sim.store
    pid = sim.create_point("decision", "canary deploy pipeline")["id"]
    search_points(store, "canary deploy", 5)
    cache = store._search_cache
    seq = store.write_seq
    search_points(store, "pipeline", 5, ["retracted"], False)
    store.query("MATCH (n:Point) RETURN count(n) AS c")
    assert store.write_seq == seq and store._search_cache is cache
    store.conn.execute("MATCH (n:Point {id:$id}) SET n.content = 'rollback budget'", {"id": pid})
    assert store.write_seq > seq
    hits, _ = search_points(store, "rollback budget", 5)
    # incremental mode (default): the same cache, updated from the one touched row
    assert store._search_cache is cache and cache.seq == store.write_seq and cache.updates == 1
    assert [h["id"] for h in hits] == [pid]
    store.search_cache_mode = "rebuild"  # the previous behaviour, kept as a named mode
    store.conn.execute("MATCH (n:Point {id:$id}) SET n.content = 'rollback budget'", {"id": pid})
    assert search_points(store, "rollback budget", 5)[0] == hits and store._search_cache is not cache
    cache = store._search_cache
    store.search_cache_mode = "incremental"
    # the raw SET left the old embedding in place: the vector leg still finds it, the lexical leg no longer does
    hits, trace = search_points(store, "canary", 5)
    assert trace.lexical_hits == 0 and (hits, vars(trace)) == (lambda r: (r[0], vars(r[1])))(
        search_points(store, "canary", 5, cached=False))


def test_rolled_back_transaction_invalidates_the_cache():
    sim = make_sim()
    store = sim.store
    sim.create_point("decision", "canary deploy pipeline")
    search_points(store, "canary", 5)
    with pytest.raises(RuntimeError), store.transaction():
        sim.create_point("decision", "canary rollback")
        assert len(search_points(store, "canary", 5)[0]) == 2  # the open transaction's own write is visible
        raise RuntimeError("abort")
    assert len(search_points(store, "canary", 5)[0]) == 1
    assert search_points(store, "canary", 5, cached=False)[0] == search_points(store, "canary", 5)[0]
    # incremental mode: the rolled-back statements predate the in-transaction refresh and are re-read anyway
    assert store._search_cache.updates >= 2


class _FixedEncoder:
    """Query 'q' -> e0; point texts map to chosen vectors (cosines at / near the threshold, exact ties)."""

    dim = 384

    def __init__(self, table):
        self.table = table

    def encode(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            v = self.table.get(t)
            if v is not None:
                out[i, :len(v)] = v
        return out


def test_near_ties_and_threshold_fall_back_to_the_scan_bit_for_bit(monkeypatch):
    c3 = 0.3
    table = {"zzqq": [1.0], "alpha one": [c3, (1 - c3 * c3) ** 0.5], "alpha two": [0.5, 0.5 ** 0.5 * 1.2247],
             "alpha three": [0.5, 0.5 ** 0.5 * 1.2247], "alpha four": [0.9, 0.1], "alpha five": [0.0, 1.0]}
    from tortoise_sim import SimConfig, StepClock, Tortoise

    sim = Tortoise(config=SimConfig(embedder="none"), encoder=_FixedEncoder(table), clock=StepClock(), seed=0)
    for text in table:
        if text != "zzqq":
            sim.create_point("statement", text)
    # the "rescan" tie engine: the default "rows" engine settles these ties itself whenever BLAS runs one thread
    # (as after any service test in the same process), so only "rescan" is sure to take the whole-scan fallback
    sim.store.search_tie_mode = "rescan"
    calls = []
    orig = search_mod._vector_leg_as_scan
    monkeypatch.setattr(search_mod, "_vector_leg_as_scan", lambda *a: calls.append(1) or orig(*a))
    a = search_points(sim.store, "zzqq", 10, cached=True)
    b = search_points(sim.store, "zzqq", 10, cached=False)
    assert a[0] == b[0] and vars(a[1]) == vars(b[1]) and calls
    assert a[1].vector_hits >= 3


def test_bulk_create_points_writes_create_point_rows():
    cases = [
        {"kind": "statement", "content": "canary deploy pipeline", "status": "live", "credibility": "high"},
        {"kind": "decision", "content": "rollback budget", "wing": "ops", "custom": {"a": 1}, "id": "fixed-1"},
        {"kind": "weird-kind", "content": "", "is_episodic": True, "search_keys": ["x", "y"]},
        {"kind": "option", "content": "schema migration index", "credibility": "nonsense", "confidence": 0.4},
    ]
    one, bulk = make_sim(), make_sim()
    ref = []
    for c in cases:
        kw = dict(c)
        ref.append(create_point(one.store, kw.pop("kind"), kw.pop("content"), **kw))
    ids = bulk_create_points(bulk.store, cases)
    assert ids[1] == "fixed-1" and len(set(ids)) == 4
    skip = {"id", "createdAt", "updatedAt", "ep_dirty_at"}
    for r, pid in zip(ref, ids, strict=True):
        got = bulk.store.get_point(pid)
        assert {k: v for k, v in got.items() if k not in skip} == {k: v for k, v in r.items() if k not in skip}
        assert got["createdAt"] == got["updatedAt"] and got["ep_dirty_at"] >= 1
    assert not bulk.store.feed(["PointAdded"]) and one.store.feed(["PointAdded"])
    assert set(ids) <= bulk.store.dirty_roots
    with pytest.raises(ValueError):
        bulk_create_points(bulk.store, [{"kind": "statement", "content": "x", "tags": ["a"]}])
    from tortoise_sim.errors import DuplicatePointId

    with pytest.raises(DuplicatePointId):
        bulk_create_points(bulk.store, [{"kind": "statement", "content": "x", "id": "fixed-1"}])
    q = "canary deploy pipeline rollback"
    assert [h["content"] for h in search_points(bulk.store, q, 5, ())[0]] == \
        [h["content"] for h in search_points(one.store, q, 5, ())[0]]


@pytest.mark.parametrize("seed", [0, 1])
def test_cached_why_blocks_equal_the_query_path_on_random_graphs(seed):
    from tortoise_sim.why import assemble_why_blocks

    rng = random.Random(seed)
    sim = make_sim()
    store = sim.store
    ids = [sim.create_point(rng.choice(["decision", "statement", "option", "option"]), _text(rng),
                            status=rng.choice(["draft", "live"]))["id"] for _ in range(24)]

    def check():
        pool = rng.sample(ids, 12) + ["missing-id"]
        assert assemble_why_blocks(store, pool, cached=True) == assemble_why_blocks(store, pool, cached=False)

    for _ in range(25):
        op = rng.choice(["operator", "operator", "edge", "edge", "supersede", "invalidate", "posterior",
                         "retract", "delete"])
        a, b, c = rng.sample(ids, 3)
        try:
            if op == "operator":
                sim.create_operator(rng.choice(["IMPL", "NAND"]), a, [b, c][:rng.randint(1, 2)])
            elif op == "edge":
                sim.create_direct_edge(a, b, rng.choice(["IMPL", "NAND"]))
            elif op == "supersede":
                sim.supersede_point(a, b)
            elif op == "invalidate":
                sim.invalidate_point(a, b)
            elif op == "posterior":
                store.set_point_props(a, {"posterior_alpha": rng.uniform(0.5, 9), "posterior_beta": 1.5})
            elif op == "retract":
                sim.retract_point(a)
            else:
                sim.delete_point(a)
                ids.remove(a)
        except Exception:  # noqa: BLE001 - lifecycle guards refuse some random moves; the graph stays valid
            pass
        check()


class _RandomEncoder:
    """Continuous, tie-free vectors (seeded by the text) so that the cached fast path, not the exact near-tie
    path, answers most searches; shared words pull vectors together so cosines cross the 0.3 threshold."""

    dim = 384

    def encode(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.split():
                out[i] += np.random.default_rng(sum(map(ord, w)) * 7919 + len(w)).standard_normal(self.dim)
            out[i] += 0.3 * np.random.default_rng(zlib.crc32(t.encode())).standard_normal(self.dim)
        return out


def test_cached_fast_path_equals_scan_without_ties():
    from tortoise_sim import SimConfig, StepClock, Tortoise

    rng = random.Random(5)
    sim = Tortoise(config=SimConfig(embedder="none"), encoder=_RandomEncoder(), clock=StepClock(), seed=0)
    texts = [_text(rng) + f" n{i}" for i in range(60)]
    ids = [sim.create_point("statement", t, status="live")["id"] for t in texts]
    queries = [_text(rng) for _ in range(8)]
    _assert_same(sim.store, queries)
    cache = sim.store._search_cache
    assert cache.exact_fallbacks == 0  # no ties: every search answered by the fast path
    for t in rng.sample(texts, 12):  # duplicates = exact cosine ties; deep ones must not force the exact path
        sim.create_point("statement", t, status="live")
    _assert_same(sim.store, queries)
    sim.retract_point(ids[0])
    sim.store.set_point_props(ids[1], {"embedding": None})
    _assert_same(sim.store, queries)
    cache = sim.store._search_cache
    assert 0 < cache.exact_fallbacks < cache.searches  # ties forced the exact path only where they mattered
    assert any(search_points(sim.store, q, 40, ())[1].vector_hits > 3 for q in queries)


# ---------------------------------------------------------------------------------------------------------------
# Incremental caches (issue 12 item 2): random interleavings of writes and reads, cached == scan after every step


def _incremental_ops(sim, rng, ids):
    """One random write through the public API or a raw statement; returns its name."""
    store = sim.store
    live = [i for i in ids if (store.get_point(i) or {}).get("status") in ("draft", "live")] or ids
    pid = rng.choice(live)
    op = rng.choice(["new", "new", "bulk", "retract", "supersede", "content", "null_emb", "status", "outdated",
                     "delete", "raw_keyed", "raw_sweep", "operator", "edge", "posterior"])
    try:
        if op == "new":
            ids.append(sim.create_point(rng.choice(["statement", "decision", "option"]), _text(rng),
                                        status=rng.choice(["draft", "live"]))["id"])
        elif op == "bulk":
            ids.extend(bulk_create_points(store, [{"kind": "statement", "content": _text(rng), "status": "live"}
                                                  for _ in range(rng.randint(1, 4))]))
        elif op == "supersede":
            sim.supersede_point(pid, rng.choice([i for i in live if i != pid] or ids))
        elif _edit_point(sim, rng, op, pid):
            pass
        elif op == "delete":
            sim.delete_point(pid)
            ids.remove(pid)
        elif op == "raw_keyed":
            store.conn.execute("MATCH (n:Point {id:$id}) SET n.content = $c", {"id": pid, "c": _text(rng)})
        elif op == "raw_sweep":  # names no id: the change log cannot attribute it, the cache rebuilds
            store.conn.execute("MATCH (n:Point) WHERE n.status = 'draft' SET n.outdated = true")
        elif op == "operator":
            a, b, c = rng.sample(ids, 3)
            sim.create_operator(rng.choice(["IMPL", "NAND"]), a, [b, c][:rng.randint(1, 2)])
        elif op == "edge":
            a, b = rng.sample(ids, 2)
            sim.create_direct_edge(a, b, rng.choice(["IMPL", "NAND"]))
        else:
            store.set_point_props(pid, {"posterior_alpha": rng.uniform(0.5, 9), "posterior_beta": 1.5})
    except Exception:  # noqa: BLE001 - lifecycle guards refuse some random moves; the graph stays valid
        pass
    return op


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_incremental_caches_equal_the_scan_under_interleaved_writes_and_reads(seed):
    from tortoise_sim.why import assemble_why_blocks

    rng = random.Random(100 + seed)
    sim = make_sim()
    store = sim.store
    ids = [sim.create_point(rng.choice(["statement", "decision", "option"]), _text(rng),
                            status=rng.choice(["draft", "live"]))["id"] for _ in range(20)]
    queries = [_text(rng) for _ in range(3)] + ["canary deploy"]
    _assert_same(store, queries, limits=(3, 10))
    first = store._search_cache
    seen = set()
    updates = [0, 0]
    for _ in range(30):
        seen.add(_incremental_ops(sim, rng, ids))
        q = rng.choice(queries)
        for ex, exo in FILTERS:
            a = search_points(store, q, 10, list(ex), exo, cached=True)
            b = search_points(store, q, 10, list(ex), exo, cached=False)
            assert a[0] == b[0] and vars(a[1]) == vars(b[1]), (q, ex, exo)
        pool = rng.sample(ids, min(10, len(ids))) + ["missing-id"]
        assert assemble_why_blocks(store, pool, cached=True) == assemble_why_blocks(store, pool, cached=False)
        updates[0] += store._search_cache.updates > 0
        updates[1] += store._why_cache.updates > 0
    cache = store._search_cache
    assert min(updates) >= 10  # the incremental path did most of the work
    assert "raw_sweep" not in seen or cache is not first  # an unattributable write rebuilt it


def test_change_log_attribution():
    from tortoise_sim.changes import statement_ids

    assert statement_ids("MATCH (n:Point {id:$id}) SET n.status = $s", {"id": "p1", "s": "live"}) == {"p1"}
    assert statement_ids("UNWIND $ids AS i MATCH (n:Point {id: i}) SET n.x = 1", {"ids": ["a", "b"]}) == {"a", "b"}
    # an id expression it cannot evaluate: every string the statement was given
    assert statement_ids("MATCH (n:Point {id: toLower($id)}) SET n.x = $s", {"id": "A", "s": "q"}) == {"A", "q"}
    assert statement_ids("UNWIND $rows AS row MATCH (n:Point {id: row.id}) SET n.x = row.c",
                         {"rows": [{"id": "a", "c": 0.5}, {"id": "b", "c": 1.0}]}) == {"a", "b"}
    assert statement_ids("MATCH (n:Point) WHERE n.id IN $ids SET n.ep_dirty = true", {"ids": ["a"]}) == {"a"}
    assert statement_ids("MATCH (a:Point {id:$s})-[r:IMPL]->(b {id:$t}) DELETE r", {"s": "a", "t": "b"}) == {"a", "b"}
    assert statement_ids("MERGE (s:Session {id:$s}) SET s.turn_count = $n", {"s": "x", "n": 2}) == set()
    assert statement_ids("COMMIT", None) == set()
    assert statement_ids("MATCH (n:Point) WHERE n.status = 'draft' SET n.outdated = true", {}) is None
    assert statement_ids("MATCH (n:Point {id:$id})-[:IMPL]->(x) SET x.status = 'x'", {"id": "a"}) is None
    assert statement_ids("MATCH (n) DETACH DELETE n", {}) is None
    assert statement_ids("ALTER TABLE Point ADD x STRING", {}) is None


# ---------------------------------------------------------------------------------------------------------------
# Near-tie engines: "rows" (recompute only the undecided rows) against "rescan" and the scan, bit for bit


def _one_blas_thread():
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1, user_api="blas")


def test_scan_rows_equal_the_whole_matrix_cosines():
    """Every row's cosine from its aligned chunk equals the scan's whole-matrix value (random rows, 2,051 of them so
    that the last chunk is partial), including rows not in id order after appends."""
    from tortoise_sim import SimConfig, StepClock, Tortoise

    rng = random.Random(11)
    sim = Tortoise(config=SimConfig(embedder="none"), encoder=_RandomEncoder(), clock=StepClock(), seed=0)
    bulk_create_points(sim.store, [{"kind": "statement", "content": _text(rng) + f" r{i}", "status": "live"}
                                   for i in range(2051)])
    with _one_blas_thread():
        search_points(sim.store, "canary release", 5)
        for i in range(7):  # appended slots: py_rank is no longer the slot order
            sim.create_point("statement", _text(rng) + f" a{i}", status="live")
        c = search_mod.search_cache_for(sim.store)
        assert search_mod._rows_exact_ok()
        q = np.asarray(sim.store.embed(["canary release rollback"])[0], dtype=np.float64)
        for ex, exo in FILTERS:
            emb_sel = c.mask(list(ex), exo) & c.has_emb[: c.n]
            pos = np.flatnonzero(emb_sel)
            pos = pos[np.argsort(c.py_rank[pos], kind="stable")]
            whole = search_mod._scan_cos(np.ascontiguousarray(c.raw[pos], dtype=np.float64), q)
            got = search_mod._scan_rows(c, emb_sel, q, pos)
            assert np.array_equal(got, whole)


@pytest.mark.parametrize("seed", [0, 1])
def test_rows_tie_engine_equals_rescan_and_scan(seed, monkeypatch):
    """Many duplicated texts (exact and last-bit ties at every position of the scan's matrix): the "rows" engine
    answers like the scan and like "rescan", and recomputes far fewer rows than the population."""
    from tortoise_sim import SimConfig, StepClock, Tortoise

    rng = random.Random(seed)
    sim = Tortoise(config=SimConfig(embedder="none"), encoder=_RandomEncoder(), clock=StepClock(), seed=0)
    base = [_text(rng) for _ in range(90)]
    bulk_create_points(sim.store, [{"kind": "statement", "content": rng.choice(base), "status": "live"}
                                   for _ in range(700)])
    for _ in range(20):
        sim.create_point("statement", rng.choice(base), status=rng.choice(["live", "draft"]))
    queries = [_text(rng) for _ in range(6)] + base[:4]
    rescans = []
    orig = search_mod._vector_leg_as_scan
    monkeypatch.setattr(search_mod, "_vector_leg_as_scan", lambda *a: rescans.append(1) or orig(*a))
    with _one_blas_thread():
        _assert_same(sim.store, queries)
        c = sim.store._search_cache
        assert c.exact_fallbacks > 0 and c.exact_rows > 0 and not rescans
        assert c.exact_rows < c.exact_fallbacks * c.n
        sim.store.search_tie_mode = "rescan"
        _assert_same(sim.store, queries)
        assert rescans
    sim.store.search_tie_mode = "bogus"
    with pytest.raises(ValueError, match="search_tie_mode"):
        search_mod.tie_mode(sim.store)


def test_rows_engine_steps_aside_for_a_threaded_blas():
    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        assert search_mod._rows_exact_ok()
    with threadpool_limits(2, user_api="blas"):
        threaded = any(i["num_threads"] > 1 for i in threadpool_info() if i["user_api"] == "blas")
        if not threaded:
            pytest.skip("this BLAS runs one thread at most")
        assert not search_mod._rows_exact_ok()


def test_split_float32_pass_changes_no_output(monkeypatch):
    """The float32 pass in row blocks on two threads picks candidates only: same hits, order, scores and trace as
    the one-thread pass and as the scan."""
    from tortoise_sim import SimConfig, StepClock, Tortoise

    monkeypatch.setattr(search_mod, "_SPLIT_MIN_ROWS", 64)
    outs = {}
    for threads in (1, 2, 3):
        sim = Tortoise(config=SimConfig(embedder="none"), encoder=_RandomEncoder(), clock=StepClock(), seed=0)
        sim.store.search_pass_threads = threads
        base = [_text(random.Random(k)) for k in range(40)]
        bulk_create_points(sim.store, [{"kind": "statement", "content": base[k % 40] + f" s{k % 7}",
                                        "status": "live"} for k in range(400)])
        queries = [_text(random.Random(100 + k)) for k in range(5)]
        _assert_same(sim.store, queries, limits=(3, 24))
        assert sim.store._search_cache.pass_threads == threads
        outs[threads] = [search_points(sim.store, q, 24)[0] for q in queries]
    assert outs[1] == outs[2] == outs[3]
    sim.store.search_pass_threads = 0
    with pytest.raises(ValueError, match="search_pass_threads"):
        search_mod.pass_threads(sim.store)


@pytest.mark.parametrize("chunk", [None, 1, 7])
def test_cache_read_in_id_ranges_equals_the_scan(chunk):
    """The cache reads its population with ``TortoiseStore.scan_arrow`` in id ranges of ``store.scan_chunk`` rows
    (``None`` = one statement); any chunk gives the scan's hits, order, scores and trace counts."""
    rng = random.Random(11)
    sim = make_sim()
    store = sim.store
    store.scan_chunk = chunk
    for _ in range(30):
        sim.create_point(rng.choice(["decision", "statement"]), _text(rng), status=rng.choice(["draft", "live"]))
    cache = search_mod.search_cache_for(store)
    assert cache.n == 30
    assert cache.ids == sorted(cache.ids)  # id order across the ranges, as one ORDER BY id statement gives
    _assert_same(store, [_text(rng) for _ in range(4)], limits=(3, 10))
