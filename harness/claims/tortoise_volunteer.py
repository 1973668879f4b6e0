"""Tortoise volunteering claims TOR-34..40, 47 (spec §6: validate, intent, resolve, why, gate, suppression, budget, block).

Shared set-up lives in ``tortoise_common``.
"""

from __future__ import annotations

import json
from typing import Any

from harness.claims import ClaimContext, Observation, claim
from harness.claims.tortoise_common import D, ask, error_code, new_sim, supported_and_contested, t0_point


@claim("TOR-34", design=D, record="AN:delivery", kind="mechanism",
       statement="Reflex input and output are capped.")
def tor_34(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx)
    for i in range(10):
        t0_point(sim, "decision", f"Runbook rule {i}: escalate paging incidents within {i + 5} minutes")
    q = ask("What are the runbook rules for paging incidents?")
    codes = {
        "turns_1001": error_code(lambda: sim.volunteer_context([{"role": "user", "content": "x"}] * 1001)),
        "bytes_15400": error_code(lambda: sim.volunteer_context(ask("a" * 15400))),
        "max_pointers_6": error_code(lambda: sim.volunteer_context(q, max_pointers=6)),
    }
    n3 = len(sim.volunteer_context(q)["pointers"])
    n5 = len(sim.volunteer_context(q, max_pointers=5)["pointers"])
    return Observation.compare(
        {"turns_1001": "WINDOW_TOO_LARGE", "bytes_15400": "WINDOW_TOO_LARGE_BYTES",
         "max_pointers_6": "INVALID_MAX_POINTERS", "default_pointers": 3, "five_pointers": 5},
        {**codes, "default_pointers": n3, "five_pointers": n5}, evidence=json.dumps(codes))


@claim("TOR-35", design=D, record="CI 2; II 3", kind="mechanism",
       statement="The injected product is a synopsis pointer; the richer why stays out.")
def tor_35(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx)
    p, s, q, _op = supported_and_contested(
        sim, ("decision", "Ship the offline sync feature in March"),
        ("observation", "Beta testers requested airplane-mode editing"),
        ("statement", "Quarter capacity is consumed by compliance audits"))
    res = sim.volunteer_context(ask("When do we ship the offline sync feature?"))
    why = res["why"][0] if res["why"] else {}
    bullet = next((ln for ln in res["block"].splitlines() if f"point/{p}" in ln), "")
    return Observation.from_checks({
        "first_pointer_is_p": bool(res["pointers"]) and res["pointers"][0]["id"] == p,
        "support_chain_S": (why.get("support_chain") or [{}])[0].get("point_id") == s,
        "conflict_Q": ((why.get("conflicts") or {}).get("nands") or [{}])[0].get("point_id") == q,
        "bullet_has_no_S_or_Q": s not in bullet and q not in bullet and "airplane" not in bullet
        and "compliance" not in bullet,
        "block_has_no_S_or_Q": s not in res["block"] and q not in res["block"],
    }, measured={"why": why}, evidence=bullet)


@claim("TOR-36", design=D, record="CI 2; AN:delivery (consequence c)", kind="consequence",
       statement="Synopsis truncation drops late details.")
def tor_36(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx)
    topics = ["harbor", "glacier", "meadow", "canyon", "lagoon", "tundra", "prairie", "estuary", "volcano", "savanna"]
    keys = [f"kx{i}q{7 * i + 3}" for i in range(10)]
    cases = []
    for i, (t, k) in enumerate(zip(topics, keys, strict=True)):
        head = f"The {t} project decision: "
        if i < 5:  # late key token at char >= 170
            body = head + ("we document the rollout with care and review it weekly " * 4)[: 175 - len(head)]
            content = body + f" key {k}."
        else:
            content = head + f"key {k}, " + "then we document the rollout with care and review it weekly " * 3
        pid = t0_point(sim, "decision", content)
        cases.append((t, k, pid, content.index(k), i < 5))
    lost = {True: 0, False: 0}
    for t, k, pid, _pos, late in cases:
        res = sim.volunteer_context(ask(f"What did we decide for the {t} project?"), max_pointers=1)
        delivered = res["pointers"] and res["pointers"][0]["id"] == pid
        if not delivered or k not in res["block"]:
            lost[late] += 1
    full_ok = all(k in sim.get_point(pid)["content"] for _t, k, pid, _p, _l in cases)
    loss = (lost[True] + lost[False]) / 10
    return Observation.compare(
        {"loss": 0.5, "late_loss": 1.0, "early_loss": 0.0, "full_content_kept": True},
        {"loss": loss, "late_loss": lost[True] / 5, "early_loss": lost[False] / 5, "full_content_kept": full_ok},
        measured={"key_positions": [c[3] for c in cases]}, evidence=f"late key positions: {[c[3] for c in cases[:5]]}")


