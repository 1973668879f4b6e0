"""Parametric classifier selector of the PM driver (``memory/parametric_memory.py``, spec §4).

``MemoryRetrieverClassifier``: a shared backbone encodes the ICL text (case + plan, ``ids1``) and the query
(``ids2``); their CLS vectors (not the pooler) are concatenated and fed to ``Linear(2H,512) -> ReLU ->
Dropout(0.2) -> Linear(512,2)``; the score is ``softmax(logits)[:, 1]`` (AGF-15).

``CaseRetriever`` scores the **whole pool as one batch** (faithful default, AGF-15) with the ICL texts and the
repeated query tokenised in two separate calls, no ``max_length`` (so ``model_max_length`` = 512 applies). Options,
named and off by default:

- ``score_chunk_size``: score in chunks (scores agree within 1e-5);
- ``cache_case_vectors=True``: because the two sides are encoded separately, the case CLS vectors are computed once
  per checkpoint and cached by ICL text; each query then encodes only itself and runs the head. Scores equal the
  faithful path within 1e-5 (``CachedCaseScorer`` is the same mechanism as a standalone API). In that mode an
  injected ``vector_encoder(texts) -> (n, H) tensor`` gives the CLS vectors of cases and query instead of the
  retriever's own batches (a caller that keeps vectors elsewhere, as the harness's embedding store, hands them in).

Weights load once per process; the pool text is reloaded after every case append by the driver (AGF-03).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn as nn

from .bank import load_pool
from .embedding import minilm_path
from .plans import build_icl_text, parse_plan, pretty_plan

UPSTREAM_PM_BACKBONE = "princeton-nlp/sup-simcse-roberta-base"
HEAD_HIDDEN = 512

__all__ = [
    "UPSTREAM_PM_BACKBONE", "MemoryRetrieverClassifier", "CaseRetriever", "CachedCaseScorer", "load_backbone",
    "load_pool", "build_icl_text", "parse_plan", "pretty_plan", "make_untrained_checkpoint", "format_ranked",
    "select_topk_cli", "topk_select",
]

_BACKBONES: dict[str, tuple[Any, Any]] = {}


def load_backbone(model_name: str | None = None) -> tuple[Any, Any]:
    """``(tokenizer, fresh AutoModel copy)``; the default is the local MiniLM directory. Loaded from disk once per
    process per name and deep-copied, so every classifier owns its weights."""
    from transformers import AutoModel, AutoTokenizer

    name = model_name or minilm_path()
    if name not in _BACKBONES:
        tok = AutoTokenizer.from_pretrained(name)
        model = AutoModel.from_pretrained(name)
        _BACKBONES[name] = (tok, model)
    tok, base = _BACKBONES[name]
    return tok, copy.deepcopy(base)


class MemoryRetrieverClassifier(nn.Module):
    """Backbone ``sentence_bert`` + head ``classifier`` (state-dict keys ``sentence_bert.*``, ``classifier.0.*``,
    ``classifier.3.*``), spec §4.1."""

    def __init__(self, backbone_module: nn.Module):
        super().__init__()
        self.sentence_bert = backbone_module
        h = backbone_module.config.hidden_size
        self.classifier = nn.Sequential(nn.Linear(2 * h, HEAD_HIDDEN), nn.ReLU(), nn.Dropout(0.2),
                                        nn.Linear(HEAD_HIDDEN, 2))

    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """CLS of the last hidden state; no token type ids are passed."""
        return self.sentence_bert(ids, attention_mask=mask).last_hidden_state[:, 0]

    def head(self, o1: torch.Tensor, o2: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.cat([o1, o2], 1))

    def forward(self, ids1: torch.Tensor, mask1: torch.Tensor, ids2: torch.Tensor, mask2: torch.Tensor
                ) -> torch.Tensor:
        return self.head(self.encode(ids1, mask1), self.encode(ids2, mask2))


def _default_device(device: str | None) -> str:
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def make_untrained_checkpoint(path: str | os.PathLike[str], seed: int = 0, model_name: str | None = None) -> str:
    """Save a seeded (untrained head, pretrained backbone) classifier state dict; about 92 MB for MiniLM."""
    _, backbone = load_backbone(model_name)
    torch.manual_seed(seed)
    model = MemoryRetrieverClassifier(backbone)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    torch.save(model.state_dict(), path)
    return str(path)


class CaseRetriever:
    """Upstream ``CaseRetriever(model_path, model_name, device)``: strict ``load_state_dict`` then ``eval()``."""

    def __init__(self, model_path: str | os.PathLike[str], model_name: str | None = None, device: str | None = None,
                 *, score_chunk_size: int | None = None, cache_case_vectors: bool = False,
                 vector_encoder: Callable[[list[str]], torch.Tensor] | None = None):
        self.device = _default_device(device)
        self.model_path = str(model_path)
        self.tokenizer, backbone = load_backbone(model_name)
        self.model = MemoryRetrieverClassifier(backbone)
        state = torch.load(model_path, map_location=self.device)
        self.model.load_state_dict(state)
        self.model.to(self.device)
        self.model.eval()
        self.score_chunk_size = score_chunk_size
        self.cache_case_vectors = cache_case_vectors
        self.vector_encoder = vector_encoder
        self._case_vecs: dict[str, torch.Tensor] = {}
        self.cases_encoded = 0

    # ----------------------------------------------------------------------------------------- scoring
    def _tok(self, texts: Sequence[str]) -> Any:
        enc = self.tokenizer(list(texts), padding=True, truncation=True, return_tensors="pt")
        return enc["input_ids"].to(self.device), enc["attention_mask"].to(self.device)

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """``softmax(logits, 1)[:, 1]`` for every text against ``query``."""
        if self.cache_case_vectors:
            return self._score_cached(query, texts)
        step = self.score_chunk_size or max(1, len(texts))
        scores: list[float] = []
        with torch.inference_mode():
            for s in range(0, len(texts), step):
                chunk = list(texts[s:s + step])
                ids1, m1 = self._tok(chunk)
                ids2, m2 = self._tok([query] * len(chunk))
                probs = torch.softmax(self.model(ids1, m1, ids2, m2), dim=1)[:, 1]
                scores.extend(float(p) for p in probs.cpu())
        self.cases_encoded += len(texts)
        return scores

    def case_vectors(self, texts: Sequence[str], batch_size: int = 64) -> torch.Tensor:
        """CLS vectors of ICL texts, cached by exact text for this checkpoint (``cache_case_vectors`` mode)."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._case_vecs))
        if self.vector_encoder is not None and missing:
            for t, v in zip(missing, self.vector_encoder(missing), strict=True):
                self._case_vecs[t] = v.to(self.device)
            self.cases_encoded += len(missing)
            missing = []
        with torch.inference_mode():
            for s in range(0, len(missing), batch_size):
                chunk = missing[s:s + batch_size]
                ids, m = self._tok(chunk)
                vecs = self.model.encode(ids, m)
                for t, v in zip(chunk, vecs, strict=True):
                    self._case_vecs[t] = v.clone()
        self.cases_encoded += len(missing)
        return torch.stack([self._case_vecs[t] for t in texts])

    def _score_cached(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        cases = self.case_vectors(texts)
        with torch.inference_mode():
            if self.vector_encoder is not None:
                q = self.vector_encoder([query])[0:1].to(self.device)
            else:
                ids, m = self._tok([query])
                q = self.model.encode(ids, m)
            probs = torch.softmax(self.model.head(cases, q.expand(cases.shape[0], -1)), dim=1)[:, 1]
        return [float(p) for p in probs.cpu()]

    def retrieve(self, query: str, pool: Sequence[str], metadata: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Pool-order results ``{"prompt", "score", "index", "case_label", "case", "plan"}`` (spec §4.4)."""
        scores = self.score(query, pool)
        return [{"prompt": text, "score": float(s), "index": i,
                 "case_label": meta.get("case_label", "unknown"), "case": meta.get("case", ""),
                 "plan": meta.get("plan")}
                for i, (text, s, meta) in enumerate(zip(pool, scores, metadata, strict=True))]


class CachedCaseScorer:
    """Public cached case-vector scoring API: ``CachedCaseScorer(retriever).retrieve(query, pool, metadata)``.

    Shares the checkpoint of ``retriever`` and computes each case's CLS vector once (spec §4.4 simulator option);
    results equal ``retriever.retrieve`` within 1e-5 (batch-padding float noise only)."""

    def __init__(self, retriever: CaseRetriever):
        self.retriever = retriever
        self._cached = copy.copy(retriever)
        self._cached.cache_case_vectors = True
        self._cached._case_vecs = {}
        self._cached.cases_encoded = 0

    @property
    def cases_encoded(self) -> int:
        return self._cached.cases_encoded

    def warm(self, pool: Sequence[str]) -> None:
        self._cached.case_vectors(pool)

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return self._cached.score(query, texts)

    def retrieve(self, query: str, pool: Sequence[str], metadata: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._cached.retrieve(query, pool, metadata)


def select_topk_cli(ranked: list[dict[str, Any]], topk: int) -> list[dict[str, Any]]:
    """The CLI rule: ``ranked[:topk] if 0 < topk < len(ranked) else ranked`` (AGF-17)."""
    return ranked[:topk] if 0 < topk < len(ranked) else ranked


def format_ranked(results: list[dict[str, Any]], topk: int) -> str:
    """The scoring CLI output (spec §4.5): sort descending, apply the top-k rule, print each block."""
    ranked = sorted(results, key=lambda r: r["score"], reverse=True)
    lines = []
    for i, r in enumerate(select_topk_cli(ranked, topk), 1):
        lines.append(f"[{i}] score={r['score']:.4f} idx={r['index']} label={r['case_label']}")
        lines.append(f"{r['prompt']}\n" + "-" * 60)
    return "\n".join(lines)


def topk_select(model: MemoryRetrieverClassifier, tokenizer: Any, device: str, natural_prompt: str,
                icl_pool: Sequence[str], k: int = 5, max_len: int = 256) -> list[tuple[str, float, int]]:
    """Trainer utility (never called upstream): batches of 64, ``max_length=256``, top-k ``(text, prob, index)``."""
    model.eval()
    out: list[tuple[str, float, int]] = []
    with torch.inference_mode():
        for s in range(0, len(icl_pool), 64):
            chunk = list(icl_pool[s:s + 64])
            e1 = tokenizer(chunk, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
            e2 = tokenizer([natural_prompt] * len(chunk), padding=True, truncation=True, max_length=max_len,
                           return_tensors="pt")
            probs = torch.softmax(model(e1["input_ids"].to(device), e1["attention_mask"].to(device),
                                        e2["input_ids"].to(device), e2["attention_mask"].to(device)), 1)[:, 1]
            out.extend((t, float(p), s + j) for j, (t, p) in enumerate(zip(chunk, probs.cpu(), strict=True)))
    out.sort(key=lambda x: x[1], reverse=True)
    return out[:k]
