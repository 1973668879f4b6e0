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
    "MAX_ENTRIES", "MAX_TOTAL_BYTES", "MAX_ENTRY_BYTES", "SpoolTurnsError", "spool_lock", "filer_lock",
    "LOCK_NAME", "FILER_LOCK_NAME", "ledger_summary",
]

LOCK_NAME = ".spool.lock"
FILER_LOCK_NAME = ".filer.lock"


def _flock(path: Path, wait_s: float | None) -> int | None:
    """An exclusive ``fcntl.flock`` on ``path`` (created 0600): the open fd holding it, or None when ``wait_s``
    seconds passed without it (``None`` waits as long as it takes). No ``fcntl`` (not POSIX): an fd without a lock."""
    import time

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return fd
    if wait_s is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd
    deadline = time.monotonic() + max(0.0, wait_s)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.02)


@contextlib.contextmanager
def spool_lock(root: str | Path) -> Any:
    """[SIM] The spool's write lock (``<root>/.spool.lock``, ``fcntl.flock``): held around every change of an entry
    (``spool_write``, a flush's bookkeeping after a post, a discard), never during a post, so the session-end hook
    client (standard library) and the resident service or a filer process never interleave writes of one entry."""
    fd = _flock(Path(root) / LOCK_NAME, None)
    try:
        yield fd
    finally:
        os.close(fd)  # closing the only fd releases the flock


def filer_lock(root: str | Path, wait_s: float | None) -> int | None:
    """[SIM] The filing lock (``<root>/.filer.lock``), held by whoever files spooled sessions into the store without
    the service (the detached filer of a session end, a session-start drain) for the whole filing, so a
    session-start hook can wait for a filer that is still at work. Returns the fd holding it (close it to release;
    it may be passed to a child process, which then holds it), or None after ``wait_s`` seconds."""
    return _flock(Path(root) / FILER_LOCK_NAME, wait_s)


def ledger_summary(root: str | Path, latest: int = 5) -> dict[str, Any]:
    """The discard ledger of the spool at ``root`` for a report (``spool-flush``, ``serve --status``): ``{"ledger":
    path, "rows": n, "by_reason": {reason: n}, "latest": [the last ``latest`` rows]}``; a row that does not parse (a
    torn last row) is counted under ``"unparsable"``."""
    path = Path(root) / "discarded.jsonl"
    rows: list[dict[str, Any]] = []
    bad = 0
    try:
        raw = path.read_bytes()
    except OSError:
        raw = b""
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    by_reason: dict[str, int] = {}
    for r in rows:
        by_reason[str(r.get("reason"))] = by_reason.get(str(r.get("reason")), 0) + 1
    out: dict[str, Any] = {"ledger": str(path), "rows": len(rows), "by_reason": by_reason,
                           "latest": rows[-latest:] if latest > 0 else []}
    if bad:
        out["unparsable"] = bad
    return out

MAX_ENTRIES = 1000
MAX_TOTAL_BYTES = 256 * 1024 * 1024
MAX_ENTRY_BYTES = 16 * 1024 * 1024
# §10.1 item 4: anchored at the very end (\Z), so an id with a trailing newline is not a probe.
_PROBE = re.compile(r"verify-[a-z][a-z0-9-]*-\d{8}T\d{6}Z-[0-9a-f]{6}\Z")


class SpoolTurnsError(ValueError):
    """A turn log that cannot be read at all (an ``OSError`` other than a missing file, or bytes that are not UTF-8):
    the message names the file and the cause. Raised only inside one entry's filing under the hardened
    ``turns_unreadable="keep"`` option, where that entry's guard records it (ledger ``transcript_unreadable``) and
    keeps the entry; it never stops a flush. The faithful read (spec §10.1 item 17, TOR-52) reads such a log as no
    turns instead."""


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
    """Seconds: ``min(30 * 2^max(0, n-1), 21600)``. Computed without the power once the cap binds (n >= 11), so a
    huge ``attempts`` read from a meta file (``int(1e300)``) gives 21600 at once instead of computing 2^(10^300):
    the same value for every n."""
    e = max(0, int(n) - 1)
    return 21600 if e >= 10 else int(min(30 * 2 ** e, 21600))


def _order_key(meta: dict[str, Any]) -> tuple[str, str, str]:
    """Oldest first (spec §10.1 items 1 and 16): ``(str(updated_at or ""), str(created_at or ""),
    str(session_id or ""))``, the flush's and the pruning's order; a non-string timestamp never raises."""
    return (str(meta.get("updated_at") or ""), str(meta.get("created_at") or ""), str(meta.get("session_id") or ""))


