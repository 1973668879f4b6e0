"""``memsim data fetch``: download the public data sets memsim reads, with pinned URLs and sha256 checksums.

The registry (:data:`REGISTRY`) pins every file to one commit of its upstream repository and to the sha256 of its
bytes, as ``scipy.datasets`` does: LoCoMo's canonical ``locomo10.json`` (the ten conversations in one file), the
four AgentFly (Memento, MIT licence) files memsim reads, and four LongMemEval files (the cleaned release's oracle,
S and M files and the original release's S file, from their Hugging Face dataset repositories). A bare fetch
(``all``) takes LoCoMo, AgentFly and the LongMemEval oracle file (15 MB); LongMemEval S (265 MiB) and M (2.5 GiB)
are fetched only when named (``longmemeval-s``, ``longmemeval-m``, ``longmemeval-s-original``). Files go to the
data folder of :func:`harness.datapaths.data_home` (``$MEMSIM_DATA_DIR``, else the user cache folder) as
``<dataset>/<file name>``, where every command finds them without flags (:mod:`harness.datapaths`).

Guarantees, each tested against a loopback HTTP server:

- a file whose checksum differs from the pinned one is refused: nothing is stored under its name;
- an interrupted download leaves nothing half-written: pooch streams into a temporary file in the same folder,
  checks the hash, and only then moves the file into place; the temporary file is removed on any failure;
- a file already in the data folder with the pinned checksum (fetched before, or placed there by hand) is used as
  it is, without the network;
- an unreachable server is one line naming the URL, where to place the file by hand and its sha256
  (:class:`FetchError` with ``kind="unreachable"``); ``if_reachable=True`` turns that into a warning per file.

Fault-hook step (see :mod:`harness.faults`): ``data.fetch.download`` is called after a file's bytes are in the
temporary file and before the checksum check and the move into place (the one durable write).

The registry is injectable (``fetch(..., registry=...)``): tests serve their own files with their own hashes.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from harness.datapaths import data_home

LOCOMO_BASE = "https://raw.githubusercontent.com/snap-research/locomo/3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376/"
AGENTFLY_BASE = "https://raw.githubusercontent.com/Agent-on-the-Fly/Memento/42fbbcac63dd58ed6856c0761357345a58e4f032/"
LONGMEMEVAL_BASE = ("https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned/resolve/"
                    "98d7416c24c778c2fee6e6f3006e7a073259d48f/")
"""The cleaned LongMemEval release (2025-09), pinned to one revision of its Hugging Face dataset repository."""
LONGMEMEVAL_ORIGINAL_BASE = ("https://huggingface.co/datasets/xiaowu0162/longmemeval/resolve/"
                             "2ec2a557f339b6c0369619b1ed5793734cc87533/")
"""The original LongMemEval release (the paper's), pinned likewise; its files have no extension."""
DATASETS = ("locomo", "agentfly", "longmemeval")


@dataclass(frozen=True)
class DataFile:
    """One pinned file: the data set it belongs to, its name in the data folder, its URL and checksum.

    ``key`` is the file's own fetch name when it is fetched by name (``longmemeval-s``); such a data set's files
    are not selected by the data set's name. ``default``: a bare ``memsim data fetch`` (``all``) takes the file;
    the large LongMemEval files are not, so they are fetched only when named."""

    dataset: str
    name: str
    url: str
    sha256: str
    size: int | None = None
    key: str = ""
    default: bool = True

    def destination(self, home: Path | None = None) -> Path:
        return (home or data_home()) / self.dataset / self.name


REGISTRY: tuple[DataFile, ...] = (
    DataFile("locomo", "locomo10.json", LOCOMO_BASE + "data/locomo10.json",
             "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4", 2_805_274),
    DataFile("agentfly", "memory.jsonl", AGENTFLY_BASE + "memory/memory.jsonl",
             "03930eb6c35e4e05c28deea810ccc0c844aeda721794dba4c007581faeceef91", 406_404),
    DataFile("agentfly", "training_data.jsonl", AGENTFLY_BASE + "memory/training_data.jsonl",
             "cf7db294c28badc9737af724f170f42d2ad87d8d667c4a5c916802ca99253787", 2_954_156),
    DataFile("agentfly", "dummy_memo.jsonl", AGENTFLY_BASE + "memory/dummy_memo.jsonl",
             "8bda6cb101ef83c86e56fe75e2533c979a5e2cb8c245f113e749c32a36a59f99", 2_482),
    DataFile("agentfly", "deepresearcher.jsonl", AGENTFLY_BASE + "data/deepresearcher.jsonl",
             "5fc51dce7e3e8b62cd3043485626aa07f282c64b541035c707a261993f013cf6", 1_197_424),
    DataFile("longmemeval", "longmemeval_oracle.json", LONGMEMEVAL_BASE + "longmemeval_oracle.json",
             "821a2034d219ab45846873dd14c14f12cfe7776e73527a483f9dac095d38620c", 15_388_478,
             key="longmemeval-oracle"),
    DataFile("longmemeval", "longmemeval_s_cleaned.json", LONGMEMEVAL_BASE + "longmemeval_s_cleaned.json",
             "d6f21ea9d60a0d56f34a05b609c79c88a451d2ae03597821ea3d5a9678c3a442", 277_383_467,
             key="longmemeval-s", default=False),
    DataFile("longmemeval", "longmemeval_m_cleaned.json", LONGMEMEVAL_BASE + "longmemeval_m_cleaned.json",
             "9d79e5524794a2e6900a3aa9cb7d9152c5a3e8319c9a87c25494ba1eacee495f", 2_737_100_077,
             key="longmemeval-m", default=False),
    DataFile("longmemeval", "longmemeval_s_original.json", LONGMEMEVAL_ORIGINAL_BASE + "longmemeval_s",
             "08d8dad4be43ee2049a22ff5674eb86725d0ce5ff434cde2627e5e8e7e117894", 278_025_796,
             key="longmemeval-s-original", default=False),
)
"""Every file ``memsim data fetch`` knows. The original release's S file (upstream ``longmemeval_s``, no
extension) is stored as ``longmemeval_s_original.json`` so that its name says which release it is; the original
release's oracle file is byte-identical to the cleaned one and is not listed twice."""

FetchKind = Literal["unreachable", "http", "interrupted", "checksum", "storage"]


class FetchError(RuntimeError):
    """A file that could not be fetched, as one line (``kind`` says why; ``unreachable`` is the offline case)."""

    def __init__(self, kind: FetchKind, file: DataFile, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.file = file
        self.reason = reason


@dataclass
class FetchResult:
    """What ``fetch`` did for one file: ``fetched`` (downloaded now), ``present`` (already there with the pinned
    checksum) or ``unreachable`` (only with ``if_reachable``; ``message`` is the warning)."""

    file: DataFile
    status: Literal["fetched", "present", "unreachable"]
    path: Path
    message: str = ""


class ProgressLike:
    """What pooch drives while it streams a file: ``total`` is set, ``update(n)`` per chunk, then ``reset()``,
    ``update(total)`` and ``close()``."""

    total: int

    def update(self, n: int) -> None: ...  # pragma: no cover - protocol
    def reset(self) -> None: ...  # pragma: no cover - protocol
    def close(self) -> None: ...  # pragma: no cover - protocol


class RichBar:
    """A pooch progress bar drawn as one task of a ``rich.progress.Progress``; the task appears when the server
    starts sending (a file that is present or unreachable draws no bar)."""

    def __init__(self, progress: Any, description: str, total: int | None = None) -> None:
        self._progress = progress
        self._description = description
        self._task: Any = None
        self._total = total or 0

    @property
    def total(self) -> int:
        return self._total

    @total.setter
    def total(self, value: int) -> None:
        self._total = value or self._total
        if self._task is None:
            self._task = self._progress.add_task(self._description, total=self._total or None)
        else:
            self._progress.update(self._task, total=self._total or None)

    def update(self, n: int) -> None:
        if self._task is not None:
            self._progress.advance(self._task, n)

    def reset(self) -> None:
        if self._task is not None:
            self._progress.reset(self._task, total=self._total or None)

    def close(self) -> None:
        if self._task is not None:
            self._progress.update(self._task, completed=self._total)


_HASHES: dict[tuple[str, int, int, int, int], str] = {}
"""sha256 by (resolved path, device, inode, size, mtime in ns): a file is hashed once per process while unchanged
(LongMemEval M is 2.7 GB; a run that checks its release and then fetches or reports it must not read it twice)."""


def sha256_of(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    """The sha256 of ``path``'s bytes, streamed in 1 MiB blocks; cached in-process while the file is unchanged.
    ``on_bytes(n)`` is told each block's size (a progress bar for a big file)."""
    st = Path(path).stat()
    key = (str(Path(path).resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _HASHES:
        return _HASHES[key]
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
            if on_bytes is not None:
                on_bytes(len(block))
    _HASHES[key] = h.hexdigest()
    return _HASHES[key]


def fetch_names(registry: Sequence[DataFile] | None = None) -> list[str]:
    """Every name ``memsim data fetch`` accepts, in registry order: the data sets fetched as a whole, the files
    fetched by their own name, then ``all``."""
    registry = REGISTRY if registry is None else registry
    names = list(dict.fromkeys(f.dataset for f in registry if not f.key))
    return names + [f.key for f in registry if f.key] + ["all"]


def files_for(which: str, registry: Sequence[DataFile] | None = None) -> list[DataFile]:
    """The registry's files of ``which``, in registry order; ValueError naming the choices otherwise.

    ``all`` is every default file (LoCoMo, the AgentFly corpora and the LongMemEval oracle file: what the
    quickstart fetches); a data set name is its files when they are fetched as a whole (``locomo``,
    ``agentfly``); a file's own name is that file (``longmemeval-s``). The name of a data set fetched file by
    file (``longmemeval``) is refused with the file names: one name for several GB of downloads would be a trap.
    ``registry`` defaults to :data:`REGISTRY`."""
    registry = REGISTRY if registry is None else registry
    choices = fetch_names(registry)
    if which == "all":
        return [f for f in registry if f.default]
    keyed = [f for f in registry if f.key == which]
    if keyed:
        return keyed
    if any(f.dataset == which and not f.key for f in registry):
        return [f for f in registry if f.dataset == which]
    by_file = [f for f in registry if f.dataset == which and f.key]
    if by_file:
        sizes = ", ".join(f"{f.key}{f' ({_mib(f.size)})' if f.size else ''}" for f in by_file)
        raise ValueError(f"{which!r} is fetched file by file; choose {sizes} (a bare fetch takes the default ones)")
    raise ValueError(f"unknown data set {which!r}; choose {', '.join(choices[:-1])} or all")


def _mib(size: int) -> str:
    return f"{size / (1 << 30):.1f} GiB" if size >= 1 << 30 else f"{size / (1 << 20):.0f} MiB"


def _kept(existing: str | None) -> str:
    """What a failed fetch says about a file already under the name with another checksum (it is not touched)."""
    return f"; the file there now (sha256 {existing}) is kept as it is" if existing else ""


def _by_hand(f: DataFile, dest: Path) -> str:
    return f"to place it by hand, download it on a connected machine and save it as {dest} (sha256 {f.sha256})"


class _Downloader:
    """pooch's HTTP downloader plus what the errors need: bytes received, the received file's sha256, the hook."""

    def __init__(self, progress: ProgressLike | None, timeout: float,
                 fault_hook: Callable[[str], None] | None) -> None:
        from pooch import HTTPDownloader

        self._http = HTTPDownloader(progressbar=progress or False, timeout=timeout)
        self._hook = fault_hook
        self.received = 0
        self.got_sha256 = ""

    def __call__(self, url: str, output_file: str, pooch: Any) -> None:
        try:
            self._http(url, output_file, pooch)
        finally:
            self.received = Path(output_file).stat().st_size if Path(output_file).exists() else 0
        self.got_sha256 = sha256_of(Path(output_file))
        if self._hook is not None:
            self._hook("data.fetch.download")


def fetch_file(f: DataFile, *, home: Path | None = None, progress: ProgressLike | None = None,
               timeout: float = 30.0, fault_hook: Callable[[str], None] | None = None
               ) -> tuple[Path, bool]:
    """Make ``f`` present in the data folder with its pinned checksum: ``(path, downloaded_now)``.

    Raises :class:`FetchError` (one line) when the server cannot be reached, answers with an HTTP error, the
    transfer is cut, the bytes do not match the checksum, or the file cannot be stored."""
    import pooch
    import requests

    dest = f.destination(home)
    existing = sha256_of(dest) if dest.is_file() else None
    if existing == f.sha256:
        return dest, False
    kept = _kept(existing)
    new_dirs = [d for d in (dest.parent, *dest.parent.parents) if not d.exists()]  # removed again if left empty
    pooch.get_logger().setLevel(logging.WARNING)
    registry = pooch.create(path=dest.parent, base_url="", registry={f.name: f"sha256:{f.sha256}"},
                            urls={f.name: f.url}, retry_if_failed=0)
    dl = _Downloader(progress, timeout, fault_hook)
    try:
        registry.fetch(f.name, downloader=dl)
    except requests.exceptions.HTTPError as exc:
        code = exc.response.status_code if exc.response is not None else "an error"
        raise FetchError("http", f, f"{f.url}: the server answered HTTP {code}; {_by_hand(f, dest)}{kept}") from None
    except requests.exceptions.RequestException as exc:
        if dl.received:
            raise FetchError("interrupted", f, f"{f.url}: the download broke off after {dl.received} bytes "
                                               f"({_reason(exc)}); nothing was kept, run the fetch again or "
                                               f"{_by_hand(f, dest)}{kept}") from None
        why = _reason(exc)
        raise FetchError("unreachable", f, f"cannot reach {f.url} ({why}); {_by_hand(f, dest)}{kept}", why) from None
    except ValueError as exc:
        if "hash" not in str(exc).lower():
            raise
        raise FetchError("checksum", f, f"{f.url}: refused, the downloaded bytes have sha256 {dl.got_sha256}, not "
                                        f"the pinned {f.sha256}; nothing was stored{kept}") from None
    except OSError as exc:
        raise FetchError("storage", f, f"{exc.filename or dest}: cannot store the download "
                                       f"({exc.strerror or exc})") from None
    finally:
        for d in new_dirs:
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
    return dest, True


def _reason(exc: BaseException) -> str:
    """A short cause for a requests error: the innermost reason without the URL repeated."""
    inner: BaseException = exc
    while True:
        nxt = getattr(inner, "reason", None) or (inner.args[0] if inner.args and
                                                  isinstance(inner.args[0], BaseException) else None)
        if not isinstance(nxt, BaseException) or nxt is inner:
            break
        inner = nxt
    text = " ".join(str(inner).split())
    if "refused" in text.lower():
        return "connection refused"
    if "timed out" in text.lower():
        return "timed out"
    if "resolve" in text.lower() or "name or service" in text.lower():
        return "host name not resolved"
    if "incompleteread" in text.lower() or "connection broken" in text.lower():
        return "connection closed mid-transfer"
    return text[:120] or type(inner).__name__


def fetch(which: str = "all", *, registry: Sequence[DataFile] | None = None, home: Path | None = None,
          if_reachable: bool = False, timeout: float = 30.0,
          progress: Callable[[DataFile], ProgressLike | None] | None = None,
          fault_hook: Callable[[str], None] | None = None,
          on_result: Callable[[FetchResult], None] | None = None) -> list[FetchResult]:
    """Fetch the files of ``which`` (see :func:`files_for`) into the data folder, in registry order.

    ``if_reachable``: a file whose server cannot be reached becomes an ``unreachable`` result with a one-line
    warning (and the other files of that host are not tried again) instead of an error; every other failure
    (checksum, HTTP error, interrupted transfer) still raises :class:`FetchError`.
    ``progress(file)`` returns the pooch progress bar for one file (or ``None``); ``on_result`` sees each result as
    soon as it is known (a command prints the files it got before a later file fails)."""
    results: list[FetchResult] = []
    dead_hosts: dict[str, str] = {}
    for f in files_for(which, registry):
        dest = f.destination(home)
        host = urlsplit(f.url).netloc
        existing = sha256_of(dest) if dest.is_file() else None
        if if_reachable and host in dead_hosts and existing != f.sha256:
            _add(results, FetchResult(f, "unreachable", dest, f"cannot reach {f.url} ({dead_hosts[host]}); "
                                                              f"{_by_hand(f, dest)}{_kept(existing)}"), on_result)
            continue
        try:
            path, downloaded = fetch_file(f, home=home, progress=progress(f) if progress else None,
                                          timeout=timeout, fault_hook=fault_hook)
        except FetchError as exc:
            if not (if_reachable and exc.kind == "unreachable"):
                raise
            dead_hosts[host] = exc.reason
            _add(results, FetchResult(f, "unreachable", dest, str(exc)), on_result)
            continue
        _add(results, FetchResult(f, "fetched" if downloaded else "present", path), on_result)
    return results


def _add(results: list[FetchResult], r: FetchResult, on_result: Callable[[FetchResult], None] | None) -> None:
    results.append(r)
    if on_result is not None:
        on_result(r)
