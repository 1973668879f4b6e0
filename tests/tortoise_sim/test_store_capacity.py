"""In-memory Kuzu stores keep every page in the buffer pool: past it, memsim's own one-line ``StoreFull`` error,
on every later statement, never a Kuzu crash. Each run is a child process, so a segfault shows as a signal exit.
(Capturing 1,000 small sessions at the default pool is timed by ``memsim bench service-faults``.)"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

CHILD = r"""
import json, sys, time
from tortoise_sim import SimConfig, Tortoise
from tortoise_sim.store import StoreFull, TortoiseStore

n, pool_mib = int(sys.argv[1]), int(sys.argv[2])
kw = {"buffer_pool_size": pool_mib << 20} if pool_mib else {}
t = Tortoise(store=TortoiseStore(None, config=SimConfig(embedder="hashing"), **kw))
out = {"captured": 0, "full_at": None, "messages": [], "later_errors": []}
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
out["seconds"] = round(time.perf_counter() - t0, 1)
t.close()
print("RESULT " + json.dumps(out))
"""


def run_capacity(n: int, pool_mib: int, timeout: float) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, str(n), str(pool_mib)], capture_output=True, text=True,
                       timeout=timeout, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode >= 0, f"child died of signal {signal.Signals(-r.returncode).name}: {r.stderr[-2000:]}"
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.split("RESULT ", 1)[1])


def test_a_full_in_memory_store_raises_store_full_on_every_later_call():
    out = run_capacity(400, 32, timeout=300)
    assert out["full_at"] is not None and out["captured"] > 0, out
    (msg,) = out["messages"]
    assert msg.startswith("in-memory Tortoise store is full: it keeps every page in its 32 MiB Kuzu buffer pool")
    assert "\n" not in msg
    got = dict(out["later_errors"])
    volunteered = got.pop("volunteer")  # the volunteer pipeline fails open (spec §6): an empty response, no crash
    assert volunteered is None or volunteered == msg, out
    assert got == dict.fromkeys(("capture", "create_point", "context", "query"), msg), out
