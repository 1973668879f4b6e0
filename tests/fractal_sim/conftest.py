"""Fixtures for fractal_sim tests: a fresh workspace and state dir per test, and a sync submit helper."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from fractal_sim import FractalRuntime, ScriptedAgent, TurnScript


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


def make_runtime(ws: Path, state_dir: Path, *scripts: TurnScript, **kwargs: Any) -> tuple[FractalRuntime, ScriptedAgent]:
    agent = ScriptedAgent(scripts)
    return FractalRuntime(ws, agent=agent, state_dir=state_dir, **kwargs), agent


def submit(runtime: FractalRuntime, message: str, *, use_flag: bool = True, **kwargs: Any) -> Any:
    """Run one submit; returns the AgentResult or the exception it raised (BaseException included).

    With ``use_flag`` the ScriptedAgent's interrupt flag is cleared first and passed as ``interrupt_requested``,
    as the spec's harness does."""
    agent = runtime.agent
    if use_flag and isinstance(agent, ScriptedAgent) and "interrupt_requested" not in kwargs:
        agent.clear_interrupt()
        kwargs["interrupt_requested"] = agent.interrupt_requested
    try:
        return asyncio.run(runtime.submit(message, **kwargs))
    except BaseException as exc:  # noqa: BLE001 - tests inspect CancelledError too
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        return exc
