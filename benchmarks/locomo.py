"""LoCoMo cross-design benchmark: the same real conversations through every arm, delivered vs stored, tokens, time.

``memsim bench locomo`` loads the conversations (``harness.workloads.locomo``), runs each selected arm over each
conversation (``harness.workloads.runner`` behind ``harness.deliveries.run_recorded``), and writes, all under the
run's own names in the folder it is given:

- ``<out>/locomo/<sample_id>.json`` as soon as that conversation finishes (atomic replace; fault-hook step
  ``locomo.conversation.write``), so an interrupted run keeps every finished conversation;
- ``<out>/locomo.probes.parquet``: the per-probe table (``benchmarks.probe_tables``: one row per probe and delivered
  row, ids and numbers only). Every aggregate of the JSON is computed from it by ``harness.probes.aggregate``, and
  so are the statistics: each headline number's 95% interval (probes resampled within each conversation) and the
  paired comparisons of the comparator pairs fixed before the run (:func:`comparator_pairs`, the table's
  ``config["pairs"]``);
- ``<out>/locomo.deliveries.json.gz`` (what each row delivered, ``harness.deliveries``) and, unless
  ``explore=False``, ``<out>/locomo.explore.html`` (the per-question explorer, ``harness.explore``);
- ``<out>/locomo/runs/<row>.<level>.trec`` per ranked row and ``<out>/locomo/qrels.<level>.trec`` (TREC files of the
  delivered rankings, turn and session level, ``harness.trec``);
- ``<out>/locomo.{json,md,png}``: per delivered row the headline (categories 1-4) and per-category metrics, the
  statistics, arm status (an unavailable or failing arm is listed with its reason), data quirks counted, peak
  memory, wall time; pages and figure are rendered by ``benchmarks.locomo_page``.

``--quick`` runs one conversation (the first loaded, or each one named with ``--conversation``) cut to its first
sessions and a few probes (about a minute per conversation). ``--arm-class package.module:Class`` adds an external
arm behind the same protocol. Encoders (``embed``): by default every arm that embeds reads the embedding store
(``harness.store_encoders``: each distinct text encoded once, alone, kept on disk across runs; the deliveries equal
the earlier path's, tested against the pre-store snapshot); ``embed="per-call"`` is the earlier behaviour: one
encoder cache serves the whole run (``runner.SharedEncoder``: an encoder call another arm already made is answered
with its vectors, so results are identical; ``share_encoders=False`` turns it off; hits and misses are in the
JSON's ``encoder_cache``). ``--workers N`` (default ``DEFAULT_WORKERS``, the fastest measured on two cores) runs N
conversations at once, each in a spawned process with one torch thread; every metric, ranking and delivered text
equals the serial run's (``--workers 1``, one process). The JSON records the wall time, the worker count and the
peak memory against the expected levels (``levels``). ``python -m benchmarks.locomo --docs`` renders
``docs/locomo.md`` from the committed JSON. Nothing here depends on which conversations are loaded.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
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
    write_atomic,
    write_results,
)
from benchmarks.locomo_page import (  # noqa: F401  (re-exported: the docs, README and tests render through here)
    DOCS_PAGE,
    EXAMPLE_CHARS,
    INTERVAL_METRICS,
    _order,
    docs_page,
    expected_levels_line,
    figure,
    headline_table,
    markdown,
    readme_section,
    workers_markdown,
)
from benchmarks.probe_tables import (
    TrecFiles,
    group_summaries,
    metric_means,
    present_pairs,
    record_row,
    statistics,
)
from benchmarks.progress import Tracker, as_tracker, worker_tracker
from benchmarks.workload_run import (  # noqa: F401  (excerpt_body re-exported)
    check_run_options,
    encoder_store,
    excerpt_body,
    own_peak_rss_mb,
    peak_rss_mb,
    spawn_pool,
)
from harness.workloads.arms import SPECS, require_runnable, select_arms
from harness.workloads.locomo import Conversation, load_locomo, resolve_locomo_path, select_conversations
from harness.workloads.metrics import ALL_CATEGORIES, HEADLINE_CATEGORIES
from harness.workloads.runner import shared_encoders

NAME = "locomo"
QUICK_SESSIONS = 3
QUICK_PROBES = 6
HEADLINE_WHERE = {"category": [str(c) for c in HEADLINE_CATEGORIES]}
PAIR_METRICS = ("evidence_recall", "all_evidence")
"""The Differences section's metrics: every comparator pair is tested on each (the Holm family)."""


