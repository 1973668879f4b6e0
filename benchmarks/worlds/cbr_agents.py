"""Scripted agents and selectors that let agentfly_sim's NP/PM drivers run on the synthetic CBR world.

**The planner is a scripted policy, not a model.** Its success depends only on which examples the selector
delivered, so learning curves built with it show *mechanism* effects (what retrieval and admission deliver), not
model ability. The policy (``WorldPlanner``), deterministic per ``(seed, question)``:

1. cycle 0: parse the example prompt the driver delivered (agentfly spec 6.3 layout). If it holds a positive
   example whose question is about the same kind of entity as the query (a film for a film question: the surface
   check a model would make), **copy the first such example's plan** (its steps re-targeted at the query's
   entity), right or wrong; otherwise plan alone: the query family's canonical plan with probability ``p_base``, else a sibling family's
   plan (a plausible wrong plan). Negative examples are read but not used.
2. cycle 1: answer. The plan is *right* iff it decodes to the query's family. A right plan yields the ground truth
   with probability ``p_exec`` (execution can still fail); a wrong plan with probability ``p_lucky``. Otherwise the
   answer is ``unknown``.

The judge is agentfly_sim's ``ScriptedJudge("match")``, so the stored case label is the judged outcome: right plans
are mostly stored positive, wrong ones mostly negative, with natural label noise from ``p_exec``/``p_lucky``.

Selectors for the NP driver's ``selector=`` seam: ``OracleSelector`` (reads the hidden truth) and
``NoMemorySelector`` (delivers nothing, so the prompt is the trailer alone).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from typing import Any

from benchmarks.worlds.cbr import CBRWorld

_EXAMPLE = re.compile(r"^Example \d+:$")
_STEP = re.compile(r"^(\S+)\. (.*)$")


def parse_examples(text: str) -> list[dict[str, Any]]:
    """Examples of an agentfly example prompt: ``{"section": "pos"|"neg", "question", "steps", "raw"}``."""
    out: list[dict[str, Any]] = []
    section: str | None = None
    cur: dict[str, Any] | None = None
    for line in text.split("\n"):
        if line.startswith("Positive Examples"):
            section, cur = "pos", None
            continue
        if line.startswith("Negative Examples"):
            section, cur = "neg", None
            continue
        if _EXAMPLE.match(line) and section is not None:
            cur = {"section": section, "question": None, "steps": [], "raw": None}
            out.append(cur)
            continue
        if cur is None:
            continue
        if cur["question"] is None and line.startswith("Question: "):
            cur["question"] = line[len("Question: "):]
        elif line.startswith("Plan: "):
            cur["raw"] = line[len("Plan: "):]
        elif line == "Plan:":
            continue
        elif cur["raw"] is None and (m := _STEP.match(line)):
            cur["steps"].append(m.group(2))
        elif line.strip():
            cur = None  # the trailer or anything else ends the example
    return out


class WorldPlanner:
    """The scripted planner policy described in the module docstring (agentfly_sim planner protocol)."""

    def __init__(self, world: CBRWorld, lookup: dict[str, tuple[int, int]], *, seed: int = 0, p_base: float = 0.3,
                 p_exec: float = 0.9, p_lucky: float = 0.05):
        self.world = world
        self.lookup = lookup  # question text -> (family, entity)
        self.seed = seed
        self.p_base, self.p_exec, self.p_lucky = p_base, p_exec, p_lucky
        self.question: str | None = None
        self.ground_truth: Any = None
        self.stats = {"copied_positive": 0, "own_plan": 0, "delivered_pos": 0, "delivered_neg": 0,
                      "copied_right_plan": 0}

    def begin_question(self, question: str, ground_truth: Any = None) -> None:
        self.question, self.ground_truth = question, ground_truth

    def _rng(self, tag: str) -> random.Random:
        return random.Random(f"{self.seed}|world-planner|{tag}|{self.question}")

    def _plan_for(self, family: int | None, steps: Sequence[str] | None = None) -> str:
        qf, qe = self.lookup[self.question or ""]
        ent = self.world.entity(self.world.families[qf], qe)
        if family is not None:
            descs = [s.format(e=ent) for s in self.world.families[family].plan]
        else:  # an undecodable (e.g. truncated) example plan: copy its shape, the first step only
            descs = [self.world.families[qf].plan[0].format(e=ent)][: max(1, len(steps or []))]
        return json.dumps({"plan": [{"id": j + 1, "description": d} for j, d in enumerate(descs)]})

    def _first_plan(self, messages: list[dict[str, Any]]) -> str:
        q = self.question or ""
        qf, _ = self.lookup[q]
        examples: list[dict[str, Any]] = []
        for m in messages:
            if m.get("role") == "user" and m.get("content") and m["content"] != q:
                examples += parse_examples(m["content"])
        positives = [e for e in examples if e["section"] == "pos" and e["question"] is not None]
        self.stats["delivered_pos"] += len(positives)
        qtype = self.world.families[qf].entity_type
        positives = [e for e in positives if e["question"] in self.lookup
                     and self.world.families[self.lookup[e["question"]][0]].entity_type == qtype]
        self.stats["delivered_neg"] += sum(1 for e in examples if e["section"] == "neg")
        if positives:
            self.stats["copied_positive"] += 1
            first = positives[0]
            fam = self.world.decode_steps(first["steps"])
            self.stats["copied_right_plan"] += int(fam == qf)
            return self._plan_for(fam, first["steps"])
        self.stats["own_plan"] += 1
        rng = self._rng("own")
        if rng.random() < self.p_base:
            return self._plan_for(qf)
        sibs = [j for j, f in enumerate(self.world.families)
                if f.entity_type == self.world.families[qf].entity_type and j != qf]
        return self._plan_for(rng.choice(sibs) if sibs else None, ["x"])

    def complete(self, messages: list[dict[str, Any]]) -> str:
        q = self.question or ""
        # the planner's own earlier outputs are the assistant messages holding a plan (executor results are
        # assistant messages too: "Task n result: ...")
        own = [m["content"] for m in messages if m.get("role") == "assistant" and m.get("content")
               and m["content"].lstrip().startswith("{")]
        if not own:
            return self._first_plan(messages)
        qf, _ = self.lookup[q]
        right = self.world.decode_plan(own[-1]) == qf
        u = self._rng("exec").random()
        if u < (self.p_exec if right else self.p_lucky):
            return f"FINAL ANSWER: {self.ground_truth}"
        return "FINAL ANSWER: unknown"


class OracleSelector:
    """NP ``selector=`` that reads the hidden truth: cases of the query's family whose plan is right for that family
    first, newest first; then other same-family cases; then the rest (the NP seam passes no labels)."""

    def __init__(self, world: CBRWorld, lookup: dict[str, tuple[int, int]]):
        self.world = world
        self.lookup = lookup
        self._plan_cache: dict[str, int | None] = {}

    def _decode(self, plan: Any) -> int | None:
        key = plan if isinstance(plan, str) else json.dumps(plan)
        if key not in self._plan_cache:
            self._plan_cache[key] = self.world.decode_plan(plan)
        return self._plan_cache[key]

    def retrieve(self, task: str, pairs: list[tuple[Any, ...]], device_str: str = "auto", top_k: int = 5,
                 max_length: int = 256) -> list[dict[str, Any]]:
        if top_k < 0:
            raise RuntimeError("selected index k out of range")
        qf, _ = self.lookup.get(task, (-1, -1))
        scored = []
        for q, plan, li in pairs:
            fam = self.lookup.get(str(q), (-2, -2))[0]
            grade = (2 if self._decode(plan) == qf else 1) if fam == qf else 0
            scored.append((grade, li, q, plan))
        scored.sort(key=lambda x: (-x[0], -x[1]))
        return [{"rank": r, "score": float(g), "question": q, "plan": plan, "line_index": li}
                for r, (g, li, q, plan) in enumerate(scored[:top_k], 1)]


class EncoderSelector:
    """NP ``selector=`` over any ``encode(texts)`` encoder (e.g. ``harness.embedding.get_encoder("minilm-mean")``):
    cosine over L2-normalised key vectors, cached by key string; ties by lower line index. The practitioner's
    alternative to NP's pooler-output embedding, in the driver's own loop."""

    def __init__(self, encoder: Any):
        self.encoder = encoder
        self.cache: dict[str, Any] = {}

    def retrieve(self, task: str, pairs: list[tuple[Any, ...]], device_str: str = "auto", top_k: int = 5,
                 max_length: int = 256) -> list[dict[str, Any]]:
        import numpy as np

        if top_k < 0:
            raise RuntimeError("selected index k out of range")
        keys = [str(p[0]) for p in pairs]
        missing = list(dict.fromkeys(k for k in keys if k not in self.cache))
        if missing:
            self.cache.update(zip(missing, self.encoder.encode(missing), strict=True))
        if not keys or top_k == 0:
            return []
        mat = np.stack([self.cache[k] for k in keys])
        sims = mat @ self.encoder.encode([task])[0]
        order = np.lexsort((np.arange(len(keys)), -sims))[:top_k]
        return [{"rank": r, "score": round(float(sims[i]), 6), "question": pairs[i][0], "plan": pairs[i][1],
                 "line_index": pairs[i][2]} for r, i in enumerate(order, 1)]


class NoMemorySelector:
    """NP ``selector=`` that delivers no case: the prompt is the trailer alone, so the planner plans unaided."""

    def retrieve(self, task: str, pairs: list[tuple[Any, ...]], device_str: str = "auto", top_k: int = 5,
                 max_length: int = 256) -> list[dict[str, Any]]:
        return []
