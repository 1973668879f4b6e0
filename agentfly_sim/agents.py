"""Pluggable planner / executor / judge agents (spec §1.1).

Protocols (what the drivers call):

- planner ``complete(messages) -> str | None``
- executor ``complete(messages, tools) -> {"content": str | None, "tool_calls": [...] | None}``
- judge ``complete(prompt, max_tokens=300) -> str``

Agents may also implement ``begin_question(question, ground_truth)`` and ``begin_task(question, step_id)``; the
drivers call these context hooks when present so that offline scripted agents can key their replies by question
text (never by a global counter, so a restarted run replays the same replies).

Two families live here:

- ``ScriptedPlanner`` / ``ScriptedExecutor`` / ``ScriptedJudge``: the offline, deterministic, seedable default
  policies of spec §1.1 (plain Python; randomness from ``random.Random(f"{seed}|{role}|{question}|...")``).
- ``PlannerModule`` / ``ExecutorModule`` / ``JudgeModule``: ``dspy.Module`` agents over an injected ``dspy.LM``
  (the real-LM seam). The harness builds offline defaults by wrapping the scripted policies in its ``ScriptedLM``;
  any other ``dspy.LM`` can replace them. This module never imports ``harness``.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ANSWER_SPLIT = "<|answer_split|>"
TRIES = 3


@dataclass
class Flaky:
    """A scripted reply that raises on the first ``n`` tries, then returns ``reply``."""

    n: int
    reply: Any
    tries: int = 0


def call_with_retries(fn: Callable[[], Any], tries: int = TRIES, sleep: Callable[[float], None] | None = None) -> Any:
    """At most ``tries`` attempts with exponential waits (x1, clamped to 2-10 s, injectable sleep, default none);
    the last error is re-raised (spec §1.1)."""
    last: BaseException | None = None
    for attempt in range(tries):
        try:
            return fn()
        except Exception as e:  # noqa: BLE001
            last = e
            if attempt + 1 < tries and sleep is not None:
                sleep(min(10.0, max(2.0, 2.0 ** attempt)))
    assert last is not None
    raise last


def _resolve(reply: Any) -> Any:
    if isinstance(reply, Flaky):
        if reply.tries < reply.n:
            reply.tries += 1
            raise RuntimeError(f"flaky agent failure {reply.tries}/{reply.n}")
        return reply.reply
    if isinstance(reply, BaseException):
        raise reply
    return reply


def first_alternative(ground_truth: Any) -> str:
    """First ``<|answer_split|>`` alternative of a ground truth (a simulation device handed to the planner)."""
    if isinstance(ground_truth, list):
        ground_truth = ground_truth[0] if ground_truth else ""
    return str(ground_truth if ground_truth is not None else "").split(ANSWER_SPLIT)[0]


_POS_EXAMPLE = re.compile(r"Positive Examples[^\n]*:\nExample 1:\nQuestion: [^\n]*\nPlan:\n((?:\S+\. [^\n]*\n?)+)")


class ScriptedPlanner:
    """Offline planner (spec §1.1). ``scripts[question]`` gives one reply per cycle (str, None, an exception, or
    ``Flaky``). Without a script: cycle 0 emits a plan of ``1 + rng.randrange(3)`` steps ``Step j: {q}``; cycle 1
    emits ``FINAL ANSWER: {first alternative}`` with probability ``p_correct`` else ``FINAL ANSWER: unknown``.
    ``copy_positive_plan=True`` (option) makes cycle 0 copy the first positive example's steps when delivered."""

    def __init__(self, scripts: dict[str, list[Any]] | None = None, ground_truths: dict[str, Any] | None = None,
                 p_correct: float = 0.5, seed: int = 0, copy_positive_plan: bool = False):
        self.scripts = {k: list(v) for k, v in (scripts or {}).items()}
        self.ground_truths = dict(ground_truths or {})
        self.p_correct = p_correct
        self.seed = seed
        self.copy_positive_plan = copy_positive_plan
        self.question: str | None = None
        self.cycle = 0
        self.calls: list[list[dict[str, Any]]] = []

    def begin_question(self, question: str, ground_truth: Any = None) -> None:
        self.question = question
        self.cycle = 0
        if ground_truth is not None:
            self.ground_truths.setdefault(question, ground_truth)

    def complete(self, messages: list[dict[str, Any]]) -> str | None:
        self.calls.append([dict(m) for m in messages])
        q = self.question or ""
        script = self.scripts.get(q)
        if script is not None:
            reply = _resolve(script[self.cycle]) if self.cycle < len(script) else "FINAL ANSWER: unknown"
        else:
            reply = self._default(q, messages)
        self.cycle += 1
        return reply

    def _default(self, q: str, messages: list[dict[str, Any]]) -> str:
        rng = random.Random(f"{self.seed}|planner|{q}|{self.cycle}")
        if self.cycle == 0:
            if self.copy_positive_plan:
                for m in messages:
                    hit = _POS_EXAMPLE.search(m.get("content") or "")
                    if hit:
                        steps = [ln.split(". ", 1)[1] for ln in hit.group(1).strip().split("\n")]
                        plan = [{"id": j, "description": d} for j, d in enumerate(steps, 1)]
                        return json.dumps({"plan": plan})
            n = 1 + rng.randrange(3)
            return json.dumps({"plan": [{"id": j, "description": f"Step {j}: {q}"} for j in range(1, n + 1)]})
        if rng.random() < self.p_correct:
            return f"FINAL ANSWER: {first_alternative(self.ground_truths.get(q))}"
        return "FINAL ANSWER: unknown"


