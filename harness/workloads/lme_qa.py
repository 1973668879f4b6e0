"""LongMemEval question answering with a real LM: the official reader prompts, judge templates and aggregates.

What is realised, read from LongMemEval's generation and evaluation code (``src/generation/run_generation.py``,
``src/evaluation/evaluate_qa.py``, ``print_qa_metrics.py``; spec longmemeval.md sections 3 and 5):

- **Reader.** Two prompts, formatted with ``(history, question_date, question)``: chain-of-note ``"con"`` (the
  default) and ``"direct"``. Generation length 500 tokens, 800 with chain-of-note; temperature 0. The history is
  whatever text an arm delivered (memsim does not re-render it). The official reader cuts the history to the
  reader's window minus the generation length minus 1000 tokens; memsim does the same when ``window_tokens`` is
  given, counting with tiktoken's ``cl100k_base`` (the copy bundled in litellm, as ``fractal_sim.context_meter``
  loads it) and keeping the first tokens. Without ``window_tokens`` nothing is cut, since memsim cannot know a
  model's window; a too-long prompt then fails at the LM, and that question gets ``reader_error``.
  Two points the spec does not settle: the official code counts with the reader's own tokenizer (cl100k is the
  stand-in here), and keeping the head rather than the tail is our reading of the official slice.
- **Judge.** The five templates, formatted with ``(question, answer, response)``. Routing: abstention
  (``'_abs' in question_id``) comes first, whatever the type, then the question type. One user message, no system
  prompt, temperature 0, at most 10 tokens, one completion; label = ``'yes' in response.strip().lower()`` (a
  substring test, so "yes and no" counts as yes).
- **Aggregates** (:func:`qa_aggregates`): accuracy per question type (abstention items stay in their base type),
  the task average (mean over the types present), overall accuracy (mean over every judged item) and abstention
  accuracy (over the ``_abs`` items). The official aggregation script only accepts ``gpt-4o-2024-08-06`` as judge,
  so a result judged by any other model carries ``"official": false`` and the label
  ``"not official (judged by <model>)"``. The model name is compared after its last ``/`` (``openai/gpt-4o-2024-08-06``
  is the official judge). That tells us which model the user named, not which server answered.

LM calls: ``dspy.LM(model, api_base=..., temperature=0, max_tokens=..., cache=False)`` called with the prompt
string, which dspy sends as exactly one user message (``messages=[{"role": "user", "content": prompt}]``; the
``messages=`` form of the same call is deprecated in dspy 3.4). dspy 3.4 puts the token limit on the wire as
``max_completion_tokens``, OpenAI's current name for ``max_tokens``. It leaves out ``n`` because 1 is the default.
The cache is off so that a rerun really calls the LM. ``check()`` makes one call with no retries, so an
unreachable or misconfigured LM stops a run with one line (:class:`LmUnavailable`, a ``ValueError``) naming the
model and its base URL. A failed call during a run is recorded (``reader_error`` / ``judge_error``) and never
scored.

The prompt and template literals below are quoted verbatim from LongMemEval
(https://github.com/xiaowu0162/LongMemEval), under its MIT License:

    Copyright (c) 2024 Di Wu

    Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated
    documentation files (the "Software"), to deal in the Software without restriction, including without limitation
    the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software, and
    to permit persons to whom the Software is furnished to do so, subject to the following conditions:

    The above copyright notice and this permission notice shall be included in all copies or substantial portions
    of the Software.

    THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO
    THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
    AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF
    CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS
    IN THE SOFTWARE.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from harness.atomic import write_atomic  # noqa: E402
from harness.workloads.longmemeval import QUESTION_TYPES  # noqa: E402

OFFICIAL_JUDGE = "gpt-4o-2024-08-06"
"""The judge the official aggregation script asserts; any other judge's numbers are labelled not official."""

READER_PROMPTS: dict[str, str] = {
    "con": 'I will give you several history chats between you and a user. Please answer the question based on the '
           'relevant chat history. Answer the question step by step: first extract all the relevant information, '
           'and then reason over the information to get the answer.\n\n\nHistory Chats:\n\n{}\n\nCurrent Date: '
           '{}\nQuestion: {}\nAnswer (step by step):',
    "direct": 'I will give you several history chats between you and a user. Please answer the question based on '
              'the relevant chat history.\n\n\nHistory Chats:\n\n{}\n\nCurrent Date: {}\nQuestion: {}\nAnswer:',
}
"""The official reader prompts (MIT, quoted), formatted with ``(history, question_date, question)``."""

GENERATION_TOKENS = {"con": 800, "direct": 500}
"""The reader's generation length per prompt style (the official 500, raised to 800 for chain-of-note)."""

