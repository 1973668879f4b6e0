"""The hook service under faults: a hung, slow or garbage-speaking service cannot stall a prompt (the hook fails
open within its timeout), the service survives bad clients, the socket is private, and the hook's own defects
(help, no-store digest line, relative transcript paths)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tortoise_sim.hook_client import (
    DEFAULT_TIMEOUT_S,
    PROTOCOL_VERSION,
    USAGE,
    HookServiceFailure,
    call,
    hook_timeout,
    resolve_transcript_path,
    run_hook,
    socket_dir,
    socket_path_for,
)
from tortoise_sim.service import TortoiseService

PY = sys.executable
RETRIEVAL = json.dumps({"session_id": "s", "prompt": "What did we decide about the simulator store?"})
COURTESY = json.dumps({"session_id": "s", "prompt": "thanks"})
HEAVY = ("torch", "kuzu", "dspy", "pydantic", "numpy", "typer", "rich", "tortoise_sim.store")


@pytest.fixture
def short_dir() -> Iterator[Path]:
    d = tempfile.mkdtemp(prefix="msf", dir="/tmp")  # AF_UNIX paths are limited to ~107 bytes
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MEMSIM_TORTOISE_SOCKET", "MEMSIM_HOOK_TIMEOUT")}
    env.update(extra)
    return env


# ------------------------------------------------------------------------------------------- fake services
@contextmanager
def fake_service(path: Path, on_conn: Callable[[socket.socket], None]) -> Iterator[list[socket.socket]]:
    """A Unix socket server that hands every accepted connection to ``on_conn`` in its own thread."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(16)
    conns: list[socket.socket] = []
    stop = threading.Event()

    def loop() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conns.append(c)
            threading.Thread(target=on_conn, args=(c,), daemon=True).start()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield conns
    finally:
        stop.set()
        t.join(5)
        for c in conns:
            c.close()
        srv.close()


def _never_answers(c: socket.socket) -> None:
    with __import__("contextlib").suppress(OSError):
        c.recv(1 << 20)  # reads the request, then holds the connection open without a word


def _slow(c: socket.socket) -> None:
    c.recv(1 << 20)
    time.sleep(3.0)
    with __import__("contextlib").suppress(OSError):
        c.sendall(json.dumps({"v": PROTOCOL_VERSION, "ok": True, "result": {"stdout": "late\n"}}).encode() + b"\n")


def _trickle(c: socket.socket) -> None:
    """Answers one byte every 0.1 s and never finishes: a per-read timeout would wait forever."""
    c.recv(1 << 20)
    with __import__("contextlib").suppress(OSError):
        for _ in range(200):
            c.sendall(b" ")
            time.sleep(0.1)


def _garbage(c: socket.socket) -> None:
    c.recv(1 << 20)
    c.sendall(b"\x00\xffnot json at all\n")


FAKES = {"never answers": _never_answers, "slow": _slow, "trickles": _trickle, "garbage": _garbage}


def _hook(args: list[str], stdin: str, cwd: Path | None = None, **env: str) -> tuple[subprocess.CompletedProcess,
                                                                                    float]:
    t0 = time.monotonic()
    r = subprocess.run([PY, "-m", "tortoise_sim.hook_client", *args], input=stdin.encode(), capture_output=True,
                       env=_env(**env), timeout=60, cwd=cwd)
    return r, time.monotonic() - t0


@pytest.mark.parametrize("kind", list(FAKES))
def test_call_is_bounded_by_one_deadline(short_dir, kind):
    sock = short_dir / "f.sock"
    with fake_service(sock, FAKES[kind]):
        t0 = time.monotonic()
        with pytest.raises((TimeoutError, Exception)) as info:
            call(str(sock), "hook_volunteer", {"stdin": RETRIEVAL, "harness": "claude"}, timeout=0.4)
        took = time.monotonic() - t0
    assert took < 1.0, (kind, took)
    expected = "ServiceError" if kind == "garbage" else "TimeoutError"
    assert type(info.value).__name__ == expected, (kind, info.value)


