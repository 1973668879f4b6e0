"""Host sessions: the runner process (isolation, prompt feeding, timeouts) with a tiny fake host, then one real
Claude Code session and one real Codex session when the pinned hosts are installed (conftest.require_host)."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.hosts import drivers
from harness.hosts.drivers import HookSet, SessionSpec, run_runner, run_session
from harness.hosts.install import InstalledHost
from harness.hosts.isolate import netns_available
from harness.hosts.server import Reply
from tests.harness.hosts.conftest import require_host

NETNS, NETNS_WHY = netns_available()
needs_netns = pytest.mark.skipif(not NETNS, reason=f"no network namespace here: {NETNS_WHY}")

# A stand-in host: posts each prompt to the loopback server, reports what it could reach, answers stream-json lines.
FAKE_HOST = r'''
import json, os, socket, sys, time, urllib.request
base, report = os.environ["FAKE_BASE_URL"], os.environ["FAKE_REPORT"]
def ask(prompt):
    body = json.dumps({"model": "m", "stream": False, "tools": [{"name": "t"}],
                       "messages": [{"role": "user", "content": prompt}]}).encode()
    req = urllib.request.Request(base + "/v1/messages", data=body, headers={"content-type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=5).read())["content"][0]["text"]
if os.environ.get("FAKE_CRASH"):
    sys.exit(3)
out = {"answers": [], "prompts": []}
unix = os.environ.get("FAKE_UNIX")
if unix:
    s = socket.socket(socket.AF_UNIX); s.connect(unix); s.sendall(b"ping"); out["unix"] = s.recv(100).decode(); s.close()
tcp = os.environ.get("FAKE_OUTSIDE_TCP")
if tcp:
    try:
        socket.create_connection(("127.0.0.1", int(tcp)), timeout=2).close(); out["outside_tcp"] = "reached"
    except OSError as e:
        out["outside_tcp"] = "refused"
out["home"] = os.environ.get("HOME")
out["leaked"] = sorted(k for k in os.environ if k.startswith("LEAK_"))
if os.environ.get("FAKE_STDIN"):
    for line in sys.stdin:
        p = json.loads(line)["message"]["content"]
        out["prompts"].append(p); out["answers"].append(ask(p))
        print(json.dumps({"type": "result", "n": len(out["prompts"])}), flush=True)
else:
    p = sys.argv[1]; out["prompts"].append(p); out["answers"].append(ask(p))
    print("session id: 0f0f0f0f-0000-4000-8000-000000000000")
out["argv"] = sys.argv[1:]
with open(report, "a") as f:
    f.write(json.dumps(out) + "\n")
if os.environ.get("FAKE_HANG"):
    import signal, subprocess
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen(["sleep", "120"])
    open(os.environ["FAKE_CHILD"], "w").write(str(child.pid))
    time.sleep(120)
'''


def fake_plan(tmp_path: Path, *, feed: str, prompts: list[str], env: dict[str, str]) -> dict:
    host = tmp_path / "fake_host.py"
    host.write_text(FAKE_HOST)
    report = tmp_path / "report.jsonl"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "FAKE_BASE_URL": "{BASE_URL}",
           "FAKE_REPORT": str(report), **env}
    plan = {"feed": feed, "env": env, "cwd": str(tmp_path), "prompts": prompts, "kill_grace_s": 0.5,
            "files": {str(tmp_path / "home" / "conf.txt"): "url={BASE_URL} port={PORT}"},
            "script": [{"text": f"answer {i}"} for i in range(len(prompts))]}
    if feed == "stream-json":
        plan["argv"] = [sys.executable, str(host)]
        plan["env"]["FAKE_STDIN"] = "1"
    else:
        plan["argvs"] = [[sys.executable, str(host), p] for p in prompts]
        plan["session_id_pattern"] = r"session id: ([0-9a-f-]{36})"
    return plan


def reports(tmp_path: Path) -> list[dict]:
    return [json.loads(ln) for ln in (tmp_path / "report.jsonl").read_text().splitlines()]


class Listener:
    """A unix-socket service and a TCP listener outside the namespace (on this process's loopback)."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "svc.sock"
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(str(self.path))
        self.unix.listen(4)
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.unix.settimeout(20)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            conn, _ = self.unix.accept()
            conn.sendall(b"pong:" + conn.recv(100))
            conn.close()
        except OSError:
            pass

    def close(self) -> None:
        self.unix.close()
        self.tcp.close()


@needs_netns
def test_netns_runner_reaches_unix_socket_not_outside_tcp(tmp_path: Path) -> None:
    lst = Listener(tmp_path)
    try:
        plan = fake_plan(tmp_path, feed="stream-json", prompts=["one", "two", "three"],
                         env={"FAKE_UNIX": str(lst.path), "FAKE_OUTSIDE_TCP": str(lst.port)})
        res = run_runner(plan, tmp_path / "run", "netns", timeout_s=30)
    finally:
        lst.close()
    rep = reports(tmp_path)[0]
    assert res["isolation"] == "netns" and res["exit_code"] == 0 and not res["timed_out"]
    assert rep["unix"] == "pong:ping"  # a pathname unix socket outside stays reachable
    assert rep["outside_tcp"] == "refused"  # the outside loopback is not this namespace's loopback
    assert rep["prompts"] == ["one", "two", "three"] and rep["answers"] == ["answer 0", "answer 1", "answer 2"]
    assert [r["reply"] for r in res["requests"]] == [0, 1, 2]
    t = res["prompt_times"]
    assert len(t) == 3 and t[0] == res["t_start"] and t[0] <= t[1] <= t[2] <= res["t_end"]
    assert t[1] >= res["requests"][0]["t"]  # prompt 2 was written only after prompt 1 was answered
    assert (tmp_path / "home" / "conf.txt").read_text() == f"url=http://127.0.0.1:{res['port']} port={res['port']}"
    recorded = [json.loads(ln) for ln in (tmp_path / "run" / "requests.jsonl").read_text().splitlines()]
    assert recorded == res["requests"]


def test_base_url_runner_per_prompt(tmp_path: Path) -> None:
    lst = Listener(tmp_path)
    try:
        plan = fake_plan(tmp_path, feed="per-prompt", prompts=["alpha", "beta"],
                         env={"FAKE_OUTSIDE_TCP": str(lst.port)})
        plan["argvs"][1].append("{SESSION_ID}")
        res = run_runner(plan, tmp_path / "run", "base-url", timeout_s=30)
    finally:
        lst.close()
    rep = reports(tmp_path)
    assert res["isolation"] == "base-url" and res["exit_codes"] == [0, 0]
    assert [r["answers"] for r in rep] == [["answer 0"], ["answer 1"]]
    assert rep[0]["outside_tcp"] == "reached"  # base URL only: nothing stops the host reaching other ports
    assert res["session_id"] == "0f0f0f0f-0000-4000-8000-000000000000"
    assert rep[1]["argv"] == ["beta", res["session_id"]]  # {SESSION_ID}: the id the first process printed
    assert len(res["prompt_times"]) == 2 and res["prompt_times"][0] == res["t_start"]


def test_timeout_ends_the_host_process_group_by_pid(tmp_path: Path) -> None:
    child = tmp_path / "child.pid"
    plan = fake_plan(tmp_path, feed="per-prompt", prompts=["hang"],
                     env={"FAKE_HANG": "1", "FAKE_CHILD": str(child)})
    t = time.monotonic()
    res = run_runner(plan, tmp_path / "run", "base-url", timeout_s=2)
    assert time.monotonic() - t < 20
    assert res["timed_out"] and res["exit_code"] == -9  # SIGTERM was ignored, so SIGKILL ended it
    pid = int(child.read_text())
    with pytest.raises(ProcessLookupError):  # the host's child went with its process group
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.1)


