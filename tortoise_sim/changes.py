"""Which Points did the writes since a given ``store.write_seq`` touch? (incremental search / why-block caches)

`attach(store)` puts a recording proxy in front of the store's connection (and its ``bulk_load``): every
statement the store's write counter treats as mutating is logged with its parameters (or its pyarrow table) and the
counter value before it ran. `ChangeLog.touched_since(seq)` then names every Point a logged statement could have
changed, or returns None when it cannot be sure, and the caller rebuilds from scratch.

A statement is attributed only when every node pattern that could bind a Point (label ``Point`` or no label) is
keyed by id, inline (``(n:Point {id: $x})``, ``{id: row.id}``, ``{id: i}`` over ``UNWIND``/``LOAD FROM``) or by a
``n.id IN $..`` / ``n.id = $..`` predicate. The touched ids are then all string values among its parameters (list
and map members included) or the string columns of its table: a superset, which the caches re-read from Kuzu by
primary key (a name that is no Point reads as absent). Where the id expressions can be evaluated (``$p``,
``row.f`` or ``i`` over ``UNWIND $p``, a ``LOAD FROM`` column), only their values count; otherwise every string. Statements on other node tables only (sessions, events,
meta rows) touch no Point. Anything else (a label-free anonymous pattern, a sweep such as
``MATCH (n:Point) WHERE n.status = 'draft' SET ...``, a schema change, a log overflow) answers None. A ROLLBACK makes
every statement since its BEGIN count again (a cache may have read inside the transaction), so their ids are
re-read and show the state after the rollback.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = ["ChangeLog", "attach", "statement_ids", "read_rows", "point_row"]

MAX_ENTRIES = 20_000  # logged statements kept; older ones are dropped and sequences before them answer None
MAX_IDS = 5_000  # more touched names than this: a rebuild is cheaper than re-reading row by row

_NODE = re.compile(r"(?<![\w`])\(\s*(\w*)\s*(?::\s*([\w|`]+))?\s*(\{[^{}]*\})?\s*\)")
_SCHEMA = re.compile(r"\b(ALTER|DROP|COPY|CALL|INSTALL|IMPORT|ATTACH|USE|CHECKPOINT)\b", re.IGNORECASE)
_TX = re.compile(r"^\s*(BEGIN\s+TRANSACTION|BEGIN|COMMIT|ROLLBACK)\s*;?\s*$", re.IGNORECASE)
_ROLLBACK = re.compile(r"^\s*ROLLBACK\b", re.IGNORECASE)
_BEGIN = re.compile(r"^\s*BEGIN\b", re.IGNORECASE)
_INLINE_ID_EXPR = re.compile(r"[{,]\s*`?id`?\s*:\s*(\$\w+|\w+(?:\.\w+)?)")


def statement_ids(query: str, params: Any) -> set[str] | None:
    """Point ids a mutating statement may have changed (a superset), or None when it cannot be attributed."""
    if _TX.match(query):
        return set()
    if _SCHEMA.search(query):
        return None
    labels: dict[str, set[str]] = {}
    props_of: dict[str, list[str]] = {}
    for var, label, props in _NODE.findall(query):
        names = {x.strip("`") for x in label.split("|")} if label else set()
        if not var:
            if not names or "Point" in names:
                return None  # an anonymous pattern that may bind Points
            continue
        labels.setdefault(var, set()).update(names)
        props_of.setdefault(var, []).append(props or "")
    relevant = [v for v, names in labels.items() if not names or "Point" in names]
    exprs: list[str] = []
    for v in relevant:
        mine = [m.group(1) for props in props_of[v] for m in _INLINE_ID_EXPR.finditer(props)]
        mine += [m.group(1) for m in re.finditer(rf"\b{re.escape(v)}\.id\s*(?:IN|=)\s*(\$\w+)", query)]
        if not mine:
            return None
        exprs += mine
    if not relevant:
        return set()
    out: set[str] = set()
    for expr in exprs:
        got = _resolve(expr, query, params)
        if got is None:  # an id expression we cannot evaluate: every string the statement was given
            out.clear()
            _strings(params, out)
            return out
        out |= got
    return out


def _resolve(expr: str, query: str, params: Any) -> set[str] | None:
    """The values an id expression of a statement takes: ``$p``, ``row.f`` / ``i`` over ``UNWIND $p AS ..``,
    or a column of a ``LOAD FROM`` table (params = [params, table] for `bulk_load`). None = cannot tell."""
    table = None
    if isinstance(params, list) and len(params) == 2 and isinstance(params[0], dict):
        params, table = params
    params = params if isinstance(params, dict) else {}
    out: set[str] = set()
    if expr.startswith("$"):
        if expr[1:] not in params:
            return None
        _strings(params[expr[1:]], out)
        return out
    alias, _, field = expr.partition(".")
    m = re.search(rf"UNWIND\s+\$(\w+)\s+AS\s+{re.escape(alias)}\b", query, re.IGNORECASE)
    if m and m.group(1) in params:
        rows = params[m.group(1)]
        if not isinstance(rows, list | tuple):
            return None
        for r in rows:
            if field:
                if not isinstance(r, dict):
                    return None
                _strings(r.get(field), out)
            else:
                _strings(r, out)
        return out
    if table is not None and not field:
        m = re.search(rf"\b(\w+)\s+AS\s+{re.escape(alias)}\b", query)
        col = m.group(1) if m else alias
        if col in getattr(table, "column_names", []):
            out.update(x for x in table.column(col).to_pylist() if isinstance(x, str))
            return out
    return None


def _strings(value: Any, out: set[str]) -> None:
    if isinstance(value, str):
        out.add(value)
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            if not isinstance(v, int | float | bool) and v is not None:
                _strings(v, out)
    elif hasattr(value, "column_names") and hasattr(value, "column"):  # a pyarrow table (bulk_load)
        import pyarrow as pa

        for name in value.column_names:
            col = value.column(name)
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                out.update(x for x in col.to_pylist() if isinstance(x, str))


class ChangeLog:
    """Mutating statements seen since `start` (the store's ``write_seq`` when attached)."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.floor = start  # sequences below this are no longer covered
        self.entries: list[tuple[int, str, Any]] = []

    def record(self, seq: int, query: str, params: Any) -> None:
        self.entries.append((seq, query, params))
        if len(self.entries) > MAX_ENTRIES:
            drop = len(self.entries) - MAX_ENTRIES // 2
            self.floor = self.entries[drop][0]
            del self.entries[:drop]

    def touched_since(self, seq: int) -> set[str] | None:
        """Every Point id a statement logged at or after `seq` may have changed; None = unknown (rebuild)."""
        if seq < self.floor:
            return None
        out: set[str] = set()
        start = self._index(seq)
        for k in range(start, len(self.entries)):
            query, params = self.entries[k][1], self.entries[k][2]
            if _ROLLBACK.match(query):
                # the rolled-back statements may predate `seq` (a cache read inside the transaction): re-read
                # everything since the transaction began
                begin = next((j for j in range(k - 1, -1, -1) if _BEGIN.match(self.entries[j][1])), None)
                if begin is None:
                    return None
                for j in range(begin, min(start, k)):
                    ids = statement_ids(self.entries[j][1], self.entries[j][2])
                    if ids is None:
                        return None
                    out |= ids
                continue
            ids = statement_ids(query, params)
            if ids is None:
                return None
            out |= ids
            if len(out) > MAX_IDS:
                return None
        return out if len(out) <= MAX_IDS else None

    def _index(self, seq: int) -> int:
        lo, hi = 0, len(self.entries)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entries[mid][0] < seq:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _after(self, seq: int) -> Iterable[tuple[int, str, Any]]:
        return self.entries[self._index(seq):]

    def prune(self, seq: int) -> None:
        """Forget entries before `seq` (no cache needs them any more)."""
        keep = list(self._after(seq))
        if len(keep) != len(self.entries):
            self.floor = max(self.floor, seq)
            self.entries = keep


class _LoggingConnection:
    """Delegates to the store's counting connection; logs what it counts as a write."""

    def __init__(self, inner: Any, store: Any, log: ChangeLog, mutating: re.Pattern[str]) -> None:
        self._inner = inner
        self._store = store
        self._log = log
        self._mutating = mutating

    def execute(self, query: Any, parameters: dict[str, Any] | None = None) -> Any:
        if not isinstance(query, str):
            self._log.record(self._store.write_seq, "CALL unknown()", None)  # prepared statement: unknown
        elif self._mutating.search(query):
            self._log.record(self._store.write_seq, query, parameters)
        return self._inner.execute(query, parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def attach(store: Any) -> ChangeLog:
    """The store's change log, installing the recording proxy on first use."""
    log = getattr(store, "_change_log", None)
    if log is not None:
        return log
    from .connection import _MUTATING

    log = ChangeLog(store.write_seq)
    store.conn = _LoggingConnection(store.conn, store, log, _MUTATING)
    original_bulk = store.bulk_load

    def bulk_load(cypher: str, table: Any, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        log.record(store.write_seq, cypher, [params or {}, table])
        return original_bulk(cypher, table, params)

    store.bulk_load = bulk_load
    store._change_log = log
    return log


def read_rows(store: Any, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A read as a list of row dicts with the Kuzu result closed at once (results left open to the garbage
    collector were followed by Kuzu 0.11.3 segfaults on later writes in our runs)."""
    res = store.conn.execute(query, params or {})
    try:
        return res.get_as_arrow(0).to_pylist()
    finally:
        res.close()


_POINT_ROW = ("MATCH (n:Point {id: $id}) RETURN n.id AS id, n.content AS content, n.pointKind AS pointKind, "
              "n.status AS status, n.session_id AS session_id, n.outdated AS outdated, n.embedding AS embedding, "
              "n.is_operator AS is_operator, n.op_type AS op_type, n.posterior_alpha AS posterior_alpha, "
              "n.posterior_beta AS posterior_beta, n.ep_alpha AS ep_alpha, n.ep_beta AS ep_beta, "
              "n.createdAt AS createdAt")


def point_row(store: Any, pid: str) -> dict[str, Any] | None:
    """The columns the search and why-block caches keep for one Point (None = no such Point), read once per
    ``store.write_seq`` and shared by both caches."""
    memo = store.__dict__.setdefault("_point_row_memo", {})
    if memo.get("seq") != store.write_seq:
        memo.clear()
        memo["seq"] = store.write_seq
    if pid not in memo:
        rows = read_rows(store, _POINT_ROW, {"id": pid})
        memo[pid] = rows[0] if rows else None
    return memo[pid]
