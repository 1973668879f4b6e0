"""``memsim bench service-faults``: the resident Tortoise service under hostile clients, killed, and filled.

Sections:

- **stress**: ``python -m tortoise_sim.service`` (a real service process, MiniLM by default) on a loopback Unix
  socket serves well-behaved clients (retrieval and courtesy prompts, session-start digests, captures, pings)
  interleaved with hostile ones (malformed JSON, binary garbage, an unknown protocol version, unknown ops, bad
  arguments, oversized frames, half a frame then a stall, half a frame then a close, a byte-by-byte trickle,
  connect-and-close), a bounded number of each within a bounded time. Reported: service crashes (the service
  process died or stopped answering), acknowledged captures lost (every capture the service answered ``ok`` is
  looked up in the store after the run), what each hostile client got back, and the latency of the good clients
  (p50 / p95 / max per request kind, and how many took longer than the hook's default timeout).
- **kill -9**: the kill runner's service plans (:mod:`harness.reliability.kill_service`): the service SIGKILLed in the
  middle of a capture, the store reopened by a fresh process, acknowledged captures lost.
- **in-memory capacity**: 1,000 small sessions captured into ``Tortoise(None)`` in a child process (a Kuzu crash
  would show as a signal exit): captured, or memsim's ``StoreFull`` error, and the time taken.

Writes ``service-faults.{json,md}``; the Markdown is rendered from the JSON by :func:`render`.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import machine_description, md_table, meta_block, percentile, write_results

NAME = "service-faults"
FACTS = ["Use Kuzu for the simulator store.", "The release train ships every Tuesday.",
         "Postgres was rejected for the embedded cache.", "The rollback window is two hours.",
         "Staging is rebuilt every night at 02:00.", "The API rate limit is 600 requests per minute."]
RETRIEVAL = ["What did we decide about the simulator store?", "When does the release train ship?",
             "Why was Postgres rejected for the cache?", "What is the API rate limit?"]
COURTESY = ["thanks!", "ok, got it", "great, thank you"]
GOOD_KINDS = ("retrieval", "courtesy", "session_start", "capture", "ping")
HOSTILE_KINDS = ("malformed", "binary", "unknown_version", "unknown_op", "bad_args", "oversized", "half_stall",
                 "half_close", "trickle", "connect_close")

CAPACITY_CHILD = r"""
import json, sys, time
from tortoise_sim import SimConfig, Tortoise
from tortoise_sim.store import StoreFull, TortoiseStore

n, pool_mib = int(sys.argv[1]), int(sys.argv[2])
kw = {"buffer_pool_size": pool_mib << 20} if pool_mib else {}
store = TortoiseStore(None, config=SimConfig(embedder="hashing"), **kw)
t = Tortoise(store=store)
out = {"sessions": n, "captured": 0, "full_at": None, "messages": [], "later_errors": [],
       "buffer_pool_mib": store.buffer_pool_size / (1 << 20)}
t0 = time.perf_counter()
for i in range(n):
    try:
        t.capture_session([{"role": "user", "content": f"decision: item {i} ships on Tuesday"},
                           {"role": "assistant", "content": "Noted."}], session_id=f"s{i}")
    except StoreFull as exc:
        out["full_at"] = i
        out["messages"].append(str(exc))
        break
    out["captured"] += 1
out["capture_seconds"] = round(time.perf_counter() - t0, 1)
if out["full_at"] is not None:  # everything after the first StoreFull stops before Kuzu
    for name, fn in [("capture", lambda: t.capture_session([{"role": "user", "content": "more"}], session_id="x")),
                     ("create_point", lambda: t.create_point("decision", "another one")),
                     ("volunteer", lambda: t.volunteer_context([{"role": "user", "content": "what ships when?"}])),
                     ("context", lambda: t.context()),
                     ("query", lambda: t.store.query("MATCH (p:Point) RETURN count(p) AS n"))]:
        try:
            fn()
            out["later_errors"].append([name, None])
        except StoreFull as exc:
            out["later_errors"].append([name, str(exc)])
        except Exception as exc:
            out["later_errors"].append([name, type(exc).__name__ + ": " + str(exc)])
else:
    out["points"] = t.store.query("MATCH (p:Point) RETURN count(p) AS n")[0]["n"]
