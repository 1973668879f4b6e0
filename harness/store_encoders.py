"""Encoders over the embedding store (``harness.embed_store``): each distinct text encoded once, kept across runs.

A :class:`StoreEncoder` satisfies the ``Encoder`` protocol (``encode(texts) -> float32 (n, dim)``). For each text it
returns the stored vector when the store has one, and otherwise encodes the text **alone** (a batch of one, no
padding) with the named encoder on the store's device and keeps the vector. So a vector is a function of the text,
the encoder's weights and the device kind only: which arm, question, worker or run met the text first cannot
change it, and on the CPU it equals, bit for bit, what the encoder returns for that text on its own (tested). What
it does not equal bit for bit is a *batched* call of the earlier path: padding a text beside longer ones moves its
vector by float noise (measured and stated by the tests: below 1e-5 per component).

The encoders, by store name (each a namespace of the store):

- ``minilm-mean``: sentence-transformers mean pooling over all-MiniLM-L6-v2, L2-normalised (``harness.embedding``'s
  ``minilm-mean``). Serves the mean and hybrid baselines, AgentFly NP's mean-pooling variant and Tortoise (its
  ``MiniLMEncoder`` is the same model and pooling; Tortoise cuts a text to 512 words before asking, so the store's
  key is the cut text, exactly what the model sees).
- ``minilm-pooler``: transformers ``AutoModel`` ``pooler_output``, L2-normalised, max_length 256: AgentFly NP's
  faithful selector (``agentfly_sim.embedding.embed_one`` computes the same vector for one text).
- ``pm-cls``: the CLS vector of AgentFly PM's classifier backbone (``MemoryRetrieverClassifier.encode``), keyed by
  the sha256 of that backbone's weights as loaded from the checkpoint (training freezes the backbone, so every
  run's checkpoint has the same backbone and shares the namespace).

The device (:func:`choose_device`): CUDA when torch sees a GPU, else the CPU; the store's namespaces are keyed by
it, so CPU and GPU vectors never mix. :class:`StoreSession` is one process's view of the store for one run;
:func:`active` returns it while :func:`store_encoders` is open (``harness.embedding.get_encoder`` then returns the
store's ``minilm-mean`` and ``minilm-pooler`` encoders, and the design arms ask :func:`active` for theirs).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.embed_store import Identity, Namespace, memsim_version, store_root

STORE_NAMES = ("minilm-mean", "minilm-pooler")
"""The encoders installed in ``harness.embedding.get_encoder`` while a session is active (``pm-cls`` is per
checkpoint: :meth:`StoreSession.pm_encoder`)."""

_WEIGHTS: dict[tuple[str, int, int], str] = {}
_BASES: dict[tuple[str, str], Any] = {}


def base_encoder(name: str, device: str) -> Any:
    """The model behind the store's ``name`` encoder on ``device``: ``harness.embedding``'s ``MeanPoolingEncoder``
    or ``PoolerEncoder``, loaded once per process and device and shared by every store session of the process (a
    LoCoMo worker opens one session per conversation; each used to load its own copies)."""
    key = (name, device)
    if key not in _BASES:
        from harness import embedding

        cls = embedding.MeanPoolingEncoder if name == "minilm-mean" else embedding.PoolerEncoder
        _BASES[key] = cls(device=device)
    return _BASES[key]


def choose_device(cuda_available: bool | None = None) -> str:
    """``cuda`` when a GPU is available (``torch.cuda.is_available()`` unless given), else ``cpu``."""
    if cuda_available is None:
        try:
            import torch

            cuda_available = bool(torch.cuda.is_available())
        except ImportError:  # pragma: no cover
            cuda_available = False
    return "cuda" if cuda_available else "cpu"


def weights_sha256(folder: Path) -> str:
    """sha256 over every file of a model folder (relative names and bytes, in name order); cached per process by
    the folder's newest modification time and total size."""
    files = sorted(p for p in Path(folder).rglob("*") if p.is_file())
    stats = [p.stat() for p in files]
    key = (str(folder), max((s.st_mtime_ns for s in stats), default=0), sum(s.st_size for s in stats))
    if key not in _WEIGHTS:
        h = hashlib.sha256()
        for p in files:
            h.update(str(p.relative_to(folder)).encode() + b"\0")
            with open(p, "rb") as fh:
                for chunk in iter(lambda fh=fh: fh.read(1 << 22), b""):
                    h.update(chunk)
        _WEIGHTS[key] = h.hexdigest()
    return _WEIGHTS[key]


def _hidden_size(folder: Path) -> int:
    return int(json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))["hidden_size"])