def comparator_pairs(k_values: Sequence[int]) -> list[list[str]]:
    """The comparator pairs, fixed by the configuration before any run (``[a, b]``: a - b is tested): at each K,
    every AgentFly ranking row against the bm25 and hybrid baselines, AgentFly NP's faithful pooler ranking against
    its mean-pooling variant, and hybrid against bm25; Fractal's prompt against the plain transcript; Tortoise's
    evaluation path against hybrid at the largest K and against its volunteered block; Tortoise on LoCoMo's recorded
    LM extraction against the verbatim points, for both rows."""
    big = max(k_values)
    pairs: list[list[str]] = []
    for k in k_values:
        pairs += [[f"{d}@{k}", f"{b}@{k}"] for d in ("np-pooler", "np-mean", "pm") for b in ("bm25", "hybrid")]
        pairs += [[f"np-pooler@{k}", f"np-mean@{k}"], [f"hybrid@{k}", f"bm25@{k}"]]
    return pairs + [["fractal", "full"], ["tortoise-eval", f"hybrid@{big}"], ["tortoise-eval", "tortoise-volunteer"],
                    ["tortoise-recorded-eval", "tortoise-eval"], ["tortoise-recorded-volunteer", "tortoise-volunteer"]]


LEVEL_WALL_S = 15 * 60
LEVEL_PRE_PAPER_WALL_S = 5 * 60
LEVEL_PEAK_BYTES = 4e9
PRE_PAPER_ARMS = ("full", "last20", "bm25", "mean", "hybrid", "oracle", "oracle-nodate", "fractal", "np-pooler",
                  "np-mean", "pm", "tortoise")
DEFAULT_WORKERS = 2


def levels(wall_s: float, peak_rss_mb: float, arms: list[str] | tuple[str, ...] | None = None) -> dict[str, Any]:
    """The expected levels of a full run over the shipped conversations against what this run measured: wall time
    at most 5 minutes with the arms that existed before the LoCoMo-paper rows (``PRE_PAPER_ARMS``, every arm but
    ``tortoise-recorded``), at most 15 minutes with any other arm set (the full design run); peak resident memory
    at most 4 GB = 4e9 bytes. ``arm_set`` names which wall level applies."""
    gb = peak_rss_mb * 2**20 / 1e9
    pre = arms is not None and tuple(arms) == PRE_PAPER_ARMS
    wall_max = LEVEL_PRE_PAPER_WALL_S if pre else LEVEL_WALL_S
    every = tuple(arms or ()) == tuple(SPECS)
    return {"arm_set": "pre-paper arms" if pre else "full design run" if every or arms is None else "selected arms",
            "wall_s": {"measured": wall_s, "max": wall_max, "met": wall_s <= wall_max},
            "peak_rss_gb": {"measured": gb, "max": LEVEL_PEAK_BYTES / 1e9, "met": gb <= LEVEL_PEAK_BYTES / 1e9}}


def quick_slice(conv: Conversation) -> Conversation:
    """The first ``QUICK_SESSIONS`` sessions and up to ``QUICK_PROBES`` probes answerable from them, one per
    category first (so the quick run still shows every category it can)."""
    small = conv.sliced(max_sessions=QUICK_SESSIONS)
    picked, seen = [], set()
    for p in small.probes:
        if p.category not in seen:
            picked.append(p)
            seen.add(p.category)
    for p in small.probes:
        if len(picked) >= QUICK_PROBES:
            break
        if p not in picked:
            picked.append(p)
    picked = sorted(picked[:QUICK_PROBES], key=lambda p: p.index)
    return small.model_copy(update={"probes": picked})


TIMING_KEY = re.compile(r"(^|_)(ms|s)(_|$)|latency|wall|peak|rss|machine|date|encoder_cache|workers|^run$")


