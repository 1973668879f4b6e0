"""The LoCoMo paper's retrieval protocol (Maharana et al., ACL 2024, Table 3), as LoCoMo's own code computes it.

Three retrieval *units* per conversation, built in the order LoCoMo's code indexes them:

- ``dialog``: one unit per turn, sessions by number, turns in order; text ``<speaker> said, "<text>"`` plus
  `` and shared <caption>`` when the turn shares a photo; id = the turn's ``dia_id``.
- ``observation``: one unit per recorded LM fact, in the file's order (sessions, then speakers, then facts); text =
  the fact; ids = its tag split on ``,`` with spaces stripped (a list tag taken as is), i.e. ``Observation.ids``.
- ``summary``: one unit per recorded session summary, by session number; text = the summary; id ``S<n>``.

The query is the question text. Retrievers (``get_retriever``):

- ``bm25``: bm25s with its default tokenizer, English stopwords, no stemmer; the top k are the documents
  ``bm25s.BM25.retrieve(..., k=k)`` returns, in its order (its order among ties decides which zero-score units
  fill a large k, so every k is its own ``retrieve`` call).
- ``minilm``: all-MiniLM-L6-v2 through sentence-transformers' default ``encode`` (mean pooling, 256 word pieces),
  ``normalize_embeddings=True``, cosine; descending score, ties by unit order (a stable sort; upstream's
  ``argsort()[::-1]`` would put the later of two exactly tied units first, which only identical texts produce).
  Each question is encoded on its own, as the paper's loop does.
- ``hybrid``: reciprocal-rank fusion of the full bm25 and minilm rankings, ``1 / (60 + rank)`` summed, descending,
  ties by unit order.
- ``two-tower:QUERY_MODEL,CONTEXT_MODEL``: two transformers ``AutoModel`` encoders (local folders or hub names
  available offline), the query model's tokenizer for both sides (DRAGON+ shares one), the CLS vector of
  ``last_hidden_state``, dot product without normalisation: how the paper ran DRAGON+.

Retrieved ids = the ids of the top-k units, flattened in rank order. Recall (``question_recall``) of a question
with non-empty evidence is the share of its evidence strings, *exactly as the file gives them*, found among the
retrieved ids. Upstream quirk, kept: an evidence string such as ``"D8:6; D9:17"`` or ``"D9:1 D4:4 D4:6"`` is never
split, so it never matches a dialog or observation id (``quirk_counts`` counts such questions). For summary units an
evidence string counts when ``string.split(":")[0][1:]`` (its session number; ``"8"`` for ``"D8:6; D9:17"``) is the
number of a retrieved ``S<n>``. Per category (``category_recall``): the sum over the category's questions with
non-empty evidence divided by *all* questions of the category (a question without evidence counts as zero);
overall: the same over the five categories together.

``tokens_cl100k`` counts the context as the paper's reader got it (``reader_context``): each retrieved unit as
``<session date-time>: <unit text>``, joined by ``"\\n"`` (dialog, observation) or ``"\\n\\n"`` (summary), with
tiktoken ``cl100k_base`` loaded from the copy bundled with litellm (``fractal_sim.context_meter``'s counter).

A conversation without recorded observations or summaries raises ``UnitsUnavailable`` for that unit with the
loader's reason (``Conversation.recorded_unavailable``); callers report those rows unavailable, never skip them.
The published Table 3 numbers are in ``locomo_paper_published.json`` next to this module (``published_rows``).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from harness.workloads.locomo import Conversation, Probe

UNITS = ("dialog", "observation", "summary")
K_GRID: dict[str, tuple[int, ...]] = {"dialog": (5, 10, 25, 50), "observation": (5, 10, 25, 50),
                                      "summary": (2, 5, 10)}
CATEGORIES = (1, 2, 3, 4, 5)
RETRIEVERS = ("bm25", "minilm", "hybrid")
TWO_TOWER = "two-tower"
RRF_C = 60
PUBLISHED_FILE = "locomo_paper_published.json"
_JOIN = {"dialog": "\n", "observation": "\n", "summary": "\n\n"}


class UnitsUnavailable(LookupError):
    """A unit kind that cannot be built for a conversation (its recorded LM outputs are missing); the message is
    the reason."""


@dataclass(frozen=True)
class Unit:
    """One retrievable unit: its text, the ids recall matches against, and its session's date-time text."""

    text: str
    ids: tuple[str, ...]
    date_time: str


