"""Tortoise capture-spool claims TOR-42, 43, 51, 52 (spec §10 with the §10.1 corrections).

Shared set-up lives in ``tortoise_common``.
"""

from __future__ import annotations

import json
from typing import Any

from harness.claims import ClaimContext, Observation, claim
from harness.claims.tortoise_common import D, new_sim
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


def _store_turns(sim: Any, sid: str) -> int:
    """Turn Points the store holds for session ``sid`` (CONTAINS edges of its Session node)."""
    return sim.store.query("MATCH (s:Session {id: $sid})-[:CONTAINS]->(p:Point) WHERE p.pointKind = 'event' "
                           "RETURN count(p) AS n", {"sid": sid})[0]["n"]


def _flush(sp: Any, post: Any, now_ms: int) -> tuple[dict[str, int], str | None]:
    """``(counts, None)`` of one ``flush_spool``, or ``({}, "<exception>")`` when the flush itself raised: spec
    §10.1 items 15 and 17 say it never does (one entry's failure is that entry's), so a claim about the flush
    records the raise as a failed check (refuted) rather than ending in ``error``."""
    try:
        return sp.flush_spool(post, now_ms), None
    except Exception as exc:  # noqa: BLE001 - the raise is the observation
        return {}, f"{type(exc).__name__}: {exc}"


def _entry_files(root: Any) -> list[str]:
    entries = root / "entries"
    return sorted(p.name for p in entries.iterdir()) if entries.exists() else []


@claim("TOR-51", design=D, record="MEM-OBJ-capture-spool", kind="mechanism",
       statement="Each spool entry is filed under its own guard: a corrupt entry first in line does not stop a later "
                 "one.")
def tor_51(ctx: ClaimContext) -> Observation:
    """Spec §10.1 items 15 and 16 (the example of item 15): entry A, older, has a meta whose ``attempts`` is
    ``"x"`` and whose retry time is ``"soon"``; entry B, newer, is valid. The receiver is down (503) at the first
    flush and up (the local capture) at the second, 31 s later. A flush that raises (the guard missing: entry A's
    ``int("x")`` escapes) is the defect the claim is about: check ``flush_never_raised`` fails and
    ``measured["flush_raised"]`` holds the exceptions."""
    from tortoise_sim.spool import entry_key, local_capture_post

    root = ctx.tmp_path / "spool"
    sim = new_sim(ctx, spool_dir=str(root))
    try:
        sp = sim.spool()
        sp.spool_write("a", [{"role": "user", "content": "decision: file the spool oldest first"},
                             {"role": "assistant", "content": "ok"}], "claude", "hook", "m1")
        sp.spool_write("b", TURNS, "claude", "hook", "m1")
        meta_a = root / "entries" / f"{entry_key('a')}.meta.json"
        bad = {**json.loads(meta_a.read_text(encoding="utf-8")), "attempts": "x", "next_attempt_at_ms": "soon"}
        meta_a.write_text(json.dumps(bad, indent=2), encoding="utf-8")
        before = meta_a.read_bytes()
        order: list[str] = []

        def down(body: dict) -> int:
            order.append(body["session_id"])
            return 503

        now = 1_000_000
        c1, raised1 = _flush(sp, down, now)
        a_unchanged = meta_a.read_bytes() == before
        meta_b = sp.read_meta("b")
        rows = sp.ledger_rows()
        c2, raised2 = _flush(sp, local_capture_post(sim.capture_session), now + 31_000)
        lanes = {sid: (sp.read_meta(sid) or {}).get("lane") for sid in ("a", "b")}
        stored = {sid: _store_turns(sim, sid) for sid in ("a", "b")}
    finally:
        sim.close()
    first = {k: c1.get(k) for k in ("posted", "failed", "transient", "filed")}
    raised = [r for r in (raised1, raised2) if r is not None]
    return Observation.from_checks({
        "flush_never_raised": not raised,
        "corrupt_entry_first_in_line": order == ["a", "b"],
        "counts_posted_2_failed_1_transient_1": first == {"posted": 2, "failed": 1, "transient": 1, "filed": 0},
        "ledger_entry_failed_with_repr": [(r["session_id"], r["reason"]) for r in rows] == [("a", "entry_failed")]
        and rows[0]["detail"].startswith("unexpected failure while filing: ValueError("),
        "corrupt_meta_left_unchanged": a_unchanged,
        "later_entry_backed_off": meta_b["attempts"] == 1 and meta_b["next_attempt_at_ms"] == now + 30_000,
        "both_filed_next_flush": c2.get("filed") == 2 and lanes == {"a": "filed", "b": "filed"},
        "store_holds_both_sessions": stored == {"a": 2, "b": 2},
    }, measured={"first_flush": c1, "second_flush": c2, "post_order": order, "store_turns": stored,
                 "flush_raised": raised},
        evidence="\n".join([*(f"flush raised {r}" for r in raised), json.dumps(rows)])[:600])


