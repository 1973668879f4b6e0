"""Replay scripts refuse keys and numbers the format does not have, in one line naming the file and the entry."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fractal_sim.replay import ScriptError, parse_replay_script
from harness.cli.main import app


@pytest.mark.parametrize(("script", "where", "needle"), [
    ({"turn": ["m"], "turns": ["m"]}, "script", "unknown keys ['turn']"),
    ({"turns": [{"message": "m", "actions": [{"write": {"path": "a.py", "txt": "x"}}]}]}, "turns[0].actions[0]",
     "unknown keys ['txt'] (allowed: path, text)"),
    ({"turns": [{"message": "m", "actions": [{"read": {"path": "a.py", "text": "x"}}]}]}, "turns[0].actions[0]",
     "unknown keys ['text']"),
    ({"turns": [{"message": "m", "actions": [{"open": {"path": "a.py", "mdoe": "w"}}]}]}, "turns[0].actions[0]",
     "unknown keys ['mdoe']"),
    ({"turns": [{"message": "m", "actions": [{"run": {"command": "ls", "okay": False}}]}]}, "turns[0].actions[0]",
     "unknown keys ['okay']"),
    ({"turns": [{"message": "m", "outcome": {"return": {"respones": "x"}}}]}, "turns[0].outcome",
     "unknown keys ['respones']"),
    ({"turns": [{"message": "m", "outcome": {"raise": {"mesage": "x"}}}]}, "turns[0].outcome",
     "unknown keys ['mesage']"),
    ({"turns": [{"message": "m", "trace": {"usage_main": {"input_token": 5}}}]}, "turns[0].trace.usage_main",
     "unknown keys ['input_token']"),
    ({"turns": [{"message": "m", "trace": {"usage_sub": {"output_tokens": -3}}}]}, "turns[0].trace.usage_sub",
     "output_tokens must be a whole number >= 0"),
    ({"turns": [{"message": "m", "trace": {"duration_ms": -1}}]}, "turns[0].trace", "duration_ms must be"),
    ({"turns": [{"message": "m", "trace": {"iterations": -2}}]}, "turns[0].trace", "iterations must be"),
    ({"turns": [{"message": "m", "trace": {"step_input_tokens": [10, -1]}}]}, "turns[0].trace",
     "step_input_tokens[1] must be"),
])
def test_unknown_keys_and_negative_counts_are_refused(script, where, needle) -> None:
    with pytest.raises(ScriptError) as info:
        parse_replay_script(script)
    assert str(info.value).startswith(where + ": ") and needle in str(info.value), str(info.value)


def test_the_documented_forms_still_parse() -> None:
    script = parse_replay_script({"files": {"a.py": "x\n"}, "turns": [
        {"message": "m", "actions": [{"read": "a.py"}, {"write": {"path": "a.py", "text": "y\n"}},
                                     {"open": {"path": "a.py", "mode": "r"}}, {"run": {"command": ["ls"], "ok": False}}],
         "outcome": {"return": {"response": "Done.", "changed_files": ["a.py"]}},
         "trace": {"status": "max_iterations", "iterations": 2, "duration_ms": 5,
                   "usage_main": {"input_tokens": 10, "output_tokens": 2, "cost": 0.1, "cache_hits": 0},
                   "step_input_tokens": [1200, 2400]}},
        {"message": "n", "outcome": {"raise": {"message": "boom", "attach": "cause"}}}]})
    assert len(script.turns) == 2 and script.turns[0].script.actions[1].text == "y\n"


def test_cli_names_the_file_and_the_entry(tmp_path: Path) -> None:
    bad = tmp_path / "script.yaml"
    bad.write_text("turns:\n  - message: m\n    actions: [{write: {path: a.py, txt: hello}}]\n", encoding="utf-8")
    ws = tmp_path / "ws"
    ws.mkdir()
    res = CliRunner().invoke(app, ["fractal", "replay", str(bad), "-w", str(ws), "--state-dir", str(tmp_path / "s")])
    assert res.exit_code == 1
    assert res.stderr.strip().splitlines() == [f"error: {bad}: turns[0].actions[0]: unknown keys ['txt'] "
                                               "(allowed: path, text)"]
    assert not (ws / "a.py").exists()  # nothing half-done: the old parser wrote an empty a.py
