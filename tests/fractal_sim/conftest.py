"""Fixtures for fractal_sim tests: a fresh workspace and state dir per test, and the claims' sync submit helper
(``harness.claims.fractal_common.submit``: the result, or the exception the submit raised, CancelledError included)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fractal_sim import FractalRuntime, ScriptedAgent, TurnScript
from harness.claims.fractal_common import submit

__all__ = ["make_runtime", "submit"]


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
