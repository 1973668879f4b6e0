"""Concurrent writers: two processes on one Fractal session, two AgentFly drivers on one bank, a reader and a
capture writer on one Kuzu store. Each case runs both sides as real child processes released by one start
barrier, measures what the faithful design loses or duplicates, and shows the hardened option.

- Fractal (REL-10): each process resumed the session and saves its whole in-memory copy (FRA-17), so the last
  save wins and the other process's turns vanish. Hardened: ``FractalRuntime(session_lock=True)``.
- AgentFly (REL-11): restart suppression is read once at startup (AGF-29), so two drivers both run every
  question and the bank gets each case twice. Hardened: ``DriverConfig(durability="journal")`` (flock plus a
  re-read of the result file under it).
- Tortoise (REL-12): Kuzu lets one process hold a store; a second open fails with Kuzu's lock error (a raw
  ``RuntimeError``). The case makes each side open while the other holds the store (ordered by marker files),
  so the hook's fail-open path and the writer's lost capture both really happen. Hardened:
  ``tortoise_sim.store.open_with_retry`` retries with backoff, then raises ``StoreLocked`` naming the file.

``python -m harness.reliability.concurrent <role> ...`` are the child entry points.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.reliability.child import child_main

BARRIER_TIMEOUT = 60.0


def _barrier(root: Path, name: str) -> None:
    (root / f"ready-{name}").write_text("1")
    deadline = time.monotonic() + BARRIER_TIMEOUT
    while not (root / "go").exists():
        if time.monotonic() > deadline:
            raise SystemExit("barrier timeout")
        time.sleep(0.005)


def _spawn_pair(root: Path, args_a: list[str], args_b: list[str], timeout: float) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = [subprocess.Popen([sys.executable, "-m", "harness.reliability.concurrent", *a], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for a in (args_a, args_b)]
    deadline = time.monotonic() + BARRIER_TIMEOUT
    while not all((root / f"ready-{n}").exists() for n in ("a", "b")):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            break
        time.sleep(0.01)
    (root / "go").write_text("1")
    out = []
    for p in procs:
        try:
            stdout, stderr = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
        last = stdout.strip().splitlines()[-1:] if stdout.strip() else []
        try:
            res = json.loads(last[0]) if last else {}
        except json.JSONDecodeError:
            res = {}
        res.update(returncode=p.returncode, traceback="Traceback (most recent call last)" in stderr)
        out.append(res)
    return out


# ------------------------------------------------------------------------------------------------ Fractal
def _fractal_writer(root: str, sid: str, mode: str, n: str, tag: str) -> None:
    from fractal_sim import FractalRuntime, ScriptedAgent

    r = Path(root)
    rt = FractalRuntime(r / "ws", agent=ScriptedAgent(), state_dir=r / "state", session_lock=mode == "hardened")
    rt.resume(sid)
    _barrier(r, tag)
    for i in range(int(n)):
        rt.submit_sync(f"{tag}-{i}")
        time.sleep(0.002)
    print(json.dumps({"submitted": int(n)}))


def fractal_case(mode: str, n: int = 20, timeout: float = 120.0) -> dict[str, Any]:
    from fractal_sim import FractalRuntime, ScriptedAgent
    from fractal_sim.session import FractalSession

    root = Path(tempfile.mkdtemp(prefix="conc-fractal-"))
    (root / "ws").mkdir()
    rt = FractalRuntime(root / "ws", agent=ScriptedAgent(), state_dir=root / "state")
    rt.submit_sync("base")
    sid = rt.session.session_id
    t0 = time.perf_counter()
    kids = _spawn_pair(root, ["fractal", str(root), sid, mode, str(n), "a"],
                       ["fractal", str(root), sid, mode, str(n), "b"], timeout)
    seconds = time.perf_counter() - t0
    msgs = [t.user.message for t in FractalSession.load(root / "ws", session_id=sid, state_dir=root / "state")
            .state.summary.turns]
    expected = [f"{tag}-{i}" for tag in "ab" for i in range(n)]
    stored = [m for m in msgs if m in expected]
    shutil.rmtree(root, ignore_errors=True)
    return {"case": "fractal: two processes submitting to one session", "mode": mode,
            "hardened_option": "FractalRuntime(session_lock=True)", "acknowledged": 2 * n,
            "stored": len(set(stored)), "lost_updates": len(set(expected) - set(stored)),
            "duplicates": len(stored) - len(set(stored)), "errors": sum(k["returncode"] != 0 for k in kids),
            "tracebacks": sum(k["traceback"] for k in kids), "seconds": round(seconds, 2)}


# ------------------------------------------------------------------------------------------------ AgentFly
def _agentfly_driver(root: str, mode: str, tag: str) -> None:
    from harness.reliability.scenarios.agentfly import make_driver

    r = Path(root)
    waited: list[bool] = []

    def on_question(i: int, n: int, q: str) -> None:
        if not waited:  # restart suppression has been read by now: both drivers start from the same view
            waited.append(True)
            _barrier(r, tag)

    driver = make_driver(r / "client", "pm", mode, on_question=on_question)
    s = driver.run()
    print(json.dumps({"processed": s.processed, "skipped": s.skipped, "errors": s.errors}))


def agentfly_case(mode: str, n: int = 12, timeout: float = 120.0) -> dict[str, Any]:
    from harness.reliability.scenarios.agentfly import _lines, layout

    root = Path(tempfile.mkdtemp(prefix="conc-agentfly-"))
    questions = [f"What is the capital of region {i}?" for i in range(n)]
    layout(root, "pm", questions)
    t0 = time.perf_counter()
    kids = _spawn_pair(root, ["agentfly", str(root), mode, "a"], ["agentfly", str(root), mode, "b"], timeout)
    seconds = time.perf_counter() - t0
    bank, bad_bank = _lines(root / "memory" / "memory.jsonl")
    results, bad_results = _lines(root / "result" / "result_parametric.jsonl")
    cases = [b.get("case") for b in bank if b.get("case") in questions]
    res_q = [r.get("query") for r in results]
    shutil.rmtree(root, ignore_errors=True)
    return {"case": "agentfly: two PM drivers on one bank and result file", "mode": mode,
            "hardened_option": "DriverConfig(durability='journal')", "questions": n,
            "processed": sum(k.get("processed", 0) for k in kids),
            "lost_updates": sum(1 for q in questions if q not in cases),
            "duplicates": len(cases) - len(set(cases)), "duplicate_results": len(res_q) - len(set(res_q)),
            "unparseable_lines": bad_bank + bad_results, "errors": sum(k["returncode"] != 0 for k in kids),
            "tracebacks": sum(k["traceback"] for k in kids), "seconds": round(seconds, 2)}


# ------------------------------------------------------------------------------------------------ Tortoise
_HOOK_PROMPT = "Where do we keep the release notes?"
_SEEDED = "We decided to keep the release notes in the docs folder"  # a high-credibility point the hook volunteers
CONTEST_WAIT = 10.0  # seconds a holder waits for the other side's first failed open before giving up


def _tortoise_open(db: Path, mode: str, read_only: bool, on_lock_error: Any = None) -> Any:
    """Open the store as a writer (``Tortoise``) or as the hook's reader (read-only ``TortoiseStore``).
    ``on_lock_error()`` is called after every open attempt that failed with the lock error (faithful: the one
    attempt; hardened: each attempt ``open_with_retry`` retries), before the failure propagates or is retried."""
    from tortoise_sim import SimConfig, Tortoise
    from tortoise_sim.store import TortoiseStore, is_lock_error, open_with_retry

    cfg = SimConfig(embedder="hashing")  # (the hook reads with the same hashing encoder the writer stored)

    def op() -> Any:
        try:
            if read_only:
                return TortoiseStore(db, config=cfg, read_only=True)
            return Tortoise(db, config=cfg, seed=None)
        except RuntimeError as exc:
            if on_lock_error is not None and is_lock_error(exc):
                on_lock_error()
            raise

    return open_with_retry(op, db, timeout=CONTEST_WAIT) if mode == "hardened" else op()


def _failure(exc: BaseException, db: Path) -> dict[str, Any]:
    return {"type": type(exc).__name__, "names_file": str(db) in str(exc), "message": str(exc).splitlines()[0][:120]}


def _mark(root: Path, name: str) -> None:
    (root / name).touch()


def _await(root: Path, name: str, timeout: float = CONTEST_WAIT) -> bool:
    """Wait until the other process wrote marker ``name``; False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (root / name).exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _tortoise_role(root: str, mode: str, role: str, n: str) -> None:
    """Two processes, ``n`` rounds of two contests each, ordered by marker files (not by timing):

    - *the writer holds*: the writer opens the store and starts a capture; the hook (``hooks.hook_volunteer_turn``
      with a store factory) opens while it holds it. The writer closes only after the hook's open has failed at
      least once (or :data:`CONTEST_WAIT` passed), so the contest really happens.
    - *the hook holds*: the hook's factory opens the store and keeps it until the writer's open has failed at
      least once (or the wait passed); the writer tries to capture meanwhile.

    Faithful opens fail at once with Kuzu's lock error: the fail-open hook swallows it and prints nothing, the
    writer's capture is lost. Hardened opens (``open_with_retry``) back off until the holder closes. Every call
    and every capture is recorded with whether its open failed, what it printed and how long it took."""
    from tortoise_sim.hooks import hook_volunteer_turn

    r = Path(root)
    db = r / "db"
    tag = "a" if role == "writer" else "b"
    _barrier(r, tag)
    prompt = json.dumps({"session_id": "x", "hook_event_name": "UserPromptSubmit", "prompt": _HOOK_PROMPT})
    calls: list[dict[str, Any]] = []
    for i in range(int(n)):
        if role == "reader":
            for contest in ("writer_holds", "hook_holds"):
                _await(r, f"w-holds-{i}" if contest == "writer_holds" else f"w-closed-{i}")
                opened: list[Any] = []
                failures: list[dict[str, Any]] = []
                lock_errors = [0]

                def failed_once(i: int = i, lock_errors: list[int] = lock_errors) -> None:
                    lock_errors[0] += 1
                    _mark(r, f"r-failed-{i}")

                def factory(contest: str = contest, opened: list[Any] = opened, failures: list[dict[str, Any]] =
                            failures, failed_once: Any = failed_once, i: int = i) -> Any:
                    try:
                        st = _tortoise_open(db, mode, True, failed_once if contest == "writer_holds" else None)
                    except Exception as exc:
                        failures.append(_failure(exc, db))
                        raise
                    opened.append(st)
                    if contest == "hook_holds":  # keep the store until the writer's open has failed once
                        _mark(r, f"r-holds-{i}")
                        _await(r, f"w-failed-{i}")
                    return st

                t0 = time.perf_counter()
                out, code = hook_volunteer_turn(prompt, "claude", store=factory)
                ms = (time.perf_counter() - t0) * 1000
                for st in opened:
                    st.close()
                _mark(r, f"r-done-{contest}-{i}")
                calls.append({"contest": contest, "opened": bool(opened), "lock_errors": lock_errors[0],
                              "failures": failures, "exit": code, "volunteered": _SEEDED[:20] in out,
                              "stdout_bytes": len(out), "ms": round(ms, 1)})
            continue
        # writer: contest 1, the writer holds
        for contest in ("writer_holds", "hook_holds"):
            lock_errors = [0]

            def failed_once(i: int = i, lock_errors: list[int] = lock_errors) -> None:
                lock_errors[0] += 1
                _mark(r, f"w-failed-{i}")

            if contest == "hook_holds":
                _await(r, f"r-holds-{i}")
            t0 = time.perf_counter()
            try:
                h = _tortoise_open(db, mode, False, failed_once if contest == "hook_holds" else None)
            except Exception as exc:  # noqa: BLE001 - counted and classified, the loop goes on
                calls.append({"contest": contest, "opened": False, "lock_errors": lock_errors[0],
                              "failures": [_failure(exc, db)], "stored": False,
                              "ms": round((time.perf_counter() - t0) * 1000, 1)})
                _await(r, f"r-done-{contest}-{i}")
                continue
            try:
                if contest == "writer_holds":
                    _mark(r, f"w-holds-{i}")
                    _await(r, f"r-failed-{i}")  # the hook's open failed while this process holds the store
                h.capture_session([{"role": "user", "content": f"decision: note number {i} of {contest} is kept"}],
                                  session_id=f"{contest}-{i}")
            finally:
                h.close()
            if contest == "writer_holds":
                _mark(r, f"w-closed-{i}")
            calls.append({"contest": contest, "opened": True, "lock_errors": lock_errors[0], "failures": [],
                          "stored": True, "ms": round((time.perf_counter() - t0) * 1000, 1)})
            _await(r, f"r-done-{contest}-{i}")
    print(json.dumps({"calls": calls}))


