"""``memsim bench selectors``: retrieval selectors ranked side by side on the synthetic CBR world (+ corpus section).

Rows (each ranks the whole bank for every query; metrics from :mod:`benchmarks.metrics`):

- ``oracle``: reads the hidden relevance (upper bound);
- ``NP faithful (pooler)``: agentfly_sim's NP selector (MiniLM ``pooler_output``, spec 3.3). Its rankings are
  computed through the cached-index mode, which returns the faithful ranking (spec 3.5); this run re-checks that on
  a few queries with the faithful recompute path and reports the agreement;
- ``NP mean-pooling``: the same bank questions through sentence-transformers mean pooling (``minilm-mean``);
- ``PM classifier (burn-in)``: agentfly_sim's parametric classifier trained (``--freeze_backbone``) on the pairs a
  burn-in run of the PM driver wrote, the driver bootstrapped from an untrained-head checkpoint (AGF-35/AGF-22:
  the pairs carry the query's judgement, constant within each query);
- ``PM classifier (family labels)``: the same classifier trained on family-match labels (1 iff the case is of the
  query's family), i.e. what the head can learn when the labels do carry a ranking signal;
- ``BM25``: bm25s over the bank questions; ``hybrid RRF``: reciprocal-rank fusion (c=60) of BM25 and mean pooling;
- ``recency`` (newest first) and ``random``.

The corpus section (real AgentFly files, when present) is in :mod:`benchmarks.corpus`.

Every number of the table comes from the per-probe table ``selectors.probes.parquet`` (one row per query and
selector, ids and numbers only; :mod:`benchmarks.selector_probes`): each mean with its 95% bootstrap interval over
the queries, and a Differences section for the comparator pairs fixed in
:data:`benchmarks.selector_probes.PAIRS` (paired by query, randomization test, Holm over pairs x metrics). The
rankings are written as TREC run files with graded qrels in ``selectors/`` (``runs/<row>.case.trec``,
``qrels.case.trec``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks import rankers
from benchmarks import selector_probes as sp
from benchmarks.common import machine_description, md_table, meta_block, no_progress, start_run, write_results
from benchmarks.stats_tables import differences_section, error_bar, interval_cell, method_sentence
from benchmarks.worlds import CBRWorld

DEPTH = 100
METRIC_COLS = sp.METRICS
NAME = "selectors"

if TYPE_CHECKING:
    from harness.probes import ProbeRun


def _np_pooler_rankings(bank_q: list[str], query_q: list[str], n_check: int
                        ) -> tuple[list[np.ndarray], dict[str, Any]]:
    """NP rankings via agentfly_sim's cached index; faithful recompute on ``n_check`` queries for agreement."""
    from agentfly_sim.embedding import CachedKeyIndex, embed_texts, load_np_encoder, retrieve

    tok, model = load_np_encoder()
    pairs = [(q, "", i) for i, q in enumerate(bank_q)]
    index = CachedKeyIndex(tok, model)
    index.rebuild(pairs)
    mat = index.matrix.numpy()
    qv = embed_texts(query_q, tok, model).numpy()
    ranks = rankers.rank_by_vectors(mat, qv, DEPTH)
    agree = 0
    for j in range(n_check):
        faithful = retrieve(query_q[j], pairs, tok, model, device_str="cpu", top_k=8)
        cached = index.retrieve(query_q[j], pairs, device_str="cpu", top_k=8)
        same = [r["line_index"] for r in faithful] == [r["line_index"] for r in cached]
        close = all(abs(a["score"] - b["score"]) <= 1e-6 for a, b in zip(faithful, cached, strict=True))
        agree += int(same and close)
    return ranks, {"faithful_check_queries": n_check, "faithful_check_identical_top8": agree}


def _pm_rows(world: CBRWorld, bank, queries, qrels, seed: int, quick: bool, tmp: Path, track: Callable,
             notes: list[str]) -> list[dict[str, Any]]:
    """The two PM classifier rows (see :mod:`benchmarks.pm_rows`); skipped with a reason if agentfly_sim lacks
    the driver/trainer API."""
    try:
        from benchmarks import pm_rows
    except ImportError as exc:  # pragma: no cover - depends on agentfly_sim progress
        notes.append(f"PM classifier rows skipped: {exc}")
        return []
    try:
        return pm_rows.pm_selector_rows(world, bank, queries, qrels, seed=seed, quick=quick, tmp=tmp, track=track,
                                        depth=DEPTH, notes=notes)
    except pm_rows.PMUnavailable as exc:
        notes.append(f"PM classifier rows skipped: {exc}")
        return []


