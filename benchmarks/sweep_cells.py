"""One cell of a sweep: a pure function of ``{"benchmark", "seed", "config", "size"}`` (:func:`run_cell`).

A cell builds its own world from the seed, runs in its own temporary directory with torch and BLAS pinned to one
thread, and returns

- ``rows``: one per row it measured, ``{"name", <metric>: mean, ...}`` (the cell's own means, kept in the
  results JSON);
- ``probes``: the per-probe values behind those means, one flat dict per (probe, row) in the per-probe table's
  format (:mod:`harness.probes`; ``row`` is the row id, ``cluster`` left for the sweep to set from the size);
- ``row_ids``: display name -> row id;
- ``ranked`` (selectors only): each row's rankings and the queries' graded relevance, for the TREC files.

The local executor (a process pool) and the Ray executor therefore return identical results for identical cells;
only ``seconds`` and ``pid`` differ.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.cbr_probes import row_id as cbr_row_id
from benchmarks.common import set_torch_threads
from benchmarks.sweep_config import CBR_NAMES, LOCOMO_METRICS, SELECTOR_ROWS, SELECTOR_STEPS


def run_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """Run one cell; ``{"cell", "rows", "probes", "row_ids", "ranked", "seconds", "pid"}`` (see the module doc).
    Pure in everything but ``seconds`` and ``pid``."""
    from threadpoolctl import threadpool_limits

    import harness  # noqa: F401  (offline environment variables)

    set_torch_threads(1)
    t0 = time.perf_counter()
    bench = cell["benchmark"]
    cells_fn = {"selectors": _selectors_cell, "cbr-loop": _cbr_cell, "locomo": _locomo_cell}
    if bench not in cells_fn:
        raise ValueError(f"unknown benchmark {bench!r}")
    # BLAS pinned to one thread as well: its summation order depends on the thread count, which moves near-tied
    # scores (e.g. deep in the rankings that RRF fuses); pinned, a cell gives the same rows in any worker process.
    with threadpool_limits(1):
        out = cells_fn[bench](cell["seed"], cell["config"], cell["size"])
    return {"cell": cell, **out, "seconds": time.perf_counter() - t0, "pid": os.getpid()}


def _selectors_cell(seed: int, config: dict[str, Any], size: dict[str, Any]) -> dict[str, Any]:
    """The selectors of ``config['selectors']`` on the world of ``seed``, as ``memsim bench selectors`` runs them
    (:func:`benchmarks.selectors.rank_selectors`)."""
    from benchmarks import selector_probes as sp
    from benchmarks import selectors as sel
    from benchmarks.metrics import evaluate_run
    from benchmarks.worlds import CBRWorld

    steps = [s for s in SELECTOR_STEPS if s in config["selectors"]]
    if "rrf" in steps and not {"bm25", "np_mean"} <= set(steps):
        raise ValueError("the rrf selector needs bm25 and np_mean in the same config")
    world = CBRWorld(seed=seed)
    bank = world.bank(int(size.get("n_cases", 2000)), seed=seed)
    queries = world.queries(int(size.get("n_queries", 300)), seed=seed + 1000)
    qrels = world.qrels(queries, bank)
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="memsim-sweep-") as td:
        ranked = sel.rank_selectors(steps, world, bank, queries, qrels, seed=seed,
                                    quick=bool(size.get("quick", False)),
                                    faithful_checks=int(config.get("np_faithful_checks", 0)), notes=notes,
                                    tmp_dir=Path(td))
    if "pm" in steps and not any(name in SELECTOR_ROWS["pm"] for name, *_ in ranked):
        raise RuntimeError("PM rows unavailable: " + "; ".join(notes))
    rows = [{"name": name, **evaluate_run([list(r) for r in ranks], qrels, positive_label=bank.label)}
            for name, ranks, *_ in ranked]
    by_id = {sp.row_id(name): ranks for name, ranks, *_ in ranked}
    types = [f.entity_type for f in world.families]
    probes = sp.probe_rows(by_id, qrels, bank.label, queries.family, types, cluster=lambda j: "", seed=seed)
    trec = {"rankings": {r: [[int(i) for i in x] for x in ranks] for r, ranks in by_id.items()},
            "qrels": [{int(i): int(g[i]) for i in np.flatnonzero(g >= 1)} for g in qrels]}
    return {"rows": rows, "probes": probes, "row_ids": {n: sp.row_id(n) for n, *_ in ranked}, "ranked": trec}


def _cbr_cell(seed: int, config: dict[str, Any], size: dict[str, Any]) -> dict[str, Any]:
    """One arm of the CBR loop on the world of ``seed``, as ``memsim bench cbr-loop`` runs it. Its probes are the
    arm's questions (``r<round>.<index>``, the same questions for every arm of a seed)."""
    from benchmarks import cbr_loop as cbr
    from benchmarks.cbr_probes import question_probes
    from benchmarks.worlds import CBRWorld

    arm = str(config["arm"])
    if arm not in cbr.LABELS:
        raise ValueError(f"unknown cbr-loop arm {arm!r}; choose one of {', '.join(cbr.LABELS)}")
    k = int(config.get("k", 8))
    rounds = int(size.get("rounds", 5))
    per_round = int(size.get("per_round", 80))
    world = CBRWorld(seed=seed)
    sets = cbr._round_sets(world, rounds, per_round, seed)
    lookup = cbr._lookup(sets)
    np_selector = None
    if arm == "np":
        from agentfly_sim.embedding import NpSelector

        np_selector = NpSelector("cpu", cached=True)
    with tempfile.TemporaryDirectory(prefix="memsim-sweep-") as td:
        a = cbr.run_arm(arm, world, sets, lookup, Path(td) / f"{arm}_k{k}", k=k, seed=seed, np_selector=np_selector)
    rs = a["rounds"]
    name = f"{CBR_NAMES[arm]} K={k}"
    row: dict[str, Any] = {"name": name, "mean_accuracy": cbr._mean_acc(a),
                           "final_accuracy": rs[-1]["accuracy"], "bank_cases": a["bank_cases"],
                           "share_with_positive_example": float(np.mean([r["share_with_positive_example"] for r in rs])),
                           "share_copied_right_plan": float(np.mean([r["share_copied_right_plan"] for r in rs]))}
    for r in rs:
        row[f"round_{r['round']}"] = r["accuracy"]
    rid = cbr_row_id(arm, k)
    probes = [{**p, "seed": seed} for p in question_probes(a, rid, rounds, cluster="")]
    return {"rows": [row], "probes": probes, "row_ids": {name: rid}, "ranked": None}