def without_timings(obj: Any) -> Any:
    """``obj`` (a results JSON or part of it) without what depends on time, machine or worker count: keys naming
    milliseconds or seconds (``*_ms``, ``*_s``, ``ms`` inside a name), latency, wall time, peak memory, the
    machine, dates, the encoder cache's hit counts, the worker count and the ``run`` block (the code, command and
    wall time of the run that wrote it). What is left (metrics, rankings,
    delivered ids and texts, statuses) must be equal for a serial and a parallel run."""
    if isinstance(obj, dict):
        return {k: without_timings(v) for k, v in obj.items() if not TIMING_KEY.search(str(k))}
    if isinstance(obj, list):
        return [without_timings(v) for v in obj]
    return obj


WALL_CLOCK = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+[+\dZ:]*|[0-9a-f]{32}|[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}")
FRACTAL_TEXT_SIZE = re.compile(r"^(tokens|chars|text_sha1)")


def comparable(obj: Any, fractal: bool = False) -> Any:
    """``without_timings(obj)`` less what Fractal's prompt takes from the wall clock: its history JSON carries the
    run's timestamps and random turn ids (FRA-02), so the size and digest of its delivered text differ between
    any two runs, serial or not. Fractal's token and character counts and text digest are left out (and so are the
    intervals of its token counts), its excerpt is kept with timestamps and ids masked; its recall, stored recall
    and delivered ids stay."""
    def walk(x: Any, fr: bool) -> Any:
        if isinstance(x, dict):
            fr = fr or x.get("row") == "fractal"
            out = {}
            for k, v in x.items():
                if fr and FRACTAL_TEXT_SIZE.match(str(k)):
                    continue
                if FRACTAL_TEXT_SIZE.match(str(k)) and isinstance(v, dict) and "fractal" in v:  # per-row intervals
                    v = {r: iv for r, iv in v.items() if r != "fractal"}
                out[k] = WALL_CLOCK.sub("#", v) if fr and k == "text_excerpt" else walk(v, fr or k == "fractal")
            return out
        if isinstance(x, list):
            return [walk(v, fr) for v in x]
        return x

    return walk(without_timings(obj), fractal)


def quick_conversations(chosen: list[Conversation], named: bool) -> list[Conversation]:
    """``--quick``: every conversation named with ``--conversation``, each cut by ``quick_slice``; without a
    name, the first loaded conversation only (the quick run is a smoke test, not a sample)."""
    return [quick_slice(c) for c in (chosen if named else chosen[:1])]


def _write_atomic(path: Path, payload: dict[str, Any], fault_hook: Callable[[str], None] | None) -> None:
    data = (json.dumps(_jsonable(payload), ensure_ascii=False) + "\n").encode("utf-8")
    write_atomic(path, data, fault_hook, "locomo.conversation.write")


# ------------------------------------------------------------------------------------------ table and aggregates
def ok_rows(res: dict[str, Any]) -> dict[str, str]:
    """Row -> arm for every row of an arm that finished on this conversation."""
    return {row: arm for arm, info in res["arms"].items() if info["status"] == "ok" for row in info.get("rows", [])}


def table_rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-probe table's rows of every conversation's records (records of failed arms are never there)."""
    out = []
    for res in results:
        arms = ok_rows(res)
        out += [record_row(r, workload="locomo", arm=arms[r["row"]]) for r in res["records"]]
    return out


def summaries(table: Any, ingest: dict[str, float]) -> dict[str, dict[str, Any]]:
    """Per row: ``headline`` (categories 1-4), ``by_category`` (the categories it has) and ``ingest_ms_per_turn``,
    each summary computed from the per-probe table (``benchmarks.probe_tables.group_summaries``)."""
    from benchmarks.probe_tables import empty_summary

    head = group_summaries(table, HEADLINE_WHERE)
    cats = {str(c): group_summaries(table, {"category": str(c)}) for c in ALL_CATEGORIES}
    rows = list(dict.fromkeys(table.column("row").to_pylist()))
    return {row: {"headline": head.get(row) or empty_summary(),
                  "by_category": {c: per[row] for c, per in cats.items() if row in per},
                  "ingest_ms_per_turn": ingest.get(row)} for row in rows}


def _ingest_per_turn(results: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Per row: its arm's ingest milliseconds summed over the conversations it finished, per turn of those."""
    out: dict[str, float] = {}
    row_arm = {row: a for res in results for a, info in res["arms"].items() for row in info.get("rows", [])}
    for arm in {a for res in results for a in res["arms"]}:
        ok = [res for res in results if res["arms"][arm]["status"] == "ok"]
        ms = sum(res["arms"][arm]["ingest_ms"] for res in ok)
        turns = sum(res["n_turns"] for res in ok)
        for row, a in row_arm.items():
            if a == arm and turns:
                out[row] = ms / turns
    return out


