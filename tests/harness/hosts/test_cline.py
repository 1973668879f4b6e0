"""Cline: the hook files, the runner ending a detached host daemon by pid (no host), the cline / cline-string
output shapes, and one real Cline 3.0.65 session when it is installed (conftest.require_host)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.hosts.drivers import HookSet, SessionSpec, cline_hook_files, run_session
from harness.hosts.isolate import reap
from harness.hosts.server import Reply
from tests.harness.hosts.conftest import require_host
from tortoise_sim.hooks import format_hook_output

BLOCK = "<!-- memsim:pointers -->\n- pt_KEY & \"kept\" <b>\n<!-- /memsim -->"


def test_cline_shapes_faithful_default_and_named_string_variant() -> None:
    assert json.loads(format_hook_output(BLOCK, "cline")) == {"contextModification": {"context": BLOCK}}
    out = format_hook_output(BLOCK, "cline-string")
    assert out.endswith("\n") and out.count("\n") == 1
    assert json.loads(out) == {"contextModification": BLOCK}
    assert format_hook_output("  ", "cline-string") == ""


def test_cline_hook_files_are_named_after_its_events(tmp_path: Path) -> None:
    files = cline_hook_files(tmp_path, HookSet(session_start="a 1", user_prompt_submit="b", session_end="c",
                                               extra={"PostToolUse": "d"}))
    hooks = tmp_path / ".cline" / "hooks"
    assert files == {str(hooks / "TaskStart"): "#!/bin/sh\na 1\n", str(hooks / "UserPromptSubmit"): "#!/bin/sh\nb\n",
                     str(hooks / "TaskComplete"): "#!/bin/sh\nc\n", str(hooks / "PostToolUse"): "#!/bin/sh\nd\n"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_reap_ends_only_this_runs_daemon_by_pid(tmp_path: Path) -> None:
    exe = tmp_path / "fakehost"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", exe)
    home, other = tmp_path / "home", tmp_path / "other-home"
    home.mkdir()
    other.mkdir()
    ours = subprocess.Popen([str(exe), "60"], env={"HOME": str(home)}, start_new_session=True)
    theirs = subprocess.Popen([str(exe), "60"], env={"HOME": str(other)}, start_new_session=True)
    stray = subprocess.Popen([str(exe), "60"], env={"HOME": str(home)}, start_new_session=True)  # no pid file
    pid_file = home / "hub.json"
    pid_file.write_text(json.dumps({"pid": ours.pid}))
    (home / "bad.json").write_text(json.dumps({"pid": theirs.pid}))  # a pid file naming another run's process
    try:
        rows = reap({"pid_files": [str(pid_file), str(home / "bad.json")], "home": str(home), "exe": str(exe)})
        by_pid = {r["pid"]: r for r in rows if "pid" in r}
        assert by_pid[ours.pid]["ended_by"] == "SIGTERM"
        assert by_pid[ours.pid]["found_by"][0] == f"pid file {pid_file}"
        assert by_pid[stray.pid]["ended_by"] == "SIGTERM" and by_pid[stray.pid]["found_by"] == [
            "proc scan (HOME and host binary)"]
        assert by_pid[theirs.pid]["ended_by"] is None and "skipped" in by_pid[theirs.pid]
        assert not any("left" in r for r in rows)
        time.sleep(0.1)
        assert theirs.poll() is None  # another HOME's process is left running
    finally:
        for p in (ours, theirs, stray):
            if p.poll() is None:
                p.kill()
            p.wait()


def _home_procs(home: Path) -> list[int]:
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                env = Path(f"/proc/{e}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"HOME={home}".encode() in env:
                out.append(int(e))
    return out


def test_real_cline_delivers_the_string_shape_from_tool_hooks_and_its_daemon_is_ended(tmp_path: Path) -> None:
    require_host("cline")
    fired = tmp_path / "fired"
    fired.mkdir()
    outs = {"TaskStart": format_hook_output(BLOCK.replace("KEY", "start"), "cline-string"),
            "PreToolUse": format_hook_output(BLOCK.replace("KEY", "pre"), "cline"),  # the spec's object shape
            "PostToolUse": format_hook_output(BLOCK.replace("KEY", "post"), "cline-string"),
            "UserPromptSubmit": format_hook_output(BLOCK.replace("KEY", "prompt"), "cline-string")}
    cmds = {}
    for ev, text in outs.items():
        (tmp_path / f"{ev}.out").write_text(text)
        cmds[ev] = f"cat > {fired}/{ev}.json; cat {tmp_path}/{ev}.out"
    hooks = HookSet(session_start=cmds["TaskStart"], user_prompt_submit=cmds["UserPromptSubmit"],
                    extra={"PreToolUse": cmds["PreToolUse"], "PostToolUse": cmds["PostToolUse"]})
    spec = SessionSpec(prompts=["list the files"], replies=[[Reply(tool="run_commands", input={"commands": ["echo hi"]}),
                                                             Reply(text="done")]],
                       home=tmp_path / "home", cwd=tmp_path / "ws", hooks=hooks, timeout_s=60)
    run = run_session("cline", spec, tmp_path / "run")
    result = json.loads((tmp_path / "run" / "runner-result.json").read_text())
    assert run.exit_code == 0 and not run.timed_out
    assert run.transcript_path is not None and run.transcript_path.name == f"{run.session_id}.messages.json"
    assert len(run.requests) == 2
    last = run.requests[1]["body"]["messages"]
    assert last[-2]["role"] == "tool" and "hi" in json.dumps(last[-2]["content"])
    carried = last[-1]["content"] if isinstance(last[-1]["content"], str) else json.dumps(last[-1]["content"])
    assert last[-1]["role"] == "user" and '<hook_context source="PostToolUse"' in carried
    assert BLOCK.replace("KEY", "post") in carried  # the string shape, byte for byte
    body = json.dumps([r["body"] for r in run.requests])
    assert "pt_pre" not in body and "pt_start" not in body  # the object shape and TaskStart's string: dropped
    assert sorted(p.stem for p in fired.iterdir()) == ["PostToolUse", "PreToolUse", "TaskStart"]  # no UserPromptSubmit
    daemons = [r for r in result["reaped"] if "pid" in r]
    assert daemons and all(r["ended_by"] in ("SIGTERM", "SIGKILL") for r in daemons)
    assert any("--cline-hub-daemon" in r["cmdline"] for r in daemons)
    assert not any("left" in r for r in result["reaped"]) and _home_procs(spec.home) == []
