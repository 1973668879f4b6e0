"""Every hook failure writes one stderr line naming what failed (stdout clean, exit 0); a session end that spools
nothing records why in the spool's ``discarded.jsonl`` (on by default; ``--no-discard-ledger`` /
``MEMSIM_HOOK_END_LEDGER=0`` turn it off), and ``spool-flush`` and ``serve --status`` report the ledger."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.tortoise_sim.sessionkit import (
    claude_transcript,
    end_hook_json,
    hook,
    running_service,
    short_tmp,
    start_hook_json,
)


@pytest.fixture
def work():
    with short_tmp() as d:
        yield d


def _ledger(root) -> list[dict]:
    p = root / "discarded.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def _one_line(r) -> str:
    assert r.returncode == 0 and r.stdout == b"", r
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_an_unreadable_transcript_is_one_stderr_line_and_a_ledger_row(work):
    db, root = work / "db" / "t.kuzu", work / "db" / "spool"
    missing = work / "gone.jsonl"
    line = _one_line(hook(["hook-session-end", "--db", str(db)], end_hook_json("m1", missing)))
    assert str(missing) in line and "not found" in line and "m1" in line
    rows = _ledger(root)
    assert [(r["session_id"], r["reason"]) for r in rows] == [("m1", "session_end_transcript_missing")]
    assert str(missing) in rows[0]["detail"]
    bad = work / "bad.jsonl"
    bad.write_bytes(b'{"type": "user", "message": {"role": "user", "content": "\xff"}}\n')
    _one_line(hook(["hook-session-end", "--db", str(db)], end_hook_json("m2", bad)))
    assert _ledger(root)[-1]["reason"] == "session_end_transcript_unreadable"


def test_a_transcript_without_turns_is_recorded(work):
    db, root = work / "db" / "t.kuzu", work / "db" / "spool"
    t = work / "t.jsonl"
    t.write_text(json.dumps({"type": "queue-operation"}) + "\n" + json.dumps({"type": "attachment"}) + "\n")
    line = _one_line(hook(["hook-session-end", "--db", str(db)], end_hook_json("n1", t)))
    assert "no conversation turns (reader claude)" in line
    assert _ledger(root)[-1]["reason"] == "session_end_no_turns"
    line = _one_line(hook(["hook-session-end", "--db", str(db)], "not json at all"))
    assert "not a JSON object" in line and _ledger(root)[-1]["reason"] == "session_end_bad_hook_json"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_the_ledger_rows_of_a_session_end_can_be_turned_off(work, how):
    db, root = work / "db" / "t.kuzu", work / "db" / "spool"
    args, env = (["--no-discard-ledger"], {}) if how == "flag" else ([], {"MEMSIM_HOOK_END_LEDGER": "0"})
    _one_line(hook(["hook-session-end", "--db", str(db), *args], end_hook_json("o1", work / "gone.jsonl"), **env))
    assert _ledger(root) == []


def test_a_locked_store_is_one_stderr_line_for_the_read_hooks(work):
    from tortoise_sim.resident import open_sim

    db = work / "db" / "t.kuzu"
    db.parent.mkdir()
    sim = open_sim(db, "analysed", "minilm")  # a writer holds the store
    try:
        sim.create_point("decision", "the cache stays local", credibility="high", status="live")
        line = _one_line(hook(["hook-session-start", "--db", str(db)], start_hook_json("x")))
        assert "hook-session-start" in line and "read-only failed" in line and "lock" in line
        prompt = json.dumps({"prompt": "What did we decide about the cache?"})
        line = _one_line(hook(["hook-volunteer", "--harness", "claude", "--db", str(db)], prompt))
        assert "hook-volunteer" in line and "read-only failed" in line
    finally:
        sim.close()


def test_an_unexpected_failure_is_one_stderr_line(work):
    blocker = work / "not-a-dir"
    blocker.write_text("x")
    t = claude_transcript(work / "t.jsonl")
    line = _one_line(hook(["hook-session-end", "--db", str(work / "t.kuzu"), "--spool-dir", str(blocker)],
                          end_hook_json("u1", t)))
    assert line.startswith("memsim hook: hook-session-end failed: ") and "Error" in line


def test_spool_flush_and_serve_status_report_the_ledger(work, monkeypatch):
    from harness.cli.main import app

    db = work / "db" / "t.kuzu"
    for sid in ("r1", "r2"):
        hook(["hook-session-end", "--db", str(db)], end_hook_json(sid, work / "gone.jsonl"))
    hook(["hook-session-end", "--db", str(db)], "[]")
    monkeypatch.setenv("MEMSIM_TORTOISE_SOCKET", str(work / "none.sock"))
    r = CliRunner().invoke(app, ["tortoise", "spool-flush", "--db", str(db)])
    assert r.exit_code == 0, r.output
    ledger = json.loads(r.stdout)["ledger"]
    assert ledger["by_reason"] == {"session_end_transcript_missing": 2, "session_end_bad_hook_json": 1}
    assert [x["session_id"] for x in ledger["latest"]] == ["r1", "r2", ""]
    import harness.cli.tortoise_serve  # noqa: F401  (registers `serve`)

    r = CliRunner().invoke(app, ["tortoise", "serve", "--db", str(db), "--status"])
    assert r.exit_code == 1  # no service runs
    status = json.loads(r.stdout)
    assert status["state"] == "absent" and status["spool"]["rows"] == 3 and status["spool"]["due"] == 0
    assert status["spool"]["by_reason"]["session_end_transcript_missing"] == 2


def test_the_service_reports_a_swallowed_session_start_failure(work):
    """Through the service the digest's failure comes back as ``error`` and the client prints it as its line."""
    db, sock = work / "db" / "t.kuzu", str(work / "s.sock")
    with running_service(db, sock):
        import tortoise_sim.digest as digest

        real = digest.render_digest
        digest.render_digest = lambda ctx: (_ for _ in ()).throw(TypeError("broken row"))
        import tortoise_sim.hooks as hooks

        hooks.render_digest = digest.render_digest
        try:
            line = _one_line(hook(["hook-session-start", "--db", str(db), "--socket", sock], start_hook_json("x")))
        finally:
            digest.render_digest = hooks.render_digest = real
        assert "session-start digest failed: TypeError: broken row" in line


def test_the_service_reports_a_swallowed_volunteer_failure(work, monkeypatch):
    from tortoise_sim import volunteer

    db, sock = work / "db" / "t.kuzu", str(work / "s.sock")
    with running_service(db, sock):
        def broken(store, window, **kw):
            raise RuntimeError("search index gone")

        monkeypatch.setattr(volunteer, "run_volunteer_pipeline", broken)
        prompt = json.dumps({"prompt": "What did we decide about the cache?"})
        line = _one_line(hook(["hook-volunteer", "--harness", "claude", "--db", str(db), "--socket", sock], prompt))
        assert "volunteer pipeline failed: RuntimeError: search index gone" in line
