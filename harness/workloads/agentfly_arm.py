"""AgentFly arms: every turn is a case in a bank; a probe is a question put to the driver, and what the planner
receives for it is the delivery.

Shared mapping choices:

- **Cases.** Each turn becomes one case whose question text is ``arm_text.dated_line`` (``"[<session date-time>]
  <speaker>: <text>"``, photo caption appended), so the date travels with the turn; the plan is empty and the
  outcome positive. NP rows are ``{"question", "plan": "", "reward": 1}`` (``bank.np_case_row``), PM rows
  ``{"case", "plan": "", "case_label": "positive"}`` (``bank.pm_case_row``), each appended with
  ``bank.append_jsonl``, the writer the drivers themselves use, one line per turn in conversation order.
- **The driver reads the bank back** with its own loaders (NP: ``load_jsonl`` + ``extract_pairs``; PM:
  ``load_pool``), exactly what the driver does at startup.
- **One driver per K** (``DriverConfig(memory_top_k=K, max_pos_examples=K, max_neg_examples=K)``, as upstream's
  ``MEMORY_TOP_K=K`` sets all three), all sharing one selector and one loaded bank. A probe runs the driver's own
  ``process_query`` with a capturing planner that records the messages it is sent and answers at once
  (``FINAL ANSWER: ...``), so no executor, judge, result record or case append happens and no probe changes the
  bank (NP also clears its history per query, PM's history is cleared at the end of ``process_query``).
- **Delivered text** = the planner's messages for the question, contents joined by a blank line: the planner
  system prompt, the question, and the example prompt that ``prompts.build_np_prompt_from_cases`` /
  ``build_pm_prompt_from_cases`` made from the retrieved cases. With an empty plan a positive case falls back to the
  raw ``Plan:`` form (AGF-23 path), so each example shows its question text and an empty plan.
- **Provenance**: ``dia_ids`` = turns whose line occurs in the delivered text; ``meta["ranked_ids"]`` = the turns of
  the retrieved cases in rank order (mapped from the case text the selector returned). ``stored()`` reads the bank
  file back and looks for each turn's line in its case texts.

NP (``NPArm``, rows ``np-<pooling>@K``):

- ``pooling="pooler"`` (faithful, AGF-13): ``NpSelector(cached=True)``, the cached-index mode whose rankings equal
  the faithful recompute (spec §3.5; ``tests/harness/test_locomo_arms_agentfly.py`` checks it on a conversation).
  The faithful mode re-embeds all N bank questions plus the query on every query (AGF-36); instead of paying that,
  the arm times one faithful batch at ingest (``embed_texts`` on the first 64 bank questions in bank order, after a
  two-text warm-up) and reports per probe ``meta["faithful_texts_per_probe"] = N + 1`` and
  ``meta["faithful_recompute_ms"] = (N + 1) * per-text ms``, beside the cached path's one text. **Timed once per
  batch shape** (``recompute_timing="per-shape"``, the default, in ``meta["recompute_timing"]``): the batch's
  forward pass is a function of its padded shape (texts x tokens after padding and truncation, 64 x 256 for nearly
  every LongMemEval bank), not of the token values, so a process that already timed a batch of that shape and
  pooling reports that timing instead of running the same computation again (a LongMemEval run has one bank per
  question: hundreds of identical 64 x 256 batches, each of which cost as much as encoding 66 new texts).
  What the number measures is the same before and after: the wall time of one faithful batch of this bank's shape
  on this machine, per text; after, it was timed on the first bank of that shape in this process rather than on
  this one. ``recompute_timing="per-bank"`` is the previous behaviour (every bank timed). The index itself
  is filled in length-sorted batches (less padding; same vectors up to float noise) and then laid out in bank
  order, and the question is ranked once at the largest K, each driver taking its top-k prefix (``torch.topk`` is
  sorted, so top-4 is the head of top-8).
- **Embedding store.** While a run's embedding store is active (``harness.store_encoders.active()``, the benches'
  default), the vectors come from it: NP pooler's keys and queries through the selector's ``key_encoder`` (the
  store's ``minilm-pooler``: each text alone, equal to the selector's own one-text path), NP mean's through
  ``harness.embedding.get_encoder`` (the store's ``minilm-mean``), PM's case and query CLS vectors through the
  retriever's ``vector_encoder`` (the store's ``pm-cls`` for that checkpoint's backbone). The faithful-recompute
  timing still encodes with a model, never the store: for the pooler the store's own ``minilm-pooler`` model on a
  CPU store (the same weights as AgentFly's ``load_np_encoder``, so no second copy stays resident), AgentFly's
  otherwise.
- ``pooling="mean"`` (a named non-faithful variant): the same driver with a selector that ranks by MiniLM
  mean-pooling cosine (``harness.embedding`` ``minilm-mean``, the pooling the model was trained for), cached by
  key text, top-k by ``torch.topk`` like the pooler path; its recompute cost is timed the same way with that
  encoder.

PM (``PMArm``, rows ``pm@K``): see the class docstring; its labels are **not** AgentFly's (AGF-35). On LongMemEval
(one conversation per question) the classifier is trained once per run by :func:`train_pm_model` on questions
disjoint from the evaluated ones (the caller chooses the split) and handed to every PM arm as ``ctx.pm_model``;
the arm then loads it and trains nothing. On LoCoMo the arm trains per conversation on ``ctx.others`` as before.
"""

