"""Tortoise capture claims TOR-01..09 (spec §3: window, redaction, turn write, re-capture, extraction payload, admission of derived points).

Shared set-up lives in ``tortoise_common``.
"""

from __future__ import annotations

import json
from typing import Any

from harness.claims import ClaimContext, Observation, claim
from harness.claims.tortoise_common import (
    D,
    error_code,
    new_sim,
    query_rows,
    raising_extractor,
    without_embedding,
)
from tortoise_sim import (
    ScriptedExtractor,
)
from tortoise_sim.capture import redact
from tortoise_sim.text import pt_id


@claim("TOR-01", design=D, record="CI 1; AN:capture", kind="mechanism",
       statement="Turns are stored before and independently of extraction (captured != extracted).")
def tor_01(ctx: ClaimContext) -> Observation:
    conv = [{"role": "user", "content": "decision: adopt Kuzu"}, {"role": "assistant", "content": "noted"}]
    a = new_sim(ctx, "a", extractor=ScriptedExtractor({"s1": raising_extractor}))
    ra = a.capture_session(conv, "s1")
    turns_a = query_rows(a, "MATCH (s:Session {id:'s1'})-[:CONTAINS]->(p:Point) RETURN p.id AS id ORDER BY id")
    b = new_sim(ctx, "b", extractor=None)
    rb = b.capture_session(conv, "s1")
    turns_b = b.store.count("CONTAINS")
    c = new_sim(ctx, "c", extractor=None, capture_requires_provider=True)
    before = c.store.table_counts()
    err = error_code(lambda: c.capture_session(conv, "s1"))
    after = c.store.table_counts()
    return Observation.from_checks({
        "error_capture_keeps_2_turns": [r["id"] for r in turns_a] == ["s1_t0", "s1_t1"],
        "error_mode": (ra["extraction_mode"], ra["ok"], ra["extracted"]) == ("error", False, 0),
        "none_mode_ok": (rb["extraction_mode"], rb["ok"], turns_b) == ("none", True, 2),
        "none_warning": "no_extraction_provider" in rb["warnings"],
        "provider_required_raises": err == "ProviderUnavailable",
        "nothing_written_when_refused": before == after,
    }, measured={"error_response": {k: ra[k] for k in ("extraction_mode", "ok", "extracted", "errors")},
                 "none_response": {k: rb[k] for k in ("extraction_mode", "ok", "extracted")},
                 "refusal": err}, evidence=json.dumps(turns_a))


@claim("TOR-02", design=D, record="MEM-OBJ-session-turns", kind="mechanism",
       statement="The retained trace is bounded (5000 chars per turn, 500 turns, blank captures write nothing).")
def tor_02(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx, extractor=None)
    sim.capture_session([{"role": "user", "content": "x" * 6000}], "long")
    stored = sim.get_point("long_t0")["content"]
    too_many = error_code(lambda: sim.capture_session([{"role": "user", "content": "hi"}] * 501, "many"))
    blank = sim.capture_session([{"role": "user", "content": "  "}, {"role": "assistant", "content": ""}], "blank")
    sessions = [r["id"] for r in query_rows(sim, "MATCH (s:Session) RETURN s.id AS id")]
    return Observation.from_checks({
        "stored_len_7_plus_5000": len(stored) == 7 + 5000,
        "501_turns_value_error": too_many == "ValueError",
        "blank_mode_empty": blank.get("extraction_mode") == "empty" and blank.get("ok") is False,
        "no_blank_session_row": "blank" not in sessions and "many" not in sessions,
    }, measured={"stored_len": len(stored), "too_many": too_many, "blank": blank, "sessions": sessions},
        evidence=stored[:40] + "…")


SECRET_TURN = (
    "use AKIAIOSFODNN7EXAMPLE; Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U and curl -H 'Authorization: bearer abcdefghijklmnop1234'\n"
    "-----BEGIN RSA PRIVATE KEY-----\nMIIB\nxyz\n-----END RSA PRIVATE KEY-----"
)


SECRET_STORED = (
    "[user] use [REDACTED:aws_access_key_id]; Authorization: Bearer [REDACTED:jwt] and curl -H "
    "'Authorization: bearer [REDACTED:bearer_token]'\n[REDACTED:private_key]"
)


