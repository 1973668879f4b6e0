"""Workspace tools and truncation (spec §7, §10.6, §10.7)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from agentfly_sim.workspace import WorkspaceTools, truncate_text


@pytest.mark.parametrize("n,name,display,marker", [
    (4000, "a.txt", 4000, None),
    (4001, "a.txt", 4036, "[Truncated 1 characters]"),
    (5000, "a.txt", 4040, "[Truncated 1,000 characters]"),
    (5000, "data.json", 4040, "[Truncated 1,000 characters]"),
    (5000, "", 4040, "[Truncated 1,000 characters]"),
    (10000, "notes.md", 4040, "[Truncated 6,000 characters]"),
    (1234567, "big.csv", 4044, "[Truncated 1,230,567 characters]"),
    (50000, "x.sh", 50000, None),
    (5000, "X.PY", 5000, None),
])
def test_truncation_table(n, name, display, marker):
    out = truncate_text("x" * n, 1000, name)
    assert len(out) == display
    if marker:
        assert marker in out
    else:
        assert out == "x" * n


def _tools(stamp="2025-01-01T12:00:00.000001"):
    return WorkspaceTools(clock=lambda: datetime.fromisoformat(stamp), runner=lambda cmd, cwd: (0, "out\n"))


def test_execution_log_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    t = _tools()
    reply = t.write_workspace_file("a.txt", "hello", "cache/t1")
    assert reply.splitlines()[0] == "✅ File CREATED: a.txt"
    line = (tmp_path / "cache/t1/execution.log").read_text().splitlines()[0]
    assert line == ('{"timestamp": "2025-01-01T12:00:00.000001", "operation": "write_workspace_file", "workspace": '
                    '"cache/t1/workspace", "details": {"filename": "a.txt", "file_existed": false, "content_length": 5}}')


def test_overwrite_and_log_metadata_only(tmp_path):
    t = _tools()
    d = str(tmp_path / "task")
    t.write_workspace_file("a.txt", "first", d)
    assert t.write_workspace_file("a.txt", "second!", d).startswith("✅ File OVERWRITTEN: a.txt")
    assert t.execute_terminal_command("ls", d).startswith("✅ Command executed successfully.\n\nSTDOUT/STDERR:\nout")
    log = [json.loads(x) for x in (tmp_path / "task/execution.log").read_text().splitlines()]
    assert [e["details"] for e in log] == [
        {"filename": "a.txt", "file_existed": False, "content_length": 5},
        {"filename": "a.txt", "file_existed": True, "content_length": 7},
        {"command": "ls"}]
    assert (tmp_path / "task/workspace/a.txt").read_text() == "second!"


def test_reads(tmp_path):
    t = _tools()
    d = str(tmp_path / "task")
    t.write_workspace_file("d/x.txt", "abc", d)
    assert t.read_workspace_file("d/x.txt", d) == "❌ File not found: d/x.txt\nAvailable files: ['x.txt']"
    t.write_workspace_file("data.json", "y" * 5000, d)
    out = t.read_workspace_file("data.json", d)
    assert "📊 Size: 5000 characters" in out and "⚠️ Content truncated for display (non-code file)" in out
    assert len(out.split("=" * 50 + "\n", 1)[1]) == 4040
    t.write_workspace_file("x.sh", "z" * 50000, d)
    assert t.read_workspace_file("x.sh", d).endswith("z" * 50000)
    (tmp_path / "task/workspace/latin.txt").write_bytes("café".encode("latin-1"))
    assert t.read_workspace_file("latin.txt", d) == ("📄 Binary file: latin.txt (4 bytes)\n"
                                                     "❌ Cannot display binary content as text")
    before = (tmp_path / "task/execution.log").read_text()
    t.read_workspace_file("x.sh", d)
    assert (tmp_path / "task/execution.log").read_text() == before


def test_terminal_errors_and_real_bash(tmp_path):
    t = WorkspaceTools()
    assert t.execute_terminal_command("", str(tmp_path / "t")) == "❌ Error: Command cannot be empty."
    assert not (tmp_path / "t").exists()
    out = t.execute_terminal_command("echo hi; exit 3", str(tmp_path / "t"))
    assert out == "⚠️ Command finished with non-zero exit code: 3.\n\nSTDOUT/STDERR:\nhi\n"
    with pytest.raises(ValueError, match="task_cache_dir must be provided"):
        WorkspaceTools.workspace_dir("")
    assert t.as_tools()["read_workspace_file"](filename="a") .startswith("Error executing tool read_workspace_file:")