t.close()
print("RESULT " + json.dumps(out))
"""


def run_capacity(n: int, pool_mib: int = 0, timeout: float = 900.0) -> dict[str, Any]:
    """Capture ``n`` small sessions into an in-memory store in a child process (``pool_mib`` 0: the default
    pool). The record has ``returncode`` (negative: the child died of that signal) and the child's counts."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", CAPACITY_CHILD, str(n), str(pool_mib)], capture_output=True,
                       text=True, timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"})
    out: dict[str, Any] = {"returncode": r.returncode, "wall_s": round(time.perf_counter() - t0, 1)}
    if r.returncode < 0:
        out["signal"] = signal.Signals(-r.returncode).name
    if "RESULT " in r.stdout:
        out.update(json.loads(r.stdout.split("RESULT ", 1)[1]))
    else:
        out["stderr_tail"] = r.stderr.strip().splitlines()[-1:]
    return out


# --------------------------------------------------------------------------------------------------- clients
def _payload(prompt: str) -> str:
    return json.dumps({"session_id": "bench", "hook_event_name": "UserPromptSubmit", "prompt": prompt})


def _raw(sock: str, data: bytes, *, shut: bool = True, stall_s: float = 0.0, trickle: bool = False,
         timeout: float = 30.0) -> str:
    """Send ``data`` as a hostile client would; return what came back: an error type, ``ok`` (an answer), or
    ``closed`` (the connection ended without a frame)."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(timeout)
    try:
        c.connect(sock)
        try:
            if trickle:
                for b in data:
                    c.sendall(bytes([b]))
                    time.sleep(0.05)
            else:
                c.sendall(data)
            if stall_s:
                time.sleep(stall_s)
            if shut:
                c.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        buf = b""
        while not buf.endswith(b"\n"):
            try:
                chunk = c.recv(1 << 16)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            buf += chunk
    finally:
        c.close()
    if not buf:
        return "closed"
    try:
        resp = json.loads(buf)
    except ValueError:
        return "unparsable answer"
    return "ok" if resp.get("ok") else str((resp.get("error") or {}).get("type"))


def _hostile(kind: str, sock: str, max_request: int, rng: random.Random) -> str:
    if kind == "malformed":
        return _raw(sock, b'{"v": 1, "op": "ping", "args": {' + b"\n")
    if kind == "binary":
        return _raw(sock, bytes(rng.getrandbits(8) for _ in range(256)).replace(b"\n", b"") + b"\n")
    if kind == "unknown_version":
        return _raw(sock, json.dumps({"v": rng.choice([0, 2, 99, "1", None]), "op": "ping"}).encode() + b"\n")
    if kind == "unknown_op":
        return _raw(sock, json.dumps({"v": 1, "op": rng.choice(["drop", "__init__", "op_ping", ""])}).encode()
                    + b"\n")
    if kind == "bad_args":
        args = rng.choice([{"nope": 1}, [1, 2], {"conversation": "not a list"}, {"session_id": 5}])
        return _raw(sock, json.dumps({"v": 1, "op": "capture", "args": args}).encode() + b"\n")
    if kind == "oversized":
        return _raw(sock, b"x" * (max_request + 1024))
    if kind == "half_stall":
        return _raw(sock, b'{"v": 1, "op": "st', shut=False)  # waits for the service's read deadline
    if kind == "half_close":
        return _raw(sock, b'{"v": 1, "op": "st')
    if kind == "trickle":
        return _raw(sock, b'{"v": 1, "op": "ping", "args": {}}' + b" " * 400, shut=False, trickle=True)
    if kind == "connect_close":
        return _raw(sock, b"")
    raise ValueError(kind)


def _good(kind: str, sock: str, i: int, rng: random.Random) -> tuple[str, Any]:
    from tortoise_sim.hook_client import call

    if kind == "retrieval":
        return "hook_volunteer", call(sock, "hook_volunteer", {"stdin": _payload(rng.choice(RETRIEVAL)),
                                                               "harness": "claude"}, timeout=60.0)
    if kind == "courtesy":
        return "hook_volunteer", call(sock, "hook_volunteer", {"stdin": _payload(rng.choice(COURTESY)),
                                                               "harness": "claude"}, timeout=60.0)
    if kind == "session_start":
        return "hook_session_start", call(sock, "hook_session_start", {}, timeout=60.0)
    if kind == "capture":
        return "capture", call(sock, "capture", {"conversation": capture_conversation(i), "session_id": f"sf-{i}"},
                               timeout=60.0)
    return "ping", call(sock, "ping", timeout=60.0)


def capture_conversation(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"decision: stress capture {i} keeps release train {i}"},
            {"role": "assistant", "content": f"Noted, train {i}."}]


# --------------------------------------------------------------------------------------------------- stress
def stress(work: Path, *, good: int, hostile: int, time_limit_s: float, embedder: str, seed: int,
           track: Callable[..., Any]) -> dict[str, Any]:
    """``good`` well-behaved and ``hostile`` hostile requests from concurrent client threads against one service
    process, stopping early at ``time_limit_s``."""
    from tortoise_sim import SimConfig, Tortoise
    from tortoise_sim.hook_client import DEFAULT_TIMEOUT_S, MAX_MESSAGE, call
    from tortoise_sim.service import READ_DEADLINE_S, start_detached, stop

    db = work / "db.kuzu"
    sock = str(work / "s.sock")
    seed_sim = Tortoise(db, config=SimConfig(embedder="hashing") if embedder == "hashing" else None,
                        encoder=None if embedder == "hashing" else _light(), seed=None)
    for fact in FACTS:
        row = seed_sim.create_point("decision", fact, credibility="gold")
        seed_sim.update_point(row["id"], status="live")
    seed_sim.close()

    t_start = time.perf_counter()
    svc = start_detached(db, sock, embedder=embedder, timeout=600.0)
    start_s = time.perf_counter() - t_start
    pid = svc["pid"]
    rng = random.Random(seed)
    jobs: list[tuple[str, str]] = ([("good", GOOD_KINDS[i % len(GOOD_KINDS)]) for i in range(good)]
                                   + [("hostile", HOSTILE_KINDS[i % len(HOSTILE_KINDS)]) for i in range(hostile)])
    rng.shuffle(jobs)
    # the oversized frames are few (each is a 64 MiB send): at most 4 of them
    n_over = 0
    kept = []
    for side, kind in jobs:
        if kind == "oversized":
            n_over += 1
            if n_over > 4:
                continue
        kept.append((side, kind))
    jobs = kept
    lock = threading.Lock()
    latencies: dict[str, list[float]] = {k: [] for k in GOOD_KINDS}
    good_errors: Counter[str] = Counter()
    hostile_got: dict[str, Counter[str]] = {k: Counter() for k in HOSTILE_KINDS}
    acked: list[str] = []
    done = Counter()
    deadline = time.monotonic() + time_limit_s
    queue = list(enumerate(jobs))
    queue.reverse()

    def worker(wid: int) -> None:
        wrng = random.Random(seed * 1000 + wid)
        while time.monotonic() < deadline:
            with lock:
                if not queue:
                    return
                i, (side, kind) = queue.pop()
            if side == "hostile":
                try:
                    got = _hostile(kind, sock, MAX_MESSAGE, wrng)
                except OSError as exc:
                    got = f"client error: {exc.strerror or exc}"
                with lock:
                    hostile_got[kind][got] += 1
                    done["hostile"] += 1
                continue
            t0 = time.perf_counter()
            try:
                _op, res = _good(kind, sock, i, wrng)
                err = None if res is not None else "no service"
            except Exception as exc:  # noqa: BLE001 - counted, the run goes on
                res, err = None, f"{type(exc).__name__}: {exc}"
            took = time.perf_counter() - t0
            with lock:
                done["good"] += 1
                if err is None:
                    latencies[kind].append(took)
                    if kind == "capture":
                        acked.append(f"sf-{i}")
                else:
                    good_errors[err.split(":")[0] if err.startswith("ServiceError") else err[:60]] += 1

    n_threads = 8
    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(n_threads)]
    for t in threads:
        t.start()
    total = len(jobs)

    def finished() -> Any:  # one item per request done, for the progress bar
        seen = 0
        while seen < total and any(t.is_alive() for t in threads):
            cur = sum(done.values())
            yield from range(cur - seen)
            seen = cur
            time.sleep(0.05)

    for _ in track(finished(), description="stress: requests", total=total):
        pass
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + READ_DEADLINE_S + 30)
    wall = time.perf_counter() - t_start - start_s
    alive = _alive(pid)
    try:
        status = call(sock, "status", timeout=10.0)
    except Exception:  # noqa: BLE001
        status = None
    crashes = int(not alive or status is None or status.get("pid") != pid)
    stopped = stop(sock, timeout=120.0) if status is not None else {"stopped": False}
    # every acknowledged capture must be in the store
    check = Tortoise(db, config=SimConfig(embedder="hashing"), seed=None)
    try:
        lost = lost_captures(check, acked)
    finally:
        check.close()
    hook_timeout = DEFAULT_TIMEOUT_S
    lat_rows = {k: {"n": len(v), "p50_ms": 1000 * percentile(v, 50), "p95_ms": 1000 * percentile(v, 95),
                    "max_ms": 1000 * max(v) if v else None,
                    "over_hook_timeout": sum(x > hook_timeout for x in v)} for k, v in latencies.items()}
    all_good = [x for v in latencies.values() for x in v]
    return {
        "embedder": embedder, "clients": n_threads, "retrieval_questions": len(RETRIEVAL),
        "stored_decisions": len(FACTS), "time_limit_s": time_limit_s, "wall_s": round(wall, 1),
        "service_start_s": round(start_s, 1), "read_deadline_s": READ_DEADLINE_S,
        "hook_timeout_s": hook_timeout, "max_request_bytes": MAX_MESSAGE,
        "requests_planned": {"good": sum(s == "good" for s, _ in jobs), "hostile": sum(s == "hostile" for s, _ in jobs)},
        "requests_done": dict(done), "service_crashes": crashes, "service_pid_unchanged": bool(
            status and status.get("pid") == pid), "service_stopped_cleanly": bool(stopped.get("stopped")),
        "service_errors_counted": (status or {}).get("errors"), "service_requests_counted": (status or {}).get(
            "requests"),
        "acknowledged_captures": len(acked), "lost_acknowledged_captures": len(lost), "lost_examples": lost[:5],
        "good_latency": lat_rows,
        "good_all": {"n": len(all_good), "p50_ms": 1000 * percentile(all_good, 50),
                     "p95_ms": 1000 * percentile(all_good, 95)},
        "good_errors": dict(good_errors), "hostile_answers": {k: dict(v) for k, v in hostile_got.items()},
    }


def lost_captures(sim: Any, acked: list[str]) -> list[str]:
    """The acknowledged capture ids (``sf-<i>``) whose Session node or any turn text is missing from the store."""
    contents = "\n".join(r["c"] or "" for r in sim.store.query("MATCH (p:Point) RETURN p.content AS c"))
    sessions = {r["id"] for r in sim.store.query("MATCH (s:Session) RETURN s.id AS id")}
    return [sid for sid in acked if sid not in sessions
            or not all(t["content"] in contents for t in capture_conversation(int(sid.split("-")[1])))]


def _light() -> Any:
    from tortoise_sim.light_encoder import light_encoder

    return light_encoder()


def _alive(pid: int) -> bool:
    """The service's own liveness check, after reaping the child if it has exited (a zombie still answers kill 0)."""
    from tortoise_sim.service import _pid_alive

    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return _pid_alive(pid)


