"""CLI tests for ``memsim fractal replay | sessions | show | usage`` (typer CliRunner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app

FIXTURE = Path(__file__).parent / "fixtures" / "replay_30.yaml"
runner = CliRunner()


def invoke(*args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, ["fractal", *args], env=env)


@pytest.fixture
def replayed(tmp_path: Path) -> tuple[Path, Path, str, object]:
    ws, state = tmp_path / "ws", tmp_path / "state"
    result = invoke("replay", str(FIXTURE), "--workspace", str(ws), "--state-dir", str(state))
    assert result.exit_code == 0, result.output
    files = list(state.glob("workspaces/*/sessions/*.json"))
    assert len(files) == 1
    return ws, state, files[0].stem, result


def test_replay_30_turns_then_show(replayed) -> None:
    ws, state, sid, result = replayed
    out = result.output
    assert out.count("\nturn ") + out.startswith("turn ") == 30
    assert "turn   5 failed" in out and "turn   9 max_iterations" in out and "turn  13 interrupted" in out
    assert "turn  29 pending" in out and f"saved {state}" in out.replace("\n", "")
    data = json.loads((next(state.glob("workspaces/*/sessions/*.json"))).read_text())
    assert len(data["summary"]["turns"]) == 30 and len(data["history"]) == 20
    assert (ws / "NOTES.txt").read_text() == "notes\n" and not (ws / "tests/test_app.py").exists()
    shown = invoke("show", sid, "--workspace", str(ws), "--state-dir", str(state), "--counter", "chars4")
    assert shown.exit_code == 0, shown.output
    assert "Turn 30 (turn-" in shown.output and "## Always-visible session summary" in shown.output
    assert "## Workspace instructions (AGENTS.md)" in shown.output and "Run pytest -q after every change." in \
        shown.output
    assert "history payload (20 of max 20 turns; summary has 30)" in shown.output
    assert "ctx (chars4;" in shown.output


def test_usage_and_sessions(replayed) -> None:
    ws, state, sid, _ = replayed
    usage = invoke("usage", sid, "--workspace", str(ws), "--state-dir", str(state))
    assert usage.exit_code == 0 and "input tokens" in usage.output and "current context  2,500" in usage.output
    listing = invoke("sessions", "--workspace", str(ws), "--state-dir", str(state), "--json")
    rows = json.loads(listing.output.split("\nsessions dir")[0])
    assert rows[0]["session_id"] == sid and rows[0]["turn_count"] == 30
    plain = invoke("sessions", "--workspace", str(ws), env={"FRACTAL_STATE_HOME": str(state)})
    assert f"{sid}  30 turns" in plain.output


def test_replay_resume_continues(replayed, tmp_path: Path) -> None:
    ws, state, sid, _ = replayed
    script = tmp_path / "more.json"
    script.write_text(json.dumps({"turns": ["one more"]}))
    result = invoke("replay", str(script), "-w", str(ws), "--state-dir", str(state), "--resume", sid)
    assert result.exit_code == 0, result.output
    data = json.loads(next(state.glob(f"workspaces/*/sessions/{sid}.json")).read_text())
    assert len(data["summary"]["turns"]) == 31


@pytest.mark.parametrize(("args", "message"), [
    (("show", "a/b"), "Invalid Fractal session id: 'a/b'"),
    (("show", "nope"), "No Fractal session found for id 'nope'."),
    (("usage", "x.json"), "Invalid Fractal session id: 'x.json'"),
    (("show", "nope", "--counter", "zzz"), "invalid value for '--counter': 'zzz'"),
])
def test_errors_are_one_line(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = invoke(*args, "--workspace", str(tmp_path), "--state-dir", str(tmp_path / "st"))
    assert result.exit_code == (2 if "--counter" in args else 1)  # a bad option value is a usage error
    assert "Traceback" not in result.output and message in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(("name", "text", "message"), [
    ("bad.json", '{"turns": [\n{"message": }]}', "bad.json:2: invalid JSON"),
    ("bad.yaml", "turns:\n  - message: [unclosed\n", "invalid YAML"),
    ("bad2.json", '{"turns": [{"message": "x", "actions": [{"jump": 1}]}]}', "turns[0].actions[0]: unknown action"),
    ("bad3.json", '{"files": {"../escape.txt": "x"}, "turns": ["m"]}', "outside the workspace"),
])
def test_bad_scripts(tmp_path: Path, name: str, text: str, message: str) -> None:
    script = tmp_path / name
    script.write_text(text)
    result = invoke("replay", str(script), "-w", str(tmp_path / "ws"), "--state-dir", str(tmp_path / "st"))
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "escape.txt").exists()


def test_show_rejected_file_warns_and_shows_empty(tmp_path: Path) -> None:
    state, ws = tmp_path / "st", tmp_path / "ws"
    ws.mkdir()
    from fractal_sim import session_path

    path = session_path(ws, "broken", state)
    path.parent.mkdir(parents=True)
    path.write_text("[1]")
    result = invoke("show", "broken", "-w", str(ws), "--state-dir", str(state), "--no-instructions")
    assert result.exit_code == 0
    assert "warning: Ignoring malformed Fractal session at" in result.output
    assert "No prior Fractal session context." in result.output


def test_unwritable_state_dir_is_one_line_error(tmp_path: Path) -> None:
    state = tmp_path / "statefile"
    state.write_text("not a directory")
    result = invoke("replay", str(FIXTURE), "-w", str(tmp_path / "ws"), "--state-dir", str(state))
    assert result.exit_code == 1 and "turn 1: cannot save the session" in result.output
    assert "Traceback" not in result.output
