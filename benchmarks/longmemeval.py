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
``row``, ``text``, ``delivered_ids``), written under a temporary name while the run goes and renamed at the end;
the results JSON holds aggregates and a few examples, as ``locomo.json`` does. With ``lm`` each delivered row is
read by LongMemEval's reader (``harness.workloads.lme_qa.Reader``, chain-of-note by default) and the hypothesis
judged with the official templates (``Judge``; ``judge_lm`` defaults to ``lm``); both are checked with one call
before any work. ``lm`` is the reader only: Tortoise keeps its offline extractor, so the design rows are the same
with or without ``--lm``. Hypotheses go to ``<out>/longmemeval/hypotheses/<row>.jsonl``.

Results (``longmemeval.{json,md,png}``, the JSONL files) are written only when the run completes, each atomically,
the JSON last (fault-hook steps ``longmemeval.delivered.write``, ``longmemeval.hypotheses.write``,
``longmemeval.results.write``); an exception, Ctrl-C or a killed worker leaves none of them (files this run had
already placed are removed again).

Scale: questions are independent. ``workers`` > 1 runs them in spawned processes (one torch thread each), a
bounded window of questions in flight, results taken in file order, so every metric, ranking and delivered text
equals the serial run's; ``executor="ray"`` runs them as Ray tasks (``address`` joins a cluster).

Encoders (``embed``). ``"store"`` (the default): every arm that embeds (the mean and hybrid baselines, AgentFly NP
with either pooling, PM's case vectors, Tortoise's capture and search) reads its vectors from the embedding store
(``harness.store_encoders``: keyed by encoder weights, device kind and exact text, kept on disk across runs, each
new text encoded alone on the store's device, CUDA when torch sees a GPU; then torch is not pinned to one thread).
Each process maps the store read-only, refreshes its view before each question and seals what it encoded after
it; the run compacts the store when it ends. So each distinct text is encoded once per run, and a second run on
the same data encodes nothing. ``"per-call"`` is the earlier behaviour, kept by name: one encoder cache per
process keyed by text (``TextCache``) for ``harness.embedding``'s encoders (each text encoded on its own; an arm
that asks again for a text it asked for already pays for it again, as AgentFly NP's faithful-recompute timing
does), and Tortoise, NP pooler and PM encoding their own batches. Store vectors equal the per-text path bit for bit
on the CPU and batch encoding to float noise (tested below 1e-5). Counts are in the JSON (``encoder_cache``).

Resume. Each finished question is kept in a journal (``benchmarks.run_journal``) beside the outputs, outside the
run's results: ``<out>/.memsim-resume-longmemeval-<config hash>/``, with the trained PM model. ``resume=True``
(``--resume``) reads it and runs only the questions it lacks (a damaged or partial record is dropped with one
warning line and its question runs again); the results then equal an uninterrupted run's. The journal is removed
when the results are written.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import (
    _jsonable,
    machine_description,
    md_table,
    meta_block,
    set_torch_threads,
    stamp_run,
    write_atomic,
)
from benchmarks.progress import Relay, as_tracker, worker_tracker
from harness.progress import report
from harness.store_encoders import StoreSession, store_encoders
from harness.workloads.arms import SPECS, ArmSpec, ArmUnavailable, build_arm, require_runnable, select_arms
from harness.workloads.base import ArmContext, Delivery
from harness.workloads.runner import BIG_CALL, SharedEncoder

NAME = "longmemeval"
QUICK_QUESTIONS = 3
"""``--quick``: the first three selected questions (and quick arm settings: ``ArmContext.quick``)."""
QUICK_PM_TRAIN = 3
"""``--quick``: PM trains on the first three questions of the training split."""
PM_SPLIT_MOD = 5
PM_SPLIT_RULE = "int(sha1(question_id).hexdigest(), 16) % 5 == 0"
LOCOMO_ONLY = {"tortoise-recorded": "needs LoCoMo's recorded LM observations (the 'observation' field); "
                                    "LongMemEval files carry no recorded extraction"}
EXPANSION_PAIR = ("tortoise-eval", "tortoise-eval-noexp")
"""Tortoise's evaluation path with source-session expansion, and the same path without it."""
STEP_DELIVERED = "longmemeval.delivered.write"
STEP_HYPOTHESES = "longmemeval.hypotheses.write"
STEP_RESULTS = "longmemeval.results.write"
EMBED_MODES = ("store", "per-call")
WINDOW_PER_WORKER = 2
EXAMPLE_CHARS = 700
FENCE = "`" * 3


# ------------------------------------------------------------------------------------------- split and data label
def pm_training_split(question_id: str) -> bool:
    """Whether a question belongs to PM's training split (``PM_SPLIT_RULE``): stable across runs and files."""
    return int(hashlib.sha1(question_id.encode("utf-8")).hexdigest(), 16) % PM_SPLIT_MOD == 0


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


# ------------------------------------------------------------------------------------------------- encoder cache
class TextCache(SharedEncoder):
    """One process's encoder cache keyed by text, over a process-wide encoder, shared by every arm and question.

    A miss encodes the text on its own (a batch of one, no padding), so the cached vector is a function of the
    text alone: which question, arm or batch met it first cannot change it, and a serial run and a parallel one
    get the same vectors. Against the encoder's own batch encoding it differs by float noise (tested below 1e-5).
    A text the current arm (``arm``, set by the runner) already asked for is encoded again (a miss): an arm that
    repeats its own call pays for it, as without a cache. ``max_texts`` bounds the memory (oldest out first;
    eviction cannot change a vector, only the cost)."""

    def __init__(self, name: str, base: Any | None = None, max_texts: int = 200_000) -> None:
        super().__init__(name, base)  # the lazily loaded base encoder and attribute pass-through of the LoCoMo one
        self._vec: dict[str, np.ndarray] = {}
        self._asked: set[str] = set()
        self._asked_by: str | None = None
        self.max_texts = max_texts

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            return self.base.encode(texts)  # the base encoder's own error
        items = [str(t) for t in texts]
        if self.arm != self._asked_by:
            self._asked, self._asked_by = set(), self.arm
        if not items:
            return self.base.encode([])
        out = []
        for i, t in enumerate(items):
            if len(items) >= BIG_CALL and i % BIG_CALL == 0:
                report(status=f"encoding {i}/{len(items)} texts")
            v = self._vec.get(t)
            if v is None or t in self._asked:
                self.misses += 1
                v = np.asarray(self.base.encode([t])[0], dtype=np.float32)
                self._vec.pop(t, None)
                self._vec[t] = v
                if len(self._vec) > self.max_texts:
                    self._vec.pop(next(iter(self._vec)))
            else:
                self.hits += 1
            self._asked.add(t)
            out.append(v)
        return np.stack(out).astype(np.float32, copy=True)

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "texts": len(self._vec)}