# ------------------------------------------------------------------------------------------------ units
def dialog_units(conv: Conversation) -> list[Unit]:
    """One unit per turn, sessions by number then turn order (``<speaker> said, "<text>"`` [`` and shared ...``])."""
    out: list[Unit] = []
    for s in sorted(conv.sessions, key=lambda s: s.index):
        for t in s.turns:
            text = f'{t.speaker} said, "{t.text}"' + (f" and shared {t.caption}" if t.caption else "")
            out.append(Unit(text=text, ids=(t.dia_id,), date_time=s.date_time))
    return out


def observation_units(conv: Conversation) -> list[Unit]:
    """One unit per recorded fact, file order; ``UnitsUnavailable`` when the conversation has none."""
    reason = conv.recorded_unavailable("observation")
    if reason is not None:
        raise UnitsUnavailable(reason)
    dates = conv.session_dates()
    return [Unit(text=o.text, ids=tuple(o.ids), date_time=dates.get(o.session, "")) for o in conv.observations or []]


def summary_units(conv: Conversation) -> list[Unit]:
    """One unit per recorded session summary, by session number, id ``S<n>``; ``UnitsUnavailable`` without them."""
    reason = conv.recorded_unavailable("summary")
    if reason is not None:
        raise UnitsUnavailable(reason)
    dates = conv.session_dates()
    return [Unit(text=text, ids=(f"S{n}",), date_time=dates.get(n, ""))
            for n, text in sorted((conv.summaries or {}).items())]


def build_units(conv: Conversation, unit: str) -> list[Unit]:
    """The units of kind ``unit`` (``dialog``, ``observation`` or ``summary``) for ``conv``."""
    builders = {"dialog": dialog_units, "observation": observation_units, "summary": summary_units}
    if unit not in builders:
        raise ValueError(f"unknown unit {unit!r}; choose from {', '.join(UNITS)}")
    return builders[unit](conv)


# ------------------------------------------------------------------------------------------------ retrievers
class RankIndex(Protocol):
    """A retriever's index over one list of unit texts."""

    def rank(self, query: str, k: int) -> list[int]:
        """Indices of the top ``min(k, n)`` units, best first."""


class Retriever(Protocol):
    """Builds a ``RankIndex`` over unit texts; one instance serves every conversation and unit of a run."""

    name: str

    def index(self, texts: Sequence[str]) -> RankIndex:
        """Index ``texts`` (the unit texts, in unit order)."""


