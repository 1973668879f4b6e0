"""Shared scenario helpers for the Fractal claims (FRA-nn); registers no claim itself.

Every scenario lives under ``ctx.tmp_path``: a fresh workspace ``ws/`` and a fresh state directory ``state/``
(the spec's ``FRACTAL_STATE_HOME``, passed explicitly so no process-wide environment is touched).
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fractal_sim import FractalRuntime, ScriptedAgent, TurnScript
from fractal_sim.agent import Read, Return, Run

DESIGN = "fractal"
TURN_ID_RE = re.compile(r"turn-[0-9a-f]{32}")


class Scenario:
    """A fresh workspace + state dir, and helpers to drive ``FractalRuntime`` with a ``ScriptedAgent``."""

    def __init__(self, tmp_path: Path, name: str = "ws", files: dict[str, str] | None = None) -> None:
        self.root = tmp_path
        self.ws = tmp_path / name
        self.ws.mkdir(parents=True, exist_ok=True)
        self.state = tmp_path / "state"
        self.saves: list[str] = []
        for rel, text in (files or {}).items():
            self.write(rel, text)

    def runtime(self, *scripts: TurnScript, agent: Any = None, **kwargs: Any) -> FractalRuntime:
        agent = agent if agent is not None else ScriptedAgent(scripts)
        kwargs.setdefault("fault_hook", self.saves.append)  # counts durable writes (step names)
        return FractalRuntime(self.ws, agent=agent, state_dir=self.state, **kwargs)

    def submitted(self, *messages: str) -> FractalRuntime:
        """A fresh runtime (default script) after submitting ``messages`` in order."""
        rt = self.runtime()
        for message in messages:
            submit(rt, message)
        return rt

    def reader(self, rel: str, text: str, response: str) -> FractalRuntime:
        """Write ``rel`` and return a runtime whose every turn reads it and answers ``response``."""
        self.write(rel, text)
        return self.runtime(TurnScript([Read(rel)], Return(response, [])))

    def write(self, rel: str, text: str) -> Path:
        path = self.ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path


def submit(runtime: FractalRuntime, message: str, *, use_flag: bool = True, **kwargs: Any) -> Any:
    """One submit; returns the result or the exception raised (``CancelledError`` included). With ``use_flag``
    the ScriptedAgent's interrupt flag is cleared and passed as ``interrupt_requested`` (spec 1.2)."""
    agent = runtime.agent
    if use_flag and isinstance(agent, ScriptedAgent) and "interrupt_requested" not in kwargs:
        agent.clear_interrupt()
        kwargs["interrupt_requested"] = agent.interrupt_requested
    try:
        return asyncio.run(runtime.submit(message, **kwargs))
    except (Exception, asyncio.CancelledError) as exc:
        return exc


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def capture_warnings(fn: Callable[[], Any]) -> tuple[Any, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = fn()
    return value, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def blocks(summary_text: str) -> list[str]:
    """Turn blocks of a rendered summary (header dropped)."""
    return summary_text.split("\n\n")[1:]


def fra41_script() -> TurnScript:
    """The FRA-41 turn shape: Read a.py, Read b.py, Run "pytest -q", Return 200 chars changing [a.py]."""
    return TurnScript([Read("a.py"), Read("b.py"), Run("pytest -q")], Return("r" * 200, ["a.py"]))


def fra41_message() -> str:
    return "u" * 100


def excerpt(text: str, limit: int = 1500) -> str:
    return text if len(text) <= limit else text[: limit // 2] + "\n[...]\n" + text[-limit // 2:]


def strip_turn_ids(text: str) -> str:
    return TURN_ID_RE.sub("turn-<id>", text)