def rank_selectors(steps: Sequence[str], world: CBRWorld, bank: Any, queries: Any, qrels: Sequence[np.ndarray], *,
                   seed: int, quick: bool, faithful_checks: int, notes: list[str], track: Callable | None = None,
                   tmp_dir: Path | None = None) -> list[tuple[str, list[np.ndarray], float, dict[str, Any]]]:
    """Every selector of ``steps`` (in :data:`~benchmarks.selector_probes.STEPS` order) ranking the bank for every query, to :data:`DEPTH`:
    ``(display name, rankings, seconds, extra)`` per row (``extra``: NP's faithful-path check, the PM rows'
    training facts). The one code path of ``memsim bench selectors`` and of selector sweep cells."""
    import tempfile

    track = track or no_progress
    chosen = [s for s in sp.STEPS if s in steps]
    n_cases, n_queries = len(bank), len(queries)
    bank_q, query_q = bank.questions(), queries.questions()
    out: list[tuple[str, list[np.ndarray], float, dict[str, Any]]] = []
    runs: dict[str, list[np.ndarray]] = {}

    def add(step: str, ranks: list[np.ndarray], t0: float, **extra: Any) -> None:
        name = sp.STEP_ROWS[step][0]
        out.append((name, ranks, time.perf_counter() - t0, extra))
        runs[step] = ranks

    for step in track(chosen, description="selectors", total=len(chosen)):
        t0 = time.perf_counter()
        if step == "oracle":
            add(step, rankers.rank_oracle(qrels, DEPTH), t0)
        elif step == "np_pooler":
            ranks, check = _np_pooler_rankings(bank_q, query_q, faithful_checks)
            add(step, ranks, t0, **(check if faithful_checks else {}))
        elif step == "np_mean":
            from harness.embedding import get_encoder

            enc = get_encoder("minilm-mean")
            add(step, rankers.rank_by_vectors(enc.encode(bank_q), enc.encode(query_q), DEPTH), t0)
        elif step == "bm25":
            add(step, rankers.rank_bm25(bank_q, query_q, DEPTH), t0)
        elif step == "rrf":
            add(step, rankers.rank_rrf([runs["bm25"], runs["np_mean"]], DEPTH), t0)
        elif step == "recency":
            add(step, rankers.rank_recency(n_cases, n_queries, DEPTH), t0)
        elif step == "random":
            add(step, rankers.rank_random(n_cases, n_queries, DEPTH, seed), t0)
        elif step == "pm":
            with tempfile.TemporaryDirectory(dir=tmp_dir) as td:
                for row in _pm_rows(world, bank, queries, qrels, seed, quick, Path(td), track, notes):
                    out.append((row.pop("selector"), row.pop("rankings"), row.pop("seconds"), row))
    return out


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, n_cases: int | None = None,
        n_queries: int | None = None, data_dir: Path | None = None, track: Callable | None = None,
        tmp_dir: Path | None = None) -> list[Path]:
    """Run the selector benchmark and write ``selectors.{json,md,png,probes.parquet}`` and the TREC files
    (``selectors/``) to ``out_dir``; return the paths."""
    track, t_start = start_run(track)
    n_cases = n_cases or (150 if quick else 2000)
    n_queries = n_queries or (15 if quick else 300)
    world = CBRWorld(seed=seed)
    bank = world.bank(n_cases, seed=seed)
    queries = world.queries(n_queries, seed=seed + 1000)
    qrels = world.qrels(queries, bank)
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    runs: dict[str, list[np.ndarray]] = {}
    for name, ranks, seconds, extra in rank_selectors(sp.STEPS, world, bank, queries, qrels, seed=seed, quick=quick,
                                                      faithful_checks=1 if quick else 3, notes=notes, track=track,
                                                      tmp_dir=tmp_dir):
        rows.append({"selector": name, "row": sp.row_id(name), "seconds": seconds, **extra})
        runs[name] = ranks

    corpus: dict[str, Any] = {}
    from benchmarks import corpus as corpus_mod

    corpus = corpus_mod.corpus_section(data_dir, quick=quick, seed=seed, track=track)

    # the per-probe table (ids and numbers), the TREC files, then every number of the page from the table
    by_id = {sp.row_id(n): r for n, r in runs.items()}
    types = [f.entity_type for f in world.families]
    table_rows = sp.probe_rows(by_id, qrels, bank.label, queries.family, types)
    world_cfg = world.config() | {"n_cases": n_cases, "n_queries": n_queries, "depth": DEPTH}
    out_dir.mkdir(parents=True, exist_ok=True)
    probes = write_table(out_dir, table_rows, data=sp.data_label(world_cfg, n_cases, n_queries),
                         config={"world": world_cfg, "seed": seed, "quick": quick, "pairs": [list(p) for p in sp.PAIRS]})
    from harness.trec import query_id

    qids = [query_id(f"f{int(f)}", j) for j, f in enumerate(queries.family)]
    trec = sp.write_trec_files(out_dir / NAME, *sp.trec_inputs(by_id, qrels, qids))

    meta = {"machine": machine_description(), "quick": quick,
            "seeds": {"world": seed, "queries": seed + 1000, "random": seed},
            "world": world_cfg, "wall_s": time.perf_counter() - t_start}
    payload = {"name": NAME, "meta": meta, "rows": rows, "corpus": corpus, "notes": notes}
    apply_table(payload, probes)
    return [*write_results(out_dir, NAME, payload, render_markdown, _figure(payload)), probes, *trec]