BILLING = [
    ("Billing migration moves invoices into Stripe Connect accounts", 20),
    ("Billing migration freezes legacy coupons during cutover weekend", 15),
    ("Billing migration requires finance signoff from Priya", 10),
    ("Billing migration archives dunning emails older than ninety days", 8),
    ("Billing migration keeps tax exports in quarterly parquet snapshots", 6),
]
"""Five live billing decisions with falling baseline credibility (TOR-37's scenario; the acceptance test reuses it)."""


def billing_points(sim: Any) -> list[str]:
    """Create the :data:`BILLING` decisions as live points with their baselines; their ids, in order."""
    ids = []
    for content, a in BILLING:
        pid = sim.create_point("decision", content)["id"]
        sim.update_point(pid, status="live")
        sim.set_point_baseline(pid, a, 1)
        ids.append(pid)
    return ids


@claim("TOR-37", design=D, record="AN:delivery (consequence d)", kind="consequence",
       statement="Re-mention suppression frees slots, persists nothing, yields to explicit asks.")
def tor_37(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx)
    ids = billing_points(sim)
    names = {pid: f"P{i + 1}" for i, pid in enumerate(ids)}
    q1 = "What did we decide about the billing migration?"
    r1 = sim.volunteer_context(ask(q1))
    r2 = sim.volunteer_context(ask("Continue with the billing migration work from yesterday please"),
                               prior_context=r1["block"])
    r3 = sim.volunteer_context(ask(q1), prior_context=r1["block"] + r2["block"])
    got = [[names[p["id"]] for p in r["pointers"]] for r in (r1, r2, r3)]
    return Observation.compare({"turn1": ["P1", "P2", "P3"], "turn2": ["P4", "P5"], "turn3": ["P1", "P2", "P3"],
                                "overlap_1_2": []},
                               {"turn1": got[0], "turn2": got[1], "turn3": got[2],
                                "overlap_1_2": sorted(set(got[0]) & set(got[1]))}, evidence=r2["block"])


@claim("TOR-38", design=D, record="AN:delivery", kind="mechanism",
       statement="No retrieval intent => no graph access.")
def tor_38(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx)
    t0_point(sim, "decision", "Help desk tickets are triaged daily")
    calls: list[str] = []

    def spy(q: str, limit: int, ex: list[str], exo: bool) -> Any:
        from tortoise_sim.search import search_points

        calls.append(q)
        return search_points(sim.store, q, limit, ex, exo)

    seen = {}
    for text in ("thanks!", "ok do it", "Can you help"):
        n = len(calls)
        res = sim.volunteer_context(ask(text), search_fn=spy)
        seen[text] = {"search_calls": len(calls) - n, "empty": res == {"pointers": [], "why": [], "surfaced": [],
                                                                          "block": "", "degraded_reason": None}}
    return Observation.from_checks({
        "thanks_no_search_empty": seen["thanks!"] == {"search_calls": 0, "empty": True},
        "ok_do_it_no_search_empty": seen["ok do it"] == {"search_calls": 0, "empty": True},
        "can_you_help_searches": seen["Can you help"]["search_calls"] > 0,
    }, measured=seen, evidence=json.dumps(seen))


@claim("TOR-39", design=D, record="AN:delivery", kind="mechanism",
       statement="The gate reads posterior/prior, not confidence; contested boost; superseded last.")
def tor_39(ctx: ClaimContext) -> Observation:
    from tortoise_sim.search import SearchTrace

    sim = new_sim(ctx)
    raw = sim.create_point("decision", "Vendor contract renewal happens every April", confidence=0.95)["id"]
    sim.update_point(raw, status="live")
    r_raw = [p["id"] for p in sim.volunteer_context(ask("When is the vendor contract renewal?"))["pointers"]]
    base = t0_point(sim, "decision", "Database failover drills run every quarter")
    r_base = [p["id"] for p in sim.volunteer_context(ask("How often do database failover drills run?"))["pointers"]]
    c = sim.create_point("hypothesis", "Caching layer explains the latency regression")["id"]
    sim.update_point(c, status="live")
    sim.set_point_baseline(c, 1.3, 0.7)  # mean 0.65, variance 0.0758 (contested)
    hit = {"id": c, "content": "Caching layer explains the latency regression", "point_kind": "hypothesis",
           "status": "live", "rank": 1}

    def forced(q: str, limit: int, ex: list[str], exo: bool) -> Any:
        return [hit], SearchTrace()

    r_c_rel = [p["id"] for p in sim.volunteer_context(ask("Is the caching layer to blame here?"),
                                                      search_fn=forced)["pointers"]]
    r_c_irr = [p["id"] for p in sim.volunteer_context(ask("What should we present at the offsite?"),
                                                      search_fn=forced)["pointers"]]
    out = {}
    for name, decay in (("default", False), ("decay", True)):
        s2 = new_sim(ctx, name, terminal_decay=decay)
        o = t0_point(s2, "decision", "Nightly exports land in the analytics bucket")
        n = t0_point(s2, "decision", "Hourly exports land in the analytics bucket")
        s2.supersede_point(o, n)
        res = s2.volunteer_context(ask("Where do the analytics bucket exports land?"))
        out[name] = {"ids": [p["id"] for p in res["pointers"]], "o": o, "n": n, "block": res["block"]}
    d = out["default"]
    return Observation.from_checks({
        "confidence_column_ignored": r_raw == [],
        "never_dreamed_baseline_pointer": r_base == [base],
        "contested_relevant_pointer": r_c_rel == [c],
        "contested_irrelevant_none": r_c_irr == [],
        "superseded_after_live_flagged": d["ids"] == [d["n"], d["o"]]
        and f"point/{d['o']} [superseded" in d["block"],
        "decay_removes_superseded": out["decay"]["ids"] == [out["decay"]["n"]],
    }, measured={"raw": r_raw, "contested": [r_c_rel, r_c_irr], "superseded": d["ids"],
                 "decay": out["decay"]["ids"]}, evidence=d["block"])


