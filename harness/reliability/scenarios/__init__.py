"""Durable write sequences of each design for the crash-point explorer (``harness.reliability.crash``).

Each module exposes ``scenarios() -> list[Scenario]``; modules are imported lazily so ``memsim crash --design
fractal`` never imports torch or Kuzu.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def _lazy(name: str) -> Callable[[], list[Any]]:
    def load() -> list[Any]:
        return import_module(f"harness.reliability.scenarios.{name}").scenarios()
    return load


SCENARIO_MODULES: dict[str, Callable[[], list[Any]]] = {
    "fractal": _lazy("fractal"),
    "agentfly": _lazy("agentfly"),
    "tortoise": _lazy("tortoise"),
}
