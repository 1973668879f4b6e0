"""A prompt hook's stdin that is not the host's hook JSON (garbage, a prompt that is not a string, an empty stdin)
is named in the hook's one stderr line on every path (the console entry's standard-library client, the resident
service, the typer commands), stdout staying what the spec gives (spec §7.1 step 1 reads such stdin leniently), exit
0; the host's real hook JSON adds no line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.tortoise_sim.sessionkit import hook, running_service, short_tmp, start_hook_json
from tortoise_sim.hook_client import hook_outcome


@pytest.fixture
def work(monkeypatch):
    for var in ("MEMSIM_TORTOISE_DB", "MEMSIM_TORTOISE_SOCKET", "MEMSIM_HOOK_START_DRAIN", "MEMSIM_TORTOISE_REDACTOR"):
        monkeypatch.delenv(var, raising=False)
    with short_tmp() as d:
        yield d


def _args(command: str, work, *extra: str) -> list[str]:
    return [command, "--db", str(work / "db" / "t.kuzu"), "--socket", str(work / "none.sock"), *extra]


# (stdin, words the one stderr line holds)
VOLUNTEER_PROBLEMS = [
    (b"garbage", ("stdin is not JSON", "raw prompt of 7 bytes")),
    (b'{"prompt": 5}', ("prompt is a JSON number, not a string",)),
    (b'{"userPrompt": null}', ("userPrompt is a JSON null",)),
    (b'{"session_id": "s1", "hook_event_name": "PreToolUse"}', ("has no prompt",)),
    (b"", ("stdin is empty",)),
    (b" \n", ("stdin is empty",)),
    (b"[1, 2]", ("JSON array", "raw prompt")),
    (b"5", ("JSON number", "raw prompt")),
    (b"[" * 100_000, ("not JSON (nested too deeply",)),
    (b'{"prompt": "caf\xc3"}', ("not valid UTF-8 (byte 15)",)),
]


@pytest.mark.parametrize("stdin,words", VOLUNTEER_PROBLEMS, ids=[f"v{i}" for i in range(len(VOLUNTEER_PROBLEMS))])
def test_volunteer_names_what_is_wrong_with_its_stdin(work, stdin, words):
    out, note = hook_outcome(_args("hook-volunteer", work, "--harness", "claude"), stdin)
    assert out == "" and note is not None and note.startswith("memsim hook: hook-volunteer: "), note
    assert "\n" not in note and all(w in note for w in words), note
    assert not (work / "db").exists()


@pytest.mark.parametrize("stdin", [b'{"prompt": "thanks"}', b'{"prompt": ""}', b'"What did we decide?"',
                                   b'{"prompt": 5, "userPrompt": "What did we decide?"}',
                                   json.dumps({"session_id": "s", "prompt": "What did we decide about the cache?",
                                               "hook_event_name": "UserPromptSubmit"}).encode()],
                         ids=["courtesy", "blank", "json_string", "user_prompt", "claude_code"])
def test_the_hosts_hook_json_adds_no_line(work, stdin):
    assert hook_outcome(_args("hook-volunteer", work, "--harness", "claude"), stdin) == ("", None)


def test_session_start_names_a_bad_stdin_and_still_prints_the_digest(work):
    """§7.2: the session-start hook's output is the digest whatever its stdin (it only names the live session);
    a stdin the host would never send is named, an empty one (a hand run) and a hook JSON without a session id are
    not."""
    from tortoise_sim.transcripts import NO_MEMORY_LINE

    args = _args("hook-session-start", work, "--spool-dir", str(work / "spool"))
    for stdin, words in ((b"garbage", "stdin is not JSON"), (b'["s1"]', "stdin is a JSON array"),
                         (b'{"session_id": 5}', "session_id is a JSON number"),
                         (b'{"session_id": ""}', "session_id is an empty string")):
        out, note = hook_outcome(args, stdin)
        assert out == NO_MEMORY_LINE + "\n" and note is not None and words in note, (stdin, note)
        assert note.startswith("memsim hook: hook-session-start: ") and "\n" not in note
    for stdin in (b"", start_hook_json("s1").encode(), b'{"hook_event_name": "SessionStart"}'):
        assert hook_outcome(args, stdin) == (NO_MEMORY_LINE + "\n", None), stdin


def test_a_failure_of_the_hook_wins_over_the_stdin_note(work):
    bad = work / "t.kuzu"
    bad.write_bytes(b"not a kuzu store")
    out, note = hook_outcome(["hook-session-start", "--db", str(bad), "--socket", str(work / "none.sock")],
                             b"garbage")
    assert out == "" and note is not None and "read-only failed" in note and "stdin" not in note, note


def test_a_deeply_nested_stdin_names_no_session_and_never_raises():
    from tortoise_sim.hook_client import _hook_session_id, resolve_transcript_path

    deep = b"[" * 100_000
    assert _hook_session_id(deep) is None
    assert resolve_transcript_path(deep) == deep


@pytest.mark.parametrize("stdin,words", [("garbage", "stdin is not JSON"), ('{"prompt": 5}', "not a string")])
def test_console_entry_prints_the_one_line_and_exits_0(work, stdin, words):
    r = hook(_args("hook-volunteer", work, "--harness", "claude"), stdin)
    assert r.returncode == 0 and r.stdout == b"", r
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memsim hook: hook-volunteer: ") and words in lines[0], lines


def test_typer_command_prints_the_same_line(work):
    from harness.cli.main import app

    args = _args("hook-volunteer", work, "--harness", "claude")
    r = CliRunner().invoke(app, ["tortoise", *args], input="garbage")
    assert r.exit_code == 0 and r.stdout == "", r.output
    assert r.stderr.splitlines() == [hook_outcome(args, b"garbage")[1]]


def test_service_path_names_the_stdin_too(work):
    """With a service answering, its stdout is the hook's and the client adds the stdin's line."""
    db, sock = work / "db" / "t.kuzu", str(work / "s.sock")
    with running_service(db, sock) as svc:
        for stdin, words in ((b"garbage", "stdin is not JSON"), (b'{"prompt": 5}', "prompt is a JSON number")):
            out, note = hook_outcome(["hook-volunteer", "--db", str(db), "--socket", sock], stdin)
            assert out == "" and note is not None and words in note, note
        out, note = hook_outcome(["hook-session-start", "--db", str(db), "--socket", sock], b'{"session_id": []}')
        assert "No prior memory" in out or out.startswith("#"), out
        assert note is not None and "session_id is a JSON array" in note, note
        assert hook_outcome(["hook-volunteer", "--db", str(db), "--socket", sock], b'{"prompt": "thanks"}') \
            == ("", None)
        assert svc.requests >= 4  # every call above reached the service
