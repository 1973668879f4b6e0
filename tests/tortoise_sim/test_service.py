"""Resident Tortoise service and the stdlib hook client (issue 12 item 1)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from tortoise_sim.hook_client import (
    PROTOCOL_VERSION,
    ServiceError,
    call,
    pid_path_for,
    socket_path_for,
)
from tortoise_sim.service import ServiceStartError, TortoiseService, clear_stale, probe

PY = sys.executable
HEAVY = ("torch", "kuzu", "dspy", "pydantic", "numpy", "typer", "rich", "transformers", "sentence_transformers",
         "sklearn", "scipy", "tortoise_sim.store")
PROMPT = json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit",
                     "prompt": "What did we decide about the simulator store?"})
FACTS = ("Use Kuzu for the simulator store.", "The release train ships every Tuesday.",
         "Postgres was rejected for the embedded cache.")


@pytest.fixture(autouse=True)
def _patient_client(monkeypatch):
    """These tests check the protocol, not latency: the client's 1 s default (a prompt hook's budget) is raised so a
    loaded machine cannot fail them; the timeout itself is tested in test_service_faults.py."""
    monkeypatch.setenv("MEMSIM_HOOK_TIMEOUT", "60")


@pytest.fixture
def short_dir():
    d = tempfile.mkdtemp(prefix="mst", dir="/tmp")  # AF_UNIX paths are limited to ~107 bytes
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("MEMSIM_TORTOISE_SOCKET", None)
    env.update(extra)
    return env


def _hook(args: list[str], stdin: str | bytes = PROMPT, **env: str) -> subprocess.CompletedProcess:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run([PY, "-m", "tortoise_sim.hook_client", *args], input=data, capture_output=True,
                          env=_env(**env), timeout=120)


def _fill(path: Path, encoder) -> list[str]:
    from tortoise_sim import Tortoise

    t = Tortoise(path, encoder=encoder, seed=None)
    ids = []
    for c in FACTS:
        row = t.create_point("decision", c, credibility="gold")
        t.update_point(row["id"], status="live")
        ids.append(row["id"])
    t.close()
    return ids


class _Running:
    def __init__(self, svc: TortoiseService) -> None:
        self.svc = svc
        self.thread = threading.Thread(target=svc.serve_forever, daemon=True)

    def __enter__(self) -> TortoiseService:
        self.svc.start()
        self.thread.start()
        return self.svc

    def __exit__(self, *exc: object) -> None:
        self.svc.request_shutdown()
        self.thread.join(30)
        assert not self.thread.is_alive()


def test_client_imports_stdlib_only():
    code = ("import sys, os\n"
            "import tortoise_sim.hook_client, harness.cli.entry\n"
            f"heavy = {HEAVY!r}\n"
            "print(json.dumps(sorted(m for m in heavy if m in sys.modules)) if (json := __import__('json')) else '')\n")
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
    # the `memsim` console entry on a hook command: no typer/rich/torch... before the hook's own work
    code = ("import sys, os, json\n"
            "sys.argv = ['memsim', 'tortoise', 'hook-volunteer', '--bogus']\n"
            "real = os._exit\n"
            f"heavy = {HEAVY!r}\n"
            "def ex(c):\n"
            "    sys.stdout.write('MODS ' + json.dumps(sorted(m for m in heavy if m in sys.modules)))\n"
            "    sys.stdout.flush(); real(c)\n"
            "os._exit = ex\n"
            "import harness.cli.entry\n"
            "harness.cli.entry.main()\n")
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=_env(), timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("MODS "), (out.stdout, out.stderr)
    assert json.loads(out.stdout[5:]) == []


def test_client_never_imports_the_service():
    """No hook_client <-> service import cycle: the client reaches the session-end work through hooks, not through
    the service module, even lazily (every import statement of the module, at any depth)."""
    import ast

    import tortoise_sim.hook_client as hc

    names = set()
    for node in ast.walk(ast.parse(Path(hc.__file__).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mod = ("." * node.level) + (node.module or "")
            names |= {mod} | {f"{mod}.{a.name}" for a in node.names}
    service_imports = {n for n in names if "service" in n.split(".")}
    assert service_imports == set(), sorted(names)
    assert "tortoise_sim.resident" in names  # the fallback's path to session_end_apply
    from tortoise_sim import hooks, resident, service

    assert service.session_end_apply.__module__ == "tortoise_sim.service"
    assert resident.session_end_apply.__module__ == "tortoise_sim.resident"
    assert not hasattr(hooks, "session_end_apply")  # hooks sits below the SDK: no hooks <-> sdk cycle


def test_hook_exits_zero_with_empty_stdout_on_any_error(short_dir):
    db = str(short_dir / "none.kuzu")
    cases = [
        (["hook-volunteer", "--bogus"], PROMPT),
        (["hook-volunteer", "--db"], PROMPT),
        (["hook-volunteer", "--harness", "claude", "--db", db, "extra-arg"], PROMPT),
        (["hook-nope"], PROMPT),
        ([], PROMPT),
        (["hook-volunteer", "--db", db], b"\xff\xfe\x00garbage{"),
        (["hook-volunteer", "--db", db], PROMPT),  # no store: nothing, and nothing created
        (["hook-session-start", "--db", db, "--harness", "x"], ""),
        (["hook-session-end", "--db", db], "not json"),
    ]
    for args, stdin in cases:
        r = _hook(args, stdin)
        assert r.returncode == 0 and r.stdout == b"", (args, r.stdout, r.stderr)
    assert not Path(db).exists()
    r = subprocess.run([str(Path(PY).parent / "memsim"), "tortoise", "hook-volunteer", "--unknown", "x"],
                       input=PROMPT.encode(), capture_output=True, env=_env(), timeout=60)
    assert r.returncode == 0 and r.stdout == b"" and b"unknown option" in r.stderr


def test_protocol_round_trip(short_dir):
    sock = str(short_dir / "s.sock")
    svc = TortoiseService(short_dir / "db.kuzu", sock, embedder="hashing")
    with _Running(svc):
        assert call(sock, "ping")["pong"] is True
        st = call(sock, "status")
        assert st["pid"] == os.getpid() and st["protocol"] == PROTOCOL_VERSION and st["errors"] == 0
        row = call(sock, "diary_write", {"agent": "ann", "entry": "shipped the parser", "topic": "work"})
        assert "embedding" not in row and row["content"]
        rows = call(sock, "diary_read", {"agent": "ann"})
        assert [r["id"] for r in rows] == [row["id"]]
        res = call(sock, "capture", {"conversation": [{"role": "user", "content": "decision: pin kuzu to 0.11"}],
                                     "session_id": "s1"})
        assert res["session_id"] == "s1"
        with pytest.raises(ServiceError) as e:
            call(sock, "volunteer", {"window": []})
        assert e.value.code == "EMPTY_WINDOW"
        with pytest.raises(ServiceError, match="unknown op"):
            call(sock, "drop_everything")
        with pytest.raises(ServiceError, match="bad arguments"):
            call(sock, "diary_read", {"nope": 1})
        # raw socket: wrong version and a malformed line are answered with errors, the service keeps serving
        for raw in (json.dumps({"v": 99, "op": "ping"}).encode() + b"\n", b"{not json\n"):
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(sock)
                s.sendall(raw)
                resp = json.loads(s.makefile("rb").readline())
            assert resp["v"] == PROTOCOL_VERSION and resp["ok"] is False
            assert resp["error"]["type"] == "ProtocolError"
        assert call(sock, "status")["errors"] == 5
        assert Path(pid_path_for(sock)).exists()
        with pytest.raises(ServiceStartError, match="already serves"):
            clear_stale(sock)
    assert not Path(sock).exists() and not Path(pid_path_for(sock)).exists()
    assert call(sock, "ping") is None  # no service: the caller may fall back


def test_socket_path_is_derived_from_db(short_dir, monkeypatch):
    monkeypatch.delenv("MEMSIM_TORTOISE_SOCKET", raising=False)
    a = socket_path_for(str(short_dir / "a.kuzu"))
    assert a == socket_path_for(str(short_dir / "." / "a.kuzu")) != socket_path_for(str(short_dir / "b.kuzu"))
    assert len(socket_path_for("/" + "x" * 300)) < 108
    monkeypatch.setenv("MEMSIM_TORTOISE_SOCKET", "/tmp/explicit.sock")
    assert socket_path_for(str(short_dir / "a.kuzu")) == "/tmp/explicit.sock"
    assert socket_path_for(None, "/tmp/flag.sock") == "/tmp/flag.sock"


def test_stale_socket_is_cleared_and_hook_falls_back(short_dir):
    sock = str(short_dir / "s.sock")
    # a crashed service: socket file left (nobody listening) and a pid file naming a dead process
    s = socket.socket(socket.AF_UNIX)
    s.bind(sock)
    s.close()
    dead = subprocess.run([PY, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    Path(pid_path_for(sock)).write_text(json.dumps({"pid": int(dead), "socket": sock}))
    assert probe(sock)["state"] == "stale"
    assert call(sock, "ping") is None
    db = short_dir / "db.kuzu"
    # the hook with the stale socket: falls back in-process (no store yet => empty output, exit 0)
    r = _hook(["hook-volunteer", "--db", str(db), "--socket", sock])
    assert r.returncode == 0 and r.stdout == b""
    svc = TortoiseService(db, sock, embedder="hashing")
    with _Running(svc):  # start clears the stale files
        assert call(sock, "ping")["pid"] == os.getpid()
    assert probe(sock)["state"] == "absent"


def test_fallback_and_service_give_the_inprocess_output(short_dir):
    from tortoise_sim.hooks import hook_volunteer_turn
    from tortoise_sim.light_encoder import light_encoder
    from tortoise_sim.store import TortoiseStore

    db = short_dir / "db.kuzu"
    sock = str(short_dir / "s.sock")
    ids = _fill(db, light_encoder())
    st = TortoiseStore(db, encoder=light_encoder(), seed=None)
    want, _ = hook_volunteer_turn(PROMPT, "claude", store=st)
    st.close()
    assert f"point/{ids[0]}" in json.loads(want)["hookSpecificOutput"]["additionalContext"]
    args = ["hook-volunteer", "--harness", "claude", "--db", str(db)]
    cold = _hook(args, MEMSIM_TORTOISE_SOCKET=sock)
    assert cold.returncode == 0 and cold.stdout.decode() == want
    assert _hook(args, '{"prompt": "thanks!"}', MEMSIM_TORTOISE_SOCKET=sock).stdout == b""
    with _Running(TortoiseService(db, sock)):
        warm = _hook(args, MEMSIM_TORTOISE_SOCKET=sock)
        assert warm.returncode == 0 and warm.stdout.decode() == want
        start = _hook(["hook-session-start", "--db", str(db)], "", MEMSIM_TORTOISE_SOCKET=sock)
        assert FACTS[0] in start.stdout.decode()
    cold_start = _hook(["hook-session-start", "--db", str(db)], "", MEMSIM_TORTOISE_SOCKET=sock)
    assert cold_start.stdout == start.stdout


def test_concurrent_clients_with_a_writer(short_dir):
    db = short_dir / "db.kuzu"
    sock = str(short_dir / "s.sock")
    n_writes, n_readers, per_reader = 30, 6, 15
    errors: list[BaseException] = []
    outs: list[str] = []

    def reader() -> None:
        try:
            for _ in range(per_reader):
                outs.append(call(sock, "hook_volunteer", {"stdin": PROMPT, "harness": "claude"})["stdout"])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def writer() -> None:
        try:
            for i in range(n_writes):
                call(sock, "diary_write", {"agent": "w", "entry": f"entry {i} about the simulator store"})
                if i % 10 == 0:
                    call(sock, "capture", {"conversation": [{"role": "user", "content": f"decision: step {i}"}]})
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    from tortoise_sim.embed import HashingEncoder

    ids = _fill(db, HashingEncoder())
    with _Running(TortoiseService(db, sock, embedder="hashing")) as svc:
        threads = [threading.Thread(target=reader) for _ in range(n_readers)] + [threading.Thread(target=writer)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == []
        assert len(outs) == n_readers * per_reader and all(f"point/{ids[0]}" in o for o in outs)
        rows = call(sock, "diary_read", {"agent": "w", "last_n": 100})
        assert sorted(r["content"] for r in rows) == sorted(f"entry {i} about the simulator store"
                                                            for i in range(n_writes))
        assert svc.op_status()["errors"] == 0


def test_cli_routes_writes_to_the_service(short_dir, monkeypatch):
    from typer.testing import CliRunner

    from harness.cli.main import app

    db = short_dir / "db.kuzu"
    sock = str(short_dir / "s.sock")
    monkeypatch.setenv("MEMSIM_TORTOISE_SOCKET", sock)
    runner = CliRunner()
    with _Running(TortoiseService(db, sock, embedder="hashing")) as svc:
        r = runner.invoke(app, ["tortoise", "diary-write", "ann", "shipped the parser", "--db", str(db)])
        assert r.exit_code == 0, r.output
        r = runner.invoke(app, ["tortoise", "diary-read", "ann", "--db", str(db)])
        assert r.exit_code == 0 and json.loads(r.stdout)[0]["content"] == "shipped the parser"
        r = runner.invoke(app, ["tortoise", "capture", "--db", str(db), "--session-id", "s9"],
                          input=json.dumps([{"role": "user", "content": "decision: pin kuzu"}]))
        assert r.exit_code == 0 and json.loads(r.stdout)["session_id"] == "s9"
        r = runner.invoke(app, ["tortoise", "volunteer", "--db", str(db)], input="[]")
        assert r.exit_code == 1 and "EMPTY_WINDOW" in r.output
        r = runner.invoke(app, ["tortoise", "show", "nope", "--db", str(db)])
        assert r.exit_code == 1 and "held by the Tortoise service" in r.output
        assert svc.writes == 2


def test_session_end_hook_is_filed_by_the_service(short_dir):
    db = short_dir / "db.kuzu"
    sock = str(short_dir / "s.sock")
    spool = short_dir / "spool"
    hook = {"session_id": "sess-1", "hook_event_name": "SessionEnd",
            "turns": [{"role": "user", "content": "decision: adopt the release train"},
                      {"role": "assistant", "content": "Noted."}]}
    with _Running(TortoiseService(db, sock, embedder="hashing")) as svc:
        r = _hook(["hook-session-end", "--db", str(db), "--spool-dir", str(spool)], json.dumps(hook),
                  MEMSIM_TORTOISE_SOCKET=sock)
        assert r.returncode == 0 and r.stdout == b""
        with svc.lock:
            assert svc.sim.store.get_point("sess-1_t1")["content"] == "[assistant] Noted."
        assert svc.writes == 1 and list(spool.rglob("*.meta.json"))


def _volunteer(svc: TortoiseService) -> str:
    res = svc.handle({"v": PROTOCOL_VERSION, "op": "hook_volunteer", "args": {"stdin": PROMPT, "harness": "claude"}})
    assert res["ok"], res
    return res["result"]["stdout"]


def _held_write(svc: TortoiseService, steps: dict[str, threading.Event]) -> threading.Thread:
    """A write that holds the store lock in two stages: after adding a claim the prompt retrieves (``wrote``, then
    waits for ``go1``), and after a mid-write search that updates the read caches (``searched``, waits ``go2``)."""
    from tortoise_sim.search import search_points

    def write(sim) -> None:
        row = sim.create_point("decision", "We decide the simulator store keeps Kuzu.", credibility="gold")
        sim.update_point(row["id"], status="live")
        steps["wrote"].set()
        assert steps["go1"].wait(60)
        search_points(sim.store, "simulator store", 5)  # the capture path searches mid-write
        steps["searched"].set()
        assert steps["go2"].wait(60)

    t = threading.Thread(target=lambda: svc._store_op(write, True), daemon=True)
    t.start()
    return t


def _run(fn, out: list) -> threading.Thread:
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("mode", ["snapshot", "wait"])
def test_a_read_during_a_write_answers_as_a_serial_order(short_dir, mode):
    """"snapshot": a retrieval hook arriving while a write holds the store is answered at once from the pre-write
    caches, bit-identical to the serial order read-then-write; once the write has updated a cache, a later reader
    waits and gets the post-write answer. "wait" (the previous behaviour): every reader waits for the write."""
    from tortoise_sim.embed import HashingEncoder

    db = short_dir / "db.kuzu"
    _fill(db, HashingEncoder())
    svc = TortoiseService(db, str(short_dir / "s.sock"), embedder="hashing", read_during_write=mode)
    svc.start()
    try:
        before = _volunteer(svc)
        steps = {k: threading.Event() for k in ("wrote", "go1", "searched", "go2")}
        writer = _held_write(svc, steps)
        assert steps["wrote"].wait(60)
        early: list[str] = []
        r1 = _run(lambda: _volunteer(svc), early)
        if mode == "snapshot":
            r1.join(60)
            assert not r1.is_alive() and early == [before] and svc.snapshot_reads == 1
        steps["go1"].set()
        assert steps["searched"].wait(60)
        late: list[str] = []
        r2 = _run(lambda: _volunteer(svc), late)
        steps["go2"].set()
        for t in (writer, r1, r2):
            t.join(60)
            assert not t.is_alive()
        after = _volunteer(svc)
        assert after != before and "We decide the simulator store keeps Kuzu." in after
        assert late == [after]
        assert early == ([before] if mode == "snapshot" else [after])
        assert svc.snapshot_reads == (1 if mode == "snapshot" else 0) and svc.errors == 0
    finally:
        svc.close()


def test_read_during_write_mode_is_validated(short_dir):
    with pytest.raises(ValueError, match="read_during_write"):
        TortoiseService(short_dir / "db.kuzu", read_during_write="sometimes")


def test_a_read_the_caches_cannot_answer_takes_the_lock(short_dir, monkeypatch):
    """A retrieval hook that needs anything beyond the read caches (here: a store method) is not answered from
    the cache view; it is answered under the store lock, with the same output."""
    from tortoise_sim import volunteer as vol
    from tortoise_sim.embed import HashingEncoder

    db = short_dir / "db.kuzu"
    _fill(db, HashingEncoder())
    svc = TortoiseService(db, str(short_dir / "s.sock"), embedder="hashing")
    svc.start()
    try:
        want = _volunteer(svc)
        assert svc.view_reads == 1 and FACTS[0] in want
        orig = vol.search_points

        def probing(store, *a, **k):
            store.get_point  # noqa: B018 - an attribute the cache view does not carry
            return orig(store, *a, **k)

        monkeypatch.setattr(vol, "search_points", probing)
        assert _volunteer(svc) == want
        assert svc.view_reads == 1 and svc.errors == 0
    finally:
        svc.close()


def test_an_interrupted_start_ends_the_service_it_started(tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM while ``start_detached`` waits for the service to answer: the caller never gets the pid,
    so the started process must not outlive the wait (``memsim bench serve`` stopped during a 1e5 load left one)."""
    import subprocess

    from tortoise_sim import service as svc

    started: list[subprocess.Popen] = []
    real = subprocess.Popen

    def popen(*a, **kw):
        p = real(*a, **kw)
        started.append(p)
        return p

    def interrupted(*a, **kw):  # the first status call after the start is where Ctrl-C lands
        if started:
            raise KeyboardInterrupt
        return None

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr(svc, "call", interrupted)
    with pytest.raises(KeyboardInterrupt):
        svc.start_detached(tmp_path / "t.kuzu", str(tmp_path / "s.sock"), timeout=60.0)
    (proc,) = started
    assert proc.poll() is not None  # ended, not orphaned
