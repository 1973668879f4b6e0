"""The acceptance examples of spec section 11, one test each."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from fractal_sim import (
    MAX_ITERATIONS_ERROR,
    FractalSession,
    Raise,
    Read,
    Return,
    Run,
    RuntimeEventTracker,
    RunTrace,
    SafeReplace,
    TraceSpec,
    TurnScript,
    Write,
    build_edit_workspace_signature,
    default_state_dir,
    load_workspace_instructions,
    turn_usage_from_trace,
    workspace_key,
)
from fractal_sim.models import IterationStep, LMUsage, TokenUsage
from fractal_sim.signature import AGENTS_HEADING, SUMMARY_HEADING

from .conftest import make_runtime, submit


def test_1_empty_session(ws: Path) -> None:
    session = FractalSession()
    assert session.summary() == "No prior Fractal session context."
    sig = build_edit_workspace_signature(session.summary(), load_workspace_instructions(ws))
    assert f"{SUMMARY_HEADING}\n\nNo prior Fractal session context.\n\n" in sig.instructions
    assert AGENTS_HEADING not in sig.instructions
    assert sig.__name__ == "EditWorkspaceWithSession"


def test_2_worked_example(ws: Path, state_dir: Path) -> None:
    rt, _ = make_runtime(
        ws, state_dir,
        TurnScript([Read("cli.py"), Read("README.md"), Write("cli.py", "x"), Run("python -m pytest -q")],
                   Return("Added `--verbose` to the parser.\nRun `python cli.py --verbose`.", ["cli.py"])),
        TurnScript([Run("pytest")], Raise("sandbox unavailable")),
    )
    (ws / "cli.py").write_text("print()\n")
    (ws / "README.md").write_text("readme\n")
    submit(rt, "Add a --verbose flag to cli.py")
    assert isinstance(submit(rt, "Now run the tests"), RuntimeError)
    submit(rt, "try again")
    t1, t2, t3 = (t.turn_id for t in rt.session.state.summary.turns)
    expected = f"""## Session Summary

Turn 1 ({t1})
User: Add a --verbose flag to cli.py
Agent status: succeeded
Agent response: Added `--verbose` to the parser.
Run `python cli.py --verbose`.
files_read_count: 2
files_changed_count: 1
commands_run_count: 1

Turn 2 ({t2})
User: Now run the tests
Agent status: failed
files_read_count: 0
files_changed_count: 0
commands_run_count: 1
Error: sandbox unavailable

