"""Run arms over one LoCoMo conversation and collect per-probe records (used by the benchmark and the claims).

For each arm: build it with a fresh ``ArmContext`` (its own work directory), time ``ingest`` over the whole
conversation, read ``stored()`` once, then time one ``deliver`` per probe and turn every delivered row into a
``metrics.probe_record``. The deliver time is split in two where the arm reports its design time per row
(``meta["row_ms"]``, see ``harness.workloads.base``): ``design_ms`` (that row's time in the design's public API;
rows that share one ranking put its cost on the row that ran it first), ``arm_design_ms`` (the sum over the arm's
rows for this probe) and ``harness_ms`` (the rest of the deliver call: the harness's own provenance matching and
rendering, shared by the arm's rows); all are None for an arm that does not report it. ``text_sha1`` is the SHA-1
of the delivered text (two runs delivered the same text when their digests agree). Arms are named (the registry of
``harness.workloads.arms``) or given as an ``ArmSpec`` (an external arm loaded with ``--arm-class`` or an entry
point). An arm that cannot be built, or whose ``ingest`` raises ``ArmUnavailable`` (the conversation lacks
what it needs, e.g. recorded LM outputs), is reported ``unavailable`` with the reason; an arm that raises while
ingesting or delivering is reported ``error`` with a one-line message, and its partial records are dropped (so a
half-run arm never enters an average). Either way the other arms go on. After each arm closes, the memory it freed is
handed back to the kernel (:func:`harness.heap.release_freed_heap`), so a process that runs many arms keeps only
what is still in use (the results are unchanged). With an ``answerer`` (``--lm``), each
delivered row's text is answered and scored; without it no answer field exists.

Progress: each arm's ingest is a phase of ``track`` counting the conversation's turns (when ``track`` can open
phases, see ``benchmarks.progress``); the arm reports how far it got with ``harness.progress.report`` (Tortoise:
the encoding pass, then each session captured; Fractal: each session submitted; AgentFly: the indexing), and an
encoder call of at least :data:`BIG_CALL` texts through the run's shared encoder says so in the phase's status.
The probes are a loop of their own.

The same loop runs a LongMemEval question (``harness.workloads.lme_workload.to_conversation``): each arm's
context names the conversation's workload (``ArmContext.workload``) and, when given, the run's PM model
(``pm_model``, see ``agentfly_arm.train_pm_model``); the result then also counts its probes per question type
(``question_types``). A LoCoMo result has exactly the keys it had before.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from harness.heap import release_freed_heap
from harness.progress import report, reporting
from harness.workloads.arms import ArmSpec, ArmUnavailable, build_arm
from harness.workloads.base import ArmContext, Delivery
from harness.workloads.locomo import Conversation, Probe
from harness.workloads.metrics import TokenCounter, probe_record, token_counter

Track = Callable[..., Iterable[Any]]
Answerer = Callable[[Probe, str], dict[str, Any]]
EXAMPLE_CHARS = 1500
BIG_CALL = 32
"""An encoder call of at least this many texts says so in the progress of the step running it."""


def compact_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """The small part of a delivery's meta kept per record: numbers, booleans, short strings and short id lists
    (ranked ids, named ids); long texts and score vectors stay out of the per-probe records."""
    out: dict[str, Any] = {}
    for k, v in meta.items():
        if k == "scores":
            continue
        if isinstance(v, bool | int | float) or v is None or (isinstance(v, str) and len(v) <= 80):
            out[k] = v
        elif isinstance(v, list | tuple) and len(v) <= 32 and all(isinstance(x, str | int | float) for x in v):
            out[k] = list(v)
    return out


def _no_track(it: Iterable[Any], description: str = "", total: int | None = None) -> Iterable[Any]:
    return it


def _one_line(exc: BaseException) -> str:
    msg = " ".join(str(exc).split())
    return (f"{msg} ({type(exc).__name__})" if msg else type(exc).__name__)[:500]


def _example(probe: Probe, d: Delivery) -> dict[str, Any]:
    text = d.text if len(d.text) <= EXAMPLE_CHARS else (d.text[:EXAMPLE_CHARS // 2] + "\n[...]\n"
                                                          + d.text[-EXAMPLE_CHARS // 2:])
    return {"probe": probe.index, "question": probe.question, "evidence": probe.evidence,
            "delivered_ids": sorted(d.dia_ids), "chars": len(d.text), "text_excerpt": text}


class SharedEncoder:
    """One run's cache over a process-wide encoder (``harness.embedding.get_encoder``), shared by every arm and
    baseline that asks for that encoder during the run.

    Keyed by encoder and the whole call (the texts, in order), not per text: a call with exactly the texts of an
    earlier call *by another arm* returns a copy of that call's vectors, anything else is encoded as given. So
    every arm gets the array it would have computed itself (a per-text cache would re-batch texts and move vectors
    by float noise), and an arm that repeats its own call (NP's faithful-recompute timing re-encodes bank texts it
    indexed) still pays for it, as it would without the cache. What it saves: the hybrid baseline re-encoding the
    turn lines the mean baseline already encoded, and the same question encoded once per arm. An arm's ingest and
    probe times then exclude what another arm already paid for. The runner names the arm running (``arm``).
    """

    def __init__(self, name: str, base: Any | None = None) -> None:
        self.name = name
        self._base = base
        self._calls: dict[tuple[str, ...], tuple[str | None, np.ndarray]] = {}
        self.arm: str | None = None
        self.hits = 0
        self.misses = 0

    @property
    def base(self) -> Any:
        if self._base is None:
            from harness import embedding

            self._base = embedding.MeanPoolingEncoder() if self.name == "minilm-mean" else embedding.PoolerEncoder()
        return self._base

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self.base, attr)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            return self.base.encode(texts)  # the base encoder's own error
        key = tuple(str(t) for t in texts)
        got = self._calls.get(key)
        if got is not None and got[0] != self.arm:
            self.hits += 1
            return got[1].copy()
        self.misses += 1
        if len(key) >= BIG_CALL:
            report(status=f"encoding {len(key)} texts")
        vecs = self.base.encode(list(key))
        if got is None:
            self._calls[key] = (self.arm, np.array(vecs, copy=True))
        return vecs

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses}


_ACTIVE: list[SharedEncoder] = []


@contextmanager
def shared_encoders(names: Sequence[str] = ("minilm-mean", "minilm-pooler")) -> Iterator[dict[str, SharedEncoder]]:
    """For the length of a run, ``get_encoder(name)`` returns one ``SharedEncoder`` per name (loaded on first
    use); afterwards the plain process-wide encoders are back (the loaded model is kept for later calls)."""
    from harness import embedding

    global _ACTIVE
    with embedding._LOCK:
        saved = {n: embedding._CACHE.get(n) for n in names}
        shared = {n: SharedEncoder(n, saved[n]) for n in names}
        embedding._CACHE.update(shared)
    _ACTIVE = list(shared.values())
    try:
        yield shared
    finally:
        _ACTIVE = []
        restore_encoders(shared, saved)


def restore_encoders(installed: Mapping[str, SharedEncoder], saved: Mapping[str, Any]) -> None:
    """Put the plain process-wide encoders back after a run's caches (``installed``, by name): the base model a
    cache loaded is kept for later calls, else the encoder that was there before (``saved``), else none."""
    from harness import embedding

    with embedding._LOCK:
        for n, cache in installed.items():
            base = cache._base
            if base is not None:
                embedding._CACHE[n] = base
            elif saved.get(n) is not None:
                embedding._CACHE[n] = saved[n]
            else:
                embedding._CACHE.pop(n, None)


def _row_ms(d: Delivery) -> float | None:
    v = d.meta.get("row_ms")
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _ingest(arm: Any, conv: Conversation, label: str, n_turns: int, track: Track) -> float:
    """``arm.ingest(conv)`` as a phase of its own (it can take minutes: encoding, training, captures), so the run
    shows what it is doing before the arm's probe bar appears; returns the ingest's milliseconds.

    With a tracker that opens phases (``track.phase``, see ``benchmarks.progress``) the phase counts the
    conversation's turns and the arm reports into it through ``harness.progress.report`` (turns done, a status
    such as ``capturing session 12/48``); a plain ``track`` function shows the ingest as one step."""
    opener = getattr(track, "phase", None)
    if opener is None:
        for _ in track([conv], description=f"{label} ingest ({n_turns} turns)", total=1):
            t0 = time.perf_counter()
            arm.ingest(conv)
            ms = (time.perf_counter() - t0) * 1000
        return ms
    with opener(f"{label} ingest", total=n_turns, unit="turns") as phase, reporting(phase.update):
        t0 = time.perf_counter()
        arm.ingest(conv)
        ms = (time.perf_counter() - t0) * 1000
        phase.update(n_turns, status="")
    return ms


def run_conversation(conv: Conversation, arm_names: Sequence[str | ArmSpec], workdir: Path, *,
                     k_values: tuple[int, ...] = (4, 8), others: tuple[Conversation, ...] = (), lm: str | None = None,
                     quick: bool = False, seed: int = 0, track: Track | None = None,
                     answerer: Answerer | None = None, counter: TokenCounter | None = None,
                     echo: Callable[[str], None] | None = None,
                     on_delivery: Callable[[str, Probe, Delivery], None] | None = None,
                     pm_model: Path | None = None) -> dict[str, Any]:
    """All arms over one conversation; returns a JSON-serialisable result with ``arms`` and ``records``.
    ``on_delivery(row, probe, delivery)`` (optional) sees every delivered row as it is recorded (the paper protocol
    scores the delivered ids and text with its own rules); an arm that later fails is reported ``error`` here, so a
    caller keeps only rows of arms whose status is ``ok``."""
    track = track or _no_track
    counter = counter or token_counter()
    turns = conv.turns()
    session_of = {t.dia_id: t.session for t in turns}
    out: dict[str, Any] = {
        "conversation": conv.sample_id, "source": conv.source, "n_turns": len(turns),
        "n_sessions": len(conv.sessions), "n_probes": len(conv.probes),
        "categories": {str(c): sum(1 for p in conv.probes if p.category == c) for c in range(1, 6)},
        "quirks": conv.quirk_counts(), "arms": {}, "records": [], "examples": {},
    }
    if any(p.question_type is not None for p in conv.probes):
        out["question_types"] = dict(Counter(p.type_name for p in conv.probes))
    for entry in arm_names:
        name = entry.name if isinstance(entry, ArmSpec) else entry
        for enc in _ACTIVE:  # a shared encoder serves this arm only what other arms computed
            enc.arm = f"{conv.sample_id}/{name}"
        info: dict[str, Any] = {"status": "ok"}
        out["arms"][name] = info
        ctx = ArmContext(workdir=workdir / conv.sample_id / name, k_values=k_values, seed=seed, others=others,
                         lm=lm, quick=quick, workload=conv.workload, pm_model=pm_model)
        ctx.workdir.mkdir(parents=True, exist_ok=True)
        try:
            arm = build_arm(entry, ctx)
        except ArmUnavailable as exc:
            info.update(status="unavailable", message=str(exc))
            if echo:
                echo(f"{conv.sample_id}: {exc}")
            continue
        records: list[dict[str, Any]] = []
        examples: dict[str, Any] = {}
        try:
            info["rows"] = list(arm.rows)
            info["ingest_ms"] = _ingest(arm, conv, f"{conv.sample_id} {name}", len(turns), track)
            info["ingest_ms_per_turn"] = info["ingest_ms"] / max(1, len(turns))
            stored = arm.stored()
            info["stored_turns"] = len(stored)
            for probe in track(conv.probes, description=f"{conv.sample_id} {name}", total=len(conv.probes)):
                t0 = time.perf_counter()
                got = arm.deliver(probe)
                lat = (time.perf_counter() - t0) * 1000
                missing = [r for r in arm.rows if r not in got]
                if missing:
                    raise RuntimeError(f"deliver() returned no row {', '.join(missing)}")
                design = {row: _row_ms(got[row]) for row in arm.rows}
                split = all(v is not None for v in design.values())
                harness_ms = max(0.0, lat - sum(v or 0.0 for v in design.values())) if split else None
                for row in arm.rows:
                    d = got[row]
                    if on_delivery is not None:
                        on_delivery(row, probe, d)
                    rec = probe_record(conv.sample_id, probe, row, d, stored, lat, counter, session_of)
                    rec["design_ms"] = design[row] if split else None
                    rec["arm_design_ms"] = sum(v or 0.0 for v in design.values()) if split else None
                    rec["harness_ms"] = harness_ms
                    rec["meta"] = compact_meta(d.meta)
                    rec["text_sha1"] = hashlib.sha1(d.text.encode("utf-8")).hexdigest()
                    if answerer is not None:
                        rec.update(answerer(probe, d.text))
                    records.append(rec)
                    if row not in examples and probe.evidence and probe.has_gold:
                        examples[row] = _example(probe, d)
        except ArmUnavailable as exc:  # an arm that needs what this conversation lacks (recorded LM outputs)
            info.update(status="unavailable", message=str(exc))
            if echo:
                echo(f"{conv.sample_id}: {exc}")
            records, examples = [], {}
        except Exception as exc:
            info.update(status="error", message=_one_line(exc))
            if echo:
                echo(f"{conv.sample_id}: arm {name!r} failed: {info['message']}")
            records, examples = [], {}
        finally:
            try:
                arm.close()
            except Exception as exc:  # a failing close is reported beside the arm, the records stand
                info["close_error"] = _one_line(exc)
            arm = None
            release_freed_heap()  # what the closed arm freed goes back to the kernel (harness.heap)
        out["records"] += records
        out["examples"].update(examples)
    return out
