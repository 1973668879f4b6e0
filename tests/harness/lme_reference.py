"""A second, independent implementation of LongMemEval's official retrieval evaluation (test-only code).

Written from ``/work/shared/spec/longmemeval.md`` section 3 alone, without reading memsim's
``harness/workloads/lme_retrieval.py``, and shaped like the official scripts are described there: a loop over the
raw question objects (plain ``dict``s as ``json.load`` gives them, not memsim's models) that builds each question's
corpus with its ids, scores it, ranks it with ``np.argsort(scores)[::-1]``, and evaluates the ranking with an
``evaluate_retrieval``-style function (``rankings, correct_docs, corpus_ids, k``) and an
``evaluate_retrieval_turn2session``-style one; then the two averaging versions (``paper``: skip ``_abs``;
``strict``: also skip questions with no user turn whose ``has_answer`` is true). The differential test
(``test_lme_differential.py``) runs memsim and this module on the same files and compares every number.

What is realised, rule by rule (spec section 3):

- corpus of user turns only; ``session`` granularity joins a session's user turns with ``' '``, id = session id,
  ``replace('answer', 'noans')`` when the id contains ``answer`` and no user turn has ``has_answer`` true;
  ``turn`` granularity is one document per user turn, id ``session_id + '_' + str(i + 1)`` with ``i`` the turn's
  position in the whole session (assistant turns count), ``noans`` for a user turn of an ``answer`` session whose
  ``has_answer`` is false; every session occurrence enters (a duplicated id stays twice); an ``answer`` session
  whose user turn lacks a boolean ``has_answer`` raises (the official code fails there: KeyError / AssertionError);
- gold = corpus ids containing ``answer``; query = the question text;
- recall_any / recall_all / ndcg_any at k in 1, 3, 5, 10, 30, 50, DCG(r) = r[0] + sum r[i] / log2(i + 1) for the
  0-based i >= 1 (ranks 1 and 2 both weigh 1); no gold: recall_any 0, recall_all 1, ndcg 0;
- turn2session: strip the last ``_N`` of every id, grow an effective k until the top turns cover k distinct stripped
  ids (or the corpus ends), evaluate the unchanged turn ranking there, NDCG with one gain per evidence turn;
- BM25 = ``rank_bm25.BM25Okapi`` with library defaults over ``str.split(" ")`` tokens of documents and query;
  the dense scorer is the ``flat-contriever`` path (:class:`ContrieverScorer`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rank_bm25 import BM25Okapi

KS = (1, 3, 5, 10, 30, 50)
Scorer = Callable[[list[str], str], np.ndarray]
"""``scorer(corpus_texts, query) -> scores`` (one float per document, corpus order)."""


class ReferenceDataError(Exception):
    """Where the official code would fail (an evidence session's user turn without a boolean ``has_answer``)."""


# ---- corpus -------------------------------------------------------------------------------------------------

def build_corpus(entry: dict[str, Any], granularity: str) -> tuple[list[str], list[str]]:
    """The documents and their ids for one raw question object, official rules (see the module docstring)."""
    corpus: list[str] = []
    corpus_ids: list[str] = []
    for sess_id, sess in zip(entry["haystack_session_ids"], entry["haystack_sessions"], strict=False):
        if granularity == "session":
            corpus.append(" ".join(t["content"] for t in sess if t["role"] == "user"))
            if "answer" in sess_id:
                flags = []
                for t in sess:
                    if t["role"] == "user":
                        if not isinstance(t.get("has_answer"), bool):
                            raise ReferenceDataError(f"{entry['question_id']}: {sess_id}: user turn without has_answer")
                        flags.append(t["has_answer"])
                corpus_ids.append(sess_id if any(flags) else sess_id.replace("answer", "noans"))
            else:
                corpus_ids.append(sess_id)
        elif granularity == "turn":
            for i, t in enumerate(sess):
                if t["role"] != "user":
                    continue
                corpus.append(t["content"])
                tid = sess_id + "_" + str(i + 1)
                if "answer" in sess_id:
                    if not isinstance(t.get("has_answer"), bool):
                        raise ReferenceDataError(f"{entry['question_id']}: {sess_id}: user turn without has_answer")
                    if not t["has_answer"]:
                        tid = tid.replace("answer", "noans")
                corpus_ids.append(tid)
        else:
            raise ValueError(granularity)
    return corpus, corpus_ids


# ---- scorers and ranking ------------------------------------------------------------------------------------

def bm25_scores(corpus: list[str], query: str) -> np.ndarray:
    """``BM25Okapi`` (k1 1.5, b 0.75, epsilon 0.25) over ``str.split(" ")`` tokens, no other normalisation."""
    bm25 = BM25Okapi([doc.split(" ") for doc in corpus])
    return np.asarray(bm25.get_scores(query.split(" ")), dtype=float)


class ContrieverScorer:
    """The ``flat-contriever`` path with any local ``AutoModel`` weights: ``truncation=True`` at the tokenizer's
    default maximum (512 for all-MiniLM-L6-v2), padding per batch, mean pooling of the last hidden states over the
    attention mask, no normalisation, raw dot product of the query vector with every document vector; documents
    encoded in batches of 128 in corpus order, the query alone."""

    def __init__(self, model_path: str | Path, batch_size: int = 128):
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(model_path))
        self.model = AutoModel.from_pretrained(str(model_path)).eval()
        self.batch_size = batch_size

    def _embed(self, texts: list[str]) -> np.ndarray:
        import torch

        inputs = self.tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
        with torch.no_grad():
            hidden = self.model(**inputs).last_hidden_state
        mask = inputs["attention_mask"]
        hidden = hidden.masked_fill(~mask[..., None].bool(), 0.0)
        return (hidden.sum(dim=1) / mask.sum(dim=1)[..., None]).numpy()

    def __call__(self, corpus: list[str], query: str) -> np.ndarray:
        docs = np.concatenate([self._embed(corpus[i:i + self.batch_size])
                               for i in range(0, len(corpus), self.batch_size)])
        return (self._embed([query]) @ docs.T)[0]


