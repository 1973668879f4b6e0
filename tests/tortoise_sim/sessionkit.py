"""Shared by the session-hook tests: hand-written Claude Code transcripts, the hook commands as subprocesses, a
store's count of filed copies of a session, and a fake service socket."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

# the fake service socket (a hung or dying service) is the service-fault tests' own
from tests.tortoise_sim.test_service_faults import fake_service as fake_service

PY = sys.executable
DECISION = "the build cache lives on local disk"
PROMPT = f"We went through the storage options.\ndecision: {DECISION}"
REPLY = "Understood, local disk it is."


@contextlib.contextmanager
def short_tmp() -> Iterator[Path]:
    d = tempfile.mkdtemp(prefix="mse", dir="/tmp")  # AF_UNIX paths are limited to ~107 bytes
    try:
        yield Path(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def claude_transcript(path: Path, prompt: str = PROMPT, reply: str = REPLY) -> Path:
    rows = [
        {"type": "queue-operation", "operation": "enqueue"},
        {"type": "user", "uuid": "u1", "parentUuid": None, "isSidechain": False, "timestamp": "2026-12-02T08:00:00Z",
         "message": {"role": "user", "content": prompt}},
        {"type": "attachment", "attachment": {"type": "hook_success", "content": "digest text"}},
        {"type": "api-request-blob", "message": {"role": "user", "content": "<system-reminder>x</system-reminder>\n"
                                                 + prompt}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "isSidechain": False,
         "timestamp": "2026-12-02T08:00:01Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": reply}]}},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def end_hook_json(sid: str, transcript: Path) -> str:
    return json.dumps({"session_id": sid, "transcript_path": str(transcript), "cwd": str(transcript.parent),
                       "hook_event_name": "SessionEnd", "reason": "other"})


def start_hook_json(sid: str) -> str:
    return json.dumps({"session_id": sid, "hook_event_name": "SessionStart", "source": "startup"})


def hook_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSIM_")}
    env.update(extra)
    return env


def hook(args: list[str], stdin: str, timeout: float = 60.0, **env: str) -> subprocess.CompletedProcess:
    """``memsim tortoise <args>`` as a host runs it (the console entry), stdin given, output captured."""
    return subprocess.run([PY, "-c", "from harness.cli.entry import main; main()", "tortoise", *args],
                          input=stdin.encode(), capture_output=True, env=hook_env(**env), timeout=timeout)


def start_hook(args: list[str], stdin: str, **env: str) -> subprocess.Popen:
    proc = subprocess.Popen([PY, "-c", "from harness.cli.entry import main; main()", "tortoise", *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=hook_env(**env))
    assert proc.stdin is not None
    proc.stdin.write(stdin.encode())
    proc.stdin.close()
    return proc


def wait_for(pred: Callable[[], bool], timeout: float = 30.0, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def spool_meta(root: Path, sid: str) -> dict | None:
    from tortoise_sim.spool import Spool

    return Spool(root).read_meta(sid)


def is_filed(root: Path, sid: str) -> bool:
    meta = spool_meta(root, sid)
    return bool(meta and meta.get("filed_key") and meta.get("filed_key") == meta.get("capture_key"))


def filed_copies(db: Path, sid: str) -> int:
    """How many times the store recorded a capture of ``sid`` (its ``SessionRecorded`` feed events): one per
    filing, so a re-post of an already filed session shows as 2."""
    from tortoise_sim.resident import open_sim

    sim = open_sim(db, "analysed", "minilm")
    try:
        rows = sim.store.query("MATCH (e:GraphEvent {type:'SessionRecorded'}) WHERE e.payload CONTAINS $s "
                               "RETURN count(e) AS n", {"s": json.dumps(sid)})
        return int(rows[0]["n"]) if rows else 0
    finally:
        sim.close()


@contextlib.contextmanager
def running_service(db: Path, sock: str) -> Iterator[object]:
    """A resident ``TortoiseService`` (hashing embedder) on ``db`` answering on ``sock`` in a thread of this
    process, shut down on the way out."""
    import threading

    from tortoise_sim.service import TortoiseService

    db.parent.mkdir(parents=True, exist_ok=True)
    svc = TortoiseService(db, sock, embedder="hashing")
    svc.start()
    th = threading.Thread(target=svc.serve_forever, daemon=True)
    th.start()
    try:
        yield svc
    finally:
        svc.request_shutdown()
        th.join(30)


def never_answers(c: socket.socket) -> None:
    with contextlib.suppress(OSError):
        c.recv(1 << 20)  # reads the request and holds the connection without a word


def dies_mid_request(c: socket.socket) -> None:
    with contextlib.suppress(OSError):
        c.recv(1 << 20)
        c.close()  # as a service killed while it files: the connection drops with no answer