@claim("TOR-03", design=D, record="MEM-OBJ-session-turns; CI 1", kind="mechanism",
       statement="The trace is scrubbed before storage, embedding, Source summary and extraction.")
def tor_03(ctx: ClaimContext) -> Observation:
    ext = ScriptedExtractor()
    sim = new_sim(ctx, extractor=ext)
    res = sim.capture_session([{"role": "user", "content": SECRET_TURN}], "s1")
    stored = sim.get_point("s1_t0")["content"]
    sess = query_rows(sim, "MATCH (s:Session {id:'s1'}) RETURN s.capture_redactions AS r")[0]["r"]
    src = query_rows(sim, "MATCH (s:Source {url:'session:s1'}) RETURN s.summary AS s, s.topics AS t")[0]
    seen = json.dumps(ext.calls)
    secrets = ["AKIAIOSFODNN7EXAMPLE", "eyJhbGciOiJIUzI1NiJ9", "abcdefghijklmnop1234", "MIIB"]
    again, counts2 = redact(stored)
    snap = new_sim(ctx, "snap", extractor=None, turn_writer="snapshot")
    snap.capture_session([{"role": "user", "content": SECRET_TURN}], "s1")
    raw = snap.get_point("s1_t0")["content"]
    snap_count = query_rows(snap, "MATCH (s:Session {id:'s1'}) RETURN s.capture_redactions AS r")[0]["r"]
    return Observation.from_checks({
        "stored_text_as_spec": stored == SECRET_STORED,
        "capture_redactions_4": sess == 4,
        "per_kind_counts": res["redactions"] == {"private_key": 1, "jwt": 1, "bearer_token": 1,
                                                 "aws_access_key_id": 1},
        "extractor_input_clean": not any(s in seen for s in secrets),
        "source_summary_clean": not any(s in json.dumps(src) for s in secrets),
        "idempotent": again == stored and counts2 == {},
        "snapshot_keeps_raw": raw == "[user] " + SECRET_TURN and snap_count is None,
    }, measured={"redactions": res["redactions"], "capture_redactions": sess, "snapshot_count": snap_count},
        evidence=stored)


@claim("TOR-04", design=D, record="MEM-OBJ-session-turns", kind="mechanism",
       statement="Turn ids are deterministic; re-capture is idempotent.")
def tor_04(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx, extractor=None)
    conv = [{"role": "user", "content": "hi there"}, {"role": "assistant", "content": "hello"}]
    sim.capture_session(conv, "s1")
    before = {i: sim.get_point(i) for i in ("s1_t0", "s1_t1")}
    sim.capture_session(conv, "s1")
    after = {i: sim.get_point(i) for i in ("s1_t0", "s1_t1")}
    nodes = query_rows(sim, "MATCH (p:Point) WHERE p.id STARTS WITH 's1_t' RETURN p.id AS id ORDER BY id")
    contains = query_rows(sim, "MATCH (s:Session {id:'s1'})-[r:CONTAINS]->(p:Point) RETURN p.id AS id, count(r) AS c")
    return Observation.from_checks({
        "ids": [r["id"] for r in nodes] == ["s1_t0", "s1_t1"],
        "createdAt_kept": all(before[i]["createdAt"] == after[i]["createdAt"] for i in before),
        "status_kept": all(before[i]["status"] == after[i]["status"] == "draft" for i in before),
        "updatedAt_advanced": all(after[i]["updatedAt"] > before[i]["updatedAt"] for i in before),
        "embedding_kept": all(before[i]["embedding"] == after[i]["embedding"] for i in before)
        and before["s1_t0"]["embedding"] is not None,
        "one_contains_each": sorted((r["id"], r["c"]) for r in contains) == [("s1_t0", 1), ("s1_t1", 1)],
    }, measured={"updatedAt": {i: [before[i]["updatedAt"], after[i]["updatedAt"]] for i in before}},
        evidence=json.dumps(without_embedding(after["s1_t0"]))[:400])


@claim("TOR-05", design=D, record="MEM-OBJ-session-turns", kind="mechanism",
       statement="A shorter re-capture deletes surplus turns, not derived points.")
