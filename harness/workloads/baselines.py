"""Baseline arms over a LoCoMo conversation: what a plain transcript or a plain retriever would deliver.

Every baseline implements the ``Arm`` protocol of ``harness.workloads.base`` and delivers a *memory block*: the
turns it chose, rendered one per line with ``harness.workloads.locomo.render_turn`` (dia_id, session date-time,
speaker, text, photo caption). The block does not contain the question; the optional answer module adds it.
Mapping choices:

- ``full`` delivers every turn in conversation order; ``stored`` is every turn.
- ``last20`` delivers the last 20 turns of the conversation (all probes are asked after the last session, as
  LoCoMo does); it is a sliding-window memory, so ``stored`` is those 20 turns only.
- ``bm25`` (rows ``bm25@K``): bm25s (Lucene BM25, k1 1.5, b 0.75, English stopwords, no stemmer) over the
  rendered turn lines, query = the question; query terms absent from the vocabulary are dropped.
- ``mean`` (rows ``mean@K``): ``harness.embedding`` ``minilm-mean`` vectors of the rendered turn lines, cosine
  with the question's vector.
- ``hybrid`` (rows ``hybrid@K``): reciprocal-rank fusion (c = 60) of the full BM25 and mean-pooling rankings.
- Ranked rows deliver the top K in rank order (best first); ties go to the earlier turn. ``meta["ranked"]`` holds
  the top ``max(K)`` ids and ``meta["scores"]`` their scores, for the recall cross-check.
- ``oracle`` delivers exactly the probe's valid evidence turns in conversation order (an upper bound that reads
  the annotation); ``oracle-nodate`` is the same without session dates (what a model loses without them).
- Every ranked arm stores every turn (the index holds the whole conversation).
- On a LongMemEval question (``harness.workloads.lme_workload``) the same code runs unchanged: sessions have no
  date-time, so ``render_turn`` prints none, and the session's date is the ``"Session date: ..."`` line that opens
  its first turn's text; ``oracle`` delivers the ``has_answer`` turns of both roles, and ``oracle-nodate`` is
  then the same as ``oracle`` (there is no separate date to drop).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from harness.workloads.base import ArmContext, Delivery
from harness.workloads.locomo import Conversation, Probe, Turn, render_turn

RRF_C = 60


class _TurnArm:
    """Shared plumbing: keep the conversation's turns and their rendered lines."""

    name = "base"
    rows: tuple[str, ...] = ()

    def __init__(self, ctx: ArmContext | None = None, *, dates: bool = True) -> None:
        self.ctx = ctx or ArmContext(workdir=Path("."))
        self.dates = dates
        self.turns: list[Turn] = []
        self.lines: list[str] = []
        self._pos: dict[str, int] = {}

    def ingest(self, conversation: Conversation) -> None:
        dates = conversation.session_dates()
        self.turns = conversation.turns()
        self.lines = [render_turn(t, dates.get(t.session), dates=self.dates) for t in self.turns]
        self._pos = {t.dia_id: i for i, t in enumerate(self.turns)}
        self._index()

    def _index(self) -> None:
        """Build whatever the arm searches (nothing for transcript arms)."""

    def _block(self, idx: Sequence[int], **meta: object) -> Delivery:
        return Delivery(text="\n".join(self.lines[i] for i in idx),
                        dia_ids=frozenset(self.turns[i].dia_id for i in idx), meta=dict(meta))

    def stored(self) -> frozenset[str]:
        return frozenset(t.dia_id for t in self.turns)

    def close(self) -> None:
        self.turns, self.lines = [], []


class FullContextArm(_TurnArm):
    """Every turn, in conversation order."""

    name = "full"
    rows = ("full",)

    def deliver(self, probe: Probe) -> dict[str, Delivery]:
        return {"full": self._block(range(len(self.turns)))}


class LastTurnsArm(_TurnArm):
    """The last ``n`` turns (a sliding window)."""

    def __init__(self, ctx: ArmContext | None = None, *, n: int = 20, dates: bool = True) -> None:
        super().__init__(ctx, dates=dates)
        self.n = n
        self.name = f"last{n}"
        self.rows = (self.name,)

    def deliver(self, probe: Probe) -> dict[str, Delivery]:
        return {self.name: self._block(range(max(0, len(self.turns) - self.n), len(self.turns)))}

    def stored(self) -> frozenset[str]:
        return frozenset(t.dia_id for t in self.turns[-self.n:])