def rank(scores: np.ndarray) -> list[int]:
    """The official ranking: ``np.argsort(scores)[::-1]`` (order among equal scores is numpy's)."""
    return [int(i) for i in np.argsort(scores)[::-1]]


# ---- metrics ------------------------------------------------------------------------------------------------

def dcg(relevances: Sequence[float], k: int) -> float:
    """DCG of the first ``k`` gains: r[0] + sum_{i>=1} r[i] / log2(i + 1) (0-based i; ranks 1 and 2 weigh 1)."""
    r = [float(x) for x in relevances[:k]]
    if not r:
        return 0.0
    return r[0] + sum(r[i] / math.log2(i + 1) for i in range(1, len(r)))


def ndcg(rankings: Sequence[int], correct_docs: Iterable[str], corpus_ids: Sequence[str], k: int) -> float:
    gold = set(correct_docs)
    relevances = [1 if cid in gold else 0 for cid in corpus_ids]
    ranked = [relevances[idx] for idx in rankings[:k]]
    ideal = dcg(sorted(relevances, reverse=True), k)
    if ideal == 0:
        return 0.0
    return dcg(ranked, k) / ideal


def evaluate_retrieval(rankings: Sequence[int], correct_docs: Sequence[str], corpus_ids: Sequence[str],
                       k: int) -> tuple[float, float, float]:
    """(recall_any@k, recall_all@k, ndcg_any@k); with no gold ``any`` is 0 and ``all`` is 1 (Python's)."""
    recalled = {corpus_ids[idx] for idx in rankings[:k]}
    recall_any = float(any(d in recalled for d in correct_docs))
    recall_all = float(all(d in recalled for d in correct_docs))
    return recall_any, recall_all, ndcg(rankings, correct_docs, corpus_ids, k)


