"""The Tortoise store's event sinks (spec §5): the GraphEvent feed table, the optional JSONL journal, and the
hardened transactional event mode (REL-07) with journal recovery on open.

``EventFeed`` is a mixin of ``TortoiseStore``; its methods use the store's ``query`` / ``execute`` /
``transaction``, ``cfg``, ``faults``, ``rng`` and clock. Every durable write has its fault-hook step
(``event.feed``, ``event.journal``)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import uuid
from collections.abc import Sequence
from typing import Any

from .durable import append_text
from .errors import FaultInjected

__all__ = ["EventFeed"]

log = logging.getLogger("tortoise_sim")


class EventFeed:
    """GraphEvent feed + JSONL journal methods of ``TortoiseStore`` (see the module doc)."""

    cfg: Any
    faults: Any
    rng: Any
    event_failures: list[tuple[str, str, str]]
    _tx_depth: int
    _pending: list[Any]

    def feed(self, types: Sequence[str] | None = None) -> list[dict[str, Any]]:
        rows = self.query(
            "MATCH (e:GraphEvent) RETURN e.event_id AS event_id, e.seq AS seq, e.ts AS ts, e.type AS type, "
            "e.payload AS payload ORDER BY seq"
        )
        for r in rows:
            r["payload"] = json.loads(r["payload"]) if r["payload"] else {}
        if types is not None:
            rows = [r for r in rows if r["type"] in set(types)]
        return rows

    def emit_event(self, type_: str, payload: dict[str, Any], snapshot: dict[str, Any] | None = None) -> None:
        """Spec §5.1: two independent best-effort sinks; a failure is recorded and the mutation stands.

        Called inside ``transaction()``, both sinks are deferred until the transaction committed (and dropped
        if it rolled back), so a sink failure can never undo the mutation."""
        ts = self.now()
        if self.cfg.event_durability == "transactional":
            self._emit_transactional(type_, payload, snapshot, ts)
            return
        if self._tx_depth:
            self._pending.append(lambda: self._emit_now(type_, payload, snapshot, ts))
            return
        self._emit_now(type_, payload, snapshot, ts)

    def emit_events(self, type_: str, payloads: Sequence[dict[str, Any]]) -> None:
        """`emit_event` for many events of one type: the same rows (ids from the same rng draws, one ``now()``
        per event, consecutive ``seq``) written by one feed transaction with an UNWIND instead of one transaction
        per event. Falls back to one `emit_event` per payload where per-event behaviour is observable: the
        transactional event mode, a fault-hook step or an injected feed failure. A failing bulk write is
        recorded once per event (best-effort sink, the mutation stands)."""
        payloads = list(payloads)
        if (len(payloads) < 2 or self.cfg.event_durability == "transactional" or self.faults.step is not None
                or type_ in self.faults.fail_graph_feed):
            for payload in payloads:
                self.emit_event(type_, payload)
            return
        stamps = [self.now() for _ in payloads]
        if self._tx_depth:
            self._pending.append(lambda: self._emit_bulk_now(type_, payloads, stamps))
            return
        self._emit_bulk_now(type_, payloads, stamps)

    def _emit_bulk_now(self, type_: str, payloads: list[dict[str, Any]], stamps: list[str]) -> None:
        try:
            eids = [uuid.UUID(int=self.rng.getrandbits(128), version=4).hex for _ in payloads]
            taken = {r["e"] for r in self.query("MATCH (x:GraphEvent) WHERE x.event_id IN $ids RETURN "
                                                "x.event_id AS e", {"ids": eids})}
            while taken or len(set(eids)) < len(eids):
                seen: set[str] = set()
                for i, e in enumerate(eids):
                    if e in taken or e in seen:
                        eids[i] = uuid.uuid4().hex  # another process with the same seed wrote this id already
                    seen.add(eids[i])
                taken = {r["e"] for r in self.query("MATCH (x:GraphEvent) WHERE x.event_id IN $ids RETURN "
                                                    "x.event_id AS e", {"ids": eids})}
            with self.transaction():
                first = int(self.query(
                    "MATCH (m:GraphEventMeta {key:'feed'}) SET m.last_seq = m.last_seq + 1, "
                    "m.first_seq = CASE WHEN m.first_seq = 0 THEN m.last_seq + 1 ELSE m.first_seq END "
                    "RETURN m.last_seq AS seq"
                )[0]["seq"])
                self.execute("MATCH (m:GraphEventMeta {key:'feed'}) SET m.last_seq = m.last_seq + $k",
                             {"k": len(payloads) - 1})
                rows = [{"eid": e, "seq": first + i, "ts": ts, "payload": json.dumps(p, sort_keys=False)}
                        for i, (e, ts, p) in enumerate(zip(eids, stamps, payloads, strict=True))]
                self.execute("UNWIND $rows AS r CREATE (e:GraphEvent {event_id: r.eid, seq: r.seq, ts: r.ts, "
                             "type: $type, payload: r.payload})", {"rows": rows, "type": type_})
        except Exception as exc:
            for _ in payloads:
                self.event_failures.append(("feed", type_, repr(exc)))
            log.warning("graph feed write failed for %d %s events: %s", len(payloads), type_, exc)
        for payload, ts in zip(payloads, stamps, strict=True):
            self.journal(type_, payload, ts=ts)

    # ------------------------------------------------------------------ hardened event mode (REL-07)
    def operation(self) -> contextlib.AbstractContextManager[None]:
        """One Kuzu transaction around a whole SDK operation when ``event_durability="transactional"`` (so the
        mutation and its feed rows commit together); a no-op context in the faithful mode."""
        if self.cfg.event_durability == "transactional":
            return self.transaction()
        return contextlib.nullcontext()

    def _feed_row(self, type_: str, payload: dict[str, Any], ts: str) -> int:
        """Append one GraphEvent feed row (its own transaction, or the caller's); returns its ``seq``."""
        self.fault("event.feed")
        eid = uuid.UUID(int=self.rng.getrandbits(128), version=4).hex
        while self.query("MATCH (e:GraphEvent {event_id:$e}) RETURN e.seq AS s", {"e": eid}):
            eid = uuid.uuid4().hex  # another process with the same seed wrote this id already
        with self.transaction():
            rows = self.query(
                "MATCH (m:GraphEventMeta {key:'feed'}) SET m.last_seq = m.last_seq + 1, "
                "m.first_seq = CASE WHEN m.first_seq = 0 THEN m.last_seq + 1 ELSE m.first_seq END "
                "RETURN m.last_seq AS seq"
            )
            self.execute(
                "CREATE (e:GraphEvent {event_id:$eid, seq:$seq, ts:$ts, type:$type, payload:$payload})",
                {"eid": eid, "seq": rows[0]["seq"], "ts": ts, "type": type_,
                 "payload": json.dumps(payload, sort_keys=False)},
            )
        return int(rows[0]["seq"])

    def _emit_transactional(self, type_: str, payload: dict[str, Any], snapshot: dict[str, Any] | None,
                            ts: str) -> None:
        """Hardened sinks: the feed row is written inside the caller's transaction (it commits or rolls back with
        the mutation; a failure fails the operation); the journal line carries the feed ``seq`` and is appended
        after COMMIT; ``recover_journal`` re-derives lines a crash lost from the feed."""
        seq = self._feed_row(type_, payload, ts)
        line = self._journal_line(type_, payload, snapshot, ts)
        if line is None:
            return
        line["seq"] = seq
        if self._tx_depth:
            self._pending.append(lambda: self._append_journal(line))
        else:
            self._append_journal(line)

    def _journal_line(self, type_: str, payload: dict[str, Any], snapshot: dict[str, Any] | None,
                      ts: str) -> dict[str, Any] | None:
        if self.cfg.event_log() is None:
            return None
        line: dict[str, Any] = {"type": type_, "ts": ts, "id": payload.get("id"), "payload": payload}
        if snapshot is not None:
            line["snapshot"] = {k: v for k, v in snapshot.items() if k != "embedding"}
        return line

    def _append_journal(self, line: dict[str, Any]) -> None:
        path = self.cfg.event_log()
        assert path is not None
        path.parent.mkdir(parents=True, exist_ok=True)
        append_text(path, json.dumps(line, default=str) + "\n", step="event.journal", hook=self.faults.step,
                    fsync=self.cfg.event_durability == "transactional")

    def capture_filed(self, capture_key: str) -> bool:
        """True when a ``CaptureFiled`` feed event carries ``capture_key`` (see ``Tortoise.capture_session``)."""
        rows = self.query("MATCH (e:GraphEvent {type:'CaptureFiled'}) WHERE e.payload CONTAINS $k "
                          "RETURN count(e) AS n", {"k": json.dumps(capture_key)})
        return bool(rows and rows[0]["n"])

    def recover_journal(self) -> int:
        """Transactional mode, run on open: cut a torn trailing journal line, then append a line for every feed
        event whose ``seq`` is above the last journaled one (``PointAdded`` snapshots are read from the graph
        as it is now). Returns the number of lines re-derived."""
        path = self.cfg.event_log()
        if path is None or self.cfg.event_durability != "transactional":
            return 0
        last = 0
        if path.exists():
            data = path.read_bytes()
            good = 0
            for raw in data.split(b"\n")[:-1]:
                try:
                    rec = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    break
                good += len(raw) + 1
                if isinstance(rec, dict) and isinstance(rec.get("seq"), int):
                    last = max(last, rec["seq"])
            if good < len(data):
                with path.open("r+b") as fh:
                    fh.truncate(good)
        missing = [e for e in self.feed() if int(e["seq"]) > last]
        for e in missing:
            payload = e["payload"] if isinstance(e["payload"], dict) else {}
            snap = None
            if e["type"] == "PointAdded" and payload.get("id"):
                snap = self.get_point(str(payload["id"]))
            line = self._journal_line(e["type"], payload, snap, e["ts"])
            assert line is not None
            line["seq"] = int(e["seq"])
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(line, default=str) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        return len(missing)

    def _emit_now(self, type_: str, payload: dict[str, Any], snapshot: dict[str, Any] | None, ts: str) -> None:
        try:
            if type_ in self.faults.fail_graph_feed:
                raise FaultInjected(f"graph feed {type_}")
            self._feed_row(type_, payload, ts)
        except Exception as exc:
            self.event_failures.append(("feed", type_, repr(exc)))
            log.warning("graph feed write failed for %s: %s", type_, exc)
        self.journal(type_, payload, snapshot=snapshot, ts=ts)

    def journal(self, type_: str, payload: dict[str, Any], *, snapshot: dict[str, Any] | None = None,
                ts: str | None = None) -> None:
        """Optional JSONL journal (only when ``event_log_path`` is set); best-effort."""
        path = self.cfg.event_log()
        if path is None:
            return
        if self.cfg.event_durability == "transactional":  # journal-only events go through the feed too
            self._emit_transactional(type_, payload, snapshot, ts or self.now())
            return
        if self._tx_depth:
            stamp = ts or self.now()
            self._pending.append(lambda: self.journal(type_, payload, snapshot=snapshot, ts=stamp))
            return
        try:
            if type_ in self.faults.fail_journal:
                raise FaultInjected(f"journal {type_}")
            line: dict[str, Any] = {"type": type_, "ts": ts or self.now(), "id": payload.get("id"),
                                    "payload": payload}
            if snapshot is not None:
                line["snapshot"] = {k: v for k, v in snapshot.items() if k != "embedding"}
            path.parent.mkdir(parents=True, exist_ok=True)
            append_text(path, json.dumps(line, default=str) + "\n", step="event.journal", hook=self.faults.step)
        except Exception as exc:
            self.event_failures.append(("journal", type_, repr(exc)))
            log.warning("journal write failed for %s: %s", type_, exc)

    def journal_lines(self) -> list[dict[str, Any]]:
        path = self.cfg.event_log()
        if path is None or not path.exists():
            return []
        return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