def test_stream_json_host_that_exits_early_is_not_waited_for(tmp_path: Path) -> None:
    plan = fake_plan(tmp_path, feed="stream-json", prompts=["one", "two"], env={"FAKE_CRASH": "1"})
    t = time.monotonic()
    res = run_runner(plan, tmp_path / "run", "base-url", timeout_s=60)
    assert time.monotonic() - t < 15 and not res["timed_out"]
    assert res["exit_code"] == 3 and len(res["prompt_times"]) == 1 and res["requests"] == []


def test_hookset_settings_integer_timeouts() -> None:
    hs = HookSet(session_start="echo a", session_end="echo b", timeouts={"SessionEnd": 5})
    assert hs.settings() == {"hooks": {
        "SessionStart": [{"hooks": [{"type": "command", "command": "echo a"}]}],
        "SessionEnd": [{"hooks": [{"type": "command", "command": "echo b", "timeout": 5}]}]}}
    with pytest.raises(ValueError):
        HookSet(session_end="x", timeouts={"SessionEnd": 1.5}).settings()  # type: ignore[dict-item]


def test_host_environment_is_clean_and_points_at_loopback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-real-looking")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-looking")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://example.invalid")
    fake = InstalledHost("claude-code", "2.1.328", tmp_path, tmp_path / "claude")
    spec = SessionSpec(prompts=["p"], replies=[[]], home=tmp_path / "h", cwd=tmp_path / "w", env={"EXTRA": "1"})
    claude = drivers._claude_plan(fake, spec)
    codex = drivers._codex_plan(InstalledHost("codex", "0.169.0", tmp_path, tmp_path / "codex"), spec)
    assert claude["env"]["ANTHROPIC_BASE_URL"] == "{BASE_URL}" and claude["env"]["ANTHROPIC_API_KEY"] == drivers.DUMMY_KEY
    assert claude["env"]["HOME"] == str(tmp_path / "h") and claude["env"]["EXTRA"] == "1"
    assert "OPENAI_API_KEY" not in codex["env"] and codex["env"]["CODEX_HOME"] == codex["env"]["HOME"]
    assert 'base_url = "{BASE_URL}/v1"' in codex["files"][str(tmp_path / "h" / "config.toml")]
    assert not any("real-looking" in v or "example.invalid" in v for v in [*claude["env"].values(),
                                                                           *codex["env"].values()])


