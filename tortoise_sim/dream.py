"""Dream maintenance on the Kuzu store (spec §9.6-§9.9): load -> EP -> flush/write-back, scheduling, events.

Public entry points (all take a `tortoise_sim.store.TortoiseStore`):

* `run(store, seed_ids, max_hops=2, warm_start=False)` = upstream `ep.run`: affected set, EP, flush (§9.6, §9.7);
* `dream(store, ..., mode=None, budget=None)` and `dream_window(store, budget=200)` (§9.8);
* `get_confidence(store, id)` (§9.8, last paragraph) and `ingest_dream(store, claim_ids)` (§3.9), picked up by the
  store's `run_ingest_dream` seam;
* `load_factor_graph` / `flush` / `write_back` for callers that need the steps (TOR-15 Kuzu path, TOR-18).

Faithful behaviours (claim IDs): freshness is stamped only when a pass converged (TOR-17); non-converged roots
retry with a recorded (not enforced) backoff and are given up after 3 attempts (TOR-17); the epoch guard discards a
stale pass completely (TOR-18); window passes rank stale-first and stop at the operator budget, a budget <= 0 is a
no-op (TOR-19); every committed write-back journals one `ConfidenceChanged` per written claim (TOR-20); a dream
writes only EP columns, `updatedAt`, `lastDreamedAt` and edge messages (TOR-21); the calibration gate refuses to
dream over un-baselined live statements (TOR-50).

Speed options (same beliefs, same store either way): `ep_engine` (default "fused"; "batched" and "reference" are
the previous engines) and `store_io` (default "bulk": Arrow snapshot reads, whole-column reads and `LOAD FROM`
writes for large batches; "unwind": the previous row-by-row reads, `IN` lists and `UNWIND` writes).

Edge writes (`dream(..., edge_write=...)`, same store either way): `"rewrite"` (default) writes a flush's edge
messages by deleting and creating again every IMPL/NAND edge of the sources it writes to, all properties and the
snapshot order kept; `"update"` is the previous in-place SET. Kuzu 0.11.3 reads in-place-updated edges back wrong
after a checkpoint on larger stores and then fails the next in-place update (`KU_UNREACHABLE`): the second dream
of such a store (see `_write_edge_msgs`).

Scope (`dream(..., scope=...)`): `"component"` (default) runs a local pass over a snapshot of only the connected
component(s) of the dirty roots: the whole edge table is read (its order kept), but only the component's Points,
and the settle and trivial-stamp writes go through `TortoiseStore.by_ids`. Every step of a local pass with a finite
`max_hops` (operator selection, affected set, factor extraction, factor-less check) follows IMPL/NAND edges from the
anchors, so it never reaches a Point outside their components, and the pass writes the same rows, edges,
confidences and feed as `"graph"`, the previous path (two whole-graph snapshots per pass). Passes that need the whole
graph (full, window, calibration gate, auto mode without dirty roots, `max_hops=None`) always use `"graph"`.

Bad input: a budget <= 0 is a no-op; a non-finite prior, stored belief or message raises `ValueError` in the loader,
before anything is written; self-edges and operators left with < 2 live inputs are skipped with a warning.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from .ep import EdgeRow, EPResult, GraphSnapshot, LoadedGraph, PointRow, run_ep
from .errors import TortoiseError, UnknownPoint
from .store import KEYED_MAX

__all__ = [
    "CalibrationError", "BudgetExceededError", "snapshot", "load_factor_graph", "flush", "write_back", "run",
    "dream", "dream_window", "get_confidence", "ingest_dream", "calibration_violations", "DreamResult",
    "component_snapshot", "SCOPES", "EDGE_WRITES",
]

# §12 Dream constants
MAX_HOPS = 2
OP_CAP = 200
WINDOW_BUDGET = 200
CHUNK = 2000
AUTO_FULL_OPERATORS = 50
RETRY_CAP = 3
BACKOFF_CAP_S = 3600
FULL_PASS_CEILING = 200_000
INGEST_BUDGET = 100
CALIBRATION_KINDS = ("statement", "observation", "hypothesis")
STORE_IO = ("bulk", "unwind")
SCOPES = ("component", "graph")
BULK_MIN_ROWS = 256  # from this many rows on, bulk store I/O writes with LOAD FROM and reads whole columns

Progress = Callable[[int, int], None]


class CalibrationError(TortoiseError):
    """Live calibration-relevant claims without a baseline block a calibrated dream (§9.8 step 1, TOR-50)."""

    def __init__(self, ids: Sequence[str]) -> None:
        self.ids = sorted(ids)
        shown = ", ".join(self.ids[:10]) + (" ..." if len(self.ids) > 10 else "")
        super().__init__(f"{len(self.ids)} live claim(s) lack a baseline: {shown}")


class BudgetExceededError(TortoiseError, ValueError):
    """A full pass with an explicit budget needs more operators than the budget (or the 200,000 ceiling)."""


# ---------------------------------------------------------------------------------------------------------------
# Loading and flushing
# ---------------------------------------------------------------------------------------------------------------


_SNAP_POINTS = ("MATCH (n:Point) RETURN n.id AS id, n.is_operator AS is_operator, n.op_type AS op_type, "
                "n.direction AS direction, n.status AS status, n.outdated AS outdated, n.pointKind AS pointKind, "
                "n.baseline_set AS baseline_set, n.ep_alpha AS ep_alpha, n.ep_beta AS ep_beta, "
                "n.posterior_alpha AS posterior_alpha, n.posterior_beta AS posterior_beta")
_SNAP_EDGES = ("MATCH (a:Point)-[r:IMPL|NAND]->(b) RETURN a.id AS src, label(r) AS rel, b.id AS tgt, "
               "label(b) AS tlabel, r.idx AS idx, r.direction AS direction, r.weight AS weight, r.msg_alpha AS ma, "
               "r.msg_beta AS mb, r.back_msg_alpha AS ba, r.back_msg_beta AS bb")


def _columns(store: Any, cypher: str) -> dict[str, list[Any]]:
    """A read as columns through Arrow (one conversion per column instead of one Python dict per row), the Kuzu
    result closed at once."""
    res = store.conn.execute(cypher)
    try:
        return res.get_as_arrow(0).to_pydict()
    finally:
        res.close()


def snapshot(store: Any, *, store_io: str = "bulk") -> GraphSnapshot:
    """Read every Point's EP columns and every IMPL/NAND edge into an in-memory `GraphSnapshot`.
    `store_io="bulk"` reads both tables as Arrow columns, `"unwind"` row by row (the previous reader); the
    snapshots are equal."""
    if store_io == "bulk":
        pc = _columns(store, _SNAP_POINTS)
        points = [PointRow(*row) for row in zip(pc["id"], pc["is_operator"], pc["op_type"], pc["direction"],
                                                pc["status"], pc["outdated"], pc["pointKind"], pc["baseline_set"],
                                                pc["ep_alpha"], pc["ep_beta"], pc["posterior_alpha"],
                                                pc["posterior_beta"], strict=True)]
        ec = _columns(store, _SNAP_EDGES)
        edges = [EdgeRow(rel, src, tgt, idx, dirn, w, _msg(ma, mb), _msg(ba, bb), tl != "Point")
                 for src, rel, tgt, tl, idx, dirn, w, ma, mb, ba, bb in zip(
                     ec["src"], ec["rel"], ec["tgt"], ec["tlabel"], ec["idx"], ec["direction"], ec["weight"],
                     ec["ma"], ec["mb"], ec["ba"], ec["bb"], strict=True)]
        return GraphSnapshot(points, edges, exclude_terminal=store.cfg.ep_exclude_terminal)
    pts = store.query(_SNAP_POINTS)
    points = [PointRow(r["id"], r["is_operator"], r["op_type"], r["direction"], r["status"], r["outdated"],
                       r["pointKind"], r["baseline_set"], r["ep_alpha"], r["ep_beta"], r["posterior_alpha"],
                       r["posterior_beta"]) for r in pts]
    rows = store.query(_SNAP_EDGES)
    edges = [EdgeRow(r["rel"], r["src"], r["tgt"], r["idx"], r["direction"], r["weight"],
                     _msg(r["ma"], r["mb"]), _msg(r["ba"], r["bb"]), r["tlabel"] != "Point") for r in rows]
    return GraphSnapshot(points, edges, exclude_terminal=store.cfg.ep_exclude_terminal)


def component_snapshot(store: Any, anchors: Iterable[str], *, store_io: str = "bulk") -> GraphSnapshot:
    """A `GraphSnapshot` of the connected component(s) of `anchors` (undirected over IMPL/NAND edges between
    Points): every edge whose source lies in them, in the order of the whole-graph snapshot, and their Points.
    Points are read by id (`TortoiseStore.by_ids`) when the component is small, else as one Arrow scan filtered
    here. Any walk along edges from the anchors sees exactly what it sees in `snapshot(store)`."""
    if store_io == "bulk":
        ec = _columns(store, _SNAP_EDGES)
    else:
        rows = store.query(_SNAP_EDGES)
        ec = {k: [r[k] for r in rows] for k in ("src", "rel", "tgt", "tlabel", "idx", "direction", "weight",
                                               "ma", "mb", "ba", "bb")}
    adj: dict[str, list[str]] = {}
    for src, tgt, tl in zip(ec["src"], ec["tgt"], ec["tlabel"], strict=True):
        if tl == "Point":
            adj.setdefault(src, []).append(tgt)
            adj.setdefault(tgt, []).append(src)
    comp = set(anchors)
    stack = list(comp)
    while stack:
        for y in adj.get(stack.pop(), ()):
            if y not in comp:
                comp.add(y)
                stack.append(y)
    edges = [EdgeRow(rel, src, tgt, idx, dirn, w, _msg(ma, mb), _msg(ba, bb), tl != "Point")
             for src, rel, tgt, tl, idx, dirn, w, ma, mb, ba, bb in zip(
                 ec["src"], ec["rel"], ec["tgt"], ec["tlabel"], ec["idx"], ec["direction"], ec["weight"],
                 ec["ma"], ec["mb"], ec["ba"], ec["bb"], strict=True) if src in comp]
    ret = _SNAP_POINTS.removeprefix("MATCH (n:Point) ")
    if store_io == "bulk" and len(comp) > KEYED_MAX:
        pc = _columns(store, _SNAP_POINTS)
        points = [PointRow(*row) for row in zip(pc["id"], pc["is_operator"], pc["op_type"], pc["direction"],
                                                pc["status"], pc["outdated"], pc["pointKind"], pc["baseline_set"],
                                                pc["ep_alpha"], pc["ep_beta"], pc["posterior_alpha"],
                                                pc["posterior_beta"], strict=True) if row[0] in comp]
    else:
        points = [PointRow(r["id"], r["is_operator"], r["op_type"], r["direction"], r["status"], r["outdated"],
                           r["pointKind"], r["baseline_set"], r["ep_alpha"], r["ep_beta"], r["posterior_alpha"],
                           r["posterior_beta"])
                  for r in store.by_ids(sorted(comp), "MATCH (n:Point {id: $id}) " + ret,
                                        "MATCH (n:Point) WHERE n.id IN $ids " + ret)]
    return GraphSnapshot(points, edges, exclude_terminal=store.cfg.ep_exclude_terminal)


def _msg(a: float | None, b: float | None) -> tuple[float, float] | None:
    if a is None and b is None:
        return None
    return (0.0 if a is None else float(a), 0.0 if b is None else float(b))


def load_factor_graph(store: Any, seeds: Iterable[str], max_hops: int | None = MAX_HOPS,
                      snap: GraphSnapshot | None = None, epoch: int | None = None, *, store_io: str = "bulk"
                      ) -> tuple[LoadedGraph, int, set[str]]:
    """(loaded graph, epoch snapshot, affected set) for `ep.run(seeds, max_hops)` (§9.6). The epoch is read
    before the graph, so any `_mark_dirty` after this point trips the guard in `flush`. A caller passing its own
    `snap` passes the epoch it read before taking it."""
    if snap is None or epoch is None:
        epoch = store.ep_version()
        snap = snapshot(store, store_io=store_io)
    loaded = snap.load(list(seeds), max_hops)
    return loaded, epoch, loaded.affected


def _epoch_guard(store: Any, epoch_snapshot: int) -> bool:
    """True when the pass may write. Calls the `before_flush` fault hook first (§5.3)."""
    if store.faults.before_flush is not None:
        store.faults.before_flush()
    return store.ep_version() <= epoch_snapshot


def _check_store_io(store_io: str) -> None:
    if store_io not in STORE_IO:
        raise ValueError(f"store_io must be one of {STORE_IO}, got {store_io!r}")


def _column_of(store: Any, ids: list[str], column: str, store_io: str) -> dict[str, Any]:
    """`{id: n.<column>}` for the Points among `ids`. The bulk path reads the column of every Point through Arrow
    when `ids` is long (Kuzu evaluates `n.id IN $ids` per Point against the whole list, which costs seconds at
    1e4 ids); the `unwind` path and short lists use the `IN` query. Both give the same mapping."""
    if store_io == "bulk" and len(ids) >= BULK_MIN_ROWS:
        wanted = set(ids)
        cols = _columns(store, f"MATCH (n:Point) RETURN n.id AS id, n.{column} AS v")
        return {i: v for i, v in zip(cols["id"], cols["v"], strict=True) if i in wanted}
    return {r["id"]: r["v"] for r in store.query(
        f"MATCH (n:Point) WHERE n.id IN $ids RETURN n.id AS id, n.{column} AS v", {"ids": ids})}


def _set_rows(store: Any, rows: list[dict[str, Any]], unwind: str, load: str, store_io: str,
              params: dict[str, Any] | None = None) -> None:
    """One SET statement over `rows`: `UNWIND $rows AS row ...` (the `unwind` path, and short lists) or the same
    SET as `LOAD FROM tbl ...` over a pyarrow table of the rows (the bulk path; Kuzu matches list parameters of
    thousands of structs slowly). `load` names the table columns as the row keys."""
    if store_io == "bulk" and len(rows) >= BULK_MIN_ROWS:
        import pyarrow as pa

        table = pa.table({k: [r[k] for r in rows] for k in rows[0]})
        store.bulk_load(f"LOAD FROM tbl {load} RETURN count(*) AS n", table, params)
        return
    store.execute(f"UNWIND $rows AS row {unwind}", {"rows": rows, **(params or {})})


def flush(store: Any, loaded: LoadedGraph, result: EPResult, epoch_snapshot: int, *,
          store_io: str = "bulk", edge_write: str = "rewrite") -> bool:
    """§9.7 flush: per claim of 𝒞 `confidence` (4 dp), `posterior_*`, `ep_*` unless baseline; messages of the
    active factors on their edges; one transaction. Returns False (nothing written) when the epoch advanced.

    `store_io="bulk"` (default) writes large batches with `LOAD FROM` over pyarrow tables and reads the
    baseline flags with one whole-column scan; `store_io="unwind"` is the previous statement set (`UNWIND` list
    parameters, `IN` lists). Both write the same values to the same rows in one transaction."""
    _check_store_io(store_io)
    if not _epoch_guard(store, epoch_snapshot):
        return False
    baseline = {k: bool(v) for k, v in _column_of(store, sorted(loaded.affected), "baseline_set", store_io).items()}
    plain, base = [], []
    for cid in sorted(loaded.affected):
        a, b = result.beliefs[cid]
        row = {"id": cid, "c": round(a / (a + b), 4), "a": float(a), "b": float(b)}
        (base if baseline.get(cid) else plain).append(row)
    edge_rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for rel, src, tgt, col, key in loaded.edge_msgs:
        m = result.msgs[key]
        row = edge_rows.setdefault((rel, src, tgt), {"s": src, "t": tgt, "ma": None, "mb": None, "ba": None,
                                                    "bb": None, "has_m": False, "has_b": False})
        if col == "msg":
            row.update(ma=float(m[0]), mb=float(m[1]), has_m=True)
        else:
            row.update(ba=float(m[0]), bb=float(m[1]), has_b=True)
    with store.transaction():
        if plain:
            _set_rows(store, plain,
                      "MATCH (n:Point {id: row.id}) SET n.confidence = row.c, n.posterior_alpha = row.a, "
                      "n.posterior_beta = row.b, n.ep_alpha = row.a, n.ep_beta = row.b",
                      "MATCH (n:Point {id: id}) SET n.confidence = c, n.posterior_alpha = a, n.posterior_beta = b, "
                      "n.ep_alpha = a, n.ep_beta = b", store_io)
        if base:
            _set_rows(store, base,
                      "MATCH (n:Point {id: row.id}) SET n.confidence = row.c, n.posterior_alpha = row.a, "
                      "n.posterior_beta = row.b",
                      "MATCH (n:Point {id: id}) SET n.confidence = c, n.posterior_alpha = a, n.posterior_beta = b",
                      store_io)
        _write_edge_msgs(store, edge_rows, store_io, edge_write)
    return True


EDGE_WRITES = ("rewrite", "update")
_PA_TYPES = {"INT64": "int64", "DOUBLE": "float64", "STRING": "string"}


def _edge_columns() -> list[tuple[str, str]]:
    """(name, Kuzu type) of every IMPL/NAND property, from the schema (the rewrite recreates all of them)."""
    from .schema import _MSG_COLS

    return [tuple(c.strip().split()) for c in _MSG_COLS.split(",")]  # type: ignore[misc]


def _write_edge_msgs(store: Any, edge_rows: dict[tuple[str, str, str], dict[str, Any]], store_io: str,
                     edge_write: str) -> None:
    """The flush's edge-message writes, inside its transaction (`flush(..., edge_write=...)`, `dream(...)`).

    * ``"rewrite"`` (default): every IMPL/NAND edge between Points leaving a source the flush writes to is read
      (all its properties, in the order a snapshot reads them), deleted, and created again with the same
      properties and the new messages, one relationship table at a time in the order read (one Kuzu thread, so
      the creation order is the read order): a later snapshot reads the same edges, values and order as after
      an in-place update.
    * ``"update"``: the previous path, kept as a named option: one in-place SET per relationship table and
      message column (``MATCH (a)-[r]->(b) SET r.msg_alpha = ...``).

    Why the default changed (Kuzu 0.11.3, the last release): once in-place edge updates go through a CHECKPOINT
    (an explicit one, the one closing a store does, or the automatic one Kuzu runs when its WAL passes 16 MiB,
    which two 10,000-factor dreams in one session do), Kuzu reads some of those edges back wrong: with another
    target Point (the one at offset 0) and ``idx`` NULL (seen on the 2,047-factor ``ep_scaling`` store, 4,094
    Points, not on the 1,800-factor one), and on the 2,048-factor store (4,096 Points; the smallest found) and
    many larger ones (not all: 2,250 completes) the next in-place SET fails with ``KU_UNREACHABLE``
    (``csr_node_group.cpp``), so the second dream of such a store raises out of its flush (its transaction rolls
    back: the store reads as before that dream).
    Edges deleted and created again read back unchanged through a checkpoint and take the next write.
    ``benchmarks/dream_abort.py`` reproduces both in child processes."""
    if edge_write not in EDGE_WRITES:
        raise ValueError(f"edge_write must be one of {EDGE_WRITES}, got {edge_write!r}")
    if edge_write == "update":
        for rel in ("IMPL", "NAND"):
            for has, cols in (("has_m", ("msg_alpha", "msg_beta")), ("has_b", ("back_msg_alpha", "back_msg_beta"))):
                rows = [{"s": r["s"], "t": r["t"], "x": r["ma" if has == "has_m" else "ba"],
                         "y": r["mb" if has == "has_m" else "bb"]}
                        for (rl, _, _), r in sorted(edge_rows.items()) if rl == rel and r[has]]
                if rows:
                    _set_rows(store, rows,
                              f"MATCH (a:Point {{id: row.s}})-[r:{rel}]->(b:Point {{id: row.t}}) "
                              f"SET r.{cols[0]} = row.x, r.{cols[1]} = row.y",
                              f"MATCH (a:Point {{id: s}})-[r:{rel}]->(b:Point {{id: t}}) "
                              f"SET r.{cols[0]} = x, r.{cols[1]} = y", store_io)
        return
    cols = _edge_columns()
    names = [c for c, _ in cols]
    ret = ", ".join(f"r.{c} AS {c}" for c in names)
    new = {rel: {(s, t): r for (rl, s, t), r in edge_rows.items() if rl == rel and (r["has_m"] or r["has_b"])}
           for rel in ("IMPL", "NAND")}
    sources = {rel: sorted({s for s, _ in new[rel]}) for rel in new}
    olds: dict[str, list[dict[str, Any]]] = {"IMPL": [], "NAND": []}
    if store_io == "bulk" and sum(map(len, sources.values())) >= BULK_MIN_ROWS:
        # the snapshot's own statement shape (same plan, same order: a forward scan of each source's edges)
        got = _columns(store, f"MATCH (a:Point)-[r:IMPL|NAND]->(b) RETURN a.id AS s, label(r) AS rel, b.id AS t, "
                              f"label(b) AS tlabel, {ret}")
        wanted = {rel: set(ids) for rel, ids in sources.items()}
        for i, (src, rel, tl) in enumerate(zip(got["s"], got["rel"], got["tlabel"], strict=True)):
            if tl == "Point" and src in wanted[rel]:
                olds[rel].append({"s": src, "t": got["t"][i], **{c: got[c][i] for c in names}})
    else:
        for rel, ids in sources.items():
            if ids:
                olds[rel] = store.query(f"MATCH (a:Point)-[r:{rel}]->(b:Point) WHERE a.id IN $ids "
                                        f"RETURN a.id AS s, b.id AS t, {ret}", {"ids": ids})
    for rel in ("IMPL", "NAND"):
        if not new[rel]:
            continue
        rows = []
        for o in olds[rel]:
            row = dict(o)
            r = new[rel].get((o["s"], o["t"]))
            if r is not None and r["has_m"]:
                row.update(msg_alpha=r["ma"], msg_beta=r["mb"])
            if r is not None and r["has_b"]:
                row.update(back_msg_alpha=r["ba"], back_msg_beta=r["bb"])
            rows.append(row)
        # each (source, target) pair once: one keyed DELETE removes every edge of the pair (duplicates too); keyed
        # at both ends, as the in-place SET was, so the change log (tortoise_sim.changes) can name the Points
        pairs = list(dict.fromkeys((r["s"], r["t"]) for r in rows))
        props = ", ".join(f"{c}: CAST(row.{c} AS {t})" for c, t in cols)
        if store_io == "bulk" and len(rows) >= BULK_MIN_ROWS:
            import pyarrow as pa

            store.bulk_load(f"LOAD FROM tbl MATCH (a:Point {{id: s}})-[r:{rel}]->(b:Point {{id: t}}) DELETE r "
                            "RETURN count(*) AS n", pa.table({"s": pa.array([s for s, _ in pairs], pa.string()),
                                                              "t": pa.array([t for _, t in pairs], pa.string())}))
            table = pa.table({"s": pa.array([r["s"] for r in rows], pa.string()),
                              "t": pa.array([r["t"] for r in rows], pa.string()),
                              **{c: pa.array([r[c] for r in rows], getattr(pa, _PA_TYPES[t])()) for c, t in cols}})
            # one thread: a parallel scan of the table would create the edges out of order
            store._kuzu_conn.set_max_threads_for_exec(1)
            try:
                store.bulk_load(f"LOAD FROM tbl MATCH (a:Point {{id: s}}) MATCH (b:Point {{id: t}}) CREATE (a)-[:{rel} "
                                "{" + ", ".join(f"{c}: {c}" for c in names) + "}]->(b) RETURN count(*) AS n", table)
            finally:
                # back to the connection's own setting (0: the database's, Kuzu's hardware concurrency)
                store._kuzu_conn.set_max_threads_for_exec(store._kuzu_conn.num_threads or os.cpu_count() or 1)
        else:
            store.execute(f"UNWIND $rows AS row MATCH (a:Point {{id: row.s}})-[r:{rel}]->(b:Point {{id: row.t}}) "
                          "DELETE r", {"rows": [{"s": s, "t": t} for s, t in pairs]})
            store.execute(f"UNWIND $rows AS row MATCH (a:Point {{id: row.s}}) MATCH (b:Point {{id: row.t}}) "
                          f"CREATE (a)-[:{rel} {{{props}}}]->(b)", {"rows": rows})


def write_back(store: Any, loaded: LoadedGraph, result: EPResult, *, stamp: bool,
               store_io: str = "bulk") -> list[dict[str, Any]]:
    """Dream write-back after a committed flush (§9.7): full-precision `confidence`; `lastDreamedAt = updatedAt =
    now` when stamping and converged, else only `updatedAt` (TOR-17). Emits `ConfidenceChanged` per written claim
    (§9.9, TOR-20) and returns the event payloads. `store_io` as in `flush`."""
    _check_store_io(store_io)
    ids = sorted(loaded.affected)
    if not ids:
        return []
    now = store.now()
    stamp_now = stamp and result.converged
    rows = [{"id": c, "c": result.beliefs[c][0] / (result.beliefs[c][0] + result.beliefs[c][1])} for c in ids]
    with store.transaction():
        if stamp_now:
            _set_rows(store, rows, "MATCH (n:Point {id: row.id}) SET n.confidence = row.c, "
                      "n.lastDreamedAt = $now, n.updatedAt = $now",
                      "MATCH (n:Point {id: id}) SET n.confidence = c, n.lastDreamedAt = $now, n.updatedAt = $now",
                      store_io, {"now": now})
        else:
            _set_rows(store, rows, "MATCH (n:Point {id: row.id}) SET n.confidence = row.c, n.updatedAt = $now",
                      "MATCH (n:Point {id: id}) SET n.confidence = c, n.updatedAt = $now", store_io, {"now": now})
    events = []
    if store.cfg.emit_confidence_changed:
        last = _column_of(store, ids, "lastDreamedAt", store_io)
        events = [{"id": row["id"], "confidence": row["c"], "lastDreamedAt": last.get(row["id"])} for row in rows]
        # one feed transaction for all of them (same rows as one emit_event each, see TortoiseStore.emit_events)
        store.emit_events("ConfidenceChanged", events)
    return events


def run(store: Any, seed_ids: Iterable[str], max_hops: int | None = MAX_HOPS, evidence: Any = None, *,
        warm_start: bool = False, gamma: float = 1e-3, snap: GraphSnapshot | None = None,
        epoch: int | None = None, ep_engine: str = "fused", store_io: str = "bulk",
        edge_write: str = "rewrite") -> dict[str, Any]:
    """Upstream `ep.run` (§9.6): affected set from the seeds, EP with the store's `ep_max_iter`/`ep_tol`, flush.
    `evidence` is accepted for signature parity and unused (priors come from the stored baselines).
    `ep_engine` is `run_ep`'s `engine`; `store_io` chooses how the snapshot is read and the flush written
    (`"bulk"`: Arrow columns and `LOAD FROM`; the previous readers and statements stay `store_io="unwind"`, as the
    previous engine stays `ep_engine="batched"`; every choice gives the same beliefs and the same store).

    Returns `{iterations, converged, beliefs, affected, flush_skipped, truncated, warnings, warm_skipped}`;
    a non-converged run flushes too (§9.4: both outcomes flush).
    """
    loaded, epoch, affected = load_factor_graph(store, seed_ids, max_hops, snap, epoch, store_io=store_io)
    result = run_ep(loaded.fg, max_iter=store.cfg.ep_max_iter, tol=store.cfg.ep_tol, warm_start=warm_start,
                    gamma=gamma, engine=ep_engine)
    written = flush(store, loaded, result, epoch, store_io=store_io, edge_write=edge_write)
    return {"iterations": result.iterations, "converged": result.converged, "beliefs": result.beliefs,
            "affected": sorted(affected), "flush_skipped": not written, "truncated": loaded.truncated,
            "warnings": loaded.warnings, "warm_skipped": result.warm_skipped, "_loaded": loaded,
            "_result": result, "_epoch": epoch}


# ---------------------------------------------------------------------------------------------------------------
# Scheduling
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class DreamResult:
    """§9.8 result; `as_dict()` gives the spec's keys."""

    mode: str
    batches: int = 0
    iterations: int = 0
    converged: bool = True
    converged_all: bool = True
    budget_used: int = 0
    affected_claims: list[str] = field(default_factory=list)
    coverage: float | None = None
    flush_skipped: bool = False
    stale_unresolved: list[str] = field(default_factory=list)
    noop: bool = False
    events: int = 0
    warnings: list[str] = field(default_factory=list)
    stamped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "mode", "batches", "iterations", "converged", "converged_all", "budget_used", "affected_claims",
            "coverage", "flush_skipped", "stale_unresolved", "noop", "events", "warnings", "stamped")}