def tor_05(ctx: ClaimContext) -> Observation:
    conv = [{"role": "user", "content": "let us talk storage"}, {"role": "assistant", "content": "sure thing"},
            {"role": "user", "content": "decision: use Kuzu for the graph store"}]
    out: dict[str, Any] = {}
    for name, writer in (("a", "analysed"), ("snap", "snapshot")):
        sim = new_sim(ctx, name, turn_writer=writer, capture_promotes=False)
        r1 = sim.capture_session(conv, "s1")
        p = r1["points"][0]["id"] if r1["points"] else None
        sim.capture_session(conv[:2], "s1")
        out[name] = {
            "t2_exists": sim.get_point("s1_t2") is not None,
            "feed_retracted": [e["payload"]["id"] for e in sim.store.feed(["PointRetracted"])],
            "journal_mutated": [j["payload"] for j in sim.store.journal_lines() if j["type"] == "EntityMutated"],
            "p_exists": p is not None and sim.get_point(p) is not None,
            "p_contained": bool(p and query_rows(sim, "MATCH (s:Session {id:'s1'})-[:CONTAINS]->(p:Point {id:$p}) "
                                                 "RETURN p.id AS id", p=p)),
            "turn_count": query_rows(sim, "MATCH (s:Session {id:'s1'}) RETURN s.turn_count AS n")[0]["n"],
        }
    a, s = out["a"], out["snap"]
    return Observation.from_checks({
        "t2_gone": not a["t2_exists"],
        "feed_PointRetracted_t2": a["feed_retracted"] == ["s1_t2"],
        "journal_EntityMutated": a["journal_mutated"] == [{"op": "delete", "id": "s1_t2"}],
        "derived_point_and_contains_remain": a["p_exists"] and a["p_contained"],
        "turn_count_2": a["turn_count"] == 2,
        "snapshot_keeps_t2": s["t2_exists"] and s["feed_retracted"] == [],
    }, measured=out, evidence=json.dumps(a))


def _marker_conv() -> list[dict[str, str]]:
    return [{"role": "user", "content": "entity: Kuzu\ndecision: use Kuzu for the simulator store\n"
                                        "statement: an external graph server is required\nnand: 1 -> 2"},
            {"role": "assistant", "content": "Recorded."}]


@claim("TOR-06", design=D, record="MEM-OBJ-derived-points", kind="mechanism",
       statement="Extraction admits model proposals through code gates with provenance and no per-item approval.")
def tor_06(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx)
    res = sim.capture_session(_marker_conv(), "s1")
    ids = [p["id"] for p in res["points"]]
    rows = [sim.get_point(i) for i in ids]
    op = query_rows(sim, "MATCH (o:Point) WHERE o.is_operator = true RETURN o.id AS id, o.direction AS d, "
                    "o.status AS s, o.op_type AS t")
    about = query_rows(sim, "MATCH (p:Point)-[:aboutObject]->(o:Object {name:'Kuzu'}) RETURN p.id AS id ORDER BY id")
    contains = query_rows(sim, "MATCH (s:Session {id:'s1'})-[:CONTAINS]->(p:Point) WHERE p.id STARTS WITH 'pt_' "
                          "RETURN p.id AS id ORDER BY id")
    changed = [e["payload"]["id"] for e in sim.store.feed(["ConfidenceChanged"])]
    ev = "ev_" + __import__("hashlib").sha256(b"sessionCaptured:s1").hexdigest()[:62]
    # capture_promotes=False: all draft, EP-inert
    d = new_sim(ctx, "draft", capture_promotes=False)
    rd = d.capture_session(_marker_conv(), "s1")
    dids = [p["id"] for p in rd["points"]]
    dop = query_rows(d, "MATCH (o:Point) WHERE o.is_operator = true RETURN o.status AS s")
    dream_ran, dconf = False, None
    try:
        from tortoise_sim import dream as dream_mod

        dream_mod.dream(d.store, mode="full", require_calibration=False)
        dream_ran = True
        dconf = [d.get_point(i)["confidence"] for i in dids]
    except Exception as exc:  # noqa: BLE001 - a missing part-2 dream is an observation
        dconf = repr(exc)
    return Observation.from_checks({
        "two_pt_points": len(ids) == 2 and all(i.startswith("pt_") for i in ids),
        "provenance": all(r["extractedFrom"] == "session:s1" and r["session_id"] == "s1" and r["eventId"] == ev
                          for r in rows),
        "contains": sorted(ids) == [r["id"] for r in contains],
        "aboutObject": [r["id"] for r in about] == sorted(ids),
        "operator_unidirectional": len(op) == 1 and op[0]["d"] == "unidirectional" and op[0]["t"] == "NAND",
        "response_kinds_statement": {p["kind"] for p in res["points"]} == {"statement"},
        "promoted_live": all(r["status"] == "live" for r in rows) and op[0]["s"] == "live",
        "confidence_changed_present": set(ids) <= set(changed),
        "no_promotion_all_draft": all(d.get_point(i)["status"] == "draft" for i in dids)
        and [r["s"] for r in dop] == ["draft"],
        "draft_inert_under_full_dream": dream_ran and dconf == [None, None],
    }, measured={"points": [without_embedding(r) for r in rows][:1], "operator": op, "confidence_changed": changed,
                 "draft_confidence_after_dream": dconf, "ingest_dream": res.get("ingest_dream")},
        evidence=json.dumps(res["points"])[:500])


