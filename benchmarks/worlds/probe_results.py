"""Synthetic per-probe results shaped like the real ones, for the statistics checks (``benchmarks.stats_coverage``,
``benchmarks.stats_speed``, the tests of :mod:`harness.stats`).

Shape: LoCoMo's headline probe set (categories 1-4 of the four committed conversations: 152, 81, 152 and 199
probes, 584 in all, 2 of them without evidence), 21 rows named as the LoCoMo design run's, and LongMemEval's
30-question slices. Values are 0/1-heavy with ties, as the real ones: most probes have one evidence turn, so a
recall is 0 or 1 and otherwise a third, a half or two thirds; hit-at-k is 0/1; nDCG is 0 or a log2 discount.
Rows share a per-probe difficulty (so rows are correlated on a probe, as real rows are) and each conversation has
its own offset (so probes cluster).

The coverage checks need the truth, so their draws come from :class:`Discrete` distributions whose means are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LOCOMO_HEADLINE: dict[str, tuple[int, int, int, int]] = {
    "conv-26": (32, 37, 13, 70), "conv-30": (11, 26, 0, 44), "conv-41": (31, 27, 8, 86), "conv-42": (37, 40, 11, 111),
}
"""Probes per headline category (1, 2, 3, 4) of each committed LoCoMo conversation."""
ROWS_21 = ("full", "last20", "bm25@4", "bm25@8", "mean@4", "mean@8", "hybrid@4", "hybrid@8", "oracle",
           "oracle-nodate", "fractal", "np-pooler@4", "np-pooler@8", "np-mean@4", "np-mean@8", "pm@4", "pm@8",
           "tortoise-volunteer", "tortoise-eval", "tortoise-recorded-volunteer", "tortoise-recorded-eval")
RANKED = ("bm25@4", "bm25@8", "mean@4", "mean@8", "hybrid@4", "hybrid@8", "np-pooler@4", "np-pooler@8",
          "np-mean@4", "np-mean@8", "pm@4", "pm@8", "tortoise-eval", "tortoise-recorded-eval")
RECALL_LEVELS = (0.0, 1 / 3, 0.5, 2 / 3, 1.0)


def locomo_clusters() -> np.ndarray:
    """The conversation of each of the 584 headline probes, in order."""
    return np.repeat(list(LOCOMO_HEADLINE), [sum(c) for c in LOCOMO_HEADLINE.values()])


@dataclass(frozen=True)
class Discrete:
    """A distribution over a few values with exact mean (0/1-heavy recall shapes)."""

    values: tuple[float, ...]
    probs: tuple[float, ...]

    @property
    def mean(self) -> float:
        return float(np.dot(self.values, self.probs))

    def draw(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        return rng.choice(np.asarray(self.values), size=size, p=np.asarray(self.probs))


def recall_like(level: float) -> Discrete:
    """A recall distribution with mass mostly on 0 and 1, a little on 1/3, 1/2 and 2/3, whose share of 1s grows
    with ``level`` in [0, 1]."""
    mid = 0.12
    one = (1 - mid) * level
    return Discrete(RECALL_LEVELS, (1 - mid - one, mid / 3, mid / 3, mid / 3, one))


def locomo_table_rows(seed: int = 0, rows: tuple[str, ...] = ROWS_21) -> list[dict[str, object]]:
    """Flat per-probe rows (see :func:`harness.probes.probe_table`) of a synthetic LoCoMo-shaped run: 584 headline
    probes x ``rows``; evidence recall, all-evidence, stored recall, cl100k tokens, answer tokens present, latency
    and, for ranked rows, turn-level hit, all and nDCG at 5 and 10."""
    rng = np.random.default_rng(seed)
    clusters = locomo_clusters()
    cats = np.concatenate([np.repeat(["1", "2", "3", "4"], c) for c in LOCOMO_HEADLINE.values()])
    n = len(clusters)
    difficulty = rng.normal(0, 1.0, n) + np.select([clusters == c for c in LOCOMO_HEADLINE],
                                                   rng.normal(0, 0.3, len(LOCOMO_HEADLINE)))
    n_ev = rng.choice([1, 1, 1, 1, 2, 2, 3], size=n)
    no_ev = rng.choice(n, size=2, replace=False)
    out = []
    for j, row in enumerate(rows):
        quality = -0.6 + 1.4 * j / len(rows)
        p = 1 / (1 + np.exp(-(quality - difficulty)))
        hits = rng.binomial(n_ev, p)
        tokens = np.maximum(20, rng.normal(150 + 20 * j, 40 + 3 * j, n)).round()
        ranked = row in RANKED
        for i in range(n):
            has = i not in no_ev
            rec = hits[i] / n_ev[i]
            hit5 = bool(hits[i] > 0 and rng.random() < 0.85)
            rank = int(rng.integers(1, 6)) if hit5 else 0
            out.append({
                "workload": "locomo", "cluster": str(clusters[i]), "probe": str(i), "category": str(cats[i]),
                "abstention": False, "has_evidence": bool(has), "row": row, "arm": row.split("@")[0],
                "evidence_recall": float(rec) if has else None,
                "all_evidence": bool(hits[i] == n_ev[i]) if has else None,
                "stored_recall": 1.0 if has else None,
                "tokens_cl100k": int(tokens[i]),
                "answer_present": float(np.clip(rec * 0.8 + rng.normal(0, 0.1), 0, 1)),
                "latency_ms": float(rng.lognormal(0, 0.5)),
                **({f"turn.{m}@{k}": (v if has else None) for k in (5, 10) for m, v in (
                    ("recall_any", float(hit5 or (k == 10 and hits[i] > 0))),
                    ("recall_all", float(hits[i] == n_ev[i] and hit5)),
                    ("ndcg_any", float(1 / np.log2(rank + 1)) if hit5 else 0.0))} if ranked else {}),
            })
    return out
