"""PM classifier rows of the selector benchmark (agentfly_sim ``PMDriver``, ``CaseRetriever``, ``training.train``).

1. **Burn-in** (AGF-09, AGF-15): the PM driver runs fresh world questions over a copy of the benchmark bank with
   an untrained-head checkpoint (upstream ships none, and without one the driver retrieves nothing and writes no
   pairs), the scripted world planner and the ``match`` judge. Every question writes one pair per retrieved case,
   all carrying the question's judgement as ``truth_label``.
2. **PM classifier (burn-in)**: agentfly_sim's trainer on those pairs (``--use_plan --freeze_backbone``: head only,
   lr 1e-3 because only the head trains, 10 epochs, the default row-level split), then the trained checkpoint ranks
   the benchmark bank for every benchmark query.
3. **PM classifier (family labels)**: the same trainer on pairs whose label says whether the case is of the query's
   family (4 same-family cases, 2 sibling-family and 2 other cases per training query), i.e. a label that *does*
   carry a within-query ranking signal.
4. **PM untrained head** (context row): the burn-in checkpoint itself ranking the bank.

Scoring uses the cached case-vector mode (``cache_case_vectors=True``), whose scores equal upstream-style scoring
within 1e-5 (agentfly_sim test; re-measured in ``memsim bench cost``).
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.metrics import top_k_from_scores


class PMUnavailable(RuntimeError):
    """agentfly_sim does not offer the driver/trainer API these rows need."""


def _rank_all(retriever: Any, pool: list[str], queries: list[str], depth: int) -> list[np.ndarray]:
    retriever.case_vectors(pool)
    return [top_k_from_scores(np.asarray(retriever.score(q, pool), dtype=np.float64), depth) for q in queries]


def _train(pairs: Path, out: Path, seed: int, epochs: int) -> tuple[str, dict[str, Any]]:
    from agentfly_sim.training import TrainConfig, train

    cfg = TrainConfig(train=str(pairs), output_dir=str(out), use_plan=True, freeze_backbone=True, lr=1e-3,
                      epochs=epochs, seed=seed, eval_every=10**9)
    res = train(cfg, log=lambda s: None)
    final = res.evaluations[-1] if res.evaluations else {}
    return res.last_path, {"train_rows": res.n_train, "val_rows": res.n_val, "val_auc": final.get("auc"),
                           "val_rows_query_in_train": res.leakage[0]}


def family_pairs(world: Any, bank: Any, queries: Any, seed: int) -> list[dict[str, Any]]:
    """Training pairs labelled by family match: per query 4 same-family, 2 sibling-family, 2 other cases."""
    rng = np.random.default_rng([seed, 4242])
    fam = bank.family
    types = np.array([world.families[int(f)].entity_type for f in range(world.n_families)])
    rows = []
    for q, qf in zip(queries.questions(), queries.family, strict=True):
        qf = int(qf)
        same = np.flatnonzero(fam == qf)
        sib = np.flatnonzero((types[fam] == types[qf]) & (fam != qf))
        other = np.flatnonzero(types[fam] != types[qf])
        picks = [(i, True) for i in rng.choice(same, min(4, len(same)), replace=False)]
        picks += [(i, False) for i in rng.choice(sib, min(2, len(sib)), replace=False)]
        picks += [(i, False) for i in rng.choice(other, min(2, len(other)), replace=False)]
        for i, lab in picks:
            rows.append({"query": q, "case": bank.question(int(i)), "case_label": bank.label_str(int(i)),
                         "plan": bank.plan(int(i)), "truth_label": lab})
    return rows


def pm_selector_rows(world: Any, bank: Any, queries: Any, qrels: Any, *, seed: int, quick: bool, tmp: Path,
                     track: Callable, depth: int, notes: list[str]) -> list[dict[str, Any]]:
    try:
        from agentfly_sim.agents import ScriptedExecutor, ScriptedJudge
        from agentfly_sim.classifier import CaseRetriever, make_untrained_checkpoint
        from agentfly_sim.driver import DriverConfig, PMDriver
        from agentfly_sim.plans import build_icl_text
        from agentfly_sim.training import TrainConfig  # noqa: F401
    except ImportError as exc:
        raise PMUnavailable(f"agentfly_sim driver/trainer not available ({exc})") from None

    from benchmarks.worlds.cbr_agents import WorldPlanner

    n_burn = 3 if quick else 60
    n_fam = 6 if quick else 100
    epochs = 3 if quick else 10
    test_q = queries.questions()
    burn = world.queries(n_burn, seed=seed + 3000, exclude=test_q)
    fam_q = world.queries(n_fam, seed=seed + 4000, exclude=test_q + burn.questions())
    lookup = {bank.question(i): (int(bank.family[i]), int(bank.entity[i])) for i in range(len(bank))}
    lookup.update({q: (int(f), int(e)) for q, f, e in zip(burn.questions(), burn.family, burn.entity, strict=True)})
    pool = [build_icl_text(r["case"], r["plan"]) for r in bank.pm_records()]
    rows: list[dict[str, Any]] = []

    # 1. burn-in run of the PM driver from an untrained-head checkpoint
    t0 = time.perf_counter()
    for d in ("client", "memory", "data", "result"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    bank.write_jsonl(tmp / "memory" / "memory.jsonl", kind="pm")
    data = burn.write_dataset(tmp / "data" / "burn_in.jsonl")
    ckpt0 = make_untrained_checkpoint(tmp / "memory" / "untrained.pt", seed=seed)
    retr0 = CaseRetriever(ckpt0, device="cpu", cache_case_vectors=True)
    cfg = DriverConfig(memory_jsonl_path=str(tmp / "memory" / "memory.jsonl"), dataset_path=str(data),
                       result_path=str(tmp / "result" / "burn_in.jsonl"),
                       training_data_path=str(tmp / "memory" / "training_data.jsonl"), pm_cache_case_vectors=True)
    driver = PMDriver(tmp / "client", WorldPlanner(world, lookup, seed=seed), ScriptedExecutor(),
                      ScriptedJudge("match"), retriever=retr0, config=cfg, out=io.StringIO())
    summary = driver.run()
    pairs_path = tmp / "memory" / "training_data.jsonl"
    pairs = [json.loads(x) for x in pairs_path.read_text(encoding="utf-8").splitlines() if x.strip()]
    burn_s = time.perf_counter() - t0
    by_q: dict[str, set] = {}
    for p in pairs:
        by_q.setdefault(p["query"], set()).add(bool(p["truth_label"]))
    burn_info = {"burn_in_questions": summary.processed, "pairs": len(pairs),
                 "pairs_truth_true": sum(1 for p in pairs if p["truth_label"]),
                 "queries_with_mixed_truth_label": sum(1 for v in by_q.values() if len(v) > 1)}

    # untrained head (the burn-in checkpoint) as a context row; its cache already holds the bank's vectors
    t0 = time.perf_counter()
    ranks = _rank_all(retr0, pool, test_q, depth)
    rows.append({"selector": "PM untrained head (bootstrap ckpt)", "rankings": ranks,
                 "seconds": time.perf_counter() - t0})

    # 2. trained on the burn-in pairs
    t0 = time.perf_counter()
    ckpt1, info1 = _train(pairs_path, tmp / "ckpt_burn_in", seed, epochs)
    ranks = _rank_all(CaseRetriever(ckpt1, device="cpu", cache_case_vectors=True), pool, test_q, depth)
    rows.append({"selector": "PM classifier (burn-in pairs)", "rankings": ranks,
                 "seconds": burn_s + time.perf_counter() - t0, **{f"train_{k}": v for k, v in info1.items()},
                 **burn_info,
                 "train_note": (f"burn-in of {burn_info['burn_in_questions']} questions wrote {len(pairs)} pairs "
                                f"({burn_info['pairs_truth_true']} with truth_label true; queries with mixed "
                                f"truth_label: {burn_info['queries_with_mixed_truth_label']}); trainer "
                                f"(--use_plan --freeze_backbone, lr 1e-3, {epochs} epochs, row-level split) val AUC "
                                f"{_fmt(info1['val_auc'])} with {info1['val_rows_query_in_train']}/"
                                f"{info1['val_rows']} validation rows sharing their query with train.")})

    # 3. trained on family-match labels
    t0 = time.perf_counter()
    fam_path = tmp / "family_pairs.jsonl"
    with fam_path.open("w", encoding="utf-8") as fh:
        for r in family_pairs(world, bank, fam_q, seed):
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    ckpt2, info2 = _train(fam_path, tmp / "ckpt_family", seed, epochs)
    ranks = _rank_all(CaseRetriever(ckpt2, device="cpu", cache_case_vectors=True), pool, test_q, depth)
    rows.append({"selector": "PM classifier (family labels)", "rankings": ranks, "seconds": time.perf_counter() - t0,
                 **{f"train_{k}": v for k, v in info2.items()},
                 "train_note": (f"{n_fam} training queries x 8 cases labelled by family match (4 same family, "
                                f"2 sibling family, 2 other); same trainer settings; val AUC {_fmt(info2['val_auc'])}.")})
    return rows


def _fmt(x: Any) -> str:
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.3f}"
