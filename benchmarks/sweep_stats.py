"""A sweep's per-probe table and everything computed from it: the table's means, the 95% intervals of its
headline table and the Differences of its comparator pairs, per size.

**The table** (``sweep-<name>.probes.parquet``, :mod:`harness.probes`) holds one row per (seed, probe, row): the
probes of every cell, with ``seed`` set and ``cluster`` = the size (``s0``, ``s1``, ...; LoCoMo: ``s0:conv-26``), so
a probe is identified by (seed, size, probe) and two rows of one seed and size are measured on the same probes.
Every metric is of kind ``mean``: the outcomes of one seed share its world, so even a 0/1 outcome (a cbr-loop
question judged correct) is not an independent trial across seeds and gets the two-level bootstrap below, not a
Wilson interval.

**The numbers** (:func:`apply_table`), per size over its probes:

- each row's mean of each table metric: :func:`harness.probes.aggregate` over the (seed, probe) values; with the
  same number of probes per seed this is the mean over seeds of each seed's mean, the number the cells report;
- its 95% interval: the two-level bootstrap (seeds resampled, then probes within each drawn seed;
  :class:`harness.stats.Resampler` with ``clusters="random"``), BCa where defined, so the interval carries the
  variation between seeds and between probes;
- every pair of the file's ``compare`` list on every table metric (Holm's family: pairs x metrics), paired by
  (seed, probe): the paired two-level bootstrap interval of the difference, the randomization test over the
  per-(seed, probe) differences (five seed means alone cannot go below p = 1/16 with sign flips), wins/ties/
  losses, how many seeds agree in sign, and the smallest difference detectable at 80% power.

**TREC files** (selectors sweeps): ``sweep-<name>/runs/<row>.case.trec`` and ``qrels.case.trec``, query ids
``<seed>/<size>/<query>`` (:mod:`benchmarks.selector_probes` says what the level means).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.sweep_config import CELL_ONLY, SweepConfig, size_label

if TYPE_CHECKING:
    from harness.probes import ProbeRun


def pair_metrics(cfg: SweepConfig) -> list[str]:
    """The metrics of the table and of the Differences: ``metrics`` (or ``metric`` alone), ``metric`` first when
    ``metrics`` leaves it out."""
    table = cfg.table_metrics()
    return table if cfg.metric in table else [cfg.metric, *table]


def _size_index(cfg: SweepConfig) -> dict[str, int]:
    return {size_label(s): i for i, s in enumerate(cfg.sizes)}


def probe_rows(results: Sequence[Mapping[str, Any]], cfg: SweepConfig) -> list[dict[str, Any]]:
    """Every cell's probes with the cluster set to the cell's size (``s<i>``, or ``s<i>:<cluster>``)."""
    index = _size_index(cfg)
    out = []
    for res in results:
        si = index[size_label(res["cell"]["size"])]
        for p in res.get("probes") or []:
            c = p.get("cluster") or ""
            out.append({**p, "cluster": f"s{si}" + (f":{c}" if c else "")})
    return out


def size_clusters(table_rows: Sequence[Mapping[str, Any]], cfg: SweepConfig) -> dict[str, list[str]]:
    """Per size label, the clusters of its probes (its probe set)."""
    out: dict[str, list[str]] = {size_label(s): [] for s in cfg.sizes}
    labels = {f"s{i}": size_label(s) for i, s in enumerate(cfg.sizes)}
    for p in table_rows:
        lab = labels[p["cluster"].split(":", 1)[0]]
        if p["cluster"] not in out[lab]:
            out[lab].append(p["cluster"])
    return out


def write_outputs(out_dir: Path, name: str, cfg: SweepConfig, results: Sequence[Mapping[str, Any]]
                  ) -> tuple[Path, list[Path]]:
    """Write the per-probe table and (for ranked rows) the TREC files; return their paths."""
    from harness.probes import metric_columns, probe_table, write_probes

    rows = probe_rows(results, cfg)
    table = probe_table(rows)
    kinds = {m: "mean" for m in metric_columns(table)}
    sets = {f"size {lab}": {"cluster": cl} for lab, cl in size_clusters(rows, cfg).items() if cl}
    probes = write_probes(out_dir / f"{name}.probes.parquet", table, data=f"sweep {cfg.benchmark}",
                          config=cfg.model_dump(), kinds=kinds, probe_sets=sets,
                          headline_metrics=[m for m in pair_metrics(cfg) if m in kinds])
    return probes, _trec(out_dir / name, cfg, results)


def _trec(folder: Path, cfg: SweepConfig, results: Sequence[Mapping[str, Any]]) -> list[Path]:
    from benchmarks.selector_probes import LEVEL, write_trec_files
    from harness.trec import query_id

    index = _size_index(cfg)
    runs: dict[str, dict[str, dict[str, list[str]]]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for res in results:
        ranked = res.get("ranked")
        if not ranked:
            continue
        si = index[size_label(res["cell"]["size"])]
        seed = res["cell"]["seed"]
        qids = [query_id(seed, f"s{si}", j) for j in range(len(ranked["qrels"]))]
        for qid, rel in zip(qids, ranked["qrels"], strict=True):
            qrels[qid] = {f"c{int(i)}": int(g) for i, g in rel.items()}
        for row, ranks in ranked["rankings"].items():
            level = runs.setdefault(row, {}).setdefault(LEVEL, {})
            for qid, r in zip(qids, ranks, strict=True):
                level[qid] = [f"c{int(i)}" for i in r]
    if not runs:
        return []
    return write_trec_files(folder, runs, {LEVEL: qrels})


def json_cells(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The cells as the results JSON keeps them: the cell, its rows, row ids and time (probes and rankings live
    in the per-probe table and the TREC files)."""
    return [{k: v for k, v in r.items() if k not in ("probes", "ranked")} for r in results]