def _stable_desc(scores: np.ndarray) -> np.ndarray:
    """Indices by descending score, ties by lower index."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")


class _BM25Index:
    def __init__(self, texts: Sequence[str]) -> None:
        import bm25s

        self.n = len(texts)
        self.bm25 = bm25s.BM25()
        self.bm25.index(bm25s.tokenize(list(texts), stopwords="en", show_progress=False), show_progress=False)

    def rank(self, query: str, k: int) -> list[int]:
        import bm25s

        k = min(k, self.n)
        if k <= 0:
            return []
        q = bm25s.tokenize([query], stopwords="en", show_progress=False)
        docs, _ = self.bm25.retrieve(q, k=k, show_progress=False)
        return [int(i) for i in docs[0]]


class BM25Retriever:
    """bm25s, default tokenizer, English stopwords, no stemmer; ranking as ``BM25.retrieve`` returns it."""

    name = "bm25"

    def __init__(self) -> None:
        self._last: tuple[tuple[str, ...], _BM25Index] | None = None

    def index(self, texts: Sequence[str]) -> _BM25Index:
        key = tuple(texts)
        if self._last is None or self._last[0] != key:
            self._last = (key, _BM25Index(key))
        return self._last[1]


class _DenseIndex:
    def __init__(self, vecs: np.ndarray, encode_query: Callable[[str], np.ndarray]) -> None:
        self.vecs = vecs
        self.encode_query = encode_query

    def scores(self, query: str) -> np.ndarray:
        if self.vecs.shape[0] == 0:
            return np.zeros(0, dtype=np.float64)
        return np.asarray(self.vecs @ self.encode_query(query), dtype=np.float64)

    def rank(self, query: str, k: int) -> list[int]:
        return [int(i) for i in _stable_desc(self.scores(query))[:k]]


class _DenseRetriever(ABC):
    """Shared plumbing of the dense retrievers: context vectors cached per text list, query vectors per text."""

    name = "dense"

    def __init__(self) -> None:
        self._ctx: dict[tuple[str, ...], np.ndarray] = {}
        self._q: dict[str, np.ndarray] = {}

    @abstractmethod
    def _encode_contexts(self, texts: list[str]) -> np.ndarray:
        """Context vectors, one row per text."""

    @abstractmethod
    def _encode_query(self, text: str) -> np.ndarray:
        """The vector of one query."""

    def query_vector(self, text: str) -> np.ndarray:
        v = self._q.get(text)
        if v is None:
            v = self._q[text] = self._encode_query(text)
        return v

    def index(self, texts: Sequence[str]) -> _DenseIndex:
        key = tuple(texts)
        if key not in self._ctx:
            if len(self._ctx) >= 8:
                self._ctx.pop(next(iter(self._ctx)))
            self._ctx[key] = self._encode_contexts(list(key)) if key else np.zeros((0, 1), dtype=np.float32)
        return _DenseIndex(self._ctx[key], self.query_vector)


class MiniLMRetriever(_DenseRetriever):
    """all-MiniLM-L6-v2 as sentence-transformers encodes it by default, normalised; cosine."""

    name = "minilm"

    def __init__(self, model_path: Path | str | None = None) -> None:
        super().__init__()
        from sentence_transformers import SentenceTransformer

        from harness.embedding import minilm_model_path

        self.model = SentenceTransformer(str(model_path or minilm_model_path()), device="cpu")

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True,
                                            show_progress_bar=False), dtype=np.float32)

    def _encode_contexts(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts)

    def _encode_query(self, text: str) -> np.ndarray:
        return self._encode([text])[0]


def _load(cls: Any, name: str, what: str) -> Any:
    """``cls.from_pretrained(name)``, or a one-line ``ValueError`` naming the folder (nothing is downloaded)."""
    try:
        return cls.from_pretrained(name)
    except Exception as exc:  # transformers raises OSError, ValueError or its own errors for a bad folder
        msg = " ".join(str(exc).split())[:200]
        raise ValueError(f"{name}: cannot load the two-tower {what} ({msg})") from None


class TwoTowerRetriever(_DenseRetriever):
    """Two transformers encoders (query, context): CLS vector of ``last_hidden_state``, dot product, no
    normalisation; the query model's tokenizer tokenises both sides (padding, truncation to its max length)."""

    def __init__(self, query_model: str, context_model: str, batch_size: int = 32) -> None:
        super().__init__()
        from transformers import AutoModel, AutoTokenizer

        self.name = f"{TWO_TOWER}:{query_model},{context_model}"
        self.tokenizer = _load(AutoTokenizer, query_model, "query model tokenizer")
        self.query_encoder = _load(AutoModel, query_model, "query model").eval()
        self.context_encoder = _load(AutoModel, context_model, "context model").eval()
        self.batch_size = batch_size

    def _cls(self, model: Any, texts: list[str]) -> np.ndarray:
        import torch

        out = []
        with torch.no_grad():
            for i in range(0, len(texts), self.batch_size):
                enc = self.tokenizer(texts[i:i + self.batch_size], padding=True, truncation=True,
                                     return_tensors="pt")
                out.append(model(**enc).last_hidden_state[:, 0, :].float().numpy())
        return np.concatenate(out, axis=0)

    def _encode_contexts(self, texts: list[str]) -> np.ndarray:
        return self._cls(self.context_encoder, texts)

    def _encode_query(self, text: str) -> np.ndarray:
        return self._cls(self.query_encoder, [text])[0]


class _HybridIndex:
    def __init__(self, bm25: _BM25Index, dense: _DenseIndex, n: int) -> None:
        self.parts = (bm25, dense)
        self.n = n

    def rank(self, query: str, k: int) -> list[int]:
        fused = np.zeros(self.n, dtype=np.float64)
        for part in self.parts:
            order = part.rank(query, self.n)
            fused[np.asarray(order, dtype=np.int64)] += 1.0 / (RRF_C + np.arange(1, len(order) + 1))
        return [int(i) for i in _stable_desc(fused)[:k]]