def write_table(out_dir: Path, table_rows: list[dict[str, Any]], *, data: str, config: dict[str, Any]) -> Path:
    """``selectors.probes.parquet`` in ``out_dir``: every metric of kind ``mean`` (means of per-query
    fractions), the Differences metrics as its headline metrics."""
    from harness.probes import probe_table, write_probes

    table = probe_table(table_rows)
    kinds = {m: "mean" for m in sp.METRICS if m in table.column_names}
    return write_probes(out_dir / f"{NAME}.probes.parquet", table, data=data, config=config, kinds=kinds,
                        headline_metrics=[m for m in sp.PAIR_METRICS if m in kinds])


def apply_table(payload: dict[str, Any], probes: Path | ProbeRun) -> None:
    """Set every number the page shows from the per-probe table: each row's means
    (:func:`harness.probes.aggregate`), the intervals of every row and metric, and the Differences of the fixed
    pairs (:data:`benchmarks.selector_probes.PAIRS`) that both ran."""
    from benchmarks.stats_tables import present_pairs, run_stats
    from harness.probes import ProbeRun, read_probes

    run = probes if isinstance(probes, ProbeRun) else read_probes(probes)
    ids = [r["row"] for r in payload["rows"]]
    metrics = [m for m in sp.METRICS if m in run.metrics]
    pairs, missing = present_pairs(sp.PAIRS, ids)
    st = run_stats(run, ids, metrics, pairs, [m for m in sp.PAIR_METRICS if m in metrics], probe_set="all queries")
    for r in payload["rows"]:
        for m in metrics:
            r[m] = st["aggregate"][r["row"]]["metrics"][m]["mean"]
    payload["stats"] = {"probes": run.path.name, "n_probe_rows": run.table.num_rows,
                        "intervals": st["intervals"], "differences": st["differences"],
                        "not_compared": [list(p) for p in missing]}


