from __future__ import annotations

import json
import stat

import pytest
from typer.testing import CliRunner

from tests.tortoise_sim.simkit import make_sim, t0
from tortoise_sim.embed import HashingEncoder
from tortoise_sim.expansion import reinjection_merge_order, seeded_sessions
from tortoise_sim.hooks import PROMPT_CAP, extract_prompt, hook_volunteer_turn
from tortoise_sim.spool import Spool, local_capture_post

TURNS = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def test_spool_write_modes_and_files(tmp_path):
    sp = Spool(tmp_path)
    assert sp.spool_write("s1", TURNS, "claude", "hook", "m")["action"] == "rewrite"
    assert sp.spool_write("s1", TURNS, "claude", "hook", "m")["action"] == "noop"
    more = [*TURNS, {"role": "user", "content": "again"}]
    assert sp.spool_write("s1", more, "claude", "hook", "m")["action"] == "append"
    assert sp.read_turns("s1") == more
    assert sp.spool_write("s1", [{"role": "user", "content": "edited"}], "claude", "hook", "m")["action"] == "rewrite"
    for f in (tmp_path / "entries").iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    line = (tmp_path / "entries").glob("*.turns.jsonl").__next__().read_text().splitlines()[0]
    assert line == '{"role": "user", "content": "edited"}'
    assert sp.spool_write("s2", [], "claude", "hook", "m") == {"action": "none"}
    with pytest.raises(UnicodeEncodeError):
        sp.spool_write("bad\ud800", TURNS, "claude", "hook", "m")


def test_spool_probe_corrupt_and_empty(tmp_path):
    sp = Spool(tmp_path)
    sp.spool_write("verify-hook-20260301T090000Z-abc123", TURNS, "claude", "hook", "m")
    sp.spool_write("s1", TURNS, "claude", "hook", "m")
    (tmp_path / "entries" / "broken.meta.json").write_text("{not json")
    c = sp.flush_spool(lambda b: 200, 1)
    assert c["skipped_probe"] == 1 and c["filed"] == 1 and c["discarded"] == 1
    assert [r["reason"] for r in sp.ledger_rows()] == ["corrupt_entry"]


def test_spool_exception_and_local_capture(tmp_path):
    sim = make_sim()
    sp = Spool(tmp_path)
    sp.spool_write("s1", [{"role": "user", "content": "decision: adopt the spool"}], "claude", "hook", "m")

    def boom(body):
        raise ConnectionError("offline")

    c = sp.flush_spool(boom, 1000)
    assert c["failed"] == 1 and sp.read_meta("s1")["attempts"] == 1
    assert sp.ledger_rows()[-1]["reason"] == "entry_failed"
    c = sp.flush_spool(local_capture_post(sim.capture_session), 10_000_000)
    assert c["filed"] == 1 and sim.get_point("s1_t0") is not None


def test_expansion_helpers():
    pool = [{"id": "a", "session_id": "s1"}, {"id": "b", "session_id": "idx:1"}, {"id": None, "session_id": "s3"},
            {"id": "c", "session_id": "s2"}, {"id": "d", "session_id": "s1"}]
    seeds = seeded_sessions(pool)
    assert seeds == [("s1", 0, "a"), ("s2", 3, "c")]
    fetched = [{"id": "t1", "session_id": "s1"}, {"id": "a", "session_id": "s1"}, {"id": "t2", "session_id": "s2"}]
    merged = [h["id"] for h in reinjection_merge_order(pool, seeds, fetched)]
    assert merged == ["a", "b", None, "c", "t2", "d", "t1"]


def test_extract_prompt_variants():
    assert extract_prompt(b'{"prompt": "a\\r\\nb"}') == "a\nb"
    assert extract_prompt(b'{"userPrompt": "x"}') == "x"
    assert extract_prompt(b'{"prompt": 3}') == ""
    assert extract_prompt(b'"just a string"') == "just a string"
    assert extract_prompt(b"[1, 2]") == "[1, 2]"
    assert extract_prompt(b"\xff raw") == "\ufffd raw"
    big = extract_prompt(json.dumps({"prompt": "\u00e9" * 10000}).encode())
    assert len(big.encode()) <= PROMPT_CAP and len(big) == PROMPT_CAP // 2


def test_hook_never_raises():
    def exploding():
        raise RuntimeError("no store")

    assert hook_volunteer_turn(b'{"prompt": "What did we decide?"}', "claude", store=exploding) == ("", 0)
    assert hook_volunteer_turn(b'{"prompt": "What did we decide?"}', "claude", store=None) == ("", 0)


@pytest.fixture
def cli(tmp_path, monkeypatch):
    import harness.cli.tortoise as cmd

    monkeypatch.setattr(cmd._LazyEncoder, "encode", lambda self, texts: HashingEncoder().encode(texts))
    monkeypatch.setenv("MEMSIM_TORTOISE_DB", str(tmp_path / "cli.kuzu"))
    from harness.cli.main import app

    return CliRunner(), app


