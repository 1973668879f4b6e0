"""The Tortoise store's Kuzu connection: the write-counting wrapper (``write_seq``, fault-hook steps
``kuzu.commit`` / ``kuzu.autocommit``), the full-buffer-pool error, the prepared-statement cache and the hardened
open with retry (REL-12).

**Prepared statements.** Kuzu's ``Connection.execute(text, parameters)`` parses, binds and plans ``text`` on every
call (it prepares a statement and executes it; only a data frame among the parameters takes part in the
preparation, every other value is bound at execution). The store runs the same few hundred parameterised texts
thousands of times (a LongMemEval question's capture runs about 30 statements per turn), so the wrapper keeps the
prepared statement of each text it ran with parameters (at most :data:`PREPARED_MAX`, least recently used out) and
executes that: the same statement, with the same values, in the same order, so every row, count and error is the
same (tested: ``tests/tortoise_sim/test_prepared_statements.py`` compares every table and every delivered text of
a capture with and without the cache). A statement that fails to prepare is not kept (its error comes from
executing it, as before); any schema statement (``CREATE ... TABLE``, ``ALTER``, ``DROP``, a ``CALL`` such as an index
built, an extension) empties the cache. ``TortoiseStore.prepared_statements = False`` is the previous path (a fresh preparation
per call). A statement without parameters goes through Kuzu's plain ``query`` either way."""

from __future__ import annotations

import contextlib
import re
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kuzu

from .durable import after_write
from .errors import TortoiseError

__all__ = ["StoreFull", "COMMIT_STEP", "AUTOCOMMIT_STEP", "is_lock_error", "open_with_retry"]

COMMIT_STEP = "kuzu.commit"
AUTOCOMMIT_STEP = "kuzu.autocommit"  # a mutating statement outside transaction(): Kuzu commits it on its own
_TX_CONTROL = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK)\b", re.IGNORECASE)
_ROLLBACK = re.compile(r"^\s*ROLLBACK\b", re.IGNORECASE)
_SCHEMA = re.compile(r"\b(CREATE\s+(NODE|REL)\s+TABLE|ALTER|DROP|CALL|INSTALL|LOAD\s+EXTENSION|ATTACH|"
                     r"DETACH\s+DATABASE|USE)\b", re.IGNORECASE)
PREPARED_MAX = 512
"""Prepared statements kept per connection (distinct parameterised statement texts, least recently used out)."""


class StoreFull(TortoiseError, RuntimeError):
    """Kuzu's buffer pool is full. An in-memory store keeps every page in that pool (nothing can be evicted to a
    file), so it is full for good: after the first such error every later statement on it raises this error
    before reaching Kuzu (a Kuzu database used after running out of pool memory has been seen to crash the
    process). The message is one line naming the store and the way out."""


# Statement keywords that can change what a later read returns. Values never enter query text (parameters only),
# so a statement without any of these words is a pure read; a false positive only costs a cache rebuild.
_MUTATING = re.compile(
    r"\b(CREATE|MERGE|SET|DELETE|DETACH|REMOVE|COPY|LOAD|ALTER|DROP|CALL|INSTALL|IMPORT|ATTACH|USE|"
    r"BEGIN|COMMIT|ROLLBACK|CHECKPOINT)\b",
    re.IGNORECASE,
)


class _CountingConnection:
    """``kuzu.Connection`` wrapper that bumps the owning store's ``write_seq`` before any statement that may
    mutate (see ``_MUTATING``), so direct ``store.conn.execute(...)`` writes are counted too. It also turns Kuzu's
    "buffer pool is full" into :class:`StoreFull` (see there)."""

    def __init__(self, conn: kuzu.Connection, store: Any) -> None:
        self._conn = conn
        self._store = store
        self._prepared: OrderedDict[str, Any] = OrderedDict()
        self.prepared_hits = 0  # executions that reused a kept prepared statement (observed by the tests)

    def execute(self, query: Any, parameters: dict[str, Any] | None = None) -> Any:
        store = self._store
        if getattr(store, "full", None) is not None and not (isinstance(query, str) and _ROLLBACK.match(query)):
            raise StoreFull(store.full)
        try:
            return self._execute(query, parameters)
        except RuntimeError as exc:
            if "buffer pool is full" not in str(exc):
                raise
            msg = store.full_message()
            if store.path is None:
                store.full = msg
            raise StoreFull(msg) from None

    def _statement(self, query: Any, parameters: dict[str, Any]) -> Any:
        """What to hand ``kuzu.Connection.execute``: the cached prepared statement of a parameterised text (see
        the module docstring), else ``query`` itself."""
        if not parameters or not isinstance(query, str) or not getattr(self._store, "prepared_statements", False):
            return query
        if _SCHEMA.search(query):
            self._prepared.clear()
            return query
        got = self._prepared.get(query)
        if got is not None:
            self._prepared.move_to_end(query)
            self.prepared_hits += 1
            return got
        got = self._conn._prepare(query)
        if not got.is_success():
            return query  # executed from its text, so the error is Kuzu's own, as before
        self._prepared[query] = got
        if len(self._prepared) > PREPARED_MAX:
            self._prepared.popitem(last=False)
        return got

    def _execute(self, query: Any, parameters: dict[str, Any] | None = None) -> Any:
        parameters = parameters or {}
        if isinstance(query, str) and not _MUTATING.search(query):
            return self._conn.execute(self._statement(query, parameters), parameters)
        self._store.write_seq += 1
        hook = self._store.autocommit_hook(query)
        if hook is not None:
            hook(AUTOCOMMIT_STEP)
        try:
            res = self._conn.execute(self._statement(query, parameters), parameters)
        finally:
            self._store.write_seq += 1  # before and after: a cache built mid-statement is never reused
            if isinstance(query, str) and _SCHEMA.search(query):
                self._prepared.clear()
        if hook is not None:
            try:
                after_write(hook, AUTOCOMMIT_STEP, None, None)
            except BaseException:
                # a crash right after the statement: close its result now, before the caller closes the
                # database (a QueryResult finalised after its database is gone crashes Kuzu)
                for r in res if isinstance(res, list) else [res]:
                    with contextlib.suppress(Exception):
                        r.close()
                raise
        return res

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def is_lock_error(exc: BaseException) -> bool:
    """Kuzu's "Could not set lock on file" (another process has the store open), or a read-only open racing a
    writer's close: "Couldn't replay shadow pages under read-only mode" (the writer's checkpoint is not done)."""
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("lock on file" in text or "shadow pages under read-only" in text)


def open_with_retry(open_fn: Callable[[], Any], path: str | Path, *, timeout: float = 5.0,
                    first_delay: float = 0.01) -> Any:
    """Hardened open (REL-12): Kuzu admits one read-write process per store file and no reader beside it, so a
    hook reading while a capture writes gets Kuzu's lock error (and a read-only open that races the writer's
    close gets a shadow-page replay error). This retries ``open_fn()`` with exponential backoff (``first_delay``,
    doubling, capped at 0.25 s) for up to ``timeout`` seconds while the error is one of those
    (:func:`is_lock_error`), then raises :class:`StoreLocked` naming the file. Other errors propagate."""
    import time

    from .errors import StoreLocked

    deadline = time.monotonic() + timeout
    delay = first_delay
    while True:
        try:
            return open_fn()
        except RuntimeError as exc:
            if not is_lock_error(exc):
                raise
            if time.monotonic() + delay > deadline:
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise StoreLocked(f"{path}: store busy in another process for {timeout:g} s (Kuzu allows one "
                                  f"writer and no readers beside it): {first}") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.25)
