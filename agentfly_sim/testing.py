"""Test-only, explicitly non-faithful helpers (spec §1.3): they run driver logic without torch.

- ``ScoreFunctionRetriever``: a PM retriever whose score is ``score_fn(query, text, index, meta)``.
- ``HashingEncoder``: an L2-normalised hashing bag-of-words encoder (``encode(texts) -> np.ndarray``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


class ScoreFunctionRetriever:
    """Fake ``CaseRetriever``: same result shape (spec §4.4), scores from a function. Counts its calls."""

    def __init__(self, score_fn: Callable[[str, str, int, dict[str, Any]], float]):
        self.score_fn = score_fn
        self.calls: list[tuple[str, int]] = []

    def retrieve(self, query: str, pool: Sequence[str], metadata: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        self.calls.append((query, len(pool)))
        return [{"prompt": text, "score": float(self.score_fn(query, text, i, meta)), "index": i,
                 "case_label": meta.get("case_label", "unknown"), "case": meta.get("case", ""),
                 "plan": meta.get("plan")}
                for i, (text, meta) in enumerate(zip(pool, metadata, strict=True))]


def rank_by_index(query: str, text: str, index: int, meta: dict[str, Any]) -> float:
    """A fake score that ranks the pool in file order (first case best)."""
    return 1.0 / (1 + index)


class HashingEncoder:
    """Hashing bag-of-words encoder, L2-normalised; not faithful to any upstream encoder."""

    def __init__(self, dim: int = 256):
        self.dim = dim
        self.texts_embedded = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for tok in re.findall(r"\w+", t.lower()):
                out[i, int(hashlib.md5(tok.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        self.texts_embedded += len(texts)
        return out / np.where(norms == 0, 1.0, norms)
