"""``memsim bench longmemeval --protocol longmemeval``: LongMemEval's official retrieval protocol on a file.

Every question of the file (or the ``--limit`` / ``--types`` selection; ``--quick`` = the first
:data:`QUICK_QUESTIONS`) is evaluated on its own haystack by :mod:`harness.workloads.lme_retrieval` (the official
corpus, gold, metrics and retrievers, see its module docstring), at session and turn granularity, each retriever;
the turn runs are scored per turn and per session (turn2session). The result rows are the means under the two
averagings (``paper``: skip ``_abs``; ``strict``: also skip questions without a user evidence turn), each with the
number of questions it averaged. ``longmemeval-protocol.{json,md,png}`` are written once, when every question is
done, each atomically, the JSON last (an interrupted run writes nothing); :func:`docs_page` renders a results JSON beside the published numbers
(``harness/workloads/data/longmemeval_published.json``: the paper's Table 9 on M, and a port's numbers on S).

Questions are independent: ``workers > 1`` evaluates them in that many spawned processes (one torch thread each,
models loaded once per process), ``executor="ray"`` as Ray tasks (local cluster, or ``address``); the rows are put
back in file order before averaging, so every number equals the serial run's.

Per-probe table, statistics and run files: ``<out>/longmemeval-protocol.probes.parquet`` holds one row per question
and scored run (``<retriever>:session``, ``<retriever>:turn``, ``<retriever>:turn2session``) with every official
metric; the JSON's rows (both averagings, per type) are computed from it by ``harness.probes.aggregate``, and so are
the intervals of the measured rows (questions resampled as one set) and the paired comparisons of the comparator
pairs fixed before the run (:func:`comparator_pairs`). ``<out>/longmemeval-protocol/runs/<retriever>.<level>.trec``
and ``qrels.<level>.trec`` are the official view as TREC files: each retriever's ranking of the user-turn corpus
(``turn``) or the session corpus (``session``), top 50, gold = the corpus ids containing ``answer``. recall_any@k and
recall_all@k follow from them (Success@k, and R@k = 1) for every question with gold; the official DCG weighs ranks 1
and 2 alike and turn2session grows its cut-off, so those are recomputed from the ranks the files list, not read off
trec_eval; a session id listed twice in a haystack keeps its second slot as ``#slot<rank>`` (trec_eval takes a
document once), where the official ideal DCG counts both copies.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from benchmarks.common import (
    _jsonable,
    machine_description,
    md_table,
    meta_block,
    stamp_run,
    start_run,
    write_atomic,
)
from benchmarks.comparison_page import cell, differences_section, method_sentence
from benchmarks.probe_tables import TrecFiles, interval, present_pairs, safe_row_name, statistics, write_table
from harness.workloads import lme_retrieval as R

NAME = "longmemeval-protocol"
QUICK_QUESTIONS = 20
"""``--quick``: the first 20 questions of the file (after ``--types``)."""
RELEASE_QUESTIONS = 500
"""Questions in each published release (S, M, oracle): the progress total when the file is one of them."""
TABLE_KS = (1, 5, 10, 50)
RUN_DEPTH = max(R.KS)
"""Documents of each ranking kept for the TREC files (every official cut-off is within it)."""
HEADLINE = ("recall_all@5", "ndcg_any@5", "recall_all@10", "ndcg_any@10")
"""The measured rows' numbers beside the published ones (the page's headline table); the Holm family is the
comparator pairs times these."""
FIGURE_METRICS = tuple(f"{m}@{k}" for m in ("recall_all", "ndcg_any") for k in R.KS)
AVERAGING_SETS = {"paper": {"abstention": False}, "strict": {"abstention": False, "has_evidence": True}}
"""The averagings as probe sets of the table (``has_evidence``: the question has a user evidence turn)."""

# --------------------------------------------------------------------------------------------- per-process work
_WORKER: dict[str, Any] = {}


Encoder = tuple[str | None, bool]
"""What a process needs to build its dense retriever: the weights (``--encoder``) and whether the per-run text
cache is on (``--dense-cache``)."""


def _retrievers(names: Sequence[str], encoder: Encoder) -> dict[str, R.Retriever]:
    """The retrievers of this process, built once (a dense model loads once per process), keyed by row label."""
    key = (tuple(names), encoder)
    if _WORKER.get("key") != key:
        built: dict[str, R.Retriever] = {}
        for n in names:
            r = R.make_retriever(n, encoder=encoder[0], cache=encoder[1])
            built[r.name] = r
        _WORKER.clear()
        _WORKER.update(key=key, retrievers=built)
    return _WORKER["retrievers"]


def evaluate_question(q: Any, names: Sequence[str], encoder: Encoder) -> list[dict[str, Any]]:
    """Every per-question row of one question (runs in a worker process, a Ray task or this process), each
    tagged with ``seq`` = the question's position in the file (restores file order after workers) and carrying its
    ranking's first :data:`RUN_DEPTH` ids (the TREC files)."""
    return [{**r, "seq": q.index} for r in R.question_rows(q, _retrievers(names, encoder), keep_ranking=RUN_DEPTH)]