class HybridRetriever:
    """Reciprocal-rank fusion (constant 60) of the full bm25 and minilm rankings."""

    name = "hybrid"

    def __init__(self, bm25: BM25Retriever, minilm: MiniLMRetriever) -> None:
        self.bm25, self.minilm = bm25, minilm

    def index(self, texts: Sequence[str]) -> _HybridIndex:
        return _HybridIndex(self.bm25.index(texts), self.minilm.index(texts), len(texts))


def parse_retrievers(spec: str | Sequence[str] | None) -> list[str]:
    """``--retrievers`` text (comma-separated; ``two-tower:Q,C`` keeps its comma) -> names, validated."""
    if spec is None:
        return list(RETRIEVERS)
    parts = list(spec) if not isinstance(spec, str) else _split_spec(spec)
    out: list[str] = []
    for p in parts:
        p = p.strip()
        if not p:
            continue
        if p in RETRIEVERS:
            pass
        elif p.startswith(f"{TWO_TOWER}:"):
            models = p.split(":", 1)[1].split(",")
            if len(models) != 2 or not all(m.strip() for m in models):
                raise ValueError(f"retriever {p!r}: expected two-tower:QUERY_MODEL,CONTEXT_MODEL")
            p = f"{TWO_TOWER}:{models[0].strip()},{models[1].strip()}"
        else:
            raise ValueError(f"unknown retriever {p!r}; choose from {', '.join(RETRIEVERS)} or "
                             f"{TWO_TOWER}:QUERY_MODEL,CONTEXT_MODEL")
        if p not in out:
            out.append(p)
    if not out:
        raise ValueError("--retrievers names no retriever")
    return out


def _split_spec(spec: str) -> list[str]:
    """Split on commas, except the one comma inside ``two-tower:Q,C``."""
    raw = spec.split(",")
    out: list[str] = []
    i = 0
    while i < len(raw):
        part = raw[i].strip()
        if part.startswith(f"{TWO_TOWER}:") and "," not in part and i + 1 < len(raw):
            part = f"{part},{raw[i + 1].strip()}"
            i += 1
        out.append(part)
        i += 1
    return out


def get_retrievers(names: Sequence[str]) -> dict[str, Retriever]:
    """One retriever per name (``hybrid`` shares the bm25 and minilm instances, and their caches)."""
    made: dict[str, Any] = {}

    def bm25() -> BM25Retriever:
        if "bm25" not in made:
            made["bm25"] = BM25Retriever()
        return made["bm25"]

    def minilm() -> MiniLMRetriever:
        if "minilm" not in made:
            made["minilm"] = MiniLMRetriever()
        return made["minilm"]

    out: dict[str, Retriever] = {}
    for name in names:
        if name == "bm25":
            out[name] = bm25()
        elif name == "minilm":
            out[name] = minilm()
        elif name == "hybrid":
            out[name] = HybridRetriever(bm25(), minilm())
        elif name.startswith(f"{TWO_TOWER}:"):
            q, c = name.split(":", 1)[1].split(",")
            out[name] = TwoTowerRetriever(q, c)
        else:
            raise ValueError(f"unknown retriever {name!r}")
    return out


# ------------------------------------------------------------------------------------------------ recall, tokens
def retrieved_ids(units: Sequence[Unit], order: Iterable[int]) -> list[str]:
    """The ids of the ranked units, flattened in rank order."""
    return [i for idx in order for i in units[idx].ids]


def question_recall(evidence: Sequence[str], retrieved: Iterable[str], *, session_rule: bool = False
                    ) -> float | None:
    """Share of the evidence strings (exactly as given) found among ``retrieved``; ``None`` without evidence.

    ``session_rule`` (summary units): a string counts when ``string.split(":")[0][1:]`` is the number of a
    retrieved ``S<n>`` (upstream compares ``id[1:]`` of every retrieved id)."""
    if not evidence:
        return None
    got = {r[1:] for r in retrieved} if session_rule else set(retrieved)
    if session_rule:
        hits = sum(1 for ev in evidence if ev.split(":")[0][1:] in got)
    else:
        hits = sum(1 for ev in evidence if ev in got)
    return hits / len(evidence)