class ScriptedExecutor:
    """Offline executor: ``scripts[(question, step_id)]`` is a list of replies consumed one per call (dicts
    ``{"content", "tool_calls"}``, exceptions or ``Flaky``); when exhausted it replies
    ``{"content": f"Result of task {id}", "tool_calls": None}``."""

    def __init__(self, scripts: dict[tuple[str, Any], list[Any]] | None = None,
                 default: Callable[[str, Any], dict[str, Any]] | None = None):
        self.scripts = {k: list(v) for k, v in (scripts or {}).items()}
        self.default = default
        self.question: str | None = None
        self.step_id: Any = None
        self.calls: list[list[dict[str, Any]]] = []

    def begin_question(self, question: str, ground_truth: Any = None) -> None:
        self.question = question

    def begin_task(self, question: str, step_id: Any) -> None:
        self.question = question
        self.step_id = step_id

    def complete(self, messages: list[dict[str, Any]], tools: Any = None) -> dict[str, Any]:
        self.calls.append([dict(m) for m in messages])
        queue = self.scripts.get((self.question or "", self.step_id))
        if queue:
            head = queue[0]
            reply = _resolve(head)
            queue.pop(0)
            return reply
        if self.default is not None:
            return self.default(self.question or "", self.step_id)
        return {"content": f"Result of task {self.step_id}", "tool_calls": None}


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    """An executor reply that calls one tool."""
    return {"content": None, "tool_calls": [{"id": call_id, "type": "function",
                                             "function": {"name": name, "arguments": json.dumps(arguments)}}]}


_J_QUESTION = re.compile(r"^Question: (.*)$", re.M)
_J_GT = re.compile(r"^Ground truth answers \(a semantic match with any one item suffices\): (.*)$", re.M)
_J_PRED = re.compile(r"^Predicted answer: (.*)$", re.M)


def normalize_answer(s: str) -> str:
    return " ".join(str(s).casefold().strip().split())


class ScriptedJudge:
    """Offline judge replying ``{"rationale", "judgement"}`` JSON text. Modes: ``match`` (default: normalised
    prediction equals a normalised ``<|answer_split|>`` alternative of some ground-truth item), ``correct``,
    ``incorrect``, ``seeded`` (correct with probability ``p``), ``raise``, ``malformed``, ``verbose`` (a rationale
    longer than 300 tokens, cut by the driver's reply cap -> invalid JSON)."""

    MODES = ("match", "correct", "incorrect", "seeded", "raise", "malformed", "verbose")

    def __init__(self, mode: str = "match", p: float = 0.5, seed: int = 0):
        if mode not in self.MODES:
            raise ValueError(f"unknown judge mode {mode!r}; expected one of {self.MODES}")
        self.mode, self.p, self.seed = mode, p, seed
        self.prompts: list[str] = []

    def complete(self, prompt: str, max_tokens: int = 300) -> str:
        self.prompts.append(prompt)
        q = (_J_QUESTION.search(prompt) or [None, ""])[1]
        pred = (_J_PRED.search(prompt) or [None, ""])[1]
        gt_m = _J_GT.search(prompt)
        gts = json.loads(gt_m.group(1)) if gt_m else []
        if self.mode == "raise":
            raise RuntimeError("scripted judge failure")
        if self.mode == "malformed":
            return "The answer looks right to me."
        if self.mode == "verbose":
            return json.dumps({"rationale": "because " * 400, "judgement": "correct"})
        if self.mode == "correct":
            ok = True
        elif self.mode == "incorrect":
            ok = False
        elif self.mode == "seeded":
            ok = random.Random(f"{self.seed}|judge|{q}|{pred}").random() < self.p
        else:
            alts = {normalize_answer(a) for g in gts for a in str(g).split(ANSWER_SPLIT)}
            ok = normalize_answer(pred) in alts
        verdict = "correct" if ok else "incorrect"
        return json.dumps({"rationale": f"scripted {self.mode} judge: {verdict}", "judgement": verdict})


def sleep_none(_: float) -> None:
    """The default retry sleep: none (upstream waits 2-10 s)."""


def real_sleep(seconds: float) -> None:
    time.sleep(seconds)