def calibration_violations(store: Any, snap: GraphSnapshot | None = None) -> list[str]:
    """Live claims of a calibration-relevant kind without `baseline_set` (§9.8 step 1)."""
    snap = snap if snap is not None else snapshot(store)
    return sorted(p.id for p in snap.points.values()
                  if snap.is_live_claim(p.id) and p.point_kind in CALIBRATION_KINDS and not p.baseline_set)


def _live_claims(snap: GraphSnapshot) -> list[str]:
    return sorted(pid for pid in snap.points if snap.is_live_claim(pid))


def _hydrate_roots(store: Any) -> None:
    if not store.dirty_roots:
        store.dirty_roots.update(r["id"] for r in store.query(
            "MATCH (n:Point) WHERE n.ep_dirty = true RETURN n.id AS id"))


def _factorless(snap: GraphSnapshot, ids: Iterable[str]) -> list[str]:
    """Live claims that no active factor touches (no usable operator, no direct edge to a live claim)."""
    return [c for c in ids if snap.is_live_claim(c) and not snap.load_affected({c}).fg.factors]


def _stamp_trivial(store: Any, ids: Sequence[str], keyed: bool = False) -> None:
    """`lastDreamedAt = now` on factor-less claims; no `confidence`, no event (a trivial stamp). `keyed` writes
    through `store.by_ids` in one transaction (the component scope), else one `UNWIND` statement."""
    if ids and keyed:
        with store.transaction():
            store.by_ids(list(ids), "MATCH (n:Point {id: $id}) SET n.lastDreamedAt = $now",
                         "MATCH (n:Point) WHERE n.id IN $ids SET n.lastDreamedAt = $now", {"now": store.now()})
    elif ids:
        store.execute("UNWIND $ids AS i MATCH (n:Point {id: i}) SET n.lastDreamedAt = $now",
                      {"ids": list(ids), "now": store.now()})


