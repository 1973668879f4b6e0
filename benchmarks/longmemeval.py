"""LongMemEval through every design: each question's own haystack into a fresh store, delivered vs stored evidence.

``memsim bench longmemeval`` (protocol ``designs``) streams the questions of a LongMemEval file
(``harness.workloads.longmemeval.iter_questions``), turns each into one conversation of the shared workload
protocol (``harness.workloads.lme_workload.to_conversation``: sessions in file order, duplicates kept, the session
date as a header line on its first turn, the question asked with its ``question_date``) and runs the arms of the
LoCoMo registry over it with ``harness.workloads.runner.run_conversation``, one fresh work directory per question.

What is measured, per question and delivered row (each arm may deliver several rows):

- **delivered evidence, design view**: the share of the question's evidence turns (``has_answer`` true, user *and*
  assistant turns) whose ids the delivered text carries (turn level), and the share of its evidence sessions of
  which the text carries at least one turn (session level; a session occurrence is one unit, so a session id
  listed twice is two units, as in the file);
- **the official view beside it**: the same with only *user* evidence turns (LongMemEval's retrieval corpus holds
  user turns only, so assistant-side evidence is invisible to it);
- **stored evidence**: the same shares against the ids the arm keeps anywhere after ingest (``Arm.stored``);
- **tokens** of the delivered text (tiktoken cl100k_base, WordPiece and chars/4 beside it), and the runner's
  ranked metrics for rows whose delivery is a ranking.

Aggregates per row: overall, per question type, abstention (``_abs`` in the id) against the rest; questions with
no evidence turn are left out of a recall average and counted. Tortoise's source-session expansion is reported as
a pair of rows (with and without it, ``EXPANSION_PAIR``): the difference in delivered recall and in tokens.

Arms: every built-in arm that applies (``default_arms``); the recorded-extraction arm needs LoCoMo's recorded LM
observations, which LongMemEval files do not have, so it never runs here: by default and when named it is listed
absent with that reason (``arm_status``, ``absent_arms``, a row of the table). An arm that produces no row at all
(PM when it cannot be trained, an arm unavailable on every question) is listed the same way, with one plain
reason (``absent_arms``). AgentFly PM's retriever is trained ONCE
per run, in this process before any question runs, on the *training split*: the questions of the file (whatever
``--limit``/``--types`` select) whose ``int(sha1(question_id).hexdigest(), 16) % 5 == 0`` (``pm_training_split``;
stable, about a fifth); the checkpoint goes to every question through ``ArmContext.pm_model``. A question of the
training split is still evaluated by every other arm, but its PM rows are absent (counted, with the reason), so
PM is never scored on a question it was trained on.

Delivered texts go to ``<out>/longmemeval/delivered.jsonl`` (one line per question and row: ``question_id``,
``row``, ``text``, ``delivered_ids``), written under a temporary name while the run goes and renamed at the end,
and to the delivery store ``<out>/longmemeval.deliveries.json.gz`` (``harness.deliveries``: each arm runs behind
its ``StoredTap``, which also keeps what the arm stored for the views above); unless ``explore=False`` the run
writes the explorer page ``<out>/longmemeval.explore.html`` from it. Every per-probe number goes to the per-probe
table ``<out>/longmemeval.probes.parquet`` (``benchmarks.probe_tables``), from which every aggregate of the results
JSON is computed, with the intervals of the headline table and the paired comparisons of the comparator pairs
fixed before the run (:func:`comparator_pairs`); the delivered rankings go to TREC files
``<out>/longmemeval/runs/<row>.<level>.trec`` with ``qrels.<level>.trec`` (levels ``turn``, ``session`` and
``official``: the user-turn view, assistant turns left out of the ranking, user evidence turns relevant). The
results JSON holds aggregates and a few examples, as ``locomo.json`` does; pages and figure are rendered by
``benchmarks.longmemeval_page``. With ``lm`` each delivered row is
read by LongMemEval's reader (``harness.workloads.lme_qa.Reader``, chain-of-note by default) and the hypothesis
judged with the official templates (``Judge``; ``judge_lm`` defaults to ``lm``); both are checked with one call
before any work. ``lm`` is the reader only: Tortoise keeps its offline extractor, so the design rows are the same
with or without ``--lm``. Hypotheses go to ``<out>/longmemeval/hypotheses/<row>.jsonl``.

Results (``longmemeval.{json,md,png}``, the JSONL files, the table, store, TREC files and page) are written only
when the run completes, each atomically, the JSON last (fault-hook steps ``longmemeval.delivered.write``, ``longmemeval.hypotheses.write``,
``longmemeval.results.write``); an exception, Ctrl-C or a killed worker leaves none of them (files this run had
already placed are removed again).

Scale, encoders and resume: ``benchmarks.longmemeval_exec`` (``workers`` spawned processes or Ray tasks, results in
file order, equal to the serial run's; ``embed="store"`` or ``"per-call"``; ``resume=True`` continues from the
journal of an interrupted run).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import statistics as pystats
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks import longmemeval_exec as ex
from benchmarks.common import _jsonable, machine_description, stamp_run
from benchmarks.longmemeval_exec import (  # noqa: F401  (re-exported: tests and the profiler use them)
    NAME,
    QUICK_PM_TRAIN,
    QUICK_QUESTIONS,
    STEP_DELIVERED,
    STEP_RESULTS,
    TextCache,
    embedding_mode,
    first_pass,
    pm_training_split,
    text_encoders,
)
from benchmarks.longmemeval_exec import train_pm as _train_pm  # noqa: F401  (the profiler's name)
from benchmarks.longmemeval_page import (  # noqa: F401  (re-exported: the docs pages render through here)
    absent_arms,
    docs_page,
    figure,
    render_markdown,
    rows_table,
)
from benchmarks.probe_tables import (
    TrecFiles,
    group_summaries,
    present_pairs,
    ranked_at,
    record_row,
    statistics,
)
from benchmarks.progress import as_tracker, worker_tracker
from benchmarks.workload_run import (
    EMBED_MODES,  # noqa: F401
    check_run_options,
    encoder_store,
    finish_design_run,
    peak_rss_mb,
)
from harness.workloads.arms import SPECS, require_runnable, select_arms
from harness.workloads.base import Delivery

LOCOMO_ONLY = {"tortoise-recorded": "needs LoCoMo's recorded LM observations (the 'observation' field); "
                                    "LongMemEval files carry no recorded extraction"}
EXPANSION_PAIR = ("tortoise-eval", "tortoise-eval-noexp")
"""Tortoise's evaluation path with source-session expansion, and the same path without it."""
VIEW_KEYS = tuple(f"{w}_{lvl}" for w in ("delivered", "stored") for lvl in ("turn", "turn_user", "session",
                                                                           "session_user"))