HISTORY_MARGIN_TOKENS = 1000
"""Tokens kept free besides the generation length when the history is cut to a window (the official margin)."""

JUDGE_MAX_TOKENS = 10

_BASIC = ('I will give you a question, a correct answer, and a response from a model. Please answer yes if the '
          'response contains the correct answer. Otherwise, answer no. If the response is equivalent to the correct '
          'answer or contains all the intermediate steps to get the correct answer, you should also answer yes. If '
          'the response only contains a subset of the information required by the answer, answer no. \n\nQuestion: '
          '{}\n\nCorrect Answer: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only.')
_TEMPORAL = ("I will give you a question, a correct answer, and a response from a model. Please answer yes if the "
             "response contains the correct answer. Otherwise, answer no. If the response is equivalent to the "
             "correct answer or contains all the intermediate steps to get the correct answer, you should also "
             "answer yes. If the response only contains a subset of the information required by the answer, answer "
             "no. In addition, do not penalize off-by-one errors for the number of days. If the question asks for "
             "the number of days/weeks/months, etc., and the model makes off-by-one errors (e.g., predicting 19 days "
             "when the answer is 18), the model's response is still correct. \n\nQuestion: {}\n\nCorrect Answer: "
             "{}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only.")
_KNOWLEDGE_UPDATE = ('I will give you a question, a correct answer, and a response from a model. Please answer yes if '
                     'the response contains the correct answer. Otherwise, answer no. If the response contains some '
                     'previous information along with an updated answer, the response should be considered as '
                     'correct as long as the updated answer is the required answer.\n\nQuestion: {}\n\nCorrect '
                     'Answer: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only.')
_PREFERENCE = ("I will give you a question, a rubric for desired personalized response, and a response from a model. "
               "Please answer yes if the response satisfies the desired response. Otherwise, answer no. The model "
               "does not need to reflect all the points in the rubric. The response is correct as long as it recalls "
               "and utilizes the user's personal information correctly.\n\nQuestion: {}\n\nRubric: {}\n\nModel "
               "Response: {}\n\nIs the model response correct? Answer yes or no only.")
_ABSTENTION = ('I will give you an unanswerable question, an explanation, and a response from a model. Please answer '
               'yes if the model correctly identifies the question as unanswerable. The model could say that the '
               'information is incomplete, or some other information is given but the asked information is not.'
               '\n\nQuestion: {}\n\nExplanation: {}\n\nModel Response: {}\n\nDoes the model correctly identify the '
               'question as unanswerable? Answer yes or no only.')

JUDGE_TEMPLATES: dict[str, str] = {
    "single-session-user": _BASIC,
    "single-session-assistant": _BASIC,
    "multi-session": _BASIC,
    "temporal-reasoning": _TEMPORAL,
    "knowledge-update": _KNOWLEDGE_UPDATE,
    "single-session-preference": _PREFERENCE,
    "abstention": _ABSTENTION,
}
"""The official judge templates (MIT, quoted) by route: the six question types and ``"abstention"``."""


class LmUnavailable(ValueError):
    """The reader or judge LM cannot be called (no server, no key, unknown provider): one line."""


def is_abstention(question_id: str) -> bool:
    """The official abstention rule: ``'_abs' in question_id``."""
    return "_abs" in question_id


def reader_prompt(history: str, question_date: str, question: str, style: str = "con") -> str:
    """The official reader prompt of ``style`` (``"con"`` or ``"direct"``) for one question."""
    if style not in READER_PROMPTS:
        raise ValueError(f"unknown reader prompt {style!r}; choose one of {', '.join(READER_PROMPTS)}")
    return READER_PROMPTS[style].format(history, question_date, question)


def judge_route(question_type: str, question_id: str) -> str:
    """The template a question is judged with: ``"abstention"`` for an ``_abs`` id (whatever its type), else its
    question type."""
    if is_abstention(question_id):
        return "abstention"
    if question_type not in QUESTION_TYPES:
        raise ValueError(f"question {question_id}: question_type: unknown {question_type!r} "
                         f"(one of {', '.join(QUESTION_TYPES)})")
    return question_type


def judge_prompt(question_type: str, question_id: str, question: str, answer: str, response: str) -> str:
    """The official judge prompt for one hypothesis (``answer`` is the rubric for preference questions and the
    explanation for abstention ones)."""
    return JUDGE_TEMPLATES[judge_route(question_type, question_id)].format(question, answer, response)


def judge_label(response_text: str) -> bool:
    """The official label rule: ``'yes' in response.strip().lower()`` (a substring test)."""
    return "yes" in response_text.strip().lower()