def _settle_roots(store: Any, ids: set[str], epoch: int, store_io: str = "bulk", keyed: bool = False) -> None:
    """Converged pass: drop ids from the roots, clear `ep_dirty` where `ep_dirty_at` <= the epoch snapshot, reset
    retry counters, forget roots whose Point no longer exists. `keyed` clears the flags through `store.by_ids`."""
    store.dirty_roots.difference_update(ids)
    retries = store.dream_state.setdefault("retries", {})
    for i in ids:
        retries.pop(i, None)
    if ids and keyed:
        with store.transaction():
            store.by_ids(sorted(ids), "MATCH (n:Point {id: $id}) WHERE n.ep_dirty_at IS NULL OR n.ep_dirty_at <= $e "
                         "SET n.ep_dirty = false", "MATCH (n:Point) WHERE n.id IN $ids AND (n.ep_dirty_at IS NULL OR "
                         "n.ep_dirty_at <= $e) SET n.ep_dirty = false", {"e": epoch})
    elif ids:
        store.execute("MATCH (n:Point) WHERE n.id IN $ids AND (n.ep_dirty_at IS NULL OR n.ep_dirty_at <= $e) "
                      "SET n.ep_dirty = false", {"ids": sorted(ids), "e": epoch})
    if store.dirty_roots:
        alive = set(_column_of(store, sorted(store.dirty_roots), "id", store_io))
        store.dirty_roots.intersection_update(alive)