def apply_table(payload: dict[str, Any], probes: Path | ProbeRun) -> None:
    """``payload["aggregate"]`` from the per-probe table (see the module doc): per size, each row's means and
    intervals, the Differences of the ``compare`` pairs, and the pairs that could not be compared."""
    from benchmarks.stats_tables import present_pairs, run_stats
    from harness.probes import ProbeRun, read_probes

    cfg = SweepConfig.model_validate(payload["config"])
    run = probes if isinstance(probes, ProbeRun) else read_probes(probes)
    metrics = [m for m in pair_metrics(cfg) if m in run.metrics]
    ids: dict[str, str] = {}
    for c in payload["cells"]:
        ids.update(c.get("row_ids") or {})
    names = {v: k for k, v in ids.items()}
    sizes = []
    for si, size in enumerate(cfg.sizes):
        lab = size_label(size)
        cells = [c for c in payload["cells"] if size_label(c["cell"]["size"]) == lab]
        order = list(dict.fromkeys(ids.get(r["name"], r["name"]) for c in cells for r in c["rows"]))
        if not order:
            continue
        where = run.probe_set(f"size {lab}")
        wanted = [(ids.get(a, a), ids.get(b, b)) for a, b in cfg.compare]
        pairs, missing = present_pairs(wanted, order)
        st = run_stats(run, order, metrics, pairs, metrics, where, probe_set=f"size {lab}")
        seeds = {r: sorted({c["cell"]["seed"] for c in cells for x in c["rows"] if ids.get(x["name"]) == r})
                 for r in order}
        rows = []
        for r in order:
            agg = st["aggregate"][r]["metrics"]
            stats = {m: {"mean": agg[m]["mean"], "n": agg[m]["n"],
                         **{k: st["intervals"]["rows"][m][r][k] for k in ("lo", "hi", "method")}}
                     for m in metrics}
            rows.append({"name": names.get(r, r), "row": r, "seeds": seeds[r], "stats": stats})
        sizes.append({"size": lab, "index": si, "rows": rows, "intervals": st["intervals"],
                      "differences": st["differences"],
                      "not_compared": [{"a": names.get(a, a), "b": names.get(b, b),
                                        "missing": [names.get(x, x) for x in (a, b) if x not in order]}
                                       for a, b in missing]})
    payload["aggregate"] = {"probes": run.path.name, "metrics": metrics, "sizes": sizes,
                            "cell_only": sorted(CELL_ONLY)}