def _retry_time(meta: dict[str, Any]) -> float:
    """``next_attempt_at_ms`` as upstream reads it (spec §10.1 item 16): ``float(value or 0)``, and a value that
    raises ``TypeError``/``ValueError`` there (``"soon"``, a list, an object) reads as 0, i.e. due now. ``"123"``
    reads 123, ``"1e20"``/``"inf"`` read as far future, ``"nan"`` never compares greater (due). An integer too large
    for a float raises ``OverflowError``, which the entry's guard records (item 15)."""
    try:
        return float(meta.get("next_attempt_at_ms") or 0)
    except (TypeError, ValueError):
        return 0.0


def _parse_turn_line(line: str) -> dict[str, str] | None:
    """One turn-log line as upstream reads it back (spec §10.1 item 17): a JSON object whose ``role`` and
    ``content`` are both strings, reduced to those two keys; anything else (not JSON, torn, another shape) is
    None, i.e. skipped."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("role"), str) or not isinstance(obj.get("content"), str):
        return None
    return {"role": obj["role"], "content": obj["content"]}


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
    ``SimConfig.spool_permanent`` ([A] quarantine keeps the turns, [LATER] delete removes the entry).

    ``turns_unreadable`` (``SimConfig.spool_turns_unreadable``) is what a flush does with a turn log that cannot be
    read at all (an ``OSError``, or bytes that are not UTF-8, e.g. a multi-byte character torn by a killed append):
    ``"discard"`` (the default, upstream, spec §10.1 item 17, TOR-52) reads it as no turns, so the entry is
    discarded as ``transcript_empty`` and both files are deleted (the whole session is lost to one torn byte);
    ``"keep"`` (hardened, named) keeps both files untouched apart from the retry time, writes a ledger row
    ``transcript_unreadable`` naming the file and the cause, counts the entry in ``failed`` and goes on with the
    next entry (a later ``spool_write`` of the same session rewrites the log, since a torn log is not a prefix of
    the new one)."""

    def __init__(self, root: str | Path, *, clock: Callable[[], datetime] | None = None,
                 permanent: str = "quarantine", fault_hook: Callable[[str], None] | None = None,
                 corrupt: str = "delete", atomic_turns: bool = False, send_capture_key: bool = False,
                 idempotent_ledger: bool = False, turns_unreadable: str = "discard", lock: bool = True) -> None:
        if permanent not in ("quarantine", "delete"):
            raise ValueError("permanent must be 'quarantine' or 'delete'")
        if corrupt not in ("delete", "quarantine"):
            raise ValueError("corrupt must be 'delete' or 'quarantine'")
        if turns_unreadable not in ("discard", "keep"):
            raise ValueError("turns_unreadable must be 'discard' or 'keep'")
        self.corrupt = corrupt
        self.turns_unreadable = turns_unreadable
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
        # [SIM] ``lock`` (default on): :func:`spool_lock` around every entry change, so the session-end hook
        # client and a service or filer process writing the same spool never interleave (False: no lock)
        self.lock = lock

    def _locked(self) -> Any:
        return spool_lock(self.root) if self.lock else contextlib.nullcontext()

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
        """The turns as a flush reads them back (spec §10.1 item 17, TOR-52): never raises. Blank lines and lines
        that are not a JSON object with string ``role`` and ``content`` are skipped (so the torn last line of a
        killed append is dropped), each turn keeps only those two keys, and a log that cannot be read at all (an
        ``OSError``, bytes that are not UTF-8) reads as no turns."""
        try:
            return self._read_turn_log(self._paths(entry_key(session_id))[1])
        except SpoolTurnsError:
            return []

    @staticmethod
    def _read_turn_log(path: Path) -> list[dict[str, str]]:
        """Item 17's read, except that a log that exists but cannot be read raises :class:`SpoolTurnsError` naming
        the file (a missing log is no turns)."""
        try:
            text = path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SpoolTurnsError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        except UnicodeDecodeError as exc:
            raise SpoolTurnsError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
        return [t for t in (_parse_turn_line(x) for x in text.splitlines() if x.strip()) if t is not None]

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
        ``filed_key`` survives only an unchanged digest; a content change resets attempts/retry/lane. Runs under
        the spool lock (``lock``)."""
        session_id.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError (§10.1 item 10)
        if not turns:
            return {"action": "none"}
        with self._locked():
            return self._spool_write(session_id, turns, harness, source, machine_id, model)

    def due_sessions(self, now_ms: int, exclude_session_id: str | None = None) -> list[str]:
        """The session ids a flush at ``now_ms`` would work on, oldest first (not quarantined, not filed, not
        backing off, not probes, not ``exclude_session_id``); a corrupt meta is listed as ``unreadable:<key>`` (the
        flush discards it). Reads only; the session-start hook's check for pending work."""
        out: list[tuple[tuple[str, str, str], str]] = []
        for key, meta in self._all_meta():
            if meta is None:
                out.append((("", "", ""), f"unreadable:{key}"))
                continue
            sid = meta["session_id"]
            if sid == exclude_session_id or _PROBE.match(sid) or meta.get("lane") == "quarantine":
                continue
            if meta.get("filed_key") and meta.get("filed_key") == meta.get("capture_key"):
                continue
            try:
                if now_ms < _retry_time(meta):
                    continue
            except OverflowError:
                pass
            out.append((_order_key(meta), sid))
        return [sid for _, sid in sorted(out)]

    def discard(self, session_id: str, capture_key: str | None, reason: str, detail: str = "") -> None:
        """A ledger row (``discarded.jsonl``) under the spool lock: the session-end hook's record of a session it
        could not spool (its transcript unreadable, or no turns)."""
        with self._locked():
            self._discard(session_id, capture_key, reason, detail)

    def _spool_write(self, session_id: str, turns: list[dict[str, Any]], harness: str, source: str,
                     machine_id: str, model: str | None) -> dict[str, Any]:
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
        rows.sort(key=lambda km: _order_key(km[1]))  # §10.1 item 16: keys coerced to strings
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
        """Spec §10 / §10.1 (TOR-42, 43, 51, 52): oldest first by (updated_at, created_at, session_id), each coerced
        to a string (item 16). Counts ``{posted, filed, skipped_filed, skipped_backoff, skipped_probe,
        skipped_quarantine, discarded, permanent, transient, failed}``.

        Each entry is filed under its own guard (item 15, TOR-51): any exception while filing one entry (its
        retry time, its turn-log read, the post, the bookkeeping after the post; also the discard of a corrupt meta,
        item 9, e.g. a directory where the meta file should be) is caught for that entry alone:
        ledger ``entry_failed`` with detail ``unexpected failure while filing: <repr>``, the entry's files kept,
        a best-effort retry write (``attempts = int(<attempts read before the post> or 0) + 1`` and its backoff;
        nothing written when that raises, e.g. ``attempts: "x"``), and the flush goes on with the next entry. The
        entry then counts in ``failed`` (and in ``posted`` when the post was reached), in nothing else. A post that
        raises is that case (item 13). ``attempts`` is converted only after the post, on the transient and the
        exception paths, as Python's ``int()`` does (``"3"`` -> 4, ``2.9`` -> 3, ``true`` -> 2, ``null``/``""``
        -> 1); the 2xx path resets it without reading it. A retry time that is not a number reads as 0 (item 16).
        A turn log that cannot be read reads as no turns: the entry is discarded as ``transcript_empty`` (item 17,
        TOR-52) unless ``turns_unreadable="keep"``."""
        counts = dict.fromkeys(("posted", "filed", "skipped_filed", "skipped_backoff", "skipped_probe",
                                "skipped_quarantine", "discarded", "permanent", "transient", "failed"), 0)
        entries = []
        for key, meta in self._all_meta():
            if meta is None:
                # item 9 under the same guard: a corrupt meta that cannot even be deleted (a directory in its
                # place) is that entry's failure, not the flush's
                try:
                    self._corrupt(key)
                except Exception as exc:
                    with contextlib.suppress(Exception):
                        self._discard(f"unreadable:{key}", None, "entry_failed",
                                      f"unexpected failure while filing: {exc!r}")
                    counts["failed"] += 1
                    continue
                counts["discarded"] += 1
                continue
            entries.append((key, meta))
        entries.sort(key=lambda km: _order_key(km[1]))
        for key, meta in entries:
            sid = meta["session_id"]  # a non-empty string (_parse_meta, item 14)
            if only_session_id is not None and sid != only_session_id:
                continue
            if exclude_session_id is not None and sid == exclude_session_id:
                continue
            if _PROBE.match(sid):
                counts["skipped_probe"] += 1
                continue
            mine = dict.fromkeys(counts, 0)  # this entry's counts, merged when its filing completes
            try:
                self._file_entry(key, meta, post, now_ms, mine)
            except Exception as exc:
                self._entry_failed(key, meta, now_ms, exc)
                counts["failed"] += 1
                counts["posted"] += mine["posted"]
                continue
            for name, n in mine.items():
                counts[name] += n
        return counts

    def _file_entry(self, key: str, meta: dict[str, Any], post: Callable[[dict[str, Any]], int | None],
                    now_ms: int, counts: dict[str, int]) -> None:
        """One entry's filing, everything the guard of :meth:`flush_spool` covers (item 15); the spool lock is held
        before and after the post, not during it."""
        with self._locked():
            body = self._pre_post(key, meta, now_ms, counts)
        if body is None:
            return
        posted_digest = meta.get("content_digest")
        # §10.1 item 13 (TOR-43): ``posted`` counts attempts. Upstream increments it after the turns are read and
        # before the post is called, so a post that raises still counts as posted.
        counts["posted"] += 1
        status = post(body)
        with self._locked():
            self._post_post(key, meta, status, posted_digest, now_ms, counts)

    def _pre_post(self, key: str, meta: dict[str, Any], now_ms: int,
                  counts: dict[str, int]) -> dict[str, Any] | None:
        """The checks before a post and the turn-log read: the post body, or None (skipped or discarded)."""
        sid = meta["session_id"]
        if meta.get("lane") == "quarantine":
            counts["skipped_quarantine"] += 1
            return None
        if meta.get("filed_key") and meta.get("filed_key") == meta.get("capture_key"):
            counts["skipped_filed"] += 1
            return None
        if now_ms < _retry_time(meta):
            counts["skipped_backoff"] += 1
            return None
        turns_path = self._paths(key)[1]
        try:
            turns = self._read_turn_log(turns_path)
        except SpoolTurnsError:
            if self.turns_unreadable == "keep":
                raise  # the guard records it as ``transcript_unreadable`` and keeps the entry
            turns = []  # item 17 (TOR-52): an unreadable log reads as no turns
        if not turns:
            self._discard(sid, meta.get("capture_key"), "transcript_empty")
            self._delete(key)
            counts["discarded"] += 1
            return None
        body = {"harness": meta.get("harness"), "session_id": sid, "source": meta.get("source"),
                "conversation": turns, "machine_id": meta.get("machine_id")}
        if self.send_capture_key:
            body["capture_key"] = meta.get("capture_key")
        if meta.get("model") is not None:
            body["model"] = meta["model"]
        return body

    def _post_post(self, key: str, meta: dict[str, Any], status: int | None, posted_digest: Any, now_ms: int,
                   counts: dict[str, int]) -> None:
        """The bookkeeping after a post (2xx compare-and-swap, permanent, transient)."""
        sid = meta["session_id"]
        if status is not None and 200 <= status < 300:
            # §10.1 item 12: every 2xx counts as filed, even when the compare-and-swap below does not stamp the
            # entry (turns changed during the post: the entry stays unfiled and is re-posted later).
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
            # §10.1 items 8 and 15: attempts read before the post, converted only now (``"x"`` raises here, and the
            # guard records the entry as failed with nothing written, so it is due again at the next flush).
            attempts = int(meta.get("attempts") or 0) + 1
            cur = self.read_meta(sid)
            if cur is not None:
                cur["attempts"] = attempts
                cur["next_attempt_at_ms"] = now_ms + backoff_delay(attempts) * 1000
                self._write_meta(key, cur)
            counts["transient"] += 1

    def _entry_failed(self, key: str, meta: dict[str, Any], now_ms: int, exc: Exception) -> None:
        """Item 15: the ledger row of an entry whose filing raised, then the best-effort retry write (re-read meta,
        or the one in hand; ``attempts = int(<attempts read before the post> or 0) + 1`` and its backoff). Nothing
        is written when any of that raises. Under ``turns_unreadable="keep"`` an unreadable turn log is recorded
        as ``transcript_unreadable`` with the file and the cause."""
        sid, ckey = meta["session_id"], meta.get("capture_key")
        with contextlib.suppress(Exception), self._locked():
            if isinstance(exc, SpoolTurnsError):
                self._discard(sid, ckey, "transcript_unreadable", str(exc))
            else:
                self._discard(sid, ckey, "entry_failed", f"unexpected failure while filing: {exc!r}")
        with contextlib.suppress(Exception), self._locked():
            cur = self._parse_meta(self._paths(key)[0]) or meta
            attempts = int(meta.get("attempts") or 0) + 1
            cur["attempts"] = attempts
            cur["next_attempt_at_ms"] = now_ms + backoff_delay(attempts) * 1000
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