def _fail_roots(store: Any, anchors: Sequence[str], result: DreamResult) -> None:
    """Not converged: attempts += 1 per anchor; > 3 attempts => give up (flag cleared, `stale_unresolved`); else
    record `backoff_until = now + min(2^attempts, 3600) s` (recorded, not enforced)."""
    retries = store.dream_state.setdefault("retries", {})
    now = store.clock()
    give_up = []
    for a in anchors:
        st = retries.setdefault(a, {"attempts": 0, "backoff_until": None})
        st["attempts"] += 1
        if st["attempts"] > RETRY_CAP:
            give_up.append(a)
            retries.pop(a, None)
        else:
            st["backoff_until"] = (now + timedelta(seconds=min(2 ** st["attempts"], BACKOFF_CAP_S))).isoformat(
                timespec="microseconds")
    if give_up:
        store.dirty_roots.difference_update(give_up)
        store.execute("MATCH (n:Point) WHERE n.id IN $ids SET n.ep_dirty = false", {"ids": give_up})
        result.stale_unresolved.extend(sorted(give_up))


def _run_batch(store: Any, anchors: list[str], *, max_hops: int | None, op_cap: int, warm_start: bool,
               stamp: bool, result: DreamResult, exclude_ops: set[str] | None = None,
               selected: tuple[list[str], list[EdgeRow]] | None = None, stamp_trivial: bool = True,
               ep_engine: str = "fused", store_io: str = "bulk", snap: GraphSnapshot | None = None,
               epoch: int | None = None, edge_write: str = "rewrite") -> tuple[bool, set[str], list[str]]:
    """One local batch: selector -> `ep.run` -> write-back -> root bookkeeping. Returns (converged, 𝒞, operators
    used). `stamp_trivial=False` leaves factor-less anchors to the caller (window/full stamp them only when every
    chunk converged). A caller passing `snap` (the component scope) passes the epoch read before taking it; the
    settle and stamp writes then go through `store.by_ids`."""
    keyed = snap is not None
    if snap is None or epoch is None:
        epoch = store.ep_version()
        snap = snapshot(store, store_io=store_io)
    ops, direct = selected if selected is not None else snap.select_operators(anchors, max_hops, op_cap,
                                                                              exclude_ops=exclude_ops)
    seeds = list(ops) + sorted({x for e in direct for x in (e.src, e.tgt)})
    affected: set[str] = set()
    converged = True
    if seeds:
        out = run(store, seeds, max_hops, warm_start=warm_start, snap=snap, epoch=epoch, ep_engine=ep_engine,
                  store_io=store_io, edge_write=edge_write)
        result.batches += 1
        result.iterations += out["iterations"]
        result.converged = out["converged"]
        result.converged_all = result.converged_all and out["converged"]
        result.warnings.extend(out["warnings"])
        converged = out["converged"]
        if out["flush_skipped"]:
            result.flush_skipped = True
            return False, set(), ops
        affected = set(out["affected"])
        result.events += len(write_back(store, out["_loaded"], out["_result"], stamp=stamp, store_io=store_io))
        result.affected_claims = sorted(set(result.affected_claims) | affected)
    if converged:
        trivial = _factorless(snap, [a for a in anchors if snap.is_live_claim(a) and a not in affected])
        if stamp and stamp_trivial:
            _stamp_trivial(store, trivial, keyed)
            result.stamped.extend(trivial)
        if stamp and affected:
            result.stamped.extend(sorted(affected))
        _settle_roots(store, affected | set(anchors), epoch, store_io, keyed)
    else:
        _fail_roots(store, anchors, result)
    return converged, affected, ops


