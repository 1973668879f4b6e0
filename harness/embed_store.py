"""The embedding store: text vectors kept on disk across runs, keyed by (encoder weights, device kind, exact text).

State meant to outlive a run (like the data and hosts caches), kept outside run folders: ``$MEMSIM_EMBED_STORE``
when set, else ``platformdirs.user_cache_dir("memsim")/embeddings``. One folder per encoder and device kind
(``minilm-mean-cpu``, ``minilm-pooler-cuda``, ...), a *namespace*, holding:

- ``store.json``: what the namespace was built by: encoder name, the sha256 of its weights, device kind, vector
  dimension, memsim version and format. A namespace whose ``store.json`` says anything else (other weights, another
  memsim version, another format) is emptied and rebuilt, with one warning line; it is never read.
- sealed **segments**, each two files: ``<id>.bin`` (``n`` sha256 digests of the texts' UTF-8 bytes, 32 bytes each,
  sorted, then the ``n`` float32 little-endian rows in the same order) and ``<id>.json`` (the seal: the identity
  above, ``n``, ``dim``, the size and sha256 of the ``.bin``). The ``.bin`` is written under a temporary name and
  renamed, and the seal is written last (atomically), so a segment without its seal is being written (or its writer
  was killed) and no reader opens it. A reader checks a seal's identity, the ``.bin``'s size and sha256, and only
  then memory-maps it read-only (``numpy.memmap``): processes that read one namespace share its pages, nothing is
  copied per worker. A segment whose bytes differ from its seal (changed or truncated underneath) is deleted, with
  the namespace's one warning line, and its texts are encoded again when asked for.

Why this format: a lookup is a binary search over the sorted digests of each segment (``numpy.searchsorted``),
with no index to build per process; the rows are raw float32, so a mapped row *is* the vector; the checksum in the
seal detects any change of the bytes. A digest stands for the exact text (a sha256 collision is not a practical
event); the texts themselves are not stored.

Writers never share a file: each process keeps the vectors it encodes in memory and seals them as a new segment of
its own (:meth:`Namespace.flush`; the LongMemEval bench flushes after each question). A segment is never changed
after it is sealed, so any number of processes write side by side without a lock, and a killed process loses only
what it had not sealed. :meth:`Namespace.compact` merges the sealed segments into one (under an exclusive
``flock`` of the namespace's ``.lock``; the run calls it when it ends, and a process that sees more than
``MAX_SEGMENTS`` compacts on its own): it writes and seals the merged segment first and deletes the merged ones
after, so at every moment each vector is in at least one sealed segment. A reader that meets a segment deleted by a
compaction just lists the folder again. Two segments may hold the same text (two workers met it at once): the
vectors are equal, as each text is encoded alone (see ``harness.store_encoders``), and compaction keeps one.

A full disk (``ENOSPC``, ``EDQUOT``) while sealing raises :class:`EmbedStoreFull`, whose message is one line
naming the namespace folder; the temporary file is removed and no segment is half-visible. Fault-hook steps:
``embed_store.segment.data`` (before the ``.bin`` rename), ``embed_store.segment.seal`` (before the seal's rename),
``embed_store.store_json`` (before ``store.json``'s rename).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.atomic import write_atomic

STORE_ENV = "MEMSIM_EMBED_STORE"
FORMAT = 1
DIGEST = 32
MAX_SEGMENTS = 32
"""A process that sees more sealed segments than this in a namespace compacts it (fewer binary searches)."""
ORPHAN_AGE_S = 3600.0
"""A ``.bin`` without a seal older than this is a killed writer's leftover; compaction removes it."""
_FULL = {errno.ENOSPC, errno.EDQUOT}


class EmbedStoreFull(OSError):
    """The disk under the store is full; the message is one line naming the namespace folder."""


def store_root() -> Path:
    """``$MEMSIM_EMBED_STORE``, else ``platformdirs.user_cache_dir("memsim")/embeddings``."""
    env = os.environ.get(STORE_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("memsim")) / "embeddings"