from __future__ import annotations

import json
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from agentfly_sim.bank import (
    append_jsonl,
    extract_pairs,
    load_jsonl,
    load_pool,
    np_case_row,
    pair_row,
    pm_case_row,
    write_jsonl,
)
from agentfly_sim.driver import DriverConfig, NPDriver, PMDriver
from agentfly_sim.embedding import ranked_results
from harness.progress import report
from harness.store_encoders import active
from harness.workloads.arm_text import dated_line, dated_turns, ids_in_text, turn_snippets
from harness.workloads.base import ArmContext, Delivery
from harness.workloads.locomo import Conversation, Probe

CAPTURE_ANSWER = "FINAL ANSWER: (delivery capture: no answer requested)"
PM_INFO = "memsim-pm.json"
"""The file beside ``last.pt`` in a :func:`train_pm_model` folder: what the model was trained on (written last, so
a folder that has it holds a whole model)."""
LOCOMO_LABELLING = "non-faithful: LoCoMo evidence relevance from the other conversations (AGF-35)"
LME_LABELLING = "non-faithful: LongMemEval evidence relevance, questions disjoint from the evaluated (AGF-35)"
RECOMPUTE_TIMINGS = ("per-shape", "per-bank")
"""How NP times the faithful recompute's batch: once per batch shape and pooling in a process, or every bank."""
_TIMED_BATCHES: dict[tuple[str, int, int], float] = {}
"""(pooling, texts, padded tokens) -> per-text ms of the faithful batch timed in this process."""