_TEXT_CACHES: dict[str, TextCache] = {}


@contextlib.contextmanager
def text_encoders(names: Sequence[str] = ("minilm-mean", "minilm-pooler")) -> Iterator[dict[str, TextCache]]:
    """For the length of a run, ``harness.embedding.get_encoder(name)`` returns this process's ``TextCache``
    (kept across questions: one cache per process and run) and the runner tells it which arm is asking."""
    from harness import embedding
    from harness.workloads import runner

    with embedding._LOCK:
        saved = {n: embedding._CACHE.get(n) for n in names}
        caches = {n: _TEXT_CACHES.get(n) or TextCache(n, saved[n]) for n in names}
        embedding._CACHE.update(caches)
    before = list(runner._ACTIVE)
    runner._ACTIVE = list(caches.values())
    try:
        yield caches
    finally:
        runner._ACTIVE = before
        runner.restore_encoders(caches, saved)


# ------------------------------------------------------------------------------------------ one question, all arms
class StoredRecorder:
    """An arm behind the same protocol that builds the named arm and keeps what its ``stored()`` returned (the
    runner reads it once and keeps only the count of evidence among it; the official and session views need the
    ids). A construction failure is raised at ``ingest`` (``ArmUnavailable`` stays unavailable, anything else an
    error), so the runner reports it with its own message and the other arms go on."""

    def __init__(self, ctx: ArmContext, inner: str | ArmSpec = "", sink_key: str = "") -> None:
        self.label = inner.name if isinstance(inner, ArmSpec) else inner
        self.name = self.label
        self.sink = _SINKS.setdefault(sink_key, {})
        self.failure: BaseException | None = None
        try:
            self.arm = build_arm(inner, ctx)
            self.rows = tuple(self.arm.rows)
        except Exception as exc:  # reported by ingest, as the runner reports an arm failing there
            self.arm, self.rows, self.failure = None, ("?",), exc

    def ingest(self, conversation: Any) -> None:
        if self.failure is not None:
            if isinstance(self.failure, ArmUnavailable):
                raise ArmUnavailable(str(self.failure))
            raise RuntimeError(f"constructing arm {self.label!r} failed: {type(self.failure).__name__}: "
                               f"{self.failure}")
        self.arm.ingest(conversation)

    def deliver(self, probe: Any) -> dict[str, Delivery]:
        return self.arm.deliver(probe)

    def stored(self) -> frozenset[str]:
        got = self.arm.stored()
        self.sink[self.label] = got
        return got

    def close(self) -> None:
        if self.arm is not None:
            self.arm.close()


_SINKS: dict[str, dict[str, Any]] = {}


def _recorder_spec(entry: str | ArmSpec, sink_key: str) -> ArmSpec:
    name = entry.name if isinstance(entry, ArmSpec) else entry
    return ArmSpec(name, "design", f"{name} (stored ids recorded)", __name__, "StoredRecorder",
                   {"inner": entry, "sink_key": sink_key})


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
    """One question through every selected arm in a fresh work directory: the per-row records (the runner's,
    with the question type, abstention and the view metrics added), arm status, examples, the delivered texts
    and, with an LM, the QA items. Runs in this process (``track``: the run's tracker, which shows each arm's
    ingest and probes) or in a worker (which reports them to the parent's queue when it has one)."""
    from harness.workloads.lme_workload import to_conversation
    from harness.workloads.runner import run_conversation

    q = job["question"]
    conv = to_conversation(q)
    views = question_views(q, conv)
    training = job["pm_model"] is not None and pm_training_split(q.question_id)
    names = [e for e in job["names"] if not (training and (e if isinstance(e, str) else e.name) == "pm")]
    sink_key = f"{os.getpid()}:{q.question_id}:{q.index}"
    specs = [_recorder_spec(e, sink_key) for e in names]
    delivered: dict[str, Delivery] = {}
    work = Path(job["work_root"]) / f"q{q.index}"  # the run's root is fresh: one folder per question under it
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        with _question_encoders(job):
            res = run_conversation(conv, specs, work, k_values=job["k_values"], quick=job["quick"],
                                   seed=job["seed"], on_delivery=lambda row, probe, d: delivered.__setitem__(row, d),
                                   pm_model=Path(job["pm_model"]) if job["pm_model"] else None,
                                   track=worker_tracker(_EVENTS) if job["in_worker"] and _EVENTS else track)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        stored = _SINKS.pop(sink_key, {})
    wall_s = time.perf_counter() - t0
    ok_rows = {row for info in res["arms"].values() if info["status"] == "ok" for row in info.get("rows", [])}
    for info in res["arms"].values():
        if info["status"] != "ok":
            info.pop("rows", None)
    row_arm = {row: arm for arm, info in res["arms"].items() for row in info.get("rows", [])}
    records = []
    for rec in res["records"]:
        if rec["row"] not in ok_rows:
            continue
        d = delivered[rec["row"]]
        rec.update(question_type=q.question_type, abstention=q.abstention, arm=row_arm[rec["row"]])
        rec.update(view_metrics(views, d.dia_ids, "delivered_"))
        rec.update(view_metrics(views, stored.get(row_arm[rec["row"]], frozenset()), "stored_"))
        records.append(rec)
    if training:
        res["arms"]["pm"] = {"status": "absent", "message": f"{q.question_id} is in PM's training split "
                                                            f"({PM_SPLIT_RULE})"}
    lines = [{"question_id": q.question_id, "row": r, "text": delivered[r].text,
              "delivered_ids": sorted(delivered[r].dia_ids)} for r in sorted(ok_rows)]
    qa = _qa_items(job, q, {r: delivered[r] for r in sorted(ok_rows)}) if job["lm"] else {}
    return {"question_id": q.question_id, "index": q.index, "question_type": q.question_type, "wall_s": wall_s,
            "abstention": q.abstention, "n_sessions": len(q.sessions), "n_turns": q.n_turns,
            "n_evidence_turns": len(views["turn"]), "n_user_evidence_turns": len(views["turn_user"]),
            "arms": res["arms"], "records": records, "examples": res["examples"], "delivered": lines, "qa": qa,
            "encoder_cache": _cache_stats(job),
            "pid": os.getpid()}


