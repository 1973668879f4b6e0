"""The per-probe layer the comparison benches share: their table, every aggregate read from it, the intervals and
paired comparisons of their pages, and their TREC run files.

A LoCoMo design run, the LoCoMo paper protocol, a LongMemEval design run and the LongMemEval protocol each write
``<name>.probes.parquet`` (:mod:`harness.probes`: one row per probe and compared row, ids and numbers only, with
the run's configuration, data label and code identity) through the folder their ``run()`` is given. Then:

- **every aggregate** of the results JSON is computed from that table by :func:`harness.probes.aggregate`
  (:func:`group_summaries` gives the LoCoMo/LongMemEval summary of a probe set in the shape
  ``harness.workloads.metrics.summarize_group`` had, so the pages and the README read the same keys);
- **the statistics** of the page (:func:`statistics`): each headline number's 95% interval and every comparator
  pair fixed in the bench's configuration (:func:`harness.comparisons.comparison_report`: one shared resample
  matrix, Holm over the pairs times the headline metrics, per-cluster differences);
- **the TREC files** (:class:`TrecFiles`): ``<out>/<name>/runs/<row>.<level>.trec`` per ranked row and level and
  ``<out>/<name>/qrels.<level>.trec`` per level (:mod:`harness.trec`).

A test recomputes every committed aggregate from the committed table with the same functions
(``tests/benchmarks/test_probe_tables.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from harness.probes import ProbeRun, aggregate, from_probe_record, metric_columns, probe_table, write_probes

SUMMARY_METRICS = ("evidence_recall", "all_evidence", "stored_recall", "delivered_turns", "tokens", "tokens_cl100k",
                   "chars4", "answer_present", "latency_ms", "design_ms", "arm_design_ms", "harness_ms", "f1",
                   "answer_error", "is_ranked")
BINARY = ("all_evidence", "official_all_evidence", "answer_error", "is_ranked")
"""Metric columns that are 0/1 outcomes (Wilson intervals) whatever values a small run happens to hold."""


# ------------------------------------------------------------------------------------------------ the table
def record_row(rec: Mapping[str, Any], *, workload: str, arm: str, extra: Sequence[str] = (),
               cluster: str | None = None, probe: str | None = None) -> dict[str, Any]:
    """One table row from a runner record (:func:`harness.probes.from_probe_record`), plus ``is_ranked``, the
    answerer's ``answer_error`` (with ``--lm``) and the record keys ``extra`` names (a bench's own per-probe
    measurements); ``cluster`` / ``probe`` replace the ids (a LongMemEval question id met twice in a file)."""
    row = from_probe_record(rec, workload=workload, arm=arm)
    row["is_ranked"] = bool(rec.get("is_ranked"))
    if "f1" in rec:
        row["answer_error"] = "answer_error" in rec
    for k in extra:
        row[k] = rec.get(k)
    if cluster is not None:
        row["cluster"] = cluster
    if probe is not None:
        row["probe"] = probe
    return row


def kinds_of(table: pa.Table) -> dict[str, str]:
    """Per metric column: ``binary`` for boolean columns, :data:`BINARY` and ranked ``recall_any@k`` /
    ``recall_all@k``, else ``mean`` (fixed by name, so a small run whose recalls happen to be 0 or 1 is not
    treated as a 0/1 outcome)."""
    out = {}
    for m in metric_columns(table):
        tail = m.rsplit(".", 1)[-1]
        binary = (pa.types.is_boolean(table.schema.field(m).type) or m in BINARY
                  or tail.startswith(("recall_any@", "recall_all@")))
        out[m] = "binary" if binary else "mean"
    return out


def write_table(out_dir: Path, name: str, rows: Iterable[Mapping[str, Any]], *, data: str, config: Mapping[str, Any],
                probe_sets: Mapping[str, Mapping[str, Any]], stratify: bool, headline_metrics: Sequence[str],
                fault_hook: Callable[[str], None] | None = None) -> ProbeRun:
    """Build the table, write ``<out_dir>/<name>.probes.parquet`` and return it as a :class:`ProbeRun` (what the
    file holds, so every aggregate the run computes next is the one a reader recomputes from the file)."""
    table = probe_table(rows)
    kinds = kinds_of(table)
    path = write_probes(Path(out_dir) / f"{name}.probes.parquet", table, data=data, config=dict(config),
                        kinds=kinds, probe_sets=probe_sets, stratify=stratify,
                        headline_metrics=[m for m in headline_metrics if m in kinds], fault_hook=fault_hook)
    meta = {"data": data, "config": dict(config), "kinds": kinds, "probe_sets": {k: dict(v) for k, v in
                                                                                  probe_sets.items()},
            "stratify": stratify, "headline_metrics": list(headline_metrics)}
    return ProbeRun(path, table, meta)


# ------------------------------------------------------------------------------------------------ aggregates
def _stat(entry: Mapping[str, Any], metric: str, key: str = "mean") -> Any:
    return (entry["metrics"].get(metric) or {}).get(key)


def _ranked_columns(table: pa.Table) -> list[str]:
    from harness.workloads.metrics import RANKED_LEVELS, RANKED_METRICS

    return [f"{lv}.{m}" for lv in RANKED_LEVELS for m in RANKED_METRICS if f"{lv}.{m}" in table.column_names]


def group_summaries(table: pa.Table, where: Mapping[str, Any] | None = None,
                    extra_means: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Per row (table order) over the probe set ``where``: the summary the pages read (recall, all-evidence rate,
    stored recall, tokens, answer tokens present, latency percentiles, ranked means, F1 with ``--lm``), each
    from :func:`harness.probes.aggregate`; ``extra_means`` adds ``<name>`` (mean) and ``n_<name>`` (count) for
    more columns. Rows without a probe in the set are left out."""
    from harness.workloads.metrics import RANKED_LEVELS, RANKED_METRICS

    ranked = _ranked_columns(table)
    names = [m for m in (*SUMMARY_METRICS, *ranked, *extra_means) if m in table.column_names]
    agg = aggregate(table, where, names, percentiles=(50, 95))
    out: dict[str, dict[str, Any]] = {}
    for row, e in agg.items():
        n = e["n_probes"]
        scored = (e["metrics"].get("evidence_recall") or {}).get("n", 0)
        s: dict[str, Any] = {
            "n_probes": n, "n_scored": scored, "n_no_evidence": n - scored,
            "evidence_recall": _stat(e, "evidence_recall"), "all_evidence_rate": _stat(e, "all_evidence"),
            "stored_recall": _stat(e, "stored_recall"), "delivered_turns": _stat(e, "delivered_turns"),
            "tokens_mean": _stat(e, "tokens"), "tokens_median": _stat(e, "tokens", "p50"),
            "tokens_cl100k_mean": _stat(e, "tokens_cl100k"), "tokens_cl100k_median": _stat(e, "tokens_cl100k", "p50"),
            "chars4_mean": _stat(e, "chars4"), "answer_present": _stat(e, "answer_present"),
            "latency_ms_median": _stat(e, "latency_ms", "p50"), "latency_ms_p95": _stat(e, "latency_ms", "p95"),
            "design_ms_median": _stat(e, "design_ms", "p50"), "design_ms_p95": _stat(e, "design_ms", "p95"),
            "arm_design_ms_median": _stat(e, "arm_design_ms", "p50"),
            "harness_ms_median": _stat(e, "harness_ms", "p50"), "harness_ms_p95": _stat(e, "harness_ms", "p95"),
            "ranked": None,
        }
        if (_stat(e, "is_ranked") or 0) > 0:
            s["ranked"] = {"n": (e["metrics"].get(ranked[0]) or {}).get("n", 0) if ranked else 0}
            for lv in RANKED_LEVELS:
                s["ranked"][lv] = {m: _stat(e, f"{lv}.{m}") for m in RANKED_METRICS}
        if "f1" in table.column_names:
            s["f1"] = _stat(e, "f1")
            s["n_answered"] = (e["metrics"].get("f1") or {}).get("n", 0)
            err = e["metrics"].get("answer_error") or {}
            s["n_answer_errors"] = round((err.get("mean") or 0.0) * err.get("n", 0))
        for m in extra_means:
            s[m] = _stat(e, m)
            s[f"n_{m}"] = (e["metrics"].get(m) or {}).get("n", 0)
        out[row] = s
    return out


