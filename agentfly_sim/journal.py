"""Hardened per-question write journal (named option ``DriverConfig(durability="journal")``; REL-04/REL-06).

The reference writes a question's result line, its PM training pairs and its case as separate appends, and
restart suppression keys on the result line alone (AGF-08, AGF-30, AGF-38): a crash between the appends loses
the case for good, and a torn result line makes the question re-run and its case land twice. This option keeps
the upstream file formats and makes the group of appends one redo-logged unit:

1. one intent record ``{"seq", "q", "writes": [{"path", "offset", "text", "step"}]}`` is appended to
   ``<result file>.wal`` and fsync'd (the offsets are each file's size before the question's writes);
2. the writes are applied in order, each an fsync'd append;
3. ``{"done": seq}`` is appended.

``recover()`` (run at driver start, before restart suppression reads the result file) drops a torn trailing
journal line, and redoes the last intent that has no ``done``: each file is cut back to its recorded offset (so
a torn or partial append disappears) and the text appended again, which is idempotent. With ``lock=True``
(default in journal mode) every commit and recovery holds an exclusive ``flock`` on ``<journal>.lock``, and the
driver re-reads the result file under it, so two drivers on one bank never both admit a question (REL-10).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from .durable import after_write, append_text, file_size

JOURNAL_STEP = "agentfly.journal"
DONE_STEP = "agentfly.journal.done"


class QuestionJournal:
    def __init__(self, path: str | os.PathLike[str], hook: Callable[[str], None] | None = None, *,
                 lock: bool = True) -> None:
        self.path = str(path)
        self.hook = hook
        self.lock_enabled = lock
        self.seq = 0

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

    def _records(self) -> list[dict[str, Any]]:
        """Parsed complete records; a torn or unparseable tail is cut off the file."""
        if not os.path.exists(self.path):
            return []
        with open(self.path, "rb") as f:
            data = f.read()
        records: list[dict[str, Any]] = []
        good_end = 0
        pos = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl < 0:
                break
            try:
                rec = json.loads(data[pos:nl].decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                break
            if not isinstance(rec, dict):
                break
            records.append(rec)
            pos = good_end = nl + 1
        if good_end < len(data):
            os.truncate(self.path, good_end)
        return records

    def _apply(self, writes: list[dict[str, Any]], *, hooked: bool) -> None:
        for w in writes:
            path, offset = w["path"], int(w["offset"])
            if file_size(path) > offset:
                os.truncate(path, offset)
            append_text(path, w["text"], step=w["step"] if hooked else None, hook=self.hook if hooked else None,
                        fsync=True)
            if hooked and w["step"] == "agentfly.result_write" and self.hook is not None:
                self.hook("agentfly.after_result_write")

    def _done(self, seq: int, *, hooked: bool) -> None:
        append_text(self.path, json.dumps({"done": seq}) + "\n", step=DONE_STEP if hooked else None,
                    hook=self.hook if hooked else None, fsync=True)

    def recover(self) -> int:
        """Complete a half-applied question (see module docstring); returns 1 if one was redone, else 0."""
        with self.locked():
            records = self._records()
            intents = [r for r in records if "writes" in r]
            done = {r["done"] for r in records if "done" in r}
            self.seq = max([int(r.get("seq", 0)) for r in intents] + [0])
            if not intents or intents[-1]["seq"] in done:
                return 0
            last = intents[-1]
            self._apply(last["writes"], hooked=False)
            self._done(last["seq"], hooked=False)
            return 1

    def commit(self, question: str, writes: list[tuple[str, str, str]]) -> None:
        """``writes``: ``(path, text, step)`` in order. Caller holds ``locked()`` when locking is wanted."""
        self.seq += 1
        entries = [{"path": p, "offset": file_size(p), "text": t, "step": s} for p, t, s in writes]
        # several writes to one file in one question: later offsets follow the earlier texts
        seen: dict[str, int] = {}
        for e in entries:
            if e["path"] in seen:
                e["offset"] = seen[e["path"]]
            seen[e["path"]] = e["offset"] + len(e["text"].encode("utf-8"))
        line = json.dumps({"seq": self.seq, "q": question, "writes": entries}, ensure_ascii=False) + "\n"
        append_text(self.path, line, step=JOURNAL_STEP, hook=self.hook, fsync=True)
        self._apply(entries, hooked=True)
        self._done(self.seq, hooked=True)


def journal_path(result_path: str) -> str:
    return result_path + ".wal"


__all__ = ["QuestionJournal", "journal_path", "JOURNAL_STEP", "DONE_STEP", "after_write"]
