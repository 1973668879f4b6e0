"""``memsim hosts run``: option and scenario errors as one line, a host that is not installed skipped with one
line, the per-session summary from a hand-made result, and one short run of the example user hook on the real
Claude Code when it is installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.hosts import session_summary, summary_line
from harness.cli.main import app
from harness.hosts.scenario import SCENARIO_DIR

runner = CliRunner()


def _result() -> dict:
    d = {"item": {"kind": "pointer_block", "event": "UserPromptSubmit", "point_ids": ["p1"], "bytes": 100},
         "message_index": 1, "role": "system", "block_index": 0, "part": "message",
         "prefix": "UserPromptSubmit hook additional context: ", "exact": True, "trimmed": False, "encoding": None,
         "whole": True, "bytes": 100, "tokens": 25, "lines_found": [], "point_ids": ["p1"], "offset": 40}
    req = {"seq": 0, "conversation": True, "deliveries": [d], "memory_token_share": 0.01, "memory_tokens": 25,
           "memory_bytes": 100, "size": {"tokens": 2500}}
    later = dict(req, seq=1)
    side = {"seq": 2, "conversation": False, "deliveries": [d], "memory_token_share": 0.5}
    return {"session": 0, "name": "first", "session_id": "sid", "exit_code": 0, "timed_out": False,
            "items": [{"kind": "pointer_block", "event": "UserPromptSubmit", "point_ids": ["p1"], "bytes": 100}],
            "requests": [req, later, side], "latency": [{"latency_s_without_gate": 0.812345}],
            "hooks": [{"event": "UserPromptSubmit", "start": 1.0, "end": 1.25, "rc": 0, "signal": None}],
            "store_vs_transcript": {"equal": False, "stored": 3, "conversation": 2, "memory_fed_back": 1,
                                    "missing": [], "extra": []},
            "store_unread": None, "lost": False, "checks": {"volunteered ref:x": True, "captured": False}}


def test_session_summary_counts_places_once_and_ignores_side_requests() -> None:
    s = session_summary(_result())
    assert s["requests"] == 2
    (row,) = s["delivered"]
    assert (row["first_seq"], row["requests"], row["message_index"]) == (0, 2, 1)
    assert s["latency_s"] == [0.8123]
    assert s["hooks"] == [{"event": "UserPromptSubmit", "wall_s": 0.25, "rc": 0, "signal": None}]
    assert s["checks_failed"] == ["captured"]
    assert s["memory_token_share"] == 0.01
    line = summary_line("demo", "claude-code", s)
    assert line.startswith("demo claude-code s0 first: 2 request(s); pointer_block (UserPromptSubmit) -> "
                           "messages[1] system block 0, exact after \"UserPromptSubmit hook additional context: \"")
    assert "store != transcript (3 stored, 2 in the transcript), 1 stored turns carry memory" in line
    assert "checks 1/2 pass (failed: captured)" in line and "latency 0.81 s" in line


def test_bad_scenario_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ndescription: d\nrecords: [MEM-X-y]\nsessions: []\nbogus: 1\n", encoding="utf-8")
    res = runner.invoke(app, ["hosts", "run", str(bad), "--out", str(tmp_path / "out")])
    assert res.exit_code == 1
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "bad.yaml" in lines[0]


def test_unknown_host_and_isolation_are_usage_errors(tmp_path: Path) -> None:
    scn = str(SCENARIO_DIR / "pointer-delivery.yaml")
    assert runner.invoke(app, ["hosts", "run", scn, "--host", "nope", "--out", str(tmp_path)]).exit_code == 2
    assert runner.invoke(app, ["hosts", "run", scn, "--isolation", "x", "--out", str(tmp_path)]).exit_code == 2


def test_host_not_installed_is_skipped_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSIM_HOSTS_DIR", str(tmp_path / "no-hosts"))
    monkeypatch.delenv("MEMSIM_HOSTS_EXTRA", raising=False)
    out = tmp_path / "out"
    res = runner.invoke(app, ["hosts", "run", str(SCENARIO_DIR / "pointer-delivery.yaml"), "--host", "codex",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "pointer-delivery codex: skipped: codex 0.169.0 is not installed (memsim hosts install codex)" \
        in res.output
    assert not out.exists()  # a run that ran nothing writes nothing


def test_example_user_hook_on_real_claude_code(tmp_path: Path) -> None:
    from tests.harness.hosts.conftest import require_host

    require_host("claude-code")
    out = tmp_path / "out"
    res = runner.invoke(app, ["hosts", "run", str(SCENARIO_DIR / "own-hook-example.yaml"), "--host", "claude-code",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "own-hook-example" / "claude-code.json").read_text(encoding="utf-8"))
    (row,) = summary["sessions"]
    assert summary["host"] == "claude-code" and row["checks"] == {"memory reaches model": True}
    assert {(d["kind"], d["event"]) for d in row["delivered"]} == {("hook_text", "SessionStart"),
                                                                   ("hook_text", "UserPromptSubmit")}
    assert "own-hook-example claude-code s0: 1 request(s); hook_text (SessionStart) -> messages[" in res.output
    assert (out / "own-hook-example" / "claude-code" / "s0" / "requests.jsonl").exists()