class StoreEncoder:
    """The ``Encoder`` protocol over one store namespace: stored vectors are read, new texts encoded alone by
    ``encode_one(text) -> vector`` and kept. ``opener()`` opens the namespace on first use (so building one costs
    nothing); ``base`` (optional) is the encoder that ``encode_one`` uses, for a caller that must time real
    encoding (:meth:`uncached`). Counts: ``hits`` (texts read), ``misses`` (texts encoded), ``encode_s``."""

    def __init__(self, name: str, dim: int, opener: Callable[[], Namespace], encode_one: Callable[[str], Any],
                 base: Callable[[], Any] | None = None) -> None:
        self.name, self.dim = name, dim
        self._opener, self._encode_one, self._base = opener, encode_one, base
        self._ns: Namespace | None = None
        self.hits = self.misses = 0
        self.encode_s = 0.0

    @property
    def namespace(self) -> Namespace:
        if self._ns is None:
            self._ns = self._opener()
        return self._ns

    def uncached(self) -> Any:
        """The encoder behind the store (for timing what an encoder call costs); the store itself without one."""
        return self._base() if self._base is not None else self

    def encode_alone(self, text: str) -> np.ndarray:
        """What a miss runs for ``text`` (the encoder alone, on the store's device and thread setting), without
        reading or writing the store: for timing the encode pass against its floor."""
        return np.asarray(self._encode_one(text), dtype=np.float32).reshape(-1)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        items = [str(t) for t in texts]
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        ns = self.namespace
        got = ns.lookup(items)
        for t in dict.fromkeys(t for t, v in zip(items, got, strict=True) if v is None):
            started = time.perf_counter()
            vec = np.asarray(self._encode_one(t), dtype=np.float32).reshape(-1)
            self.encode_s += time.perf_counter() - started
            ns.put(t, vec)
            self.misses += 1
        if any(v is None for v in got):
            got = ns.lookup(items)
        self.hits += len(items) - sum(1 for v in got if v is None)
        return np.stack([np.asarray(v, dtype=np.float32) for v in got]).astype(np.float32, copy=True)

    def stats(self) -> dict[str, Any]:
        return {"hits": self.hits, "misses": self.misses, "encode_s": round(self.encode_s, 3),
                "stored": len(self._ns) if self._ns is not None else None}