def dream(store: Any, dirty_only: bool = True, full: bool = False, max_hops: int | None = MAX_HOPS,
          require_calibration: bool | None = None, stamp_dreamed_at: bool = True, mode: str | None = None,
          budget: int | None = None, warm_start: bool = True, progress: Progress | None = None,
          ep_engine: str = "fused", store_io: str = "bulk", scope: str = "component",
          edge_write: str = "rewrite") -> DreamResult:
    """§9.8 dream. Mode: explicit `mode` wins; `full=True` (or `dirty_only=False` [SIM]) => full; dirty roots =>
    local; fewer than 50 operator Points => full; else local. TOR-17, TOR-19, TOR-20, TOR-21, TOR-50.
    `ep_engine` and `store_io` choose the EP engine and how the graph is read and written (see `run`); `scope`
    ("component", default, or "graph", the previous path) how much of the graph a local pass reads (module doc)."""
    _check_store_io(store_io)
    if edge_write not in EDGE_WRITES:
        raise ValueError(f"edge_write must be one of {EDGE_WRITES}, got {edge_write!r}")
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    if mode not in (None, "local", "window", "full"):
        raise ValueError(f"mode must be local, window or full, not {mode!r}")
    if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool)):
        raise ValueError(f"budget must be an int or None, not {budget!r}")
    gate = store.cfg.require_calibration if require_calibration is None else require_calibration
    if (scope == "component" and not gate and max_hops is not None
            and (mode == "local" or (mode is None and dirty_only and not full))):
        _hydrate_roots(store)
        if mode == "local" or store.dirty_roots:
            return _dream_component(store, max_hops=max_hops, budget=budget, warm_start=warm_start,
                                    stamp=stamp_dreamed_at, progress=progress, ep_engine=ep_engine,
                                    store_io=store_io, edge_write=edge_write)
    snap = snapshot(store, store_io=store_io)
    if gate:
        bad = calibration_violations(store, snap)
        if bad:
            raise CalibrationError(bad)
    _hydrate_roots(store)
    if mode is None:
        if full or not dirty_only:
            mode = "full"
        elif store.dirty_roots:
            mode = "local"
        elif sum(1 for p in snap.points.values() if p.is_op) < AUTO_FULL_OPERATORS:
            mode = "full"
        else:
            mode = "local"
    if budget is not None and budget <= 0:
        return DreamResult(mode=mode, noop=True)
    if mode == "window":
        return dream_window(store, budget=WINDOW_BUDGET if budget is None else budget, max_hops=max_hops,
                            warm_start=warm_start, stamp_dreamed_at=stamp_dreamed_at, progress=progress,
                            _gate_checked=True, ep_engine=ep_engine, store_io=store_io, edge_write=edge_write)
    result = DreamResult(mode=mode)
    if mode == "local":
        anchors = sorted(store.dirty_roots)
        if not anchors:
            result.noop = True
            return result
        _, _, ops = _run_batch(store, anchors, max_hops=max_hops, op_cap=budget or OP_CAP, warm_start=warm_start,
                               stamp=stamp_dreamed_at, result=result, ep_engine=ep_engine, store_io=store_io,
                               edge_write=edge_write)
        result.budget_used = len(ops)
        if progress:
            progress(1, 1)
        return result
    return _dream_full(store, snap, result, max_hops=max_hops, budget=budget, warm_start=warm_start,
                       stamp=stamp_dreamed_at, progress=progress, ep_engine=ep_engine, store_io=store_io,
                       edge_write=edge_write)


