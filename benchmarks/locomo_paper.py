"""The LoCoMo paper's retrieval protocol over loaded conversations, beside the published Table 3 and the designs.

``memsim bench locomo --protocol locomo-paper`` loads the conversations, runs every retriever (``--retrievers``)
over every unit kind and k of the paper's grid (``harness.workloads.paper_protocol``: units, recall rule, reader
context, tokens), then runs the design arms (``--arms``, default the designs; ``none`` for the retriever rows
alone) through the LoCoMo runner and scores each delivered row with the same recall function over its delivered
``dia_id``s and cl100k tokens of its own delivered text. It writes ``<out>/locomo-paper.{json,md,png}``:

- JSON ``rows``: one per (retriever, unit, k), ``{"retriever", "unit", "k", "recall": {"1".."5", "overall"},
  "tokens_cl100k"}`` (recall a fraction, tokens the mean per question), with the conversations used and the ones
  where the unit was unavailable (and why); ``design_rows`` the same shape per delivered design row (``unit``
  ``"delivered"``, ``k`` null: each design at its own K, outside the grid); ``published`` the paper's rows, read
  from the cited data file and kept apart; question counts per category, quirk counts, timings and whether the
  run met the issue-level budget (ten minutes for the four shipped conversations, every retriever but
  two-tower), judged both on the protocol phase and on the whole run's wall time (``budget_level``).
- ``<out>/locomo-paper.probes.parquet``: the per-probe table (``benchmarks.probe_tables``), one row per question
  and row (``<unit>:<retriever>@<k>`` for the grid, the design row's name for a design row) with the question's
  recall under the paper's rule (0 without evidence, as the paper's denominator counts it) and its tokens. Every
  recall and token mean of the JSON is computed from it, and so are the statistics: each number of memsim's tables
  with its 95% interval (questions resampled within each conversation), and the paired comparisons of the
  comparator pairs fixed before the run (:func:`comparator_pairs`);
- ``<out>/locomo-paper/runs/<row>.<level>.trec`` and ``qrels.<level>.trec``: every ranking as a TREC run (dialog
  and observation units at the ``turn`` and ``session`` levels, a unit tagged with several turns expanded in
  place; summary units at the ``session`` level), relevance = the question's evidence turn ids (the ids that name a
  turn; the paper's exact-string rule cannot be written as qrels, so the files reproduce its recall exactly where
  every evidence string is a distinct turn id);
- Markdown and figure rendered from that JSON only (``benchmarks.locomo_paper_page``); the documentation page
  ``docs/locomo-paper.md`` is rendered from the committed JSON by ``docs_page`` (``python -m
  benchmarks.locomo_paper --docs`` rewrites it).

Every file is written to a temporary name and renamed into place (fault-hook step ``locomo-paper.write`` before
each rename), so an interrupted run never leaves a half-written result.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import (
    RESULTS_DIR,
    _jsonable,
    machine_description,
    set_torch_threads,
    stamp_run,
    write_atomic,
)
from benchmarks.locomo_paper_page import (  # noqa: F401  (re-exported: the docs pages and tests render here)
    BUDGET_STATEMENT,
    LEVEL_LIMIT_S,
    NAME,
    _judged_level,
    budget_level,
    docs_page,
    figure,
    markdown,
    readme_section,
    row_name,
    side_by_side,
    tables,
)
from benchmarks.probe_tables import TrecFiles, present_pairs, safe_row_name, statistics, write_table
from benchmarks.progress import Tracker, as_tracker
from harness.probes import aggregate
from harness.workloads.arms import ArmSpec, require_runnable
from harness.workloads.base import Delivery
from harness.workloads.locomo import (
    Conversation,
    Probe,
    load_locomo,
    resolve_locomo_path,
    select_conversations,
)
from harness.workloads.paper_protocol import (
    CATEGORIES,
    K_GRID,
    RETRIEVERS,
    UNITS,
    UnitResult,
    evaluate_unit,
    get_retrievers,
    parse_retrievers,
    published_rows,
    published_table,
    question_counts,
    question_recall,
    quirk_counts,
    tokens_cl100k,
)

LEVEL_CONVERSATIONS = 4
DOCS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "locomo-paper.md"
_COLS = [*map(str, CATEGORIES), "overall"]
METRICS = ("recall", "tokens_cl100k")


def parse_arm_option(spec: str | None, arm_classes: list[str] | None = None) -> list[str | ArmSpec]:
    """``--arms`` and ``--arm-class`` for this protocol, by the one rule of every protocol
    (``harness.workloads.arms.select_arms``): default the design arms; ``none`` for the retriever rows alone (plus
    any ``--arm-class``)."""
    from harness.workloads.arms import select_arms

    return select_arms(spec, arm_classes, default="designs", allow_none=True)


def comparator_pairs(retrievers: Sequence[str], k_values: Sequence[int]) -> list[list[str]]:
    """The comparator pairs, fixed by the configuration before any run (``[a, b]``: a - b is tested on recall): at
    every unit and k of the grid, each other retriever against bm25; at each design K, AgentFly NP's faithful pooler
    ranking against its mean-pooling variant; Tortoise on LoCoMo's recorded LM extraction against the verbatim
    points, for both rows."""
    pairs = [[f"{u}:{r}@{k}", f"{u}:bm25@{k}"] for u in UNITS for k in K_GRID[u] for r in retrievers if r != "bm25"]
    pairs += [[f"np-pooler@{k}", f"np-mean@{k}"] for k in k_values]
    return pairs + [["tortoise-recorded-eval", "tortoise-eval"], ["tortoise-recorded-volunteer", "tortoise-volunteer"]]


def _write_atomic(path: Path, data: bytes, fault_hook: Callable[[str], None] | None) -> None:
    write_atomic(path, data, fault_hook, "locomo-paper.write")


# ------------------------------------------------------------------------------------------ the per-probe table
def _table_row(conv: str, p_index: int, category: int, has_evidence: bool, row: str, arm: str, recall: float | None,
               tokens: int) -> dict[str, Any]:
    return {"workload": "locomo", "cluster": conv, "probe": str(p_index), "category": str(category),
            "abstention": False, "has_evidence": has_evidence, "row": row, "arm": arm,
            "recall": recall or 0.0, "tokens_cl100k": tokens}


def protocol_table(results: Sequence[UnitResult], chosen: Sequence[Conversation], trec: TrecFiles
                   ) -> list[dict[str, Any]]:
    """The grid's table rows, one per question, unit kind, retriever and k (the conversations where the unit was
    available), and each ranking into ``trec``."""
    from harness.trec import level_qrels, level_rankings, query_id, slots

    convs = {c.sample_id: c for c in chosen}
    rows: list[dict[str, Any]] = []
    for r in results:
        if r.unavailable is not None:
            continue
        conv = convs[r.conversation]
        probes = {p.index: p for p in conv.probes}
        session_of = {t.dia_id: t.session for t in conv.turns()}
        for k in sorted(r.recall):
            name = f"{r.unit}:{r.retriever}@{k}"
            for i, pi in enumerate(r.probes):
                p = probes[pi]
                rows.append(_table_row(conv.sample_id, pi, p.category, bool(p.raw_evidence), name, r.retriever,
                                       r.recall[k][i], r.tokens[k][i]))
                qid = query_id(conv.sample_id, pi)
                for level, rel in level_qrels(p.evidence, session_of).items():
                    trec.add_qrels(level, qid, rel)
                ids = r.retrieved[k][i]
                levels = {"session": slots(ids)} if r.unit == "summary" else level_rankings(ids, session_of)
                for level, docs in levels.items():
                    trec.add_run(name, level, qid, docs)
    return rows


def protocol_rows(table: Any, results: Sequence[UnitResult]) -> list[dict[str, Any]]:
    """The JSON's grid rows ``{"retriever", "unit", "k", "recall": {"1".."5", "overall"}, "tokens_cl100k", ...}``:
    every number from the per-probe table (:func:`_numbers`), which conversations each unit ran on and why not
    on the others from ``results``."""
    numbers = _numbers(table)
    groups: dict[tuple[str, str], list[UnitResult]] = {}
    for r in results:
        groups.setdefault((r.retriever, r.unit), []).append(r)
    out = []
    for (retriever, unit), rs in groups.items():
        ok = [r for r in rs if r.unavailable is None]
        missing = [{"conversation": r.conversation, "reason": r.unavailable} for r in rs if r.unavailable]
        for k in sorted({k for r in ok for k in r.recall}) or list(K_GRID[unit]):
            n = numbers.get(f"{unit}:{retriever}@{k}", _NONE)
            out.append({"retriever": retriever, "unit": unit, "k": k, "recall": n["recall"],
                        "tokens_cl100k": n["tokens_cl100k"], "n_questions": n["n_questions"],
                        "conversations": [r.conversation for r in ok], "unavailable": missing})
    return out


_NONE = {"recall": dict.fromkeys(_COLS), "tokens_cl100k": None, "n_questions": 0}


def _numbers(table: Any) -> dict[str, dict[str, Any]]:
    """Per table row: recall per category (the mean over the category's questions, 0 without evidence) and
    overall, mean tokens and the number of questions, each by ``harness.probes.aggregate``."""
    if not len(table):
        return {}
    every = aggregate(table, None, list(METRICS))
    cats = {str(c): aggregate(table, {"category": str(c)}, ["recall"]) for c in CATEGORIES}
    return {row: {"recall": {**{c: (cats[c].get(row) or {"metrics": {"recall": {}}})["metrics"]["recall"].get("mean")
                                for c in cats}, "overall": e["metrics"]["recall"]["mean"]},
                  "tokens_cl100k": e["metrics"]["tokens_cl100k"]["mean"], "n_questions": e["n_probes"]}
            for row, e in every.items()}


def _design_rows(chosen: list[Conversation], loaded: list[Conversation], names: list[str | ArmSpec],
                 k_values: tuple[int, ...], quick: bool, seed: int, track: Tracker, echo: Callable[[str], None] | None,
                 tmp_dir: Path | None, trec: TrecFiles) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, str]]:
    """Run the design arms through the LoCoMo runner; every delivered row of an arm that finished becomes table
    rows scored with the paper's recall rule and its delivered ranking goes into ``trec``. Returns the table rows,
    the arms' status per conversation and row -> arm (an arm without any row maps to itself)."""
    from harness.trec import query_id
    from harness.workloads.metrics import delivered_ranking
    from harness.workloads.runner import run_conversation

    table: list[dict[str, Any]] = []
    status: dict[str, dict[str, Any]] = {}
    row_arm: dict[str, str] = {}
    work_root = Path(tempfile.mkdtemp(prefix="memsim-locomo-paper-", dir=tmp_dir))
    try:
        for conv in track(chosen, description="design arms: conversations", unit="conversations"):
            seen: dict[str, list[tuple[Probe, Delivery]]] = {}

            def on_delivery(row: str, probe: Probe, d: Delivery, _seen: dict[str, Any] = seen) -> None:
                _seen.setdefault(row, []).append((probe, d))

            others = tuple(c for c in loaded if c.sample_id != conv.sample_id)
            res = run_conversation(conv, names, work_root, k_values=k_values, others=others, quick=quick, seed=seed,
                                   track=track, echo=echo, on_delivery=on_delivery)
            session_of = {t.dia_id: t.session for t in conv.turns()}
            for arm, info in res["arms"].items():
                status.setdefault(arm, {})[conv.sample_id] = {k: v for k, v in info.items()
                                                              if k in ("status", "message")}
                for row in info.get("rows", []):
                    row_arm[row] = arm
                    for p, d in seen.get(row, []) if info["status"] == "ok" else []:
                        table.append(_table_row(conv.sample_id, p.index, p.category, bool(p.raw_evidence), row, arm,
                                                question_recall(p.raw_evidence, frozenset(d.dia_ids)),
                                                tokens_cl100k(d.text)))
                        trec.add_delivery(row, query_id(conv.sample_id, p.index), delivered_ranking(d.meta),
                                          p.evidence, session_of)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    for arm in status:  # an arm that gave no row anywhere is still listed, with its reasons
        if arm not in row_arm.values():
            row_arm[arm] = arm
    return table, status, row_arm


def design_rows(table: Any, status: dict[str, Any], row_arm: dict[str, str]) -> list[dict[str, Any]]:
    """The JSON's design rows (the grid rows' shape, ``unit`` ``"delivered"``, ``k`` null), every number from the
    per-probe table."""
    numbers = _numbers(table)
    out = []
    for row, arm in row_arm.items():
        n = numbers.get(row, _NONE)
        out.append({"retriever": row, "arm": arm, "unit": "delivered", "k": None, "recall": n["recall"],
                    "tokens_cl100k": n["tokens_cl100k"], "n_questions": n["n_questions"],
                    "conversations": [c for c, s in status[arm].items() if s["status"] == "ok"],
                    "unavailable": [{"conversation": c, "reason": f"{s['status']}: {s.get('message', '')}"}
                                    for c, s in status[arm].items() if s["status"] != "ok"]})
    return out


def recompute(run: Any, payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``payload`` (a results JSON) holds that its per-probe table determines (every row's recall per category
    and overall, tokens and question count; the statistics), and the same recomputed from ``run``."""
    numbers = _numbers(run.table)
    named = [row_name(r) for r in payload["rows"] + payload["design_rows"]]
    held = {"rows": {row_name(r): {k: r[k] for k in ("recall", "tokens_cl100k", "n_questions")}
                     for r in payload["rows"] + payload["design_rows"]}, "statistics": payload["statistics"]}
    return held, {"rows": {n: numbers.get(n, _NONE) for n in named},
                  "statistics": run_statistics(run, named, run.meta["config"]["pairs"])}


def run_statistics(run: Any, rows: Sequence[str], pairs: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Intervals of every row's recall and tokens over all questions (``overall``, with the comparator pairs on
    recall) and of its recall per category (``"1"`` .. ``"5"``), questions resampled within each conversation."""
    out = {"overall": statistics(run, rows, METRICS, None, probe_set="every question",
                                 pairs=present_pairs(pairs, rows), pair_metrics=("recall",))}
    for c in CATEGORIES:
        out[str(c)] = statistics(run, rows, ("recall",), {"category": str(c)}, probe_set=f"category {c}")
    return out


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, data: Path | None = None,
        conversations: list[str] | None = None, retrievers: str | None = None, arms: str | None = None,
        k_values: tuple[int, ...] = (4, 8), track: Callable[..., Any] | None = None,
        echo: Callable[[str], None] | None = None, tmp_dir: Path | None = None,
        fault_hook: Callable[[str], None] | None = None, arm_classes: list[str] | None = None) -> list[Path]:
    """Run the paper protocol (and the design rows) and write ``locomo-paper.{json,md,png}`` to ``out_dir``.
    ``arm_classes`` are external arms (``package.module:Class``) run beside ``arms``, as under the designs
    protocol."""
    from benchmarks.locomo import quick_slice

    set_torch_threads(1)
    t0 = time.perf_counter()
    if not k_values or min(k_values) < 1:
        raise ValueError(f"--k values must be positive, got {list(k_values)}")
    names = parse_retrievers(retrievers)
    arm_names = parse_arm_option(arms, arm_classes)
    require_runnable(arm_names)
    src = resolve_locomo_path(data)
    loaded = load_locomo(src)
    chosen = select_conversations(loaded, conversations)
    if quick:
        chosen = [quick_slice(chosen[0])]
    track = as_tracker(track)
    # loading the retrievers (a MiniLM model, two-tower models) takes seconds: a phase of its own
    with track.phase(f"loading retrievers {', '.join(names)}"):
        built = get_retrievers(names)
    t_load = time.perf_counter() - t0
    per_retriever_s = dict.fromkeys(names, 0.0)
    results: list[UnitResult] = []
    pairs = [(c, n) for c in chosen for n in names]
    for conv, name in track(pairs, description="paper protocol: conversations x retrievers", total=len(pairs)):
        t = time.perf_counter()
        results += [evaluate_unit(conv, built[name], unit) for unit in UNITS]
        per_retriever_s[name] += time.perf_counter() - t
    protocol_s = time.perf_counter() - t0
    t_design = time.perf_counter()
    trec = TrecFiles()
    grid = protocol_table(results, chosen, trec)
    designs, design_status, row_arm = (_design_rows(chosen, loaded, arm_names, tuple(k_values), quick, seed, track,
                                                    echo, tmp_dir, trec) if arm_names else ([], {}, {}))
    design_s = time.perf_counter() - t_design
    counts = {c.sample_id: question_counts(c) for c in chosen}
    total_counts = {str(k): {f: sum(counts[c][str(k)][f] for c in counts) for f in ("questions", "with_evidence")}
                    for k in CATEGORIES}
    applies = (not quick and len(chosen) >= LEVEL_CONVERSATIONS and set(RETRIEVERS) <= set(names))
    published = published_table()
    config = {"data": src.name, "sources": sorted({Path(c.source).name for c in chosen}),
              "conversations": [c.sample_id for c in chosen], "retrievers": names,
              "arms": [n if isinstance(n, str) else n.name for n in arm_names],
              "arm_classes": list(arm_classes or []), "design_k": list(k_values), "quick": quick, "seed": seed}
    pairs = comparator_pairs(names, k_values)
    label = (f"data: LoCoMo {src.name}, conversations {', '.join(c.sample_id for c in chosen)}"
             + (" (quick: the first, cut short)" if quick else ""))
    placed: list[Path] = []
    try:
        run = write_table(out_dir, NAME, grid + designs, data=label, config={**config, "pairs": pairs},
                          probe_sets={f"category {c}": {"category": str(c)} for c in CATEGORIES}, stratify=True,
                          headline_metrics=("recall",), fault_hook=fault_hook)
        placed.append(run.path)
        placed += trec.write(out_dir / NAME, fault_hook, safe_row_name)
        rows = protocol_rows(run.table, results)
        drows = design_rows(run.table, design_status, row_arm)
        stats = run_statistics(run, [row_name(r) for r in rows + drows], pairs)
    except BaseException:
        _remove(placed, out_dir)
        raise
    payload: dict[str, Any] = {
        "name": NAME,
        "protocol": {
            "units": list(UNITS), "k_grid": {u: list(ks) for u, ks in K_GRID.items()},
            "retrievers": names,
            "recall": "share of a question's evidence strings, exactly as given, found among the ids of the top-k "
                      "units; summary units match the session number split(':')[0][1:] against retrieved S<n>; "
                      "per category the sum over questions with evidence divided by all questions of the category",
            "tokens": "cl100k_base tokens of '<session date-time>: <unit text>' per retrieved unit, joined by a "
                      "newline (dialog, observation) or a blank line (summary); mean per question",
        },
        "config": config,
        "conversations_used": [c.sample_id for c in chosen],
        "rows": rows,
        "design_rows": drows,
        "design_status": design_status,
        "comparisons": {"pairs": pairs, "metrics": ["recall"]},
        "statistics": stats,
        "probes": {"file": run.path.name, "rows": len(run.table), "data": label},
        "published": {k: published[k] for k in ("citation", "source_code", "retriever", "reader", "conversations",
                                                "questions_per_category")}
                     | {"rows": published_rows()},
        "question_counts": {"total": total_counts, "per_conversation": counts},
        "quirks": {c.sample_id: quirk_counts(c) for c in chosen},
        "timings": {
            "load_s": t_load, "protocol_s": protocol_s, "per_retriever_s": per_retriever_s, "designs_s": design_s,
            "wall_s": time.perf_counter() - t0,
        },
        "meta": {"machine": machine_description(), "seeds": {"seed": seed}, "quick": quick},
    }
    payload["timings"]["level"] = budget_level(protocol_s, payload["timings"]["wall_s"], applies)
    payload["meta"]["wall_s"] = payload["timings"]["wall_s"]
    try:
        return write(out_dir, stamp_run(payload), fault_hook) + placed
    except BaseException:
        _remove(placed, out_dir)
        raise


def _remove(placed: list[Path], out_dir: Path) -> None:
    from benchmarks.workload_run import remove_placed

    remove_placed(placed, [out_dir / NAME / "runs", out_dir / NAME])


def write(out_dir: Path, payload: dict[str, Any], fault_hook: Callable[[str], None] | None = None) -> list[Path]:
    """Write ``locomo-paper.{json,md,png}`` (each atomically) and return the paths; on a failure the ones already
    written are removed again."""
    import io

    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    payload = _jsonable(payload)
    paths = [out_dir / f"{NAME}.json", out_dir / f"{NAME}.md", out_dir / f"{NAME}.png"]
    fig = figure(payload)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    done: list[Path] = []
    try:
        for p, data in zip(paths, ((json.dumps(payload, indent=2, ensure_ascii=False) + "\n").encode(),
                                   (markdown(payload).rstrip() + "\n").encode(), buf.getvalue()), strict=True):
            _write_atomic(p, data, fault_hook)
            done.append(p)
    except BaseException:
        for p in done:
            p.unlink(missing_ok=True)
        raise
    return paths


def rerender(results_json: Path) -> list[Path]:
    """Judge the budget of a results JSON again from its timings and rewrite that JSON and the Markdown beside
    it (nothing is re-measured; the figure, which shows no timing, is kept)."""
    payload = json.loads(results_json.read_text(encoding="utf-8"))
    payload["timings"]["level"] = _judged_level(payload["timings"])
    md = results_json.with_suffix(".md")
    _write_atomic(results_json, (json.dumps(payload, indent=2, ensure_ascii=False) + "\n").encode(), None)
    _write_atomic(md, (markdown(payload).rstrip() + "\n").encode(), None)
    return [results_json, md]


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.locomo_paper --docs [--check]``: (re)render the docs page from the committed JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", action="store_true", help="render docs/locomo-paper.md from the results JSON")
    ap.add_argument("--check", action="store_true", help="exit 1 when the page differs from a fresh rendering")
    ap.add_argument("--results", type=Path, default=RESULTS_DIR / f"{NAME}.json")
    ap.add_argument("--render", action="store_true",
                    help="judge the levels of the --results JSON again from its timings and rewrite it and its .md")
    args = ap.parse_args(argv)
    if args.render:
        for path in rerender(args.results):
            print(f"wrote {path}")
        return 0
    if not args.docs:
        ap.print_help()
        return 2
    page = docs_page(json.loads(args.results.read_text(encoding="utf-8")))
    if args.check:
        return 0 if DOCS_PAGE.exists() and DOCS_PAGE.read_text(encoding="utf-8") == page else 1
    _write_atomic(DOCS_PAGE, page.encode(), None)
    print(f"wrote {DOCS_PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