def pm_training_pairs(train: Sequence[Conversation], *, seed: int, negatives: int,
                      max_questions: int | None) -> list[dict[str, Any]]:
    """Relevance pairs for the PM classifier from ``train`` (see ``PMArm``): per question with a gold answer
    (``Probe.has_gold``: LoCoMo categories 1-4, LongMemEval non-abstention) and valid evidence, one positive
    ``(question, evidence turn)`` per evidence turn and ``negatives`` negatives per positive, ``(question, another
    turn of that conversation)``, sampled with ``random.Random(seed)``; at most ``max_questions`` questions per
    conversation. Case texts are the dated lines the bank holds."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for conv in train:
        lines = {t.dia_id: dated_line(t, s) for t, s in dated_turns(conv)}
        ids = list(lines)
        probes = [p for p in conv.probes if p.has_gold and p.evidence]
        if max_questions is not None:
            probes = probes[:max_questions]
        for p in probes:
            evidence = [e for e in dict.fromkeys(p.evidence) if e in lines]
            for e in evidence:
                rows.append(pair_row(p.question, {"case": lines[e], "case_label": "positive", "plan": ""}, True))
            pool = [i for i in ids if i not in set(evidence)]
            for i in rng.sample(pool, min(len(pool), negatives * len(evidence))):
                rows.append(pair_row(p.question, {"case": lines[i], "case_label": "positive", "plan": ""},
                                     False))
    return rows


def _train_classifier(rows: list[dict[str, Any]], pairs_path: Path, ckpt_dir: Path, *, seed: int, epochs: int,
                      atomic: bool = False, fault_hook: Callable[[str], None] | None = None
                      ) -> tuple[Any, float]:
    """Write ``rows`` and train the head (the settings of ``PMArm``); returns the trainer's result and seconds."""
    from agentfly_sim.training import TrainConfig, train

    # case-length order: the trainer encodes distinct texts in first-seen order, in batches of 64, so similar
    # lengths side by side pad little (the split groups by query and the loader shuffles: order is otherwise moot)
    rows.sort(key=lambda r: len(r["case"]))
    write_jsonl(pairs_path, rows)
    cfg = TrainConfig(train=str(pairs_path), output_dir=str(ckpt_dir), freeze_backbone=True,
                      group_by_query=True, lr=1e-3, epochs=epochs, batch_size=32, eval_every=10**9,
                      seed=seed, atomic_checkpoints=atomic)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the training time is comparable across hosts and runs
    started = time.perf_counter()
    try:
        result = train(cfg, log=lambda _line: None, fault_hook=fault_hook)
    finally:
        torch.set_num_threads(threads)
    return result, time.perf_counter() - started


def _train_info(labelling: str, rows: list[dict[str, Any]], result: Any, train_s: float, epochs: int,
                negatives: int, others: list[str]) -> dict[str, Any]:
    final = result.evaluations[-1] if result.evaluations else {}
    return {
        "labelling": labelling, "train_s": round(train_s, 3), "pairs": len(rows),
        "positives": sum(1 for r in rows if r["truth_label"]), "n_train": result.n_train,
        "n_val": result.n_val, "epochs": epochs, "negatives_per_positive": negatives,
        "others": others, "val_auc": final.get("auc"), "val_f1": final.get("f1"),
    }


def train_pm_model(train: Sequence[Conversation], workdir: Path, *, seed: int, quick: bool,
                   fault_hook: Callable[[str], None] | None = None) -> Path:
    """Train the PM classifier once on ``train`` (LongMemEval: questions disjoint from every evaluated one; the
    caller chooses them) and return its checkpoint folder (``workdir/pm-model``: ``last.pt``, the trainer's
    metrics and ``PM_INFO``), for ``ArmContext.pm_model``. The pairs and training settings are ``PMArm``'s
    (``pm_training_pairs``; 1 negative, 1 epoch and 20 questions per conversation with ``quick``). The
    checkpoints are written atomically (the trainer's named ``atomic_checkpoints`` option, fault steps
    ``agentfly.train.*``) and ``PM_INFO`` last (step ``memsim.pm_model.info``). No pair at all, or too few
    questions to leave any after the trainer's validation split, is a one-line ``ValueError``."""
    from agentfly_sim.durable import write_with

    negatives, epochs = (1, 1) if quick else (2, 20)
    rows = pm_training_pairs(train, seed=seed, negatives=negatives, max_questions=20 if quick else None)
    if not rows:
        raise ValueError(f"the PM model needs training pairs: the {len(train)} training question(s) hold no "
                         f"question with a gold answer and evidence turns")
    from agentfly_sim.training import TrainConfig, group_split_indices, normalize_label

    ordered = sorted(rows, key=lambda r: len(r["case"]))  # the order _train_classifier writes them in
    kept, _ = group_split_indices([str(r["query"]) for r in ordered], [normalize_label(r["truth_label"])
                                                                       for r in ordered], TrainConfig.val_ratio, seed)
    if not kept:  # the trainer holds whole questions out for validation: nothing would be left to train on
        raise ValueError(f"the PM model needs more training questions: its trainer holds whole questions out for "
                         f"validation, and the {len(train)} training question(s) leave none to train on")
    folder = Path(workdir) / "pm-model"
    folder.mkdir(parents=True, exist_ok=True)
    result, train_s = _train_classifier(rows, folder / "pairs.jsonl", folder, seed=seed, epochs=epochs,
                                        atomic=True, fault_hook=fault_hook)
    info = _train_info(LME_LABELLING, rows, result, train_s, epochs, negatives, [c.sample_id for c in train])
    info["checkpoint"] = Path(result.last_path).name
    data = json.dumps(info, ensure_ascii=False) + "\n"
    write_with(folder / PM_INFO, lambda p: Path(p).write_text(data, encoding="utf-8"), step="memsim.pm_model.info",
               hook=fault_hook, atomic=True)
    return folder


