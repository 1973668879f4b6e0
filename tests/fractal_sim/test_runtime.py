"""Unit tests for FractalRuntime: submit branches, trace extraction, headless envelope (spec 3.3-3.5, 6.7)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from fractal_sim import (
    INTERRUPTED_ERROR,
    FractalRuntime,
    Raise,
    Return,
    RunTrace,
    ScriptedAgent,
    TraceSpec,
    TurnScript,
    run_headless,
)
from fractal_sim.agent import Cancel, Probe, Read, SetInterrupt
from fractal_sim.runtime import coerce_trace, extract_trace

from .conftest import make_runtime, submit

VALID = {"status": "completed", "model": "m", "iterations": 1, "max_iterations": 30, "duration_ms": 5}


def test_extract_trace_chain() -> None:
    inner = ValueError("inner")
    inner.trace = VALID
    outer = RuntimeError("outer")
    outer.__context__ = inner
    assert extract_trace(outer).model == "m"
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a  # cycle
    assert extract_trace(a) is None
    dumpable = SimpleNamespace(model_dump=lambda mode: VALID)
    assert coerce_trace(dumpable).iterations == 1
    assert coerce_trace(SimpleNamespace(model_dump=lambda mode: {"bad": 1})) is None
    assert coerce_trace(object()) is None and coerce_trace({"status": "weird"}) is None
    first = RuntimeError("x")
    first.trace = {"not": "trace"}
    first.__cause__ = inner
    assert extract_trace(first) is None  # the first non-None .trace wins, even if malformed


@pytest.mark.parametrize(("outcome", "message"), [
    (Return(123, []), "response must be str"),
    (Return("ok", "a.py"), "changed_files"),
    (Return("ok", ["a", 2]), "changed_files"),
])
def test_adapter_type_errors_fail_the_turn(ws: Path, state_dir: Path, outcome: Return, message: str) -> None:
    rt, _ = make_runtime(ws, state_dir, TurnScript([], outcome))
    exc = submit(rt, "x")
    assert isinstance(exc, TypeError) and message in str(exc)
    assert rt.session.state.history[-1].status == "failed"


def test_non_runtrace_trace_fails_the_turn(ws: Path, state_dir: Path) -> None:
    rt, _ = make_runtime(ws, state_dir, TurnScript([], Return("ok", []), trace={"status": "completed"}))
    assert isinstance(submit(rt, "x"), TypeError)
    assert rt.session.state.summary.turns[0].agent.status == "failed"


def test_on_pending_awaited_and_callbacks_swallowed(ws: Path, state_dir: Path) -> None:
    seen = []

    async def pending() -> None:
        seen.append("pending")

    def bad_iteration(_e: object) -> None:
        raise RuntimeError("display")

    (ws / "a.py").write_text("a")
    rt, _ = make_runtime(ws, state_dir, TurnScript([Read("a.py")], Return("ok", [])))
    result = submit(rt, "x", on_pending=pending, on_iteration_event=bad_iteration)
    assert result.response == "ok" and seen == ["pending"]


def test_branch_b_keeps_pending_and_no_second_save(ws: Path, state_dir: Path) -> None:
    saves: list[str] = []
    rt, _ = make_runtime(ws, state_dir, TurnScript([], Cancel()), fault_hook=saves.append)
    exc = submit(rt, "x", interrupt_requested=lambda: False)
    assert isinstance(exc, asyncio.CancelledError) and saves == ["fractal.session.save"]
    assert json.loads(rt.session_file().read_text())["history"][0]["status"] == "pending"


def test_branch_a_with_trace_on_cancel(ws: Path, state_dir: Path) -> None:
    class TracedCancel(ScriptedAgent):
        async def aforward(self, **kwargs):  # type: ignore[override]
            self.interrupt_flag = True
            exc = asyncio.CancelledError()
            exc.trace = VALID
            raise exc

    agent = TracedCancel()
    rt = FractalRuntime(ws, agent=agent, state_dir=state_dir)
    exc = submit(rt, "x")
    assert isinstance(exc, asyncio.CancelledError) and exc.args == ()
    turn = rt.session.state.summary.turns[0].agent
    assert turn.status == "interrupted" and turn.error == INTERRUPTED_ERROR and turn.usage.duration_ms == 5


def test_interrupt_flag_on_return_is_ignored(ws: Path, state_dir: Path) -> None:
    rt, _ = make_runtime(ws, state_dir, TurnScript([SetInterrupt()], Return("done anyway", [])))
    assert submit(rt, "x").response == "done anyway"
    assert rt.session.state.history[0].status == "succeeded"


def test_fault_before_final_save_leaves_pending_on_disk(ws: Path, state_dir: Path) -> None:
    calls: list[str] = []

    def hook(step: str) -> None:
        calls.append(step)
        if len(calls) == 2:
            raise OSError("disk full")

    rt, _ = make_runtime(ws, state_dir, TurnScript([], Return("ok", [])), fault_hook=hook)
    exc = submit(rt, "x")
    assert isinstance(exc, OSError)
    assert json.loads(rt.session_file().read_text())["history"][0]["status"] == "pending"
    assert rt.session.state.history[0].status == "succeeded"  # memory moved on, disk did not


def test_probe_sees_pending_file_and_included_paths(ws: Path, state_dir: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    seen = {}
    rt, agent = make_runtime(ws, state_dir, included_paths=[extra])
    agent.add(TurnScript([Probe(lambda: seen.update(json.loads(rt.session_file().read_text())))], Return("ok", [])))
    submit(rt, "x")
    assert seen["history"][0]["status"] == "pending"
    assert agent.calls[0].inputs_json["included_paths"] == [str(extra.resolve())]
    assert agent.calls[0].inputs_json["workspace"] == str(ws.resolve())


@pytest.mark.parametrize(("script", "status", "code", "error"), [
    (TurnScript([], Return("ok", ["a"])), "succeeded", 0, None),
    (TurnScript([], Return("fb", []), trace=TraceSpec(status="max_iterations")), "max_iterations", 2, None),
    (TurnScript([], Raise("boom")), "failed", 1, "boom"),
    (TurnScript([SetInterrupt()], Cancel()), "interrupted", 130, "interrupted by user"),
])
def test_run_headless(ws: Path, state_dir: Path, script: TurnScript, status: str, code: int,
                      error: str | None) -> None:
    rt, _ = make_runtime(ws, state_dir, script)
    envelope, exit_code = asyncio.run(run_headless(rt, "go"))
    assert (envelope.status, exit_code, envelope.error) == (status, code, error)
    data = json.loads(envelope.to_json())
    assert list(data) == ["session_id", "workspace", "status", "response", "changed_files", "usage", "error"]
    if status == "interrupted":  # headless passes no interrupt callback: branch B, pending on disk
        assert json.loads(rt.session_file().read_text())["history"][0]["status"] == "pending"


def test_create_resume_new(ws: Path, state_dir: Path) -> None:
    rt = FractalRuntime.create(ws, ScriptedAgent(), state_dir=state_dir)
    submit(rt, "hello")
    sid = rt.session.session_id
    rt2 = FractalRuntime.create(ws, ScriptedAgent(), state_dir=state_dir, resume_session_id=sid)
    assert rt2.session.state.summary.turns[0].user.message == "hello"
    with pytest.raises(FileNotFoundError):
        FractalRuntime.create(ws, ScriptedAgent(), state_dir=state_dir, resume_session_id="nope")
    with pytest.raises(ValueError):
        rt2.resume("a/b")
    old = rt2.session.session_id
    rt2.new_session()
    assert rt2.session.session_id != old and rt.session_file().exists()


def test_runtrace_status_error_is_success(ws: Path, state_dir: Path) -> None:
    rt, _ = make_runtime(ws, state_dir, TurnScript([], Return("x", []), trace=RunTrace(**{**VALID, "status": "error"})))
    submit(rt, "x")
    assert rt.session.state.history[0].status == "succeeded"
