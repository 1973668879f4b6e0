"""The session-start drain (spec tortoise.md §10.1 item 18): ``hook-session-start`` files every due spool entry
but the live session's, then renders the digest, by default; ``--no-drain`` / ``MEMSIM_HOOK_START_DRAIN=0`` is the
analysed snapshot's hook (digest only). End to end under Claude Code's default SessionEnd budget: the session-end
hook is sent SIGTERM 1.5 s after it starts and the next session starts 1 s later; its digest holds the decision."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from tests.tortoise_sim.sessionkit import (
    DECISION,
    claude_transcript,
    end_hook_json,
    hook,
    hook_env,
    is_filed,
    short_tmp,
    start_hook,
    start_hook_json,
)


@pytest.fixture
def work():
    with short_tmp() as d:
        yield d


def _spool_only(work, db, sid: str = "s1") -> None:
    r = hook(["hook-session-end", "--db", str(db), "--filing", "spool"],
             end_hook_json(sid, claude_transcript(work / f"{sid}.jsonl")))
    assert r.returncode == 0 and r.stderr == b"", r


def test_session_start_drains_then_renders_the_digest_by_default(work):
    db, root = work / "db" / "t.kuzu", work / "db" / "spool"
    _spool_only(work, db)
    assert not db.exists() and not is_filed(root, "s1")
    r = hook(["hook-session-start", "--db", str(db)], start_hook_json("s2"))
    assert r.returncode == 0 and r.stderr == b"", r
    assert DECISION in r.stdout.decode() and is_filed(root, "s1")


@pytest.mark.parametrize("how", ["flag", "env"])
def test_no_drain_is_the_analysed_hook(work, how):
    db, root = work / "db" / "t.kuzu", work / "db" / "spool"
    _spool_only(work, db)
    args, env = (["--no-drain"], {}) if how == "flag" else ([], {"MEMSIM_HOOK_START_DRAIN": "0"})
    r = hook(["hook-session-start", "--db", str(db), *args], start_hook_json("s2"), **env)
    assert r.returncode == 0 and r.stderr == b"", r
    assert r.stdout.decode() == "No prior memory is stored for this workspace yet.\n"
    assert not is_filed(root, "s1") and not db.exists()


def test_the_live_session_is_not_drained(work):
    db, root = work / "db" / "t.kuzu", work / "db" / "spool"
    _spool_only(work, db, "live")
    r = hook(["hook-session-start", "--db", str(db)], start_hook_json("live"))  # a resumed session: its own id
    assert r.returncode == 0 and DECISION not in r.stdout.decode()
    assert not is_filed(root, "live")


def test_nothing_pending_costs_no_import(work):
    """With nothing due the session-start hook looks at the spool folder with one scandir and imports nothing for
    it (no spool module, no read-write store); with only filed entries it reads their metas and still opens
    nothing read-write."""
    db = work / "db" / "t.kuzu"
    code = ("import sys\nfrom tortoise_sim.hook_client import run_hook\n"
            f"out = run_hook('hook-session-start', ['--db', {str(db)!r}], stdin=b'{{}}')\n"
            "print(repr(out)); print(sorted(m for m in ('tortoise_sim.spool', 'tortoise_sim.resident', 'kuzu')"
            " if m in sys.modules))\n")

    def run() -> list[str]:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=hook_env(), timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip().splitlines()

    (work / "db" / "spool" / "entries").mkdir(parents=True)
    out = run()
    assert out[1] == "[]" and "No prior memory" in out[0]
    _spool_only(work, db)
    hook(["hook-session-start", "--db", str(db)], start_hook_json("s2"))  # drains: s1 is filed now
    out = run()
    assert "tortoise_sim.resident" not in out[1] and DECISION in out[0]


def test_through_the_service_the_session_start_drains_too(work):
    from tortoise_sim.service import TortoiseService

    db, root, sock = work / "db" / "t.kuzu", work / "db" / "spool", str(work / "s.sock")
    _spool_only(work, db)
    svc = TortoiseService(db, sock, embedder="hashing")
    svc.start()
    th = threading.Thread(target=svc.serve_forever, daemon=True)
    th.start()
    try:
        r = hook(["hook-session-start", "--db", str(db), "--socket", sock], start_hook_json("s2"))
        assert r.returncode == 0 and r.stderr == b"", r
        assert DECISION in r.stdout.decode() and is_filed(root, "s1")
        res = svc.handle({"v": 1, "op": "hook_session_start", "args": {}})  # nothing sent: no drain, as before
        assert res["ok"] and DECISION in res["result"]["stdout"]
    finally:
        svc.request_shutdown()
        th.join(30)


def _session_pair(work, db, *, before_end: float = 0.0) -> tuple[str, float]:
    """Claude Code's timing: the session-end hook gets SIGTERM 1.5 s after it starts (if it still runs), the next
    session's start hook runs 1 s after that. Returns the digest and the session-start hook's wall time."""
    t = claude_transcript(work / "t.jsonl")
    t0 = time.monotonic()
    proc = start_hook(["hook-session-end", "--harness", "claude", "--db", str(db)], end_hook_json("e1", t))
    try:
        proc.wait(1.5)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(10)
    time.sleep(max(0.0, t0 + 2.5 - time.monotonic()))
    s0 = time.monotonic()
    r = hook(["hook-session-start", "--db", str(db)], start_hook_json("e2"))
    took = time.monotonic() - s0
    assert r.returncode == 0, r
    return r.stdout.decode(), took


def test_a_decision_is_in_the_next_digest_one_second_after_a_cancelled_session_end(work):
    db = work / "db" / "t.kuzu"
    out, took = _session_pair(work, db)
    assert DECISION in out
    assert took < 3.0 + 5.0  # generous: the hook's own budget is 3 s over its usual cost


def test_the_same_holds_while_a_writer_holds_the_store_through_the_session_end(work):
    """A writer holds the store for 2 s from before the session end: the detached filer waits for the store, and
    the next session's start waits for the filer (the previous hook found the store locked and left the session
    in the spool, and the previous session-start hook did not drain)."""
    from tortoise_sim.resident import open_sim

    db = work / "db" / "t.kuzu"
    db.parent.mkdir(parents=True)
    sim = open_sim(db, "analysed", "minilm")
    timer = threading.Timer(2.0, sim.close)
    timer.start()
    try:
        out, _ = _session_pair(work, db)
    finally:
        timer.join()
    assert DECISION in out, json.dumps(out)


def test_a_hung_service_costs_the_session_start_its_timeout_only_even_with_entries_pending(work):
    """Something pending and a service that accepts and never answers: the hook asks the service a ping first, so
    it gives up after MEMSIM_HOOK_TIMEOUT (one stderr line, nothing on stdout), not after the timeout plus the drain
    budget (the drain request's own, longer wait)."""
    from tests.tortoise_sim.sessionkit import fake_service, never_answers

    db, sock = work / "db" / "t.kuzu", work / "hung.sock"
    _spool_only(work, db, "p1")
    with fake_service(sock, never_answers):
        t0 = time.monotonic()
        r = hook(["hook-session-start", "--db", str(db), "--socket", str(sock)], start_hook_json("live"),
                 MEMSIM_HOOK_TIMEOUT="0.5", MEMSIM_HOOK_DRAIN_BUDGET="3")
        took = time.monotonic() - t0
    assert r.returncode == 0 and r.stdout == b""
    assert len(r.stderr.splitlines()) == 1 and b"did not answer" in r.stderr, r.stderr
    assert took < 0.5 + 2.0, took  # interpreter start and the spool check; the old wait was 0.5 + 3 s
