"""Hardened per-question write journal (named option ``DriverConfig(durability="journal")``; REL-03..05).

The reference writes a question's result line, its PM training pairs and its case as separate appends, and
restart suppression keys on the result line alone (AGF-08, AGF-30, AGF-38): a crash between the appends loses
the case for good, and a torn result line makes the question re-run and its case land twice. This option keeps
the upstream file formats and makes the group of appends one redo-logged unit:

1. one intent record ``{"q", "writes": [{"path", "offset", "text", "step"}]}`` is written to the empty
   ``<result file>.wal`` and fsync'd (the offsets are each file's size before the question's writes);
2. the writes are applied in order, each an fsync'd append;
3. the journal is truncated to empty (the commit point of "applied").

``recover()`` (run at driver start, before restart suppression reads the result file) redoes a complete intent
left in the journal: each file is cut back to its recorded offset (so a torn or partial append disappears) and
the text appended again, which is idempotent; a torn intent means nothing was applied and is dropped. With ``lock=True``
(default in journal mode) every commit and recovery holds an exclusive ``flock`` on ``<journal>.lock``, and the
driver re-reads the result file under it, so two drivers on one bank never both admit a question (REL-11).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from .durable import after_write, append_text, file_size

JOURNAL_STEP = "agentfly.journal"
CLEAR_STEP = "agentfly.journal.clear"


class QuestionJournal:
    def __init__(self, path: str | os.PathLike[str], hook: Callable[[str], None] | None = None, *,
                 lock: bool = True) -> None:
        self.path = str(path)
        self.hook = hook
        self.lock_enabled = lock

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        if not self.lock_enabled:
            yield
            return
        import fcntl

        with open(self.path + ".lock", "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _pending(self) -> dict[str, Any] | None:
        """The intent record, if one was completely written (a torn record means nothing was applied yet)."""
        if not os.path.exists(self.path):
            return None
        with open(self.path, "rb") as f:
            data = f.read()
        nl = data.find(b"\n")
        if nl < 0:
            return None
        try:
            rec = json.loads(data[:nl].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
        return rec if isinstance(rec, dict) and isinstance(rec.get("writes"), list) else None

    def _apply(self, writes: list[dict[str, Any]], *, hooked: bool) -> None:
        for w in writes:
            path, offset = w["path"], int(w["offset"])
            if file_size(path) > offset:
                os.truncate(path, offset)
            append_text(path, w["text"], step=w["step"] if hooked else None, hook=self.hook if hooked else None,
                        fsync=True)
            if hooked and w["step"] == "agentfly.result_write" and self.hook is not None:
                self.hook("agentfly.after_result_write")

    def _clear(self, *, hooked: bool) -> None:
        if hooked and self.hook is not None:
            self.hook(CLEAR_STEP)
        if os.path.exists(self.path):
            fd = os.open(self.path, os.O_WRONLY)
            try:
                os.ftruncate(fd, 0)
                os.fsync(fd)
            finally:
                os.close(fd)
        if hooked:
            after_write(self.hook, CLEAR_STEP, None, None)

    def recover(self) -> int:
        """Complete a half-applied question (see module docstring); returns 1 if one was redone, else 0."""
        with self.locked():
            rec = self._pending()
            if rec is not None:
                self._apply(rec["writes"], hooked=False)
            self._clear(hooked=False)
            return int(rec is not None)

    def commit(self, question: str, writes: list[tuple[str, str, str]]) -> None:
        """``writes``: ``(path, text, step)`` in order. Caller holds ``locked()`` when locking is wanted."""
        entries = [{"path": p, "offset": file_size(p), "text": t, "step": s} for p, t, s in writes]
        seen: dict[str, int] = {}  # several writes to one file: later offsets follow the earlier texts
        for e in entries:
            if e["path"] in seen:
                e["offset"] = seen[e["path"]]
            seen[e["path"]] = e["offset"] + len(e["text"].encode("utf-8"))
        line = json.dumps({"q": question, "writes": entries}, ensure_ascii=False) + "\n"
        append_text(self.path, line, step=JOURNAL_STEP, hook=self.hook, fsync=True)
        self._apply(entries, hooked=True)
        self._clear(hooked=True)


def journal_path(result_path: str) -> str:
    return result_path + ".wal"


__all__ = ["QuestionJournal", "journal_path", "JOURNAL_STEP", "CLEAR_STEP"]