# --------------------------------------------------------------------------------------------------- run
def run(out_dir: Path, *, quick: bool = False, track: Any = None, seed: int = 0, embedder: str = "minilm",
        good: int | None = None, hostile: int | None = None, time_limit_s: float | None = None,
        capacity_sessions: int | None = None) -> list[Path]:
    """The three sections; ``quick`` = 120 good + 120 hostile requests within 90 s, 300 in-memory sessions."""
    from harness.reliability.kill import kill_run
    from harness.reliability.kill_service import SERVICE_KILL_PLANS

    track = track or (lambda it, description="", total=None: it)
    good = good or (120 if quick else 600)
    hostile = hostile or (120 if quick else 600)
    time_limit_s = time_limit_s or (90.0 if quick else 300.0)
    capacity_sessions = capacity_sessions or (300 if quick else 1000)
    t0 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="sf-", dir="/tmp"))  # AF_UNIX paths are limited to ~107 bytes
    try:
        stress_res = stress(work, good=good, hostile=hostile, time_limit_s=time_limit_s, embedder=embedder,
                            seed=seed, track=track)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    kills = [kill_run(p, timeout=180) for p in track(SERVICE_KILL_PLANS, description="kill -9 mid-capture")]
    capacity = run_capacity(capacity_sessions)
    payload = {"stress": stress_res, "kills": kills, "capacity": capacity, "quick": quick, "seed": seed,
               "seconds": round(time.perf_counter() - t0, 1), "machine": machine_description()}
    return write_results(out_dir, NAME, payload, render, None)


