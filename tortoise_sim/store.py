"""Kuzu graph store: schema (spec §2.4), connection ownership, journal/GraphEvent feed (§5), ``_mark_dirty`` (§4.3).

Where each part lives: ``tortoise_sim.schema`` (tables, columns, the migration on open), ``tortoise_sim.connection``
(the write-counting Kuzu connection, ``StoreFull``, the commit fault-hook steps, ``open_with_retry``),
``tortoise_sim.feed`` (the GraphEvent feed and JSONL journal, the ``EventFeed`` mixin), ``tortoise_sim.clock``
(``iso``, ``StepClock``); this module keeps ``TortoiseStore`` (statements, transactions, reads, writes, EP
bookkeeping, seams) and re-exports the public names of those modules, so ``from tortoise_sim.store import ...``
works as before.

``TortoiseStore`` owns one ``kuzu.Database`` + ``kuzu.Connection`` (on disk when ``path`` is given, in-memory
otherwise), migrates the schema on open (``CREATE ... IF NOT EXISTS`` + ``ALTER TABLE ... ADD`` for missing
columns), and runs **parameterised Cypher only**: user values always travel as ``$params``; the only names
interpolated into query text are column/table names from the fixed whitelists below.

Public API used by the other modules (and by part 2, ``ep.py`` / ``dream.py``) -- stable, additions only:

Infrastructure
- ``TortoiseStore(path=None, *, config=SimConfig(), encoder=None, clock=None, seed=0, faults=None)``
  (``seed=None`` = non-deterministic ids, used by the CLI); ``read_only=True`` opens an on-disk store read-only (no migration, no
  write lock; used by the hook read paths)
- ``.cfg`` (SimConfig), ``.faults`` (FaultHooks), ``.rng`` (random.Random), ``.clock()`` (aware UTC datetime)
- ``.now() -> str`` ISO-8601 microseconds ``+00:00``; ``.new_id() -> str`` (``<epoch_ms:012x>-<12 hex>``)
- ``.query(cypher, params=None) -> list[dict]``; ``.execute(cypher, params=None) -> None``
- ``.bulk_load("LOAD FROM tbl ...", pyarrow_table, params)``: bulk path for large writes
- ``.transaction()`` context manager (nests: inner blocks join the outer transaction; rollback on error)
- ``.fault(step)`` calls the injected step hook (FaultPlan style) before a durable write; ``transaction()`` calls
  it with ``kuzu.commit`` before COMMIT and reports ``after_write("kuzu.commit", None, None)`` after it; a
  mutating statement outside a transaction (after the schema migration) gets ``kuzu.autocommit`` likewise
  (``tortoise_sim.durable``), and the journal append reports its byte offset (crash-point explorer seams)
- ``SimConfig(event_durability="transactional")`` (hardened, REL-07): ``.operation()`` wraps an SDK call in one
  transaction, feed rows are written inside it, journal lines carry the feed ``seq`` and ``.recover_journal()``
  (run on open) re-derives the lines a crash lost; ``EntityMutated`` then also goes to the feed
- ``.embed(texts) -> list[list[float] | None]`` (fail-open: any failure => None); ``.encoder``

Reads
- ``.get_point(id) -> dict | None`` (every column, ``embedding`` included); ``.point_exists(id)``
- ``.claim_rows(ids=None) -> list[dict]``: plain claims (id, status, pointKind, outdated, baseline_set,
  ep_alpha, ep_beta, posterior_alpha, posterior_beta, confidence, lastDreamedAt, ep_dirty, ep_dirty_at,
  updatedAt, is_operator, op_type)
- ``.operator_rows() -> list[dict]``: operator Points (id, op_type, direction, label, status)
- ``.operator_edge_rows(op_ids=None) -> list[dict]``: (op_id, rel, input_id, input_label, idx, msg_alpha,
  msg_beta) for every IMPL/NAND edge leaving an operator Point
- ``.direct_edge_rows() -> list[dict]``: (src, tgt, rel, direction, weight, msg_alpha, msg_beta,
  back_msg_alpha, back_msg_beta) for every IMPL/NAND edge between two plain claims
- ``.sync_point_vectors()`` / ``.query_point_vectors(vec, k)``: the optional ``vector_index=True`` side table
- ``.feed(types=None) -> list[dict]``: GraphEvent rows ordered by ``seq`` with ``payload`` decoded
- ``.count(label) -> int``; ``.ep_version() -> int``
- ``.write_seq -> int``: monotonically increasing write counter, bumped by every statement that may mutate the
  database (any statement through ``.conn``, ``.query``, ``.execute``, ``.bulk_load``, ``.transaction()``
  BEGIN/COMMIT/ROLLBACK); read-side caches (``search.search_points``) rebuild when it moved

Writes
- ``.set_point_props(id, props)``: SET whitelisted Point columns (None => NULL)
- ``.set_edge_messages(rel, src_id, tgt_id, msg=None, back=None, idx=None)``: write an edge's messages
- ``.emit_event(type, payload, snapshot=None)``: best-effort graph feed + optional JSONL journal (§5.1);
  inside ``transaction()`` both sinks run after COMMIT (dropped on rollback)
- ``.journal(type, payload)``: journal-only line (``EntityMutated``)
- ``.mark_dirty(ids) -> int`` (alias ``_mark_dirty``): bumps ``EpMeta.ep_version`` once, flags ids and the
  co-inputs of operators with an edge to them, adds them to ``.dirty_roots``; returns the new epoch
- ``.invalidate_messages(ids=None)``: NULL the four message columns on every IMPL/NAND edge (``ids=None``) or
  on the edges incident to ``ids`` (§4.4)

Seams
- ``.ingest_dream_hook``: ``Callable[[TortoiseStore, list[str]], dict | None] | None``. Capture promotion (§3.9)
  calls ``store.run_ingest_dream(claim_ids)``, which uses this hook when set, else
  ``tortoise_sim.dream.ingest_dream(store, claim_ids)`` when part 2 defines it, else does nothing and reports
  ``{"noop": True, "reason": "ingest_dream_not_wired"}``. Part 2 wires the bounded local dream here.
- ``.confidence_hook``: likewise for ``get_confidence`` (default: read stored columns, no EP pass).
- ``.dream_state``: a dict part 2 may use for per-root retry counters.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import random
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import kuzu

from .clock import StepClock, iso
from .clock import system_clock as _system_clock
from .config import READ_TERMINAL, FaultHooks, SimConfig
from .connection import (
    _TX_CONTROL,
    AUTOCOMMIT_STEP,
    COMMIT_STEP,
    StoreFull,
    _CountingConnection,
    is_lock_error,
    open_with_retry,
)
from .durable import after_write
from .embed import EMBED_DIM, HashingEncoder, MiniLMEncoder, cut_words
from .feed import EventFeed
from .schema import NODE_TABLES as _NODE_TABLES
from .schema import POINT_COLUMNS, SCHEMA_VERSION, migrate
from .schema import REL_TABLES as _REL_TABLES

__all__ = ["TortoiseStore", "StepClock", "StoreFull", "POINT_COLUMNS", "READ_TERMINAL", "SCHEMA_VERSION", "iso",
           "DEFAULT_BUFFER_POOL", "ID_IO", "KEYED_MAX", "SCAN_CHUNK", "COMMIT_STEP", "AUTOCOMMIT_STEP",
           "is_lock_error", "open_with_retry"]

DEFAULT_BUFFER_POOL = 1 << 30
ID_IO = ("keyed", "listed")  # see TortoiseStore.by_ids
KEYED_MAX = 16
SCAN_CHUNK = 10_000  # rows per statement of TortoiseStore.scan_arrow

log = logging.getLogger("tortoise_sim")

_OPERATOR = "(n.is_operator = true OR n.op_type IS NOT NULL)"


class TortoiseStore(EventFeed):
    """Owns the Kuzu connection, schema, event feed, clock, rng, encoder and EP bookkeeping (see module doc)."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        config: SimConfig | None = None,
        encoder: Any = None,
        clock: Callable[[], datetime] | None = None,
        seed: int | None = 0,
        faults: FaultHooks | None = None,
        buffer_pool_size: int | None = None,
        max_db_size: int = 1 << 32,
        read_only: bool = False,
    ) -> None:
        self.cfg = config or SimConfig()
        self.path = Path(path) if path is not None else None
        # Kuzu's defaults reserve 8 TiB of virtual address space and ~80 % of RAM per Database, which caps a
        # process at a handful of live stores; bound both. Default buffer pool: 1 GiB for every store (a
        # 10,000-factor dream overflows 128 MiB). The pool is a cap, not an allocation: resident memory follows
        # the pages in use (an empty in-memory store costs the same with a 128 MiB or a 1 GiB cap; only the
        # reserved address space grows). An in-memory store keeps every page in the pool, so its cap is its
        # capacity; past it every statement raises StoreFull (pass buffer_pool_size, or use a path).
        if buffer_pool_size is None:
            buffer_pool_size = DEFAULT_BUFFER_POOL
        self.buffer_pool_size = buffer_pool_size
        self.full: str | None = None  # StoreFull's message once an in-memory store ran out of pool
        sizes = {"buffer_pool_size": buffer_pool_size, "max_db_size": max_db_size}
        if self.path is not None:
            if read_only:  # read paths (hooks): no schema migration, no write lock, shares the file with readers
                self.db = kuzu.Database(str(self.path), read_only=True, **sizes)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.db = kuzu.Database(str(self.path), **sizes)
        else:
            self.db = kuzu.Database(":memory:", **sizes)
        self.write_seq = 0  # see _CountingConnection
        self.id_io = "keyed"  # see by_ids
        self.prepared_statements = True  # see tortoise_sim.connection (False: a fresh preparation per statement)
        self._kuzu_conn = kuzu.Connection(self.db)
        self.conn: Any = _CountingConnection(self._kuzu_conn, self)
        self.clock: Callable[[], datetime] = clock or _system_clock
        # seed=None: fresh randomness (CLI processes sharing one on-disk store must not repeat ids)
        self.rng = random.Random(seed if seed is not None else random.SystemRandom().getrandbits(64))
        self.faults = faults or FaultHooks()
        if encoder is not None:
            self.encoder: Any = encoder
        elif self.cfg.embedder == "hashing":
            self.encoder = HashingEncoder()
        elif self.cfg.embedder == "minilm":
            self.encoder = MiniLMEncoder()
        else:
            self.encoder = None
        self.dirty_roots: set[str] = set()
        self.dream_state: dict[str, Any] = {}
        self.event_failures: list[tuple[str, str, str]] = []  # (sink, type, error) of best-effort sinks
        self.ingest_dream_hook: Callable[[TortoiseStore, list[str]], dict | None] | None = None
        self.confidence_hook: Callable[[TortoiseStore, str], dict] | None = None
        self._tx_depth = 0
        self._pending: list[Callable[[], None]] = []
        self.read_only = bool(read_only and self.path is not None)
        if not self.read_only:
            self.migrate()
        self._migrating = False
        self.recover_journal()

    # ------------------------------------------------------------------ infrastructure
    def full_message(self) -> str:
        mib = self.buffer_pool_size / (1 << 20)
        if self.path is None:
            return (f"in-memory Tortoise store is full: it keeps every page in its {mib:g} MiB Kuzu buffer pool; "
                    f"open it with a larger buffer_pool_size (bytes) or on a path")
        return (f"{self.path}: Kuzu's {mib:g} MiB buffer pool is full (no page could be freed); open the store "
                f"with a larger buffer_pool_size (bytes)")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()
        with contextlib.suppress(Exception):
            self.db.close()

    def __enter__(self) -> TortoiseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def migrate(self) -> None:
        """Create missing tables, add missing columns (schema migration on open), seed the singletons
        (``tortoise_sim.schema.migrate``)."""
        migrate(self)

    def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        res = self.conn.execute(cypher, params or {})
        if isinstance(res, list):  # multiple statements
            res = res[-1]
        cols = res.get_column_names()
        out: list[dict[str, Any]] = []
        while res.has_next():
            row = res.get_next()
            out.append({c: _clean(v) for c, v in zip(cols, row, strict=True)})
        return out

    def execute(self, cypher: str, params: dict[str, Any] | None = None) -> None:
        self.conn.execute(cypher, params or {})

    def by_ids(self, ids: Sequence[str], keyed: str, listed: str,
               params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """One statement over a few Points named by id, in either of two equivalent forms: ``keyed`` binds
        ``$id`` in a primary-key pattern (``MATCH (n:Point {id:$id}) ...``) and runs once per distinct id, rows
        concatenated; ``listed`` filters ``n.id IN $ids`` in one statement. Kuzu answers the keyed form from the
        primary-key index and the listed one by scanning every Point, so ``id_io="keyed"`` (default) uses the
        keyed form for up to ``KEYED_MAX`` ids and ``id_io="listed"`` (the previous path) always the listed one.
        The caller's statements must give the same rows (as a multiset) and writes either way."""
        params = dict(params or {})
        ids = list(ids)
        if self.id_io not in ID_IO:
            raise ValueError(f"id_io must be one of {', '.join(ID_IO)}, not {self.id_io!r}")
        if self.id_io == "keyed" and len(ids) <= KEYED_MAX:
            out: list[dict[str, Any]] = []
            for i in dict.fromkeys(ids):
                out.extend(self.query(keyed, {**params, "id": i}))
            return out
        return self.query(listed, {**params, "ids": ids})

    def scan_arrow(self, where: str, returns: str, params: dict[str, Any] | None = None, *,
                   chunk: int | None = SCAN_CHUNK) -> Any:
        """``MATCH (n:Point) WHERE <where> RETURN <returns> ORDER BY id`` as one pyarrow table (``returns`` must
        name an ``id`` column, ``n.id AS id``), the Kuzu results closed at once.

        ``chunk=None`` runs it as one statement. With a ``chunk`` (default ``SCAN_CHUNK`` rows) it first reads
        the matching ids in order, then the rows in id ranges of ``chunk`` ids each, and concatenates them: the
        same table, but Kuzu never holds the whole result at once. A whole-store result (1e5 Points with their
        embeddings) took about 500 MiB of Kuzu memory that stayed resident after the result was closed; in id
        ranges the peak is one range's worth."""
        import pyarrow as pa

        params = dict(params or {})
        match = f"MATCH (n:Point) WHERE {where}"

        def read(cypher: str, p: dict[str, Any]) -> Any:
            res = self.conn.execute(cypher, p)
            try:
                return res.get_as_arrow(0)
            finally:
                res.close()

        if chunk is None:
            return read(f"{match} RETURN {returns} ORDER BY id", params)
        ids = read(f"{match} RETURN n.id AS id ORDER BY id", params).column("id").to_pylist()
        if len(ids) <= chunk:
            return read(f"{match} RETURN {returns} ORDER BY id", params)
        parts = []
        for k in range(0, len(ids), chunk):
            bounds = {"_lo": ids[k]}
            cond = "n.id >= $_lo"
            if k + chunk < len(ids):
                bounds["_hi"] = ids[k + chunk]
                cond += " AND n.id < $_hi"
            parts.append(read(f"MATCH (n:Point) WHERE ({where}) AND {cond} RETURN {returns} ORDER BY id",
                              {**params, **bounds}))
        return pa.concat_tables(parts)

    def bulk_load(self, cypher: str, table: Any, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run ``LOAD FROM tbl ...`` over a pyarrow table (Kuzu scans the caller's local ``tbl``): the bulk
        path for large writes. Values still never enter the query text."""
        if "LOAD FROM tbl" not in cypher:
            raise ValueError("bulk_load queries must start from 'LOAD FROM tbl'")
        tbl = table  # noqa: F841 - read by Kuzu's Python scan of this frame
        if self.full is not None:
            raise StoreFull(self.full)
        self.write_seq += 1
        try:
            res = self._kuzu_conn.execute(cypher, params or {})  # raw connection: Kuzu scans this frame
        except RuntimeError as exc:
            if "buffer pool is full" not in str(exc):
                raise
            if self.path is None:
                self.full = self.full_message()
            raise StoreFull(self.full_message()) from None
        finally:
            self.write_seq += 1
        cols = res.get_column_names()
        out = []
        while res.has_next():
            out.append(dict(zip(cols, res.get_next(), strict=True)))
        return out

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One explicit Kuzu transaction; nested blocks join the outer one. Kuzu rolls a transaction back on
        any failing statement, so the whole block either commits or leaves nothing (spec §2.5 item 7)."""
        if self._tx_depth:
            self._tx_depth += 1
            try:
                yield
            finally:
                self._tx_depth -= 1
            return
        self.conn.execute("BEGIN TRANSACTION")
        self._tx_depth = 1
        self._pending = []
        try:
            yield
            self.fault(COMMIT_STEP)
        except BaseException:  # the body or the commit's fault hook: nothing of the transaction stays
            self._tx_depth = 0
            self._pending = []
            with contextlib.suppress(Exception):
                self.conn.execute("ROLLBACK")
            raise
        self._tx_depth = 0
        self.conn.execute("COMMIT")
        after_write(self.faults.step, COMMIT_STEP, None, None)
        # Best-effort side channels run after the mutation committed (spec §2.5 item 7, §5): a failing feed
        # write inside the transaction would otherwise make Kuzu roll the mutation back.
        pending, self._pending = self._pending, []
        for fn in pending:
            fn()

    def autocommit_hook(self, query: Any) -> Callable[[str], None] | None:
        """The fault hook for a mutating statement that Kuzu auto-commits (outside ``transaction()``, not during
        schema migration), else None."""
        hook = self.faults.step if getattr(self, "faults", None) is not None else None
        if hook is None or getattr(self, "_tx_depth", 0) or getattr(self, "_migrating", True):
            return None
        if isinstance(query, str) and _TX_CONTROL.match(query):
            return None
        return hook

    def fault(self, step: str) -> None:
        if self.faults.step is not None:
            self.faults.step(step)

    def now(self) -> str:
        return iso(self.clock())

    def new_id(self) -> str:
        """``f"{epoch_ms:012x}-{rng 12 hex}"`` (spec §1.6)."""
        ms = int(self.clock().timestamp() * 1000)
        return f"{ms:012x}-{self.rng.getrandbits(48):012x}"

    def embed(self, texts: Sequence[str]) -> list[list[float] | None]:
        """Embeddings for stored texts; any failure => NULL embedding (writes never block, §2.6)."""
        if self.encoder is None or not texts:
            return [None] * len(texts)
        try:
            arr = self.encoder.encode([cut_words(t) for t in texts])
            out: list[list[float] | None] = []
            for row in arr:
                vec = [float(x) for x in row]
                out.append(vec if len(vec) == EMBED_DIM else None)
            return out
        except Exception as exc:  # fail-open
            log.info("embedding failed: %s", exc)
            return [None] * len(texts)

    # ------------------------------------------------------------------ reads
    def get_point(self, point_id: str) -> dict[str, Any] | None:
        rows = self.query("MATCH (n:Point {id:$id}) RETURN n", {"id": point_id})
        return rows[0]["n"] if rows else None

    def point_exists(self, point_id: str) -> bool:
        return bool(self.query("MATCH (n:Point {id:$id}) RETURN n.id AS id", {"id": point_id}))

    def count(self, label: str) -> int:
        if label not in _NODE_TABLES and label not in {r.split("(")[0] for r in _REL_TABLES}:
            raise ValueError(f"unknown table {label!r}")
        if label in _NODE_TABLES:
            return int(self.query(f"MATCH (n:{label}) RETURN count(n) AS c")[0]["c"])
        return int(self.query(f"MATCH ()-[r:{label}]->() RETURN count(r) AS c")[0]["c"])

    def table_counts(self) -> dict[str, int]:
        names = list(_NODE_TABLES) + [r.split("(")[0] for r in _REL_TABLES]
        return {n: self.count(n) for n in names}

    def ep_version(self) -> int:
        return int(self.query("MATCH (m:EpMeta {key:'ep'}) RETURN m.ep_version AS v")[0]["v"] or 0)

    def claim_rows(self, ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        where = "n.is_operator = false AND n.op_type IS NULL"
        params: dict[str, Any] = {}
        if ids is not None:
            where += " AND n.id IN $ids"
            params["ids"] = list(ids)
        return self.query(
            f"MATCH (n:Point) WHERE {where} RETURN n.id AS id, n.status AS status, n.pointKind AS pointKind, "
            "n.content AS content, n.outdated AS outdated, n.baseline_set AS baseline_set, n.ep_alpha AS ep_alpha, "
            "n.ep_beta AS ep_beta, n.posterior_alpha AS posterior_alpha, n.posterior_beta AS posterior_beta, "
            "n.confidence AS confidence, n.lastDreamedAt AS lastDreamedAt, n.ep_dirty AS ep_dirty, "
            "n.ep_dirty_at AS ep_dirty_at, n.updatedAt AS updatedAt, n.is_episodic AS is_episodic "
            "ORDER BY id",
            params,
        )

    def operator_rows(self) -> list[dict[str, Any]]:
        return self.query(
            f"MATCH (n:Point) WHERE {_OPERATOR} RETURN n.id AS id, n.op_type AS op_type, n.direction AS direction, "
            "n.label AS label, n.status AS status ORDER BY id"
        )

    def operator_edge_rows(self, op_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        where = _OPERATOR
        params: dict[str, Any] = {}
        if op_ids is not None:
            where += " AND n.id IN $ids"
            params["ids"] = list(op_ids)
        return self.query(
            f"MATCH (n:Point)-[r:IMPL|NAND]->(x) WHERE {where} RETURN n.id AS op_id, label(r) AS rel, "
            "x.id AS input_id, label(x) AS input_label, r.idx AS idx, r.msg_alpha AS msg_alpha, "
            "r.msg_beta AS msg_beta ORDER BY op_id, input_id",
            params,
        )

    def direct_edge_rows(self) -> list[dict[str, Any]]:
        return self.query(
            "MATCH (a:Point)-[r:IMPL|NAND]->(b:Point) WHERE a.is_operator = false AND a.op_type IS NULL "
            "AND b.is_operator = false AND b.op_type IS NULL "
            "RETURN a.id AS src, b.id AS tgt, label(r) AS rel, r.direction AS direction, r.weight AS weight, "
            "r.confidence AS confidence, r.label AS label, r.msg_alpha AS msg_alpha, r.msg_beta AS msg_beta, "
            "r.back_msg_alpha AS back_msg_alpha, r.back_msg_beta AS back_msg_beta ORDER BY src, tgt, rel"
        )

    # ------------------------------------------------------------------ writes
    def set_point_props(self, point_id: str, props: dict[str, Any]) -> None:
        bad = [k for k in props if k not in POINT_COLUMNS or k == "id"]
        if bad:
            raise ValueError(f"not settable Point columns: {bad}")
        if not props:
            return
        sets = ", ".join(f"n.`{k}` = $p{i}" for i, k in enumerate(props))
        params: dict[str, Any] = {f"p{i}": v for i, v in enumerate(props.values())}
        params["id"] = point_id
        self.execute(f"MATCH (n:Point {{id:$id}}) SET {sets}", params)

    def set_edge_messages(
        self,
        rel: str,
        src_id: str,
        tgt_id: str,
        msg: tuple[float, float] | None = None,
        back: tuple[float, float] | None = None,
        idx: int | None = None,
    ) -> None:
        """Write ``msg_*`` (message to the target) and/or ``back_msg_*`` (message to the source)."""
        if rel not in ("IMPL", "NAND"):
            raise ValueError(f"rel must be IMPL or NAND, not {rel!r}")
        sets, params = [], {"s": src_id, "t": tgt_id}
        if msg is not None:
            sets.append("r.msg_alpha = $ma, r.msg_beta = $mb")
            params.update(ma=float(msg[0]), mb=float(msg[1]))
        if back is not None:
            sets.append("r.back_msg_alpha = $ba, r.back_msg_beta = $bb")
            params.update(ba=float(back[0]), bb=float(back[1]))
        if not sets:
            return
        where = ""
        if idx is not None:
            where = " WHERE r.idx = $idx"
            params["idx"] = idx
        self.execute(f"MATCH (a:Point {{id:$s}})-[r:{rel}]->(b {{id:$t}}){where} SET {', '.join(sets)}", params)

    def mark_dirty(self, ids: Sequence[str]) -> int:
        """Spec §4.3 ``_mark_dirty``: bump ``EpMeta.ep_version`` once; dirty = ids ∪ every input of every
        operator with an edge to one of ids; flag them ``ep_dirty=true, ep_dirty_at=<epoch>``; add to roots."""
        ids = [i for i in dict.fromkeys(ids) if i]
        with self.transaction():
            epoch = int(self.query(
                "MATCH (m:EpMeta {key:'ep'}) SET m.ep_version = m.ep_version + 1 RETURN m.ep_version AS v"
            )[0]["v"])
            if not ids:
                return epoch
            co = self.by_ids(
                ids,
                f"MATCH (n:Point)-[:IMPL|NAND]->(x:Point {{id:$id}}) WHERE {_OPERATOR} "
                "MATCH (n)-[:IMPL|NAND]->(y:Point) RETURN DISTINCT y.id AS id",
                f"MATCH (n:Point)-[:IMPL|NAND]->(x:Point) WHERE {_OPERATOR} AND x.id IN $ids "
                "MATCH (n)-[:IMPL|NAND]->(y:Point) RETURN DISTINCT y.id AS id",
            )
            dirty = list(dict.fromkeys(ids + [r["id"] for r in co]))
            self.by_ids(
                dirty, "MATCH (n:Point {id:$id}) SET n.ep_dirty = true, n.ep_dirty_at = $e",
                "MATCH (n:Point) WHERE n.id IN $ids SET n.ep_dirty = true, n.ep_dirty_at = $e", {"e": epoch})
        existing = {r["id"] for r in self.by_ids(dirty, "MATCH (n:Point {id:$id}) RETURN n.id AS id",
                                                 "MATCH (n:Point) WHERE n.id IN $ids RETURN n.id AS id")}
        self.dirty_roots.update(i for i in dirty if i in existing)
        return epoch

    _mark_dirty = mark_dirty

    def invalidate_messages(self, ids: Sequence[str] | None = None) -> None:
        """Spec §4.4: set the four message columns to NULL (Kuzu has no REMOVE, §2.5 item 2)."""
        clear = "r.msg_alpha = NULL, r.msg_beta = NULL, r.back_msg_alpha = NULL, r.back_msg_beta = NULL"
        with self.transaction():
            for rel in ("IMPL", "NAND"):
                if ids is None:
                    self.execute(f"MATCH (a:Point)-[r:{rel}]->(b) SET {clear}")
                else:
                    self.execute(
                        f"MATCH (a:Point)-[r:{rel}]->(b) WHERE a.id IN $ids OR b.id IN $ids SET {clear}",
                        {"ids": list(ids)},
                    )

    # ------------------------------------------------------------------ optional vector index (§2.6)
    def sync_point_vectors(self) -> int:
        """``vector_index=True``: keep the side table ``PointVec(id, vec)`` in step with Point embeddings
        (an indexed column cannot be SET in Kuzu 0.11.3, so changed rows are deleted and re-inserted).
        Returns the number of rows written or deleted."""
        self.conn.execute(f"CREATE NODE TABLE IF NOT EXISTS PointVec(id STRING PRIMARY KEY, vec FLOAT[{EMBED_DIM}])")
        if not any(r.get("index_name") == "point_vec_idx" for r in self.query("CALL show_indexes() RETURN *")):
            self.conn.execute("CALL CREATE_VECTOR_INDEX('PointVec', 'point_vec_idx', 'vec', metric := 'cosine')")
        want = {r["id"]: r["e"] for r in self.query(
            "MATCH (n:Point) WHERE n.embedding IS NOT NULL RETURN n.id AS id, n.embedding AS e")}
        have = {r["id"]: r["v"] for r in self.query("MATCH (v:PointVec) RETURN v.id AS id, v.vec AS v")}
        changed = 0
        for pid in [i for i in have if i not in want or have[i] != want[i]]:
            self.execute("MATCH (v:PointVec {id:$id}) DELETE v", {"id": pid})
            have.pop(pid)
            changed += 1
        for pid, vec in want.items():
            if pid not in have:
                self.execute("CREATE (v:PointVec {id:$id, vec:$v})", {"id": pid, "v": vec})
                changed += 1
        return changed

    def query_point_vectors(self, vec: Sequence[float], k: int) -> list[str]:
        """Approximate, unordered index hits (ids); callers re-rank by exact cosine."""
        rows = self.query("CALL QUERY_VECTOR_INDEX('PointVec', 'point_vec_idx', $q, $k) RETURN node.id AS id",
                          {"q": [float(x) for x in vec], "k": int(k)})
        return [r["id"] for r in rows]

    # ------------------------------------------------------------------ seams
    def run_ingest_dream(self, claim_ids: list[str]) -> dict[str, Any] | None:
        """Bounded ingest dream after capture promotion (§3.9). A no-op until part 2 wires it (see module doc)."""
        hook = self.ingest_dream_hook
        if hook is None:
            try:
                mod = importlib.import_module("tortoise_sim.dream")
            except ImportError:
                mod = None
            hook = getattr(mod, "ingest_dream", None) if mod is not None else None
        if hook is None:
            return {"noop": True, "reason": "ingest_dream_not_wired"}
        return hook(self, claim_ids)


def _clean(value: Any) -> Any:
    if isinstance(value, dict) and "_label" in value:
        return {k: v for k, v in value.items() if k not in ("_id", "_label")}
    return value