@pytest.mark.parametrize("kind", list(FAKES))
def test_hook_fails_open_within_its_timeout(short_dir, kind):
    """Exit 0, nothing on stdout, one note on stderr, and the wall time bounded by MEMSIM_HOOK_TIMEOUT (plus the
    interpreter's start), for both prompt kinds and the session-start hook."""
    sock = short_dir / "f.sock"
    db = short_dir / "none.kuzu"
    with fake_service(sock, FAKES[kind]):
        base, _ = _hook(["--help"], "")  # the interpreter's start on this machine, now
        _, start_cost = _hook(["--help"], "")
        for args, stdin in ((["hook-volunteer", "--harness", "claude"], RETRIEVAL),
                            (["hook-volunteer"], COURTESY), (["hook-session-start"], "")):
            r, took = _hook([*args, "--db", str(db), "--socket", str(sock)], stdin, MEMSIM_HOOK_TIMEOUT="0.5")
            lines = r.stderr.decode().splitlines()
            assert r.returncode == 0 and r.stdout == b"", (kind, args, r.stdout, r.stderr)
            assert len(lines) == 1 and lines[0].startswith("memsim hook: the Tortoise service on"), lines
            assert ("within 0.5 s" in lines[0]) == (kind != "garbage"), lines
            assert took < 0.5 + start_cost + 2.0, (kind, args, took, start_cost)
    assert not db.exists()


def test_default_timeout_is_near_one_second(monkeypatch):
    monkeypatch.delenv("MEMSIM_HOOK_TIMEOUT", raising=False)
    assert hook_timeout() == DEFAULT_TIMEOUT_S == 1.0
    for bad in ("abc", "0", "-3", "inf", "nan"):
        monkeypatch.setenv("MEMSIM_HOOK_TIMEOUT", bad)
        assert hook_timeout() == 1.0, bad
    monkeypatch.setenv("MEMSIM_HOOK_TIMEOUT", "2.5")
    assert hook_timeout() == 2.5


def test_run_hook_raises_a_service_failure_not_a_timeout(short_dir, monkeypatch):
    monkeypatch.setenv("MEMSIM_HOOK_TIMEOUT", "0.3")
    sock = short_dir / "f.sock"
    with fake_service(sock, _never_answers):
        with pytest.raises(HookServiceFailure, match="did not answer within 0.3 s"):
            run_hook("hook-volunteer", ["--socket", str(sock)], RETRIEVAL.encode())


# ------------------------------------------------------------------------------------------- hook defects
def test_memsim_hook_help_prints_usage_and_imports_only_the_standard_library():
    for args in (["--help"], ["-h"], ["hook-volunteer", "--help"]):
        r, _ = _hook(args, "")
        assert r.returncode == 0 and r.stdout.decode() == USAGE, (args, r.stderr)
    assert "MEMSIM_HOOK_TIMEOUT" in USAGE and "usage: memsim-hook" in USAGE
    code = ("import sys, os, json\n"
            "real = os._exit\n"
            f"heavy = {HEAVY!r}\n"
            "def ex(c):\n"
            "    sys.stderr.write('MODS ' + json.dumps(sorted(m for m in heavy if m in sys.modules)))\n"
            "    sys.stderr.flush(); real(c)\n"
            "os._exit = ex\n"
            "import tortoise_sim.hook_client as h\n"
            "h.main(['--help'])\n")
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=_env(), timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("usage: memsim-hook"), r
    assert json.loads(r.stderr.split("MODS ", 1)[1]) == []


