"""Unit tests for fractal_sim.session and fractal_sim.store (spec 3.1, 3.2, 6)."""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

import pytest

from fractal_sim import FractalSession, RunTrace, SessionState, list_sessions, session_path
from fractal_sim.models import TurnUsage
from fractal_sim.session import format_usage, render_stored_turn, summarize_usage
from fractal_sim.store import format_session_list, serialize_state


def test_add_agent_turn_errors_and_partial_update() -> None:
    s = FractalSession()
    with pytest.raises(ValueError, match=r"^Cannot add an agent turn before a user turn exists\.$"):
        s.add_agent_turn(status="succeeded")
    with pytest.raises(ValueError, match=r"^No session summary turn found for id 'turn-x'\.$"):
        s.add_agent_turn(status="succeeded", turn_id="turn-x")
    s.add_user_message("hi")
    for name in ("files_read", "changed_files", "commands_run"):
        with pytest.raises(TypeError, match=rf"^{name} must be list\[str\] or None\.$"):
            s.add_agent_turn(status="succeeded", **{name: ("a",)})
        with pytest.raises(TypeError):
            s.add_agent_turn(status="succeeded", **{name: ["a", 1]})
    assert s.state.summary.turns[0].agent is None  # type errors raise before any assignment
    with pytest.raises(ValueError):  # TurnUsage validation fails before the summary assignment
        s.add_agent_turn(status="succeeded", trace=RunTrace(status="completed", model="m", iterations=1,
                                                            max_iterations=3, duration_ms=-5))
    assert s.state.summary.turns[0].agent is None


def test_lists_stored_without_copy() -> None:
    s = FractalSession()
    s.add_user_message("hi")
    read = ["a.py"]
    s.add_agent_turn(status="succeeded", files_read=read)
    assert s.state.history[-1].files_read is read


def test_trim_points_and_load_does_not_trim(tmp_path: Path) -> None:
    s = FractalSession()
    for i in range(30):
        s.add_user_message(f"m{i}")
    assert len(s.state.history) == 20 and len(s.state.summary.turns) == 30
    s.state.history = s.state.history * 2  # 40 entries behind the session's back
    path = s.path(tmp_path, tmp_path / "st")
    path.parent.mkdir(parents=True)
    path.write_text(serialize_state(s.state))
    loaded = FractalSession.load(tmp_path, session_id=s.session_id, state_dir=tmp_path / "st")
    assert len(loaded.state.history) == 40
    assert len(loaded.session_history_payload()) == 20 and len(loaded.state.history) == 20
    loaded.state.history = loaded.state.history * 2
    loaded.save(tmp_path, state_dir=tmp_path / "st")
    assert len(json.loads(path.read_text())["history"]) == 20


def test_pending_save_exact_bytes(tmp_path: Path) -> None:
    s = FractalSession(session_id="abc")
    tid = s.add_user_message("ré")
    h = s.state.history[0]
    text = s.save(tmp_path, state_dir=tmp_path / "st").read_text()
    expected = (
        '{\n  "schema_version": 1,\n  "session_id": "abc",\n  "summary": {\n    "turns": [\n      {\n'
        f'        "turn_id": "{tid}",\n        "user": {{\n          "message": "r\\u00e9"\n        }},\n'
        '        "agent": null\n      }\n    ]\n  },\n  "history": [\n    {\n'
        f'      "turn_id": "{tid}",\n      "user_message": "r\\u00e9",\n      "status": "pending",\n'
        '      "files_read": [],\n      "files_modified": [],\n      "commands_run": [],\n      "trace": null,\n'
        f'      "error": null,\n      "created_at": "{h.created_at}",\n      "updated_at": "{h.updated_at}"\n'
        '    }\n  ]\n}\n')
    assert text == expected
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?\+00:00", h.created_at)


def test_roundtrip_is_byte_stable(tmp_path: Path) -> None:
    s = FractalSession()
    s.add_user_message("one")
    s.add_agent_turn(status="max_iterations", response="r", changed_files=["x"], error="e",
                     trace=RunTrace(status="max_iterations", model="m", iterations=2, max_iterations=2,
                                    duration_ms=10, telemetry_ref={"k": [1, None]}))
    first = s.save(tmp_path, state_dir=tmp_path / "st").read_text()
    again = FractalSession.load(tmp_path, session_id=s.session_id, state_dir=tmp_path / "st")
    assert serialize_state(again.state) == first


