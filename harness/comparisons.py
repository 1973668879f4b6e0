"""Intervals and paired comparisons computed from per-probe tables: what ``memsim compare`` prints and what a
bench's headline table and "Differences" section are rendered from.

An *entry* is a labelled row of a run: ``(label, run, row)``. Entries of one call are aligned on the probe keys
their runs share within the probe set (one run: every probe of the set), and one
:class:`~harness.stats.intervals.Resampler` over those probes serves every row interval and every pair:

- a sweep's table (it has a ``seed`` column): two-level resampling, seeds then probes within each seed;
- a table whose metadata says ``stratify`` (LoCoMo: the clusters are conversations): probes resampled within
  each cluster, inference conditional on these clusters;
- otherwise probes resampled as one set (LongMemEval: every question is its own cluster).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harness.probes import ProbeRun, pivot
from harness.stats import ALPHA, RESAMPLES, Resampler, compare, row_intervals
from harness.stats.intervals import SEED

Entry = tuple[str, ProbeRun, str]
"""(label, run, row)."""


def resampling_plan(run: ProbeRun) -> tuple[str, str | None]:
    """(strata column, clusters mode) for a run: ``("seed", "random")`` for a sweep, ``("cluster", "fixed")``
    when its metadata says ``stratify``, else ``("cluster", None)`` (no strata)."""
    if "seed" in run.table.column_names:
        return "seed", "random"
    return "cluster", ("fixed" if run.meta.get("stratify") else None)


def aligned(entries: Sequence[Entry], metrics: Sequence[str], where: Mapping[str, Any] | None,
            strata: str = "cluster") -> tuple[list[tuple[Any, ...]], list[str], dict[str, dict[str, np.ndarray]]]:
    """Per metric and entry label, the values over the probe keys that every entry's run has in the probe set
    (in the first run's order), with each key's stratum label (from the first run)."""
    by_run: dict[int, tuple[ProbeRun, list[str]]] = {}
    for _, run, row in entries:
        by_run.setdefault(id(run), (run, []))[1].append(row)
    piv = {rid: pivot(run.table, metrics, list(dict.fromkeys(rows)), where, strata=strata)
           for rid, (run, rows) in by_run.items()}
    first_keys, first_labels, _ = piv[id(entries[0][1])]
    shared = set(first_keys)
    for keys, _, _ in piv.values():
        shared &= set(keys)
    pick = [i for i, k in enumerate(first_keys) if k in shared]
    keys = [first_keys[i] for i in pick]
    out: dict[str, dict[str, np.ndarray]] = {m: {} for m in metrics}
    for label, run, row in entries:
        pkeys, _, arrays = piv[id(run)]
        pos = {k: i for i, k in enumerate(pkeys)}
        take = np.asarray([pos[k] for k in keys], dtype=np.int64)
        for m in metrics:
            out[m][label] = arrays[m][row][take]
    return keys, [first_labels[i] for i in pick], out


def comparison_report(entries: Sequence[Entry], pairs: Sequence[tuple[str, str]], metrics: Sequence[str],
                      where: Mapping[str, Any] | None = None, *, probe_set: str = "all", alpha: float = ALPHA,
                      resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, Any]:
    """Each entry's interval on each metric and every pair's comparison (Holm over pairs x metrics), as one
    JSON-able document (see :mod:`harness.stats` for the methods)."""
    run0 = entries[0][1]
    strata_col, clusters = resampling_plan(run0)
    keys, labels, values = aligned(entries, metrics, where, strata_col)
    if not keys:
        raise ValueError("the runs share no probe in this probe set")
    rs = Resampler(len(keys), labels if clusters else None, resamples=resamples, seed=seed,
                   clusters=clusters or "fixed")
    rows: dict[str, dict[str, Any]] = {}
    for m in metrics:
        kind = run0.kinds.get(m, "mean")
        ivs = row_intervals(np.stack([values[m][lab] for lab, _, _ in entries]), kind, rs)  # type: ignore[arg-type]
        rows[m] = {lab: iv.to_dict() for (lab, _, _), iv in zip(entries, ivs, strict=True)}
    results = compare(values, pairs, rs, alpha=alpha, seed=seed)
    return {
        "probe_set": probe_set, "where": dict(where or {}), "n_probes": len(keys),
        "n_clusters": len(set(labels)), "strata": strata_col if clusters else None,
        "method": {"resampling": rs.describe(), "intervals": "Wilson (Clopper-Pearson when all equal) for 0/1 "
                   "metrics, BCa bootstrap (percentile where BCa is undefined) otherwise; 95%, unadjusted",
                   "differences": "paired bootstrap of the per-probe differences, each bound the farther of the "
                   "expanded percentile and the Student t interval (the expanded percentile alone with two-level "
                   "resampling); 95%, unadjusted",
                   "test": "two-sided paired randomization test (sign flips), p = (b + 1) / (m + 1)",
                   "correction": f"Holm over {len(results)} comparison(s)", "alpha": alpha,
                   "kinds": {m: run0.kinds.get(m, "mean") for m in metrics}},
        "rows": rows,
        "pairs": [r.to_dict(alpha) for r in results],
    }


def headline_intervals(run: ProbeRun, rows: Sequence[str], metrics: Sequence[str],
                       where: Mapping[str, Any] | None = None, *, resamples: int = RESAMPLES, seed: int = SEED
                       ) -> dict[str, dict[str, Any]]:
    """``{metric: {row: interval dict}}`` over one run's probe set: the numbers of a headline table."""
    entries = [(r, run, r) for r in rows]
    return comparison_report(entries, [], metrics, where, resamples=resamples, seed=seed)["rows"]