def memsim_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memsim")
    except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
        return "unknown"


@dataclass(frozen=True)
class Identity:
    """What a namespace's vectors are a function of (besides the text): the encoder and the sha256 of its weights,
    the device kind it ran on (``cpu`` or ``cuda``: the same text gives vectors that differ by float noise), the
    vector dimension, and the memsim version and store format that wrote them."""

    encoder: str
    weights: str
    device: str
    dim: int
    memsim: str = ""
    format: int = FORMAT

    def folder(self) -> str:
        return f"{self.encoder}-{self.device}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def digests(texts: Sequence[str]) -> np.ndarray:
    """The sha256 digests of ``texts`` (UTF-8, lone surrogates kept) as a ``S32`` array."""
    return np.array([hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest() for t in texts],
                    dtype=f"S{DIGEST}")


def _file_sha256(fh: Any, size: int) -> str:
    h = hashlib.sha256()
    fh.seek(0)
    left = size
    while left > 0:
        chunk = fh.read(min(left, 1 << 22))
        if not chunk:
            break
        h.update(chunk)
        left -= len(chunk)
    return h.hexdigest()


def _full(exc: OSError, folder: Path) -> EmbedStoreFull:
    full = EmbedStoreFull(f"embedding store {folder}: no space left on the device ({exc.strerror or exc}); free "
                          f"space there or set {STORE_ENV} to another folder")
    full.errno = exc.errno  # the message stays the one line above (no "[Errno ...]" prefix)
    return full