def category_recall(scored: Iterable[tuple[int, float | None]]) -> dict[str, float | None]:
    """``{"1".."5", "overall"}`` from (category, recall-or-None) per question: per category the sum of recall over
    questions with evidence divided by all questions of the category; overall the same over the five categories.
    A category without questions is ``None``."""
    sums = dict.fromkeys(CATEGORIES, 0.0)
    counts = dict.fromkeys(CATEGORIES, 0)
    for cat, r in scored:
        if cat not in counts:
            continue
        counts[cat] += 1
        sums[cat] += r or 0.0
    out: dict[str, float | None] = {str(c): (sums[c] / counts[c] if counts[c] else None) for c in CATEGORIES}
    total = sum(counts.values())
    out["overall"] = sum(sums.values()) / total if total else None
    return out


def reader_context(units: Sequence[Unit], order: Iterable[int], unit: str) -> str:
    """The context as the paper's reader got it: ``<date-time>: <text>`` per ranked unit, joined by a newline
    (dialog, observation) or a blank line (summary)."""
    return _JOIN[unit].join(f"{units[i].date_time}: {units[i].text}" for i in order)


@lru_cache(maxsize=1)
def _cl100k() -> Callable[[str], int]:
    from fractal_sim.context_meter import get_counter

    return get_counter("cl100k-bundled")


def tokens_cl100k(text: str) -> int:
    """tiktoken ``cl100k_base`` tokens of ``text`` (the bundled copy; special-token text counted as plain text)."""
    return _cl100k()(text)


# ------------------------------------------------------------------------------------------------ quirks
def _has_separator(ev: str) -> bool:
    return ";" in ev or any(ch.isspace() for ch in ev)


def quirk_counts(conv: Conversation) -> dict[str, Any]:
    """What upstream's exact-string rule cannot match, counted for one conversation.

    ``questions_with_separator_evidence``: questions with an evidence string holding ``;`` or a space (never
    matchable by a dialog or observation id); ``evidence_strings_not_turn_ids``: evidence strings that are not
    exactly a turn's ``dia_id`` (these and the ones above cap a question's dialog recall below 1 at any k);
    ``questions_never_fully_recallable``: questions with evidence holding such a string; ``evidence_ids_naming_no_turn``
    and ``observation_ids_naming_no_turn``: ids that name no turn even after the loader's cleaning (``"D"``,
    ``"D10:19"``)."""
    turn_ids = {t.dia_id for t in conv.turns()}
    sep = [p for p in conv.probes if any(_has_separator(e) for e in p.raw_evidence)]
    not_ids = [e for p in conv.probes for e in p.raw_evidence if e not in turn_ids]
    never = [p for p in conv.probes if p.raw_evidence and any(e not in turn_ids for e in p.raw_evidence)]
    return {
        "questions_with_separator_evidence": len(sep),
        "separator_evidence_examples": [e for p in sep for e in p.raw_evidence if _has_separator(e)][:5],
        "evidence_strings_not_turn_ids": len(not_ids),
        "questions_never_fully_recallable": len(never),
        "evidence_ids_naming_no_turn": sum(len(p.invalid_evidence) for p in conv.probes),
        "observation_ids_naming_no_turn": sum(len(o.invalid_ids) for o in conv.observations or []),
        "questions_without_evidence": sum(1 for p in conv.probes if not p.raw_evidence),
    }


def question_counts(conv: Conversation) -> dict[str, dict[str, int]]:
    """Per category: all questions, and those with non-empty evidence (the recall numerator's questions)."""
    return {str(c): {"questions": sum(1 for p in conv.probes if p.category == c),
                     "with_evidence": sum(1 for p in conv.probes if p.category == c and p.raw_evidence)}
            for c in CATEGORIES}


# ------------------------------------------------------------------------------------------------ one conversation
@dataclass
class UnitResult:
    """Per-question measurements of one (conversation, retriever, unit): ``recall[k]``, ``tokens[k]`` and
    ``retrieved[k]`` (the ids of the top k units, flattened in rank order) hold one value per probe in probe order,
    ``probes`` the probes' indices; ``unavailable`` is the reason when the unit could not be built."""

    conversation: str
    retriever: str
    unit: str
    categories: list[int] = field(default_factory=list)
    recall: dict[int, list[float | None]] = field(default_factory=dict)
    tokens: dict[int, list[int]] = field(default_factory=dict)
    n_units: int = 0
    unavailable: str | None = None
    probes: list[int] = field(default_factory=list)
    retrieved: dict[int, list[list[str]]] = field(default_factory=dict)


