"""A session end never loses a session: the hook client spools the transcript first (standard library), then files
it; a hook killed right after the spool write, a hung service or a service that dies mid-request leave the session
in the spool, and a later flush files exactly one copy (the hook path posts with the capture key)."""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.tortoise_sim.sessionkit import (
    DECISION,
    claude_transcript,
    dies_mid_request,
    end_hook_json,
    fake_service,
    filed_copies,
    hook,
    is_filed,
    never_answers,
    short_tmp,
    spool_meta,
    start_hook,
    start_hook_json,
    wait_for,
)


@pytest.fixture
def work():
    with short_tmp() as d:
        yield d


def _later_flush(db, root) -> str:
    """The next session's start: the drain files what is due, then the digest."""
    r = hook(["hook-session-start", "--db", str(db)], start_hook_json("next-session"))
    assert r.returncode == 0 and r.stderr == b"", r
    return r.stdout.decode()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_hook_killed_right_after_the_spool_write_leaves_the_session_spooled(work, sig):
    db, root = work / "db" / "t.kuzu", work / "db" / "spool"
    t = claude_transcript(work / "t.jsonl")
    proc = start_hook(["hook-session-end", "--harness", "claude", "--db", str(db)], end_hook_json("k1", t),
                      MEMSIM_TEST_HOOK_END_SLEEP="30")
    try:
        assert wait_for(lambda: spool_meta(root, "k1") is not None, 20)
        proc.send_signal(sig)
        assert proc.wait(10) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    from tortoise_sim.spool import Spool

    assert [t["role"] for t in Spool(root).read_turns("k1")] == ["user", "assistant"]
    assert not is_filed(root, "k1") and not db.exists()  # spooled, never filed: not lost
    assert DECISION in _later_flush(db, root)
    assert is_filed(root, "k1") and filed_copies(db, "k1") == 1
    _later_flush(db, root)  # nothing due: no second copy
    assert filed_copies(db, "k1") == 1


def test_a_hung_service_leaves_the_session_in_the_spool(work):
    db, root, sock = work / "db" / "t.kuzu", work / "db" / "spool", work / "hung.sock"
    t = claude_transcript(work / "t.jsonl")
    with fake_service(sock, never_answers):
        t0 = time.monotonic()
        r = hook(["hook-session-end", "--db", str(db), "--socket", str(sock)], end_hook_json("h1", t),
                 MEMSIM_HOOK_END_TIMEOUT="0.5")
        took = time.monotonic() - t0
    assert r.returncode == 0 and r.stdout == b"" and took < 10
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and "did not answer" in lines[0] and "stays in the spool" in lines[0], lines
    assert spool_meta(root, "h1") is not None and not is_filed(root, "h1")
    assert DECISION in _later_flush(db, root)  # the service is gone now: the drain files it
    assert filed_copies(db, "h1") == 1


def test_a_service_that_dies_mid_request_leaves_the_session_in_the_spool(work):
    db, root, sock = work / "db" / "t.kuzu", work / "db" / "spool", work / "dies.sock"
    t = claude_transcript(work / "t.jsonl")
    with fake_service(sock, dies_mid_request):
        r = hook(["hook-session-end", "--db", str(db), "--socket", str(sock)], end_hook_json("d1", t))
    assert r.returncode == 0 and r.stdout == b""
    assert len(r.stderr.splitlines()) == 1 and b"stays in the spool" in r.stderr
    assert spool_meta(root, "d1") is not None
    # a killed service leaves its socket file behind: nothing accepts there now, so the hook files without it
    t2 = claude_transcript(work / "t2.jsonl", prompt="decision: logs rotate daily", reply="Rotating daily.")
    r = hook(["hook-session-end", "--db", str(db), "--socket", str(sock)], end_hook_json("d2", t2))
    assert r.returncode == 0 and r.stdout == b"" and r.stderr == b"", r
    assert wait_for(lambda: is_filed(root, "d2"), 60), (root / "filer.log").read_text()
    assert not is_filed(root, "d1")  # the detached filer files its own session only
    out = _later_flush(db, root)
    assert DECISION in out and "logs rotate daily" in out
    assert (filed_copies(db, "d1"), filed_copies(db, "d2")) == (1, 1)


def test_a_filing_killed_after_the_capture_is_not_filed_twice(work):
    """A filer killed between the capture and the spool's filed mark: the retry posts the same capture key and the
    store drops it. Without the key (``spool-flush --no-capture-key``, upstream's post) the same retry stores a
    second copy, which is why the hook path sends it."""
    from tortoise_sim.resident import open_sim
    from tortoise_sim.spool import Spool

    db, root = work / "db" / "t.kuzu", work / "db" / "spool"
    for sid in ("c1", "c2"):
        r = hook(["hook-session-end", "--db", str(db), "--filing", "spool"],
                 end_hook_json(sid, claude_transcript(work / f"{sid}.jsonl")))
        assert r.returncode == 0 and r.stderr == b"", r
    sim = open_sim(db, "analysed", "minilm")
    try:  # what the killed filing did before it died: the capture, keyed, but no filed mark in the spool
        for sid in ("c1", "c2"):
            meta = Spool(root).read_meta(sid)
            sim.capture_session(Spool(root).read_turns(sid), session_id=sid, capture_key=meta["capture_key"])
        from tortoise_sim.resident import drain_spool

        counts = drain_spool(sim, root, exclude_session_id="c2")  # the hook path's retry (capture key sent)
        assert counts["filed"] == 1 and is_filed(root, "c1")
        from tortoise_sim.spool import local_capture_post

        Spool(root, send_capture_key=False).flush_spool(local_capture_post(sim.capture_session),
                                                        int(time.time() * 1000), only_session_id="c2")
    finally:
        sim.close()
    assert filed_copies(db, "c1") == 1
    assert filed_copies(db, "c2") == 2  # the unkeyed retry duplicated it


def test_the_lock_file_orders_spool_writes(work):
    """The client and a filer or service never write one entry at once: ``spool_write`` holds the spool lock."""
    import fcntl
    import threading

    from tortoise_sim.spool import LOCK_NAME, Spool

    root = work / "spool"
    sp = Spool(root)
    sp.spool_write("l1", [{"role": "user", "content": "a"}], "claude", "hook", "m")
    fd = open(root / LOCK_NAME, "rb+")  # noqa: SIM115
    fcntl.flock(fd, fcntl.LOCK_EX)
    done = threading.Event()

    def write() -> None:
        sp.spool_write("l1", [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "claude",
                       "hook", "m")
        done.set()

    th = threading.Thread(target=write)
    th.start()
    assert not done.wait(0.5)  # blocked on the lock
    fcntl.flock(fd, fcntl.LOCK_UN)
    fd.close()
    assert done.wait(10)
    th.join()
    assert json.loads(json.dumps(sp.read_turns("l1")))[-1]["content"] == "b"