def strip_turn_id(doc_id: str) -> str:
    """Drop the last ``_N`` part of a turn id."""
    return "_".join(doc_id.split("_")[:-1])


def evaluate_retrieval_turn2session(rankings: Sequence[int], correct_docs: Sequence[str],
                                    corpus_ids: Sequence[str], k: int) -> tuple[float, float, float]:
    """A turn ranking scored at session level: stripped ids, an effective k grown until the top turns cover k
    distinct session ids (or the corpus ends), the unchanged ranking evaluated at that effective k."""
    gold_sessions = sorted({strip_turn_id(d) for d in correct_docs})
    session_ids = [strip_turn_id(c) for c in corpus_ids]
    effective_k = k
    while effective_k <= len(corpus_ids) and len({session_ids[i] for i in rankings[:effective_k]}) < k:
        effective_k += 1
    recalled = {session_ids[idx] for idx in rankings[:effective_k]}
    recall_any = float(any(d in recalled for d in gold_sessions))
    recall_all = float(all(d in recalled for d in gold_sessions))
    return recall_any, recall_all, ndcg(rankings, gold_sessions, session_ids, effective_k)


def _metric_dict(values: dict[int, tuple[float, float, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, (ra, rl, nd) in values.items():
        out[f"recall_any@{k}"] = ra
        out[f"recall_all@{k}"] = rl
        out[f"ndcg_any@{k}"] = nd
    return out


# ---- the per-question loop and the two averagings -----------------------------------------------------------

def evaluate_entry(entry: dict[str, Any], granularity: str, scorer: Scorer = bm25_scores,
                   ks: Sequence[int] = KS) -> dict[str, dict[str, float]]:
    """One question's metrics: ``{"session": {...}}`` for a session run, ``{"turn": {...}, "session": {...}}``
    for a turn run (``session`` there is turn2session)."""
    corpus, corpus_ids = build_corpus(entry, granularity)
    rankings = rank(scorer(corpus, entry["question"]))
    correct_docs = sorted({cid for cid in corpus_ids if "answer" in cid})
    if granularity == "session":
        return {"session": _metric_dict({k: evaluate_retrieval(rankings, correct_docs, corpus_ids, k) for k in ks})}
    return {"turn": _metric_dict({k: evaluate_retrieval(rankings, correct_docs, corpus_ids, k) for k in ks}),
            "session": _metric_dict({k: evaluate_retrieval_turn2session(rankings, correct_docs, corpus_ids, k)
                                     for k in ks})}


def has_user_evidence(entry: dict[str, Any]) -> bool:
    return any(t["role"] == "user" and t.get("has_answer") is True
               for sess in entry["haystack_sessions"] for t in sess)


def kept(entry: dict[str, Any], averaging: str) -> bool:
    """``paper`` skips ``_abs`` questions; ``strict`` also skips those with no user ``has_answer`` true turn."""
    if "_abs" in entry["question_id"]:
        return False
    if averaging == "strict":
        return has_user_evidence(entry)
    if averaging == "paper":
        return True
    raise ValueError(averaging)


def average(logs: list[tuple[dict[str, Any], dict[str, dict[str, float]]]], averaging: str
            ) -> tuple[int, dict[str, dict[str, float]]]:
    """(questions kept, mean of every metric per scored-as level) over ``(entry, metrics)`` pairs."""
    chosen = [m for e, m in logs if kept(e, averaging)]
    means: dict[str, dict[str, float]] = {}
    if chosen:
        for level in chosen[0]:
            means[level] = {name: float(np.mean([m[level][name] for m in chosen])) for name in chosen[0][level]}
    return len(chosen), means


def run_file(path: Path, granularity: str, scorer: Scorer = bm25_scores
             ) -> list[tuple[dict[str, Any], dict[str, dict[str, float]]]]:
    """Every question of a (small) LongMemEval file, in file order, with its metrics."""
    entries = json.loads(Path(path).read_text(encoding="utf-8"))
    return [(e, evaluate_entry(e, granularity, scorer)) for e in entries]
