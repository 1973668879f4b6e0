"""Capture spool (spec §10 with the §10.1 corrections): local backlog before server admission.

Files under ``root``: ``entries/<entry_key>.meta.json`` (indent=2), ``entries/<entry_key>.turns.jsonl`` (one
default-separator ``{"role", "content"}`` object per line) and the ledger ``discarded.jsonl``. Every write is
mode 0600, fsync'd, and atomic (temp file + rename), except appends to the turn log and the ledger.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .durable import after_write

__all__ = [
    "Spool", "entry_key", "content_digest", "capture_key", "backoff_delay", "local_capture_post",
    "MAX_ENTRIES", "MAX_TOTAL_BYTES", "MAX_ENTRY_BYTES", "SpoolTurnsError",
]

MAX_ENTRIES = 1000
MAX_TOTAL_BYTES = 256 * 1024 * 1024
MAX_ENTRY_BYTES = 16 * 1024 * 1024
# §10.1 item 4: anchored at the very end (\Z), so an id with a trailing newline is not a probe.
_PROBE = re.compile(r"verify-[a-z][a-z0-9-]*-\d{8}T\d{6}Z-[0-9a-f]{6}\Z")


class SpoolTurnsError(ValueError):
    """An entry's turn log cannot be read back (not UTF-8, a line that is not JSON): the message names the file and
    line. The flush stops with it, as a failed read does upstream; the meta and the turn log stay in place."""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def entry_key(session_id: str) -> str:
    return _sha(session_id)[:32]


def content_digest(turns: list[dict[str, Any]]) -> str:
    """sha256 of the compact JSON of the turns exactly as given (extra keys included, §10.1 item 6)."""
    return _sha(json.dumps(turns, separators=(",", ":"), ensure_ascii=False))


def capture_key(session_id: str, turns: list[dict[str, Any]]) -> str:
    return _sha(session_id + "\0" + content_digest(turns))


def backoff_delay(n: int) -> int:
    """Seconds: ``min(30 * 2^max(0, n-1), 21600)``."""
    return int(min(30 * 2 ** max(0, n - 1), 21600))


def _atomic_write(path: Path, data: bytes, hook: Any = None, step: str = "spool.write") -> None:
    """Temp file, fsync, ``os.replace``; reports ``<step>.tmp`` and ``<step>.replace`` to ``hook.after_write``
    (``tortoise_sim.durable``; the caller already called ``hook(step)``)."""
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    after_write(hook, step + ".tmp", tmp, 0)
    os.replace(tmp, path)
    after_write(hook, step + ".replace", None, None)


def _append(path: Path, data: bytes, hook: Any = None, step: str = "spool.write") -> None:
    try:
        offset = path.stat().st_size
    except OSError:
        offset = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    after_write(hook, step, path, offset)


def _turn_lines(turns: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps({"role": t.get("role"), "content": t.get("content")}, ensure_ascii=False) + "\n"
                   for t in turns).encode("utf-8", "surrogatepass")


class Spool:
    """``Spool(root, clock=None, permanent="quarantine", fault_hook=None)``; ``permanent`` is
    ``SimConfig.spool_permanent`` ([A] quarantine keeps the turns, [LATER] delete removes the entry)."""

    def __init__(self, root: str | Path, *, clock: Callable[[], datetime] | None = None,
                 permanent: str = "quarantine", fault_hook: Callable[[str], None] | None = None,
                 corrupt: str = "delete", atomic_turns: bool = False, send_capture_key: bool = False,
                 idempotent_ledger: bool = False) -> None:
        if permanent not in ("quarantine", "delete"):
            raise ValueError("permanent must be 'quarantine' or 'delete'")
        if corrupt not in ("delete", "quarantine"):
            raise ValueError("corrupt must be 'delete' or 'quarantine'")
        self.corrupt = corrupt
        self.root = Path(root)
        self.entries = self.root / "entries"
        self.ledger = self.root / "discarded.jsonl"
        self.clock = clock or (lambda: datetime.now(UTC))
        self.permanent = permanent
        self.fault_hook = fault_hook
        # hardened, named (REL-06/07 crash sequences): ``atomic_turns`` rewrites the turn log by temp file + rename
        # instead of appending to it (a torn append blocks the whole entry); ``send_capture_key`` adds the entry's
        # ``capture_key`` to the post body so an idempotent receiver (``Tortoise.capture_session(capture_key=)``)
        # can drop a re-post after a crash between the post and the filed mark.
        self.atomic_turns = atomic_turns
        self.send_capture_key = send_capture_key
        # hardened, named: a ledger row identical in (session_id, capture_key, reason) to one already there is not
        # appended again (a crash between the ledger append and the quarantine mark re-posts the entry)
        self.idempotent_ledger = idempotent_ledger

    # -------------------------------------------------------------------------------- files
    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.entries / f"{key}.meta.json", self.entries / f"{key}.turns.jsonl"

    def _now(self) -> str:
        return self.clock().astimezone(UTC).isoformat(timespec="microseconds")

    def _fault(self, step: str) -> None:
        if self.fault_hook is not None:
            self.fault_hook(step)

    def read_meta(self, session_id: str) -> dict[str, Any] | None:
        meta, _ = self._paths(entry_key(session_id))
        return json.loads(meta.read_text(encoding="utf-8")) if meta.exists() else None

    def read_turns(self, session_id: str) -> list[dict[str, Any]]:
        _, turns = self._paths(entry_key(session_id))
        if not turns.exists():
            return []
        try:
            text = turns.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise SpoolTurnsError(f"{turns}: not valid UTF-8 (byte {exc.start})") from None
        out = []
        for ln, x in enumerate(text.splitlines(), 1):
            if x.strip():
                try:
                    out.append(json.loads(x))
                except (ValueError, RecursionError) as exc:
                    raise SpoolTurnsError(f"{turns}:{ln}: unreadable turn line ({exc})") from None
        return out

    def ledger_rows(self) -> list[dict[str, Any]]:
        if not self.ledger.exists():
            return []
        return [json.loads(x) for x in self.ledger.read_text(encoding="utf-8").splitlines() if x.strip()]

    def _write_meta(self, key: str, meta: dict[str, Any]) -> None:
        self._fault("spool.write")
        _atomic_write(self._paths(key)[0], json.dumps(meta, indent=2, ensure_ascii=False).encode("utf-8"),
                      self.fault_hook)

    def _discard(self, session_id: str, ckey: str | None, reason: str, detail: str = "") -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.idempotent_ledger:
            self._cut_torn_ledger_tail()
            if ckey is not None and any(
                    (r.get("session_id"), r.get("capture_key"), r.get("reason")) == (session_id, ckey, reason)
                    for r in self._ledger_rows_lenient()):
                return
        self._fault("spool.ledger")
        _append(self.ledger, (json.dumps({"at": self._now(), "session_id": session_id, "capture_key": ckey,
                                          "reason": reason, "detail": detail}) + "\n").encode("utf-8"),
                self.fault_hook, "spool.ledger")

    def _cut_torn_ledger_tail(self) -> None:
        """A ledger that does not end in a newline holds a torn row: cut it back to the last complete row (else
        the next append would fuse with it into one unreadable line)."""
        if not self.ledger.exists():
            return
        data = self.ledger.read_bytes()
        if data and not data.endswith(b"\n"):
            os.truncate(self.ledger, data.rfind(b"\n") + 1)

    def _ledger_rows_lenient(self) -> list[dict[str, Any]]:
        """Ledger rows that parse (a torn last row is skipped): the idempotent ledger's lookup."""
        if not self.ledger.exists():
            return []
        rows = []
        for raw in self.ledger.read_bytes().splitlines():
            with contextlib.suppress(ValueError):
                row = json.loads(raw)
                if isinstance(row, dict):
                    rows.append(row)
        return rows

    def _delete(self, key: str) -> None:
        for p in self._paths(key):
            self._fault("spool.delete")
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
            after_write(self.fault_hook, "spool.delete", None, None)

    @staticmethod
    def _parse_meta(path: Path) -> dict[str, Any] | None:
        """The meta as a dict, or None when it is corrupt: unreadable, not JSON, not an object, or without a
        non-empty string ``session_id`` (§10.1 items 9 and 14)."""
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except Exception:
            return None
        if not isinstance(meta, dict) or not isinstance(meta.get("session_id"), str) or not meta["session_id"]:
            return None
        return meta

    def _corrupt(self, key: str) -> None:
        """§10.1 items 9 and 14: ledger ``corrupt_entry`` naming ``unreadable:<entry_key>``, both files deleted
        (the intact turn log too). Hardened option ``corrupt="quarantine"`` (``SimConfig.spool_corrupt``): both
        files move to ``quarantine/<entry_key>.<stamp>.*`` instead, ledger reason ``corrupt_entry_quarantined``,
        so the turns stay recoverable and the entry never blocks or re-enters a flush."""
        if self.corrupt == "quarantine":
            self._quarantine_corrupt(key)
            return
        self._discard(f"unreadable:{key}", None, "corrupt_entry")
        self._delete(key)

    def _quarantine_corrupt(self, key: str) -> None:
        qdir = self.root / "quarantine"
        qdir.mkdir(parents=True, exist_ok=True)
        stamp = self._now().replace(":", "").replace("-", "").replace("+", "p")
        moved = []
        for p in self._paths(key):
            if p.exists():
                self._fault("spool.quarantine")
                dest = qdir / f"{key}.{stamp}.{p.name.removeprefix(key + '.')}"
                os.replace(p, dest)
                after_write(self.fault_hook, "spool.quarantine", None, None)
                moved.append(dest.name)
        self._discard(f"unreadable:{key}", None, "corrupt_entry_quarantined", ",".join(moved))

    def _all_meta(self) -> list[tuple[str, dict[str, Any] | None]]:
        if not self.entries.exists():
            return []
        out = []
        for meta in sorted(self.entries.glob("*.meta.json")):
            out.append((meta.name.removesuffix(".meta.json"), self._parse_meta(meta)))
        return out

    def _entry_bytes(self, key: str) -> int:
        return sum(p.stat().st_size for p in self._paths(key) if p.exists())

    # -------------------------------------------------------------------------------- write
    def spool_write(self, session_id: str, turns: list[dict[str, Any]], harness: str, source: str,
                    machine_id: str, model: str | None = None) -> dict[str, Any]:
        """Identical digest => no-op; stored log a prefix of the new turns => append; else rewrite.
        ``filed_key`` survives only an unchanged digest; a content change resets attempts/retry/lane."""
        session_id.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError (§10.1 item 10)
        if not turns:
            return {"action": "none"}
        self.entries.mkdir(parents=True, exist_ok=True)
        key = entry_key(session_id)
        meta_path, turns_path = self._paths(key)
        digest = content_digest(turns)
        ckey = capture_key(session_id, turns)
        now = self._now()
        meta = None
        if meta_path.exists():
            meta = self._parse_meta(meta_path)
            if meta is None:
                self._corrupt(key)
        if meta is not None and meta.get("content_digest") == digest:
            return {"action": "noop", "capture_key": ckey}
        new_bytes = _turn_lines(turns)
        action = "rewrite"
        if meta is not None and turns_path.exists() and not self.atomic_turns:
            old = turns_path.read_bytes()
            if old and old.endswith(b"\n") and new_bytes.startswith(old):
                self._fault("spool.write")
                _append(turns_path, new_bytes[len(old):], self.fault_hook)
                action = "append"
        if action == "rewrite":
            self._fault("spool.write")
            _atomic_write(turns_path, new_bytes, self.fault_hook)
        new_meta = {
            "version": 1, "session_id": session_id, "harness": harness, "source": source,
            "machine_id": machine_id, "created_at": (meta or {}).get("created_at", now), "updated_at": now,
            "turns_count": len(turns), "content_digest": digest, "capture_key": ckey, "attempts": 0,
            "next_attempt_at_ms": 0, "lane": "pending",
        }
        if model is not None:
            new_meta["model"] = model
        self._write_meta(key, new_meta)
        if self._entry_bytes(key) > MAX_ENTRY_BYTES:
            self._discard(session_id, ckey, "entry_too_large")
            self._delete(key)
            return {"action": "discarded", "reason": "entry_too_large"}
        self._prune()
        return {"action": action, "capture_key": ckey}

    def _prune(self) -> None:
        rows = [(k, m) for k, m in self._all_meta() if m is not None]
        rows.sort(key=lambda km: (km[1].get("updated_at", ""), km[1].get("created_at", ""),
                                  km[1].get("session_id", "")))
        total = sum(self._entry_bytes(k) for k, _ in rows)
        while rows and (len(rows) > MAX_ENTRIES or total > MAX_TOTAL_BYTES):
            k, m = rows.pop(0)
            reason = "spool_count_exceeded" if len(rows) + 1 > MAX_ENTRIES else "spool_total_bytes_exceeded"
            total -= self._entry_bytes(k)
            self._discard(m.get("session_id", ""), m.get("capture_key"), reason)
            self._delete(k)

    # -------------------------------------------------------------------------------- flush
    def flush_spool(self, post: Callable[[dict[str, Any]], int | None], now_ms: int,
                    only_session_id: str | None = None, exclude_session_id: str | None = None) -> dict[str, int]:
        """Spec §10 / §10.1 (TOR-42, 43): oldest first by (updated_at, created_at, session_id)."""
        counts = dict.fromkeys(("posted", "filed", "skipped_filed", "skipped_backoff", "skipped_probe",
                                "skipped_quarantine", "discarded", "permanent", "transient", "failed"), 0)
        entries = []
        for key, meta in self._all_meta():
            if meta is None:
                self._corrupt(key)
                counts["discarded"] += 1
                continue
            entries.append((key, meta))
        entries.sort(key=lambda km: (km[1].get("updated_at", ""), km[1].get("created_at", ""),
                                     km[1].get("session_id", "")))
        for key, meta in entries:
            sid = meta.get("session_id", "")
            if only_session_id is not None and sid != only_session_id:
                continue
            if exclude_session_id is not None and sid == exclude_session_id:
                continue
            if _PROBE.match(sid):
                counts["skipped_probe"] += 1
                continue
            if meta.get("lane") == "quarantine":
                counts["skipped_quarantine"] += 1
                continue
            if meta.get("filed_key") and meta.get("filed_key") == meta.get("capture_key"):
                counts["skipped_filed"] += 1
                continue
            if now_ms < int(meta.get("next_attempt_at_ms") or 0):
                counts["skipped_backoff"] += 1
                continue
            turns = self.read_turns(sid)
            if not turns:
                self._discard(sid, meta.get("capture_key"), "transcript_empty")
                self._delete(key)
                counts["discarded"] += 1
                continue
            posted_digest = meta.get("content_digest")
            attempts_before = int(meta.get("attempts") or 0)
            body = {"harness": meta.get("harness"), "session_id": sid, "source": meta.get("source"),
                    "conversation": turns, "machine_id": meta.get("machine_id")}
            if self.send_capture_key:
                body["capture_key"] = meta.get("capture_key")
            if meta.get("model") is not None:
                body["model"] = meta["model"]
            # §10.1 item 13 (TOR-43): ``posted`` counts attempts. Upstream increments it after the turns are read
            # and before the post is called, so a post that raises still counts as posted.
            counts["posted"] += 1
            try:
                status = post(body)
            except Exception as exc:
                # §10.1 item 13: one deferral (ledger ``entry_failed``, attempts + 1, backoff), counted in ``failed``
                # and not also in ``transient``.
                self._discard(sid, meta.get("capture_key"), "entry_failed", repr(exc))
                counts["failed"] += 1
                self._transient(key, sid, attempts_before, now_ms)
                continue
            if status is not None and 200 <= status < 300:
                # §10.1 item 12: every 2xx counts as filed, even when the compare-and-swap below does not stamp
                # the entry (turns changed during the post: the entry stays unfiled and is re-posted later).
                counts["filed"] += 1
                cur = self.read_meta(sid)
                if cur is not None and cur.get("content_digest") == posted_digest:
                    cur.update(filed_key=cur.get("capture_key"), filed_at=now_ms, attempts=0, next_attempt_at_ms=0,
                               lane="filed")
                    self._write_meta(key, cur)
            elif status is not None and 400 <= status < 500 and status not in (408, 409, 425, 429):
                counts["permanent"] += 1
                reason = f"permanent_http_{status}"
                self._discard(sid, meta.get("capture_key"), reason)
                if self.permanent == "delete":
                    self._delete(key)
                else:
                    cur = self.read_meta(sid) or meta
                    cur.update(lane="quarantine", terminal_reason=reason)
                    self._write_meta(key, cur)
            else:
                self._transient(key, sid, attempts_before, now_ms)
                counts["transient"] += 1
        return counts

    def _transient(self, key: str, sid: str, attempts_before: int, now_ms: int) -> None:
        cur = self.read_meta(sid)
        if cur is None:
            return
        cur["attempts"] = attempts_before + 1
        cur["next_attempt_at_ms"] = now_ms + backoff_delay(attempts_before + 1) * 1000
        self._write_meta(key, cur)


def local_capture_post(capture: Callable[..., dict[str, Any]]) -> Callable[[dict[str, Any]], int]:
    """[SIM] poster into a local capture: ``ok``/``empty`` => 200, ValueError => 400, ProviderUnavailable =>
    503, other exceptions => 500. Retry files no content approval; exactly-once is not implied."""
    from .errors import ProviderUnavailable

    def post(body: dict[str, Any]) -> int:
        kw = {"capture_key": body["capture_key"]} if body.get("capture_key") else {}
        try:
            res = capture(body["conversation"], session_id=body["session_id"], **kw)
        except ProviderUnavailable:
            return 503
        except ValueError:
            return 400
        except Exception:
            return 500
        return 200 if res.get("ok") or res.get("extraction_mode") == "empty" else 500

    return post