def empty_summary() -> dict[str, Any]:
    """The summary of a row without a probe in the set (what a summary of no records always was)."""
    keys = ("evidence_recall", "all_evidence_rate", "stored_recall", "delivered_turns", "tokens_mean",
            "tokens_median", "tokens_cl100k_mean", "tokens_cl100k_median", "chars4_mean", "answer_present",
            "latency_ms_median", "latency_ms_p95", "design_ms_median", "design_ms_p95", "arm_design_ms_median",
            "harness_ms_median", "harness_ms_p95", "ranked")
    return {"n_probes": 0, "n_scored": 0, "n_no_evidence": 0, **dict.fromkeys(keys)}


def metric_means(table: pa.Table, prefix: str = "meta.") -> dict[str, dict[str, float]]:
    """Per row: the mean of every ``<prefix><key>`` column over all its probes (a design's own per-delivery
    measurements), keyed by ``<key>``; columns a row has no value in are left out."""
    cols = [c for c in table.column_names if c.startswith(prefix)]
    agg = aggregate(table, None, cols)
    return {row: {c[len(prefix):]: st["mean"] for c, st in e["metrics"].items() if st["mean"] is not None}
            for row, e in agg.items()}


# ------------------------------------------------------------------------------------------------ statistics
def present_pairs(pairs: Iterable[Sequence[str]], rows: Iterable[str]) -> list[tuple[str, str]]:
    """The configured pairs whose two rows the run has (a quick run or an arm subset lacks some)."""
    have = set(rows)
    return [(str(a), str(b)) for a, b in pairs if a in have and b in have and a != b]