def aggregate(results: list[dict[str, Any]], table: Any) -> dict[str, Any]:
    """Pool the run: per-row summaries and design measurements from the per-probe ``table``, ingest ms per turn,
    arm status and quirks from the per-conversation results."""
    row_arm = {row: a for res in results for a, info in res["arms"].items() for row in info.get("rows", [])}
    rows = summaries(table, _ingest_per_turn(results)) if len(table) else {}
    metas = metric_means(table) if len(table) else {}
    for row, s in rows.items():
        s["arm"] = row_arm.get(row)
        s["meta_means"] = metas.get(row, {})
    status = {arm: {res["conversation"]: {k: v for k, v in res["arms"][arm].items() if k in ("status", "message")}
                    for res in results if arm in res["arms"]}
              for arm in dict.fromkeys(a for res in results for a in res["arms"])}
    quirks = {res["conversation"]: res["quirks"] for res in results}
    return {"rows": rows, "arm_status": status, "quirks": quirks}


def run_statistics(run: Any, pairs: Sequence[Sequence[str]]) -> dict[str, Any]:
    """The page's statistics from the per-probe table: the headline intervals of every row and the comparator
    pairs the run has on :data:`PAIR_METRICS` (probes stratified by conversation)."""
    rows = _order({r: {"arm": a} for r, a in dict(zip(run.table.column("row").to_pylist(),
                                                         run.table.column("arm").to_pylist(), strict=True)).items()})
    return {"headline": statistics(run, rows, INTERVAL_METRICS, HEADLINE_WHERE, probe_set="categories 1-4",
                                   pairs=present_pairs(pairs, rows), pair_metrics=PAIR_METRICS)}


