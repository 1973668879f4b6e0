"""Tortoise source-session expansion and unmodelled-surface claims TOR-44..46, 48 (spec §11, §1.2 scope).

Shared set-up lives in ``tortoise_common``.
"""

from __future__ import annotations

import json
from typing import Any

from harness.claims import ClaimContext, Observation, claim
from harness.claims.tortoise_common import D, new_sim
from tortoise_sim import (
    NotModelled,
)


def _session_turns(n: int, point_line: str | None = None, at: int = 0) -> list[dict[str, str]]:
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} of the discussion"}
             for i in range(n)]
    if point_line is not None:
        turns[at] = {"role": "user", "content": point_line}
    return turns


@claim("TOR-44", design=D, record="MEM-RTE-source-expansion", kind="mechanism",
       statement="Expansion is seeded, capped, placed after each session's last base hit.")
def tor_44(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx, capture_promotes=False)
    p1 = sim.capture_session(_session_turns(6, "decision: adopt the alpha plan"), "s1")["points"][0]["id"]
    p2 = sim.capture_session(_session_turns(6, "decision: adopt the beta plan"), "s2")["points"][0]["id"]
    pool = [{"id": p1, "session_id": "s1"}, {"id": "x", "session_id": None}, {"id": p2, "session_id": "s2"}]
    new, rep = sim.expand_pool(pool, enabled=True)
    order = [h["id"] for h in new]
    s1_block = order[1:4]
    s2_block = order[order.index(p2) + 1:]
    big = new_sim(ctx, "big", capture_promotes=False)
    bpool = []
    for k in range(5):
        pid = big.capture_session(_session_turns(6, f"decision: adopt plan number {k} now"), f"b{k}")["points"][0]["id"]
        bpool.append({"id": pid, "session_id": f"b{k}"})
    _bnew, brep = big.expand_pool(bpool, enabled=True)

    class Broken:
        def query(self, *a: Any, **k: Any) -> Any:
            raise RuntimeError("store down")

    from tortoise_sim.expansion import expand_pool

    unchanged = [sim.expand_pool(pool)[0] == pool, sim.expand_pool(pool, enabled=True, is_temporal=True)[0] == pool,
                 expand_pool(Broken(), pool, enabled=True)[0] == pool]  # type: ignore[arg-type]
    return Observation.from_checks({
        "total_6": rep["total"] == 6,
        "s1_group_after_p1": order[0] == p1 and all(i.startswith("s1_t") for i in s1_block),
        "s2_group_after_p2": len(s2_block) == 3 and all(i.startswith("s2_t") for i in s2_block),
        "five_sessions_total_cap": brep["total"] == 10 and brep["total_cap_hit"] is True,
        "disabled_temporal_failing_unchanged": all(unchanged),
    }, measured={"order": order, "report": rep, "big_report": brep}, evidence=json.dumps(order))


@claim("TOR-45", design=D, record="Beyond report", kind="consequence",
       statement="String id order makes expansion take _t10 before _t2.")
def tor_45(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx, capture_promotes=False)
    pid = sim.capture_session(_session_turns(12, "decision: adopt the gamma plan", at=11), "s")["points"][0]["id"]
    new, _rep = sim.expand_pool([{"id": pid, "session_id": "s"}], enabled=True)
    fetched = [h["id"] for h in new[1:]]
    return Observation.compare({"fetched": ["s_t0", "s_t1", "s_t10"]}, {"fetched": fetched},
                               evidence=json.dumps(fetched))


@claim("TOR-46", design=D, record="II 1", kind="consequence",
       statement="Graph-only expansion cannot see record-only turns.")
def tor_46(ctx: ClaimContext) -> Observation:
    out = {}
    for mode in ("record", "both"):
        sim = new_sim(ctx, mode, turn_store=mode, capture_promotes=False)
        pid = sim.capture_session(_session_turns(6, "decision: adopt the delta plan"), "s1")["points"][0]["id"]
        new, rep = sim.expand_pool([{"id": pid, "session_id": "s1"}], enabled=True)
        out[mode] = {"record_rows": len(sim.record_store.rows("s1")), "added": len(new) - 1}
    return Observation.compare({"record": {"record_rows": 6, "added": 0}, "both": {"record_rows": 6, "added": 3}},
                               out, evidence=json.dumps(out))


@claim("TOR-48", design=D, record="II 5", kind="mechanism",
       statement="Unresolved surfaces are explicit stubs.")
def tor_48(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx)
    names = ["install_pack", "ingest_source", "index_directory", "approve_dedup", "merge_points", "replay_journal"]
    got = {}
    for n in names:
        try:
            getattr(sim, n)("x")
            got[n] = "returned"
        except NotModelled:
            got[n] = "NotModelled"
        except Exception as exc:  # noqa: BLE001
            got[n] = type(exc).__name__
    return Observation.compare(dict.fromkeys(names, "NotModelled"), got, evidence=json.dumps(got))