def _dream_component(store: Any, *, max_hops: int, budget: int | None, warm_start: bool, stamp: bool,
                     progress: Progress | None, ep_engine: str, store_io: str,
                     edge_write: str = "rewrite") -> DreamResult:
    """The local pass of `dream` on a snapshot of the dirty roots' components (scope "component"): the same
    batch, read once, the epoch read before the snapshot."""
    if budget is not None and budget <= 0:
        return DreamResult(mode="local", noop=True)
    result = DreamResult(mode="local")
    anchors = sorted(store.dirty_roots)
    if not anchors:
        result.noop = True
        return result
    epoch = store.ep_version()
    snap = component_snapshot(store, anchors, store_io=store_io)
    _, _, ops = _run_batch(store, anchors, max_hops=max_hops, op_cap=budget or OP_CAP, warm_start=warm_start,
                           stamp=stamp, result=result, ep_engine=ep_engine, store_io=store_io, snap=snap,
                           epoch=epoch, edge_write=edge_write)
    result.budget_used = len(ops)
    if progress:
        progress(1, 1)
    return result


def _chunks(ids: list[str], size: int | None = None) -> list[list[str]]:
    size = size or CHUNK
    return [ids[i:i + size] for i in range(0, len(ids), size)]


def _dream_full(store: Any, snap: GraphSnapshot, result: DreamResult, *, max_hops: int | None, budget: int | None,
                warm_start: bool, stamp: bool, progress: Progress | None, ep_engine: str = "fused",
                store_io: str = "bulk", edge_write: str = "rewrite") -> DreamResult:
    n_ops = sum(1 for p in snap.points.values() if p.is_op)
    if n_ops > FULL_PASS_CEILING:
        raise BudgetExceededError(f"full pass aborted: {n_ops} operators > {FULL_PASS_CEILING}")
    anchors = _live_claims(snap)
    chunks = _chunks(anchors)
    cap = 10 ** 9 if budget is not None else OP_CAP
    plans = [snap.select_operators(chunk, max_hops, cap) for chunk in chunks]
    if budget is not None:
        used = {op for ops, _ in plans for op in ops}
        if len(used) > budget:
            raise BudgetExceededError(f"full pass needs {len(used)} operators > budget {budget}")
    used_ops: set[str] = set()
    all_affected: set[str] = set()
    for i, (chunk, plan) in enumerate(zip(chunks, plans, strict=True)):
        # write-backs change numbers, never topology, so the plans made up front stay valid
        _, affected, ops = _run_batch(store, chunk, max_hops=max_hops, op_cap=cap, warm_start=warm_start,
                                      stamp=stamp, result=result, selected=plan, stamp_trivial=False,
                                      ep_engine=ep_engine, store_io=store_io, edge_write=edge_write)
        used_ops.update(ops)
        all_affected |= affected
        if progress:
            progress(i + 1, len(chunks))
        if result.flush_skipped:
            break
    if stamp and result.converged_all and not result.flush_skipped:
        trivial = _factorless(snapshot(store, store_io=store_io), [a for a in anchors if a not in all_affected])
        _stamp_trivial(store, trivial)
        result.stamped.extend(trivial)
    result.budget_used = len(used_ops)
    return result