class StoreSession:
    """One process's store for one run: its root, device kind and encoders (opened lazily).

    ``fault_hook`` goes to every namespace (``harness.embed_store`` steps); ``warn`` receives their warning lines.
    ``base_factory(name, device)`` builds the encoder behind ``minilm-mean`` / ``minilm-pooler`` (default:
    ``harness.embedding``'s, on ``device``), for tests that stand in for a device they lack."""

    def __init__(self, root: Path | None = None, *, device: str | None = None,
                 fault_hook: Callable[[str], None] | None = None, warn: Callable[[str], None] | None = None,
                 base_factory: Callable[[str, str], Any] | None = None) -> None:
        self.root = Path(root) if root is not None else store_root()
        self.device = device or choose_device()
        self.hook, self.warn = fault_hook, warn
        self._factory = base_factory
        self._bases: dict[str, Any] = {}
        self.encoders: dict[str, StoreEncoder] = {}
        self._pm: dict[tuple[str, int, int], StoreEncoder] = {}

    def config(self) -> dict[str, Any]:
        """What a worker process needs to open the same store (``StoreSession(**config)``)."""
        return {"root": str(self.root), "device": self.device}

    def _namespace(self, encoder: str, weights: str, device: str, dim: int) -> Namespace:
        ident = Identity(encoder=encoder, weights=weights, device=device, dim=dim, memsim=memsim_version())
        return Namespace(self.root, ident, warn=self.warn, fault_hook=self.hook)

    def _base(self, name: str) -> Any:
        if name not in self._bases:
            self._bases[name] = (self._factory(name, self.device) if self._factory is not None
                                 else base_encoder(name, self.device))
        return self._bases[name]

    def _fixed_threads(self, fn: Callable[[str], Any], device: str | None = None) -> Callable[[str], Any]:
        """On the CPU, ``fn`` runs on one torch thread: a long text's vector can differ in its last bits between
        thread counts, and the store's vectors must not depend on how a run was configured."""
        if (device or self.device) != "cpu":
            return fn

        def one_thread(text: str) -> Any:
            import torch

            n = torch.get_num_threads()
            if n == 1:
                return fn(text)
            torch.set_num_threads(1)
            try:
                return fn(text)
            finally:
                torch.set_num_threads(n)

        return one_thread

    def encoder(self, name: str) -> StoreEncoder:
        """The store's ``minilm-mean`` or ``minilm-pooler`` encoder (one per session)."""
        if name not in STORE_NAMES:
            raise ValueError(f"unknown store encoder {name!r}; choose one of {', '.join(STORE_NAMES)}")
        if name not in self.encoders:
            from harness.embedding import minilm_model_path

            folder = minilm_model_path()
            dim = _hidden_size(folder)
            self.encoders[name] = StoreEncoder(
                name, dim, lambda: self._namespace(name, weights_sha256(folder), self.device, dim),
                self._fixed_threads(lambda text: self._base(name).encode([text])[0]), lambda: self._base(name))
        return self.encoders[name]

    def pm_encoder(self, retriever: Any) -> StoreEncoder:
        """The store's ``pm-cls`` encoder for an AgentFly ``CaseRetriever``: the backbone's CLS vector of one text,
        on the retriever's device, keyed by the sha256 of the backbone weights it loaded (computed once per
        checkpoint file and process)."""
        import torch

        path = Path(retriever.model_path)
        st = path.stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
        held = weakref.ref(retriever)  # the session outlives the arm: it must not keep the classifier resident
        if key not in self._pm:
            h = hashlib.sha256()
            for k, v in sorted(retriever.model.sentence_bert.state_dict().items()):
                h.update(k.encode() + b"\0" + v.detach().cpu().contiguous().numpy().tobytes())
            weights = h.hexdigest()
            dim = int(retriever.model.sentence_bert.config.hidden_size)
            device = torch.device(retriever.device).type
            self._pm[key] = StoreEncoder("pm-cls", dim, lambda: self._namespace("pm-cls", weights, device, dim),
                                         lambda text: _pm_one(held, text))
        enc = self._pm[key]
        enc._encode_one = self._fixed_threads(lambda text: _pm_one(held, text),  # this retriever's model
                                              torch.device(retriever.device).type)
        return enc

    def all(self) -> list[StoreEncoder]:
        return list(self.encoders.values()) + list(self._pm.values())

    def flush(self) -> int:
        """Seal what this process encoded since the last flush (one segment per namespace)."""
        return sum(e.namespace.flush() for e in self.all() if e._ns is not None)

    def refresh(self) -> None:
        """Map the segments other processes sealed meanwhile."""
        for e in self.all():
            if e._ns is not None:
                e._ns.refresh()

    def compact(self) -> int:
        """Merge each namespace of this session's device kind and memsim version under the root into one segment
        (the end of a run: its workers left side segments). Returns how many namespaces it merged."""
        merged = 0
        for meta in sorted(self.root.glob("*/store.json")):
            try:
                ident = Identity(**json.loads(meta.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError):
                continue  # not a namespace this memsim wrote: the next run that needs it rebuilds it
            if ident.device == self.device and ident.memsim == memsim_version() and ident.folder() == meta.parent.name:
                merged += Namespace(self.root, ident, warn=self.warn, fault_hook=self.hook).compact()
        return merged

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for e in self.all():
            acc = out.setdefault(e.name, {"hits": 0, "misses": 0, "encode_s": 0.0})
            st = e.stats()
            for k in ("hits", "misses", "encode_s"):
                acc[k] += st[k]
        return out


def _pm_one(held: Callable[[], Any], text: str) -> Any:
    import torch

    retriever = held()
    if retriever is None:
        raise RuntimeError("the PM classifier behind this pm-cls encoder is gone: ask pm_encoder() again")
    with torch.inference_mode():
        ids, mask = retriever._tok([text])
        return retriever.model.encode(ids, mask)[0].float().cpu().numpy()


_ACTIVE: list[StoreSession] = []


def active() -> StoreSession | None:
    """The store session of the run in progress in this process, if any."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def store_encoders(session: StoreSession, *, flush: bool = True) -> Iterator[StoreSession]:
    """For the length of the body, ``harness.embedding.get_encoder(name)`` returns ``session``'s store encoder for
    ``minilm-mean`` and ``minilm-pooler`` and :func:`active` returns ``session``; afterwards the encoders that were
    there before are back (and, with ``flush``, what the session encoded is sealed)."""
    from harness import embedding

    with embedding._LOCK:
        saved = {n: embedding._CACHE.get(n) for n in STORE_NAMES}
        for n in STORE_NAMES:
            embedding._CACHE[n] = session.encoder(n)
    _ACTIVE.append(session)
    try:
        yield session
    except BaseException:
        if flush:  # keep what was encoded before the failure (a later run reads it), never mask the failure
            with contextlib.suppress(Exception):
                session.flush()
        raise
    else:
        if flush:
            session.flush()
    finally:
        _ACTIVE.remove(session)
        with embedding._LOCK:
            for n, enc in saved.items():
                if enc is None:
                    embedding._CACHE.pop(n, None)
                else:
                    embedding._CACHE[n] = enc