def _median(xs: list[float]) -> float | None:
    import statistics

    return round(statistics.median(xs), 1) if xs else None


def tortoise_case(mode: str, n: int = 3, timeout: float = 180.0) -> dict[str, Any]:
    """REL-12: ``n`` rounds of both contests (see :func:`_tortoise_role`); the store is seeded with one
    high-credibility point the hook volunteers whenever it reads the store."""
    from tortoise_sim import SimConfig, Tortoise

    root = Path(tempfile.mkdtemp(prefix="conc-tortoise-"))
    t = Tortoise(root / "db", config=SimConfig(embedder="hashing"))
    t.create_point("statement", _SEEDED, credibility="high")
    t.close()  # the store exists before both start
    t0 = time.perf_counter()
    writer, reader = _spawn_pair(root, ["tortoise", str(root), mode, "writer", str(n)],
                                 ["tortoise", str(root), mode, "reader", str(n)], timeout)
    seconds = time.perf_counter() - t0
    t = Tortoise(root / "db", config=SimConfig(embedder="hashing"))
    try:
        stored_ids = {r["id"] for r in t.store.query("MATCH (s:Session) RETURN s.id AS id")}
    finally:
        t.close()
    w_calls, h_calls = writer.get("calls", []), reader.get("calls", [])
    shutil.rmtree(root, ignore_errors=True)
    hook_hold = [c for c in h_calls if c["contest"] == "writer_holds"]  # the hook opened while the writer held
    write_hold = [c for c in w_calls if c["contest"] == "hook_holds"]  # the writer opened while the hook held
    fails = [f for c in w_calls + h_calls for f in c["failures"]]
    captures = [f"{c}-{i}" for i in range(n) for c in ("writer_holds", "hook_holds")]
    return {"case": "tortoise: a capture writer and the per-prompt hook on one Kuzu store", "mode": mode,
            "hardened_option": "tortoise_sim.store.open_with_retry", "rounds": n,
            "captures_attempted": len(captures), "captures_stored": sum(c in stored_ids for c in captures),
            "lost_updates": sum(c not in stored_ids for c in captures),
            "lost_while_hook_held": sum(f"hook_holds-{i}" not in stored_ids for i in range(n)),
            "writer_ok": sum(c["stored"] for c in w_calls), "hook_calls": len(h_calls),
            "hook_store_opened": sum(c["opened"] for c in h_calls),
            "hook_volunteered": sum(c["volunteered"] for c in h_calls),
            "hook_calls_while_writer_held": len(hook_hold),
            "hook_lock_errors_while_writer_held": sum(c["lock_errors"] > 0 for c in hook_hold),
            "hook_served_while_writer_held": sum(c["opened"] for c in hook_hold),
            "hook_volunteered_while_writer_held": sum(c["volunteered"] for c in hook_hold),
            "hook_failed_calls_printing": sum(c["stdout_bytes"] > 0 for c in h_calls if not c["opened"]),
            "hook_ms_while_writer_held_median": _median([c["ms"] for c in hook_hold]),
            "hook_nonzero_exits": sum(c["exit"] != 0 for c in h_calls),
            "writer_opens_while_hook_held": len(write_hold),
            "writer_lock_errors_while_hook_held": sum(c["lock_errors"] > 0 for c in write_hold),
            "writer_ms_while_hook_held_median": _median([c["ms"] for c in write_hold]),
            "open_failures": len(fails),
            "writer_open_failures": sum(len(c["failures"]) for c in w_calls),
            "hook_open_failures": sum(len(c["failures"]) for c in h_calls),
            "failure_types": sorted({f["type"] for f in fails}),
            "failure_messages": sorted({f["message"].replace(str(root), "<tmp>") for f in fails})[:3],
            "failures_naming_file": sum(f["names_file"] for f in fails),
            "errors": sum(k["returncode"] != 0 for k in (writer, reader)),
            "tracebacks": sum(k["traceback"] for k in (writer, reader)), "seconds": round(seconds, 2)}


CASES = {"fractal": fractal_case, "agentfly": agentfly_case, "tortoise": tortoise_case}


def run_all(designs: list[str] | None = None) -> list[dict[str, Any]]:
    out = []
    for design, fn in CASES.items():
        if designs is None or design in designs:
            for mode in ("faithful", "hardened"):
                out.append({"design": design, **fn(mode)})
    return out


def main(argv: list[str]) -> None:
    child_main(argv, {"fractal": _fractal_writer, "agentfly": _agentfly_driver, "tortoise": _tortoise_role}, "role")


if __name__ == "__main__":
    main(sys.argv[1:])