def _locomo_cell(seed: int, config: dict[str, Any], size: dict[str, Any]) -> dict[str, Any]:
    """Every delivered row of the LoCoMo arms on one conversation, as ``memsim bench locomo`` runs them.

    config ``{"arms": "a,b" (default: the benchmark's), "k": [4, 8], "data": PATH (default $MEMSIM_LOCOMO_DATA, else
    the fetched copy)}``, size ``{"conversation": "conv-26", "quick": false}``. Rows carry the headline (categories
    1-4) metrics of :data:`LOCOMO_METRICS` only: latencies and ingest times are measurements, not functions of the
    cell. Its probes are the headline probes of the conversation, with the same metric names."""
    import shutil

    from benchmarks import locomo as bl
    from harness.workloads.arms import parse_arms
    from harness.workloads.locomo import load_locomo, resolve_locomo_path, select_conversations
    from harness.workloads.metrics import summarize
    from harness.workloads.runner import run_conversation

    quick = bool(size.get("quick", False))
    names = parse_arms(config.get("arms"), quick)
    loaded = load_locomo(resolve_locomo_path(config.get("data")))
    conv = select_conversations(loaded, [str(size["conversation"])])[0] if "conversation" in size else loaded[0]
    others = tuple(c for c in loaded if c.sample_id != conv.sample_id)
    if quick:
        conv = bl.quick_slice(conv)
    work = Path(tempfile.mkdtemp(prefix="memsim-sweep-locomo-"))
    try:
        res = run_conversation(conv, names, work, k_values=tuple(int(k) for k in config.get("k", (4, 8))),
                               others=others, quick=quick, seed=seed)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    for name, summ in summarize(res["records"]).items():
        head = summ["headline"]
        rows.append({"name": name, **{m: head[m] for m in LOCOMO_METRICS if m in head}})
    rows.sort(key=lambda r: r["name"])
    probes = [locomo_probe(rec, seed) for rec in res["records"] if _headline(rec)]
    return {"rows": rows, "probes": probes, "row_ids": {r["name"]: r["name"] for r in rows}, "ranked": None}


def _headline(rec: dict[str, Any]) -> bool:
    from harness.workloads.metrics import HEADLINE_CATEGORIES

    return rec["category"] in HEADLINE_CATEGORIES


LOCOMO_COLUMNS = {"evidence_recall": "recall", "all_evidence_rate": "all_evidence", "stored_recall": "stored_recall",
                  "delivered_turns": "delivered_turns", "tokens_mean": "tokens", "answer_present": "answer_present"}
"""Each LoCoMo sweep metric -> the probe record's key it is the mean of (over the probes where it is not None,
as :func:`harness.workloads.metrics.summarize_group` takes it)."""


def locomo_probe(rec: dict[str, Any], seed: int) -> dict[str, Any]:
    """A LoCoMo probe record as a sweep's per-probe row: ids, and each metric of :data:`LOCOMO_METRICS` under
    its sweep name (no text: the record's delivered text is never read)."""
    out: dict[str, Any] = {"workload": "locomo", "cluster": str(rec["conversation"]), "probe": str(rec["probe"]),
                           "category": str(rec["category"]), "abstention": False,
                           "has_evidence": bool(rec.get("n_evidence")), "row": str(rec["row"]),
                           "arm": str(rec["row"]).split("@")[0], "seed": int(seed)}
    for col, key in LOCOMO_COLUMNS.items():
        v = rec.get(key)
        out[col] = float(v) if isinstance(v, bool) else v
    return out