def statistics(run: ProbeRun, rows: Sequence[str], metrics: Sequence[str], where: Mapping[str, Any] | None, *,
               probe_set: str, pairs: Sequence[tuple[str, str]] = (), pair_metrics: Sequence[str] = ()
               ) -> dict[str, Any] | None:
    """The intervals of ``metrics`` for ``rows`` over the probe set ``where`` and the paired comparisons of
    ``pairs`` on ``pair_metrics`` (the page's Holm family: every pair times every one of those metrics), as one
    JSON-able document: ``{"probe_set", "where", "n_probes", "n_clusters", "strata", "method", "rows": {metric:
    {row: interval}}, "pairs": [...], "family": [...metrics]}``. None when the probe set is empty."""
    from harness.comparisons import comparison_report

    rows = [r for r in rows if r in set(run.rows)]
    metrics = [m for m in metrics if m in run.table.column_names]
    if not rows or not metrics:
        return None
    entries = [(r, run, r) for r in rows]
    try:
        out = comparison_report(entries, [], metrics, where, probe_set=probe_set)
    except ValueError:  # the runs share no probe in this probe set
        return None
    pm = [m for m in pair_metrics if m in run.table.column_names]
    if pairs and pm:
        got = comparison_report(entries, list(pairs), pm, where, probe_set=probe_set)
        out["pairs"] = got["pairs"]
        out["method"]["correction"] = got["method"]["correction"]
    out["family"] = pm if pairs else []
    return out


def interval(stats: Mapping[str, Any] | None, metric: str, row: str) -> dict[str, Any] | None:
    """The interval a statistics document holds for one metric and row (None when it has none)."""
    if not stats:
        return None
    return (stats.get("rows", {}).get(metric) or {}).get(row)