@claim("TOR-40", design=D, record="Beyond report", kind="consequence",
       statement="The 8 KiB block cap cannot bind under the pointer caps.")
def tor_40(ctx: ClaimContext) -> Observation:
    from tortoise_sim.volunteer import BLOCK_CAP, build_block

    sim = new_sim(ctx)
    wide = "\U0001d538"  # 4-byte UTF-8 character
    for i in range(5):
        t0_point(sim, "decision", f"zebra{i} zebra " + " ".join([wide * 8] * 40))
    res = sim.volunteer_context(ask("What about the zebra?"), max_pointers=5)
    size = len(res["block"].encode("utf-8"))
    labels = [len(p["label"]) for p in res["pointers"]]
    syn = [len(p["synopsis"]) for p in res["pointers"]]
    big = build_block(["- " + "y" * 3000] * 5)
    big_lines = big.splitlines()
    return Observation.from_checks({
        "five_pointers": len(res["pointers"]) == 5,
        "labels_max_48_and_synopses_160": max(labels) == 48 and set(syn) == {160},
        "under_cap_untrimmed": size < BLOCK_CAP and res["block"].count("\n- **") == 5,
        "build_block_trims_whole_lines": len(big.encode()) <= BLOCK_CAP and len(big_lines) == 6
        and all(ln == "- " + "y" * 3000 for ln in big_lines[4:]),
    }, measured={"block_bytes": size, "labels": labels, "trimmed_bytes": len(big.encode())},
        evidence=f"5-pointer block = {size} bytes (cap {BLOCK_CAP})")


@claim("TOR-47", design=D, record="II 4", kind="mechanism",
       statement="Live volunteering never expands or surfaces raw turns.")
def tor_47(ctx: ClaimContext) -> Observation:
    import tortoise_sim.expansion as expansion

    sim = new_sim(ctx, extractor=None)
    sim.capture_session([{"role": "user", "content": "the quarterly reindex of the search cluster is scheduled"}],
                        "s1")
    sim.set_point_baseline("s1_t0", 10, 1)  # would pass the gate if it were a candidate
    sim.update_point("s1_t0", status="live")
    raw_hits: list[str] = []

    def spy(q: str, limit: int, ex: list[str], exo: bool) -> Any:
        from tortoise_sim.search import search_points

        hits, tr = search_points(sim.store, q, limit, ex, exo)
        raw_hits.extend(h["id"] for h in hits)
        return hits, tr

    calls: list[str] = []
    orig = (expansion.expand_pool, expansion.source_session_chunk_pass)
    expansion.expand_pool = lambda *a, **k: calls.append("expand") or orig[0](*a, **k)  # type: ignore[assignment]
    expansion.source_session_chunk_pass = (  # type: ignore[assignment]
        lambda *a, **k: calls.append("chunk") or orig[1](*a, **k))
    try:
        res = sim.volunteer_context(ask("When is the quarterly reindex of the search cluster scheduled?"),
                                    search_fn=spy)
    finally:
        expansion.expand_pool, expansion.source_session_chunk_pass = orig
    return Observation.from_checks({
        "turn_was_a_search_hit": "s1_t0" in raw_hits,
        "turn_never_a_pointer": all(p["id"] != "s1_t0" for p in res["pointers"]),
        "expansion_never_called": calls == [],
    }, measured={"raw_hits": raw_hits, "pointers": res["pointers"]}, evidence=json.dumps(raw_hits))