def render(p: dict[str, Any]) -> str:
    """The Markdown page, from the results JSON only."""
    s = p["stress"]
    lat = [[k, r["n"], r["p50_ms"], r["p95_ms"], r["max_ms"], r["over_hook_timeout"]]
           for k, r in s["good_latency"].items()]
    lat.append(["all good requests", s["good_all"]["n"], s["good_all"]["p50_ms"], s["good_all"]["p95_ms"], None,
                sum(r["over_hook_timeout"] for r in s["good_latency"].values())])
    hostile = [[k, sum(v.values()), ", ".join(f"{a} x{n}" for a, n in sorted(v.items()))]
               for k, v in s["hostile_answers"].items()]
    kills = [[k["kill_at"], k["why"], k["killed"], k["acked"], len(k.get("lost", [])), k.get("outcome")]
             for k in p["kills"]]
    c = p["capacity"]
    if c["returncode"] < 0:
        cap = f"the child process died of {c.get('signal')} after {c.get('captured', '?')} sessions"
    elif c.get("full_at") is not None:
        later = sum(1 for _, m in c.get("later_errors", []) if m == c["messages"][0])
        cap = (f"{c['captured']} of {c['sessions']} sessions captured, then memsim's one-line error: "
               f"`{c['messages'][0]}`; {later} of {len(c.get('later_errors', []))} later calls got the same error")
    else:
        cap = (f"all {c['captured']} of {c['sessions']} sessions captured ({c.get('points')} points) in "
               f"{c['capture_seconds']} s with a {c['buffer_pool_mib']:g} MiB pool; exit code {c['returncode']}")
    good_err = ", ".join(f"{k} x{n}" for k, n in s["good_errors"].items()) or "none"
    return "\n\n".join([
        "# The Tortoise hook service under faults (`memsim bench service-faults`)",
        meta_block({"machine": p["machine"], "seeds": {"clients": p["seed"]}, "quick": p["quick"],
                    "wall_s": p["seconds"]}, p.get("run")),
        "## Stress: good and hostile clients interleaved",
        f"One service process ({s['embedder']} encoder) on a loopback Unix socket; {s['clients']} client threads "
        f"took {s['requests_done'].get('good', 0)} good and {s['requests_done'].get('hostile', 0)} hostile requests "
        f"(of {s['requests_planned']['good']} and {s['requests_planned']['hostile']} planned, {s['time_limit_s']:g} s "
        f"limit) in {s['wall_s']} s. Service crashes: **{s['service_crashes']}** (same pid at the end: "
        f"{s['service_pid_unchanged']}, stopped cleanly: {s['service_stopped_cleanly']}). Acknowledged captures: "
        f"{s['acknowledged_captures']}, lost: **{s['lost_acknowledged_captures']}**. Errors of good requests: "
        f"{good_err}.",
        f"Latency of the good requests (ms; a request over the hook's default {s['hook_timeout_s']:g} s timeout "
        f"would have printed nothing in a real hook). Retrieval requests cycle through "
        f"{s.get('retrieval_questions', len(RETRIEVAL))} questions over {s.get('stored_decisions', len(FACTS))} "
        "stored decisions, so after the first of each the service answers from its warm "
        "caches; captures are writes (the service refreshes its caches before it answers them):",
        md_table(["request", "n", "p50", "p95", "max", f"over {s['hook_timeout_s']:g} s"], lat, floatfmt=".1f"),
        f"What the hostile clients got back (the service reads each request under a {s['read_deadline_s']:g} s "
        f"deadline and refuses frames over {s['max_request_bytes']} bytes):",
        md_table(["hostile client", "n", "answers"], hostile),
        "## kill -9 in the middle of a capture",
        "The service process SIGKILLs itself at the named durable step of a capture while a client sends captures "
        "one after another; a fresh process reopens the store and looks for every acknowledged capture.",
        md_table(["kill at", "why", "killed", "acknowledged", "lost", "outcome"], kills),
        "## In-memory store capacity",
        f"Capturing {c['sessions']} small sessions into `Tortoise(None)` in a child process: {cap}.",
    ])


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.service_faults --render DIR``: rewrite ``DIR/service-faults.md`` from its JSON."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m benchmarks.service_faults")
    ap.add_argument("--render", type=Path, required=True, help="folder holding service-faults.json")
    a = ap.parse_args(argv)
    payload = json.loads((a.render / f"{NAME}.json").read_text(encoding="utf-8"))
    md = a.render / f"{NAME}.md"
    md.write_text(render(payload).rstrip() + "\n", encoding="utf-8")
    print(f"wrote {md}")


if __name__ == "__main__":
    main()
