"""Transcript readers of the session-end hook (tortoise_sim.transcripts). Every fixture is written by hand in the
line shapes the hosts page describes (Claude Code JSONL, Codex rollout); no host text is copied."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tortoise_sim import transcripts
from tortoise_sim.hooks import transcript_turns as hooks_transcript_turns
from tortoise_sim.transcripts import read_transcript, reader_for, strip_injected, transcript_turns


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _user(uuid: str, content, *, side: bool = False, parent: str | None = None) -> dict:
    return {"type": "user", "uuid": uuid, "parentUuid": parent, "isSidechain": side,
            "timestamp": "2026-12-02T08:00:00.000Z", "message": {"role": "user", "content": content}}


def _assistant(uuid: str, blocks: list[dict], *, side: bool = False, parent: str | None = None) -> dict:
    return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "isSidechain": side,
            "timestamp": "2026-12-02T08:00:01.000Z",
            "message": {"role": "assistant", "model": "mock-model", "content": blocks}}


PROMPT = "Let us settle the storage question.\ndecision: keep the cache on local disk"
REPLY = "Agreed: the cache stays on local disk."


def claude_two_turn(tmp_path: Path) -> Path:
    """One prompt, one reply, and the bookkeeping lines a real transcript has around them (our own words)."""
    return _jsonl(tmp_path / "two.jsonl", [
        {"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-12-02T08:00:00.000Z"},
        _user("u1", PROMPT),
        {"type": "attachment", "attachment": {"type": "hook_success", "hookEvent": "SessionStart",
                                              "content": "# Memory digest from earlier sessions\n- (decision) x"}},
        {"type": "api-request-shape", "shape": {"messages": 2}},
        {"type": "api-request-blob", "message": {"role": "user", "content": "<system-reminder>a host note"
                                                 "</system-reminder>\n" + PROMPT}},
        {"type": "api-request", "requestId": "r1"},
        _assistant("a1", [{"type": "text", "text": REPLY}], parent="u1"),
        {"type": "cost-state", "usd": 0},
    ])


def claude_tool_session(tmp_path: Path) -> Path:
    """One prompt, one reply that runs a tool first: assistant tool_use, user tool_result, assistant text."""
    return _jsonl(tmp_path / "tool.jsonl", [
        _user("u1", "What is in the notes folder?\ndecision: notes live in ./notes"),
        _assistant("a1", [{"type": "text", "text": "Checking."},
                          {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls notes"}}],
                   parent="u1"),
        {"type": "tools-used", "tools": ["Bash"]},
        _user("u2", [{"type": "tool_result", "tool_use_id": "t1", "content": "a.md\nb.md"}], parent="a1"),
        {"type": "last-prompt", "prompt": "What is in the notes folder?"},
        _assistant("a2", [{"type": "text", "text": "Two files: a.md and b.md."}], parent="u2"),
    ])


def test_claude_two_turn_session_stores_two_turns_where_the_old_reader_stored_three(tmp_path):
    path = claude_two_turn(tmp_path)
    turns = read_transcript(path, "claude")
    assert turns == [{"role": "user", "content": PROMPT}, {"role": "assistant", "content": REPLY}]
    legacy = read_transcript(path, "claude", "legacy")  # the previous reader, kept as a named option
    assert len(legacy) == 3 and legacy[1]["content"].startswith("<system-reminder>")
    hook = {"session_id": "s1", "transcript_path": str(path)}
    assert hooks_transcript_turns(hook) == turns  # the session-end default (hooks.transcript_turns) is claude
    assert hooks_transcript_turns(hook, "claude", "legacy") == legacy


def test_claude_tool_session_is_one_prompt_and_one_reply(tmp_path):
    path = claude_tool_session(tmp_path)
    turns = read_transcript(path, "claude")
    assert [t["role"] for t in turns] == ["user", "assistant"]
    assert turns[1]["content"] == "Checking.\n\nTwo files: a.md and b.md."
    assert "ls notes" not in json.dumps(turns) and "b.md\n" not in turns[1]["content"]
    rendered = read_transcript(path, "claude", "claude-tools")  # the compact tool rendering, a named option
    assert [t["role"] for t in rendered] == ["user", "assistant"]
    assert '[tool Bash] {"command": "ls notes"}' in rendered[1]["content"]
    assert "[tool result] a.md b.md" in rendered[1]["content"]


def test_claude_sidechain_and_meta_lines_are_ignored(tmp_path):
    path = _jsonl(tmp_path / "side.jsonl", [
        _user("u1", "Plan the release."),
        _user("s1", "sub-agent task text", side=True),
        _assistant("s2", [{"type": "text", "text": "sub-agent answer"}], side=True),
        {**_user("m1", "a host-generated caveat"), "isMeta": True},
        _assistant("a1", [{"type": "text", "text": "Release planned."}]),
    ])
    assert read_transcript(path, "devin") == [{"role": "user", "content": "Plan the release."},
                                              {"role": "assistant", "content": "Release planned."}]


def codex_rollout(tmp_path: Path) -> Path:
    def msg(role: str, kind: str, text: str) -> dict:
        return {"timestamp": "2026-12-02T08:00:00.000Z", "type": "response_item",
                "payload": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}}

    return _jsonl(tmp_path / "rollout-2026-12-02T08-00-00-abc.jsonl", [
        {"type": "session_meta", "payload": {"id": "abc", "cwd": "/w"}},
        msg("developer", "input_text", "host instructions in our own words"),
        msg("developer", "input_text", "# Memory digest from earlier sessions\n- (decision) y"),
        msg("user", "input_text", "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
        {"type": "turn_context", "payload": {"cwd": "/w"}},
        msg("user", "input_text", "Pick a port.\ndecision: the dev server uses port 8123"),
        {"type": "event_msg", "payload": {"type": "task_started"}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "exec_command",
                                              "arguments": "{\"cmd\": \"pwd\"}", "call_id": "c1"}},
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "/w"}},
        msg("assistant", "output_text", "Port 8123 it is."),
        {"type": "event_msg", "payload": {"type": "task_complete"}},
    ])


def test_codex_rollout_gives_the_prompt_and_the_reply_without_injected_context(tmp_path):
    path = codex_rollout(tmp_path)
    turns = read_transcript(path, "codex")
    assert turns == [{"role": "user", "content": "Pick a port.\ndecision: the dev server uses port 8123"},
                     {"role": "assistant", "content": "Port 8123 it is."}]
    assert read_transcript(path, "codex", "legacy") == []  # the old reader found nothing in a rollout
    assert hooks_transcript_turns({"transcript_path": str(path)}, "codex") == turns


def test_memsims_own_blocks_are_cut_from_captured_text(tmp_path):
    from tortoise_sim.digest import render_digest
    from tortoise_sim.volunteer import build_block

    block = build_block(["- **cache** \u2192 point/pt_abcdef12 \u2014 the cache (read its supports)"])
    digest = render_digest({"points": [{"pointKind": "decision", "content": "keep the cache"}], "diary": [],
                            "events": [], "confidence": [], "no_prior_sessions": False})
    text = f"Before.\n{block}\nMiddle.\n{digest}After."
    assert strip_injected(text) == "Before.\n\nMiddle.\nAfter."
    path = _jsonl(tmp_path / "echo.jsonl", [_user("u1", "Echo it.\n" + block),
                                            _assistant("a1", [{"type": "text", "text": digest}])])
    assert read_transcript(path, "claude") == [{"role": "user", "content": "Echo it."}]  # a reply only of memory


def test_marker_constants_equal_the_real_ones():
    from tortoise_sim import digest, redaction, volunteer

    assert transcripts.BLOCK_HEADER == volunteer.BLOCK_HEADER
    assert transcripts.DIGEST_TITLE == digest.DIGEST_TITLE
    assert transcripts.CLOSING_HINT == digest.CLOSING_HINT
    assert transcripts.NO_MEMORY_LINE == digest.NO_MEMORY_LINE
    assert transcripts.DATA_NOTICE == redaction.DATA_NOTICE


def test_reader_choice_and_turns_first():
    assert [reader_for(h) for h in ("claude", "devin", "codex", "cline", "other")] == \
        ["claude", "claude", "codex", "legacy", "legacy"]
    assert reader_for("codex", "claude-tools") == "claude-tools"
    with pytest.raises(ValueError):
        reader_for("claude", "nope")
    given = {"turns": [{"role": "user", "content": "hi"}], "transcript_path": "/nonexistent"}
    assert transcript_turns(given, "codex") == [{"role": "user", "content": "hi"}]
    with pytest.raises(transcripts.TranscriptError) as err:
        transcript_turns({"transcript_path": "/nonexistent/t.jsonl"}, "claude")
    assert err.value.reason == "transcript_missing"


HEAVY = ("kuzu", "numpy", "torch", "pydantic", "dspy")


def test_the_reader_and_the_session_end_client_path_import_nothing_heavy(tmp_path):
    path = claude_two_turn(tmp_path)
    hook = json.dumps({"session_id": "light-1", "transcript_path": str(path)})
    code = (
        "import sys, json\n"
        "import tortoise_sim.transcripts\n"
        "from tortoise_sim.hook_client import run_hook\n"
        f"run_hook('hook-session-end', ['--db', {str(tmp_path / 'db' / 't.kuzu')!r}, '--filing', 'spool',"
        f" '--socket', {str(tmp_path / 'none.sock')!r}], stdin={hook!r}.encode())\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []
    from tortoise_sim.spool import Spool

    assert Spool(tmp_path / "db" / "spool").read_turns("light-1") == read_transcript(path, "claude")


def test_readers_never_raise_on_odd_lines(tmp_path):
    """Lines of every odd shape (wrong types where objects, strings or lists are expected, torn JSON, a JSON value
    that is not an object) are skipped or read by the new readers, never raised on; only an unreadable file raises
    TranscriptError. The legacy reader keeps the previous reader's failure on a non-string text part."""
    import random

    rng = random.Random(7)
    values = [None, 1, 2.5, True, "x", [], {}, [1, "a"], {"type": "text"}, {"text": 3}, [{"type": "text", "text": 4}],
              [{"type": "tool_use", "input": {"a": [1]}}], [{"type": "tool_result", "content": [{"text": None}]}]]
    lines = []
    for _ in range(400):
        row = {"type": rng.choice(["user", "assistant", "response_item", "attachment", 3, None]),
               "isSidechain": rng.choice([False, True, None, "no"]),
               "message": rng.choice([{"role": rng.choice(["user", "assistant", 5]), "content": rng.choice(values)},
                                      rng.choice(values)]),
               "payload": rng.choice([{"type": "message", "role": rng.choice(["user", "assistant", "developer"]),
                                       "content": rng.choice(values)}, rng.choice(values)])}
        lines.append(json.dumps(row))
    lines += ["{torn", "[1, 2]", "\"a string\"", "", "null"]
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for reader in ("claude", "claude-tools", "codex"):
        turns = read_transcript(path, "claude", reader)
        assert all(set(t) == {"role", "content"} and isinstance(t["content"], str) for t in turns)
    with pytest.raises(TypeError):  # the previous reader, kept as it was, fails on a non-string text part
        read_transcript(path, "claude", "legacy")
