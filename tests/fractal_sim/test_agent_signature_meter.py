"""Unit tests for the agents (ScriptedAgent, DspyAgent), the signature builder and the context meter."""

from __future__ import annotations

import asyncio
import inspect
import json
import math
from pathlib import Path

import pytest

from fractal_sim import (
    DspyAgent,
    FractalSession,
    Return,
    ScriptedAgent,
    TraceSpec,
    TurnScript,
    build_edit_workspace_signature,
    workspace_digest,
)
from fractal_sim.agent import (
    Delete,
    Open,
    Raise,
    Read,
    Run,
    SafeReplace,
    Write,
)
from fractal_sim.context_meter import ContextMeter, CounterUnavailable, build_messages, count_message_tokens
from fractal_sim.models import TokenUsage
from fractal_sim.replay import ScriptError, parse_replay_script
from fractal_sim.signature import (
    AGENTS_HEADING,
    BASE,
    PREAMBLE,
    SUMMARY_HEADING,
    TRAILER,
    PlainSignature,
    build_instruction_doc,
)

from .conftest import make_runtime, submit


def run_agent(agent, ws: Path, **kwargs):
    events: list = []
    kwargs.setdefault("user_message", "go")
    try:
        result = asyncio.run(agent.aforward(workspace_path=ws, on_runtime_event=events.append, **kwargs))
    except (Exception, asyncio.CancelledError) as exc:
        result = exc
    return result, events


def test_scripted_actions_have_real_effects(ws: Path) -> None:
    (ws / "old.txt").write_text("old")
    agent = ScriptedAgent([TurnScript([Write("d/new.py", "x"), Read("d/new.py"), Read("missing.py"),
                                       Open("o.txt", "w"), SafeReplace("s.txt", "safe"), Delete("old.txt"),
                                       Run("ls", ok=False)], Return("ok", ["d/new.py"]))])
    result, events = run_agent(agent, ws)
    assert result.response == "ok" and result.trace.iterations == 7
    assert (ws / "d/new.py").read_text() == "x" and (ws / "o.txt").exists() and (ws / "s.txt").read_text() == "safe"
    assert not (ws / "old.txt").exists()
    phases = [(e["target"], e["phase"]) for e in events if "missing.py" in e["args"]]
    assert phases[-1] == ("pathlib.Path.read_text", "error")
    assert events[-1]["target"] == "subprocess.run" and events[-1]["phase"] == "error"
    codes = [s.code for s in result.trace.steps]
    assert codes[0] == "Path('d/new.py').write_text(...)" and codes[1] == "Path('d/new.py').read_text()"
    # exhausted script -> Return("ok", [])
    again, _ = run_agent(agent, ws)
    assert (again.response, again.changed_files) == ("ok", [])


def test_trace_spec_and_raise_attach(ws: Path) -> None:
    agent = ScriptedAgent([
        TurnScript([Read("a")], Return("ok", []), trace=TraceSpec(status="error", model="x", iterations=9,
                                                                  usage_sub=TokenUsage(output_tokens=3),
                                                                  step_input_tokens=[5, 6])),
        TurnScript([], Return("ok", []), trace=TraceSpec(steps=[])),
        TurnScript([], Raise("bad", exc_type=ValueError, trace={"k": 1}, attach="cause")),
        TurnScript([], Return("ok", []), trace=None),
    ], max_iterations=12)
    t1, _ = run_agent(agent, ws)
    assert (t1.trace.status, t1.trace.model, t1.trace.iterations, t1.trace.max_iterations) == ("error", "x", 9, 12)
    assert [s.usage.main.input_tokens for s in t1.trace.steps] == [5, 6] and t1.trace.usage.sub.output_tokens == 3
    t2, _ = run_agent(agent, ws)
    assert t2.trace.steps == [] and t2.trace.iterations == 1
    exc, _ = run_agent(agent, ws)
    assert isinstance(exc, ValueError) and exc.__cause__.trace == {"k": 1} and not hasattr(exc, "trace")
    t4, _ = run_agent(agent, ws)
    assert t4.trace is None


def test_agent_call_capture_and_visible_text(ws: Path) -> None:
    session = FractalSession()
    session.add_user_message("hello")
    agent = ScriptedAgent()
    history = session.session_history_payload()
    run_agent(agent, ws, user_message="hello", rendered_session_summary=session.summary(), session_history=history)
    call = agent.calls[0]
    assert call.signature_name == "EditWorkspaceWithSession" and call.history_ref is history
    assert call.inputs_json["included_paths"] is None
    assert call.inputs_json["session_history"][0]["status"] == "pending"
    text = call.model_visible_text()
    assert text.startswith(call.instructions + "\n") and text.endswith(json.dumps(call.inputs_json,
                                                                                  ensure_ascii=False))


