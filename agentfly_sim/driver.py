"""NP and PM driver loops (``client/no_parametric_cbr.py``, ``client/parametric_memory_cbr.py``; spec §6).

Per question (spec §6.1, MUST): skip if in ``finished`` (read **once** at startup, AGF-29) -> ``process_query``
-> judge (never raises; failure -> ``incorrect``, AGF-21/AGF-31) -> **append the result record** -> PM: one pair per
retrieved case (AGF-09) -> append the case (both outcome signs, AGF-01) -> reload the bank text (never weights,
AGF-03). Nothing is transactional: a crash after the result append loses the case for good (AGF-38); a missing
``result/`` directory blocks all admission (AGF-27); a bare bank filename fails ``makedirs("")`` (AGF-06).

Fault hook: ``fault_hook(step)`` is called immediately before each durable write and at each failure point of
spec §6.8, with these step names:

- ``agentfly.process_query`` inside ``process_query`` (after the question and examples enter the history);
- ``agentfly.judge`` inside the judge wrapper;
- ``agentfly.result_write`` before the result append (a ``TornWrite`` makes it write half the line, then crash);
- ``agentfly.after_result_write`` right after the result append (crash-only, AGF-38);
- ``agentfly.pairs_write`` (PM) before the pair append;
- ``agentfly.case_write`` before the case append;
- ``agentfly.reload`` before the bank reload.

After each append the driver also reports ``hook.after_write(step, path, offset)`` when the hook has that
attribute (``agentfly_sim.durable``; the crash-point explorer tears or crashes there). ``DriverConfig(durability=
"journal")`` is the hardened option that makes a question's appends one redo-logged unit (``agentfly_sim.journal``).

An ``Exception`` from the hook is handled as upstream handles any exception at that point; a ``BaseException``
such as ``SimulatedCrash`` stops the run with the files as they are.

The executor loop is bounded (spec §6.7, AGF-28): ``EXEC_EMPTY_REPLY_LIMIT`` consecutive empty replies or
``EXEC_MAX_CALLS_PER_TASK`` calls raise ``ExecutorStalled``, which no per-question handler catches.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .agents import call_with_retries
from .bank import (
    append_jsonl,
    dumps_line,
    extract_pairs,
    load_dataset,
    load_jsonl,
    load_pool,
    np_case_row,
    pair_row,
    pm_case_row,
    read_finished,
)
from .durable import after_write, file_size
from .errors import STEP_PREFIX, ExecutorStalled, SimulatedCrash, TornWrite
from .history import (
    MAX_CTX,
    MAX_TURNS_MEMORY,
    HeuristicTokenCounter,
    SharedHistory,
    TokenCounter,
    trim_messages,
)
from .journal import QuestionJournal, journal_path
from .prompts import (
    EXECUTOR_SYSTEM,
    PLANNER_SYSTEM,
    build_judge_prompt,
    build_np_prompt_from_cases,
    build_pm_prompt_from_cases,
    ensure_list,
    parse_judge_reply,
    strip_fences,
)
from .workspace import TOOL_SCHEMAS, WorkspaceTools

MAX_CYCLES = 3
EXEC_EMPTY_REPLY_LIMIT = 3
EXEC_MAX_CALLS_PER_TASK = 64
JUDGE_MAX_TOKENS = 300
META_MODEL = "gpt-4.1"
EXEC_MODEL = "o4-mini"
JUDGE_MODEL = "gpt-4o-mini"
ANSWER_PREFIX = "FINAL ANSWER:"

NP_DEFAULT_MEMORY = "../memory/dummy_memo.jsonl"
PM_DEFAULT_MEMORY = "../memory/memory.jsonl"
DEFAULT_DATASET = "../data/deepresearcher.jsonl"
NP_RESULT = "../result/result_round_0.jsonl"
PM_RESULT = "../result/result_parametric.jsonl"
DEFAULT_TRAINING_DATA = "../memory/training_data.jsonl"
DEFAULT_RETRIEVER_MODEL = "../memory/ckpts/retriever/best.pt"


def tool_result_text(text: str) -> str:
    """``str()`` of the MCP content list as the simulator renders it (spec §2.4, simulator choice)."""
    return "[TextContent(type='text', text=" + repr(text) + ")]"


def cap_tokens(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """Longest prefix of ``text`` with at most ``max_tokens`` tokens (the judge's ``max_tokens=300``, AGF-31)."""
    if counter.count(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


@dataclass
class DriverConfig:
    """Upstream settings (env vars of spec §1.4), resolved against ``client_dir``. ``None`` = the driver default."""

    memory_jsonl_path: str | None = None
    memory_key_field: str = "question"
    memory_value_field: str = "plan"
    memory_top_k: int = 8
    max_pos_examples: int | None = None
    max_neg_examples: int | None = None
    memory_device: str = "auto"
    memory_max_length: int = 256
    training_data_path: str = DEFAULT_TRAINING_DATA
    retriever_model_path: str = DEFAULT_RETRIEVER_MODEL
    dataset_path: str = DEFAULT_DATASET
    result_path: str | None = None
    create_result_dir: bool = False
    max_ctx: int = MAX_CTX
    np_model_device: str = "auto"
    np_cached_index: bool = False
    cuda_available: bool | None = None
    pm_model_name: str | None = None
    pm_cache_case_vectors: bool = False
    limit: int | None = None
    durability: str = "faithful"  # hardened option: "journal" (agentfly_sim.journal; REL-03..05, REL-11)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: Any) -> DriverConfig:
        """Read the upstream environment variables (``MEMORY_JSONL_PATH``, ``MEMORY_TOP_K``, ...)."""
        env = dict(os.environ if environ is None else environ)
        cfg = cls(**overrides)
        if "MEMORY_JSONL_PATH" in env:
            cfg.memory_jsonl_path = env["MEMORY_JSONL_PATH"]
        cfg.memory_key_field = env.get("MEMORY_KEY_FIELD", cfg.memory_key_field)
        cfg.memory_value_field = env.get("MEMORY_VALUE_FIELD", cfg.memory_value_field)
        cfg.memory_top_k = int(env.get("MEMORY_TOP_K", cfg.memory_top_k))
        if "MEMORY_MAX_POS_EXAMPLES" in env:
            cfg.max_pos_examples = int(env["MEMORY_MAX_POS_EXAMPLES"])
        if "MEMORY_MAX_NEG_EXAMPLES" in env:
            cfg.max_neg_examples = int(env["MEMORY_MAX_NEG_EXAMPLES"])
        cfg.memory_device = env.get("MEMORY_DEVICE", cfg.memory_device)
        cfg.memory_max_length = int(env.get("MEMORY_MAX_LENGTH", cfg.memory_max_length))
        cfg.training_data_path = env.get("TRAINING_DATA_PATH", cfg.training_data_path)
        cfg.retriever_model_path = env.get("RETRIEVER_MODEL_PATH", cfg.retriever_model_path)
        return cfg


@dataclass
class JudgeResult:
    judgement: str
    rationale: str


@dataclass
class QueryRecord:
    """Upstream ``QueryRecord``; ``retrieved_cases`` is PM-only (``None`` for NP)."""

    task_id: Any
    query: str
    model_output: str
    plan_json: str
    meta_trace: list[dict[str, Any]] = field(default_factory=list)
    executor_trace: list[dict[str, Any]] = field(default_factory=list)
    tool_history: list[dict[str, Any]] = field(default_factory=list)
    retrieved_cases: list[dict[str, Any]] | None = None


@dataclass
class RunSummary:
    processed: int = 0
    skipped: int = 0
    errors: int = 0
    result_path: str = ""
    memory_path: str = ""
    training_data_path: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)


class _Driver(ABC):
    kind = "base"
    default_memory = ""
    default_result = ""
    trace_key = "input"

    def __init__(self, client_dir: str | os.PathLike[str], planner: Any, executor: Any, judge: Any, *,
                 config: DriverConfig | None = None, tools: dict[str, Callable[..., str]] | None = None,
                 tool_schemas: list[dict[str, Any]] | None = None, fault_hook: Callable[[str], None] | None = None,
                 token_counter: TokenCounter | None = None, sleep: Callable[[float], None] | None = None,
                 out: TextIO | None = None, on_event: Callable[[dict[str, Any]], None] | None = None,
                 on_question: Callable[[int, int, str], None] | None = None):
        self.client_dir = Path(client_dir)
        self.cfg = config or DriverConfig()
        self.planner, self.executor, self.judge = planner, executor, judge
        self.tools = tools if tools is not None else WorkspaceTools().as_tools()
        self.tool_schemas = tool_schemas if tool_schemas is not None else TOOL_SCHEMAS
        self.fault_hook = fault_hook
        self.counter = token_counter or HeuristicTokenCounter()
        self.sleep = sleep
        self.out = out if out is not None else sys.stdout
        self.on_event = on_event
        self.on_question = on_question
        self.logger = logging.getLogger(f"agentfly_sim.{self.kind}")
        self.log: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.memory_path_cfg = self.cfg.memory_jsonl_path or self.default_memory
        self.result_path_cfg = self.cfg.result_path or self.default_result
        self.history = SharedHistory()
        self.gt_map: dict[str, Any] = {}
        self._current_task_id: Any = None
        if self.cfg.durability not in ("faithful", "journal"):
            raise ValueError(f"durability must be 'faithful' or 'journal', got {self.cfg.durability!r}")
        self.journal: QuestionJournal | None = None

    # ------------------------------------------------------------------------------------------ plumbing
    def resolve(self, p: str) -> str:
        return p if os.path.isabs(p) else os.path.normpath(str(self.client_dir / p))

    def _makedirs_for(self, configured: str) -> None:
        """``os.makedirs(os.path.dirname(path as configured), exist_ok=True)``: a bare filename fails (AGF-06)."""
        d = os.path.dirname(configured)
        os.makedirs(self.resolve(d) if d else d, exist_ok=True)

    def _fault(self, point: str) -> None:
        if self.fault_hook is not None:
            self.fault_hook(STEP_PREFIX + point)

    def _print(self, text: str) -> None:
        self.log.append(text)
        print(text, file=self.out)

    def _warn(self, msg: str, *args: Any) -> None:
        self.log.append("WARNING " + (msg % args if args else msg))
        self.logger.warning(msg, *args)

    def _info(self, msg: str, *args: Any) -> None:
        self.log.append("INFO " + (msg % args if args else msg))
        self.logger.info(msg, *args)

    @property
    def memory_path(self) -> str:
        return self.resolve(self.memory_path_cfg)

    @property
    def result_path(self) -> str:
        return self.resolve(self.result_path_cfg)

    def _hook(self, agent: Any, name: str, *args: Any) -> None:
        fn = getattr(agent, name, None)
        if callable(fn):
            fn(*args)

    # ------------------------------------------------------------------------------------------ judge
    def llm_judge(self, question: str, ground_truth: Any, prediction: str) -> JudgeResult:
        """Never raises: any failure -> ``incorrect`` with ``judge failed: {e}`` (AGF-21, AGF-31, AGF-33)."""
        try:
            self._fault("judge")
            prompt = build_judge_prompt(question, ensure_list(ground_truth), prediction)
            text = self.judge.complete(prompt, max_tokens=JUDGE_MAX_TOKENS)
            text = cap_tokens(text or "", JUDGE_MAX_TOKENS, self.counter)
            judgement, rationale = parse_judge_reply(text)
            return JudgeResult(judgement, rationale)
        except Exception as e:  # noqa: BLE001
            self._warn("LLM judge failed: %s", e)
            return JudgeResult("incorrect", f"judge failed: {e}")

    # ------------------------------------------------------------------------------------------ query
    @abstractmethod
    def _examples(self, q: str) -> tuple[str | None, list[dict[str, Any]] | None]:
        """The example prompt (or None/"") and, for PM, the retrieved cases."""

    def _start_history(self) -> None:
        """NP resets the history per query; PM does not (AGF-20)."""
        return None

    def process_query(self, q: str, task_id: Any = "interactive") -> QueryRecord:
        """Spec §6.2: examples as a second user message, up to ``MAX_CYCLES`` planner cycles, executor per step."""
        self._start_history()
        self._hook(self.planner, "begin_question", q, self.gt_map.get(q))
        self._hook(self.executor, "begin_question", q, self.gt_map.get(q))
        self.history.add("user", q)
        mem, retrieved = self._examples(q)
        if mem:
            self.history.add("user", mem)
        self._fault("process_query")
        system = {"role": "system", "content": PLANNER_SYSTEM}
        planner_msgs = [system, *self.history.snapshot()]
        latest_plan = ""
        meta_trace: list[dict[str, Any]] = []
        executor_trace: list[dict[str, Any]] = []
        tool_history: list[dict[str, Any]] = []
        content = ""
        for cycle in range(MAX_CYCLES):
            msgs = planner_msgs
            content = call_with_retries(lambda msgs=msgs: self.planner.complete(msgs), sleep=self.sleep) or ""
            meta_trace.append({"cycle": cycle, self.trace_key: [m["content"] for m in planner_msgs],
                               "output": content})
            self.history.add("assistant", content)
            if content.startswith(ANSWER_PREFIX):
                final = content[len(ANSWER_PREFIX):].strip()
                break
            try:
                s = strip_fences(content)
                json.loads(s)["plan"]
                latest_plan = s
            except Exception as e:  # noqa: BLE001
                final = f"[planner error] {e}: {content}"
                break
            for task in json.loads(latest_plan)["plan"]:
                desc = f"Task {task['id']}: {task['description']}"
                self._run_task(q, task, desc, executor_trace, tool_history)
            planner_msgs = [system, *self.history.snapshot()]
        else:
            final = content.strip()
        self.history.clear()
        return QueryRecord(task_id=task_id, query=q, model_output=final, plan_json=latest_plan,
                           meta_trace=meta_trace, executor_trace=executor_trace, tool_history=tool_history,
                           retrieved_cases=retrieved)

    def _stall(self, q: str, task_id: Any, step_id: Any, empty: int, calls: int) -> None:
        event = {"event": "executor_stalled", "question": q, "task_id": task_id, "plan_step_id": step_id,
                 "empty_replies": empty, "calls": calls}
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)
        raise ExecutorStalled(event)

    def _run_task(self, q: str, task: dict[str, Any], desc: str, executor_trace: list[dict[str, Any]],
                  tool_history: list[dict[str, Any]]) -> None:
        self._hook(self.executor, "begin_task", q, task["id"])
        exec_msgs: list[dict[str, Any]] = [{"role": "system", "content": EXECUTOR_SYSTEM},
                                           *self.history.snapshot(), {"role": "user", "content": desc}]
        empty = calls = 0
        while True:
            exec_msgs = trim_messages(exec_msgs, self.cfg.max_ctx, self.counter)
            msgs = exec_msgs
            r = call_with_retries(lambda msgs=msgs: self.executor.complete(msgs, self.tool_schemas), sleep=self.sleep)
            calls += 1
            r = r or {}
            text = r.get("content")
            if text:
                executor_trace.append({"task_id": task["id"], "input": desc, "output": str(text)})
                exec_msgs.append({"role": "assistant", "content": text})
                self.history.add("assistant", f"Task {task['id']} result: {text}")
                return
            tool_calls = r.get("tool_calls") or []
            empty = 0 if tool_calls else empty + 1
            for call in tool_calls:
                fn = call["function"]
                args = json.loads(fn.get("arguments") or "{}")
                result = tool_result_text(self.tools[fn["name"]](**args))
                tool_history.append({"tool": fn["name"], "arguments": args, "result": result})
                exec_msgs += [{"role": "assistant", "content": None, "tool_calls": [call]},
                              {"role": "tool", "tool_call_id": call.get("id"), "name": fn["name"], "content": result}]
            if empty >= EXEC_EMPTY_REPLY_LIMIT or calls >= EXEC_MAX_CALLS_PER_TASK:
                self._stall(q, self._current_task_id, task["id"], empty, calls)

    # ------------------------------------------------------------------------------------------ writes
    def _append_result(self, record: dict[str, Any]) -> None:
        path = self.result_path
        line = dumps_line(record, default=str)
        try:
            self._fault("result_write")
        except TornWrite:
            with open(path, "a", encoding="utf-8") as f:
                f.write(line[: len(line) // 2])
            raise SimulatedCrash("torn result write") from None
        offset = file_size(path)
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)
        after_write(self.fault_hook, STEP_PREFIX + "result_write", path, offset)
        self._fault("after_result_write")

    def _commit_journalled(self, q: str, result: dict[str, Any], pairs: list[str], case_line: str) -> bool:
        """Journal mode (``durability="journal"``): result, pairs and case as one redo-logged unit, under the
        journal lock, skipped when another driver finished ``q`` meanwhile. Returns False when skipped."""
        assert self.journal is not None
        targets = [self.cfg.training_data_path] if pairs else []
        for configured in [*targets, self.memory_path_cfg]:
            self._makedirs_for(configured)
        writes = [(self.result_path, dumps_line(result, default=str), STEP_PREFIX + "result_write")]
        if pairs:
            writes.append((self.resolve(self.cfg.training_data_path), "".join(pairs), STEP_PREFIX + "pairs_write"))
        writes.append((self.memory_path, case_line, STEP_PREFIX + "case_write"))
        with self.journal.locked():
            if q in read_finished(self.result_path):
                self._info("Task %s finished by another driver, not written again", q)
                return False
            self.journal.commit(q, writes)
        return True

    def _record_dict(self, rec: QueryRecord, j: JudgeResult) -> dict[str, Any]:
        d: dict[str, Any] = {"task_id": rec.task_id, "query": rec.query, "model_output": rec.model_output,
                             "plan_json": rec.plan_json, "meta_trace": rec.meta_trace,
                             "executor_trace": rec.executor_trace, "tool_history": rec.tool_history}
        if rec.retrieved_cases is not None:
            d["retrieved_cases"] = rec.retrieved_cases
        d.update({"question": rec.query, "plan": rec.plan_json, "ground_truth": self.gt_map.get(rec.query),
                  "pred_answer": rec.model_output, "judgement": j.judgement, "rationale": j.rationale})
        return d

    # ------------------------------------------------------------------------------------------ run
    def _startup_bank(self) -> None:
        """NP loads its bank before the loop (spec §6.1 step 5); PM loads after tool connection (step 6)."""
        return None

    def _connect_tools(self) -> None:
        """Tool connection (step 6); PM then calls ``_load_memory``."""
        return None

    @abstractmethod
    def _handle(self, task_id: int, q: str, summary: RunSummary) -> None:
        """Steps 2-8 of spec §6.1 with the driver's own error handling."""

    def run(self) -> RunSummary:
        """The whole benchmark loop (spec §6.1)."""
        dataset = load_dataset(self.resolve(self.cfg.dataset_path))
        self.gt_map = dataset.gt_map
        questions = dataset.questions if self.cfg.limit is None else dataset.questions[: self.cfg.limit]
        summary = RunSummary(result_path=self.result_path, memory_path=self.memory_path,
                             training_data_path=self.resolve(self.cfg.training_data_path) if self.kind == "pm"
                             else None, events=self.events)
        if not questions:
            self._print("⚠️  query_list is empty – add questions to process.")
            return summary
        if self.cfg.create_result_dir:
            os.makedirs(os.path.dirname(self.result_path), exist_ok=True)
        if self.cfg.durability == "journal":
            self.journal = QuestionJournal(journal_path(self.result_path), self.fault_hook)
            if self.journal.recover():
                self._info("Completed a half-written question from %s", self.journal.path)
        finished = read_finished(self.result_path)
        self._startup_bank()
        self._connect_tools()
        for task_id, q in enumerate(questions):
            if self.on_question is not None:
                self.on_question(task_id, len(questions), q)
            if q in finished:
                summary.skipped += 1
                self._skip(q)
                continue
            self._current_task_id = task_id
            self._handle(task_id, q, summary)
        return summary

    def _skip(self, q: str) -> None:
        self._print(f"Task {q} already finished, skipping...")


class NPDriver(_Driver):
    """Nonparametric driver: embedding selector over ``question``/``plan``/``reward`` rows (spec §3.6, §6)."""

    kind = "np"
    default_memory = NP_DEFAULT_MEMORY
    default_result = NP_RESULT
    trace_key = "input"

    def __init__(self, client_dir: str | os.PathLike[str], planner: Any, executor: Any, judge: Any, *,
                 selector: Any = None, **kwargs: Any):
        super().__init__(client_dir, planner, executor, judge, **kwargs)
        self.history = SharedHistory(cap=MAX_TURNS_MEMORY)
        if selector is None:
            from .embedding import NpSelector

            selector = NpSelector(self.cfg.np_model_device, cuda_available=self.cfg.cuda_available,
                                  cached=self.cfg.np_cached_index)
        self.selector = selector
        self.items: list[Any] = []
        self.pairs: list[tuple[Any, ...]] = []

    def _startup_bank(self) -> None:
        path = self.memory_path
        if not os.path.exists(path):
            self._warn("MEMORY_JSONL_PATH not found: %s", path)
            return
        try:
            self.items = load_jsonl(path)
            self.pairs = extract_pairs(self.items, self.cfg.memory_key_field, self.cfg.memory_value_field)
            self._info("Loaded memory JSONL (%d items) from %s", len(self.items), path)
        except Exception as e:  # noqa: BLE001
            self._warn("Failed to load memory: %s", e)

    def _start_history(self) -> None:
        self.history.clear()

    def _memory_prompt_for(self, q: str) -> str | None:
        if not self.pairs:
            return None
        try:
            cases = self.selector.retrieve(q, self.pairs, self.cfg.memory_device, self.cfg.memory_top_k,
                                           self.cfg.memory_max_length)
            return build_np_prompt_from_cases(q, cases, self.items, self.cfg.max_pos_examples,
                                              self.cfg.max_neg_examples)
        except Exception as e:  # noqa: BLE001
            self._warn("Memory retrieve failed: %s", e)
            return None

    def _examples(self, q: str) -> tuple[str | None, list[dict[str, Any]] | None]:
        return self._memory_prompt_for(q), None

    def _handle(self, task_id: int, q: str, summary: RunSummary) -> None:
        try:
            rec = self.process_query(q, task_id)
            j = self.llm_judge(q, self.gt_map.get(q), rec.model_output)
            reward = 1 if j.judgement == "correct" else 0
            self._print(f"\nFINAL ANSWER: {rec.model_output}")
            record = self._record_dict(rec, j)
            record["reward"] = reward
            if self.journal is not None:
                if self._commit_journalled(q, record, [], dumps_line(np_case_row(q, rec.plan_json or "", reward))):
                    summary.processed += 1
                    self._fault("reload")
                    self.items = load_jsonl(self.memory_path)
                    self.pairs = extract_pairs(self.items, self.cfg.memory_key_field, self.cfg.memory_value_field)
                return
            self._append_result(record)
            summary.processed += 1
        except ExecutorStalled:
            raise
        except Exception as e:  # noqa: BLE001
            summary.errors += 1
            self._print(f"[ERROR]: {e}")
            return
        try:
            self._makedirs_for(self.memory_path_cfg)
            self._fault("case_write")
            offset = file_size(self.memory_path)
            append_jsonl(self.memory_path, np_case_row(q, rec.plan_json or "", reward))
            after_write(self.fault_hook, STEP_PREFIX + "case_write", self.memory_path, offset)
            self._fault("reload")
            self.items = load_jsonl(self.memory_path)
            self.pairs = extract_pairs(self.items, self.cfg.memory_key_field, self.cfg.memory_value_field)
        except Exception as e:  # noqa: BLE001
            self._warn("Failed to write memory file: %s", e)


class PMDriver(_Driver):
    """Parametric driver: classifier selector over ``case``/``plan``/``case_label`` rows (spec §4.4, §6)."""

    kind = "pm"
    default_memory = PM_DEFAULT_MEMORY
    default_result = PM_RESULT
    trace_key = "input_messages"

    def __init__(self, client_dir: str | os.PathLike[str], planner: Any, executor: Any, judge: Any, *,
                 retriever: Any = None, retriever_factory: Callable[[str], Any] | None = None, **kwargs: Any):
        super().__init__(client_dir, planner, executor, judge, **kwargs)
        self.pool: list[str] | None = None
        self.meta: list[dict[str, Any]] | None = None
        self.load_pool: Callable[..., Any] | None = load_pool
        self.retriever: Any = None
        try:
            if retriever is not None:
                self.retriever = retriever
            else:
                factory = retriever_factory or self._default_factory
                self.retriever = factory(self.resolve(self.cfg.retriever_model_path))
        except Exception as e:  # noqa: BLE001 - any failure disables retrieval (spec §4.4)
            self.retriever = None
            self.load_pool = None
            self._warn("Memory retriever not available: %s", e)

    def _default_factory(self, path: str) -> Any:
        from .classifier import CaseRetriever

        return CaseRetriever(path, self.cfg.pm_model_name, cache_case_vectors=self.cfg.pm_cache_case_vectors)

    def _connect_tools(self) -> None:
        self._load_memory()

    def _load_memory(self) -> None:
        """Runs only with a retriever and an existing file; any exception sets pool and metadata to None; a
        missing file leaves the stale pool in place (AGF-07, AGF-16)."""
        if not (self.retriever and self.load_pool and os.path.exists(self.memory_path)):
            return
        try:
            self._fault("reload")
            self.pool, self.meta = self.load_pool(self.memory_path)
            self._info("Loaded %d memory entries", len(self.pool))
        except Exception as e:  # noqa: BLE001
            self.pool, self.meta = None, None
            self._warn("Failed to load memory: %s", e)

    def _retrieve_cases(self, q: str) -> list[dict[str, Any]]:
        """Score every case, stable descending sort, ``[:MEMORY_TOP_K]`` (negative k drops the last |k|)."""
        if not self.retriever or not self.pool:
            return []
        try:
            results = self.retriever.retrieve(q, self.pool, self.meta)
            results = sorted(results, key=lambda r: r["score"], reverse=True)
            return results[: self.cfg.memory_top_k]
        except Exception as e:  # noqa: BLE001
            self._warn("Failed to retrieve cases: %s", e)
            return []

    def _examples(self, q: str) -> tuple[str | None, list[dict[str, Any]] | None]:
        retrieved = self._retrieve_cases(q)
        mem = build_pm_prompt_from_cases(q, retrieved, self.cfg.max_pos_examples,
                                         self.cfg.max_neg_examples) if retrieved else ""
        return mem, retrieved

    def _skip(self, q: str) -> None:
        self._info("Task %s already finished, skipping...", q)

    def _handle(self, task_id: int, q: str, summary: RunSummary) -> None:
        try:
            rec = self.process_query(q, str(task_id))
            j = self.llm_judge(q, self.gt_map.get(q), rec.model_output)
            is_correct = j.judgement == "correct"
            self._info("\nFINAL ANSWER: %s", rec.model_output)
            if self.journal is not None:
                pairs = [dumps_line(pair_row(q, case, is_correct)) for case in rec.retrieved_cases or []]
                if self._commit_journalled(q, self._record_dict(rec, j), pairs,
                                           dumps_line(pm_case_row(q, rec.plan_json or "", is_correct))):
                    summary.processed += 1
                    self._load_memory()
                return
            self._append_result(self._record_dict(rec, j))
            summary.processed += 1
            if rec.retrieved_cases:
                self._makedirs_for(self.cfg.training_data_path)
                self._fault("pairs_write")
                pairs_path = self.resolve(self.cfg.training_data_path)
                offset = file_size(pairs_path)
                with open(pairs_path, "a", encoding="utf-8") as f:
                    for case in rec.retrieved_cases:
                        f.write(dumps_line(pair_row(q, case, is_correct)))
                after_write(self.fault_hook, STEP_PREFIX + "pairs_write", pairs_path, offset)
            self._makedirs_for(self.memory_path_cfg)
            self._fault("case_write")
            offset = file_size(self.memory_path)
            append_jsonl(self.memory_path, pm_case_row(q, rec.plan_json or "", is_correct))
            after_write(self.fault_hook, STEP_PREFIX + "case_write", self.memory_path, offset)
            self._load_memory()
        except ExecutorStalled:
            raise
        except Exception as e:  # noqa: BLE001
            summary.errors += 1
            self.logger.error("Error processing query: %s", e)
            self.log.append(f"ERROR Error processing query: {e}")