def test_cli_hook_volunteer_claude(cli):
    runner, app = cli
    prompt = json.dumps({"session_id": "abc", "hook_event_name": "UserPromptSubmit",
                         "prompt": "What did we decide about the simulator store?"})
    r = runner.invoke(app, ["tortoise", "hook-volunteer", "--harness", "claude"], input=prompt)
    assert r.exit_code == 0 and r.stdout == ""  # no store yet: nothing, nothing created
    r = runner.invoke(app, ["tortoise", "create-point", "decision", "Use Kuzu for the simulator store.",
                            "--credibility", "gold", "--live"])
    assert r.exit_code == 0, r.output
    pid = r.stdout.strip()
    r = runner.invoke(app, ["tortoise", "hook-volunteer", "--harness", "claude"], input=prompt)
    assert r.exit_code == 0 and r.stdout.count("\n") == 1
    out = json.loads(r.stdout)
    assert f"point/{pid}" in out["hookSpecificOutput"]["additionalContext"]
    for bad in ("thanks!", "not json {", '{"no_prompt": 1}', "", '{"prompt": "How do I bake bread?"}'):
        r = runner.invoke(app, ["tortoise", "hook-volunteer", "--harness", "claude"], input=bad)
        assert r.exit_code == 0 and r.stdout == "", bad
    r = runner.invoke(app, ["tortoise", "hook-volunteer", "--harness", "cline"], input=prompt)
    assert "contextModification" in json.loads(r.stdout)


def test_cli_context_volunteer_retract(cli):
    runner, app = cli
    r = runner.invoke(app, ["tortoise", "context"])
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 1
    pid = runner.invoke(app, ["tortoise", "create-point", "decision", "Use Kuzu for the simulator store.",
                              "--credibility", "gold", "--live"]).stdout.strip()
    r = runner.invoke(app, ["tortoise", "volunteer"], input="What did we decide about the simulator store?")
    assert r.exit_code == 0 and json.loads(r.stdout)["pointers"][0]["id"] == pid
    r = runner.invoke(app, ["tortoise", "retract", pid])
    assert r.exit_code == 0 and json.loads(r.stdout)["status"] == "retracted"
    r = runner.invoke(app, ["tortoise", "retract", pid])
    assert r.exit_code == 1 and "already_terminal" in r.output
    r = runner.invoke(app, ["tortoise", "retract", "x') DETACH DELETE n //"])
    assert r.exit_code == 1 and "not_found" in r.output
    r = runner.invoke(app, ["tortoise", "hook-session-start"])
    assert r.exit_code == 0 and "Use Kuzu for the simulator store." in r.stdout
    r = runner.invoke(app, ["tortoise", "checkpoint"], input='[{"content": "a"}, {"wing": "w"}]')
    assert r.exit_code == 1 and "error" in r.output
    r = runner.invoke(app, ["tortoise", "capture", "--session-id", "s1"],
                      input=json.dumps([{"role": "user", "content": "decision: pin kuzu"}]))
    assert r.exit_code == 0 and json.loads(r.stdout)["extracted"] == 1
    r = runner.invoke(app, ["tortoise", "volunteer"], input='[{"role": "bot", "content": "x"}]')
    assert r.exit_code == 1 and "INVALID_ROLE" in r.output


def test_t0_helper_and_session_end():
    sim = make_sim()
    t0(sim, "decision", "x")
    out, code = sim.hook_session_end([{"role": "user", "content": "decision: close the loop"}], "end1")
    assert code == 0 and json.loads(out)["extracted"] == 1


def test_cli_hook_session_end_spools_and_files(cli, tmp_path):
    runner, app = cli
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("\n".join(json.dumps(x) for x in [
        {"type": "user", "message": {"role": "user", "content": "decision: adopt the release train"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Noted."},
                                                                            {"type": "tool_use", "name": "x"}]}},
        {"type": "summary"}, "not an object"]) + "\nnot json\n")
    hook = {"session_id": "sess-1", "transcript_path": str(transcript), "hook_event_name": "SessionEnd"}
    r = runner.invoke(app, ["tortoise", "hook-session-end", "--filing", "inline"], input=json.dumps(hook))
    assert r.exit_code == 0 and r.stdout == ""
    r = runner.invoke(app, ["tortoise", "show", "sess-1_t1"])
    assert json.loads(r.stdout)["content"] == "[assistant] Noted."
    r = runner.invoke(app, ["tortoise", "spool-flush"])
    assert json.loads(r.stdout)["skipped_filed"] == 1
    r = runner.invoke(app, ["tortoise", "hook-session-end"], input="garbage")
    assert r.exit_code == 0 and r.stdout == ""