def recompute(run: Any, payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``payload`` (a results JSON) holds that its per-probe table determines, and the same recomputed from
    ``run`` (the table read back): every row's and every conversation's summaries, the design measurements and the
    statistics."""
    from harness.probes import select

    parts = ("headline", "by_category")
    rows = payload["aggregate"]["rows"]
    held = {"rows": {r: {k: rows[r][k] for k in (*parts, "meta_means")} for r in rows},
            "conversations": {c["conversation"]: {r: {k: s[k] for k in parts} for r, s in c["summary"].items()}
                              for c in payload["conversations"]},
            "statistics": payload["statistics"]}
    metas = metric_means(run.table)
    got = {"rows": {r: {**{k: s[k] for k in parts}, "meta_means": metas.get(r, {})}
                    for r, s in summaries(run.table, {}).items()},
           "conversations": {c: {r: {k: s[k] for k in parts} for r, s in
                                 summaries(select(run.table, {"cluster": c}), {}).items()}
                             for c in held["conversations"]},
           "statistics": run_statistics(run, run.meta["config"]["pairs"])}
    return held, got


# ---------------------------------------------------------------------------------- conversations in parallel
_EVENTS: Any = None  # a worker's queue to the parent (progress and echo), set by _worker_init


def _worker_init(events: Any) -> None:
    """Start of a spawned worker: one torch thread (as the serial run), the parent's event queue."""
    global _EVENTS
    set_torch_threads(1)
    _EVENTS = events


def _one_conversation(job: dict[str, Any], track: Callable[..., Any] | None = None,
                      echo: Callable[[str], None] | None = None, answerer: Any = None) -> dict[str, Any]:
    """One conversation through every arm (``harness.deliveries.run_recorded``: the runner with every delivered
    row kept for the delivery store), with its own encoder cache when ``job["share"]``: the result, the store's
    record of the conversation, its rankings and relevance for the TREC files and the cache's hits and misses. In a
    worker, progress and echo go to the parent's queue and the answerer is built here (the parent checked it)."""
    from harness.deliveries import DeliveryWriter
    from harness.deliveries.run import run_recorded
    from harness.trec import query_id
    from harness.workloads.metrics import delivered_ranking

    if job["in_worker"]:
        tracker = worker_tracker(_EVENTS)
        track, echo = tracker, tracker.echo
        if job["lm"]:
            from harness.workloads.answer import Answerer

            answerer = Answerer(job["lm"], **({"api_base": job["lm_base"]} if job["lm_base"] else {}))
    conv = job["conv"]
    session_of = {t.dia_id: t.session for t in conv.turns()}
    trec = TrecFiles()
    writer = DeliveryWriter(os.devnull)  # collects this conversation; the parent writes the run's store

    def seen(row: str, probe: Any, d: Any) -> None:
        trec.add_delivery(row, query_id(conv.sample_id, probe.index), delivered_ranking(d.meta), probe.evidence,
                          session_of)

    with _encoders(job) as shared:
        res = run_recorded(conv, job["names"], Path(job["work_root"]), writer, on_delivery=seen,
                           k_values=job["k_values"], others=job["others"], lm=job["lm"], quick=job["quick"],
                           seed=job["seed"], track=track, answerer=answerer, echo=echo)
        stats = _encoder_stats(shared)
    trec.keep_rows(ok_rows(res))
    return {"result": res, "deliveries": writer.records(), "trec": trec.to_dict(), "encoder_cache": stats,
            "pid": os.getpid(), "peak_rss_mb": own_peak_rss_mb()}


def _encoders(job: dict[str, Any]) -> Any:
    """The encoders of a conversation (or, in the parent of a serial run, of the whole run): the embedding store
    (``job["embed"] == "store"``, the default; ``job["store"]`` is its ``StoreSession.config()``) or the earlier
    per-call cache (``shared_encoders``, when ``job["share"]``)."""
    if job.get("embed", "per-call") == "store":
        from harness.store_encoders import StoreSession, store_encoders

        cfg = job["store"]
        return store_encoders(StoreSession(Path(cfg["root"]), device=cfg["device"]))
    return shared_encoders() if job["share"] else contextlib.nullcontext({})


def _encoder_stats(shared: Any) -> dict[str, Any]:
    if hasattr(shared, "stats") and callable(shared.stats):  # a store session
        return shared.stats()
    return {n: e.stats() for n, e in shared.items()}


def _run_parallel(jobs: list[dict[str, Any]], workers: int, track: Tracker,
                  echo: Callable[[str], None] | None,
                  done: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    """Each conversation in a pool of ``workers`` spawned processes, longest first (turns x probes); ``done`` sees
    each outcome as it arrives (the per-conversation file is written then); outcomes in the order of ``jobs``."""
    from concurrent.futures import as_completed

    out: list[dict[str, Any] | None] = [None] * len(jobs)
    order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i]["conv"].turns()) * max(1, len(jobs[i]["conv"].probes)))
    with spawn_pool(workers, _worker_init, lambda events: (events,), track, echo) as (pool, sampler):
        futures = {pool.submit(_one_conversation, {**jobs[i], "in_worker": True}): i for i in order}
        for fut in track(as_completed(futures), description="LoCoMo conversations", total=len(futures),
                         unit="conversations"):
            got = fut.result()
            done(got)
            out[futures[fut]] = got
    got = [o for o in out if o is not None]
    for o in got:
        o["sampled_peak_rss_mb"] = sampler.peak_mb
        o["sampled_peak_parts_mb"] = sampler.peak_parts_mb
        o["sampled_peak_pss_mb"] = sampler.peak_pss_mb
    return got


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, data: Path | None = None,
        conversations: list[str] | None = None, arms: str | None = None, k_values: tuple[int, ...] = (4, 8),
        lm: str | None = None, lm_base: str | None = None, track: Callable[..., Any] | None = None,
        echo: Callable[[str], None] | None = None, tmp_dir: Path | None = None,
        fault_hook: Callable[[str], None] | None = None, arm_classes: list[str] | None = None,
        share_encoders: bool = True, workers: int = DEFAULT_WORKERS, embed: str = "store",
        embed_store: Path | None = None, explore: bool = True) -> list[Path]:
    """Run the LoCoMo benchmark and write its files (see the module docstring) to ``out_dir``.

    ``arm_classes`` are external arms (``package.module:Class``, see ``harness.workloads.arms.load_arm_class``)
    run beside ``arms``. With ``quick``, each conversation named in ``conversations`` runs cut short (without
    names, the first loaded one). ``share_encoders`` gives the run one encoder cache shared by every arm
    (``harness.workloads.runner.SharedEncoder``; with workers, one cache per conversation). ``workers``:
    conversations run in that many spawned processes at once (one torch thread each; never more processes than
    conversations); 1 runs them one after the other in this process. Every metric, ranking and delivered text is
    the same for any ``workers``; only times differ. ``embed``: ``"store"`` (the default) gives every arm that
    embeds the embedding store (``embed_store``, else the default folder; on the GPU when torch sees one);
    ``"per-call"`` is the earlier per-call cache above. ``explore=False`` skips the explorer page (the delivery
    store is written either way)."""
    from harness.deliveries import DeliveryWriter, deliveries_path
    from harness.store_encoders import StoreSession

    store = encoder_store(embed, embed_store)
    t_start = time.perf_counter()
    track = as_tracker(track)
    check_run_options(out_dir, k_values, workers)
    names = select_arms(arms, arm_classes, quick=quick)
    require_runnable(names)  # no importable arm: one line now, never a results file without rows
    src = resolve_locomo_path(data)
    loaded = load_locomo(src)
    chosen = select_conversations(loaded, conversations)
    if quick:
        chosen = quick_conversations(chosen, bool(conversations))
        if echo:
            echo(f"--quick: {len(chosen)} conversation(s), each cut to its first {QUICK_SESSIONS} sessions and at "
                 f"most {QUICK_PROBES} probes: {', '.join(c.sample_id for c in chosen)}")
    answerer = None
    if lm:
        from harness.workloads.answer import Answerer

        answerer = Answerer(lm, **({"api_base": lm_base} if lm_base else {}))
        answerer.check()
    pairs = comparator_pairs(k_values)
    conv_dir = out_dir / NAME
    paths: list[Path] = []
    work_root = Path(tempfile.mkdtemp(prefix="memsim-locomo-", dir=tmp_dir))
    used = min(workers, len(chosen)) or 1
    jobs = [{"conv": conv, "names": names, "work_root": str(work_root), "k_values": tuple(k_values),
             "others": tuple(c for c in loaded if c.sample_id != conv.sample_id), "lm": lm, "lm_base": lm_base,
             "quick": quick, "seed": seed, "share": share_encoders, "in_worker": False, "embed": embed,
             "store": store} for conv in chosen]

    def done(got: dict[str, Any]) -> None:
        from harness.probes import probe_table

        res = got["result"]
        ingest = {row: info["ingest_ms_per_turn"] for info in res["arms"].values() if info["status"] == "ok"
                  for row in info["rows"]}
        rows = table_rows([res])
        res["summary"] = summaries(probe_table(rows), ingest) if rows else {}
        p = conv_dir / f"{res['conversation']}.json"
        _write_atomic(p, res, fault_hook)
        paths.append(p)

    try:
        if used == 1:  # one encoder cache for the whole serial run
            with _encoders(jobs[0] if jobs else {"share": share_encoders}) as shared:
                outcomes = []
                for job in track(jobs, description="LoCoMo conversations", unit="conversations"):
                    got = _one_conversation({**job, "share": False, "embed": "per-call"}, track, echo, answerer)
                    done(got)
                    outcomes.append(got)
                cache_stats = _encoder_stats(shared)
        else:
            outcomes = _run_parallel(jobs, used, track, echo, done)
            cache_stats = {}
            for got in outcomes:
                for n, st in got["encoder_cache"].items():
                    acc = cache_stats.setdefault(n, {"hits": 0, "misses": 0})
                    acc["hits"] += st["hits"]
                    acc["misses"] += st["misses"]
        if store is not None:  # the segments this run's processes sealed, merged
            StoreSession(Path(store["root"]), device=store["device"]).compact()
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    results = [got["result"] for got in outcomes]
    paths.sort(key=lambda p: [c.sample_id for c in chosen].index(p.stem))
    worker_peaks: dict[int, float] = {}  # each worker's own peak: the largest its outcomes saw (jobs order is not
    for got in outcomes if used > 1 else []:  # the order a worker finished them in)
        worker_peaks[got["pid"]] = max(worker_peaks.get(got["pid"], 0.0), got["peak_rss_mb"])
    rows = table_rows(results)
    if not rows:  # every arm unavailable or failed everywhere: an error, not results without rows
        reasons = sorted({f"{arm}: {info.get('message', info['status'])}" for res in results
                          for arm, info in res["arms"].items()})
        raise ValueError("no arm produced a row: " + "; ".join(reasons))
    config = {"data": src.name, "conversations": [c.sample_id for c in chosen],
              "arms": [n if isinstance(n, str) else n.name for n in names], "arm_classes": list(arm_classes or []),
              "k": list(k_values), "quick": quick, "lm": lm, "seed": seed, "share_encoders": share_encoders,
              "embed": embed, "workers": used, "headline_categories": list(HEADLINE_CATEGORIES)}
    label = (f"data: LoCoMo {src.name}, conversations {', '.join(c.sample_id for c in chosen)}"
             + (f" (quick: first {QUICK_SESSIONS} sessions, at most {QUICK_PROBES} probes each)" if quick else ""))
    writer = DeliveryWriter(deliveries_path(out_dir, NAME), data=label)
    trec = TrecFiles()
    for got in outcomes:
        for rec in got["deliveries"]:
            writer.add_record(rec)
        trec.merge(got["trec"])
    from benchmarks.workload_run import finish_design_run

    placed: list[Path] = []
    table = finish_design_run(out_dir, NAME, rows, data=label, config={**config, "pairs": pairs},
                              probe_sets={"headline": HEADLINE_WHERE}, stratify=True, headline_metrics=PAIR_METRICS,
                              writer=writer, trec=trec, explore=explore, echo=echo, fault_hook=fault_hook,
                              placed=placed)
    agg = aggregate(results, table.table)
    payload = {
        "name": NAME, "config": config,
        "conversations": [{k: res[k] for k in ("conversation", "n_turns", "n_sessions", "n_probes", "categories",
                                               "quirks", "arms", "summary")} for res in results],
        "aggregate": agg,
        "comparisons": {"pairs": pairs, "metrics": list(PAIR_METRICS)},
        "statistics": run_statistics(table, pairs),
        "probes": {"file": table.path.name, "rows": len(table.table), "data": label, "explorer": explore},
        "examples": results[0]["examples"] if results else {},
        "encoder_cache": cache_stats,
        "peak_rss_mb": max(outcomes[0]["sampled_peak_rss_mb"], max(worker_peaks.values())) if worker_peaks
        else peak_rss_mb(),
        "worker_peak_rss_mb": sorted(worker_peaks.values()),
        "peak_parts_mb": outcomes[0].get("sampled_peak_parts_mb") if worker_peaks else None,
        "peak_pss_mb": outcomes[0].get("sampled_peak_pss_mb") if worker_peaks else None,
        "meta": {"machine": machine_description(), "seeds": {"seed": seed}, "quick": quick, "workers": used,
                 "wall_s": time.perf_counter() - t_start},
    }
    payload["wall_s"] = payload["meta"]["wall_s"]
    payload["levels"] = levels(payload["wall_s"], payload["peak_rss_mb"], payload["config"]["arms"])
    return write_results(out_dir, NAME, payload, markdown, figure(payload)) + placed + paths


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.locomo --docs [--json FILE] [--page FILE]``: rewrite the docs page from the JSON (the
    worker comparison is ``python -m benchmarks.locomo_workers``)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m benchmarks.locomo")
    ap.add_argument("--docs", action="store_true", help="render the docs page from the results JSON")
    ap.add_argument("--json", type=Path, default=RESULTS_DIR / f"{NAME}.json")
    ap.add_argument("--page", type=Path, default=DOCS_PAGE)
    args = ap.parse_args(argv)
    if not args.docs:
        ap.print_help()
        return 2
    try:
        payload = json.loads(args.json.read_text(encoding="utf-8"))
        args.page.write_text(docs_page(payload), encoding="utf-8")
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {args.json}: cannot render the docs page: {exc}")
        return 1
    print(f"wrote {args.page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