@claim("TOR-07", design=D, record="MEM-OBJ-derived-points", kind="mechanism",
       statement="Admission folds, revises, drops and clamps.")
def tor_07(ctx: ClaimContext) -> Observation:
    q_content = "The cache is rebuilt nightly"
    payload = {
        "points": [
            {"content": "USE   kuzu for the STORE", "pointKind": "decision"},
            {"content": "The cache is rebuilt hourly", "pointKind": "statement",
             "consolidation": {"op": "UPDATE", "prior_id": pt_id(q_content)}},
            {"content": "Queries stay under fifty milliseconds", "pointKind": "foo"},
            {"content": "Latency budget is met", "pointKind": "observation"},
        ],
        "operators": [
            {"src": pt_id("USE   kuzu for the STORE"), "dst": pt_id("Latency budget is met"), "op_type": "IMPL"},
            {"src": "pt_missing", "dst": pt_id("Latency budget is met"), "op_type": "IMPL"},
            {"src": pt_id("Queries stay under fifty milliseconds"), "op_type": "MITIGATES", "strength": 0.9,
             "target": {"src": pt_id("USE   kuzu for the STORE"), "dst": pt_id("Latency budget is met"),
                        "op_type": "IMPL"}},
        ],
    }
    sim = new_sim(ctx, extractor=ScriptedExtractor({"s2": payload}), capture_promotes=False)
    prior = sim.create_point("decision", "Use Kuzu for the store")["id"]
    sim.create_point("statement", q_content, id=pt_id(q_content))
    res = sim.capture_session([{"role": "user", "content": "consolidating notes"}], "s2")
    w = res["warnings"]
    ops = query_rows(sim, "MATCH (o:Point)-[r:IMPL]->(x:Point) WHERE o.is_operator = true "
                     "RETURN o.id AS op, r.idx AS idx, x.id AS x ORDER BY op, idx")
    new_id = pt_id("The cache is rebuilt hourly")
    q = sim.get_point(pt_id(q_content))
    corr = query_rows(sim, "MATCH (n:Point)-[:CORRECTS]->(o:Point) RETURN n.id AS n, o.id AS o")
    mit = query_rows(sim, "MATCH (o:Point)-[:mitigated_by]->(m:Point) RETURN m.mitigation_strength AS s")
    foo = sim.get_point(pt_id("Queries stay under fifty milliseconds"))
    return Observation.from_checks({
        "noop_remapped_operator_source": any(r["idx"] == 0 and r["x"] == prior for r in ops),
        "noop_not_written": sim.get_point(pt_id("USE   kuzu for the STORE")) is None,
        "update_revises": sim.get_point(new_id)["reason"] == "REVISES",
        "prior_superseded_with_corrects": q["status"] == "superseded" and {"n": new_id, "o": q["id"]} in corr,
        "missing_ref_dropped": any(x.startswith("operator_dropped:unknown_ref:pt_missing") for x in w),
        "mitigation_clamped_0_5": [r["s"] for r in mit] == [0.5]
        and any(x.startswith("mitigation_strength_clamped") for x in w),
        "kind_repaired": foo["pointKind"] == "statement" and "point_kind_repaired:foo" in w,
        "noop_warned": any(x.startswith("consolidated_noop") for x in w),
    }, measured={"warnings": w, "operator_edges": ops}, evidence="\n".join(w))


