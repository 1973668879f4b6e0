"""``memsim bench sweep CONFIG.yaml``: a grid of seeds x configurations x sizes, with 95% intervals and paired tests.

A sweep is described by a YAML file (see ``benchmarks/sweeps/*.yaml``)::

    name: cbr-loop                # results go to sweep-<name>.{json,md,png,probes.parquet}
    benchmark: cbr-loop           # selectors | cbr-loop | locomo
    seeds: [0, 1, 2, 3, 4]        # or a count: 5 means 0..4
    sizes:                        # each merged into the cell's parameters
      - {rounds: 5, per_round: 80}
    configs:                      # what runs inside one cell (benchmark specific, see below)
      - {arm: np, k: 8}
      - {arm: pm, k: 8}
    metric: mean_accuracy         # the first metric of the tables and of the Differences
    metrics: [mean_accuracy, final_accuracy]   # columns of the table (default: metric only)
    compare:                      # the comparator pairs (display names), fixed before the run
      - ["NP (pooler) K=8", "PM (classifier) K=8"]
    workers: 2                    # processes (local) or concurrent tasks (Ray, local cluster)

Every cell is a pure function of ``{"benchmark", "seed", "config", "size"}``
(:func:`benchmarks.sweep_cells.run_cell`): it builds its own world from the seed and returns its rows and the
per-probe values behind them. The local executor (a process pool) and the Ray executor
(:mod:`benchmarks.sweep_exec`) therefore return identical rows for identical cells; only ``seconds`` differs.

Cells per benchmark:

- ``selectors``: config ``{"selectors": [oracle, np_pooler, np_mean, bm25, rrf, recency, random, pm]}`` (any
  subset; ``rrf`` needs ``bm25`` and ``np_mean``), size ``{"n_cases", "n_queries"}``. Same seeds and code path as
  ``memsim bench selectors`` (world ``seed``, queries ``seed + 1000``, random ranking ``seed``); the real-corpus
  section is not part of a cell. One row per selector (``pm`` gives three rows); a probe is a query.
- ``cbr-loop``: config ``{"arm": none|np|np-mean|pm|oracle, "k": K}``, size ``{"rounds", "per_round"}``. Same
  code path as ``memsim bench cbr-loop`` (:func:`benchmarks.cbr_loop.run_arm`). One row per cell; a probe is a
  question of the arm's rounds (every arm of a seed gets the same questions).
- ``locomo``: config ``{"arms": "a,b", "k": [4, 8], "data": PATH}``, size ``{"conversation": "conv-26",
  "quick": false}``; the arms of ``memsim bench locomo`` over that conversation (the data path defaults to
  ``$MEMSIM_LOCOMO_DATA``, else the copy ``memsim data fetch locomo`` placed in the data folder). One row per
  delivered row, headline metrics only (no timings); a probe is a headline question.

Results: ``sweep-<name>.probes.parquet`` (every (seed, probe, row) with its metrics), and from it the JSON's
``aggregate``, the page and the figure (:mod:`benchmarks.sweep_stats`: per row the mean over seeds and probes
with its two-level bootstrap interval; per ``compare`` pair and table metric the paired difference by (seed,
probe), its interval, the randomization test and Holm's correction over pairs x metrics). Selector sweeps also
write TREC run and qrels files in ``sweep-<name>/``. Modules: :mod:`benchmarks.sweep_config` (the file),
:mod:`benchmarks.sweep_cells` (a cell), :mod:`benchmarks.sweep_exec` (executors), :mod:`benchmarks.sweep_stats`
(the table and its numbers), :mod:`benchmarks.sweep_report` (page and figure).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Literal

from benchmarks.common import machine_description, write_results
from benchmarks.sweep_cells import cbr_row_id, run_cell
from benchmarks.sweep_config import (
    BENCHMARKS,
    CBR_METRICS,
    CBR_NAMES,
    CELL_MODELS,
    CELL_ONLY,
    LOCOMO_METRICS,
    SEED_LIMIT,
    SELECTOR_ROWS,
    SELECTOR_STEPS,
    SweepConfig,
    cells,
    known_metrics,
    load_config,
    row_names,
    selector_metrics,
    size_label,
)
from benchmarks.sweep_exec import Track, _no_track, import_ray, ray_session, run_local, run_ray
from benchmarks.sweep_report import figure, render_markdown
from benchmarks.sweep_stats import apply_table, json_cells, pair_metrics, write_outputs

__all__ = [
    "BENCHMARKS", "CBR_METRICS", "CBR_NAMES", "CELL_MODELS", "CELL_ONLY", "LOCOMO_METRICS", "SEED_LIMIT",
    "SELECTOR_ROWS", "SELECTOR_STEPS", "SweepConfig", "apply_table", "cbr_row_id", "cells", "figure", "import_ray",
    "known_metrics", "load_config", "pair_metrics", "ray_session", "render_markdown", "rerender", "row_names",
    "run", "run_cell", "run_local", "run_ray", "selector_metrics", "size_label",
]


def run(config_path: Path, out_dir: Path, *, executor: Literal["local", "ray"] = "local", address: str | None = None,
        workers: int | None = None, track: Track = _no_track) -> list[Path]:
    """Run the sweep in ``config_path`` and write ``sweep-<name>.{json,md,png,probes.parquet}`` (and, for ranked
    rows, the TREC files in ``sweep-<name>/``) to ``out_dir``."""
    cfg = load_config(config_path)
    if executor == "ray":
        import_ray()
    n_workers = workers or cfg.workers
    todo = cells(cfg)
    t0 = time.perf_counter()
    if executor == "ray":
        results = run_ray(todo, n_workers, address=address, track=track)
    elif executor == "local":
        results = run_local(todo, n_workers, track=track)
    else:
        raise ValueError(f"unknown executor {executor!r}; choose local or ray")
    name = f"sweep-{cfg.name}"
    out_dir.mkdir(parents=True, exist_ok=True)
    probes, trec = write_outputs(out_dir, name, cfg, results)
    payload = {"name": name, "config": cfg.model_dump(),
               "meta": {"machine": machine_description(), "executor": executor, "address": address,
                        "workers": n_workers, "wall_s": time.perf_counter() - t0,
                        "cell_seconds": float(sum(r["seconds"] for r in results)),
                        "config_path": str(config_path)},
               "cells": json_cells(results)}
    apply_table(payload, probes)
    return [*write_results(out_dir, name, payload, render_markdown, figure(payload)), probes, *trec]


def recompute(run: Any, payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a sweep's results JSON holds that its per-probe table determines (``aggregate``: per size, each row's
    means and intervals and the Differences) and the same recomputed from ``run`` (the table read back)."""
    again = {"config": payload["config"], "cells": payload["cells"]}
    apply_table(again, run)
    return {"aggregate": payload["aggregate"]}, {"aggregate": again["aggregate"]}


def rerender(json_path: Path) -> list[Path]:
    """Rewrite the JSON, Markdown and PNG of a finished sweep from its JSON and its per-probe table (no re-run)."""
    json_path = Path(json_path)
    payload = json.loads(json_path.read_text(encoding="utf-8"))
    apply_table(payload, json_path.with_name(f"{payload['name']}.probes.parquet"))
    return write_results(json_path.parent, payload["name"], payload, render_markdown(payload), figure(payload))