# ------------------------------------------------------------------------------------------------- real hosts
@pytest.fixture
def real_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the user's own HOME with host configuration whose hooks would leave a file if ever used."""
    home = tmp_path / "user-home"
    trap = tmp_path / "user-hook-ran"
    hooks = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": f"touch {trap}"}]}]}}
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(json.dumps(hooks))
    (home / ".codex").mkdir()
    (home / ".codex" / "hooks.json").write_text(json.dumps(hooks))
    (home / ".codex" / "config.toml").write_text('model = "user-model"\n')
    from harness.hosts.install import hosts_dir

    # the installed hosts stay where they are (the default hosts folder is under the real HOME's cache folder)
    monkeypatch.setenv("MEMSIM_HOSTS_DIR", str(hosts_dir()))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    return home


def written_by(run_root: Path, since: float, needles: list[str]) -> list[str]:
    """Files under the user's actual ~/.claude and ~/.codex changed since ``since`` that mention this run (other
    people's sessions on the machine may change these folders; only a trace of this run counts)."""
    import pwd

    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    hits = []
    for root in (home / ".claude", home / ".codex"):
        for p in root.rglob("*") if root.is_dir() else []:
            try:
                if p.is_file() and p.stat().st_mtime >= since and any(n in p.read_text(errors="replace")
                                                                       for n in needles):
                    hits.append(str(p))
            except OSError:
                continue
    return hits


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"")
            for p in sorted(root.rglob("*"))}