def dream_window(store: Any, budget: int = WINDOW_BUDGET, *, max_hops: int | None = MAX_HOPS,
                 warm_start: bool = True, stamp_dreamed_at: bool = True, progress: Progress | None = None,
                 require_calibration: bool | None = None, _gate_checked: bool = False, ep_engine: str = "fused",
                 store_io: str = "bulk", edge_write: str = "rewrite") -> DreamResult:
    """§9.8 step 5: stale-first window (TOR-19). Claims ranked by (coalesce(lastDreamedAt, ''), id), LIMIT budget
    (all if none was ever stamped), plus the dirty roots; chunks of 2000; one selector call per chunk with
    `op_cap=budget` minus earlier chunks' operators; stop at `budget` distinct operators."""
    if not isinstance(budget, int) or isinstance(budget, bool):
        raise ValueError(f"budget must be an int, not {budget!r}")
    result = DreamResult(mode="window")
    if not _gate_checked:
        gate = store.cfg.require_calibration if require_calibration is None else require_calibration
        if gate:
            bad = calibration_violations(store)
            if bad:
                raise CalibrationError(bad)
        _hydrate_roots(store)
    if budget <= 0:
        result.noop = True
        return result
    snap = snapshot(store, store_io=store_io)
    live = set(_live_claims(snap))
    stamps = _column_of(store, sorted(live), "lastDreamedAt", store_io)
    ranked = sorted(live, key=lambda i: (stamps.get(i) or "", i))
    if any(stamps.get(i) for i in live):
        ranked = ranked[:budget]
    window = ranked + sorted(r for r in store.dirty_roots if r not in set(ranked) and r in live)
    if not window:
        result.noop = True
        return result
    used: list[str] = []
    covered: set[str] = set()
    chunks = _chunks(window)
    for i, chunk in enumerate(chunks):
        remaining = budget - len(used)
        if remaining <= 0:
            break
        ops, direct = snapshot(store, store_io=store_io).select_operators(chunk, max_hops, budget)
        ops = [o for o in ops if o not in used][:remaining]
        _, affected, _ = _run_batch(store, chunk, max_hops=max_hops, op_cap=budget, warm_start=warm_start,
                                    stamp=stamp_dreamed_at, result=result, selected=(ops, direct),
                                    stamp_trivial=False, ep_engine=ep_engine, store_io=store_io,
                                    edge_write=edge_write)
        used.extend(ops)
        covered |= affected
        if progress:
            progress(i + 1, len(chunks))
        if result.flush_skipped:
            break
    if stamp_dreamed_at and result.converged_all and not result.flush_skipped:
        trivial = _factorless(snapshot(store, store_io=store_io),
                              [c for c in window if c not in covered and c in live])
        _stamp_trivial(store, trivial)
        result.stamped.extend(trivial)
    result.budget_used = len(used)
    in_window = set(window)
    touched = (covered | set(result.stamped)) & in_window
    result.coverage = len(touched) / len(window)
    return result


