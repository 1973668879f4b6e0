"""Tortoise capture-spool claims TOR-42, 43 (spec §10 with the §10.1 corrections).

Shared set-up lives in ``tortoise_common``.
"""

from __future__ import annotations

import json
from typing import Any

from harness.claims import ClaimContext, Observation, claim
from harness.claims.tortoise_common import D
from tortoise_sim import (
    StepClock,
)


def _spool(ctx: ClaimContext, name: str, permanent: str = "quarantine") -> Any:
    from tortoise_sim.spool import Spool

    return Spool(ctx.tmp_path / name, clock=StepClock(), permanent=permanent)


TURNS = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


@claim("TOR-42", design=D, record="MEM-OBJ-capture-spool", kind="mechanism",
       statement="Filing is idempotent by capture_key and compare-and-swap.")
def tor_42(ctx: ClaimContext) -> Observation:
    sp = _spool(ctx, "a")
    sp.spool_write("s1", TURNS, "claude", "hook", "m1")
    posts: list[int] = []

    def ok(body: dict) -> int:
        posts.append(len(body["conversation"]))
        return 200

    c1 = sp.flush_spool(ok, 1_000)
    meta = sp.read_meta("s1")
    c2 = sp.flush_spool(ok, 2_000)
    sp2 = _spool(ctx, "b")
    sp2.spool_write("s2", TURNS, "claude", "hook", "m1")
    posts2: list[int] = []

    def racing(body: dict) -> int:
        posts2.append(len(body["conversation"]))
        if len(posts2) == 1:
            sp2.spool_write("s2", [*TURNS, {"role": "user", "content": "one more"}], "claude", "hook", "m1")
        return 200

    sp2.flush_spool(racing, 1_000)
    meta2 = sp2.read_meta("s2")
    sp2.flush_spool(racing, 2_000)
    return Observation.from_checks({
        "filed_key_is_capture_key": meta.get("filed_key") == meta["capture_key"] and c1["filed"] == 1,
        "second_flush_skipped": c2["skipped_filed"] == 1 and posts == [2],
        "appended_turn_unfiled": meta2.get("filed_key") is None,
        "next_flush_posts_3": posts2 == [2, 3],
    }, measured={"c1": c1, "c2": c2, "posts2": posts2}, evidence=json.dumps(meta, indent=1)[:500])


@claim("TOR-43", design=D, record="MEM-OBJ-capture-spool", kind="mechanism",
       statement="Transient failures back off; permanent refusal keeps ([A]) or deletes ([LATER]) the raw copy.")
def tor_43(ctx: ClaimContext) -> Observation:
    sp = _spool(ctx, "a")
    sp.spool_write("s1", TURNS, "claude", "hook", "m1")
    sp.flush_spool(lambda b: 503, 1_000_000)
    m1 = sp.read_meta("s1")
    calls: list[int] = []
    c_back = sp.flush_spool(lambda b: calls.append(1) or 200, 1_010_000)
    t0 = 1_000_000 + 30_000
    sp.flush_spool(lambda b: 429, t0)
    m2 = sp.read_meta("s1")
    sp.flush_spool(lambda b: 429, m2["next_attempt_at_ms"])
    m3 = sp.read_meta("s1")
    q = _spool(ctx, "q")
    q.spool_write("s1", TURNS, "claude", "hook", "m1")
    cq = q.flush_spool(lambda b: 400, 1_000)
    mq = q.read_meta("s1")
    later = q.flush_spool(lambda b: 200, 10_000_000)
    dl = _spool(ctx, "d", permanent="delete")
    dl.spool_write("s1", TURNS, "claude", "hook", "m1")
    dl.flush_spool(lambda b: 400, 1_000)
    files = sorted(p.name for p in (ctx.tmp_path / "d" / "entries").iterdir())
    return Observation.from_checks({
        "503_attempts_1_next_30s": m1["attempts"] == 1 and m1["next_attempt_at_ms"] == 1_000_000 + 30_000,
        "10s_later_skipped": c_back["skipped_backoff"] == 1 and calls == [],
        "429_twice_60_120": (m2["next_attempt_at_ms"] - t0, m3["next_attempt_at_ms"] - m2["next_attempt_at_ms"])
        == (60_000, 120_000),
        "400_ledger_quarantine": cq["permanent"] == 1 and mq["lane"] == "quarantine"
        and q.ledger_rows()[-1]["reason"] == "permanent_http_400",
        "turns_intact": q.read_turns("s1") == TURNS,
        "quarantine_skipped_later": later["skipped_quarantine"] == 1 and later["posted"] == 0,
        "delete_profile_files_gone": files == [],
    }, measured={"attempts": [m1["attempts"], m2["attempts"], m3["attempts"]], "quarantine_meta": mq},
        evidence=json.dumps(q.ledger_rows()))