class OracleArm(_TurnArm):
    """Exactly the probe's valid evidence turns (conversation order)."""

    def __init__(self, ctx: ArmContext | None = None, *, dates: bool = True) -> None:
        super().__init__(ctx, dates=dates)
        self.name = "oracle" if dates else "oracle-nodate"
        self.rows = (self.name,)

    def deliver(self, probe: Probe) -> dict[str, Delivery]:
        idx = sorted(self._pos[e] for e in probe.evidence if e in self._pos)
        return {self.name: self._block(idx)}


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores, best first, ties by lower index."""
    order = np.lexsort((np.arange(scores.shape[0]), -scores))
    return order[:k]


class _RankedArm(_TurnArm, ABC):
    """Shared top-K delivery for retrieval arms: subclasses give ``_scores(question)`` over all turns."""

    prefix = "ranked"

    def __init__(self, ctx: ArmContext | None = None, *, dates: bool = True) -> None:
        super().__init__(ctx, dates=dates)
        ks = tuple(sorted(set(self.ctx.k_values)))
        if not ks or min(ks) < 1:
            raise ValueError(f"top-K values must be positive integers, got {self.ctx.k_values}")
        self.ks = ks
        self.rows = tuple(f"{self.prefix}@{k}" for k in ks)

    @abstractmethod
    def _scores(self, question: str) -> np.ndarray:
        """One score per turn (higher is better)."""

    def deliver(self, probe: Probe) -> dict[str, Delivery]:
        scores = self._scores(probe.question)
        top = _top(scores, max(self.ks))
        ranked = [self.turns[i].dia_id for i in top]
        best = [float(scores[i]) for i in top]
        return {f"{self.prefix}@{k}": self._block(top[:k], ranked=ranked[:k], scores=best[:k]) for k in self.ks}


class BM25Arm(_RankedArm):
    """bm25s over the rendered turn lines."""

    name = "bm25"
    prefix = "bm25"

    def _index(self) -> None:
        import bm25s

        self._bm25 = bm25s.BM25()
        self._bm25.index(bm25s.tokenize(self.lines, stopwords="en", show_progress=False), show_progress=False)

    def _scores(self, question: str) -> np.ndarray:
        import bm25s

        [toks] = bm25s.tokenize([question], stopwords="en", return_ids=False, show_progress=False)
        toks = [t for t in toks if t in self._bm25.vocab_dict]
        if not toks:
            return np.zeros(len(self.turns), dtype=np.float64)
        return np.asarray(self._bm25.get_scores(toks), dtype=np.float64)


class MeanPoolArm(_RankedArm):
    """MiniLM mean pooling (``minilm-mean``), cosine over the rendered turn lines."""

    name = "mean"
    prefix = "mean"

    def _index(self) -> None:
        from harness.embedding import get_encoder

        self._enc = get_encoder("minilm-mean")
        self._vecs = self._enc.encode(self.lines)

    def _scores(self, question: str) -> np.ndarray:
        q = self._enc.encode([question])[0]
        return (self._vecs @ q).astype(np.float64)


class HybridArm(_RankedArm):
    """Reciprocal-rank fusion of the BM25 and mean-pooling rankings (score = sum of 1 / (60 + rank))."""

    name = "hybrid"
    prefix = "hybrid"

    def __init__(self, ctx: ArmContext | None = None, *, dates: bool = True) -> None:
        super().__init__(ctx, dates=dates)
        self._parts = (BM25Arm(self.ctx, dates=dates), MeanPoolArm(self.ctx, dates=dates))

    def _index(self) -> None:
        for p in self._parts:
            p.turns, p.lines, p._pos = self.turns, self.lines, self._pos
            p._index()

    def _scores(self, question: str) -> np.ndarray:
        fused = np.zeros(len(self.turns), dtype=np.float64)
        for p in self._parts:
            order = _top(p._scores(question), len(self.turns))
            fused[order] += 1.0 / (RRF_C + np.arange(1, len(order) + 1))
        return fused


BASELINES = {
    "full": FullContextArm,
    "last20": LastTurnsArm,
    "bm25": BM25Arm,
    "mean": MeanPoolArm,
    "hybrid": HybridArm,
    "oracle": OracleArm,
    "oracle-nodate": lambda ctx: OracleArm(ctx, dates=False),
}
