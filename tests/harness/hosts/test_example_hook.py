"""The documented example hook (docs/examples/hosts/note_hook.py) runs on hand-written hook JSON, and what it
prints is found by the wire observations in requests shaped like Claude Code's and Codex's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.hosts.scenario import EXAMPLES_DIR, expand, hook_lines, load_scenario, scenario_files
from harness.hosts.wire import deliveries, memory_items

HOOK = EXAMPLES_DIR / "note_hook.py"


def _run(payload: dict) -> str:
    out = subprocess.run([sys.executable, str(HOOK)], input=json.dumps(payload).encode(), capture_output=True,
                         timeout=30, check=True)
    return out.stdout.decode("utf-8")


def _start() -> str:
    return _run({"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup", "cwd": "/w"})


def _prompt(text: str) -> str:
    return _run({"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": text, "cwd": "/w"})


def test_example_hook_outputs() -> None:
    (note,) = memory_items("SessionStart", _start())
    assert note.kind == "hook_text" and note.text.strip()
    out = _prompt("Where does the Ledger keep its records?")
    assert json.loads(out)["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    (match,) = memory_items("UserPromptSubmit", out)
    assert "ledger" in match.text.lower() and "deploy" not in match.text.lower()
    assert _prompt("Please say hello.") == ""


def test_example_hook_output_found_at_the_wire() -> None:
    items = memory_items("SessionStart", _start()) + memory_items(
        "UserPromptSubmit", _prompt("Where does the ledger keep its records?"))
    note, match = (i.text for i in items)
    claude = {"api": "anthropic.messages", "body": {"system": "Test system text.", "tools": [{"name": "T"}], "messages": [
        {"role": "user", "content": "Where does the ledger keep its records?"},
        {"role": "system", "content": [{"type": "text", "text": "SessionStart:startup hook success: " + note.strip()},
                                       {"type": "text", "text": "UserPromptSubmit hook additional context: " + match}]}]}}
    codex = {"api": "openai.responses", "body": {"instructions": "Test.", "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": note}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ledger?"}]},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": match}]}]}}
    a, b = deliveries(claude, items)
    assert (a.message_index, a.block_index, a.prefix, a.exact) == (1, 0, "SessionStart:startup hook success: ", True)
    assert (b.message_index, b.block_index, b.prefix, b.exact) == (1, 1, "UserPromptSubmit hook additional context: ",
                                                                    True)
    assert [(d.message_index, d.role, d.prefix) for d in deliveries(codex, items)] == [(0, "developer", ""),
                                                                                       (2, "developer", "")]
    assert deliveries({"api": "openai.responses", "body": {"input": "ledger?"}}, items) == []


def test_the_example_scenario_points_at_the_example_hook() -> None:
    (f,) = [f for f in scenario_files() if f.stem == "own-hook-example"]
    lines = hook_lines(load_scenario(f).hooks)
    assert set(lines) == {"session_start", "user_prompt_submit"}
    cmd = expand(lines["user_prompt_submit"], {"python": sys.executable, "examples": str(EXAMPLES_DIR)})
    payload = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "when do we deploy?"}).encode()
    out = subprocess.run(["sh", "-c", cmd], input=payload, capture_output=True, timeout=30, check=True)
    (item,) = memory_items("UserPromptSubmit", out.stdout.decode())
    assert "deploy" in item.text.lower()
    assert Path(cmd.split()[1]) == HOOK
