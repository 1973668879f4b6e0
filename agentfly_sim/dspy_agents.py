"""dspy-module agents over an injected ``dspy.LM`` (the real-LM seam of spec §1.1).

``PlannerModule`` / ``ExecutorModule`` / ``JudgeModule`` implement the driver protocols of ``agents``. The harness
builds the offline defaults by wrapping the scripted policies of ``agents`` in its ``ScriptedLM``; any other
``dspy.LM`` can replace them. Importing this module imports dspy (kept out of ``agents`` so drivers stay light).
"""

from __future__ import annotations

import json
import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402


def _lm_text(out: Any) -> Any:
    item = out[0] if isinstance(out, list) and out else out
    return item


class _LMAgent:
    """Shared plumbing of the dspy agents: the LM, the question context, and the raw-message call."""

    def __init__(self, lm: Any, role: str):
        self.lm = lm
        self.role = role
        self.question: str | None = None
        self.ground_truth: Any = None
        self.step_id: Any = None

    def begin_question(self, question: str, ground_truth: Any = None) -> None:
        self.question, self.ground_truth, self.step_id = question, ground_truth, None

    def begin_task(self, question: str, step_id: Any) -> None:
        self.question, self.step_id = question, step_id

    def _call(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return _lm_text(self.lm(messages=messages, **kwargs))


class PlannerModule(dspy.Module, _LMAgent):  # type: ignore[misc]
    """dspy planner: forwards the planner messages verbatim to ``lm``; ``forward`` returns a ``Prediction``."""

    def __init__(self, lm: Any, max_tokens: int = 15000):
        dspy.Module.__init__(self)
        _LMAgent.__init__(self, lm, "planner")
        self.max_tokens = max_tokens

    def forward(self, messages: list[dict[str, Any]]) -> Any:
        out = self._call(messages, max_tokens=self.max_tokens)
        text = out.get("text") if isinstance(out, dict) else out
        return dspy.Prediction(content=text)

    def complete(self, messages: list[dict[str, Any]]) -> str | None:
        return self(messages=messages).content


class ExecutorModule(dspy.Module, _LMAgent):  # type: ignore[misc]
    """dspy executor: forwards messages and tool schemas (``tool_choice="auto"``). A real LM's tool calls are
    passed through; a text reply that is a JSON envelope ``{"content", "tool_calls"}`` (the offline scripted
    convention) is decoded; any other text is the content."""

    def __init__(self, lm: Any, tool_schemas: list[dict[str, Any]] | None = None, max_tokens: int = 15000):
        dspy.Module.__init__(self)
        _LMAgent.__init__(self, lm, "executor")
        self.tool_schemas = tool_schemas or []
        self.max_tokens = max_tokens

    def forward(self, messages: list[dict[str, Any]]) -> Any:
        out = self._call(messages, tools=self.tool_schemas or None, tool_choice="auto", max_tokens=self.max_tokens)
        if isinstance(out, dict):
            calls = out.get("tool_calls")
            return dspy.Prediction(content=out.get("text"), tool_calls=calls or None)
        try:
            env = json.loads(out)
            if isinstance(env, dict) and set(env) <= {"content", "tool_calls"} and env:
                return dspy.Prediction(content=env.get("content"), tool_calls=env.get("tool_calls"))
        except (TypeError, ValueError):
            pass
        return dspy.Prediction(content=out, tool_calls=None)

    def complete(self, messages: list[dict[str, Any]], tools: Any = None) -> dict[str, Any]:
        pred = self(messages=messages)
        return {"content": pred.content, "tool_calls": pred.tool_calls}


class JudgeModule(dspy.Module, _LMAgent):  # type: ignore[misc]
    """dspy judge: one user message, ``max_tokens=300``, raw text back (the driver parses it)."""

    def __init__(self, lm: Any):
        dspy.Module.__init__(self)
        _LMAgent.__init__(self, lm, "judge")

    def forward(self, prompt: str, max_tokens: int = 300) -> Any:
        out = self._call([{"role": "user", "content": prompt}], max_tokens=max_tokens)
        return dspy.Prediction(text=out.get("text") if isinstance(out, dict) else out)

    def complete(self, prompt: str, max_tokens: int = 300) -> str:
        return self(prompt=prompt, max_tokens=max_tokens).text