_STORE: list[StoreSession] = []


def process_store(cfg: dict[str, Any], fault_hook: Callable[[str], None] | None = None) -> StoreSession:
    """This process's embedding store session for the run's store ``cfg`` (``StoreSession.config()``)."""
    if not _STORE or _STORE[0].config() != cfg:
        _STORE[:] = [StoreSession(Path(cfg["root"]), device=cfg["device"], fault_hook=fault_hook)]
    return _STORE[0]


def _question_encoders(job: dict[str, Any]) -> Any:
    """The encoders of one question: the store (its view refreshed first, what it encoded sealed after) or the
    per-call caches (``share``)."""
    if job.get("embed") == "store":
        session = process_store(job["store"])
        session.refresh()
        return store_encoders(session)
    return text_encoders() if job["share"] else contextlib.nullcontext({})


def _cache_stats(job: dict[str, Any]) -> dict[str, Any]:
    if job.get("embed") == "store":
        return process_store(job["store"]).stats()
    return {n: c.stats() for n, c in _TEXT_CACHES.items()} if job["share"] else {}


@contextlib.contextmanager
def embedding_mode(embed: str, share: bool = True, store: dict[str, Any] | None = None,
                   fault_hook: Callable[[str], None] | None = None) -> Iterator[None]:
    """The run's encoders in this process: the per-call text caches (fresh at the start, dropped at the end), or
    the store session for ``store`` (``StoreSession.config()``; default: the default store on this machine's
    device), compacted when the run ends."""
    if embed not in EMBED_MODES:
        raise ValueError(f"--embed {embed!r}: choose {' or '.join(EMBED_MODES)}")
    if embed == "per-call":
        with _run_caches(share):
            yield
        return
    session = process_store(store or StoreSession().config(), fault_hook)
    try:
        yield
    finally:
        _STORE.clear()
    session.compact()


def _new_caches() -> None:
    """Start this process's text caches afresh (over the encoders the process already loaded, if any)."""
    from harness import embedding

    _TEXT_CACHES.clear()
    for n in ("minilm-mean", "minilm-pooler"):
        base = embedding._CACHE.get(n)
        _TEXT_CACHES[n] = TextCache(n, None if isinstance(base, TextCache) else base)


@contextlib.contextmanager
def _run_caches(share: bool) -> Iterator[None]:
    """The serial run's text caches: fresh at its start, dropped at its end."""
    if share:
        _new_caches()
    try:
        yield
    finally:
        _TEXT_CACHES.clear()


_EVENTS: Any = None  # a local worker's queue to the parent's progress display, set by _worker_init


def _worker_init(share: bool, events: Any = None, store: dict[str, Any] | None = None) -> None:
    """A spawned worker: one torch thread, as the serial run (not with a GPU store), its own text caches or store
    session for the whole run, and the parent's progress queue."""
    global _EVENTS
    if not (store and store["device"] == "cuda"):
        set_torch_threads(1)
    _EVENTS = events
    if store:
        process_store(store)
    elif share:
        _new_caches()


# ------------------------------------------------------------------------------------------------------ executors
def _serial(jobs: Iterable[dict[str, Any]], track: Any = None) -> Iterator[dict[str, Any]]:
    for job in jobs:
        yield one_question(job, track)


def _windowed(submit: Callable[[dict[str, Any]], Any], result: Callable[[Any], dict[str, Any]],
              jobs: Iterable[dict[str, Any]], window: int) -> Iterator[dict[str, Any]]:
    """Keep at most ``window`` questions in flight and yield outcomes in file order (bounded memory)."""
    pending: list[Any] = []
    for job in jobs:
        pending.append(submit(job))
        if len(pending) >= window:
            yield result(pending.pop(0))
    while pending:
        yield result(pending.pop(0))


def _local_pool(jobs: Iterable[dict[str, Any]], workers: int, share: bool, sampler_box: list[Any],
                track: Any = None, store: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    from benchmarks.locomo import _RssSampler

    ctx = mp.get_context("spawn")
    events = ctx.Queue()
    relay = Relay(events, track)  # each worker's arm phases shown in this process's display
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                               initargs=(share, events, store))
    sampler = _RssSampler(lambda: list(getattr(pool, "_processes", None) or {}))
    sampler_box.append(sampler)
    try:
        yield from _windowed(lambda j: pool.submit(one_question, {**j, "in_worker": True}),
                             lambda f: f.result(), jobs, workers * WINDOW_PER_WORKER)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
        sampler.stop()
        relay.close()


def _ray_pool(jobs: Iterable[dict[str, Any]], workers: int, address: str | None) -> Iterator[dict[str, Any]]:
    from benchmarks.sweep import ray_session

    with ray_session(workers, address) as ray:
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_question)
        yield from _windowed(lambda j: remote.remote({**j, "in_worker": True}), ray.get, jobs,
                             workers * WINDOW_PER_WORKER)


