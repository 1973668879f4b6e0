"""Append-only record store for turns (spec §3.10 [SIM], integration issues, item 1): JSONL rows
``{session_id, index, role, content}``; in memory when no path is given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["RecordStore"]


class RecordStore:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._rows: list[dict[str, Any]] = []

    def append_session(self, session_id: str, turns: list[dict[str, str]]) -> int:
        rows = [{"session_id": session_id, "index": i, "role": t["role"], "content": t["content"]}
                for i, t in enumerate(turns)]
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                for r in rows:
                    fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        else:
            self._rows.extend(rows)
        return len(rows)

    def rows(self, session_id: str | None = None) -> list[dict[str, Any]]:
        if self.path is not None:
            data = ([json.loads(x) for x in self.path.read_text(encoding="utf-8").splitlines() if x.strip()]
                    if self.path.exists() else [])
        else:
            data = list(self._rows)
        return [r for r in data if session_id is None or r["session_id"] == session_id]