def _one_line(exc: BaseException, limit: int = 300) -> str:
    from harness.workloads.answer import lm_error_line

    return lm_error_line(exc, limit)


def _text(output: Any) -> str:
    """The text of one dspy LM output (a string, or a dict with ``text`` when the provider returns more)."""
    if isinstance(output, dict):
        output = output.get("text")
    return "" if output is None else str(output)


class _Caller:
    """One dspy LM at temperature 0 with a fixed token limit, called with a single user message."""

    role = "LM"

    def __init__(self, lm: str | dspy.LM, *, lm_base: str | None, max_tokens: int, lm_kwargs: dict[str, Any]) -> None:
        if isinstance(lm, dspy.LM):
            self.lm = lm
        else:
            kwargs = {"cache": False, **lm_kwargs}
            if lm_base is not None:
                kwargs["api_base"] = lm_base
            self.lm = dspy.LM(lm, temperature=0, max_tokens=max_tokens, **kwargs)
        self.model = str(self.lm.model)
        self.lm_base = lm_base if lm_base is not None else self.lm.kwargs.get("api_base")

    def where(self) -> str:
        return f"{self.role} {self.model} at {self.lm_base or 'its provider default URL'}"

    def complete(self, prompt: str, lm: dspy.LM | None = None) -> str:
        outputs = (lm or self.lm)(prompt)
        return _text(outputs[0]) if outputs else ""

    def _check(self, prompt: str) -> None:
        try:
            self.complete(prompt, self.lm.copy(num_retries=0))
        except Exception as exc:  # noqa: BLE001 - any failure of the one check call means the LM is unusable
            raise LmUnavailable(f"{self.where()}: check call failed: {_one_line(exc)}") from None


class Reader(_Caller):
    """Callable ``(question, question_date, history) -> {"hypothesis", "history_cut"}`` (or ``{"reader_error"}``)
    with the official reader prompt ``style``; ``window_tokens`` (the reader's context window) turns on the
    official history cut, ``max_tokens`` overrides the generation length of the style."""

    role = "reader LM"

    def __init__(self, lm: str | dspy.LM, *, lm_base: str | None = None, style: str = "con",
                 window_tokens: int | None = None, max_tokens: int | None = None, **lm_kwargs: Any) -> None:
        if style not in READER_PROMPTS:
            raise ValueError(f"unknown reader prompt {style!r}; choose one of {', '.join(READER_PROMPTS)}")
        self.style = style
        self.max_tokens = max_tokens if max_tokens is not None else GENERATION_TOKENS[style]
        self.history_limit: int | None = None
        if window_tokens is not None:
            self.history_limit = window_tokens - self.max_tokens - HISTORY_MARGIN_TOKENS
            if self.history_limit <= 0:
                raise ValueError(f"reader window of {window_tokens} tokens leaves no room for history after "
                                 f"{self.max_tokens} generation and {HISTORY_MARGIN_TOKENS} margin tokens")
        super().__init__(lm, lm_base=lm_base, max_tokens=self.max_tokens, lm_kwargs=lm_kwargs)

    def cut_history(self, history: str) -> tuple[str, bool]:
        """``history`` cut to the reader's history budget in cl100k tokens (first tokens kept), and whether it was
        cut; unchanged without ``window_tokens``."""
        if self.history_limit is None:
            return history, False
        encoding = _cl100k_encoding()
        tokens = encoding.encode(history, disallowed_special=())
        if len(tokens) <= self.history_limit:
            return history, False
        return encoding.decode(tokens[:self.history_limit]), True

    def prompt(self, question: str, question_date: str, history: str) -> str:
        """The exact prompt sent for one question (history cut as :meth:`cut_history` says)."""
        return reader_prompt(self.cut_history(history)[0], question_date, question, self.style)

    def check(self) -> None:
        """One reader call on a tiny history before a run (no retries): :class:`LmUnavailable` when it fails."""
        self._check(reader_prompt('[{"role": "user", "content": "My cat is called Tom."}]',
                                  "2023/05/30 (Tue) 21:56", "What is my cat called?", self.style))

    def __call__(self, question: str, question_date: str, history: str) -> dict[str, Any]:
        text, cut = self.cut_history(history)
        try:
            hypothesis = self.complete(reader_prompt(text, question_date, question, self.style))
        except Exception as exc:  # noqa: BLE001 - recorded per question, never scored
            return {"reader_error": _one_line(exc)}
        return {"hypothesis": hypothesis, "history_cut": cut}


