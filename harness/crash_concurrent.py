"""Concurrent writers: two processes on one Fractal session, two AgentFly drivers on one bank, a reader and a
capture writer on one Kuzu store. Each case runs both sides as real child processes released by one start
barrier, measures what the faithful design loses or duplicates, and shows the hardened option.

- Fractal (REL-10): each process resumed the session and saves its whole in-memory copy (FRA-17), so the last
  save wins and the other process's turns vanish. Hardened: ``FractalRuntime(session_lock=True)``.
- AgentFly (REL-11): restart suppression is read once at startup (AGF-29), so two drivers both run every
  question and the bank gets each case twice. Hardened: ``DriverConfig(durability="journal")`` (flock plus a
  re-read of the result file under it).
- Tortoise (REL-12): Kuzu lets one process hold a store; a second open fails with Kuzu's lock error (a raw
  ``RuntimeError``). Hardened: ``tortoise_sim.store.open_with_retry`` retries with backoff, then raises
  ``StoreLocked`` naming the file.

``python -m harness.crash_concurrent <role> ...`` are the child entry points.
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
    procs = [subprocess.Popen([sys.executable, "-m", "harness.crash_concurrent", *a], stdout=subprocess.PIPE,
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
    from harness.crash_scenarios.agentfly import make_driver

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
    from harness.crash_scenarios.agentfly import _lines, layout

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
def _tortoise_open(db: Path, mode: str, read_only: bool) -> Any:
    from tortoise_sim import SimConfig, Tortoise
    from tortoise_sim.store import TortoiseStore, open_with_retry

    cfg = SimConfig(embedder="hashing")  # (the hook reads with the same hashing encoder the writer stored)

    def op() -> Any:
        if read_only:
            return TortoiseStore(db, config=cfg, read_only=True)
        return Tortoise(db, config=cfg, seed=None)

    return open_with_retry(op, db, timeout=10.0) if mode == "hardened" else op()


def _failure(exc: BaseException, db: Path) -> dict[str, Any]:
    return {"type": type(exc).__name__, "names_file": str(db) in str(exc), "message": str(exc).splitlines()[0][:120]}


def _tortoise_role(root: str, mode: str, role: str, n: str) -> None:
    """``writer``: open, capture one session, close, n times. ``reader``: the per-prompt hook
    (``hooks.hook_volunteer_turn``) with a store factory, n times; a failed open is recorded by the factory,
    since the fail-open hook itself swallows it and prints nothing."""
    from tortoise_sim.hooks import hook_volunteer_turn

    r = Path(root)
    db = r / "db"
    ok, failures, exit_codes = 0, [], []
    _barrier(r, "a" if role == "writer" else "b")
    prompt = json.dumps({"session_id": "x", "hook_event_name": "UserPromptSubmit",
                         "prompt": "Which notes did we decide to keep?"})
    for i in range(int(n)):
        if role == "reader":
            opened: list[Any] = []

            def factory(opened: list[Any] = opened) -> Any:
                try:
                    st = _tortoise_open(db, mode, read_only=True)
                except Exception as exc:
                    failures.append(_failure(exc, db))
                    raise
                opened.append(st)
                return st

            _, code = hook_volunteer_turn(prompt, "claude", store=factory)
            exit_codes.append(code)
            for st in opened:
                st.close()
            ok += bool(opened)
            time.sleep(0.01)
            continue
        try:
            h = _tortoise_open(db, mode, read_only=False)
        except Exception as exc:  # noqa: BLE001 - counted and classified, the loop goes on
            failures.append(_failure(exc, db))
            continue
        try:
            h.capture_session([{"role": "user", "content": f"decision: note number {i} is kept"}],
                              session_id=f"s{i}")
            ok += 1
        finally:
            h.close()
        time.sleep(0.01)
    print(json.dumps({"ok": ok, "failures": failures, "nonzero_exits": sum(c != 0 for c in exit_codes)}))


def tortoise_case(mode: str, n: int = 8, timeout: float = 180.0) -> dict[str, Any]:
    from tortoise_sim import SimConfig, Tortoise

    root = Path(tempfile.mkdtemp(prefix="conc-tortoise-"))
    Tortoise(root / "db", config=SimConfig(embedder="hashing")).close()  # the store exists before both start
    t0 = time.perf_counter()
    writer, reader = _spawn_pair(root, ["tortoise", str(root), mode, "writer", str(n)],
                                 ["tortoise", str(root), mode, "reader", str(3 * n)], timeout)
    seconds = time.perf_counter() - t0
    t = Tortoise(root / "db", config=SimConfig(embedder="hashing"))
    try:
        sessions = t.store.count("Session")
    finally:
        t.close()
    fails = writer.get("failures", []) + reader.get("failures", [])
    shutil.rmtree(root, ignore_errors=True)
    return {"case": "tortoise: a capture writer and the per-prompt hook on one Kuzu store", "mode": mode,
            "hardened_option": "tortoise_sim.store.open_with_retry", "captures_attempted": n,
            "captures_stored": sessions, "lost_updates": n - sessions,
            "writer_ok": writer.get("ok", 0), "hook_calls": 3 * n, "hook_store_opened": reader.get("ok", 0),
            "hook_nonzero_exits": reader.get("nonzero_exits", 0),
            "open_failures": len(fails), "writer_open_failures": len(writer.get("failures", [])),
            "hook_open_failures": len(reader.get("failures", [])), "failure_types": sorted({f["type"] for f in fails}),
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
    role, *rest = argv
    if role == "fractal":
        _fractal_writer(*rest)
    elif role == "agentfly":
        _agentfly_driver(*rest)
    elif role == "tortoise":
        _tortoise_role(*rest)
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
