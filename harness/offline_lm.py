"""Offline, deterministic, seedable dspy LM that records every request.

``ScriptedLM`` builds a real ``dspy.LM`` whose engine (dspy 3.4's ``engine=`` seam, the interface DSPy 3.5 keeps)
answers from a policy instead of a provider, and records the exact messages dspy formatted. Scenarios use the
recording to assert on what a model would have seen (system instructions, user inputs).

Policies:
- ``policy(request: LMRequest) -> dict | str``: a dict maps output field names to values and is formatted the way
  dspy's ChatAdapter parses it (``[[ ## field ## ]]`` blocks, then ``[[ ## completed ## ]]``); a str is returned raw.
- ``outputs=[...]``: a queue of such values consumed in order; running out raises ``ScriptExhausted``.

Errors: an exception raised by a policy (or ``ScriptExhausted``) reaches the caller wrapped by dspy 3.4 as
``dspy.utils.exceptions.LMUnexpectedError`` with the original exception as ``__cause__``; use
``unwrap_lm_error(exc)`` to get the original back.

Determinism: no clock and no global randomness; ``request.rng`` is ``random.Random`` seeded from
``(seed, call index)`` so a stochastic policy (a judge correct with probability p) is reproducible.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import json
import random
import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import dspy
from dspy.lm15 import Message, Request, Response, TextPart, Usage

_FIELD_RE = re.compile(r"^\[\[ ## (\w+) ## \]\]$", re.M)
_RESPOND_TAIL = "\n\nRespond with the corresponding output fields"
_OUTPUT_LIST_RE = re.compile(r"Your output fields are:\n(.*?)(?:\n\n|\Z)", re.S)
_NUMBERED_FIELD_RE = re.compile(r"^\d+\. `(\w+)`", re.M)


class ScriptExhausted(RuntimeError):
    """The scripted output queue is empty."""


@dataclass
class LMRequest:
    """One recorded request: the exact messages dspy sent, plus parsed conveniences."""

    index: int
    messages: list[dict[str, str]]
    rng: random.Random = field(repr=False)

    @property
    def system(self) -> str:
        return "\n".join(m["content"] for m in self.messages if m["role"] in ("system", "developer"))

    @property
    def user(self) -> str:
        """The last user message (the one carrying the current inputs)."""
        users = [m["content"] for m in self.messages if m["role"] == "user"]
        return users[-1] if users else ""

    @property
    def text(self) -> str:
        """Everything the model saw, concatenated in order."""
        return "\n".join(m["content"] for m in self.messages)

    @property
    def inputs(self) -> dict[str, str]:
        """Input fields parsed back out of the last user message (ChatAdapter ``[[ ## f ## ]]`` blocks)."""
        return parse_fields(self.user)

    @property
    def output_fields(self) -> list[str]:
        m = _OUTPUT_LIST_RE.search(self.system)
        return _NUMBERED_FIELD_RE.findall(m.group(1)) if m else []


def unwrap_lm_error(exc: BaseException) -> BaseException:
    """The exception a policy raised, through dspy's error wrapping (follows ``__cause__``)."""
    seen = exc
    while seen.__cause__ is not None and type(seen).__module__.startswith("dspy"):
        seen = seen.__cause__
    return seen


def parse_fields(text: str) -> dict[str, str]:
    """Split a ChatAdapter-formatted text into ``{field: value}`` (values stripped)."""
    out: dict[str, str] = {}
    marks = list(_FIELD_RE.finditer(text))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        value = text[m.end() : end]
        if i + 1 == len(marks) and _RESPOND_TAIL in value:
            value = value.split(_RESPOND_TAIL, 1)[0]
        out[m.group(1)] = value.strip()
    return out


def format_fields(values: dict[str, Any]) -> str:
    """Format output values as ChatAdapter expects them (non-str values as JSON)."""
    parts = []
    for name, value in values.items():
        rendered = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"[[ ## {name} ## ]]\n{rendered}")
    parts.append("[[ ## completed ## ]]")
    return "\n\n".join(parts)


Policy = Callable[[LMRequest], "dict[str, Any] | str"]


class ScriptedEngine:
    """A dspy 3.4 engine (``complete(Request) -> Response``) driven by a policy or a queue."""

    def __init__(self, policy: Policy | None = None, outputs: Iterable[Any] | None = None, seed: int = 0):
        if policy is None and outputs is None:
            raise ValueError("ScriptedLM needs a policy callable or a list of scripted outputs")
        self.policy = policy
        self.queue: deque[Any] = deque(outputs or [])
        self.seed = seed
        self.requests: list[LMRequest] = []

    def complete(self, request: Request) -> Response:
        messages: list[dict[str, str]] = []
        if request.system is not None:
            system = request.system if isinstance(request.system, str) else "".join(
                getattr(p, "text", "") for p in request.system)
            messages.append({"role": "system", "content": system})
        for m in request.messages:
            messages.append({"role": m.role, "content": m.text or ""})
        index = len(self.requests)
        rec = LMRequest(index=index, messages=messages, rng=random.Random(f"{self.seed}:{index}"))
        self.requests.append(rec)
        if self.policy is not None:
            answer = self.policy(rec)
        else:
            if not self.queue:
                raise ScriptExhausted(f"scripted LM has no output left for request #{index}")
            answer = self.queue.popleft()
        text = answer if isinstance(answer, str) else format_fields(dict(answer))
        return Response(id=f"scripted-{index}", model="scripted", message=Message.assistant([TextPart(text)]),
                        finish_reason="stop", usage=Usage(input_tokens=0, output_tokens=0, total_tokens=0))

    def stream(self, request: Request):  # pragma: no cover - dspy only streams when asked to
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass


def ScriptedLM(policy: Policy | None = None, outputs: Iterable[Any] | None = None, seed: int = 0,
               model: str = "scripted/memsim") -> dspy.LM:
    """A real ``dspy.LM`` answering offline from ``policy`` or ``outputs``; ``lm.requests`` is the recording.

    The LM's cache is off, so identical prompts still reach the policy (and are recorded) every time.
    """
    engine = ScriptedEngine(policy=policy, outputs=outputs, seed=seed)
    lm = dspy.LM(model, engine=engine, cache=False, num_retries=0)
    lm.requests = engine.requests  # same list object: the recording
    lm.scripted_engine = engine
    return lm