def test_session_start_without_a_store_prints_the_no_memory_line(short_dir):
    from tortoise_sim.digest import NO_MEMORY_LINE

    db = short_dir / "sub" / "none.kuzu"
    r, _ = _hook(["hook-session-start", "--db", str(db), "--socket", str(short_dir / "none.sock")], "")
    assert r.returncode == 0 and r.stdout.decode() == NO_MEMORY_LINE + "\n", r
    assert not db.exists() and not db.parent.exists()
    from typer.testing import CliRunner

    from harness.cli.tortoise import app

    res = CliRunner().invoke(app, ["hook-session-start", "--db", str(db)])
    assert res.exit_code == 0 and res.output == NO_MEMORY_LINE + "\n"
    assert not db.exists()


def test_relative_transcript_path_is_resolved_against_the_hooks_directory(short_dir):
    data = json.dumps({"session_id": "s1", "transcript_path": "t/x.jsonl"}).encode()
    out = json.loads(resolve_transcript_path(data))
    assert out["transcript_path"] == os.path.join(os.getcwd(), "t", "x.jsonl")
    for same in (b"not json", json.dumps({"transcript_path": "/abs/x.jsonl"}).encode(), b"[1]",
                 json.dumps({"turns": []}).encode()):
        assert resolve_transcript_path(same) == same
    # end to end: the service runs in this process (another working directory); the hook runs in `work`
    work = short_dir / "work"
    work.mkdir()
    lines = [{"type": "user", "message": {"role": "user", "content": "decision: deploys happen on Tuesdays"}},
             {"type": "assistant", "message": {"role": "assistant", "content": "Noted."}}]
    (work / "t.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    svc = TortoiseService(short_dir / "db.kuzu", str(short_dir / "s.sock"), embedder="hashing")
    with running(svc):
        payload = json.dumps({"session_id": "rel-1", "transcript_path": "t.jsonl"})
        r, _ = _hook(["hook-session-end", "--db", str(short_dir / "db.kuzu"), "--socket", svc.sock], payload,
                     cwd=work)
        assert r.returncode == 0 and r.stderr == b"", r
        rows = svc.sim.store.query("MATCH (p:Point) RETURN p.content AS c")
    assert any("deploys happen on Tuesdays" in (r["c"] or "") for r in rows), rows


# ------------------------------------------------------------------------------------------- the service
@contextmanager
def running(svc: TortoiseService) -> Iterator[TortoiseService]:
    t = threading.Thread(target=svc.serve_forever, daemon=True)
    svc.start()
    t.start()
    try:
        yield svc
    finally:
        svc.request_shutdown()
        t.join(30)
        assert not t.is_alive()


def _raw(sock: str, data: bytes, *, shut: bool = True, timeout: float = 5.0) -> bytes:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(timeout)
    c.connect(sock)
    try:
        try:
            c.sendall(data)
            if shut:
                c.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused early: the error frame is still readable
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = c.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
        return buf
    finally:
        c.close()


def _err_type(frame: bytes) -> str:
    resp = json.loads(frame)
    assert resp["v"] == PROTOCOL_VERSION and resp["ok"] is False, resp
    return resp["error"]["type"] + ": " + resp["error"]["message"]


def test_service_survives_bad_clients_without_blocking_good_ones(short_dir):
    svc = TortoiseService(short_dir / "db.kuzu", str(short_dir / "s.sock"), embedder="hashing",
                          read_deadline_s=1.0, max_request=1 << 16)
    with running(svc):
        stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stalled.connect(svc.sock)
        stalled.sendall(b'{"v": 1, "op": "ping", "ar')  # half a frame, then nothing
        t0 = time.monotonic()
        assert call(svc.sock, "ping", timeout=2.0)["pong"] is True
        assert time.monotonic() - t0 < 0.5
        bad = {
            "malformed": b"{not json\n",
            "binary": b"\xff\xfe\x00\x01\n",
            "deep": b"[" * 100_000 + b"\n",
            "oversized": b"x" * ((1 << 16) + 10),
            "unknown version": json.dumps({"v": 99, "op": "ping"}).encode() + b"\n",
            "unknown op": json.dumps({"v": 1, "op": "drop_tables"}).encode() + b"\n",
            "bad args": json.dumps({"v": 1, "op": "capture", "args": {"nope": 1}}).encode() + b"\n",
            "half then close": b'{"v": 1, "op": "pi',
        }
        answers = {name: _err_type(_raw(svc.sock, data)) for name, data in bad.items()}
        assert answers["oversized"].startswith("ProtocolError: request larger than 65536 bytes"), answers
        assert "unsupported protocol version 99" in answers["unknown version"], answers
        assert answers["half then close"].startswith("ProtocolError: incomplete request"), answers
        assert all(a.startswith("ProtocolError") for a in answers.values()), answers
        # the stalled client gets an error frame once its read deadline passes
        stalled.settimeout(5.0)
        frame = stalled.recv(1 << 16)
        stalled.close()
        assert "no full line within 1 s" in _err_type(frame)
        assert call(svc.sock, "ping", timeout=2.0)["pong"] is True
        status = call(svc.sock, "status", timeout=2.0)
        assert status["errors"] >= len(bad) + 1


def test_connection_limit_answers_busy_instead_of_queueing(short_dir):
    svc = TortoiseService(short_dir / "db.kuzu", str(short_dir / "s.sock"), embedder="hashing",
                          read_deadline_s=3.0, max_connections=2)
    with running(svc):
        holders = []
        for _ in range(2):
            h = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            h.connect(svc.sock)
            h.sendall(b"{")
            holders.append(h)
        time.sleep(0.3)
        t0 = time.monotonic()
        assert _err_type(_raw(svc.sock, b'{"v": 1, "op": "ping"}\n')).startswith("Busy")
        assert time.monotonic() - t0 < 1.5  # answered at once, not after the holders' 3 s deadline
        deadline = time.monotonic() + 10
        while True:  # the holders' read deadline frees their slots
            resp = json.loads(_raw(svc.sock, b'{"v": 1, "op": "ping"}\n'))
            if resp["ok"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert resp["ok"] and resp["result"]["pong"] is True, resp
        for h in holders:
            h.close()


@pytest.mark.parametrize("mode", ["snapshot", "wait"])
def test_courtesy_prompt_does_not_wait_for_the_store_lock(short_dir, mode):
    """A courtesy prompt never reads the graph (TOR-38), so a long write holding the store lock does not delay it.
    A retrieval prompt: answered from the current read caches without the lock ("snapshot", the default; the
    same answer as once the lock is free), or it waits for the lock and the hook's deadline cuts it off ("wait",
    the previous behaviour)."""
    svc = TortoiseService(short_dir / "db.kuzu", str(short_dir / "s.sock"), embedder="hashing",
                          read_during_write=mode)
    with running(svc):
        with svc.lock:  # a write in progress
            t0 = time.monotonic()
            res = call(svc.sock, "hook_volunteer", {"stdin": COURTESY, "harness": "claude"}, timeout=1.0)
            assert res == {"stdout": ""} and time.monotonic() - t0 < 0.5
            if mode == "wait":
                with pytest.raises(TimeoutError):
                    call(svc.sock, "hook_volunteer", {"stdin": RETRIEVAL, "harness": "claude"}, timeout=0.5)
            else:
                held = call(svc.sock, "hook_volunteer", {"stdin": RETRIEVAL, "harness": "claude"}, timeout=30.0)
        if mode == "snapshot":
            assert held == call(svc.sock, "hook_volunteer", {"stdin": RETRIEVAL, "harness": "claude"}, timeout=30.0)
            assert svc.view_reads == 2


def test_socket_folder_is_0700_and_socket_0600(short_dir, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_dir))
    monkeypatch.delenv("MEMSIM_TORTOISE_SOCKET", raising=False)
    folder = Path(socket_dir())
    assert folder.parent == short_dir
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)  # left loose by someone: the service tightens it
    svc = TortoiseService(short_dir / "db.kuzu", embedder="hashing")
    assert Path(svc.sock).parent == folder and svc.sock == socket_path_for(short_dir / "db.kuzu")
    with running(svc):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert stat.S_IMODE(os.stat(svc.sock).st_mode) == 0o600
        assert stat.S_ISSOCK(os.stat(svc.sock).st_mode)
    shutil.rmtree(folder)
    svc2 = TortoiseService(short_dir / "db.kuzu", embedder="hashing")
    with running(svc2):  # created fresh under a permissive umask: still 0700
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