def _worker_init() -> None:
    from benchmarks.common import set_torch_threads

    set_torch_threads(1)


def _serial(questions: Iterable[Any], names: Sequence[str], encoder: Encoder) -> Iterator[list[dict[str, Any]]]:
    for q in questions:
        yield evaluate_question(q, names, encoder)


def _local_pool(questions: Iterable[Any], names: Sequence[str], encoder: Encoder,
                workers: int) -> Iterator[list[dict[str, Any]]]:
    """Questions in ``workers`` spawned processes, at most ``2 * workers`` in flight (bounded memory on M); yields
    each question's rows as it completes (order restored by the caller)."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"), initializer=_worker_init)
    try:
        pending: set[Any] = set()
        it = iter(questions)
        exhausted = False
        while pending or not exhausted:
            while not exhausted and len(pending) < 2 * workers:
                try:
                    q = next(it)
                except StopIteration:
                    exhausted = True
                    break
                pending.add(pool.submit(evaluate_question, q, list(names), encoder))
            if not pending:
                break
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                yield fut.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _ray(questions: Iterable[Any], names: Sequence[str], encoder: Encoder, workers: int,
         address: str | None) -> Iterator[list[dict[str, Any]]]:
    """Questions as Ray tasks (one CPU each), started by ``benchmarks.sweep.ray_session``, at most
    ``2 * workers`` in flight."""
    from benchmarks.sweep import ray_session

    with ray_session(workers, address) as ray:
        remote = ray.remote(num_cpus=1, max_retries=0)(evaluate_question)
        pending: list[Any] = []
        it = iter(questions)
        exhausted = False
        while pending or not exhausted:
            while not exhausted and len(pending) < 2 * workers:
                try:
                    pending.append(remote.remote(next(it), list(names), encoder))
                except StopIteration:
                    exhausted = True
            if not pending:
                break
            ready, pending = ray.wait(pending, num_returns=1)
            yield ray.get(ready[0])


# --------------------------------------------------------------------------------------------------------- run
def run(out_dir: Path, *, data: Path | None = None, retrievers: str | Sequence[str] = ("bm25", "minilm"),
        encoder: str | None = None, limit: int | None = None, types: Sequence[str] | None = None,
        quick: bool = False, workers: int = 1, executor: str = "local", address: str | None = None,
        track: Callable[..., Any] | None = None, seed: int = 0,
        echo: Callable[[str], None] | None = None, fault_hook: Callable[[str], None] | None = None,
        dense_cache: bool = False) -> list[Path]:
    """Evaluate the file's questions with the official protocol and write ``longmemeval-protocol.{json,md,png}``.

    ``dense_cache`` (``--dense-cache``, off by default) keeps each text's dense vector for the rest of the run:
    much faster where haystacks share sessions, but a cached vector was computed in another batch (other
    padding), so it differs from the official one by float noise (~1e-7), and two *identical* texts of different
    gold status (a blank user turn in an evidence session and in a filler) then tie exactly where the official
    code orders them by that noise: on generated data with many repeated short turns this moved an averaged metric
    by 0.014. The default encodes every corpus as the official code does (batches of 128 in corpus order).

    The data line of the results is ``benchmarks.longmemeval.data_description`` (``data: synthetic, <generator>
    seed <S>`` only for a generated file whose sidecar matches its size and sha256; else the release line).
    ``seed`` is recorded only (nothing here is random). Option errors are one-line ``ValueError`` raised before
    any work."""
    from harness.workloads.longmemeval import (
        LoadStats,
        iter_questions,
        release_of,
        resolve_longmemeval_path,
    )

    names = R.parse_retrievers(retrievers)
    if "minilm" in names:
        R.resolve_encoder(encoder)
    elif encoder is not None:
        raise ValueError("--encoder applies to the dense retriever (minilm) only")
    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be at least 1, got {limit}")
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    if executor not in ("local", "ray"):
        raise ValueError(f"--executor {executor!r}: choose local or ray")
    if quick:
        limit = min(limit, QUICK_QUESTIONS) if limit else QUICK_QUESTIONS
    path = resolve_longmemeval_path(data)
    stats = LoadStats()
    questions = iter_questions(path, stats=stats, limit=limit, types=list(types) if types else None)
    track, t0 = start_run(track)
    from benchmarks.longmemeval import data_description, no_question

    described = data_description(path, echo)  # a generated file's verified sidecar names its generator and seed
    label = described["label"]
    release = release_of(path)
    total = RELEASE_QUESTIONS if release and not types else None  # a known release: 500 questions
    if total is None and not types and described.get("generator"):
        total = described["generator"].get("questions")  # a generated file says how many it holds
    if total is None and limit is None:  # any other file: one quick streaming pass counts them (an ETA)
        from harness.workloads.longmemeval import count_questions

        with track.phase(f"counting the questions of {path.name}"):  # long on M's 2.6 GB
            total = count_questions(path, types)
    if limit is not None:
        total = min(limit, total) if total else limit  # an upper bound when --types filters too
    if executor == "ray":
        stream = _ray(questions, names, (encoder, dense_cache), workers, address)
    elif workers > 1:
        stream = _local_pool(questions, names, (encoder, dense_cache), workers)
    else:
        stream = _serial(questions, names, (encoder, dense_cache))
    done: list[list[dict[str, Any]]] = []
    for rows in track(stream, description="LongMemEval questions", total=total, unit="questions"):
        done.append(rows)
    if stats.questions == 0:  # an empty selection writes nothing, as in the designs protocol
        raise no_question(path, types)
    rows_all = _in_order(done)
    trec = TrecFiles()
    table_rows = question_table(rows_all, trec)
    pairs = comparator_pairs(names)
    wall = time.perf_counter() - t0
    payload = {
        "benchmark": NAME,
        "protocol": "longmemeval (official retrieval evaluation, src/retrieval of xiaowu0162/LongMemEval)",
        "data": label,
        "data_file": path.name,
        "release": release,
        "n_questions": stats.questions,
        "load": {"read": stats.read, "unknown_fields": dict(stats.unknown_fields),
                 "duplicate_question_ids": dict(stats.duplicate_question_ids)},
        "config": {"retrievers": list(dict.fromkeys(r["retriever"] for r in rows_all)), "encoder": encoder,
                   "dense_cache": dense_cache,
                   "limit": limit, "types": list(types) if types else None, "quick": quick,
                   "quick_questions": QUICK_QUESTIONS if quick else None, "workers": workers, "executor": executor,
                   "dense_device": _dense_device() if "minilm" in names else None, "ks": list(R.KS), "granularities": list(R.GRANULARITIES), "averagings": list(R.AVERAGINGS)},
        "comparisons": {"pairs": pairs, "metrics": list(HEADLINE)},
        "wall_s": wall,
        "meta": {"machine": machine_description(), "seeds": {"seed": seed}, "quick": quick, "wall_s": wall,
                 "workers": workers, "executor": executor},
    }
    if echo:
        echo(f"{stats.questions} questions from {label}")
    placed: list[Path] = []
    try:
        run = write_table(out_dir, NAME, table_rows, data=label, config={**payload["config"], "pairs": pairs},
                          probe_sets=AVERAGING_SETS, stratify=False, headline_metrics=HEADLINE, fault_hook=fault_hook)
        placed.append(run.path)
        placed += trec.write(out_dir / NAME, fault_hook, safe_row_name)
        payload["rows"] = result_rows(run.table)
        payload["statistics"] = run_statistics(run, pairs)
        payload["probes"] = {"file": run.path.name, "rows": len(run.table), "data": label}
        return write_outputs(out_dir, stamp_run(payload), fault_hook) + placed
    except BaseException:
        from benchmarks.workload_run import remove_placed

        remove_placed(placed, [out_dir / NAME / "runs", out_dir / NAME])
        raise


# ------------------------------------------------------------------------------------------ table and statistics
def row_key(r: dict[str, Any]) -> str:
    """A scored run's row in the per-probe table: ``<retriever>:<granularity>``, or ``<retriever>:turn2session``
    for the turn run scored at session level."""
    same = r["scored_as"] == r["granularity"]
    return f"{r['retriever']}:{r['granularity'] if same else 'turn2session'}"


def comparator_pairs(retrievers: Sequence[str]) -> list[list[str]]:
    """The comparator pairs, fixed by the configuration before any run: each other retriever against bm25 on every
    scored run (session, turn, turn2session)."""
    return [[f"{r}:{g}", f"bm25:{g}"] for r in retrievers if r != "bm25" and "bm25" in retrievers
            for g in ("session", "turn", "turn2session")]


def question_table(rows: Sequence[dict[str, Any]], trec: TrecFiles) -> list[dict[str, Any]]:
    """The per-probe table's rows (a question id met again later in the file is ``<id>#<n>``), and each run's
    ranking and gold into ``trec`` (the session and turn runs, as they were ranked)."""
    from harness.trec import query_id, slots

    n_seen: dict[str, int] = {}
    keys: dict[int, str] = {}
    out = []
    for r in rows:
        if r["seq"] not in keys:
            n = n_seen[r["question_id"]] = n_seen.get(r["question_id"], 0) + 1
            keys[r["seq"]] = r["question_id"] if n == 1 else f"{r['question_id']}#{n}"
        key = keys[r["seq"]]
        out.append({"workload": "longmemeval", "cluster": key, "probe": key, "category": r["question_type"],
                    "abstention": bool(r["abstention"]), "has_evidence": bool(r["user_evidence"]), "row": row_key(r),
                    "arm": r["retriever"], **r["metrics"]})
        if r["scored_as"] == r["granularity"] and "ranked_ids" in r:
            qid = query_id(key, key)
            trec.add_qrels(r["granularity"], qid, dict.fromkeys(r["gold"], 1))
            trec.add_run(r["retriever"], r["granularity"], qid, slots(r["ranked_ids"]))
    return out


def result_rows(table: Any) -> list[dict[str, Any]]:
    """The JSON's rows ``{"retriever", "granularity", "scored_as", "averaging", "questions", "metrics", "types"}``:
    per scored run and averaging the mean of every metric over the questions the averaging keeps, and per question
    type, each by ``harness.probes.aggregate`` over the per-probe table."""
    from harness.probes import aggregate

    rows = list(dict.fromkeys(table.column("row").to_pylist()))
    arms = dict(zip(table.column("row").to_pylist(), table.column("arm").to_pylist(), strict=True))
    types = list(dict.fromkeys(table.column("category").to_pylist()))
    out = []
    for avg, where in AVERAGING_SETS.items():
        every = aggregate(table, where, R.METRIC_NAMES)
        per_type = {t: aggregate(table, {**where, "category": t}, R.METRIC_NAMES) for t in types}
        for row in rows:
            gran = row.split(":")[-1]
            e = every.get(row)
            out.append({"retriever": arms[row], "granularity": "turn" if gran == "turn2session" else gran,
                        "scored_as": "session" if gran == "turn2session" else gran, "averaging": avg,
                        "questions": e["n_probes"] if e else 0,
                        "metrics": {m: (e["metrics"][m]["mean"] if e else None) for m in R.METRIC_NAMES},
                        "types": {t: {"questions": pt[row]["n_probes"],
                                      "metrics": {m: pt[row]["metrics"][m]["mean"] for m in R.METRIC_NAMES}}
                                  for t, pt in per_type.items() if row in pt}})
    order = {row: i for i, row in enumerate(rows)}
    return sorted(out, key=lambda r: (order[row_key(r)], list(AVERAGING_SETS).index(r["averaging"])))


def recompute(run: Any, payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``payload`` (a results JSON) holds that its per-probe table determines (the rows under both averagings,
    per type; the statistics), and the same recomputed from ``run``."""
    return ({"rows": payload["rows"], "statistics": payload["statistics"]},
            {"rows": result_rows(run.table), "statistics": run_statistics(run, run.meta["config"]["pairs"])})