def recompute(run: ProbeRun, payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``payload`` (a results JSON) holds that its per-probe table determines (each row's means, the
    intervals and Differences) and the same recomputed from ``run`` (the table read back)."""
    def means(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"row": r["row"], **{m: r[m] for m in sp.METRICS if m in r}} for r in rows]

    again = {"rows": [dict(r) for r in payload["rows"]]}
    apply_table(again, run)
    return ({"rows": means(payload["rows"]), "stats": payload["stats"]},
            {"rows": means(again["rows"]), "stats": again["stats"]})


READING = (
    "Reading the table. The paraphrase templates of one family share their relation words (\"directed\", "
    "\"birthplace\"), which favours BM25 on this world; entity names recur across sibling families (same entity "
    "type, different relation), which pulls every selector toward sibling cases whose plans are wrong for the "
    "query. all-MiniLM-L6-v2 was trained for mean pooling; NP's faithful code reads the BERT `pooler_output` "
    "(a head never tuned for similarity), and that choice alone costs about half of mean pooling's P@8. The PM "
    "classifier trained on burn-in pairs ranks like random: each pair carries the judgement of its query, "
    "identical for all cases of that query, so nothing in the labels says which case is the better one (its "
    "validation AUC is high only because the default row-level split puts every validation query in train, "
    "AGF-35). With family-match labels the same head, an MLP over the concatenated frozen CLS vectors of case and "
    "query, still barely beats random from 800 pairs; a likely reason is that it must learn the case-query "
    "interaction from scratch, without a similarity feature.")


def rerender(out_dir: Path) -> list[Path]:
    """Rewrite ``selectors.{json,md,png}`` from ``selectors.json`` and the per-probe table beside it (no re-run):
    the means, intervals and Differences are recomputed from the table."""
    import json

    payload = json.loads((out_dir / f"{NAME}.json").read_text(encoding="utf-8"))
    apply_table(payload, out_dir / f"{NAME}.probes.parquet")
    return write_results(out_dir, NAME, payload, render_markdown(payload), _figure(payload))


def render_markdown(payload: dict[str, Any]) -> str:
    meta = payload["meta"]
    w = meta["world"]
    lines = ["## Selectors on the synthetic CBR world", "",
             f"{w['n_cases']} cases, {w['n_queries']} queries, {w['n_families']} task families, "
             f"p_correct {w['p_correct']}, label noise {w['label_noise']}. Relevance: 2 = same family and correct "
             "plan, 1 = same family and wrong plan, 0 = other family (Recall, P@8 and MRR count grade >= 1; with "
             f"about {w['n_cases'] // w['n_families']} same-family cases per query, R@8 is capped near "
             f"{min(1.0, 8 / max(1, w['n_cases'] // w['n_families'])):.2f}, so P@8 is the readable column). "
             "`neg_share@8` = share of cases *labelled* negative among the top 8 delivered.", ""]
    stats = payload.get("stats") or {}
    ivs = (stats.get("intervals") or {}).get("rows") or {}
    headers = ("selector", *METRIC_COLS, "s")

    def cell(r: dict[str, Any], m: str) -> Any:
        iv = ivs.get(m, {}).get(r.get("row", ""))
        return interval_cell(iv) if iv else r.get(m, float("nan"))

    table_rows = [(r["selector"], *(cell(r, c) for c in METRIC_COLS), f"{r['seconds']:.1f}")
                  for r in payload["rows"]]
    lines.append(md_table(headers, table_rows))
    if stats.get("intervals"):
        lines += ["", method_sentence(stats["intervals"], "every query of the run, each query one probe") +
                  f" Per-probe table: `{stats['probes']}`; TREC run and qrels files (level `case`): `{NAME}/`."]
    for r in payload["rows"]:
        if "faithful_check_queries" in r:
            lines.append("")
            lines.append(f"NP faithful: the recompute path and the cached index returned identical top-8 "
                         f"(same order, scores within 1e-6) on {r['faithful_check_identical_top8']} of "
                         f"{r['faithful_check_queries']} checked queries.")
        if r.get("train_note"):
            lines.append("")
            lines.append(f"{r['selector']}: {r['train_note']}")
    if payload.get("notes"):
        lines += ["", *[f"- {n}" for n in payload["notes"]]]
    lines += ["", READING]
    if stats.get("differences"):
        lines += ["", *differences_section(stats["differences"], sp.name_of, unit="queries")]
    for a, b in stats.get("not_compared") or []:
        lines += [f"Not compared: {sp.name_of(a)} vs {sp.name_of(b)} (a row did not run)."]
    from benchmarks.corpus import render_corpus_markdown

    lines += ["", render_corpus_markdown(payload.get("corpus") or {})]
    lines += ["", "![selectors](selectors.png)", "", meta_block(meta, payload.get("run"))]
    return "\n".join(lines)


def _figure(payload: dict[str, Any]) -> Any:
    """Grouped bars, one per selector and metric, with the 95% interval of each mean as an error bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.plotting import grouped_bars, zero_legend_handle

    rows = payload["rows"]
    ivs = ((payload.get("stats") or {}).get("intervals") or {}).get("rows") or {}
    cols = ("R@8", "P@8", "nDCG@10", "MRR", "neg_share@8")
    fig, ax = plt.subplots(figsize=(11, 4.2))
    cmap = plt.get_cmap("tab10")
    # a measured zero is a stroke on the axis; a metric a row lacks has no mark; each mean has its 95% interval
    zeros = grouped_bars(ax, cols, [(r["selector"], [r.get(c) for c in cols], cmap(i % 10))
                                    for i, r in enumerate(rows)],
                         errors=[[error_bar(ivs.get(c, {}).get(r.get("row", ""))) for c in cols] for r in rows])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("mean over queries (95% interval)")
    ax.set_title("Selectors on the synthetic CBR world (higher is better, except neg_share@8)")
    handles, labels = ax.get_legend_handles_labels()
    if zeros:
        handles.append(zero_legend_handle())
        labels.append(handles[-1].get_label())
    ax.legend(handles, labels, fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    return fig
