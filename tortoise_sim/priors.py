"""Consolidation priors of admission (spec §3.6 gate 3, TOR-07): which stored claim a payload point matches.

``capture.execute_embed`` needs, for each payload point, the prior with the same normalised content
(``text.normalise_content``): among the plain, non-turn Points of any status (``is_operator = false``, no
``op_type``, content set, ``pointKind`` NULL or not ``'event'``), the first id in ``ORDER BY id`` order. Two ways to
answer it (``PRIOR_MODES``), with identical answers:

- ``"index"`` (default): a per-store map normalised content -> ids, built by one Arrow scan on first use and then
  kept in step with the store's writes through :mod:`tortoise_sim.changes` (the Points a write touched are re-read
  by primary key and moved in the map); a write the change log cannot attribute rebuilds the map. A capture then
  costs in proportion to what it writes, not to the store.
- ``"scan"``: read every prior out of Kuzu on every call (the previous path, kept as the reference the equivalence
  tests compare against).

The mode is the per-store attribute ``store.admission_priors`` (unset = ``"index"``) or the ``mode`` argument.
Python compares ``str`` by code point, which is the byte order of their UTF-8 encoding, so ``min`` over ids is
Kuzu's ``ORDER BY id`` first row.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import changes
from .store import TortoiseStore
from .text import normalise_content

__all__ = ["PRIOR_MODES", "prior_mode", "prior_ids", "PriorIndex", "prior_index_for"]

PRIOR_MODES = ("index", "scan")
_WHERE = ("n.is_operator = false AND n.op_type IS NULL AND n.content IS NOT NULL "
          "AND (n.pointKind IS NULL OR n.pointKind <> 'event')")
_PRIORS = f"MATCH (n:Point) WHERE {_WHERE} RETURN n.id AS id, n.content AS c"


def prior_mode(store: TortoiseStore, mode: str | None = None) -> str:
    """``mode``, else ``store.admission_priors``, else ``"index"``; validated against ``PRIOR_MODES``."""
    value = mode or getattr(store, "admission_priors", None) or "index"
    if value not in PRIOR_MODES:
        raise ValueError(f"admission priors mode must be one of {', '.join(PRIOR_MODES)}, not {value!r}")
    return value


def prior_ids(store: TortoiseStore, keys: Iterable[str], mode: str | None = None) -> dict[str, str]:
    """``{normalised key: prior id}`` for each of ``keys`` that has a prior (TOR-07 gate 3)."""
    wanted = set(keys)
    if prior_mode(store, mode) == "scan":
        priors: dict[str, str] = {}
        for r in store.query(_PRIORS + " ORDER BY id"):
            priors.setdefault(normalise_content(r["c"]), r["id"])
        return {k: v for k, v in priors.items() if k in wanted}
    if not wanted:
        return {}
    return prior_index_for(store).lookup(wanted)


def _member(row: dict[str, Any] | None) -> bool:
    """The ``_PRIORS`` filter applied to one ``changes.point_row`` (Kuzu's ``= false`` is False for NULL)."""
    return (row is not None and row["is_operator"] is False and row["op_type"] is None
            and row["content"] is not None and row["pointKind"] != "event")


class PriorIndex:
    """Normalised content -> ids of the priors, at ``seq`` (the store's ``write_seq`` when last brought up to date).

    ``ids_of[key]`` is a str for one id or a set for several; ``key_of[id]`` is the key an id is filed under."""

    def __init__(self, store: TortoiseStore) -> None:
        self.log = changes.attach(store)
        self.seq = store.write_seq
        self.ids_of: dict[str, str | set[str]] = {}
        self.key_of: dict[str, str] = {}
        tbl = store.scan_arrow(_WHERE, "n.id AS id, n.content AS c")
        for pid, content in zip(tbl.column("id").to_pylist(), tbl.column("c").to_pylist(), strict=True):
            self._add(pid, normalise_content(content))
        del tbl
        self.updates = 0  # incremental refreshes applied

    def _add(self, pid: str, key: str) -> None:
        self.key_of[pid] = key
        have = self.ids_of.get(key)
        if have is None:
            self.ids_of[key] = pid
        elif isinstance(have, str):
            self.ids_of[key] = {have, pid}
        else:
            have.add(pid)

    def _remove(self, pid: str) -> None:
        key = self.key_of.pop(pid, None)
        if key is None:
            return
        have = self.ids_of[key]
        if isinstance(have, str):
            del self.ids_of[key]
            return
        have.discard(pid)
        if len(have) == 1:
            self.ids_of[key] = next(iter(have))

    def refresh(self, store: TortoiseStore) -> bool:
        """Apply the writes since ``seq`` (touched Points re-read by id); False = cannot tell, rebuild."""
        touched = self.log.touched_since(self.seq)
        if touched is None:
            return False
        seq = store.write_seq
        for pid in sorted(touched):
            row = changes.point_row(store, pid)
            self._remove(pid)
            if _member(row):
                assert row is not None
                self._add(pid, normalise_content(row["content"]))
        self.seq = seq
        self.updates += 1
        return True

    def lookup(self, keys: Iterable[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for k in keys:
            have = self.ids_of.get(k)
            if have is not None:
                out[k] = have if isinstance(have, str) else min(have)
        return out


def prior_index_for(store: TortoiseStore) -> PriorIndex:
    """The store's prior index brought up to ``store.write_seq`` (built on first use, rebuilt when needed)."""
    index = getattr(store, "_prior_index", None)
    if index is not None and index.seq == store.write_seq:
        return index
    if index is None or not index.refresh(store):
        index = None
        store._prior_index = None  # type: ignore[attr-defined]  (the old map is freed before the new scan)
        index = PriorIndex(store)
        store._prior_index = index  # type: ignore[attr-defined]
    return index
