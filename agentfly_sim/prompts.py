"""Prompt builders and text helpers of the drivers (spec §6.2-§6.4, acceptance §10.2-§10.3).

- ``build_np_prompt_from_cases`` / ``build_pm_prompt_from_cases``: rank order kept, split by label afterwards,
  positives first (AGF-02); positive plans prettified with extras dropped, negative plans raw (AGF-23); PM omits
  labels other than the exact ``positive``/``negative`` strings (AGF-02); NP reads only ``reward`` from the loaded
  item, a missing reward counts as negative (AGF-13).
- ``strip_fences``, ``ensure_list`` (AGF-33: ``<|answer_split|>`` strings stay one item), the judge prompt.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

MEMORY_TOP_K_DEFAULT = 8

EXAMPLE_TRAILER = (
    "Plan the current task using the examples above: follow the approach of the positive examples and avoid "
    "the patterns of the negative examples.\n\nPlan for the current task:"
)

PLANNER_SYSTEM = (
    "You are the planner. Decompose the user's question into a minimal plan and reply only with JSON of the "
    'form {"plan":[{"id":INT,"description":STRING},...]}. When the answer is complete, reply '
    "FINAL ANSWER: <short answer>; otherwise emit a new plan. Never call tools."
)

EXECUTOR_SYSTEM = (
    "You are the executor. Do exactly one task, using the available tools through function calls when needed. "
    "Reply concisely with the task result. Never output FINAL ANSWER."
)


def _env_cap(name: str) -> int:
    top_k = int(os.environ.get("MEMORY_TOP_K", str(MEMORY_TOP_K_DEFAULT)))
    return int(os.environ.get(name, str(top_k)))


def _section(header: str, group: list[dict[str, Any]], cap: int, form) -> list[str]:
    n = len(group)
    parts = [f"{header} - Showing {min(n, cap)} of {n}:"]
    for i, case in enumerate(group[:cap], 1):
        parts.append(form(i, case))
    return parts


def _negative_form(i: int, case: dict[str, Any], qkey: str) -> str:
    return f"Example {i}:\nQuestion: {case.get(qkey, '')}\nPlan: {case.get('plan', '')}\n"


def _np_positive(i: int, case: dict[str, Any]) -> str:
    try:
        q = case["question"]
        plan_data = json.loads(case["plan"])
        lines = "\n".join(f"{s['id']}. {s['description']}" for s in plan_data.get("plan", []))
        return f"Example {i}:\nQuestion: {q}\nPlan:\n{lines}\n"
    except Exception:  # noqa: BLE001 - any failure falls back to the negative (raw) form
        return _negative_form(i, case, "question")


def _pm_positive(i: int, case: dict[str, Any]) -> str:
    try:
        q = case["case"]
        plan = case["plan"]
        plan_data = json.loads(plan) if isinstance(plan, str) else plan
        lines = "\n".join(f"{s['id']}. {s['description']}" for s in plan_data.get("plan", []))
        return f"Example {i}:\nQuestion: {q}\nPlan:\n{lines}\n"
    except Exception:  # noqa: BLE001
        return _negative_form(i, case, "case")


def build_np_prompt_from_cases(task: str, cases: list[dict[str, Any]] | None, items: list[Any],
                               max_pos: int | None = None, max_neg: int | None = None) -> str:
    """NP example prompt (spec §6.3). A case counts only if ``0 <= line_index < len(items)``; it is positive iff
    ``items[line_index].get("reward", 0) == 1``. ``task`` does not appear in the output."""
    max_pos = _env_cap("MEMORY_MAX_POS_EXAMPLES") if max_pos is None else max_pos
    max_neg = _env_cap("MEMORY_MAX_NEG_EXAMPLES") if max_neg is None else max_neg
    pos: list[dict[str, Any]] = []
    neg: list[dict[str, Any]] = []
    for case in cases or []:
        li = case.get("line_index", -1)
        if not (0 <= li < len(items)):
            continue
        (pos if items[li].get("reward", 0) == 1 else neg).append(case)
    parts: list[str] = []
    if pos:
        parts += _section("Positive Examples (reward=1)", pos, max_pos, _np_positive)
    if neg:
        parts += _section("Negative Examples (reward=0)", neg, max_neg,
                          lambda i, c: _negative_form(i, c, "question"))
    parts.append(EXAMPLE_TRAILER)
    return "\n".join(parts)


def build_pm_prompt_from_cases(task: str, cases: list[dict[str, Any]] | None,
                               max_pos: int | None = None, max_neg: int | None = None) -> str:
    """PM example prompt (spec §6.3): grouped by the exact labels ``positive``/``negative``; other labels are
    omitted from the prompt but stay in ``retrieved_cases`` and the pairs (AGF-02)."""
    max_pos = _env_cap("MEMORY_MAX_POS_EXAMPLES") if max_pos is None else max_pos
    max_neg = _env_cap("MEMORY_MAX_NEG_EXAMPLES") if max_neg is None else max_neg
    pos = [c for c in cases or [] if c.get("case_label") == "positive"]
    neg = [c for c in cases or [] if c.get("case_label") == "negative"]
    parts: list[str] = []
    if pos:
        parts += _section("Positive Examples", pos, max_pos, _pm_positive)
    if neg:
        parts += _section("Negative Examples", neg, max_neg, lambda i, c: _negative_form(i, c, "case"))
    parts.append(EXAMPLE_TRAILER)
    return "\n".join(parts)


_FENCE_HEAD = re.compile(r"^```[^\n]*\n")
_FENCE_TAIL = re.compile(r"\n?```$")
_BRACES = re.compile(r"\{[\s\S]*\}")


def strip_fences(t: str) -> str:
    """Strip a code fence, else return the greedy ``{...}`` span, else the stripped text (spec §6.2)."""
    t = t.strip()
    if t.startswith("```"):
        t = _FENCE_HEAD.sub("", t)
        t = _FENCE_TAIL.sub("", t)
        return t.strip()
    m = _BRACES.search(t)
    return m.group(0) if m else t


def ensure_list(x: Any) -> list[Any]:
    """Ground truth as a list (spec §6.4): a ``<|answer_split|>`` string stays one item (AGF-33)."""
    if x is None:
        return []
    if isinstance(x, list):
        return x
    if isinstance(x, (str, int, float, bool)):
        return [str(x)]
    try:
        return [json.dumps(x, ensure_ascii=False)]
    except Exception:  # noqa: BLE001
        return [str(x)]


def build_judge_prompt(question: str, gt_list: list[Any], prediction: str) -> str:
    """The judge's single user message (simulator wording, spec §6.4)."""
    return (
        "You are grading an answer to a question.\n"
        f"Question: {question}\n"
        f"Ground truth answers (a semantic match with any one item suffices): "
        f"{json.dumps(gt_list, ensure_ascii=False)}\n"
        f"Predicted answer: {prediction}\n"
        'Reply only with JSON: {"rationale": "<short reason>", "judgement": "correct" or "incorrect"}'
    )


def parse_judge_reply(text: str) -> tuple[str, str]:
    """``strip_fences`` + ``json.loads``; judgement lower-cased, anything but correct/incorrect -> incorrect.
    Raises on invalid JSON or a non-dict result (the wrapper turns that into ``incorrect``)."""
    data = json.loads(strip_fences(text))
    judgement = str(data.get("judgement", "incorrect")).lower().strip()
    if judgement not in ("correct", "incorrect"):
        judgement = "incorrect"
    return judgement, str(data.get("rationale", ""))
