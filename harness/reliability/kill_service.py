"""Real kills of the resident Tortoise service in the middle of a capture: nothing acknowledged is lost.

The kill runner (:mod:`harness.reliability.kill`) for a design runs the scenario and the SIGKILL in one child. Here the
design is a server: the child is ``python -m tortoise_sim.service``-equivalent (a :class:`TortoiseService` on a
Unix socket, its store's fault hook armed to SIGKILL the process at a chosen durable step), and the client is this
process, sending captures over the socket one after another, exactly as ``memsim tortoise capture`` does while a
service runs. A capture counts as **acknowledged** when the service answered ``ok``. After the kill a fresh
interpreter reopens the store (Kuzu replays its write-ahead log) and checks that every acknowledged session is
there (its Session node and every turn's text) and that no session is stored twice.

Step names are those of ``tortoise_sim`` (``capture.turns`` before a capture's turn transaction, ``kuzu.commit``
around every COMMIT). ``kill_run`` of :mod:`harness.reliability.kill` dispatches plans of the ``tortoise.service``
sequence here, so ``kill_run(SERVICE_KILL_PLANS[i])`` returns the same record as the other kill plans.

``python -m harness.reliability.kill_service serve|check ...`` are the two child entry points.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.reliability.child import child_main
from harness.reliability.crash import CrashHook, Event, KillPlan

__all__ = ["SERVICE_KILL_PLANS", "SEQUENCE", "kill_run_service", "conversation"]

SEQUENCE = "tortoise.service"
CAPTURES = 6  # the client sends this many; the kill lands inside capture number ``plan.occurrence``

# ``occurrence`` is the 1-based capture in whose middle the kill lands; ``step``/``kind`` name the event of that
# capture (counted from its ``capture.turns``) at which the service SIGKILLs itself; ``step`` "kuzu.commit#k" is the
# k-th COMMIT of that capture.
SERVICE_KILL_PLANS: list[KillPlan] = [
    KillPlan(SEQUENCE, "faithful", "before", "kuzu.commit#1", 3,
             "service killed inside capture 3's turn transaction (statements run, no COMMIT): captures 1-2 were "
             "acknowledged and must survive Kuzu's WAL recovery; capture 3 was never acknowledged"),
    KillPlan(SEQUENCE, "faithful", "after", "kuzu.commit#1", 3,
             "service killed right after capture 3's turns committed, before its extraction and its answer: "
             "captures 1-2 must survive; capture 3's turns may stay (never acknowledged)"),
    KillPlan(SEQUENCE, "faithful", "before", "kuzu.commit#3", 4,
             "service killed at capture 4's third COMMIT (after its turns): captures 1-3 must survive whole"),
]


def conversation(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"decision: service capture {i} keeps release train {i}"},
            {"role": "assistant", "content": f"Noted: release train {i}."},
            {"role": "user", "content": f"and the rollback window for train {i} is {i + 2} hours"}]


def _serve(root: str, kind: str, step: str, capture_no: int) -> None:
    """The service child: serve until SIGKILLed at ``kind step`` of capture ``capture_no``."""
    from tortoise_sim.service import TortoiseService

    name, _, k = step.partition("#")
    want = int(k or 1)
    state = {"captures": 0, "hits": 0}

    def on_event(ev: Event) -> None:
        if ev.kind == "before" and ev.step == "capture.turns":
            state["captures"] += 1
            state["hits"] = 0
            return
        if state["captures"] == capture_no and ev.kind == kind and ev.step == name:
            state["hits"] += 1
            if state["hits"] == want:
                os.kill(os.getpid(), signal.SIGKILL)

    svc = TortoiseService(Path(root) / "db.kuzu", str(Path(root) / "s.sock"), embedder="hashing",
                          fault_hook=CrashHook(on_event=on_event))
    svc.start()
    print("ready", flush=True)
    svc.serve_forever()


def _check(root: str) -> None:
    """Fresh process: reopen the store, compare with the acknowledged captures."""
    from tortoise_sim import SimConfig, Tortoise

    acks = json.loads((Path(root) / "acks.json").read_text())
    out: dict[str, Any] = {"start": "ok", "lost": [], "duplicates": [], "disagree": [], "notes": [],
                           "acked": len(acks)}
    try:
        t = Tortoise(Path(root) / "db.kuzu", config=SimConfig(embedder="hashing"), seed=None)
    except Exception as exc:  # noqa: BLE001 - reported as the restart's outcome
        out.update(start="unclear_error", notes=[f"{type(exc).__name__}: {exc}"])
        print(json.dumps(out))
        return
    try:
        contents = [r["c"] or "" for r in t.store.query("MATCH (p:Point) RETURN p.content AS c")]
        sessions = [r["id"] for r in t.store.query("MATCH (s:Session) RETURN s.id AS id")]
        for sid in acks:
            i = int(sid.rsplit("-", 1)[1])
            for turn in conversation(i):
                if not any(turn["content"] in c for c in contents):
                    out["lost"].append(f"{sid}: turn {turn['content'][:40]!r}")
            if sid not in sessions:
                out["lost"].append(f"{sid}: Session node")
        out["duplicates"] = sorted({s for s in sessions if sessions.count(s) > 1})
        out["sessions_stored"] = len(sessions)
    finally:
        t.close()
    out["outcome"] = "ok" if not (out["lost"] or out["duplicates"]) and out["start"] == "ok" else "failed"
    print(json.dumps(out))


def kill_run_service(plan: KillPlan, *, timeout: float = 120.0) -> dict[str, Any]:
    """Start the service child, send captures until it dies, then check in a fresh process. Same record as
    :func:`harness.reliability.kill.kill_run` (``killed``, ``outcome``, ``lost``, ``acked``, timings)."""
    from tortoise_sim.hook_client import ServiceError, call

    root = Path(tempfile.mkdtemp(prefix="ks-", dir="/tmp"))  # AF_UNIX paths are limited to ~107 bytes
    sock = str(root / "s.sock")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    env.pop("MEMSIM_TORTOISE_SOCKET", None)
    t0 = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "harness.reliability.kill_service", "serve", str(root), plan.kind,
                              plan.step, str(plan.occurrence)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    acks: list[str] = []
    failures: list[str] = []
    try:
        ready = child.stdout.readline() if child.stdout is not None else ""
        if ready.strip() != "ready":
            raise RuntimeError(f"service child did not start: {ready.strip()!r}")
        for i in range(1, CAPTURES + 1):
            sid = f"svc-cap-{i}"
            try:
                res = call(sock, "capture", {"conversation": conversation(i), "session_id": sid}, timeout=timeout)
            except (ServiceError, TimeoutError, OSError) as exc:
                failures.append(f"{sid}: {exc}")
                break
            if res is None:
                failures.append(f"{sid}: no service")
                break
            acks.append(sid)
        child.wait(timeout=timeout)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    t1 = time.perf_counter()
    (root / "acks.json").write_text(json.dumps(acks))
    check = subprocess.run([sys.executable, "-m", "harness.reliability.kill_service", "check", str(root)],
                           capture_output=True, text=True, timeout=timeout, env=env)
    t2 = time.perf_counter()
    out: dict[str, Any] = {"sequence": plan.sequence, "mode": plan.mode, "kill_at": plan.label(), "why": plan.why,
                           "killed": child.returncode == -signal.SIGKILL, "child_returncode": child.returncode,
                           "child_seconds": round(t1 - t0, 2), "check_seconds": round(t2 - t1, 2),
                           "unacknowledged": failures[:1]}
    if check.returncode != 0:
        out.update(outcome="check_failed", error=(check.stderr or check.stdout).strip().splitlines()[-1:])
    else:
        out.update(json.loads(check.stdout.strip().splitlines()[-1]))
    shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv: list[str]) -> None:
    child_main(argv, {"serve": lambda root, kind, step, capture_no: _serve(root, kind, step, int(capture_no)),
                      "check": _check})


if __name__ == "__main__":
    main(sys.argv[1:])
