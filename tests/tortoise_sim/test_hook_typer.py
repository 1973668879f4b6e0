"""The typer definitions of the hook commands (what ``memsim tortoise hook-* --help`` shows, and what a caller of
the typer app runs) delegate to the standard-library hook client: the same options, the same spool-first session
end, the same session-start drain, the same one stderr line per failure, exit 0."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from tests.tortoise_sim.sessionkit import (
    DECISION,
    REPLY,
    claude_transcript,
    end_hook_json,
    hook,
    is_filed,
    short_tmp,
    spool_meta,
    start_hook_json,
)


@pytest.fixture
def work(monkeypatch):
    for var in ("MEMSIM_TORTOISE_DB", "MEMSIM_TORTOISE_SOCKET", "MEMSIM_HOOK_END_FILING", "MEMSIM_HOOK_START_DRAIN",
                "MEMSIM_HOOK_END_LEDGER", "MEMSIM_TORTOISE_REDACTOR"):
        monkeypatch.delenv(var, raising=False)
    with short_tmp() as d:
        yield d


def _typer(args: list[str], stdin: str) -> object:
    return CliRunner().invoke(app, ["tortoise", *args], input=stdin)


@pytest.mark.parametrize("command,options", [
    ("hook-session-end", ["--harness", "--db", "--socket", "--spool-dir", "--transcript-reader", "--filing",
                          "--no-discard-ledger"]),
    ("hook-session-start", ["--db", "--socket", "--spool-dir", "--no-drain"]),
    ("hook-volunteer", ["--harness", "--db", "--socket"]),
])
def test_help_lists_the_options_of_the_standard_library_client(command, options):
    from tortoise_sim.hook_client import _OPTIONS

    assert sorted(options) == sorted(_OPTIONS[command])  # the client's own list: a new option shows up here
    r = CliRunner().invoke(app, ["tortoise", command, "--help"], terminal_width=250, env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    for opt in options:
        assert opt in r.stdout, (opt, r.stdout)
    if command == "hook-session-end":
        assert "[auto|claude|claude-tools|codex|legacy]" in r.stdout and "[detached|inline|spool]" in r.stdout


def test_typer_session_end_spools_first_and_files_as_filing_says(work):
    db, root = work / "db" / "t.kuzu", work / "db" / "spool"
    r = _typer(["hook-session-end", "--db", str(db), "--filing", "spool"],
               end_hook_json("s1", claude_transcript(work / "s1.jsonl")))
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == "", r.output
    meta = spool_meta(root, "s1")
    assert meta is not None and not db.exists()  # spooled, nothing filed, no store created
    from tortoise_sim.spool import Spool

    turns = Spool(root).read_turns("s1")
    assert [t["role"] for t in turns] == ["user", "assistant"] and turns[1]["content"] == REPLY


def test_typer_session_end_failure_is_one_stderr_line_and_a_ledger_row(work):
    db, root = work / "db" / "t.kuzu", work / "db" / "spool"
    r = _typer(["hook-session-end", "--db", str(db)], end_hook_json("s1", work / "missing.jsonl"))
    assert r.exit_code == 0 and r.stdout == "", r.output
    assert len(r.stderr.splitlines()) == 1 and "s1" in r.stderr and "not spooled" in r.stderr, r.stderr
    rows = [json.loads(ln) for ln in (root / "discarded.jsonl").read_text().splitlines()]
    assert [row["reason"] for row in rows] == ["session_end_transcript_missing"]
    r = _typer(["hook-session-end", "--db", str(db), "--no-discard-ledger"], end_hook_json("s2", work / "nope"))
    assert r.exit_code == 0 and len((root / "discarded.jsonl").read_text().splitlines()) == 1


def test_typer_session_start_drains_by_default_and_no_drain_is_the_analysed_hook(work):
    db, root = work / "db" / "t.kuzu", work / "db" / "spool"
    r = _typer(["hook-session-end", "--db", str(db), "--filing", "spool"],
               end_hook_json("s1", claude_transcript(work / "s1.jsonl")))
    assert r.exit_code == 0 and r.stderr == "", r.output
    r = _typer(["hook-session-start", "--db", str(db), "--no-drain"], start_hook_json("s2"))
    assert r.exit_code == 0 and r.stdout == "No prior memory is stored for this workspace yet.\n", r.output
    assert not is_filed(root, "s1")
    r = _typer(["hook-session-start", "--db", str(db)], start_hook_json("s2"))
    assert r.exit_code == 0 and r.stderr == "", r.output
    assert DECISION in r.stdout and is_filed(root, "s1")


@pytest.mark.parametrize("args", [["hook-session-end", "--filing", "later"],
                                  ["hook-session-end", "--transcript-reader", "gemini"],
                                  ["hook-volunteer", "--harness", "claud"]])
def test_typer_and_console_entry_answer_a_bad_value_alike(work, args):
    db = work / "db" / "t.kuzu"
    stdin = end_hook_json("s1", claude_transcript(work / "s1.jsonl"))
    t = _typer([*args, "--db", str(db)], stdin)
    c = hook([*args, "--db", str(db)], stdin)
    assert t.exit_code == c.returncode == 0 and t.stdout == c.stdout.decode() == ""
    assert t.stderr == c.stderr.decode() and len(t.stderr.splitlines()) == 1, (t.stderr, c.stderr)
    assert not (work / "db" / "spool" / "entries").exists()  # a usage error does nothing