# ---------------------------------------------------------------------------------------------------------------
# Seams used by part 1 (capture promotion, confidence reads)
# ---------------------------------------------------------------------------------------------------------------


def get_confidence(store: Any, point_id: str) -> dict[str, float]:
    """§9.8: if the claim is dirty, run a non-stamping, non-censored local pass from it first; then return
    `{mean, variance, alpha, beta, effective_n}` from coalesce(posterior, ep, 1)."""
    row = store.get_point(point_id)
    if row is None:
        raise UnknownPoint(point_id)
    if row.get("ep_dirty") or point_id in store.dirty_roots:
        result = DreamResult(mode="local")
        _run_batch(store, [point_id], max_hops=MAX_HOPS, op_cap=OP_CAP, warm_start=False, stamp=False,
                   result=result)
        row = store.get_point(point_id) or row
    a = row.get("posterior_alpha")
    b = row.get("posterior_beta")
    if a is None or b is None:
        a = row.get("ep_alpha") if row.get("ep_alpha") is not None else 1.0
        b = row.get("ep_beta") if row.get("ep_beta") is not None else 1.0
    a, b = float(a), float(b)
    n = a + b
    if not (math.isfinite(a) and math.isfinite(b)) or n <= 0:
        raise ValueError(f"stored belief of {point_id} is not a valid Beta: ({a}, {b})")
    return {"mean": a / n, "variance": a * b / (n * n * (n + 1.0)), "alpha": a, "beta": b, "effective_n": n}


def ingest_dream(store: Any, claim_ids: list[str], *, scope: str = "component") -> dict[str, Any]:
    """Capture promotion's bounded local dream (§3.9, §12): local, budget 100, no calibration, no censoring.
    `store.run_ingest_dream` finds this function by name; capture turns any exception into a warning. `scope` as
    in `dream` ("graph": the previous whole-graph pass, same result)."""
    return dream(store, mode="local", require_calibration=False, warm_start=False, budget=INGEST_BUDGET,
                 scope=scope).as_dict()
