"""How the LongMemEval design run executes its questions: the encoders each process uses and the executors.

- **Encoders.** ``embed="store"``: every process maps the embedding store (:func:`process_store`), refreshes its
  view before each question and seals what it encoded after it; the run compacts the store when it ends
  (:func:`embedding_mode`). ``embed="per-call"``: one :class:`TextCache` per process and encoder, keyed by text
  (each text encoded on its own, so which question met it first cannot change its vector).
- **Executors.** :func:`serial` (this process), :func:`local_pool` (spawned processes, one torch thread each, a
  bounded window of questions in flight, outcomes in file order) and :func:`ray_pool` (Ray tasks; ``address`` joins a
  cluster). Each runs the ``work`` it is given (:func:`benchmarks.longmemeval.one_question`) per question.
- **PM, resume, files**: PM's one training (:func:`first_pass`, :func:`train_pm`), the resume journal
  (:func:`journal_config`, :func:`journal_pm`, :func:`in_file_order`) and the run's files (:class:`Outputs`; the
  delivery store and TREC files fed as questions arrive, :class:`Kept`).

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
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import set_torch_threads, write_atomic
from benchmarks.workload_run import EMBED_MODES, remove_placed
from harness.progress import report
from harness.store_encoders import StoreSession, store_encoders
from harness.workloads.arms import ArmUnavailable
from harness.workloads.runner import BIG_CALL, SharedEncoder

WINDOW_PER_WORKER = 2
NAME = "longmemeval"
QUICK_QUESTIONS = 3
"""``--quick``: the first three selected questions (and quick arm settings: ``ArmContext.quick``)."""
QUICK_PM_TRAIN = 3
"""``--quick``: PM trains on the first three questions of the training split."""
PM_SPLIT_MOD = 5
PM_SPLIT_RULE = "int(sha1(question_id).hexdigest(), 16) % 5 == 0"
STEP_DELIVERED = "longmemeval.delivered.write"
STEP_HYPOTHESES = "longmemeval.hypotheses.write"
STEP_RESULTS = "longmemeval.results.write"


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



_STORE: list[StoreSession] = []


def process_store(cfg: dict[str, Any], fault_hook: Callable[[str], None] | None = None) -> StoreSession:
    """This process's embedding store session for the run's store ``cfg`` (``StoreSession.config()``)."""
    if not _STORE or _STORE[0].config() != cfg:
        _STORE[:] = [StoreSession(Path(cfg["root"]), device=cfg["device"], fault_hook=fault_hook)]
    return _STORE[0]


def question_encoders(job: dict[str, Any]) -> Any:
    """The encoders of one question: the store (its view refreshed first, what it encoded sealed after) or the
    per-call caches (``share``)."""
    if job.get("embed") == "store":
        session = process_store(job["store"])
        session.refresh()
        return store_encoders(session)
    return text_encoders() if job["share"] else contextlib.nullcontext({})


def cache_stats(job: dict[str, Any]) -> dict[str, Any]:
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


def worker_init(share: bool, events: Any = None, store: dict[str, Any] | None = None) -> None:
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
Work = Callable[..., dict[str, Any]]
"""What runs one question: ``work(job, track=None)`` (:func:`benchmarks.longmemeval.one_question`, passed in by
the run so that this module never imports the run's)."""


def serial(work: Work, jobs: Iterable[dict[str, Any]], track: Any = None) -> Iterator[dict[str, Any]]:
    for job in jobs:
        yield work(job, track)


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


def local_pool(work: Work, jobs: Iterable[dict[str, Any]], workers: int, share: bool, sampler_box: list[Any],
               track: Any = None, store: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Questions in ``workers`` spawned processes (:func:`benchmarks.workload_run.spawn_pool`), at most
    ``WINDOW_PER_WORKER`` per worker in flight, outcomes in file order; the pool's memory sampler goes to
    ``sampler_box``. ``work`` must be a module-level function (it is pickled by name)."""
    from benchmarks.workload_run import spawn_pool

    with spawn_pool(workers, worker_init, lambda events: (share, events, store), track) as (pool, sampler):
        sampler_box.append(sampler)
        yield from _windowed(lambda j: pool.submit(work, {**j, "in_worker": True}),
                             lambda f: f.result(), jobs, workers * WINDOW_PER_WORKER)


def ray_pool(work: Work, jobs: Iterable[dict[str, Any]], workers: int, address: str | None
             ) -> Iterator[dict[str, Any]]:
    from benchmarks.sweep import ray_session

    with ray_session(workers, address) as ray:
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_question)
        yield from _windowed(lambda j: remote.remote(work, {**j, "in_worker": True}), ray.get, jobs,
                             workers * WINDOW_PER_WORKER)


def _ray_question(work: Work, job: dict[str, Any]) -> dict[str, Any]:
    """One question in a Ray worker: one torch thread (not with a GPU store); the worker process keeps its text
    caches or store session between tasks."""
    if not (job.get("embed") == "store" and job["store"]["device"] == "cuda"):
        set_torch_threads(1)
    if job.get("embed") != "store" and job["share"] and not _TEXT_CACHES:
        _new_caches()
    return work(job)


# ------------------------------------------------------------------------------------- PM, resume, files
def pm_training_split(question_id: str) -> bool:
    """Whether a question belongs to PM's training split (``PM_SPLIT_RULE``): stable across runs and files."""
    return int(hashlib.sha1(question_id.encode("utf-8")).hexdigest(), 16) % PM_SPLIT_MOD == 0


def question_limit(limit: int | None, quick: bool) -> int | None:
    return (QUICK_QUESTIONS if limit is None else min(limit, QUICK_QUESTIONS)) if quick else limit


def first_pass(path: Path, limit: int | None, types: Sequence[str] | None, quick: bool, need_pm: bool
               ) -> tuple[int, list[Any]]:
    """One streaming pass: how many questions the run evaluates (the progress bar's total) and, when PM runs,
    the training-split questions of the whole file (quick: the first ``QUICK_PM_TRAIN``) as conversations; only
    those are kept in memory. Reading stops as soon as both are known."""
    from harness.workloads.lme_workload import to_conversation
    from harness.workloads.longmemeval import iter_questions

    iter_questions(path, types=types, limit=0)  # an unknown type: one line now, before any reading
    lim, cap = question_limit(limit, quick), (QUICK_PM_TRAIN if quick else None)
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


def train_pm(train: list[Any], work_root: Path, seed: int, quick: bool,
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


class Outputs:
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

    def texts(self, hypotheses: dict[str, list[dict[str, Any]]]) -> None:
        """Place the delivered JSONL and the hypotheses."""
        from harness.workloads.lme_qa import write_hypotheses

        self.fh.close()
        jsonl = self.sub / "delivered.jsonl"
        if self.hook:
            self.hook(STEP_DELIVERED)
        os.chmod(self.tmp, 0o644)
        os.replace(self.tmp, jsonl)
        self.placed.append(jsonl)
        for row, items in hypotheses.items():
            p = self.sub / "hypotheses" / f"{row.replace('/', '_')}.jsonl"
            p.parent.mkdir(parents=True, exist_ok=True)
            write_hypotheses(p, items, fault_hook=self.hook)
            self.placed.append(p)

    def results(self, files: list[tuple[str, bytes]]) -> list[Path]:
        """Place the results files (the JSON last); every path this run placed, newest first."""
        for name, data in files:
            write_atomic(self.out_dir / name, data, self.hook, STEP_RESULTS)
            self.placed.append(self.out_dir / name)
        return list(reversed(self.placed))

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self.fh.close()
        self.tmp.unlink(missing_ok=True)
        remove_placed(self.placed, [self.sub / "hypotheses", self.sub / "runs", self.sub])


def check_lms(lm: str | None, lm_base: str | None, judge_lm: str | None, judge_lm_base: str | None,
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


def warn_line(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr, flush=True)


def journal_config(src: Path, names: Sequence[Any], k_values: Sequence[int], limit: int | None,
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


def journal_pm(journal: Any, train: list[Any], seed: int, quick: bool, fault_hook: Callable[[str], None] | None,
                resume: bool) -> tuple[str | None, dict[str, Any]]:
    """PM's one training, kept in the journal's folder: a resumed run serves the classifier it trained before."""
    kept = journal.dir / "pm.json"
    if resume and kept.is_file():
        with contextlib.suppress(OSError, ValueError):
            got = json.loads(kept.read_text(encoding="utf-8"))
            if got["model"] is None or Path(got["model"]).is_dir():
                return got["model"], got["info"]
    pm_model, info = train_pm(train, journal.dir, seed, quick, fault_hook)
    write_atomic(kept, json.dumps({"model": pm_model, "info": info}).encode("utf-8"), fault_hook,
                 "longmemeval.journal.pm")
    return pm_model, info


def in_file_order(fresh: Iterator[dict[str, Any]], order: list[int], journal: Any) -> Iterator[dict[str, Any]]:
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


class Kept:
    """The run's delivery store and TREC files, fed each question's share as it arrives (its outcome keeps neither,
    so a long run holds each text once): a question id met again later in the file is ``<id>#<n>`` in the TREC
    files, as in the per-probe table, and its deliveries are kept once."""

    def __init__(self, out_dir: Path, label: dict[str, Any]) -> None:
        from harness.deliveries import DeliveryWriter, deliveries_path

        self.writer = DeliveryWriter(deliveries_path(out_dir, NAME), data=label["label"],
                                     synthetic=bool(label["synthetic"]))
        from benchmarks.probe_tables import TrecFiles

        self.trec = TrecFiles()
        self.seen: dict[str, int] = {}

    def add(self, got: dict[str, Any]) -> None:
        from harness.trec import query_id

        qid = got["question_id"]
        n = self.seen[qid] = self.seen.get(qid, 0) + 1
        key = qid if n == 1 else f"{qid}#{n}"
        for rec in got.pop("deliveries"):
            if n == 1:
                self.writer.add_record(rec)
        self.trec.merge(got.pop("trec"), query=query_id(key, key))