def texts(content: object) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text") or "" for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def test_claude_code_session_tool_call_and_hook_marker(tmp_path: Path, real_home: Path) -> None:
    require_host("claude-code")
    before, t0 = snapshot(real_home), time.time() - 1
    seen, tmpdir = tmp_path / "session-start.json", tmp_path / "hook-tmpdir.txt"
    spec = SessionSpec(prompts=["please greet", "and again"],
                       replies=[[Reply(tool="Bash", input={"command": "echo hi"}), Reply(text="greeted")],
                                [Reply(text="second answer")]],
                       home=tmp_path / "home", cwd=tmp_path / "ws",
                       hooks=HookSet(session_start=f'cat > {seen}; echo "$TMPDIR" > {tmpdir}; echo MEMSIM-MARKER-7'),
                       timeout_s=60)
    run = run_session("claude-code", spec, tmp_path / "run")
    # Claude Code's own temporary files (claude-<uid>/<work dir>/<session id>/) went to the session's private
    # TMPDIR, removed after the session: nothing of this session stays in the system temporary directory
    import tempfile

    private = Path(tmpdir.read_text().strip())
    assert private != Path(tempfile.gettempdir()) and not private.exists()
    assert not list(Path(tempfile.gettempdir()).glob(f"claude-*/{drivers.claude_slug(tmp_path / 'ws')}"))
    assert run.exit_code == 0 and not run.timed_out, run.stderr[-2000:]
    conv = [r for r in run.requests if r["api"] == "anthropic.messages" and r["reply"] is not None]
    assert [r["reply"] for r in conv] == [0, 1, 2]
    msgs = conv[0]["body"]["messages"]
    assert msgs[1]["role"] == "system"
    assert texts(msgs[1]["content"])[0].startswith("SessionStart:startup hook success: MEMSIM-MARKER-7")
    results = [b for m in conv[1]["body"]["messages"] if m["role"] == "user" and isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert len(results) == 1 and "hi" in json.dumps(results[0]["content"])
    assert "and again" in json.dumps(conv[2]["body"]["messages"])
    hook = json.loads(seen.read_text())
    assert run.session_id == hook["session_id"] and run.transcript_path == Path(hook["transcript_path"])
    assert run.transcript_path is not None and run.transcript_path.is_file()
    assert str(run.transcript_path).startswith(str(tmp_path / "home"))
    assert len(run.prompt_times) == 2 and run.prompt_times[1] >= conv[1]["t"]
    assert run.isolation == ("netns" if NETNS else "base-url")
    assert snapshot(real_home) == before and not (tmp_path / "user-hook-ran").exists()
    assert written_by(tmp_path, t0, [str(tmp_path), str(run.session_id)]) == []


def test_codex_session_tool_call_and_hook_marker(tmp_path: Path, real_home: Path) -> None:
    require_host("codex")
    before, t0 = snapshot(real_home), time.time() - 1
    seen = tmp_path / "session-start.json"
    spec = SessionSpec(prompts=["please greet", "and again"],
                       replies=[[Reply(tool="exec_command", input={"cmd": "echo hi"}), Reply(text="greeted")],
                                [Reply(text="second answer")]],
                       home=tmp_path / "home", cwd=tmp_path / "ws",
                       hooks=HookSet(session_start=f"cat > {seen}; echo MEMSIM-MARKER-8",
                                     timeouts={"SessionStart": 10}), timeout_s=60)
    run = run_session("codex", spec, tmp_path / "run")
    assert run.exit_code == 0 and not run.timed_out, run.stderr[-2000:]
    conv = [r for r in run.requests if r["api"] == "openai.responses"]
    assert [r["reply"] for r in conv] == [0, 1, 2]
    items = conv[0]["body"]["input"]
    marker = [i for i, m in enumerate(items) if "MEMSIM-MARKER-8" in "".join(texts(m.get("content")))]
    prompt = [i for i, m in enumerate(items) if m.get("role") == "user" and texts(m.get("content")) == ["please greet"]]
    assert len(marker) == 1 and items[marker[0]]["role"] == "developer" and marker[0] < prompt[0]
    assert [t.strip() for t in texts(items[marker[0]]["content"])] == ["MEMSIM-MARKER-8"]  # unprefixed
    outputs = [m for m in conv[1]["body"]["input"] if m.get("type") == "function_call_output"]
    assert len(outputs) == 1 and "hi" in outputs[0]["output"]
    assert "please greet" in json.dumps(conv[2]["body"]["input"])  # the resumed process carries the session
    assert "and again" in json.dumps(conv[2]["body"]["input"])
    hook = json.loads(seen.read_text())
    assert run.session_id == hook["session_id"]
    assert run.transcript_path is not None and run.transcript_path.is_file()
    assert run.transcript_path.is_relative_to(tmp_path / "home" / "sessions")
    assert snapshot(real_home) == before and not (tmp_path / "user-hook-ran").exists()
    assert written_by(tmp_path, t0, [str(tmp_path), str(run.session_id)]) == []