# ------------------------------------------------------------------------------------------------ TREC files
def ranked_at(ranking: Sequence[str], relevant: Iterable[str], ks: Sequence[int]) -> dict[str, float]:
    """recall_any@k, recall_all@k and ndcg_any@k (binary gains, trec_eval's discount 1/log2(rank + 1)) of one
    ranking of unique document ids against ``relevant`` (what ``trec_eval`` computes from the files)."""
    rel = set(relevant)
    out: dict[str, float] = {}
    for k in ks:
        top = list(ranking)[:k]
        hits = [1.0 if d in rel else 0.0 for d in top]
        dcg = sum(h / np.log2(i + 2) for i, h in enumerate(hits))
        ideal = sum(1 / np.log2(i + 2) for i in range(min(k, len(rel))))
        out[f"recall_any@{k}"] = float(any(hits))
        out[f"recall_all@{k}"] = float(bool(rel) and rel <= set(top))
        out[f"ndcg_any@{k}"] = float(dcg / ideal) if ideal else 0.0
    return out


class TrecFiles:
    """Rankings and relevance gathered during a run, written as TREC files at its end (see the module doc):
    ``add_qrels(level, query, docs)`` once per query and level, ``add_run(row, level, query, docs)`` per ranked
    row (``docs``: unique ids, best first; :func:`harness.trec.slots` makes them so)."""

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, dict[str, list[str]]]] = {}
        self.qrels: dict[str, dict[str, dict[str, int]]] = {}

    def add_qrels(self, level: str, query: str, relevant: Mapping[str, int]) -> None:
        if relevant:
            self.qrels.setdefault(level, {})[query] = dict(relevant)

    def add_run(self, row: str, level: str, query: str, docs: Sequence[str]) -> None:
        if docs:
            self.runs.setdefault(row, {}).setdefault(level, {})[query] = list(docs)

    def add_delivery(self, row: str, query: str, ranking: Sequence[Any] | None, evidence: Sequence[str],
                     session_of: Mapping[str, int]) -> None:
        """One delivered row of one probe at the ``turn`` and ``session`` levels (:func:`harness.trec.level_rankings`
        and :func:`harness.trec.level_qrels`); an unranked row (``ranking`` None) adds relevance only."""
        from harness.trec import level_qrels, level_rankings

        for level, rel in level_qrels(evidence, session_of).items():
            self.add_qrels(level, query, rel)
        if ranking is not None:
            for level, docs in level_rankings(ranking, session_of).items():
                self.add_run(row, level, query, docs)

    def merge(self, other: Mapping[str, Any], query: str | None = None) -> None:
        """Add what another process gathered (:meth:`to_dict`); ``query`` renames its queries (it holds one)."""
        def named(qs: Mapping[str, Any]) -> dict[str, Any]:
            return {query if query is not None else k: v for k, v in qs.items()}

        for row, levels in other["runs"].items():
            for level, qs in levels.items():
                self.runs.setdefault(row, {}).setdefault(level, {}).update(named(qs))
        for level, qs in other["qrels"].items():
            self.qrels.setdefault(level, {}).update(named(qs))

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "qrels": self.qrels}

    def keep_rows(self, rows: Iterable[str]) -> None:
        """Forget the runs of every other row (an arm that failed after delivering some probes)."""
        keep = set(rows)
        self.runs = {r: v for r, v in self.runs.items() if r in keep}

    def write(self, folder: Path, fault_hook: Callable[[str], None] | None = None,
              file_name: Callable[[str], str] = lambda row: row) -> list[Path]:
        """``folder/runs/<row>.<level>.trec`` and ``folder/qrels.<level>.trec``; ``file_name(row)`` is the name a
        row's files take (the run tag inside them too)."""
        from harness.trec import write_trec

        if not self.runs and not self.qrels:
            return []
        runs = {file_name(r): levels for r, levels in self.runs.items()}
        return write_trec(folder, runs, self.qrels, fault_hook=fault_hook)


def safe_row_name(row: str) -> str:
    """A row name usable as a file name and a TREC run tag: whitespace, ``/`` and ``\\`` become ``_`` and a
    leading ``.`` is dropped (a two-tower retriever's model paths)."""
    out = "".join("_" if c.isspace() or c in "/\\" else c for c in row).lstrip(".")
    return out or "_"