def run_statistics(run: Any, pairs: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Per averaging, the intervals of every scored run on the headline and figure metrics; under ``paper`` also
    the comparator pairs on the headline metrics (questions resampled as one set)."""
    rows = list(dict.fromkeys(run.table.column("row").to_pylist()))
    metrics = list(dict.fromkeys((*HEADLINE, *FIGURE_METRICS)))
    return {avg: statistics(run, rows, metrics, where, probe_set=f"{avg} averaging",
                            pairs=present_pairs(pairs, rows) if avg == "paper" else (), pair_metrics=HEADLINE)
            for avg, where in AVERAGING_SETS.items()}


def write_outputs(out_dir: Path, payload: dict[str, Any],
                  fault_hook: Callable[[str], None] | None = None) -> list[Path]:
    """``longmemeval-protocol.{png,md,json}``, each atomically (temp file + rename; ``fault_hook`` steps
    ``longmemeval-protocol.png.write``, ``.md.write``, ``.json.write``), the JSON last: a results JSON exists only
    for a run whose every file was written."""
    import io

    import matplotlib.pyplot as plt

    fig = _figure(payload)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)
    files = [("png", buf.getvalue()), ("md", (render_markdown(payload).rstrip() + "\n").encode("utf-8")),
             ("json", (json.dumps(_jsonable(payload), indent=2, ensure_ascii=False) + "\n").encode("utf-8"))]
    paths = []
    for ext, data in files:
        path = out_dir / f"{NAME}.{ext}"
        write_atomic(path, data, fault_hook, f"{NAME}.{ext}.write")
        paths.append(path)
    return [paths[2], paths[1], paths[0]]


def _dense_device() -> str:
    """Where the dense retriever runs (its default: CUDA when torch sees a GPU, else the CPU)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _in_order(done: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per-question rows in file order (workers complete out of order; ``seq`` is the question's position): the
    means are then summed in the same order as a serial run's, so they are equal to the last bit."""
    return [r for rs in sorted((rs for rs in done if rs), key=lambda rs: rs[0]["seq"]) for r in rs]


# ------------------------------------------------------------------------------------------------------ render
def published() -> list[dict[str, Any]]:
    """The published rows (``harness/workloads/data/longmemeval_published.json``)."""
    text = resources.files("harness.workloads").joinpath("data/longmemeval_published.json").read_text("utf-8")
    return json.loads(text)["rows"]


def _row_label(r: dict[str, Any]) -> list[Any]:
    return [r["retriever"], r["granularity"], r["scored_as"], r["averaging"], r["questions"]]


def _tables(payload: dict[str, Any]) -> list[str]:
    head = ["retriever", "granularity", "scored as", "averaging", "n"]
    rows = payload["rows"]
    out = []
    for metric in ("recall_all", "ndcg_any", "recall_any"):
        out += [f"**{metric}@k**", "",
                md_table(head + [f"@{k}" for k in R.KS],
                         [_row_label(r) + [r["metrics"].get(f"{metric}@{k}") for k in R.KS] for r in rows]), ""]
    return out


def no_gold_note(payload: dict[str, Any]) -> list[str]:
    """A paragraph where a table shows recall_all@k above recall_any@k (impossible for a question with gold, so
    it comes from questions without any): how many questions of each such ``paper`` row have no user evidence turn
    (its n minus the ``strict`` row's n), which the user-turn corpus holds no gold for, so they score recall_all 1
    and recall_any 0 at every k. Computed from the rows of the JSON; empty when no row shows it."""
    rows = payload["rows"]
    strict_n = {(r["retriever"], r["granularity"], r["scored_as"]): r["questions"] for r in rows
                if r["averaging"] == "strict"}
    shown = []
    for r in rows:
        above = [k for k in R.KS if (r["metrics"].get(f"recall_all@{k}") or 0.0)
                 > (r["metrics"].get(f"recall_any@{k}") or 0.0) + 1e-12]
        if above:
            key = (r["retriever"], r["granularity"], r["scored_as"])
            n_without = r["questions"] - strict_n[key] if r["averaging"] == "paper" and key in strict_n else None
            shown.append((r, above, n_without))
    if not shown:
        return []
    where = "; ".join(f"{r['retriever']} {r['granularity']}->{r['scored_as']} ({r['averaging']}) at k = "
                      f"{', '.join(map(str, above))}" for r, above, _ in shown)
    counts = sorted({(n, r["questions"]) for r, _, n in shown if n is not None})
    if len(counts) == 1:
        why = (f"{counts[0][0]} of the {counts[0][1]} questions those rows average have no user evidence turn (the "
               "`strict` rows leave them out). ")
    else:
        why = ("Those rows average questions without a user evidence turn ("
               + ", ".join(f"{n} of {q}" for n, q in counts) + "; the `strict` rows leave them out). "
               if counts else "")
    return [f"**recall_all above recall_any** in {len(shown)} row(s): {where}. {why}The official corpus holds "
            "user turns only, so such a question has no gold, and the official code scores it recall_all 1 and "
            "recall_any 0 at every k.", ""]


def _published_table() -> str:
    cols = ("recall_all@5", "ndcg_any@5", "recall_all@10", "ndcg_any@10", "recall_any@5")
    return md_table(["published: source", "data", "retriever", "granularity", "scored as", "averaging", "n", *cols],
                    [[p["source"], p["data"], p["label"], p["granularity"], p["scored_as"] or "not stated",
                      p["averaging"], p["questions"], *[p["metrics"].get(c) for c in cols]] for p in published()])


def _data_line(label: str) -> str:
    """The data line of a page: ``data: ...`` as the label says it (``data: synthetic, <generator> seed <S>`` for a
    generated file), older labels without the prefix get one."""
    return label if label.startswith("data: ") else f"data: {label}"


def render_markdown(payload: dict[str, Any]) -> str:
    """The results file's Markdown: the data line, one table per metric family, the published numbers apart."""
    c = payload["config"]
    quick = f" Quick run: the first {c['quick_questions']} questions only." if c.get("quick") else ""
    out = [f"# LongMemEval retrieval, official protocol ({payload['n_questions']} questions)", "",
           f"{_data_line(payload['data'])}.{quick} Types: {', '.join(c['types']) if c.get('types') else 'all'}. "
           f"Retrievers: {', '.join(c['retrievers'])}. Averaging `paper` skips the abstention (`_abs`) questions, "
           "`strict` also skips questions without a user evidence turn; n = questions averaged. A turn run scored "
           "as `session` is the official turn2session scoring.", ""]
    out += _tables(payload)
    out += no_gold_note(payload)
    out += uncertainty_lines(payload, "**Differences**")
    out += ["**Published numbers** (not measured here; the paper's are on LongMemEval M):", "", _published_table(), "",
            meta_block(payload["meta"], payload.get("run"))]
    return "\n".join(out)


def uncertainty_lines(payload: dict[str, Any], heading: str = "## Differences") -> list[str]:
    """How the measured rows' intervals were made and the Differences section (``paper`` averaging)."""
    stats = payload.get("statistics") or {}
    pairs = (payload.get("comparisons") or {}).get("pairs")
    return [method_sentence(stats.get("paper"), "the questions each averaging keeps (the row's n)", clusters="question"),
            "", *differences_section(stats.get("paper"), heading=heading, clusters="question",
                                     configured=len(pairs) if pairs else None)]


def _figure(payload: dict[str, Any]) -> Any:
    """Recall_all@k and ndcg_any@k per series (retriever x granularity -> scored as; paper averaging solid, strict
    dashed). Series that measure the same value would hide each other: each series is drawn a little to the side of
    k (a fixed fraction of a decade, in the legend's order) with a marker of its own, and a strict row's open
    marker rings its paper row's dot, so every series stays visible; the ticks are at the true k."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 6.4))
    keys = list(dict.fromkeys((r["retriever"], r["granularity"], r["scored_as"]) for r in payload["rows"]))
    colours = plt.get_cmap("tab10")
    markers = ("o", "s", "^", "D", "v", "P", "X", "*")
    spread = 0.035  # of a decade, between neighbouring series
    for ax, metric in zip(axes, ("recall_all", "ndcg_any"), strict=True):
        for r in payload["rows"]:
            ys = [r["metrics"].get(f"{metric}@{k}") for k in R.KS]
            if any(y is None for y in ys):
                continue
            i = keys.index((r["retriever"], r["granularity"], r["scored_as"]))
            shift = 10 ** ((i - (len(keys) - 1) / 2) * spread)
            paper = r["averaging"] == "paper"  # strict: a larger open ring around the paper dot it may share
            st = (payload.get("statistics") or {}).get(r["averaging"])
            ivs = [interval(st, f"{metric}@{k}", row_key(r)) for k in R.KS]
            if all(iv and iv.get("lo") is not None for iv in ivs):  # 95% intervals (a JSON with statistics)
                ax.errorbar([k * shift for k in R.KS], ys, fmt="none", capsize=0, ecolor=colours(i % 10),
                            elinewidth=0.8, alpha=0.6, yerr=[[max(0.0, y - iv["lo"]) for y, iv in zip(ys, ivs, strict=True)],
                                                             [max(0.0, iv["hi"] - y) for y, iv in zip(ys, ivs, strict=True)]])
            ax.plot([k * shift for k in R.KS], ys, marker=markers[i % len(markers)], markersize=4 if paper else 8,
                    linestyle="-" if paper else "--", color=colours(i % 10), mfc=colours(i % 10) if paper else "none",
                    label=f"{r['retriever']} {r['granularity']}->{r['scored_as']} ({r['averaging']}, n={r['questions']})")
        ax.set_xscale("log")
        ax.set_xticks(list(R.KS), [str(k) for k in R.KS])
        ax.minorticks_off()
        ax.set_xlabel("k (series drawn side by side around each k)")
        ax.set_ylabel(f"{metric}@k")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=3, frameon=False)  # below both panels
    fig.suptitle(f"LongMemEval official retrieval protocol: {payload['data']}\n"
                 "solid, small filled markers: paper averaging; dashed, large open markers: strict", fontsize=9)
    fig.subplots_adjust(bottom=0.3)
    return fig


def _matches(run_row: dict[str, Any], pub: dict[str, Any]) -> bool:
    ret = run_row["retriever"].lower()
    family = "bm25" if ret == "bm25" else ("contriever" if "contriever" in ret else
                                           "stella-v5-1.5b" if "stella" in ret else None)
    return (family == pub["retriever"] and run_row["granularity"] == pub["granularity"]
            and run_row["averaging"] == pub["averaging"]
            and (pub["scored_as"] is None or pub["scored_as"] == run_row["scored_as"]))


def docs_page(payload: dict[str, Any]) -> str:
    """The docs page of a results JSON: what was run on what data, the measured rows, and beside them the
    published numbers of the same retriever, granularity and averaging (marked ``published``, with their data:
    the paper's are on M; MiniLM has no published row)."""
    c = payload["config"]
    cols = ("recall_all@5", "ndcg_any@5", "recall_all@10", "ndcg_any@10")
    beside = []
    for r in payload["rows"]:
        st = (payload.get("statistics") or {}).get(r["averaging"])
        beside.append(["measured", payload.get("data_file") or payload["data"], *_row_label(r),
                       *[cell(st, m, row_key(r), r["metrics"].get(m)) for m in cols]])
        for p in published():
            if _matches(r, p):
                beside.append([f"published ({p['source']})", p["data"], p["label"], p["granularity"],
                               p["scored_as"] or "not stated", p["averaging"], p["questions"],
                               *[p["metrics"].get(m) for m in cols]])
    out = ["# LongMemEval retrieval (official protocol)", "",
           "memsim reproduces LongMemEval's official retrieval evaluation (user-turn corpus, gold = ids containing "
           "`answer`, recall_any / recall_all / ndcg_any with the official DCG, turn2session) with BM25 and the "
           "flat-contriever dense path on all-MiniLM-L6-v2 weights (the paper used Contriever and Stella; a local "
           "Contriever folder plugs in with `--encoder PATH`). Run it with `memsim bench longmemeval --protocol "
           "longmemeval --data FILE`.", "",
           f"This run: {payload['n_questions']} questions; {_data_line(payload['data'])}"
           f"{' (quick: the first ' + str(c['quick_questions']) + ' questions)' if c.get('quick') else ''}; "
           f"wall time {payload['wall_s']:.0f} s.", "",
           "## Measured, with the published numbers beside", "",
           "Rows marked *published* were not measured here: the paper's Table 9 is on LongMemEval M (n = 470, "
           "paper averaging), the port's rows on the original S release. Numbers on different data are not "
           "expected to agree.", "",
           md_table(["", "data", "retriever", "granularity", "scored as", "averaging", "n", *cols], beside), "",
           *uncertainty_lines(payload), "## Every metric of this run", ""]
    out += _tables(payload)
    out += no_gold_note(payload)
    out += ["## Published numbers", "", _published_table(), "", meta_block(payload["meta"], payload.get("run"))]
    return "\n".join(out) + "\n"