def evaluate_unit(conv: Conversation, retriever: Retriever, unit: str, ks: Sequence[int] | None = None,
                  probes: Sequence[Probe] | None = None) -> UnitResult:
    """Run the protocol for one conversation, one retriever and one unit kind over ``ks`` (default the k grid)."""
    ks = tuple(ks or K_GRID[unit])
    probes = list(conv.probes if probes is None else probes)
    res = UnitResult(conversation=conv.sample_id, retriever=retriever.name, unit=unit,
                     categories=[p.category for p in probes], probes=[p.index for p in probes])
    try:
        units = build_units(conv, unit)
    except UnitsUnavailable as exc:
        res.unavailable = str(exc)
        return res
    res.n_units = len(units)
    index = retriever.index([u.text for u in units])
    session_rule = unit == "summary"
    for k in ks:
        res.recall[k], res.tokens[k], res.retrieved[k] = [], [], []
    for p in probes:
        for k in ks:
            order = index.rank(p.question, k)
            ids = retrieved_ids(units, order)
            res.retrieved[k].append(ids)
            res.recall[k].append(question_recall(p.raw_evidence, ids, session_rule=session_rule))
            res.tokens[k].append(tokens_cl100k(reader_context(units, order, unit)))
    return res


def aggregate_rows(results: Sequence[UnitResult]) -> list[dict[str, Any]]:
    """Pool per-conversation results into rows ``{"retriever", "unit", "k", "recall", "tokens_cl100k", ...}``:
    recall by ``category_recall`` over every question of the conversations where the unit was available, tokens
    the mean per question; ``unavailable`` lists the conversations left out, with the reason."""
    groups: dict[tuple[str, str], list[UnitResult]] = {}
    for r in results:
        groups.setdefault((r.retriever, r.unit), []).append(r)
    rows: list[dict[str, Any]] = []
    for (retriever, unit), rs in groups.items():
        ok = [r for r in rs if r.unavailable is None]
        missing = [{"conversation": r.conversation, "reason": r.unavailable} for r in rs if r.unavailable]
        ks = sorted({k for r in ok for k in r.recall}) or list(K_GRID[unit])
        for k in ks:
            scored = [(c, v) for r in ok for c, v in zip(r.categories, r.recall.get(k, []), strict=True)]
            toks = [t for r in ok for t in r.tokens.get(k, [])]
            rows.append({"retriever": retriever, "unit": unit, "k": k,
                         "recall": category_recall(scored) if ok else dict.fromkeys([*map(str, CATEGORIES),
                                                                                     "overall"]),
                         "tokens_cl100k": float(np.mean(toks)) if toks else None,
                         "n_questions": len(scored),
                         "conversations": [r.conversation for r in ok],
                         "unavailable": missing})
    return rows


def delivered_row(name: str, records: Sequence[tuple[Probe, frozenset[str], str]]) -> dict[str, Any]:
    """A design arm's row: recall of its delivered ``dia_id``s with the same recall function (dialog rule), tokens
    of its own delivered text. ``records`` = (probe, delivered ids, delivered text) per question."""
    scored = [(p.category, question_recall(p.raw_evidence, ids)) for p, ids, _ in records]
    toks = [tokens_cl100k(text) for _, _, text in records]
    return {"retriever": name, "unit": "delivered", "k": None, "recall": category_recall(scored),
            "tokens_cl100k": float(np.mean(toks)) if toks else None, "n_questions": len(scored)}


# ------------------------------------------------------------------------------------------------ published
def published_table() -> dict[str, Any]:
    """The published Table 3 rows and their citation, read from the data file shipped with the package."""
    text = resources.files("harness.workloads").joinpath("data", PUBLISHED_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def published_rows() -> list[dict[str, Any]]:
    """Published rows as fractions, in the results' row shape (``retriever`` is the paper's retriever)."""
    table = published_table()
    out = []
    for r in table["rows"]:
        rec = {str(c): r["recall_percent"][str(c)] / 100 for c in CATEGORIES}
        rec["overall"] = r["recall_percent"]["overall"] / 100
        out.append({"retriever": table["retriever"], "unit": r["unit"], "k": r["k"], "recall": rec,
                    "note": r.get("note")})
    return out