class _Segment:
    """One sealed segment, memory-mapped read-only."""

    def __init__(self, name: str, keys: np.ndarray, vecs: np.ndarray) -> None:
        self.name, self.keys, self.vecs = name, keys, vecs

    def find(self, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For digests ``d``: a boolean mask of those present and their row numbers."""
        if len(self.keys) == 0 or len(d) == 0:
            return np.zeros(len(d), dtype=bool), np.zeros(len(d), dtype=np.int64)
        idx = np.searchsorted(self.keys, d)
        idx = np.minimum(idx, len(self.keys) - 1)
        return self.keys[idx] == d, idx


class Namespace:
    """One encoder and device kind of the store: sealed segments on disk plus this process's unsealed vectors.

    ``warn(line)`` receives the namespace's warning (at most one line per open or refresh: a rebuilt namespace,
    damaged segments dropped). ``fault_hook(step)`` runs before each durable rename (see the module docstring)."""

    def __init__(self, root: Path, identity: Identity, *, warn: Callable[[str], None] | None = None,
                 fault_hook: Callable[[str], None] | None = None) -> None:
        self.identity = identity
        self.dir = Path(root) / identity.folder()
        self.warn = warn or (lambda line: print(f"warning: {line}", file=sys.stderr, flush=True))
        self.hook = fault_hook
        self.segments: dict[str, _Segment] = {}
        self.pending: dict[bytes, np.ndarray] = {}
        self.sealed_texts = 0
        self._open()

    # ------------------------------------------------------------------------------------------------ open
    @contextlib.contextmanager
    def _lock(self, blocking: bool = True) -> Iterator[bool]:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def _open(self) -> None:
        want = self.identity.as_dict()
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if exc.errno in _FULL:
                raise _full(exc, self.dir) from None
            raise
        with self._lock():
            meta = self.dir / "store.json"
            have: Any = None
            with contextlib.suppress(OSError, ValueError):
                have = json.loads(meta.read_text(encoding="utf-8"))
            if have != want:
                if have is not None or any(self.dir.glob("*.json")) or any(self.dir.glob("*.bin")):
                    self.warn(f"embedding store {self.dir} was built by {self._describe(have)}, not "
                              f"{self._describe(want)}: rebuilding it")
                for p in list(self.dir.glob("*.bin")) + list(self.dir.glob("*.json")):
                    p.unlink(missing_ok=True)
                self._write(meta, (json.dumps(want, indent=1) + "\n").encode(), "embed_store.store_json")
        self.refresh()

    @staticmethod
    def _describe(d: Any) -> str:
        if not isinstance(d, dict):
            return "an unreadable or missing description"
        return (f"encoder {d.get('encoder')} (weights {str(d.get('weights'))[:12]}) on {d.get('device')}, "
                f"memsim {d.get('memsim')}, format {d.get('format')}")

    def _write(self, path: Path, data: bytes, step: str) -> None:
        try:
            write_atomic(path, data, self.hook, step)
        except OSError as exc:
            if exc.errno in _FULL:
                raise _full(exc, self.dir) from None
            raise

    def refresh(self) -> int:
        """Map the segments sealed since the last look (by this or another process); returns how many. Damaged
        segments are deleted with one warning line; segments deleted by a compaction are forgotten."""
        seals = {p.stem for p in self.dir.glob("*.json") if p.name != "store.json"}
        for gone in set(self.segments) - seals:
            del self.segments[gone]
        bad: list[str] = []
        added = 0
        for name in sorted(seals - set(self.segments)):
            try:
                seg = self._load(name)
            except FileNotFoundError:
                continue  # compacted away meanwhile: its vectors are in the merged segment
            except (OSError, ValueError) as exc:
                bad.append(f"{name} ({exc})")
                for suffix in (".json", ".bin"):
                    (self.dir / f"{name}{suffix}").unlink(missing_ok=True)
                continue
            if seg is not None:
                self.segments[name] = seg
                added += 1
        if bad:
            self.warn(f"embedding store {self.dir}: dropped {len(bad)} damaged segment(s), their texts will be "
                      f"encoded again: {'; '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}")
        return added

    def _load(self, name: str) -> _Segment | None:
        seal = json.loads((self.dir / f"{name}.json").read_text(encoding="utf-8"))
        if not isinstance(seal, dict) or seal.get("identity") != self.identity.as_dict():
            raise ValueError("sealed for another encoder, device kind or memsim version")
        n, dim, size = int(seal["n"]), int(seal["dim"]), int(seal["bytes"])
        if dim != self.identity.dim or size != n * (DIGEST + 4 * dim):
            raise ValueError("its seal does not describe its own shape")
        with open(self.dir / f"{name}.bin", "rb") as fh:
            actual = os.fstat(fh.fileno()).st_size
            if actual != size:
                raise ValueError(f"{actual} bytes, sealed with {size}")
            if _file_sha256(fh, size) != seal["sha256"]:
                raise ValueError("bytes changed since it was sealed (sha256 differs)")
            if n == 0:
                return _Segment(name, np.zeros(0, dtype=f"S{DIGEST}"), np.zeros((0, dim), dtype=np.float32))
            keys = np.memmap(fh, dtype=f"S{DIGEST}", mode="r", shape=(n,), offset=0)
            vecs = np.memmap(fh, dtype="<f4", mode="r", shape=(n, dim), offset=n * DIGEST)
        return _Segment(name, keys, vecs)

    # ------------------------------------------------------------------------------------------------ read
    def lookup(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        """The stored vector of each text (a read-only row of a mapped segment, or this process's unsealed one),
        ``None`` where there is none."""
        d = digests(texts)
        out: list[np.ndarray | None] = [None] * len(texts)
        todo = np.ones(len(texts), dtype=bool)
        for i, key in enumerate(d):
            v = self.pending.get(bytes(key))
            if v is not None:
                out[i], todo[i] = v, False
        for seg in list(self.segments.values()):
            if not todo.any():
                break
            where = np.flatnonzero(todo)
            hit, idx = seg.find(d[where])
            for j in np.flatnonzero(hit):
                out[where[j]] = seg.vecs[idx[j]]
                todo[where[j]] = False
        return out

    def __len__(self) -> int:
        return sum(len(s.keys) for s in self.segments.values()) + len(self.pending)

    # ------------------------------------------------------------------------------------------------ write
    def put(self, text: str, vec: np.ndarray) -> None:
        """Keep ``vec`` for ``text`` (unsealed until :meth:`flush`)."""
        v = np.asarray(vec, dtype=np.float32).reshape(-1)
        if v.shape[0] != self.identity.dim:
            raise ValueError(f"a {v.shape[0]}-dimensional vector for a {self.identity.dim}-dimensional store")
        self.pending[bytes(digests([text])[0])] = v

    def flush(self) -> int:
        """Seal this process's unsealed vectors as a new segment; returns how many it sealed."""
        if not self.pending:
            return 0
        keys = sorted(self.pending)
        vecs = np.stack([self.pending[k] for k in keys]).astype("<f4", copy=False)
        name = self._seal(np.array(keys, dtype=f"S{DIGEST}"), vecs)
        self.segments[name] = self._load(name) or self.segments.get(name)  # type: ignore[assignment]
        self.sealed_texts += len(keys)
        self.pending.clear()
        if len(self.segments) > MAX_SEGMENTS:
            self.compact(blocking=False, keep_largest=True)
        return len(keys)

    def _seal(self, keys: np.ndarray, vecs: np.ndarray) -> str:
        name = f"seg-{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}"
        body = keys.tobytes() + np.ascontiguousarray(vecs, dtype="<f4").tobytes()
        seal = {"identity": self.identity.as_dict(), "n": int(len(keys)), "dim": self.identity.dim,
                "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
        binp = self.dir / f"{name}.bin"
        try:
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=f".{name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(body)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.chmod(tmp, 0o644)
                if self.hook:
                    self.hook("embed_store.segment.data")
                os.replace(tmp, binp)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            self._write(self.dir / f"{name}.json", (json.dumps(seal) + "\n").encode(), "embed_store.segment.seal")
        except BaseException as exc:
            binp.unlink(missing_ok=True)
            if isinstance(exc, OSError) and not isinstance(exc, EmbedStoreFull) and exc.errno in _FULL:
                raise _full(exc, self.dir) from None
            raise
        return name

    def compact(self, *, blocking: bool = True, keep_largest: bool = False) -> bool:
        """Merge every sealed segment into one (under the namespace lock; ``blocking=False`` gives up when another
        process holds it; ``keep_largest`` leaves the largest segment as it is and merges the others, so a long
        run does not rewrite its whole store every few questions). Returns whether it merged. Leftovers of killed
        writers are removed too."""
        with self._lock(blocking) as got:
            if not got:
                return False
            self._orphans()
            self.refresh()
            names = sorted(self.segments)
            if keep_largest and names:
                names.remove(max(names, key=lambda n: len(self.segments[n].keys)))
            if len(names) <= 1:
                return False
            keys = np.concatenate([self.segments[n].keys for n in names])
            vecs = np.concatenate([np.asarray(self.segments[n].vecs) for n in names])
            order = np.argsort(keys, kind="stable")
            keys, vecs = keys[order], vecs[order]
            first = np.ones(len(keys), dtype=bool)
            first[1:] = keys[1:] != keys[:-1]
            merged = self._seal(keys[first], vecs[first])
            for n in names:
                (self.dir / f"{n}.json").unlink(missing_ok=True)
                (self.dir / f"{n}.bin").unlink(missing_ok=True)
            for n in names:
                self.segments.pop(n, None)
            self.refresh()
            return merged in self.segments

    def _orphans(self) -> None:
        now = time.time()
        for p in list(self.dir.glob("*.bin")) + list(self.dir.glob(".seg-*.tmp")):
            if p.suffix == ".bin" and (self.dir / f"{p.stem}.json").exists():
                continue
            with contextlib.suppress(OSError):
                if now - p.stat().st_mtime > ORPHAN_AGE_S:
                    p.unlink()