Turn 3 ({t3})
User: try again
Agent status: pending"""
    third_call = rt.agent.calls[2]
    assert f"{SUMMARY_HEADING}\n\n{expected}\n\n" in third_call.instructions
    entry = third_call.inputs_json["session_history"][1]
    assert entry["status"] == "failed" and entry["commands_run"] == ["pytest"]
    assert entry["error"] == "sandbox unavailable" and entry["trace"] is None


def test_3_one_pending_turn() -> None:
    session = FractalSession()
    turn_id = session.add_user_message("hello")
    text = session.summary()
    assert re.fullmatch(r"turn-[0-9a-f]{32}", turn_id)
    assert text == f"## Session Summary\n\nTurn 1 ({turn_id})\nUser: hello\nAgent status: pending"
    assert len(text) == 100


def _trace(step_inputs: list[int] | None) -> RunTrace:
    steps = [IterationStep(iteration=i, reasoning="", code="", output="", untruncated_output="", duration_ms=0,
                           usage=LMUsage(main=TokenUsage(input_tokens=n)))
             for i, n in enumerate(step_inputs or [], start=1)]
    return RunTrace(status="completed", model="m", iterations=3, max_iterations=30, duration_ms=2500,
                    usage=LMUsage(main=TokenUsage(input_tokens=250, output_tokens=25, cost=0.025),
                                  sub=TokenUsage(input_tokens=5, output_tokens=1, cost=0.0005)),
                    steps=steps)


def test_4_usage() -> None:
    usage = turn_usage_from_trace(_trace([1025, 2025, 0]))
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.duration_ms, usage.iterations) == (255, 26, 2500, 3)
    assert usage.cost == 0.025 + 0.0005 == 0.025500000000000002
    assert usage.context_tokens == 2025
    assert turn_usage_from_trace(_trace([3000, 4100, 0])).context_tokens == 4100
    assert turn_usage_from_trace(_trace(None)).context_tokens == 0
    assert turn_usage_from_trace(None) is None


def test_5_history_cap(ws: Path, state_dir: Path) -> None:
    rt, _ = make_runtime(ws, state_dir)
    lengths = []
    for i in range(1, 26):
        submit(rt, f"message {i}")
        lengths.append(len(rt.session.state.history))
    assert lengths == list(range(1, 21)) + [20] * 5
    assert [h.user_message for h in rt.session.state.history] == [f"message {i}" for i in range(6, 26)]
    assert len(rt.session.state.summary.turns) == 25
    data = json.loads(rt.session_file().read_text())
    assert [h["user_message"] for h in data["history"]] == [f"message {i}" for i in range(6, 26)]
    assert len(data["summary"]["turns"]) == 25


@pytest.mark.parametrize(("path", "key"), [
    ("/", "workspace--8a5edab282632443"),
    ("/projects/a b/ré po", "projects-a-b-r-po--1c95e32646e79a0e"),
    ("/projects/.hidden/", "projects-.hidden--5a6e25bf71e0fa3c"),
    ("/projects/my_app", "projects-my_app--962fefcac0708adb"),
    ("/projects/" + "x" * 100, "projects-" + "x" * 71 + "--10ecf53f33c9a566"),
])
def test_6_workspace_keys(path: str, key: str) -> None:
    assert workspace_key(path) == key


def test_7_state_dir() -> None:
    assert default_state_dir({"FRACTAL_STATE_HOME": "/s"}) == Path("/s")
    assert default_state_dir({"XDG_STATE_HOME": "/x"}) == Path("/x/fractal")
    assert default_state_dir({"FRACTAL_STATE_HOME": "", "XDG_STATE_HOME": ""}, home="/h") == \
        Path("/h/.local/state/fractal")
    assert default_state_dir({"FRACTAL_STATE_HOME": "/s/"}) == Path("/s")
    assert default_state_dir({"XDG_STATE_HOME": "/x//z/."}) == Path("/x/z/fractal")
    assert default_state_dir({"FRACTAL_STATE_HOME": "rel"}) == Path("rel")


def test_8_agents_cap(ws: Path) -> None:
    (ws / "AGENTS.md").write_text("a" * 25_000)
    text = load_workspace_instructions(ws)
    assert len(text) == 20_064
    assert text[-64:] == "\n\n[AGENTS.md truncated — read the full file from the workspace.]"
    (ws / "AGENTS.md").write_text("b" * 20_000)
    assert load_workspace_instructions(ws) == "b" * 20_000


def test_9_unreadable_backups(ws: Path, state_dir: Path) -> None:
    for _attempt in range(3):
        path = FractalSession(session_id="x").path(ws, state_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob("x.json.bad-*"):
            old.unlink()
        path.write_text("{not json")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a = FractalSession.load(ws, session_id="x", state_dir=state_dir)
            b = FractalSession.load(ws, session_id="x", state_dir=state_dir)
        names = sorted(p.name for p in path.parent.glob("x.json.bad-*"))
        stamps = {re.sub(r"-1$", "", n) for n in names}
        if len(stamps) == 1:
            break
    assert len(names) == 2 and re.fullmatch(r"x\.json\.bad-\d{14}", names[0])
    assert names[1] == names[0] + "-1"
    assert a.state.session_id == b.state.session_id == "x" and not a.state.summary.turns
    assert len(caught) == 2
    assert all(str(w.message).startswith("Ignoring unreadable Fractal session at") for w in caught)
    assert all(w.category is RuntimeWarning and w.filename == __file__ for w in caught)


def _events_for(ws: Path, state_dir: Path, *actions) -> tuple[list[str], dict]:
    rt, _ = make_runtime(ws, state_dir, TurnScript(list(actions), Return("ok", [])))
    shown: list[str] = []
    submit(rt, "go", on_runtime_event=lambda e: shown.append(e.message))
    return shown, {"tracker": rt.last_tracker, "history": rt.session.state.history[-1]}


def test_10_read_write_run(ws: Path, state_dir: Path) -> None:
    (ws / "a.py").write_text("a")
    shown, got = _events_for(ws, state_dir, Read("a.py"), Write("a.py", "b"), Run(["git", "commit", "-m", "a b"]))
    assert got["history"].files_read == ["a.py"]
    assert got["tracker"].files_modified == ["a.py"]
    assert got["history"].commands_run == ["git commit -m 'a b'"]
    assert shown == ["reading a.py", "editing a.py", "running git commit -m 'a b'"]


def test_11_safe_replace(ws: Path, state_dir: Path) -> None:
    _, got = _events_for(ws, state_dir, SafeReplace("f.txt", "hi"))
    assert got["tracker"].files_modified == ["f.txt.tmp", "f.txt"]
    assert (ws / "f.txt").read_text() == "hi" and not (ws / "f.txt.tmp").exists()
    tracker = RuntimeEventTracker()
    for phase in ("before", "after"):
        tracker.observe({"target": "os.pwrite", "phase": phase, "args": [99, 3, 0], "timestamp": 0.0})
    assert tracker.files_modified == [] and tracker.files_read == []


def test_12_long_command_display() -> None:
    command = "".join(chr(ord("a") + i % 26) for i in range(200))
    tracker = RuntimeEventTracker()
    event = tracker.observe({"target": "subprocess.run", "phase": "before", "args": [command], "timestamp": 0.0})
    assert event.message == "running " + command[:79] + "..." + command[-78:]
    assert event.command == command and tracker.commands_run == [command]


def test_13_failed_and_max_iterations(ws: Path, state_dir: Path) -> None:
    rt, _ = make_runtime(ws, state_dir,
                         TurnScript([Write("b.py", "x")], Raise("model failed")),
                         TurnScript([], Return("partial", []), trace=TraceSpec(status="max_iterations")))
    exc = submit(rt, "one")
    assert isinstance(exc, RuntimeError) and str(exc) == "model failed"
    agent = rt.session.state.summary.turns[0].agent
    assert (agent.status, agent.response, agent.error, agent.files_changed_count) == ("failed", "", "model failed", 0)
    submit(rt, "two")
    tail = rt.session.summary().split("\n\n")[-1].splitlines()
    assert tail[2:] == ["Agent status: max_iterations", "Agent response: partial", "files_read_count: 0",
                        "files_changed_count: 0", "commands_run_count: 0", "Error: " + MAX_ITERATIONS_ERROR]


def _fra44_sizes(ws: Path, state_dir: Path, turns: int) -> list[tuple[int, int]]:
    session = FractalSession()
    sizes = []
    for _ in range(turns):
        turn_id = session.add_user_message("m" * 100)
        pending = session.save(ws, state_dir=state_dir).stat().st_size
        session.add_agent_turn(status="succeeded", response="r" * 200, files_read=["a.py", "b.py"],
                               changed_files=["a.py"], commands_run=["pytest -q"], turn_id=turn_id,
                               trace=RunTrace(status="completed", model="m", iterations=1, max_iterations=30,
                                              duration_ms=1000))
        path = session.save(ws, state_dir=state_dir)
        text = path.read_text()
        # a timestamp whose microsecond is 0 prints without a fraction: 7 bytes shorter
        short = len(re.findall(r'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00"', text))
        sizes.append((pending, path.stat().st_size + 7 * short))
    return sizes


def test_14_length_and_size_laws(ws: Path, state_dir: Path) -> None:
    for n, expected in ((10, 4629), (50, 23109), (200, 92510)):
        session = FractalSession()
        for _ in range(n):
            session.add_user_message("u" * 100)
            session.add_agent_turn(status="succeeded", response="r" * 200, files_read=["a.py", "b.py"],
                                   changed_files=["a.py"], commands_run=["pytest -q"])
        assert len(session.summary()) == expected
    sizes = _fra44_sizes(ws, state_dir, 40)
    finals = [s[1] for s in sizes]
    assert sizes[0][0] in (844, 837, 830)
    assert (finals[0], finals[1], finals[19], finals[20], finals[39]) == (2089, 4041, 39177, 40039, 56417)
    assert all(b - a == 1952 for a, b in zip(finals[:20], finals[1:20], strict=False))
    assert all(b - a == 862 for a, b in zip(finals[20:], finals[21:], strict=False))