PAIR_METRICS = ("evidence_recall", "all_evidence")
"""The Differences section's metrics: every comparator pair is tested on each (the Holm family)."""


def comparator_pairs(k_values: Sequence[int]) -> list[list[str]]:
    """The comparator pairs, fixed by the configuration before any run (``[a, b]``: a - b is tested): at each K,
    every AgentFly ranking row against the bm25 and hybrid baselines, NP's faithful pooler ranking against its
    mean-pooling variant, and hybrid against bm25; Fractal against the plain transcript; Tortoise's evaluation
    path with against without its source-session expansion (``EXPANSION_PAIR``), against hybrid at the largest K
    and against its volunteered block."""
    big = max(k_values)
    pairs: list[list[str]] = []
    for k in k_values:
        pairs += [[f"{d}@{k}", f"{b}@{k}"] for d in ("np-pooler", "np-mean", "pm") for b in ("bm25", "hybrid")]
        pairs += [[f"np-pooler@{k}", f"np-mean@{k}"], [f"hybrid@{k}", f"bm25@{k}"]]
    return pairs + [["fractal", "full"], list(EXPANSION_PAIR), ["tortoise-eval", f"hybrid@{big}"],
                    ["tortoise-eval", "tortoise-volunteer"]]


# ------------------------------------------------------------------------------------------- split and data label
def data_description(path: Path, echo: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The data block every results JSON and page of both protocols shows, from the one function that names
    LongMemEval data (``harness.workloads.longmemeval.data_label``): ``data: synthetic, <generator> seed <S>`` only
    for a generated file whose sidecar matches its size and sha256, else the release line. A sidecar that does not
    match is said in one ``warning:`` line through ``echo``."""
    from harness.workloads.longmemeval import data_label

    got = data_label(path)
    if got["warning"] and echo:
        echo(f"warning: {got['warning']}")
    return {k: got[k] for k in ("file", "synthetic", "generator", "label")}


def no_question(path: Path, types: Sequence[str] | None) -> ValueError:
    """The one-line error of a run whose selection holds no question (both protocols raise it before writing)."""
    if types:
        return ValueError(f"{path}: no question matches --types {','.join(types)}")
    return ValueError(f"{path}: the file holds no question")


def default_arms() -> list[str]:
    """Every built-in arm that applies to LongMemEval (all of the registry but ``LOCOMO_ONLY``)."""
    return [n for n in SPECS if n not in LOCOMO_ONLY]


# ------------------------------------------------------------------------------------------ one question, all arms
def question_views(q: Any, conv: Any) -> dict[str, Any]:
    """The evidence sets of one question, read from the question and its conversation side by side (the
    conversation keeps the file's sessions and turns in order, so position i of session j is the same turn):
    ``turn`` / ``turn_user`` (evidence turn ids, both roles / user only), ``session`` / ``session_user`` (the
    session occurrences, by position, holding them) and ``session_of`` (turn id -> session position)."""
    out: dict[str, Any] = {"turn": set(), "turn_user": set(), "session": set(), "session_user": set(),
                           "session_of": {}}
    for sess, csess in zip(q.sessions, conv.sessions, strict=True):
        for turn, cturn in zip(sess.turns, csess.turns, strict=True):
            out["session_of"][cturn.dia_id] = sess.position
            if turn.has_answer is True:
                out["turn"].add(cturn.dia_id)
                out["session"].add(sess.position)
                if turn.role == "user":
                    out["turn_user"].add(cturn.dia_id)
                    out["session_user"].add(sess.position)
    return out


def _share(hit: set[Any], gold: set[Any]) -> float | None:
    return len(hit & gold) / len(gold) if gold else None


def view_metrics(views: dict[str, Any], ids: Iterable[str], prefix: str) -> dict[str, float | None]:
    """Turn- and session-level shares of evidence among ``ids`` in both views (``<prefix>turn``, ...)."""
    ids = set(ids)
    sessions = {views["session_of"][i] for i in ids if i in views["session_of"]}
    return {f"{prefix}turn": _share(ids, views["turn"]), f"{prefix}turn_user": _share(ids, views["turn_user"]),
            f"{prefix}session": _share(sessions, views["session"]),
            f"{prefix}session_user": _share(sessions, views["session_user"])}


def _qa_items(job: dict[str, Any], q: Any, delivered: dict[str, Delivery]) -> dict[str, dict[str, Any]]:
    from harness.workloads.lme_qa import Judge, Reader

    reader = Reader(job["lm"], lm_base=job["lm_base"], style=job["reader_prompt"])
    judge = Judge(job["judge_lm"], lm_base=job["judge_lm_base"])
    out = {}
    for row, d in delivered.items():
        item: dict[str, Any] = {"question_id": q.question_id, "question_type": q.question_type}
        got = reader(q.question, q.question_date, d.text)
        item.update(got)
        if "hypothesis" in got:
            item.update(judge(q.question_id, q.question_type, q.question, q.answer, got["hypothesis"]))
        out[row] = item
    return out



def one_question(job: dict[str, Any], track: Any = None) -> dict[str, Any]:
    """One question through every selected arm in a fresh work directory (``harness.deliveries.run_recorded``:
    each arm behind its ``StoredTap``, every delivered row kept for the delivery store): the per-row records (the
    runner's, with the question type, abstention and the view metrics added), arm status, examples, the delivered
    texts, the store's record of the question, its rankings for the TREC files and, with an LM, the QA items. Runs
    in this process (``track``: the run's tracker, which shows each arm's ingest and probes) or in a worker (which
    reports them to the parent's queue when it has one)."""
    from benchmarks import longmemeval_exec as ex
    from harness.deliveries import DeliveryWriter
    from harness.deliveries.run import run_recorded
    from harness.trec import level_rankings, query_id
    from harness.workloads.lme_workload import to_conversation
    from harness.workloads.metrics import RANKED_KS, delivered_ranking

    q = job["question"]
    conv = to_conversation(q)
    views = question_views(q, conv)
    training = job["pm_model"] is not None and pm_training_split(q.question_id)
    names = [e for e in job["names"] if not (training and (e if isinstance(e, str) else e.name) == "pm")]
    delivered: dict[str, Delivery] = {}
    stored: dict[str, frozenset[str]] = {}
    writer = DeliveryWriter(os.devnull)  # collects this question; the parent writes the run's store
    work = Path(job["work_root"]) / f"q{q.index}"  # the run's root is fresh: one folder per question under it
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        with ex.question_encoders(job):
            res = run_recorded(conv, names, work, writer, stored=stored, k_values=job["k_values"],
                               quick=job["quick"], seed=job["seed"],
                               on_delivery=lambda row, probe, d: delivered.__setitem__(row, d),
                               pm_model=Path(job["pm_model"]) if job["pm_model"] else None,
                               track=worker_tracker(ex._EVENTS) if job["in_worker"] and ex._EVENTS else track)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    wall_s = time.perf_counter() - t0
    ok_rows = {row for info in res["arms"].values() if info["status"] == "ok" for row in info.get("rows", [])}
    for info in res["arms"].values():
        if info["status"] != "ok":
            info.pop("rows", None)
    row_arm = {row: arm for arm, info in res["arms"].items() for row in info.get("rows", [])}
    session_of = {t.dia_id: t.session for t in conv.turns()}
    user = {t.dia_id for t in conv.turns() if t.role == "user"}
    qid = query_id(q.question_id, q.question_id)
    trec = TrecFiles()
    trec.add_qrels("official", qid, {e: 1 for e in views["turn_user"]})
    records = []
    for rec in res["records"]:
        if rec["row"] not in ok_rows:
            continue
        d = delivered[rec["row"]]
        rec.update(question_type=q.question_type, abstention=q.abstention, arm=row_arm[rec["row"]])
        rec.update(view_metrics(views, d.dia_ids, "delivered_"))
        rec.update(view_metrics(views, stored.get(row_arm[rec["row"]], frozenset()), "stored_"))
        ranking = delivered_ranking(d.meta)
        trec.add_delivery(rec["row"], qid, ranking, conv.probes[0].evidence, session_of)
        if ranking is not None:  # the official view: the user turns of the ranking, user evidence relevant
            docs = [x for x in level_rankings(ranking, session_of)["turn"] if x in user or x.startswith("#slot")]
            trec.add_run(rec["row"], "official", qid, docs)
            if rec.get("ranked") and views["turn_user"] and docs:
                rec["ranked"]["official"] = ranked_at(docs, views["turn_user"], RANKED_KS)
        records.append(rec)
    if training:
        res["arms"]["pm"] = {"status": "absent", "message": f"{q.question_id} is in PM's training split "
                                                            f"({ex.PM_SPLIT_RULE})"}
    lines = [{"question_id": q.question_id, "row": r, "text": delivered[r].text,
              "delivered_ids": sorted(delivered[r].dia_ids)} for r in sorted(ok_rows)]
    qa = _qa_items(job, q, {r: delivered[r] for r in sorted(ok_rows)}) if job["lm"] else {}
    return {"question_id": q.question_id, "index": q.index, "question_type": q.question_type, "wall_s": wall_s,
            "abstention": q.abstention, "n_sessions": len(q.sessions), "n_turns": q.n_turns,
            "n_evidence_turns": len(views["turn"]), "n_user_evidence_turns": len(views["turn_user"]),
            "arms": res["arms"], "records": records, "examples": res["examples"], "delivered": lines, "qa": qa,
            "deliveries": writer.records(), "trec": trec.to_dict(), "encoder_cache": ex.cache_stats(job),
            "pid": os.getpid()}


# ------------------------------------------------------------------------------------------------------ aggregates
def table_rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-probe table's rows of every question's records, in file order (a question id met again later in
    the file is ``<id>#<n>`` in the table, its n-th occurrence)."""
    seen: dict[str, int] = {}
    out = []
    for res in results:
        n = seen[res["question_id"]] = seen.get(res["question_id"], 0) + 1
        key = res["question_id"] if n == 1 else f"{res['question_id']}#{n}"
        out += [record_row(r, workload=NAME, arm=r["arm"], extra=VIEW_KEYS, cluster=key, probe=key)
                for r in res["records"]]
    return out


def aggregate(results: Sequence[dict[str, Any]], table: Any) -> dict[str, Any]:
    """Per row, from the per-probe ``table``: ``overall``, ``by_type`` (question type) and ``by_abstention``
    (``abstention`` / ``answerable``), each a summary with the view metrics' means and counts; arm status, the
    expansion pair and the cost per question from the per-question results."""
    overall = group_summaries(table, None, VIEW_KEYS)
    cats = sorted(set(table.column("category").to_pylist()))
    by_type = {t: group_summaries(table, {"category": t}, VIEW_KEYS) for t in cats}
    by_abs = {k: group_summaries(table, {"abstention": v}, VIEW_KEYS) for k, v in (("abstention", True),
                                                                                  ("answerable", False))}
    arms = dict(zip(table.column("row").to_pylist(), table.column("arm").to_pylist(), strict=True))
    rows = {row: {"arm": arms[row], "questions": s["n_probes"], "overall": s,
                  "by_type": {t: per[row] for t, per in by_type.items() if row in per},
                  "by_abstention": {k: per[row] for k, per in by_abs.items() if row in per}}
            for row, s in overall.items()}
    return {"rows": rows, "arm_status": arm_status(results), "expansion": expansion(rows), "cost": cost(results)}


def run_statistics(run: Any, pairs: Sequence[Sequence[str]]) -> dict[str, Any]:
    """The page's statistics from the per-probe table: the headline intervals of every row over every question,
    and the comparator pairs the run has on :data:`PAIR_METRICS` (questions resampled as one set)."""
    from benchmarks.longmemeval_page import INTERVAL_METRICS
    from benchmarks.workload_run import order_rows

    arms = dict(zip(run.table.column("row").to_pylist(), run.table.column("arm").to_pylist(), strict=True))
    rows = order_rows({r: {"arm": a} for r, a in arms.items()})
    return {"overall": statistics(run, rows, INTERVAL_METRICS, None, probe_set="every question",
                                  pairs=present_pairs(pairs, rows), pair_metrics=PAIR_METRICS)}


def recompute(run: Any, payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``payload`` (a results JSON) holds that its per-probe table determines, and the same recomputed from
    ``run`` (the table read back): every row's summaries, the expansion pair and the statistics."""
    agg = payload["aggregate"]
    again = aggregate([], run.table)
    held = {"rows": agg["rows"], "expansion": agg["expansion"], "statistics": payload["statistics"]}
    return held, {"rows": again["rows"], "expansion": again["expansion"],
                  "statistics": run_statistics(run, run.meta["config"]["pairs"])}


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [float(x) for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def cost(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What a question costs: wall seconds per question (every arm, this process or its worker), and per arm its
    mean ingest milliseconds per question and per turn over the questions it ran on."""
    per_arm: dict[str, Any] = {}
    for arm in dict.fromkeys(a for r in results for a in r["arms"]):
        ok = [r for r in results if r["arms"].get(arm, {}).get("status") == "ok"]
        if ok:
            ms = sum(r["arms"][arm]["ingest_ms"] for r in ok)
            per_arm[arm] = {"questions": len(ok), "ingest_ms_mean": ms / len(ok),
                            "ingest_ms_per_turn": ms / max(1, sum(r["n_turns"] for r in ok))}
    return {"question_wall_s_mean": _mean(r["wall_s"] for r in results),
            "turns_per_question_mean": _mean(r["n_turns"] for r in results), "per_arm": per_arm}


def arm_status(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per arm: how many questions it ran on per status, and each distinct reason it did not."""
    out: dict[str, Any] = {}
    for res in results:
        for arm, info in res["arms"].items():
            st = out.setdefault(arm, {"counts": {}, "reasons": {}})
            st["counts"][info["status"]] = st["counts"].get(info["status"], 0) + 1
            if info["status"] != "ok":
                msg = info.get("message", "")
                st["reasons"].setdefault(msg, []).append(res["question_id"])
    for st in out.values():
        st["reasons"] = [{"message": m, "questions": len(q), "first": q[:3]} for m, q in st["reasons"].items()]
    return out



def expansion(rows: dict[str, Any]) -> dict[str, Any] | None:
    """What Tortoise's source-session expansion adds: per group, delivered recall (turn, both roles and user
    only; session) and cl100k tokens with and without it, and the differences (with minus without)."""
    w, wo = EXPANSION_PAIR
    if w not in rows or wo not in rows:
        return None

    def pair(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k in ("evidence_recall", "delivered_turn_user", "delivered_session", "tokens_cl100k_mean"):
            x, y = a.get(k), b.get(k)
            out[k] = {"with": x, "without": y, "delta": None if x is None or y is None else x - y}
        return out

    groups = {"overall": pair(rows[w]["overall"], rows[wo]["overall"])}
    for t in rows[w]["by_type"]:
        if t in rows[wo]["by_type"]:
            groups[t] = pair(rows[w]["by_type"][t], rows[wo]["by_type"][t])
    return {"with": w, "without": wo, "groups": groups}


def qa_rows(results: Sequence[dict[str, Any]], judge_model: str) -> dict[str, Any]:
    """``lme_qa.qa_aggregates`` per row over the judged items."""
    from harness.workloads.lme_qa import qa_aggregates

    items: dict[str, list[dict[str, Any]]] = {}
    for res in results:
        for row, item in res["qa"].items():
            items.setdefault(row, []).append(item)
    return {row: qa_aggregates(v, judge_model) for row, v in items.items()}



# ------------------------------------------------------------------------------------------------------------ run
def _png(payload: dict[str, Any]) -> bytes:
    import matplotlib.pyplot as plt

    fig = figure(payload)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def run(out_dir: Path, *, data: Path | None = None, arms: str | None = None, arm_classes: list[str] | None = None,
        k_values: tuple[int, ...] = (4, 8), lm: str | None = None, lm_base: str | None = None,
        judge_lm: str | None = None, judge_lm_base: str | None = None, reader_prompt: str = "con",
        workers: int = 1, executor: str = "local", address: str | None = None, limit: int | None = None,
        types: Sequence[str] | None = None, quick: bool = False, track: Callable[..., Any] | None = None,
        seed: int = 0, echo: Callable[[str], None] | None = None, fault_hook: Callable[[str], None] | None = None,
        tmp_dir: Path | None = None, share_encoders: bool = True, embed: str = "store",
        embed_store: Path | None = None, resume: bool = False, journal_root: Path | None = None,
        explore: bool = True) -> list[Path]:
    """Run the designs on LongMemEval and write ``longmemeval.{json,md,png}`` and ``longmemeval/`` (the delivered
    JSONL, hypotheses with an LM) to ``out_dir``, only once every question is done (see the module docstring).
    ``arms`` is ``--arms`` text (``None``: ``default_arms()``); ``limit``/``types`` select questions in file order;
    ``workers`` processes (``executor="local"``) or Ray tasks (``"ray"``, ``address`` to join a cluster).
    ``embed`` is ``"store"`` (the embedding store, at ``embed_store`` or the default folder) or ``"per-call"`` (the
    earlier caches); ``resume`` continues from the journal of an interrupted run of the same configuration, kept in
    ``journal_root`` (default ``out_dir``; a caller that writes into a staging folder passes the real one).
    ``explore=False`` skips the explorer page (the delivery store is written either way)."""
    from benchmarks.run_journal import RunJournal
    from harness.workloads.longmemeval import resolve_longmemeval_path

    store = encoder_store(embed, embed_store)  # a GPU store's encode pass is not pinned to one thread
    t_start = time.perf_counter()
    track = as_tracker(track)
    check_run_options(out_dir, k_values, workers)
    if executor not in ("local", "ray"):
        raise ValueError(f"--executor {executor!r}: choose local or ray")
    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be at least 1, got {limit}")
    names = select_arms(arms, arm_classes, quick=quick, default=",".join(default_arms()))
    require_runnable(names)
    arm_names = [n if isinstance(n, str) else n.name for n in names]
    locomo_only = [a for a in arm_names if a in LOCOMO_ONLY]  # never run on LongMemEval: listed absent instead
    names = [n for n in names if (n if isinstance(n, str) else n.name) not in LOCOMO_ONLY]
    if not names:
        raise ValueError(f"--arms {','.join(locomo_only)}: {LOCOMO_ONLY[locomo_only[0]]}; no other arm selected")
    src = resolve_longmemeval_path(data)
    label = data_description(src, echo)
    lms = ex.check_lms(lm, lm_base, judge_lm, judge_lm_base, reader_prompt)
    need_pm = "pm" in arm_names
    with track.phase(f"reading {src.name}"):  # a streaming pass: long on M's 2.6 GB
        n_questions, train = first_pass(src, limit, types, quick, need_pm)
    if n_questions == 0:
        raise no_question(src, types)
    if quick and echo:
        echo(f"--quick: the first {n_questions} question(s), quick arm settings")
    key = ex.journal_config(src, names, k_values, limit, types, quick, seed, lm, lm_base, lms, reader_prompt, embed,
                          share_encoders, store)
    journal = RunJournal(journal_root or out_dir, NAME, key, resume=resume, warn=ex.warn_line, fault_hook=fault_hook)
    resumed = len(journal.done)
    if resume and echo:
        echo(f"resuming: {resumed} question(s) already done ({journal.dir})")
    work_root = Path(tempfile.mkdtemp(prefix="memsim-longmemeval-", dir=tmp_dir))
    outputs: ex.Outputs | None = None
    samplers: list[Any] = []
    try:
        with track.phase(f"training AgentFly PM on {len(train)} question(s)") if need_pm else contextlib.nullcontext():
            pm_model, pm = (ex.journal_pm(journal, train, seed, quick, fault_hook, resume) if need_pm
                            else (None, {"selected": False}))
        del train
        if need_pm and pm_model is None and echo:
            echo(f"AgentFly PM not trained: {pm['unavailable']}")
        run_names = [n for n in names if not (pm_model is None and (n if isinstance(n, str) else n.name) == "pm")]
        base = {"names": run_names, "work_root": str(work_root), "k_values": tuple(k_values), "quick": quick,
                "seed": seed, "pm_model": pm_model, "share": share_encoders, "lm": lm, "lm_base": lm_base,
                "reader_prompt": reader_prompt, "in_worker": False, "embed": embed, "store": store, **lms}
        from harness.workloads.longmemeval import LoadStats, iter_questions

        stats = LoadStats()
        order: list[int] = []
        jobs = ({**base, "question": q} for q in iter_questions(src, stats=stats, limit=ex.question_limit(limit, quick),
                                                                  types=types)
                if not (order.append(q.index) or q.index in journal.done))
        used = max(1, min(workers, n_questions - len(journal.done)))
        mode = embedding_mode(embed, share_encoders, store, fault_hook)
        if used == 1 and executor == "local":
            fresh: Iterator[dict[str, Any]] = ex.serial(one_question, jobs, track)
        elif executor == "ray":
            fresh = ex.ray_pool(one_question, jobs, used, address)
        else:
            fresh = ex.local_pool(one_question, jobs, used, share_encoders, samplers, track, store)
        outputs = ex.Outputs(out_dir, fault_hook)
        results: list[dict[str, Any]] = []
        caches: dict[int, dict[str, Any]] = {}
        outcomes = ex.in_file_order(fresh, order, journal)
        kept = ex.Kept(out_dir, label)
        with mode, contextlib.closing(outcomes):
            for got in track(outcomes, description="LongMemEval questions", total=n_questions, unit="questions"):
                outputs.add(got.pop("delivered"))
                kept.add(got)
                caches[got.pop("pid")] = got.pop("encoder_cache")
                results.append(got)
        if not pm_model and need_pm:
            for res in results:
                res["arms"]["pm"] = {"status": "absent", "message": f"not trained: {pm['unavailable']}"}
        pm["absent_questions"] = sum(1 for r in results if pm_model and r["arms"].get("pm", {}).get("status")
                                     == "absent")
        rows = table_rows(results)
        if not rows:
            status = arm_status(results)
            raise ValueError("no arm produced a row: " + "; ".join(
                f"{a}: {r['message']}" for a, st in status.items() for r in st["reasons"]))
        hyps: dict[str, list[dict[str, Any]]] = {}
        for res in results if lm else []:
            for row, item in res["qa"].items():
                hyps.setdefault(row, []).append(item)
        outputs.texts(hyps)
        cfg = {"arms": arm_names, "arm_classes": list(arm_classes or []), "k": list(k_values), "quick": quick,
               "seed": seed, "workers": used, "executor": executor, "limit": limit,
               "types": list(types) if types else None, "lm": lm, "reader_prompt": reader_prompt,
               "share_encoders": share_encoders, "embed": embed,
               "embed_device": store["device"] if store else None, "resumed_questions": resumed}
        pairs = comparator_pairs(k_values)
        table = finish_design_run(out_dir, NAME, rows, data=label["label"], config={"data": src.name, **cfg,
                                                                                    "pairs": pairs},
                                  probe_sets={"answerable": {"abstention": False}}, stratify=False,
                                  headline_metrics=PAIR_METRICS, writer=kept.writer,
                                  trec=kept.trec, explore=explore, echo=echo, fault_hook=fault_hook,
                                  placed=outputs.placed)
        payload = _payload(src, label, results, aggregate(results, table.table), pm, caches,
                           arm_names if arms is not None else [], stats, locals_cfg=cfg)
        payload.update(comparisons={"pairs": pairs, "metrics": list(PAIR_METRICS)},
                       statistics=run_statistics(table, pairs),
                       probes={"file": table.path.name, "rows": len(table.table), "data": label["label"],
                               "explorer": explore})
        if lm:
            payload["qa"] = {"judge": lms["judge_lm"], "rows": qa_rows(results, lms["judge_lm"])}
        sampled = samplers[0].peak_mb if samplers else 0.0
        payload["peak_rss_mb"] = max(peak_rss_mb(), sampled)
        payload["meta"]["wall_s"] = payload["wall_s"] = time.perf_counter() - t_start
        stamp_run(payload)
        written = outputs.results([(f"{NAME}.png", _png(payload)),
                                   (f"{NAME}.md", render_markdown(payload).encode("utf-8")),
                                   (f"{NAME}.json", (json.dumps(_jsonable(payload), indent=2, ensure_ascii=False)
                                                     + "\n").encode())])
        journal.remove()
        return written
    except BaseException:
        if outputs is not None:
            outputs.abort()
        raise
    finally:
        shutil.rmtree(work_root, ignore_errors=True)


def _payload(src: Path, label: dict[str, Any], results: list[dict[str, Any]], agg: dict[str, Any],
             pm: dict[str, Any], caches: dict[int, dict[str, Any]], named: list[str], stats: Any,
             locals_cfg: dict[str, Any]) -> dict[str, Any]:
    """The results JSON; ``named`` is the arms the user named (empty for the default selection). The LoCoMo-only
    arms of the selection (every one by default) are said absent in ``arm_status`` and ``absent_arms``."""
    import dataclasses

    cache: dict[str, dict[str, float]] = {}
    for per in caches.values():  # each process's cache counts are cumulative: its last report is its total
        for n, st in per.items():
            acc = cache.setdefault(n, {})
            for k, v in st.items():
                if isinstance(v, int | float) and not isinstance(v, bool):
                    acc[k] = acc.get(k, 0) + v
    skipped = {a: {"counts": {"absent": len(results)}, "reasons": [{"message": LOCOMO_ONLY[a],
                                                                   "questions": len(results), "first": []}]}
               for a in LOCOMO_ONLY if not named or a in named}
    agg["arm_status"].update(skipped)
    agg["absent_arms"] = absent_arms(agg)
    first = next((r for r in results if r["examples"]), None)
    return {
        "name": NAME, "data": label, "config": {"data": src.name, **locals_cfg},
        "n_questions": len(results),
        "questions": [{k: r[k] for k in ("question_id", "question_type", "abstention", "n_sessions", "n_turns",
                                         "n_evidence_turns", "n_user_evidence_turns")} for r in results],
        "question_types": {t: sum(1 for r in results if r["question_type"] == t)
                           for t in sorted({r["question_type"] for r in results})},
        "sessions_per_question_median": pystats.median(r["n_sessions"] for r in results),
        "aggregate": agg, "pm": pm,
        "load_stats": {k: dict(v) if isinstance(v, dict) else v for k, v in dataclasses.asdict(stats).items()},
        "examples": first["examples"] if first else {}, "examples_question": first["question_id"] if first else None,
        "encoder_cache": cache,
        "meta": {"machine": machine_description(), "seeds": {"seed": locals_cfg["seed"]},
                 "quick": locals_cfg["quick"], "workers": locals_cfg["workers"]},
    }