@claim("TOR-52", design=D, record="MEM-OBJ-capture-spool", kind="consequence",
       statement="One torn byte in a spooled turn log loses the whole session: the flush reads the log as no turns "
                 "and discards the entry.")
def tor_52(ctx: ClaimContext) -> Observation:
    """Spec §10.1 item 17: a turn log whose bytes are not UTF-8 reads as no turns, so the flush discards the entry
    as ``transcript_empty`` and deletes both files, though three complete turns were on disk. Scenario: session
    ``torn`` spools 3 turns, then an append of a 4th is killed inside a two-byte character; session ``later``,
    newer, is valid. Faithful default against the hardened ``SimConfig(spool_turns_unreadable="keep")``, whose
    entry survives and is filed whole at the session's next spool write."""
    from tortoise_sim.spool import entry_key, local_capture_post

    three = [{"role": "user", "content": "decision: spool every session"},
             {"role": "assistant", "content": "ok"}, {"role": "user", "content": "and keep the ledger"}]
    four = [*three, {"role": "assistant", "content": "noted: café ledger"}]
    out: dict[str, dict[str, Any]] = {}
    for mode in ("discard", "keep"):
        root = ctx.tmp_path / f"spool-{mode}"
        sim = new_sim(ctx, f"t-{mode}", spool_dir=str(root), spool_turns_unreadable=mode)
        try:
            sp = sim.spool()
            sp.spool_write("torn", three, "claude", "hook", "m1")
            log = root / "entries" / f"{entry_key('torn')}.turns.jsonl"
            intact = log.read_bytes()
            appended = (json.dumps(four[3], ensure_ascii=False) + "\n").encode("utf-8")
            log.write_bytes(intact + appended[:appended.index("é".encode()) + 1])  # killed inside the é
            sp.spool_write("later", TURNS, "claude", "hook", "m1")
            complete_lines = log.read_bytes().count(b"\n")
            counts, raised = _flush(sp, local_capture_post(sim.capture_session), 1_000)
            rows = [(r["session_id"], r["reason"], r["detail"].replace(str(root), "<spool>"))
                    for r in sp.ledger_rows()]
            res = {"complete_lines_on_disk": complete_lines, "counts": counts, "flush_raised": raised, "ledger": rows,
                   "torn_files_left": [n for n in _entry_files(root) if n.startswith(entry_key("torn"))],
                   "stored": {sid: _store_turns(sim, sid) for sid in ("torn", "later")}}
            if mode == "keep":  # the session's next end rewrites the torn log; the next flush files it whole
                sp.spool_write("torn", four, "claude", "hook", "m1")
                res["refiled"] = _flush(sp, local_capture_post(sim.capture_session), 10**13)[0].get("filed")
                res["stored_after_rewrite"] = _store_turns(sim, "torn")
            out[mode] = res
        finally:
            sim.close()
    f, k = out["discard"], out["keep"]
    return Observation.from_checks({
        "flush_never_raised": f["flush_raised"] is None and k["flush_raised"] is None,
        "three_complete_turns_on_disk": f["complete_lines_on_disk"] == 3,
        "faithful_discards_transcript_empty": [r[:2] for r in f["ledger"]] == [("torn", "transcript_empty")]
        and f["counts"].get("discarded") == 1,
        "faithful_deletes_both_files": f["torn_files_left"] == [],
        "faithful_store_has_none_of_it": f["stored"] == {"torn": 0, "later": 2},
        "keep_keeps_both_files": len(k["torn_files_left"]) == 2 and k["counts"].get("failed") == 1,
        "keep_ledger_names_the_file": [r[:2] for r in k["ledger"]] == [("torn", "transcript_unreadable")]
        and entry_key("torn") in k["ledger"][0][2] and "UTF-8" in k["ledger"][0][2],
        "keep_later_entry_filed": k["stored"] == {"torn": 0, "later": 2},
        "keep_files_whole_session_after_rewrite": k["refiled"] == 1 and k["stored_after_rewrite"] == 4,
    }, measured=out, evidence=json.dumps({m: out[m]["ledger"] for m in out})[:600])