@claim("TOR-08", design=D, record="MEM-OBJ-derived-points; AN:capture", kind="mechanism",
       statement="Supersession is best-effort and never fails a capture.")
def tor_08(ctx: ClaimContext) -> Observation:
    old = "Deploys happen on Fridays"
    conv_unknown = [{"role": "user", "content": "decision: ship on Tuesdays\nsupersede: nothing-here => 1"}]
    conv_live = [{"role": "user", "content": f"decision: ship on Wednesdays\nsupersede: {pt_id(old)} => 1"}]
    out = {}
    for name, flag in (("on", True), ("off", False)):
        sim = new_sim(ctx, name, capture_applies_supersessions=flag, capture_promotes=False)
        sim.create_point("decision", old, id=pt_id(old))
        sim.update_point(pt_id(old), status="live")
        r1 = sim.capture_session(conv_unknown, "s1")
        r2 = sim.capture_session(conv_live, "s2")
        out[name] = {"unknown_ok": r1["ok"], "unknown_warned": "supersession_unresolved:nothing-here" in r1["warnings"],
                     "status": sim.get_point(pt_id(old))["status"],
                     "corrects": len(query_rows(sim, "MATCH (n)-[:CORRECTS]->(o:Point {id:$o}) RETURN n.id AS n",
                                           o=pt_id(old))),
                     "ok": r2["ok"]}
        if name == "off":
            sim.commit_payload({"session_id": "c1", "points": [{"content": "ship on Thursdays"}],
                                "supersessions": [{"superseded": pt_id(old), "supersedes_by":
                                                   pt_id("ship on Thursdays"), "evidence": "manual"}]})
            out[name]["after_commit"] = sim.get_point(pt_id(old))["status"]
    on, off = out["on"], out["off"]
    return Observation.from_checks({
        "unknown_ref_warning_ok": on["unknown_ok"] and on["unknown_warned"],
        "live_ref_superseded_corrects": on["status"] == "superseded" and on["corrects"] == 1,
        "disabled_untouched": off["status"] == "live" and off["corrects"] == 0 and off["ok"],
        "commit_payload_applies": off["after_commit"] == "superseded",
    }, measured=out, evidence=json.dumps(out))


@claim("TOR-09", design=D, record="AN:capture", kind="consequence",
       statement="Trace and derived propositions have different update horizons.")
def tor_09(ctx: ClaimContext) -> Observation:
    ext = ScriptedExtractor()
    sim = new_sim(ctx, extractor=ext)
    sim.capture_session([{"role": "user", "content": "decision: use Kuzu"}], "s1")
    p = pt_id("use Kuzu")
    p_before = without_embedding(sim.get_point(p))
    t_before = sim.get_point("s1_t0")
    n_before = sim.store.count("Point")
    ext.script["s1"] = raising_extractor
    r2 = sim.capture_session([{"role": "user", "content": "decision: use Kuzu 0.11.3 pinned, not FalkorDB"}], "s1")
    t_after = sim.get_point("s1_t0")
    p_after = without_embedding(sim.get_point(p))
    return Observation.from_checks({
        "turn_shows_v2": t_after["content"] == "[user] decision: use Kuzu 0.11.3 pinned, not FalkorDB",
        "turn_new_hash": t_after["content_hash"] != t_before["content_hash"],
        "turn_new_embedding": t_after["embedding"] is not None and t_after["embedding"] != t_before["embedding"],
        "derived_point_unchanged": p_after == p_before,
        "no_new_point": sim.store.count("Point") == n_before,
        "extraction_failed": r2["extraction_mode"] == "error",
    }, measured={"turn_v2": t_after["content"], "point": p_after["content"]},
        evidence=f"turn: {t_after['content']!r}; derived: {p_after['content']!r}")