def test_workspace_digest(ws: Path) -> None:
    (ws / "a").write_text("1")
    d1 = workspace_digest(ws)
    (ws / "a").write_text("2")
    d2 = workspace_digest(ws)
    (ws / "a").write_text("1")
    assert d1 != d2 and workspace_digest(ws) == d1


def test_instruction_structure() -> None:
    doc = build_instruction_doc("S", "  guidance  ")
    assert doc == f"{BASE}\n\n{AGENTS_HEADING}\n\n{PREAMBLE}\n\nguidance\n\n{SUMMARY_HEADING}\n\nS\n\n{TRAILER}"
    assert build_instruction_doc("", "   ") == f"{BASE}\n\n{SUMMARY_HEADING}\n\nNo prior Fractal session context." \
                                              f"\n\n{TRAILER}"
    for text, upstream, lines in ((BASE, 1062, None), (PREAMBLE, 190, 3), (TRAILER, 264, 4)):
        assert 0.8 * upstream <= len(text) <= 1.2 * upstream
        if lines:
            assert len(text.rstrip("\n").splitlines()) == lines
    assert BASE.endswith("\n") and TRAILER.endswith("\n") and not PREAMBLE.endswith("\n")
    for name in ("`workspace`", "`included_paths`", "`user_message`", "`session_history`", "os.replace"):
        assert name in BASE
    sig = build_edit_workspace_signature("S\twith tab", "")
    assert sig.instructions == inspect.cleandoc(sig.__doc__) and "\t" not in sig.instructions
    assert list(sig.input_fields) == ["workspace", "included_paths", "user_message", "session_history"]
    assert list(sig.output_fields) == ["response", "changed_files"]
    plain = PlainSignature(doc)
    assert plain.__name__ == "EditWorkspaceWithSession" and list(plain.output_fields) == ["response",
                                                                                         "changed_files"]


def test_dspy_agent_with_scripted_lm(ws: Path, state_dir: Path) -> None:
    from harness.offline_lm import ScriptedLM

    lm = ScriptedLM(outputs=[{"response": "first done", "changed_files": ["a.py"]},
                             {"response": "second done", "changed_files": []}])
    agent = DspyAgent(lm)
    rt, _ = make_runtime(ws, state_dir)
    rt.agent = agent
    submit(rt, "please edit a.py")
    submit(rt, "and now the tests")
    second = lm.requests[1]
    t1 = rt.session.state.summary.turns[0]
    system = "\n".join(line.strip() for line in second.system.splitlines())  # ChatAdapter indents instructions
    assert f"Turn 1 ({t1.turn_id})\nUser: please edit a.py\nAgent status: succeeded\nAgent response: first done" \
        in system
    assert "Turn 2 (" in second.system and "Agent status: pending" in second.system
    history_text = second.inputs["session_history"]
    assert t1.turn_id in history_text and "and now the tests" in history_text
    assert t1.turn_id not in second.user.split("session_history", 1)[0]
    assert second.inputs["user_message"] == "and now the tests"
    assert rt.session.state.history[0].files_modified == ["a.py"]
    trace = rt.session.state.history[1].trace
    assert (trace.status, trace.model, trace.iterations) == ("completed", "scripted/memsim", 1)
    assert len(agent.calls) == 2 and agent.calls[1].signature_name == "EditWorkspaceWithSession"


def test_dspy_agent_bad_output_fails_turn(ws: Path, state_dir: Path) -> None:
    from harness.offline_lm import ScriptedLM

    lm = ScriptedLM(outputs=["[[ ## response ## ]]\n\n[[ ## changed_files ## ]]\nnot json\n\n[[ ## completed ## ]]"])
    rt, _ = make_runtime(ws, state_dir)
    rt.agent = DspyAgent(lm)
    exc = submit(rt, "x")
    assert isinstance(exc, Exception)
    assert rt.session.state.history[0].status == "failed" and rt.session.state.history[0].error


def test_meter_chars4_by_hand(ws: Path) -> None:
    session = FractalSession()
    messages, history_chars = build_messages(session, ws.resolve(), [], 30)
    system, user = messages[0]["content"], messages[1]["content"]
    assert history_chars == 2 and "Variable `session_history` (type list[SessionHistoryTurn], total length 2):\n[]" \
        in user
    assert user.endswith("\n\niteration: 1/30") and "Variable `user_message` (type str, total length 0):\n\n" in user
    assert "`changed_files` (output): " in system and "\nVariable `included_paths` (type " \
        "Optional[list[Workspace]], total length 4):\nnull" in "\n" + user
    expected = 2 + (4 + 2 + math.ceil(len(system) / 4)) + (4 + 1 + math.ceil(len(user) / 4))
    est = ContextMeter().estimate(session, ws)
    assert est.tokens == expected == count_message_tokens(messages, lambda s: math.ceil(len(s) / 4))
    assert (est.system_chars, est.user_chars) == (len(system), len(user))