# ------------------------------------------------------------------------------------------- serve CLI
def _serve(*args: str):
    from typer.testing import CliRunner

    import harness.cli.tortoise_serve  # noqa: F401  (registers `serve`)
    from harness.cli.tortoise import app

    return CliRunner().invoke(app, ["serve", *args])


def test_serve_status_says_a_socket_accepts_but_does_not_answer(short_dir):
    sock = short_dir / "f.sock"
    with fake_service(sock, _never_answers):
        t0 = time.monotonic()
        r = _serve("--db", str(short_dir / "db.kuzu"), "--socket", str(sock), "--status")
        took = time.monotonic() - t0
    assert r.exit_code == 1, r.output
    assert '"state": "unresponsive"' in r.output
    assert f"a process accepts connections on {sock} but does not answer within 2 s" in r.output
    assert took < 5.0


def test_serve_refuses_an_empty_store_file_like_capture(short_dir):
    db = short_dir / "empty.kuzu"
    db.write_bytes(b"")
    r = _serve("--db", str(db), "--socket", str(short_dir / "s.sock"))
    assert r.exit_code == 1 and "empty file (0 bytes), not a Kuzu store" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output
    assert not (short_dir / "s.sock").exists()


def test_serve_detach_on_a_locked_store_prints_the_lock_reason(short_dir):
    from tortoise_sim import SimConfig, Tortoise

    db = short_dir / "db.kuzu"
    holder = Tortoise(db, config=SimConfig(embedder="hashing"), seed=None)
    try:
        r = _serve("--db", str(db), "--socket", str(short_dir / "s.sock"), "--detach", "--embedder", "hashing")
    finally:
        holder.close()
    assert r.exit_code == 1, r.output
    line = " ".join(r.output.split())
    assert "cannot open the store" in line and "lock" in line.lower(), r.output
    assert "Traceback" not in r.output