class Judge(_Caller):
    """Callable ``(question_id, question_type, question, answer, hypothesis) -> {"judge_label", "judge_response"}``
    (or ``{"judge_error"}``) with the official templates, routing and label rule."""

    role = "judge LM"

    def __init__(self, lm: str | dspy.LM, *, lm_base: str | None = None, **lm_kwargs: Any) -> None:
        super().__init__(lm, lm_base=lm_base, max_tokens=JUDGE_MAX_TOKENS, lm_kwargs=lm_kwargs)

    @property
    def official(self) -> bool:
        return is_official_judge(self.model)

    def check(self) -> None:
        """One judge call on a trivial case before a run (no retries): :class:`LmUnavailable` when it fails."""
        self._check(judge_prompt("single-session-user", "check", "What is my cat called?", "Tom",
                                 "Your cat is called Tom."))

    def __call__(self, question_id: str, question_type: str, question: str, answer: str,
                 hypothesis: str) -> dict[str, Any]:
        prompt = judge_prompt(question_type, question_id, question, answer, hypothesis)
        try:
            response = self.complete(prompt)
        except Exception as exc:  # noqa: BLE001 - recorded per question, never scored
            return {"judge_error": _one_line(exc)}
        return {"judge_label": judge_label(response), "judge_response": response}


def is_official_judge(model: str) -> bool:
    """Whether ``model`` names the official judge, compared after its last ``/`` (a ``provider/`` prefix)."""
    return model.rsplit("/", 1)[-1] == OFFICIAL_JUDGE


def _mean(values: list[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def qa_aggregates(items: Iterable[Mapping[str, Any]], judge_model: str) -> dict[str, Any]:
    """The official QA aggregates of judged items ``{"question_id", "question_type", "judge_label"}``.

    Items without a boolean ``judge_label`` (a ``judge_error``, or a ``reader_error`` that left nothing to judge)
    are counted in ``n_errors`` and left out of every accuracy. ``per_type`` has the types present (abstention
    items inside their base type); ``task_averaged`` is the mean of the per-type accuracies present, and
    ``types_missing`` lists those of the six without a judged item (the paper's task average is over all six)."""
    labels: dict[str, list[bool]] = {t: [] for t in QUESTION_TYPES}
    errors: dict[str, int] = {t: 0 for t in QUESTION_TYPES}
    abstention: list[bool] = []
    every: list[bool] = []
    n_errors = 0
    for item in items:
        qid, qtype = str(item.get("question_id")), item.get("question_type")
        if qtype not in labels:
            raise ValueError(f"question {qid}: question_type: unknown {qtype!r} (one of {', '.join(QUESTION_TYPES)})")
        label = item.get("judge_label")
        if not isinstance(label, bool):
            n_errors += 1
            errors[qtype] += 1
            continue
        labels[qtype].append(label)
        every.append(label)
        if is_abstention(qid):
            abstention.append(label)
    per_type = {t: {"accuracy": _mean(v), "n": len(v), "n_errors": errors[t]}
                for t, v in labels.items() if v or errors[t]}
    accuracies = [row["accuracy"] for row in per_type.values() if row["accuracy"] is not None]
    official = is_official_judge(judge_model)
    return {
        "judge": judge_model,
        "official": official,
        "label": "official" if official else f"not official (judged by {judge_model})",
        "n": len(every),
        "n_errors": n_errors,
        "overall": _mean(every),
        "task_averaged": sum(accuracies) / len(accuracies) if accuracies else None,
        "types_missing": [t for t in QUESTION_TYPES if not labels[t]],
        "per_type": per_type,
        "abstention": {"accuracy": _mean(abstention), "n": len(abstention)},
    }


def write_hypotheses(path: Path, items: Iterable[Mapping[str, Any]],
                     fault_hook: Callable[[str], None] | None = None) -> int:
    """Write the official hypotheses file: one JSON line ``{"question_id", "hypothesis"}`` per item with a
    hypothesis (items with a ``reader_error`` have none and are left out), atomically (temp file in the same folder,
    then rename; ``fault_hook("longmemeval.hypotheses.write")`` just before the rename). Returns the lines written."""
    lines = [json.dumps({"question_id": item["question_id"], "hypothesis": item["hypothesis"]}, ensure_ascii=False)
             for item in items if "hypothesis" in item]
    write_atomic(Path(path), "".join(line + "\n" for line in lines).encode("utf-8"), fault_hook,
                 "longmemeval.hypotheses.write")
    return len(lines)


def _cl100k_encoding() -> Any:
    """tiktoken's cl100k_base from litellm's bundled copy (never downloaded): ``get_counter`` points tiktoken's
    cache there, or raises ``CounterUnavailable``."""
    from fractal_sim.context_meter import get_counter

    get_counter("cl100k-bundled")
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")