def load_pm_model(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The checkpoint file and training description of a :func:`train_pm_model` folder; a folder without a
    whole model is a one-line ``ValueError`` naming it."""
    info_path = Path(folder) / PM_INFO
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{folder}: not a PM model folder made by train_pm_model (cannot read {PM_INFO}: "
                         f"{type(exc).__name__})") from None
    ckpt = Path(folder) / str(info.get("checkpoint", "last.pt"))
    if not ckpt.is_file():
        raise ValueError(f"{folder}: PM model folder without its checkpoint {ckpt.name}")
    return ckpt, info


def _np_model() -> tuple[Any, Any]:
    """The tokenizer and model the faithful batch is timed with: AgentFly's own (``load_np_encoder``), or, while a
    CPU embedding store is active, the store's ``minilm-pooler`` model: the same weights and the same forward pass
    (``embed_texts`` runs on either), without a second copy of the model resident in the process."""
    from agentfly_sim.embedding import load_np_encoder

    store = active()
    if store is not None and store.device == "cpu":
        base = store.encoder("minilm-pooler").uncached()
        if getattr(base, "tokenizer", None) is not None and getattr(base, "model", None) is not None:
            return base.tokenizer, base.model
    return load_np_encoder()


def _torch_vectors(encoder: Any) -> Callable[[list[str]], torch.Tensor]:
    """An ``Encoder`` (numpy rows) as the ``texts -> tensor`` function AgentFly's selectors take."""
    return lambda texts: torch.from_numpy(encoder.encode(list(texts)))


class CapturePlanner:
    """A planner that records the messages of each call and answers immediately (one planner cycle)."""

    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []

    def complete(self, messages: list[dict[str, Any]]) -> str:
        self.calls.append([dict(m) for m in messages])
        return CAPTURE_ANSWER


def planner_text(messages: list[dict[str, Any]]) -> str:
    """The contents of the planner messages joined by a blank line."""
    return "\n\n".join(str(m.get("content") or "") for m in messages)


class MeanPoolSelector:
    """NP selector variant: MiniLM mean-pooling cosine over the bank questions, key vectors cached by text.

    Same call shape and result rows as ``agentfly_sim.embedding.NpSelector.retrieve``."""

    def __init__(self) -> None:
        from harness.embedding import get_encoder

        self.encoder = get_encoder("minilm-mean")
        self.vectors: dict[str, torch.Tensor] = {}
        self.keys: list[str] = []
        self.matrix: torch.Tensor | None = None
        self.texts_embedded = 0

    def rebuild(self, pairs: list[tuple[Any, ...]]) -> int:
        unseen = list(dict.fromkeys(p[0] for p in pairs if p[0] not in self.vectors))
        if unseen:
            vecs = torch.from_numpy(self.encoder.encode(unseen))
            for k, v in zip(unseen, vecs, strict=True):
                self.vectors[k] = v
            self.texts_embedded += len(unseen)
        self.keys = [p[0] for p in pairs]
        self.matrix = torch.stack([self.vectors[k] for k in self.keys]) if self.keys else None
        return len(unseen)

    def retrieve(self, task: str, pairs: list[tuple[Any, ...]], device_str: str = "auto", top_k: int = 5,
                 max_length: int = 256) -> list[dict[str, Any]]:
        if self.matrix is None or self.keys != [p[0] for p in pairs]:
            self.rebuild(pairs)
        if self.matrix is None:
            return []
        q = torch.from_numpy(self.encoder.encode([task]))[0]
        self.texts_embedded += 1
        return ranked_results(pairs, self.matrix @ q, top_k)


class _BankArm(ABC):
    """Common part of the NP and PM arms: bank written per turn, one driver per K, capture of planner input."""

    name = "agentfly"
    rows: tuple[str, ...] = ()
    case_key = "question"

    def __init__(self, ctx: ArmContext) -> None:
        self.ctx = ctx
        self.root = Path(ctx.workdir) / f"agentfly-{self.name}"
        self.memory_dir = self.root / "memory"
        self.memory_dir.mkdir(parents=True, exist_ok=True)
        self.bank_path = self.memory_dir / "bank.jsonl"
        self.k_values = tuple(ctx.k_values)
        self.planner = CapturePlanner()
        self.drivers: dict[int, Any] = {}
        self.snippets: dict[str, str] = {}
        self.case_to_id: dict[str, str] = {}
        self.ingest_s = 0.0

    @abstractmethod
    def _row(self, case_text: str) -> dict[str, Any]:
        """The bank row for one case text."""

    @abstractmethod
    def _start(self) -> None:
        """Load the bank the way the driver does and build one driver per K."""

    @abstractmethod
    def _row_name(self, k: int) -> str:
        """The delivered row name for top-K."""

    def _meta(self, k: int) -> dict[str, Any]:
        return {}

    def _config(self, k: int, **kw: Any) -> DriverConfig:
        return DriverConfig(memory_jsonl_path=str(self.bank_path), memory_top_k=k, max_pos_examples=k,
                            max_neg_examples=k, **kw)

    def ingest(self, conversation: Conversation) -> None:
        started = time.perf_counter()
        self.snippets = turn_snippets(conversation)
        for turn, session in dated_turns(conversation):
            text = dated_line(turn, session)
            self.case_to_id[text] = turn.dia_id
            append_jsonl(self.bank_path, self._row(text))
        report(status=f"indexing {len(self.case_to_id)} cases")
        self._start()
        self.ingest_s = time.perf_counter() - started

    def deliver(self, probe: Probe) -> dict[str, Delivery]:
        out: dict[str, Delivery] = {}
        for k, driver in self.drivers.items():
            started = time.perf_counter()
            rec = driver.process_query(probe.question)
            elapsed_ms = (time.perf_counter() - started) * 1000
            text = planner_text(self.planner.calls.pop())
            cases = rec.retrieved_cases if rec.retrieved_cases is not None else self._last_cases(driver, probe)
            ranked = [self.case_to_id.get(str(c.get(self.case_key)), "?") for c in cases or []]
            meta = {"k": k, "ranked_ids": ranked, "scores": [c.get("score") for c in cases or []],
                    "row_ms": round(elapsed_ms, 3), **self._meta(k)}
            out[self._row_name(k)] = Delivery(text=text, dia_ids=ids_in_text(text, self.snippets), meta=meta)
        return out

    def _last_cases(self, driver: Any, probe: Probe) -> list[dict[str, Any]]:
        return []

    def close(self) -> None:
        self.drivers.clear()


class NPArm(_BankArm):
    """AgentFly's nonparametric memory: rows ``np-<pooling>@K`` for each K of ``ctx.k_values``.

    ``pooling="pooler"`` is the faithful selector (AGF-13), ``"mean"`` the mean-pooling variant."""

    case_key = "question"

    def __init__(self, ctx: ArmContext, pooling: str = "pooler", recompute_timing: str = "per-shape") -> None:
        if pooling not in ("pooler", "mean"):
            raise ValueError(f"pooling must be 'pooler' or 'mean', not {pooling!r}")
        if recompute_timing not in RECOMPUTE_TIMINGS:
            raise ValueError(f"recompute_timing must be one of {', '.join(RECOMPUTE_TIMINGS)}, not "
                             f"{recompute_timing!r}")
        self.pooling = pooling
        self.recompute_timing = recompute_timing
        self.timed_shape: tuple[int, int] | None = None
        self.timing_reused = False
        self.name = f"np-{pooling}"
        super().__init__(ctx)
        self.rows = tuple(self._row_name(k) for k in self.k_values)
        self.selector: Any = None
        self.items: list[Any] = []
        self.pairs: list[tuple[Any, ...]] = []
        self.per_text_ms = 0.0
        self._recorded: dict[int, list[dict[str, Any]]] = {}

    def _row_name(self, k: int) -> str:
        return f"{self.name}@{k}"

    def _row(self, case_text: str) -> dict[str, Any]:
        return np_case_row(case_text, "", 1)

    def _start(self) -> None:
        self.items = load_jsonl(self.bank_path)
        self.pairs = extract_pairs(self.items)
        self.per_text_ms = self._measure_faithful_batch()
        store = active()
        if self.pooling == "pooler":
            from agentfly_sim.embedding import NpSelector

            if store is not None:
                selector: Any = NpSelector(cached=True, key_encoder=_torch_vectors(store.encoder("minilm-pooler")))
            else:
                selector = NpSelector(cached=True)
                # warm the cache with length-sorted keys (less padding per batch of 64), then index in bank
                # order; the second rebuild embeds nothing
                selector.index.rebuild(sorted(self.pairs, key=lambda p: len(p[0])))
            selector.index.rebuild(self.pairs)
        else:
            selector = MeanPoolSelector()
            selector.rebuild(self.pairs)
        self.selector = _Recording(selector, self._recorded, max(self.k_values))
        for k in self.k_values:
            driver = NPDriver(self.root / "client", self.planner, None, None, selector=self.selector,
                              config=self._config(k, np_cached_index=True))
            driver.items, driver.pairs = self.items, self.pairs
            self.drivers[k] = driver

    def _measure_faithful_batch(self) -> float:
        """Per-text ms of the faithful recompute's first batch (the first 64 bank questions in bank order, one
        ``embed_texts`` call for the pooler, one ``encode`` call for mean pooling); with ``per-shape`` timing, the
        timing this process already made of a batch of the same shape and pooling (see the module docstring)."""
        batch = [p[0] for p in self.pairs[:64]]
        if not batch:
            return 0.0
        if self.pooling == "pooler":
            from agentfly_sim.embedding import MEMORY_MAX_LENGTH, embed_texts

            tok, model = _np_model()
            padded = tok(batch, padding=True, truncation=True, max_length=MEMORY_MAX_LENGTH)["input_ids"]
            shape = (len(batch), len(padded[0]))

            def warm() -> None:
                embed_texts(batch[:2], tok, model)

            def timed() -> None:
                embed_texts(batch, tok, model)
        else:
            from harness.embedding import get_encoder

            enc = get_encoder("minilm-mean")
            enc = enc.uncached() if hasattr(enc, "uncached") else enc  # the store's encoder: time the model
            # sentence-transformers pads one batch of 64 to its longest text, cut at the model's max_seq_length
            st = enc.model
            padded = st.tokenizer(batch, padding=True, truncation=True, max_length=st.max_seq_length)["input_ids"]
            shape = (len(batch), len(padded[0]))

            def warm() -> None:
                enc.encode(batch[:2])

            def timed() -> None:
                enc.encode(batch)
        self.timed_shape = shape
        key = (self.pooling, *shape)
        if self.recompute_timing == "per-shape" and key in _TIMED_BATCHES:
            self.timing_reused = True
            return _TIMED_BATCHES[key]
        warm()  # first-call warm-up is not part of the steady per-text cost
        started = time.perf_counter()
        timed()
        per_text = (time.perf_counter() - started) * 1000 / len(batch)
        _TIMED_BATCHES[key] = per_text
        return per_text

    def _last_cases(self, driver: Any, probe: Probe) -> list[dict[str, Any]]:
        return self._recorded.get(driver.cfg.memory_top_k, [])

    def _meta(self, k: int) -> dict[str, Any]:
        n = len(self.pairs)
        return {"pooling": self.pooling, "faithful": self.pooling == "pooler", "bank_size": n,
                "recompute_timing": self.recompute_timing,
                "cached_texts_per_probe": 1, "faithful_texts_per_probe": n + 1,
                "per_text_encode_ms": round(self.per_text_ms, 4),
                "faithful_recompute_ms": round((n + 1) * self.per_text_ms, 3)}

    def stored(self) -> frozenset[str]:
        if not self.bank_path.exists():
            return frozenset()
        items = load_jsonl(self.bank_path)
        return ids_in_text("\n".join(str(i.get("question", "")) for i in items if isinstance(i, dict)),
                           self.snippets)


class _Recording:
    """Wraps a selector: ranks once per question at the largest K and hands each driver its top-k prefix
    (``torch.topk`` is sorted, so top-4 is the first four of top-8), and keeps the cases it returned per top-k
    (the NP driver does not hand them back)."""

    def __init__(self, selector: Any, sink: dict[int, list[dict[str, Any]]], max_k: int) -> None:
        self.selector = selector
        self.sink = sink
        self.max_k = max_k
        self._last: tuple[str, int, list[dict[str, Any]]] | None = None

    def retrieve(self, task: str, pairs: list[tuple[Any, ...]], device_str: str = "auto", top_k: int = 5,
                 max_length: int = 256) -> list[dict[str, Any]]:
        key = (task, id(pairs))
        if self._last is None or self._last[:2] != key:
            ranked = self.selector.retrieve(task, pairs, device_str, max(top_k, self.max_k), max_length)
            self._last = (*key, ranked)
        cases = [dict(c) for c in self._last[2][:top_k]]
        self.sink[top_k] = cases
        return cases


class _MemoRetriever:
    """Scores the pool once per question for all K drivers (each driver sorts and cuts the same scores)."""

    def __init__(self, retriever: Any) -> None:
        self.retriever = retriever
        self._last: tuple[str, int, list[dict[str, Any]]] | None = None

    def retrieve(self, query: str, pool: Any, metadata: Any) -> list[dict[str, Any]]:
        key = (query, id(pool))
        if self._last is None or self._last[:2] != key:
            self._last = (*key, self.retriever.retrieve(query, pool, metadata))
        return [dict(r) for r in self._last[2]]


class PMArm(_BankArm):
    """AgentFly's parametric memory with a classifier trained on LoCoMo evidence: rows ``pm@K``.

    With ``ctx.pm_model`` (a :func:`train_pm_model` folder: LongMemEval, trained once per run on questions disjoint
    from the evaluated ones) the arm loads that classifier, trains nothing and ignores ``ctx.others``; its rows'
    meta then carry that model's training description (``pm_model_loaded`` true). Without it, as follows.

    **Non-faithful labelling (AGF-35).** AgentFly trains its case classifier on its own judge outcomes, which say
    whether a retrieved plan led to a correct answer, never whether a case is relevant to a query. This arm
    instead gives the same trainer the supervision those labels never provide: for every question of the *other*
    conversations (``ctx.others``; leave this conversation out) with valid evidence, categories 1-4, one positive
    pair ``(question, evidence turn)`` per evidence turn and ``negatives`` (2; 1 with ``ctx.quick``) negative pairs
    per positive, ``(question, another turn of that conversation)``, sampled with ``random.Random(ctx.seed)``
    (``ctx.quick`` also keeps only the first 20 questions per conversation). Case texts are the same dated lines
    the bank holds. Pairs are written with ``bank.pair_row`` (``truth_label`` = relevance) to
    ``memory/pairs.jsonl``. Leaving ``ctx.others`` empty is an error (``ValueError``), not a silent fallback.

    Training: ``training.train`` with ``freeze_backbone=True`` (backbone CLS vectors computed once per distinct
    text, only the head learns), ``group_by_query=True`` (no question on both sides of the validation split, so the
    reported AUC is not the AGF-35 leakage), ``lr=1e-3`` (a head trained from scratch; the upstream 2e-5 is for
    fine-tuning the whole model), ``epochs`` 20 (1 with ``ctx.quick``; with the backbone frozen an epoch costs only
    the head's steps, and on LoCoMo the validation AUC stops rising by 20: 0.67 at 3, 0.83 at 20 and at 60 epochs,
    conv-30 with two others), batch 32, evaluation at epoch ends only, seed ``ctx.seed``, on one torch thread. The
    training wall time, pair counts and final validation metrics go in every row's meta.

    Serving is the PM driver's own path: ``load_pool`` on the bank (the serving text adds the ``[PLAN]`` line the
    training text lacks: AGF-24, kept), ``CaseRetriever`` on ``last.pt`` with ``cache_case_vectors=True`` (the named
    option whose scores equal the whole-pool batch within 1e-5), stable descending sort, top K, and
    ``build_pm_prompt_from_cases``.
    """

    case_key = "case"
    name = "pm"

    def __init__(self, ctx: ArmContext, negatives: int = 2, epochs: int | None = None,
                 max_questions: int | None = None) -> None:
        super().__init__(ctx)
        self.rows = tuple(self._row_name(k) for k in self.k_values)
        self.negatives = 1 if ctx.quick else negatives
        self.epochs = epochs if epochs is not None else (1 if ctx.quick else 20)
        self.max_questions = max_questions if max_questions is not None else (20 if ctx.quick else None)
        self.pairs_path = self.memory_dir / "pairs.jsonl"
        self.train_info: dict[str, Any] = {}

    def _row_name(self, k: int) -> str:
        return f"pm@{k}"

    def _row(self, case_text: str) -> dict[str, Any]:
        return pm_case_row(case_text, "", True)

    def training_pairs(self) -> list[dict[str, Any]]:
        """Relevance pairs from ``ctx.others`` (see the class docstring)."""
        return pm_training_pairs(self.ctx.others, seed=self.ctx.seed, negatives=self.negatives,
                                 max_questions=self.max_questions)

    def _checkpoint(self) -> str:
        """The classifier to serve: ``ctx.pm_model``'s when given, else one trained now on ``ctx.others``."""
        if self.ctx.pm_model is not None:
            ckpt, info = load_pm_model(self.ctx.pm_model)
            trained_on = list(info.get("others") or [])
            self.train_info = {**{k: v for k, v in info.items() if k not in ("checkpoint", "others")},
                               "train_conversations": len(trained_on), "pm_model_loaded": True}
            return str(ckpt)
        rows = self.training_pairs()
        if not rows:
            raise ValueError("the PM arm needs training pairs: ctx.others holds no other conversation with "
                             "evidence-annotated questions (leave-one-conversation-out)")
        result, train_s = _train_classifier(rows, self.pairs_path, self.root / "ckpt", seed=self.ctx.seed,
                                            epochs=self.epochs)
        self.train_info = _train_info(LOCOMO_LABELLING, rows, result, train_s, self.epochs, self.negatives,
                                      [c.sample_id for c in self.ctx.others])
        return str(result.last_path)

    def _start(self) -> None:
        from agentfly_sim.classifier import CaseRetriever

        retriever = CaseRetriever(self._checkpoint(), cache_case_vectors=True)
        store = active()
        if store is not None:
            retriever.vector_encoder = _torch_vectors(store.pm_encoder(retriever))
        pool, meta = load_pool(self.bank_path)
        started = time.perf_counter()
        retriever.case_vectors(sorted(pool, key=len))  # warm the case-vector cache in length-sorted batches
        self.train_info["pool_encode_s"] = round(time.perf_counter() - started, 3)
        memo = _MemoRetriever(retriever)
        for k in self.k_values:
            driver = PMDriver(self.root / "client", self.planner, None, None, retriever=memo,
                              config=self._config(k))
            driver.pool, driver.meta = pool, meta
            self.drivers[k] = driver

    def _meta(self, k: int) -> dict[str, Any]:
        return {"faithful": False, **self.train_info}

    def stored(self) -> frozenset[str]:
        if not self.bank_path.exists():
            return frozenset()
        _texts, meta = load_pool(self.bank_path)
        return ids_in_text("\n".join(str(m.get("case", "")) for m in meta), self.snippets)