def _ray_question(job: dict[str, Any]) -> dict[str, Any]:
    """One question in a Ray worker: one torch thread (not with a GPU store); the worker process keeps its text
    caches or store session between tasks."""
    if not (job.get("embed") == "store" and job["store"]["device"] == "cuda"):
        set_torch_threads(1)
    if job.get("embed") != "store" and job["share"] and not _TEXT_CACHES:
        _new_caches()
    return one_question(job)


# ------------------------------------------------------------------------------------------------------ aggregates
VIEW_KEYS = tuple(f"{w}_{lvl}" for w in ("delivered", "stored") for lvl in ("turn", "turn_user", "session",
                                                                           "session_user"))


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [float(x) for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def summarize_rows(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One group of one row's records: the runner's summary (``metrics.summarize_group``: recall, stored,
    tokens, latency, ranked metrics) and the view metrics' means with the number of questions each averages."""
    from harness.workloads.metrics import summarize_group

    out = summarize_group(records)
    for k in VIEW_KEYS:
        out[k] = _mean(r.get(k) for r in records)
        out[f"n_{k}"] = sum(1 for r in records if r.get(k) is not None)
    return out


def aggregate(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per row: ``overall``, ``by_type`` (question type) and ``by_abstention`` (``abstention`` / ``answerable``)."""
    by_row: dict[str, list[dict[str, Any]]] = {}
    for res in results:
        for r in res["records"]:
            by_row.setdefault(r["row"], []).append(r)
    rows = {}
    for row, recs in by_row.items():
        types = sorted({r["question_type"] for r in recs})
        rows[row] = {"arm": recs[0]["arm"], "questions": len(recs), "overall": summarize_rows(recs),
                     "by_type": {t: summarize_rows([r for r in recs if r["question_type"] == t]) for t in types},
                     "by_abstention": {k: summarize_rows(v) for k, v in
                                       (("abstention", [r for r in recs if r["abstention"]]),
                                        ("answerable", [r for r in recs if not r["abstention"]])) if v}}
    return {"rows": rows, "arm_status": arm_status(results), "expansion": expansion(rows), "cost": cost(results)}


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


def absent_arms(agg: dict[str, Any]) -> dict[str, str]:
    """Every arm of ``arm_status`` that produced no row at all, with one reason (the first its status gives);
    read from the JSON, so a results file written before ``absent_arms`` existed renders the same."""
    with_rows = {r["arm"] for r in agg["rows"].values()}
    return {a: (st["reasons"][0]["message"] if st["reasons"] else "no row")
            for a, st in agg["arm_status"].items() if a not in with_rows}


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


# ------------------------------------------------------------------------------------------------------- rendering
def _order(rows: dict[str, Any]) -> list[str]:
    rank = {a: i for i, a in enumerate(SPECS)}
    return sorted(rows, key=lambda r: (rank.get(rows[r]["arm"], 99), r))


def _f(v: Any, fmt: str = ".3f") -> str:
    return "n/a" if v is None else format(v, fmt)


def rows_table(rows: dict[str, Any], order: list[str], group: Callable[[dict[str, Any]], dict[str, Any] | None],
               absent: dict[str, str] | None = None) -> str:
    """One line per row of ``order`` (its ``group`` of records), then one per arm of ``absent`` (no row at all):
    ``absent`` and the reason in place of its numbers."""
    head = ["row", "arm", "questions", "recall (turns, both roles)", "user-only (official view)",
            "sessions", "sessions user-only", "stored", "stored user-only", "all evidence", "tokens (cl100k)"]
    table = []
    for r in order:
        g = group(rows[r])
        if not g:
            continue
        table.append([r, rows[r]["arm"], g["n_probes"], g["evidence_recall"], g["delivered_turn_user"],
                      g["delivered_session"], g["delivered_session_user"], g["stored_recall"], g["stored_turn_user"],
                      g["all_evidence_rate"], _f(g["tokens_cl100k_mean"], ".0f")])
    for arm, reason in (absent or {}).items():
        table.append([arm, arm, 0, f"absent: {reason}"] + ["-"] * (len(head) - 4))
    return md_table(head, table)


def type_table(rows: dict[str, Any], order: list[str], key: str = "evidence_recall") -> str:
    types = sorted({t for r in rows.values() for t in r["by_type"]})
    table = [[r] + [rows[r]["by_type"].get(t, {}).get(key) for t in types] for r in order]
    n = {t: max(rows[r]["by_type"].get(t, {}).get("n_scored", 0) for r in order) for t in types}
    return md_table(["row"] + [f"{t} (n={n[t]})" for t in types], table)


def expansion_table(exp: dict[str, Any]) -> str:
    head = ["group", "recall with", "without", "delta", "user-only delta", "session delta", "tokens with",
            "without", "delta"]
    table = []
    for g, m in exp["groups"].items():
        r, u, s, t = (m[k] for k in ("evidence_recall", "delivered_turn_user", "delivered_session",
                                     "tokens_cl100k_mean"))
        table.append([g, r["with"], r["without"], r["delta"], u["delta"], s["delta"], _f(t["with"], ".0f"),
                      _f(t["without"], ".0f"), _f(t["delta"], "+.0f")])
    return md_table(head, table)


def _status_lines(status: dict[str, Any]) -> list[list[Any]]:
    return [[arm, ", ".join(f"{k} {v}" for k, v in st["counts"].items()), r["message"], r["questions"]]
            for arm, st in status.items() for r in st["reasons"]]


def render_markdown(payload: dict[str, Any]) -> str:
    """``longmemeval.md`` from the results JSON (every number read from it)."""
    agg = payload["aggregate"]
    rows = agg["rows"]
    order = _order(rows)
    cfg = payload["config"]
    out = [f"# LongMemEval: the designs on each question's own haystack ({payload['n_questions']} question(s))", "",
           payload["data"]["label"] + (" (quick run)" if cfg["quick"] else ""), "",
           "Every arm ingests one question's haystack in file order into a fresh store (duplicates kept, each "
           "session's date as a header line on its first turn) and is asked the question with its date. "
           "*Recall*: share of the question's evidence turns (`has_answer` true, user and assistant turns) whose "
           "ids the delivered text carries; *user-only*: the same over user evidence turns (the official "
           "retrieval corpus has user turns only); *sessions*: share of evidence sessions the text carries a turn "
           "of; *stored*: the same against what the arm keeps. Questions without evidence turns are left out of "
           "the recall averages. Tokens: tiktoken cl100k_base of the delivered text.", "",
           "## Every row", "", rows_table(rows, order, lambda r: r["overall"], absent_arms(agg)), "",
           "## Delivered recall per question type", "", type_table(rows, order), "",
           "## Abstention questions and the rest", ""]
    for k in ("answerable", "abstention"):
        if any(k in rows[r]["by_abstention"] for r in order):
            out += [f"### {k}", "", rows_table(rows, order, lambda r, k=k: r["by_abstention"].get(k)), ""]
    exp = agg.get("expansion")
    if exp:
        out += [f"## Tortoise's source-session expansion ({exp['with']} against {exp['without']})", "",
                expansion_table(exp), ""]
    out += ["![recall vs tokens](longmemeval.png)", ""]
    pm = payload["pm"]
    out += ["## AgentFly PM's training split", "", pm_line(pm), ""]
    qa = payload.get("qa")
    if qa:
        out += [f"## QA (reader `{cfg['lm']}`, {cfg['reader_prompt']} prompt; judge `{qa['judge']}`)", "",
                qa_table(qa), ""]
    bad = _status_lines(agg["arm_status"])
    if bad:
        out += ["## Rows not measured", "", md_table(["arm", "questions per status", "reason", "questions"], bad), ""]
    out += _example_lines(payload, order)
    c = agg.get("cost") or {}
    if c.get("per_arm"):
        out += ["## Cost per question", "",
                f"Wall {_f(c['question_wall_s_mean'], '.2f')} s per question (every arm, one process), "
                f"{_f(c['turns_per_question_mean'], '.0f')} turns per question.", "",
                md_table(["arm", "questions", "ingest ms per question", "ingest ms per turn"],
                         [[a, v["questions"], _f(v["ingest_ms_mean"], ".0f"), _f(v["ingest_ms_per_turn"], ".2f")]
                          for a, v in c["per_arm"].items()]), ""]
    cache = payload.get("encoder_cache") or {}
    if cache:
        out.append("Encoder cache (per text, per process): " + "; ".join(
            f"{n} {c['hits']} hits, {c['misses']} misses" for n, c in cache.items()) + ".")
    out += ["", f"Peak memory {payload['peak_rss_mb']:.0f} MiB, {cfg['workers']} worker(s), executor "
            f"{cfg['executor']}. {meta_block(payload['meta'], payload.get('run'))}"]
    return "\n".join(out) + "\n"


def pm_line(pm: dict[str, Any]) -> str:
    """What the page says of PM's one training: not selected, not trained (the reason; no row), or trained."""
    if not pm.get("selected"):
        return "PM was not selected."
    if pm.get("unavailable"):
        return (f"Not trained: {pm['unavailable']}. PM's rows are absent from every question "
                f"({pm['n_training']} question(s) of this file are in the split `{pm['split']}`).")
    return (f"Trained once on {pm['n_training']} question(s) of the split `{pm['split']}`"
            f"{' (quick: the first ' + str(pm['cap']) + ')' if pm.get('cap') else ''}; its rows are absent for "
            f"{pm['absent_questions']} evaluated question(s) of that split, so it is never scored on a question "
            f"it was trained on.")


def qa_table(qa: dict[str, Any]) -> str:
    rows = qa["rows"]
    types = sorted({t for a in rows.values() for t in (a.get("per_type") or {})})
    table = [[r, a["label"], a["n"], a["n_errors"], a["overall"], a["task_averaged"], a["abstention"]["accuracy"]]
             + [a["per_type"].get(t, {}).get("accuracy") for t in types] for r, a in rows.items()]
    return md_table(["row", "label", "judged", "errors", "overall", "task-averaged", "abstention"] + types, table)


def _example_lines(payload: dict[str, Any], order: list[str]) -> list[str]:
    from benchmarks.locomo import excerpt_body

    ex = payload.get("examples") or {}
    shown = [r for r in order if r in ex]
    if not shown:
        return []
    out = [f"## What each row delivers (question {payload['examples_question']}; head and tail of the text, "
           f"{EXAMPLE_CHARS} characters)", ""]
    for r in shown:
        e = ex[r]
        body = excerpt_body(e["text_excerpt"], EXAMPLE_CHARS)
        out += [f"**{r}**: \"{e['question']}\" evidence {', '.join(e['evidence'])}; delivered "
                f"{len(e['delivered_ids'])} turn(s), {e['chars']} characters.", "", FENCE + "text", body, FENCE, ""]
    return out


def docs_page(payload: dict[str, Any]) -> str:
    """The docs results page, rendered from ``longmemeval.json``: the data label, every row, per type, the
    expansion pair and the PM split."""
    rows = payload["aggregate"]["rows"]
    order = _order(rows)
    out = ["# LongMemEval through the designs", "", payload["data"]["label"], "",
           "Delivered texts are in the run folder's `longmemeval/delivered.jsonl`. Recall counts evidence in user "
           "and assistant turns; the user-only column is the official corpus's view.", "",
           "## Every row", "", rows_table(rows, order, lambda r: r["overall"], absent_arms(payload["aggregate"])),
           "", "## Delivered recall per question type", "", type_table(rows, order), ""]
    exp = payload["aggregate"].get("expansion")
    if exp:
        out += ["## Tortoise's source-session expansion", "", expansion_table(exp), ""]
    from harness.runs import code_text

    out += ["## AgentFly PM's training split", "", pm_line(payload["pm"]), "",
            f"Code: {code_text(payload.get('run'))}.", ""]
    return "\n".join(out)


def figure(payload: dict[str, Any]) -> Any:
    """Delivered recall vs cl100k tokens per row (log x; labels placed apart), and delivered recall per question
    type (a measured zero is a stroke on the axis; a row without a question of a type has no mark)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.plotting import grouped_bars, place_labels, zero_legend_handle

    rows = payload["aggregate"]["rows"]
    order = [r for r in _order(rows) if rows[r]["overall"]["evidence_recall"] is not None]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 6.5), gridspec_kw={"width_ratios": [1, 1.3]})
    xs, ys = [], []
    cmap = plt.get_cmap("tab20")
    for j, r in enumerate(order):
        o = rows[r]["overall"]
        xs.append(max(1.0, o["tokens_cl100k_mean"] or 1.0))
        ys.append(o["evidence_recall"])
        kind = SPECS[rows[r]["arm"]].kind if rows[r]["arm"] in SPECS else "design"
        ax1.scatter([xs[-1]], [ys[-1]], marker="s" if kind == "design" else "o", s=55, color=cmap(j % 20),
                    edgecolors="black", linewidths=0.5, zorder=3)
    ax1.set_xscale("log")
    ax1.set_xlabel("delivered tokens per question (cl100k_base, log)")
    ax1.set_ylabel("delivered evidence recall (turns, both roles)")
    ax1.set_ylim(-0.05, 1.1)
    ax1.set_title(f"recall vs tokens (squares: designs, circles: baselines)\n{payload['data']['label']}",
                  fontsize=9)
    ax1.grid(alpha=0.3)
    types = sorted({t for r in order for t in rows[r]["by_type"]})
    colours = plt.get_cmap("tab10")
    zeros = grouped_bars(ax2, order, [(t, [rows[r]["by_type"].get(t, {}).get("evidence_recall") for r in order],
                                       colours(i % 10)) for i, t in enumerate(types)])
    ax2.set_xticks(ax2.get_xticks(), order, rotation=60, ha="right", fontsize=8)
    ax2.set_ylabel("delivered evidence recall")
    ax2.set_ylim(0, 1.25)
    ax2.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax2.set_title("per question type")
    handles, labels = ax2.get_legend_handles_labels()
    if zeros:
        handles.append(zero_legend_handle())
        labels.append(handles[-1].get_label())
    ax2.legend(handles, labels, fontsize=7, ncols=3, loc="upper center")
    ax2.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    place_labels(ax1, xs, ys, order)
    return fig


# ------------------------------------------------------------------------------------------------------------ run
def _limit(limit: int | None, quick: bool) -> int | None:
    return (QUICK_QUESTIONS if limit is None else min(limit, QUICK_QUESTIONS)) if quick else limit


def first_pass(path: Path, limit: int | None, types: Sequence[str] | None, quick: bool, need_pm: bool
               ) -> tuple[int, list[Any]]:
    """One streaming pass: how many questions the run evaluates (the progress bar's total) and, when PM runs,
    the training-split questions of the whole file (quick: the first ``QUICK_PM_TRAIN``) as conversations; only
    those are kept in memory. Reading stops as soon as both are known."""
    from harness.workloads.lme_workload import to_conversation
    from harness.workloads.longmemeval import iter_questions

    iter_questions(path, types=types, limit=0)  # an unknown type: one line now, before any reading
    lim, cap = _limit(limit, quick), (QUICK_PM_TRAIN if quick else None)
    wanted = set(types) if types else None
    n, train = 0, []
    for q in iter_questions(path):
        if (lim is None or n < lim) and (wanted is None or q.question_type in wanted):
            n += 1
        if need_pm and (cap is None or len(train) < cap) and pm_training_split(q.question_id):
            train.append(to_conversation(q))
        if lim is not None and n >= lim and (not need_pm or (cap is not None and len(train) >= cap)):
            break
    return n, train


def _train_pm(train: list[Any], work_root: Path, seed: int, quick: bool,
              fault_hook: Callable[[str], None] | None) -> tuple[str | None, dict[str, Any]]:
    """PM's one training of the run (in this process, before any question runs) and what the JSON says of it."""
    info: dict[str, Any] = {"selected": True, "split": PM_SPLIT_RULE, "cap": QUICK_PM_TRAIN if quick else None,
                            "training_question_ids": [c.sample_id for c in train], "n_training": len(train),
                            "absent_questions": 0}
    if not train:
        info["unavailable"] = "the file has no question in the training split"
        return None, info
    from harness.workloads.agentfly_arm import load_pm_model, train_pm_model

    t0 = time.perf_counter()
    try:
        ckpt = train_pm_model(train, work_root / "pm", seed=seed, quick=quick, fault_hook=fault_hook)
        _, info["checkpoint_info"] = load_pm_model(ckpt)  # what the checkpoint itself says it was trained on
    except (ValueError, ArmUnavailable) as exc:
        info["unavailable"] = " ".join(str(exc).split())
        return None, info
    info["train_s"] = time.perf_counter() - t0
    return str(ckpt), info


class _Outputs:
    """The run's files: the delivered JSONL grows under a temporary name; at the end every file is placed
    atomically (JSON last); on any failure what this run placed and the temporary file are removed."""

    def __init__(self, out_dir: Path, fault_hook: Callable[[str], None] | None) -> None:
        self.out_dir, self.hook = out_dir, fault_hook
        self.sub = out_dir / NAME
        self.sub.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.sub, prefix=".delivered.jsonl.", suffix=".tmp")
        self.tmp = Path(tmp)
        self.fh = os.fdopen(fd, "w", encoding="utf-8")
        self.placed: list[Path] = []

    def add(self, lines: list[dict[str, Any]]) -> None:
        for line in lines:
            self.fh.write(json.dumps(line, ensure_ascii=False) + "\n")

    def place(self, path: Path, data: bytes, step: str) -> None:
        write_atomic(path, data, self.hook, step)
        self.placed.append(path)

    def finish(self, hypotheses: dict[str, list[dict[str, Any]]], files: list[tuple[str, bytes]]) -> list[Path]:
        self.fh.close()
        jsonl = self.sub / "delivered.jsonl"
        if self.hook:
            self.hook(STEP_DELIVERED)
        os.chmod(self.tmp, 0o644)
        os.replace(self.tmp, jsonl)
        self.placed.append(jsonl)
        for row, items in hypotheses.items():
            from harness.workloads.lme_qa import write_hypotheses

            p = self.sub / "hypotheses" / f"{row.replace('/', '_')}.jsonl"
            p.parent.mkdir(parents=True, exist_ok=True)
            write_hypotheses(p, items, fault_hook=self.hook)
            self.placed.append(p)
        for name, data in files:
            self.place(self.out_dir / name, data, STEP_RESULTS)
        return list(reversed(self.placed))

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self.fh.close()
        self.tmp.unlink(missing_ok=True)
        for p in self.placed:
            p.unlink(missing_ok=True)
        for d in (self.sub / "hypotheses", self.sub):  # folders this run made, when nothing else is in them
            with contextlib.suppress(OSError):
                d.rmdir()


def _check_lms(lm: str | None, lm_base: str | None, judge_lm: str | None, judge_lm_base: str | None,
               reader_prompt: str) -> dict[str, Any]:
    if not lm:
        if judge_lm:
            raise ValueError("--judge-lm needs --lm (the reader whose hypotheses it judges)")
        return {"judge_lm": None, "judge_lm_base": None}
    from harness.workloads.lme_qa import READER_PROMPTS, Judge, Reader

    if reader_prompt not in READER_PROMPTS:
        raise ValueError(f"--reader-prompt {reader_prompt!r}: choose from {', '.join(READER_PROMPTS)}")
    judge_lm = judge_lm or lm
    judge_lm_base = judge_lm_base if judge_lm_base is not None else (lm_base if judge_lm == lm else None)
    Reader(lm, lm_base=lm_base, style=reader_prompt).check()
    Judge(judge_lm, lm_base=judge_lm_base).check()
    return {"judge_lm": judge_lm, "judge_lm_base": judge_lm_base}


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
        embed_store: Path | None = None, resume: bool = False, journal_root: Path | None = None) -> list[Path]:
    """Run the designs on LongMemEval and write ``longmemeval.{json,md,png}`` and ``longmemeval/`` (the delivered
    JSONL, hypotheses with an LM) to ``out_dir``, only once every question is done (see the module docstring).
    ``arms`` is ``--arms`` text (``None``: ``default_arms()``); ``limit``/``types`` select questions in file order;
    ``workers`` processes (``executor="local"``) or Ray tasks (``"ray"``, ``address`` to join a cluster).
    ``embed`` is ``"store"`` (the embedding store, at ``embed_store`` or the default folder) or ``"per-call"`` (the
    earlier caches); ``resume`` continues from the journal of an interrupted run of the same configuration, kept in
    ``journal_root`` (default ``out_dir``; a caller that writes into a staging folder passes the real one)."""
    from benchmarks.locomo import _check_out_dir, _peak_rss_mb
    from benchmarks.run_journal import RunJournal
    from harness.workloads.longmemeval import resolve_longmemeval_path

    if embed not in EMBED_MODES:
        raise ValueError(f"--embed {embed!r}: choose {' or '.join(EMBED_MODES)}")
    store = StoreSession(embed_store).config() if embed == "store" else None
    if not (store and store["device"] == "cuda"):  # a GPU store's encode pass is not pinned to one thread
        set_torch_threads(1)
    t_start = time.perf_counter()
    track = as_tracker(track)
    _check_out_dir(out_dir)
    if not k_values or min(k_values) < 1:
        raise ValueError(f"--k values must be positive, got {list(k_values)}")
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
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
    lms = _check_lms(lm, lm_base, judge_lm, judge_lm_base, reader_prompt)
    need_pm = "pm" in arm_names
    with track.phase(f"reading {src.name}"):  # a streaming pass: long on M's 2.6 GB
        n_questions, train = first_pass(src, limit, types, quick, need_pm)
    if n_questions == 0:
        raise no_question(src, types)
    if quick and echo:
        echo(f"--quick: the first {n_questions} question(s), quick arm settings")
    key = _journal_config(src, names, k_values, limit, types, quick, seed, lm, lm_base, lms, reader_prompt, embed,
                          share_encoders, store)
    journal = RunJournal(journal_root or out_dir, NAME, key, resume=resume, warn=_warn_line, fault_hook=fault_hook)
    resumed = len(journal.done)
    if resume and echo:
        echo(f"resuming: {resumed} question(s) already done ({journal.dir})")
    work_root = Path(tempfile.mkdtemp(prefix="memsim-longmemeval-", dir=tmp_dir))
    outputs: _Outputs | None = None
    samplers: list[Any] = []
    try:
        with track.phase(f"training AgentFly PM on {len(train)} question(s)") if need_pm else contextlib.nullcontext():
            pm_model, pm = (_journal_pm(journal, train, seed, quick, fault_hook, resume) if need_pm
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
        jobs = ({**base, "question": q} for q in iter_questions(src, stats=stats, limit=_limit(limit, quick),
                                                                  types=types)
                if not (order.append(q.index) or q.index in journal.done))
        used = max(1, min(workers, n_questions - len(journal.done)))
        mode = embedding_mode(embed, share_encoders, store, fault_hook)
        if used == 1 and executor == "local":
            fresh: Iterator[dict[str, Any]] = _serial(jobs, track)
        elif executor == "ray":
            fresh = _ray_pool(jobs, used, address)
        else:
            fresh = _local_pool(jobs, used, share_encoders, samplers, track, store)
        outputs = _Outputs(out_dir, fault_hook)
        results: list[dict[str, Any]] = []
        caches: dict[int, dict[str, Any]] = {}
        outcomes = _in_file_order(fresh, order, journal)
        with mode, contextlib.closing(outcomes):
            for got in track(outcomes, description="LongMemEval questions", total=n_questions, unit="questions"):
                outputs.add(got.pop("delivered"))
                caches[got.pop("pid")] = got.pop("encoder_cache")
                results.append(got)
        if not pm_model and need_pm:
            for res in results:
                res["arms"]["pm"] = {"status": "absent", "message": f"not trained: {pm['unavailable']}"}
        pm["absent_questions"] = sum(1 for r in results if pm_model and r["arms"].get("pm", {}).get("status")
                                     == "absent")
        agg = aggregate(results)
        if not agg["rows"]:
            raise ValueError("no arm produced a row: " + "; ".join(
                f"{a}: {r['message']}" for a, st in agg["arm_status"].items() for r in st["reasons"]))
        payload = _payload(src, label, results, agg, pm, caches, arm_names if arms is not None else [],
                           stats, locals_cfg={
            "arms": arm_names, "arm_classes": list(arm_classes or []), "k": list(k_values), "quick": quick,
            "seed": seed, "workers": used, "executor": executor, "limit": limit,
            "types": list(types) if types else None, "lm": lm, "reader_prompt": reader_prompt,
            "share_encoders": share_encoders, "embed": embed,
            "embed_device": store["device"] if store else None, "resumed_questions": resumed})
        hyps: dict[str, list[dict[str, Any]]] = {}
        if lm:
            payload["qa"] = {"judge": lms["judge_lm"], "rows": qa_rows(results, lms["judge_lm"])}
            for res in results:
                for row, item in res["qa"].items():
                    hyps.setdefault(row, []).append(item)
        sampled = samplers[0].peak_mb if samplers else 0.0
        payload["peak_rss_mb"] = max(_peak_rss_mb(), sampled)
        payload["meta"]["wall_s"] = payload["wall_s"] = time.perf_counter() - t_start
        stamp_run(payload)
        files = [(f"{NAME}.png", _png(payload)),
                 (f"{NAME}.md", render_markdown(payload).encode("utf-8")),
                 (f"{NAME}.json", (json.dumps(_jsonable(payload), indent=2, ensure_ascii=False) + "\n").encode())]
        written = outputs.finish(hyps, files)
        journal.remove()
        return written
    except BaseException:
        if outputs is not None:
            outputs.abort()
        raise
    finally:
        shutil.rmtree(work_root, ignore_errors=True)


def _warn_line(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr, flush=True)


def _journal_config(src: Path, names: Sequence[Any], k_values: Sequence[int], limit: int | None,
                    types: Sequence[str] | None, quick: bool, seed: int, lm: str | None, lm_base: str | None,
                    lms: dict[str, Any], reader_prompt: str, embed: str, share: bool,
                    store: dict[str, Any] | None) -> dict[str, Any]:
    """Everything a question's outcome depends on (the journal's key): the data file, the arms, the settings,
    the encoders (the store's device kind) and the code."""
    from benchmarks.run_journal import file_identity
    from harness.runs import code_identity

    arms = [n if isinstance(n, str) else f"{n.module}:{n.cls}" for n in names]
    return {"name": NAME, "data": file_identity(src), "arms": arms, "k": list(k_values), "limit": limit,
            "types": list(types) if types else None, "quick": quick, "seed": seed, "lm": lm, "lm_base": lm_base,
            **lms, "reader_prompt": reader_prompt, "embed": embed, "share": share,
            "device": store["device"] if store else None, "code": code_identity()}


def _journal_pm(journal: Any, train: list[Any], seed: int, quick: bool, fault_hook: Callable[[str], None] | None,
                resume: bool) -> tuple[str | None, dict[str, Any]]:
    """PM's one training, kept in the journal's folder: a resumed run serves the classifier it trained before."""
    kept = journal.dir / "pm.json"
    if resume and kept.is_file():
        with contextlib.suppress(OSError, ValueError):
            got = json.loads(kept.read_text(encoding="utf-8"))
            if got["model"] is None or Path(got["model"]).is_dir():
                return got["model"], got["info"]
    pm_model, info = _train_pm(train, journal.dir, seed, quick, fault_hook)
    write_atomic(kept, json.dumps({"model": pm_model, "info": info}).encode("utf-8"), fault_hook,
                 "longmemeval.journal.pm")
    return pm_model, info


def _in_file_order(fresh: Iterator[dict[str, Any]], order: list[int], journal: Any) -> Iterator[dict[str, Any]]:
    """The run's outcomes in file order: the journal's for questions it holds, the fresh ones (each kept in the
    journal as it arrives, as the resumed run would read it back) for the rest. ``order`` fills as the job
    generator walks the file (ahead of the outcomes)."""
    pos = 0
    try:
        for got in fresh:
            while order[pos] != got["index"]:
                yield journal.done[order[pos]]
                pos += 1
            yield journal.append(got["index"], got)
            pos += 1
        while pos < len(order):
            yield journal.done[order[pos]]
            pos += 1
    finally:
        close = getattr(fresh, "close", None)
        if close is not None:
            close()


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
        "sessions_per_question_median": statistics.median(r["n_sessions"] for r in results),
        "aggregate": agg, "pm": pm,
        "load_stats": {k: dict(v) if isinstance(v, dict) else v for k, v in dataclasses.asdict(stats).items()},
        "examples": first["examples"] if first else {}, "examples_question": first["question_id"] if first else None,
        "encoder_cache": cache,
        "meta": {"machine": machine_description(), "seeds": {"seed": locals_cfg["seed"]},
                 "quick": locals_cfg["quick"], "workers": locals_cfg["workers"]},
    }