def test_meter_preview_cache_and_key(ws: Path) -> None:
    session = FractalSession()
    session.add_user_message("x" * 800)
    meter = ContextMeter()
    e1 = meter.estimate(session, ws, model_label="a", max_iterations="7")
    assert e1.key.max_iterations == 30 and meter.computations == 1
    assert meter.estimate(session, ws, model_label="a", max_iterations="7") is e1 and meter.computations == 1
    assert meter.estimate(session, ws, model_label="a", max_iterations=0).key.max_iterations == 1
    (ws / "AGENTS.md").write_text("rules")
    e3 = meter.estimate(session, ws, model_label="a", max_iterations=0)
    assert e3.key.agents_size == 5 and e3.system_chars > e1.system_chars and meter.computations == 3
    messages, _ = build_messages(session, ws.resolve(), [], 30)
    block = messages[1]["content"].split("Variable `session_history`", 1)[1]
    assert block.split("\n", 1)[1].split("\n\niteration")[0].endswith("...")
    assert len(block.split("\n", 1)[1].split("\n\niteration")[0]) == 503


def test_meter_counters(ws: Path) -> None:
    from fractal_sim.context_meter import get_counter

    assert get_counter("minilm")("hello world") == 2
    session = FractalSession()
    session.add_user_message("hello")
    assert ContextMeter("minilm").estimate(session, ws).tokens > 0
    with pytest.raises(ValueError):
        ContextMeter("nope")
    try:
        counter = get_counter("cl100k-bundled")
    except CounterUnavailable:
        pytest.skip("cl100k_base not bundled with this litellm")
    assert counter("hello world") == 2


def test_parse_replay_script_errors_and_forms() -> None:
    script = parse_replay_script(["just a message", {"message": "m", "actions": [{"run": ["a", "b"]}],
                                                     "outcome": {"raise": "x"}, "trace": None}])
    assert script.turns[0].message == "just a message" and script.turns[1].script.trace is None
    assert script.turns[1].script.actions[0].command == ["a", "b"]
    for bad, where in (({"turns": []}, "turns"), ({"turns": [{"message": 1}]}, "turns[0]"),
                       ({"turns": [{"message": "m", "actions": [{"read": 1}]}]}, "turns[0].actions[0]"),
                       ({"turns": [{"message": "m", "outcome": {"explode": 1}}]}, "turns[0].outcome"),
                       ({"turns": [{"message": "m", "trace": {"status": "nope"}}]}, "turns[0].trace"),
                       ({"turns": [{"message": "m", "extra": 1}]}, "turns[0]"), ("text", "script"),
                       ({"files": {"a": 1}, "turns": ["m"]}, "files")):
        with pytest.raises(ScriptError) as info:
            parse_replay_script(bad)
        assert str(info.value).startswith(where + ": ")


def test_dspy_react_agent_tools_emit_hooks(ws: Path, state_dir: Path) -> None:
    from harness.offline_lm import ScriptedLM

    (ws / "a.py").write_text("x = 1\n")
    plan = iter([("read_file", {"path": "a.py"}), ("write_file", {"path": "a.py", "text": "x = 2\n"}),
                 ("run_command", {"command": "pytest -q"}), ("finish", {})])

    def policy(req):
        if "next_tool_name" in req.output_fields:
            name, args = next(plan)
            return {"next_thought": f"use {name}", "next_tool_name": name, "next_tool_args": args}
        return {"reasoning": "done", "response": "Bumped x.", "changed_files": ["a.py"]}

    lm = ScriptedLM(policy=policy)
    rt, _ = make_runtime(ws, state_dir)
    rt.agent = DspyAgent(lm, mode="react")
    result = submit(rt, "bump x")
    assert result.response == "Bumped x." and (ws / "a.py").read_text() == "x = 2\n"
    h = rt.session.state.history[0]
    assert (h.files_read, h.files_modified, h.commands_run) == (["a.py"], ["a.py"], ["pytest -q"])
    assert rt.last_tracker.files_modified == ["a.py"]
    assert h.trace.iterations == len(lm.requests) == 5
    assert [s.code for s in h.trace.steps] == ["Path('a.py').read_text()", "Path('a.py').write_text(...)",
                                               "subprocess.run('pytest -q')"]
    assert "## Always-visible session summary" in lm.requests[0].system
    with pytest.raises(ValueError):
        DspyAgent(lm, mode="chain")