@pytest.mark.parametrize(("content", "fragment", "backup"), [
    ("{bad", "Ignoring unreadable Fractal session at", True),
    ("\ufeff{}", "Ignoring unreadable Fractal session at", True),
    ("[]", "expected a JSON object.", False),
    ('{"schema_version": 1, "history": 5}', "Ignoring malformed Fractal session at", False),
    ('{"schema_version": 1}', "embedded session_id", False),
    ('{"schema_version": "1"}', "expected schema_version=1.", False),
    ('{"session_id": "s"}', "expected schema_version=1.", False),
])
def test_load_branches(tmp_path: Path, content: str, fragment: str, backup: bool) -> None:
    path = session_path(tmp_path, "s", tmp_path / "st")
    path.parent.mkdir(parents=True)
    path.write_text(content, encoding="utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = FractalSession.load(tmp_path, session_id="s", state_dir=tmp_path / "st")
    assert s.session_id == "s" and s.state.summary.turns == []
    assert len(caught) == 1 and fragment in str(caught[0].message)
    assert caught[0].filename == __file__  # stacklevel 2: attributed to the caller
    assert bool(list(path.parent.glob("s.json.bad-*"))) is backup


def test_load_directory_named_json_and_missing(tmp_path: Path) -> None:
    path = session_path(tmp_path, "d", tmp_path / "st")
    path.mkdir(parents=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = FractalSession.load(tmp_path, session_id="d", state_dir=tmp_path / "st")
    assert s.session_id == "d" and "unreadable" in str(caught[0].message)
    assert "Could not preserve a backup." in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh = FractalSession.load(tmp_path, session_id="missing", state_dir=tmp_path / "st")
        new = FractalSession.load(tmp_path, state_dir=tmp_path / "st")
    assert fresh.session_id == "missing" and re.fullmatch(r"[0-9a-f]{32}", new.session_id)
    with pytest.raises(ValueError):
        FractalSession.load(tmp_path, session_id="a/b", state_dir=tmp_path / "st")


@pytest.mark.parametrize("bad", ["", "a/b", "x.json", ".", "a/", "/abs"])
def test_invalid_ids(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="Invalid Fractal session id"):
        session_path(tmp_path, bad)


def test_valid_odd_ids(tmp_path: Path) -> None:
    assert session_path(tmp_path, "..", tmp_path).name == "...json"
    assert session_path(tmp_path, "a b", tmp_path).name == "a b.json"


def test_listing_order_and_skips(tmp_path: Path) -> None:
    st = tmp_path / "st"
    assert list_sessions(tmp_path, st) == []
    a, b = FractalSession(session_id="a"), FractalSession(session_id="b")
    a.add_user_message("first a")
    pa, pb = a.save(tmp_path, state_dir=st), b.save(tmp_path, state_dir=st)
    (pa.parent / "junk.json").write_text("nope")
    (pa.parent / "a.json.bad-20260101000000").write_text("{}")
    os.utime(pa, (100, 100))
    os.utime(pb, (200, 200))
    rows = list_sessions(tmp_path, st)
    assert [(r.session_id, r.turn_count, r.first_message) for r in rows] == [("b", 0, ""), ("a", 1, "first a")]
    text = format_session_list(rows, current_id="a")
    assert text.splitlines()[0].endswith("(empty)") and "a (current)" in text
    assert text.endswith("Resume one with /resume <session-id>.")
    assert format_session_list([]) == "No stored sessions in this workspace."


def test_usage_totals_and_display() -> None:
    s = FractalSession()
    assert format_usage(s.usage_totals()) == "No recorded usage for this session yet."
    for ctx_tokens, cost in ((4100, 0.5), (2025, 0.25), (0, 0.125)):
        s.add_user_message("x")
        s.add_agent_turn(status="succeeded")
        s.state.summary.turns[-1].agent.usage = TurnUsage(input_tokens=10, output_tokens=1, cost=cost,
                                                          duration_ms=1500, iterations=1, context_tokens=ctx_tokens)
    totals = summarize_usage(s.state.summary)
    assert (totals.input_tokens, totals.iterations, totals.context_tokens, totals.cost) == (30, 3, 2025, 0.875)
    shown = format_usage(totals)
    assert "current context  2,025" in shown and shown.endswith("$0.8750") and "4.5s" in shown


def test_stored_turn_display() -> None:
    s = FractalSession()
    for status, response, error in (("failed", "", None), ("interrupted", "", None), ("max_iterations", "", "e"),
                                    ("max_iterations", "fb", "e"), ("succeeded", "done", None), ("failed", "", "x")):
        s.add_user_message("m")
        s.add_agent_turn(status=status, response=response, error=error)
    s.add_user_message("pending")
    shown = [render_stored_turn(t) for t in s.state.summary.turns]
    assert shown == ["Turn failed.", "Turn interrupted by user.",
                     "Reached max iterations; showing fallback response.\nNo fallback response.",
                     "Reached max iterations; showing fallback response.\nfb", "done", "x", "Running..."]


def test_state_defaults() -> None:
    state = SessionState()
    assert list(state.model_dump()) == ["schema_version", "session_id", "summary", "history"]
    assert SessionState.model_validate({"schema_version": True, "extra": 1}).schema_version == 1
