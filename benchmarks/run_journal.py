"""A long run's journal: each finished unit of work (a LongMemEval question) kept as it finishes, so a run killed
after hours resumes from what it had done.

The journal is a folder beside the run's outputs but outside its staging folder and its published names:
``<out>/.memsim-resume-<name>-<config hash>/`` (hidden, never a results name). The configuration hash covers
everything a unit's result depends on (the caller passes it: data file, arms, settings, seed, memsim version and
code identity), so a journal is only ever resumed by a run that would compute the same results; a run with other
settings has another journal. Inside:

- ``journal.jsonl``: one line per finished unit, ``{"index", "sha256", "outcome"}``, appended and fsynced as
  each unit finishes (fault-hook step ``<name>.journal.append`` before each append). ``sha256`` is the digest of the
  outcome's JSON text, so a line whose bytes changed, or the partial last line of a killed run, is recognised.
- any files the caller keeps for the resumed run (:attr:`RunJournal.dir`: the LongMemEval run keeps its trained PM
  model there, so a resumed run serves the same classifier).

The journal is read only when resuming (``resume=True``); a run that does not resume starts a new journal in
place of an old one of the same configuration. Damaged or partial records are dropped with one warning line (their
units run again). :meth:`RunJournal.remove` deletes the folder when the run has published its results.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

PREFIX = ".memsim-resume-"


def _plain(o: Any) -> Any:
    """JSON for the values an outcome may hold besides the JSON types (numpy scalars and arrays, sets, paths)."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, set | frozenset):
        return sorted(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")


def config_hash(config: dict[str, Any]) -> str:
    """The sha256 of a configuration's canonical JSON."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=_plain).encode("utf-8")).hexdigest()


def file_identity(path: Path) -> dict[str, Any]:
    """A data file's identity for a configuration hash: its resolved path, size, modification time and the sha256
    of its first and last MiB (cheap on a multi-GB file; an edit changes the time, a copy keeps the bytes)."""
    p = Path(path).resolve()
    st = p.stat()
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        h.update(fh.read(1 << 20))
        if st.st_size > 2 << 20:
            fh.seek(-(1 << 20), os.SEEK_END)
            h.update(fh.read(1 << 20))
    return {"path": str(p), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns, "edges_sha256": h.hexdigest()}


class RunJournal:
    """The journal of one run (see the module docstring). ``warn(line)`` receives the one warning line about
    dropped records; ``fault_hook(step)`` runs before each append."""

    def __init__(self, out_dir: Path, name: str, config: dict[str, Any], *, resume: bool,
                 warn: Callable[[str], None] | None = None, fault_hook: Callable[[str], None] | None = None) -> None:
        self.name = name
        self.dir = Path(out_dir) / f"{PREFIX}{name}-{config_hash(config)[:16]}"
        self.path = self.dir / "journal.jsonl"
        self.hook = fault_hook
        self.done: dict[int, dict[str, Any]] = {}
        self.dropped = 0
        if resume:
            self._read(warn)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        if not resume or not self.path.exists():
            self.path.write_bytes(b"")
        elif self.dropped:
            self._rewrite()
        (self.dir / "config.json").write_text(json.dumps(config, indent=1, sort_keys=True, default=_plain) + "\n",
                                              encoding="utf-8")

    def _read(self, warn: Callable[[str], None] | None) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        lines = data.split(b"\n")
        partial = bool(lines and lines[-1])  # no newline after the last record: it was being written
        for raw in lines:
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
                text = json.dumps(rec["outcome"], sort_keys=True)
                if hashlib.sha256(text.encode("utf-8")).hexdigest() != rec["sha256"]:
                    raise ValueError("checksum")
                self.done[int(rec["index"])] = rec["outcome"]
            except (ValueError, KeyError, TypeError):
                self.dropped += 1
        if self.dropped and warn:
            warn(f"{self.path}: dropped {self.dropped} damaged record(s){' (the last one partial)' if partial else ''};"
                 f" {'that unit runs' if self.dropped == 1 else 'those units run'} again")

    def _rewrite(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as fh:
            for i in sorted(self.done):
                fh.write(self._line(i, self.done[i]))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    @staticmethod
    def _line(index: int, outcome: Any) -> bytes:
        text = json.dumps(outcome, sort_keys=True)
        rec = {"index": index, "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(), "outcome": outcome}
        return (json.dumps(rec, sort_keys=True) + "\n").encode("utf-8")

    def append(self, index: int, outcome: dict[str, Any]) -> dict[str, Any]:
        """Keep one finished unit; returns the outcome as a resumed run will read it back (JSON values only), so
        an uninterrupted run and a resumed one aggregate the same values."""
        plain = json.loads(json.dumps(outcome, default=_plain))
        if self.hook:
            self.hook(f"{self.name}.journal.append")
        with open(self.path, "ab") as fh:
            fh.write(self._line(index, plain))
            fh.flush()
            os.fsync(fh.fileno())
        self.done[index] = plain
        return plain

    def remove(self) -> None:
        """Delete the journal (the run published its results)."""
        with contextlib.suppress(OSError):
            shutil.rmtree(self.dir)