def test_cli_command_names_a_socket_that_accepts_but_does_not_answer(short_dir, monkeypatch):
    from typer.testing import CliRunner

    from harness.cli.tortoise import app

    sock = short_dir / "f.sock"
    monkeypatch.setenv("MEMSIM_TORTOISE_SOCKET", str(sock))
    with fake_service(sock, _never_answers):
        t0 = time.monotonic()
        r = CliRunner().invoke(app, ["diary-write", "me", "an entry", "--db", str(short_dir / "db.kuzu")])
        took = time.monotonic() - t0
    assert r.exit_code == 1 and "accepts connections" in r.output and "does not answer within 3 s" in r.output, r
    assert took < 8 and not (short_dir / "db.kuzu").exists()


def test_session_end_hook_has_its_own_timeout(short_dir):
    sock = short_dir / "f.sock"
    payload = json.dumps({"session_id": "s1", "turns": [{"role": "user", "content": "hello there"}]})
    with fake_service(sock, _never_answers):
        r, took = _hook(["hook-session-end", "--db", str(short_dir / "db.kuzu"), "--socket", str(sock)], payload,
                        MEMSIM_HOOK_TIMEOUT="0.2", MEMSIM_HOOK_END_TIMEOUT="0.6")
    lines = r.stderr.decode().splitlines()
    assert r.returncode == 0 and r.stdout == b"" and len(lines) == 1, r
    assert "within 0.6 s ($MEMSIM_HOOK_END_TIMEOUT)" in lines[0], lines
