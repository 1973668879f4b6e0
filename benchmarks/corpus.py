"""Corpus section of ``memsim bench selectors``: facts measured on the real AgentFly files, when present.

- ``truth_label`` is constant within every query of ``training_data.jsonl`` (spec 2.3), so the pair corpus carries
  no within-query ranking signal: whatever a classifier learns from it, it cannot learn which case of a query's
  block is the better one (AGF-22, AGF-35);
- validation AUC under the trainer's row-level split versus the query-grouped split (``--group_by_query``), for a
  query-memorisation baseline and for agentfly_sim's trainer with ``--freeze_backbone`` (head only), plus a full
  fine-tune on a small subset (AGF-35);
- the label mix of NP's top-8 (pooler, ``MEMORY_KEY_FIELD=case`` over ``memory.jsonl``) for 50 real benchmark
  questions that are not themselves bank cases (AGF-37).

Skipped cleanly (``{"skipped": reason}``) when the corpora are absent.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import md_table

FILES = ("memory.jsonl", "training_data.jsonl", "deepresearcher.jsonl")


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def find_corpus(data_dir: Path | None) -> Path | None:
    """The AgentFly folder through the data resolver (``data_dir``, ``$MEMSIM_AGENTFLY_DATA``, the fetched copy)
    when it holds every file this section reads, else ``None``; a given path that is missing raises
    ``DataPathError``."""
    from harness.datapaths import find_agentfly

    found = find_agentfly(data_dir)
    if found is not None and all((found / f).is_file() for f in FILES):
        return found
    return None


def truth_label_constancy(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    by_q: dict[str, set] = defaultdict(set)
    for r in pairs:
        by_q[r["query"]].add(bool(r["truth_label"]))
    mixed = sum(1 for v in by_q.values() if len(v) > 1)
    return {"rows": len(pairs), "queries": len(by_q), "queries_with_mixed_truth_label": mixed,
            "queries_true": sum(1 for v in by_q.values() if v == {True}),
            "queries_false": sum(1 for v in by_q.values() if v == {False}),
            "truth_label_constant_within_every_query": mixed == 0}


def split_indices(pairs: list[dict[str, Any]], grouped: bool, seed: int = 42, ratio: float = 0.1
                  ) -> tuple[list[int], list[int]]:
    """Trainer splits, re-derived from spec 5.2 for the memorisation baseline (row-level stratified, or grouped)."""
    labels = [1 if r["truth_label"] else 0 for r in pairs]
    rng = random.Random(seed)
    if not grouped:
        pos = [i for i, y in enumerate(labels) if y == 1]
        neg = [i for i, y in enumerate(labels) if y == 0]
        rng.shuffle(pos)
        rng.shuffle(neg)
        kp, kn = max(1, int(len(pos) * ratio)), max(1, int(len(neg) * ratio))
        return pos[kp:] + neg[kn:], pos[:kp] + neg[:kn]
    first: dict[str, int] = {}
    for i, r in enumerate(pairs):
        first.setdefault(r["query"], labels[i])
    pq = [q for q, y in first.items() if y == 1]
    nq = [q for q, y in first.items() if y == 0]
    rng.shuffle(pq)
    rng.shuffle(nq)
    val_q = set(pq[:max(1, int(len(pq) * ratio))]) | set(nq[:max(1, int(len(nq) * ratio))])
    tr = [i for i, r in enumerate(pairs) if r["query"] not in val_q]
    va = [i for i, r in enumerate(pairs) if r["query"] in val_q]
    return tr, va


def memorisation_auc(pairs: list[dict[str, Any]], grouped: bool) -> dict[str, Any]:
    """AUC of "predict the mean train label of the query (else the train prior)" on each split."""
    from sklearn.metrics import roc_auc_score

    tr, va = split_indices(pairs, grouped)
    y = np.array([1 if r["truth_label"] else 0 for r in pairs])
    sums: dict[str, list[int]] = defaultdict(list)
    for i in tr:
        sums[pairs[i]["query"]].append(int(y[i]))
    prior = float(y[tr].mean())
    pred = np.array([np.mean(sums[pairs[i]["query"]]) if pairs[i]["query"] in sums else prior for i in va])
    train_q = {pairs[i]["query"] for i in tr}
    leak = sum(1 for i in va if pairs[i]["query"] in train_q)
    return {"train_rows": len(tr), "val_rows": len(va), "val_rows_query_in_train": leak,
            "auc": float(roc_auc_score(y[va], pred)) if len(set(y[va])) > 1 else float("nan")}


def np_top8_label_mix(data: Path, n_questions: int, seed: int, max_cases: int | None = None) -> dict[str, Any]:
    """NP (pooler, key field ``case``) over memory.jsonl for real benchmark questions that are not bank cases
    (``max_cases``: only the first rows of the bank, for ``--quick``)."""
    from agentfly_sim.bank import extract_pairs, load_jsonl
    from agentfly_sim.embedding import CachedKeyIndex, load_np_encoder

    items = load_jsonl(data / "memory.jsonl")[:max_cases]
    pairs = extract_pairs(items, "case", "plan")
    cases = {p[0] for p in pairs}
    bench = [r["question"] for r in _read(data / "deepresearcher.jsonl")]
    fresh = list(dict.fromkeys(q for q in bench if q not in cases))
    rng = random.Random(seed)
    qs = rng.sample(fresh, min(n_questions, len(fresh)))
    tok, model = load_np_encoder()
    index = CachedKeyIndex(tok, model)
    index.rebuild(pairs)
    counts: Counter = Counter()
    per_q_neg = []
    for q in qs:
        res = index.retrieve(q, pairs, device_str="cpu", top_k=8)
        labels = [items[r["line_index"]].get("case_label", "unknown") for r in res]
        counts.update(labels)
        per_q_neg.append(sum(1 for x in labels if x == "negative"))
    total = sum(counts.values())
    return {"questions": len(qs), "bank_cases": len(pairs), "label_counts_top8": dict(counts),
            "negative_share_top8": counts.get("negative", 0) / total if total else float("nan"),
            "bank_negative_share": sum(1 for it in items if it.get("case_label") == "negative") / len(items),
            "questions_with_at_least_one_negative": sum(1 for n in per_q_neg if n > 0),
            "questions_with_majority_negative": sum(1 for n in per_q_neg if n > 4)}


def corpus_section(data_dir: Path | None, *, quick: bool, seed: int, track: Callable | None = None,
                   tmp_dir: Path | None = None) -> dict[str, Any]:
    data = find_corpus(data_dir)
    if data is None:
        return {"skipped": f"AgentFly corpora ({', '.join(FILES)}) not found: run `memsim data fetch agentfly`, "
                           "pass --data-dir or set $MEMSIM_AGENTFLY_DATA"}
    t0 = time.perf_counter()
    pairs = _read(data / "training_data.jsonl")
    from harness.datafetch import sha256_of

    # which files, by content (a machine's folder path means nothing to a reader of the results)
    out: dict[str, Any] = {"data_sha256": {f: sha256_of(data / f) for f in FILES},
                           "truth_label": truth_label_constancy(pairs)}
    out["memorisation_baseline"] = {"row_split": memorisation_auc(pairs, grouped=False),
                                    "grouped_split": memorisation_auc(pairs, grouped=True)}
    out["np_top8"] = np_top8_label_mix(data, 5 if quick else 50, seed, 300 if quick else None)
    try:
        from benchmarks import corpus_training
    except ImportError as exc:  # pragma: no cover
        out["trainer"] = {"skipped": f"benchmarks.corpus_training not importable: {exc}"}
    else:
        try:
            out["trainer"] = corpus_training.split_auc_runs(data, quick=quick, seed=seed, track=track,
                                                            tmp_dir=tmp_dir)
        except corpus_training.TrainerUnavailable as exc:
            out["trainer"] = {"skipped": str(exc)}
    out["seconds"] = time.perf_counter() - t0
    return out


def render_corpus_markdown(c: dict[str, Any]) -> str:
    lines = ["### Real AgentFly corpus", ""]
    if not c or "skipped" in c:
        lines.append(f"Skipped: {c.get('skipped', 'not run')}.")
        return "\n".join(lines)
    t = c["truth_label"]
    lines.append(f"`training_data.jsonl`: {t['rows']} rows, {t['queries']} distinct queries; queries whose rows "
                 f"carry more than one `truth_label` value: **{t['queries_with_mixed_truth_label']}** "
                 f"({t['queries_true']} all-true, {t['queries_false']} all-false). The label is the query's "
                 "judgement copied onto each of its pairs, so no pair says which case of a query ranks higher.")
    lines.append("")
    rows = []
    mb = c["memorisation_baseline"]
    for split in ("row_split", "grouped_split"):
        m = mb[split]
        rows.append(("query-memorisation baseline", split.replace("_", " "), m["train_rows"], m["val_rows"],
                     m["val_rows_query_in_train"], m["auc"], m["auc"]))
    tr = c.get("trainer") or {}
    for r in tr.get("runs", []):
        rows.append((r["model"], r["split"], r["train_rows"], r["val_rows"], r.get("val_rows_query_in_train",
                                                                                  "n/a"), r["val_auc"],
                     r["best_val_auc"]))
    lines.append(md_table(("model", "split", "train rows", "val rows", "val rows whose query is in train",
                           "val AUC (last)", "val AUC (best)"), rows))
    if "skipped" in tr:
        lines += ["", f"Trainer runs skipped: {tr['skipped']}."]
    elif tr.get("note"):
        lines += ["", tr["note"]]
    n = c["np_top8"]
    lines += ["", f"NP top-8 over `memory.jsonl` (pooler, key field `case`, {n['bank_cases']} cases) for "
                  f"{n['questions']} real benchmark questions that are not bank cases: label counts "
                  f"{n['label_counts_top8']}, negative share **{n['negative_share_top8']:.3f}** (bank: "
                  f"{n['bank_negative_share']:.3f}); {n['questions_with_at_least_one_negative']} of "
                  f"{n['questions']} questions get at least one negative case, "
                  f"{n['questions_with_majority_negative']} a majority of negatives."]
    return "\n".join(lines)
