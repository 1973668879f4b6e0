"""Tortoise claims, part 1 (spec tortoise §13: TOR-01..14, 23..25, 27, 30..49).

Each demonstration builds a fresh on-disk Kuzu store under ``ctx.tmp_path``, drives ``tortoise_sim`` through its
public API (``Tortoise`` facade, hooks, spool, expansion) and compares what a user could inspect (rows, feed
events, journal lines, blocks, hook stdout, spool files) with what the claim predicts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.claims import ClaimContext, Observation, claim
from tortoise_sim import (
    FaultHooks,
    LifecycleError,
    NotModelled,
    ScriptedExtractor,
    SimConfig,
    StepClock,
    Tortoise,
    VolunteerValidationError,
)
from tortoise_sim.capture import redact
from tortoise_sim.sdk import DEFAULT_EXTRACTOR
from tortoise_sim.text import pt_id

D = "tortoise"


def _sim(ctx: ClaimContext, name: str = "t", *, extractor: Any = DEFAULT_EXTRACTOR, encoder: Any = None,
         faults: FaultHooks | None = None, preset: str = "analysed", **cfg: Any) -> Tortoise:
    cfg.setdefault("embedder", "hashing")
    cfg.setdefault("event_log_path", str(ctx.tmp_path / f"{name}.journal.jsonl"))
    return Tortoise(ctx.tmp_path / f"{name}.kuzu", config=SimConfig.preset(preset, **cfg), clock=StepClock(),
                    seed=ctx.seed, extractor=extractor, encoder=encoder, faults=faults)


def _t0(sim: Tortoise, kind: str, content: str, **kw: Any) -> str:
    """"T0 point" of §13: gold credibility, then promoted to live."""
    pid = sim.create_point(kind, content, credibility="gold", **kw)["id"]
    sim.update_point(pid, status="live")
    return pid


def _ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _raise(turns: list[dict]) -> dict:
    raise RuntimeError("extractor outage")


def _code(fn: Any) -> str | None:
    try:
        fn()
    except (LifecycleError, VolunteerValidationError) as exc:
        return exc.code
    except Exception as exc:  # noqa: BLE001 - the type name is the observation
        return type(exc).__name__
    return None


def _rows(sim: Tortoise, cypher: str, **params: Any) -> list[dict[str, Any]]:
    return sim.store.query(cypher, params)


def _no_emb(row: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if row is None else {k: v for k, v in row.items() if k != "embedding"}


# ============================================================================================ capture
@claim("TOR-01", design=D, record="CI 1; AN:capture", kind="mechanism",
       statement="Turns are stored before and independently of extraction (captured != extracted).")
def tor_01(ctx: ClaimContext) -> Observation:
    conv = [{"role": "user", "content": "decision: adopt Kuzu"}, {"role": "assistant", "content": "noted"}]
    a = _sim(ctx, "a", extractor=ScriptedExtractor({"s1": _raise}))
    ra = a.capture_session(conv, "s1")
    turns_a = _rows(a, "MATCH (s:Session {id:'s1'})-[:CONTAINS]->(p:Point) RETURN p.id AS id ORDER BY id")
    b = _sim(ctx, "b", extractor=None)
    rb = b.capture_session(conv, "s1")
    turns_b = b.store.count("CONTAINS")
    c = _sim(ctx, "c", extractor=None, capture_requires_provider=True)
    before = c.store.table_counts()
    err = _code(lambda: c.capture_session(conv, "s1"))
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
    sim = _sim(ctx, extractor=None)
    sim.capture_session([{"role": "user", "content": "x" * 6000}], "long")
    stored = sim.get_point("long_t0")["content"]
    too_many = _code(lambda: sim.capture_session([{"role": "user", "content": "hi"}] * 501, "many"))
    blank = sim.capture_session([{"role": "user", "content": "  "}, {"role": "assistant", "content": ""}], "blank")
    sessions = [r["id"] for r in _rows(sim, "MATCH (s:Session) RETURN s.id AS id")]
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
    sim = _sim(ctx, extractor=ext)
    res = sim.capture_session([{"role": "user", "content": SECRET_TURN}], "s1")
    stored = sim.get_point("s1_t0")["content"]
    sess = _rows(sim, "MATCH (s:Session {id:'s1'}) RETURN s.capture_redactions AS r")[0]["r"]
    src = _rows(sim, "MATCH (s:Source {url:'session:s1'}) RETURN s.summary AS s, s.topics AS t")[0]
    seen = json.dumps(ext.calls)
    secrets = ["AKIAIOSFODNN7EXAMPLE", "eyJhbGciOiJIUzI1NiJ9", "abcdefghijklmnop1234", "MIIB"]
    again, counts2 = redact(stored)
    snap = _sim(ctx, "snap", extractor=None, turn_writer="snapshot")
    snap.capture_session([{"role": "user", "content": SECRET_TURN}], "s1")
    raw = snap.get_point("s1_t0")["content"]
    snap_count = _rows(snap, "MATCH (s:Session {id:'s1'}) RETURN s.capture_redactions AS r")[0]["r"]
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
    sim = _sim(ctx, extractor=None)
    conv = [{"role": "user", "content": "hi there"}, {"role": "assistant", "content": "hello"}]
    sim.capture_session(conv, "s1")
    before = {i: sim.get_point(i) for i in ("s1_t0", "s1_t1")}
    sim.capture_session(conv, "s1")
    after = {i: sim.get_point(i) for i in ("s1_t0", "s1_t1")}
    nodes = _rows(sim, "MATCH (p:Point) WHERE p.id STARTS WITH 's1_t' RETURN p.id AS id ORDER BY id")
    contains = _rows(sim, "MATCH (s:Session {id:'s1'})-[r:CONTAINS]->(p:Point) RETURN p.id AS id, count(r) AS c")
    return Observation.from_checks({
        "ids": [r["id"] for r in nodes] == ["s1_t0", "s1_t1"],
        "createdAt_kept": all(before[i]["createdAt"] == after[i]["createdAt"] for i in before),
        "status_kept": all(before[i]["status"] == after[i]["status"] == "draft" for i in before),
        "updatedAt_advanced": all(after[i]["updatedAt"] > before[i]["updatedAt"] for i in before),
        "embedding_kept": all(before[i]["embedding"] == after[i]["embedding"] for i in before)
        and before["s1_t0"]["embedding"] is not None,
        "one_contains_each": sorted((r["id"], r["c"]) for r in contains) == [("s1_t0", 1), ("s1_t1", 1)],
    }, measured={"updatedAt": {i: [before[i]["updatedAt"], after[i]["updatedAt"]] for i in before}},
        evidence=json.dumps(_no_emb(after["s1_t0"]))[:400])


@claim("TOR-05", design=D, record="MEM-OBJ-session-turns", kind="mechanism",
       statement="A shorter re-capture deletes surplus turns, not derived points.")
def tor_05(ctx: ClaimContext) -> Observation:
    conv = [{"role": "user", "content": "let us talk storage"}, {"role": "assistant", "content": "sure thing"},
            {"role": "user", "content": "decision: use Kuzu for the graph store"}]
    out: dict[str, Any] = {}
    for name, writer in (("a", "analysed"), ("snap", "snapshot")):
        sim = _sim(ctx, name, turn_writer=writer, capture_promotes=False)
        r1 = sim.capture_session(conv, "s1")
        p = r1["points"][0]["id"] if r1["points"] else None
        sim.capture_session(conv[:2], "s1")
        out[name] = {
            "t2_exists": sim.get_point("s1_t2") is not None,
            "feed_retracted": [e["payload"]["id"] for e in sim.store.feed(["PointRetracted"])],
            "journal_mutated": [j["payload"] for j in sim.store.journal_lines() if j["type"] == "EntityMutated"],
            "p_exists": p is not None and sim.get_point(p) is not None,
            "p_contained": bool(p and _rows(sim, "MATCH (s:Session {id:'s1'})-[:CONTAINS]->(p:Point {id:$p}) "
                                                 "RETURN p.id AS id", p=p)),
            "turn_count": _rows(sim, "MATCH (s:Session {id:'s1'}) RETURN s.turn_count AS n")[0]["n"],
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
    sim = _sim(ctx)
    res = sim.capture_session(_marker_conv(), "s1")
    ids = [p["id"] for p in res["points"]]
    rows = [sim.get_point(i) for i in ids]
    op = _rows(sim, "MATCH (o:Point) WHERE o.is_operator = true RETURN o.id AS id, o.direction AS d, "
                    "o.status AS s, o.op_type AS t")
    about = _rows(sim, "MATCH (p:Point)-[:aboutObject]->(o:Object {name:'Kuzu'}) RETURN p.id AS id ORDER BY id")
    contains = _rows(sim, "MATCH (s:Session {id:'s1'})-[:CONTAINS]->(p:Point) WHERE p.id STARTS WITH 'pt_' "
                          "RETURN p.id AS id ORDER BY id")
    changed = [e["payload"]["id"] for e in sim.store.feed(["ConfidenceChanged"])]
    ev = "ev_" + __import__("hashlib").sha256(b"sessionCaptured:s1").hexdigest()[:62]
    # capture_promotes=False: all draft, EP-inert
    d = _sim(ctx, "draft", capture_promotes=False)
    rd = d.capture_session(_marker_conv(), "s1")
    dids = [p["id"] for p in rd["points"]]
    dop = _rows(d, "MATCH (o:Point) WHERE o.is_operator = true RETURN o.status AS s")
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
    }, measured={"points": [_no_emb(r) for r in rows][:1], "operator": op, "confidence_changed": changed,
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
    sim = _sim(ctx, extractor=ScriptedExtractor({"s2": payload}), capture_promotes=False)
    prior = sim.create_point("decision", "Use Kuzu for the store")["id"]
    sim.create_point("statement", q_content, id=pt_id(q_content))
    res = sim.capture_session([{"role": "user", "content": "consolidating notes"}], "s2")
    w = res["warnings"]
    ops = _rows(sim, "MATCH (o:Point)-[r:IMPL]->(x:Point) WHERE o.is_operator = true "
                     "RETURN o.id AS op, r.idx AS idx, x.id AS x ORDER BY op, idx")
    new_id = pt_id("The cache is rebuilt hourly")
    q = sim.get_point(pt_id(q_content))
    corr = _rows(sim, "MATCH (n:Point)-[:CORRECTS]->(o:Point) RETURN n.id AS n, o.id AS o")
    mit = _rows(sim, "MATCH (o:Point)-[:mitigated_by]->(m:Point) RETURN m.mitigation_strength AS s")
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
        sim = _sim(ctx, name, capture_applies_supersessions=flag, capture_promotes=False)
        sim.create_point("decision", old, id=pt_id(old))
        sim.update_point(pt_id(old), status="live")
        r1 = sim.capture_session(conv_unknown, "s1")
        r2 = sim.capture_session(conv_live, "s2")
        out[name] = {"unknown_ok": r1["ok"], "unknown_warned": "supersession_unresolved:nothing-here" in r1["warnings"],
                     "status": sim.get_point(pt_id(old))["status"],
                     "corrects": len(_rows(sim, "MATCH (n)-[:CORRECTS]->(o:Point {id:$o}) RETURN n.id AS n",
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
    sim = _sim(ctx, extractor=ext)
    sim.capture_session([{"role": "user", "content": "decision: use Kuzu"}], "s1")
    p = pt_id("use Kuzu")
    p_before = _no_emb(sim.get_point(p))
    t_before = sim.get_point("s1_t0")
    n_before = sim.store.count("Point")
    ext.script["s1"] = _raise
    r2 = sim.capture_session([{"role": "user", "content": "decision: use Kuzu 0.11.3 pinned, not FalkorDB"}], "s1")
    t_after = sim.get_point("s1_t0")
    p_after = _no_emb(sim.get_point(p))
    return Observation.from_checks({
        "turn_shows_v2": t_after["content"] == "[user] decision: use Kuzu 0.11.3 pinned, not FalkorDB",
        "turn_new_hash": t_after["content_hash"] != t_before["content_hash"],
        "turn_new_embedding": t_after["embedding"] is not None and t_after["embedding"] != t_before["embedding"],
        "derived_point_unchanged": p_after == p_before,
        "no_new_point": sim.store.count("Point") == n_before,
        "extraction_failed": r2["extraction_mode"] == "error",
    }, measured={"turn_v2": t_after["content"], "point": p_after["content"]},
        evidence=f"turn: {t_after['content']!r}; derived: {p_after['content']!r}")


# ============================================================================================ admission
@claim("TOR-10", design=D, record="MEM-OBJ-authored-points", kind="mechanism",
       statement="Checkpoint/diary are caller doors; provenance names an agent, not an author; admission != "
                 "eligibility.")
def tor_10(ctx: ClaimContext) -> Observation:
    sim = _sim(ctx)
    a, b = "Pin kuzu 0.11.3 in the lock file", "Nightly backups go to the cold bucket"
    res = sim.checkpoint([{"content": a}, {"content": a}, {"content": b}], agent_name="bot")
    items = _rows(sim, "MATCH (n:Point {pointKind:'checkpoint-item'}) RETURN n.id AS id, n.status AS s, "
                       "n.authoredBy AS author ORDER BY id")
    prov = _rows(sim, "MATCH (s:Subject)-[:performs]->(e:Event)-[:produces]->(o:Object) "
                      "RETURN s.name AS subject, e.eventKind AS kind, o.name AS object ORDER BY object")
    vol = sim.volunteer_context(_ask("What did we pin in the lock file for kuzu?"))
    return Observation.from_checks({
        "filed_2_dup_1": (res["filed"], res["duplicates"]) == (2, 1),
        "draft_items": [r["s"] for r in items] == ["draft", "draft"],
        "provenance_agent": [(p["subject"], p["kind"]) for p in prov] == [("bot", "pointAdded")] * 2,
        "object_named_after_point": sorted(p["object"] for p in prov) == sorted(r["id"] for r in items),
        "no_author_on_point": all(r["author"] is None for r in items),
        "never_volunteered": vol["pointers"] == [],
    }, measured={"result": {k: res[k] for k in ("filed", "duplicates")}, "provenance": prov,
                 "pointers": vol["pointers"]}, evidence=json.dumps(prov))


@claim("TOR-11", design=D, record="MEM-RTE-checkpoint-diary", kind="mechanism",
       statement="Hash dedup is in-batch and global over kinds/statuses; it rejects, never rewrites.")
def tor_11(ctx: ClaimContext) -> Observation:
    sim = _sim(ctx)
    k = "Move the billing cron to 02:00 UTC"
    pid = sim.create_point("decision", k)["id"]
    sim.update_point(pid, status="live")
    sim.retract_point(pid)
    before = _no_emb(sim.get_point(pid))
    res = sim.checkpoint([{"content": k}])
    after = _no_emb(sim.get_point(pid))
    items = sim.store.query("MATCH (n:Point {pointKind:'checkpoint-item'}) RETURN count(n) AS c")[0]["c"]
    return Observation.from_checks({
        "filed_0_dup_1": (res["filed"], res["duplicates"]) == (0, 1),
        "decision_unchanged": before == after and after["status"] == "retracted",
        "no_item_written": items == 0,
    }, measured={"result": {k2: res[k2] for k2 in ("filed", "duplicates")}, "decision_status": after["status"]},
        evidence=json.dumps({"status": after["status"], "pointKind": after["pointKind"]}))


@claim("TOR-12", design=D, record="MEM-RTE-checkpoint-diary", kind="mechanism",
       statement="Semantic dedup (0.95) only compares with existing items; degradations admit near-duplicates.")
def tor_12(ctx: ClaimContext) -> Observation:
    import numpy as np
    import torch

    from harness.embedding import get_encoder

    torch.set_num_threads(1)
    enc = get_encoder("minilm-mean")
    x, x2 = "Pin kuzu==0.11.3 in the lock file.", "Pin kuzu==0.11.3 in the lock file"
    v = enc.encode([x, x2])
    cos = float(np.dot(v[0], v[1]) / (np.linalg.norm(v[0]) * np.linalg.norm(v[1])))
    out: dict[str, Any] = {"cosine": round(cos, 4)}
    sim = _sim(ctx, "a", encoder=enc)
    sim.checkpoint([{"content": x}])
    out["near_dup"] = sim.checkpoint([{"content": x2}])
    sim_b = _sim(ctx, "b", encoder=enc)
    sim_b.checkpoint([{"content": x}])
    out["threshold_1"] = sim_b.checkpoint([{"content": x2}], threshold=1.0)
    sim_c = _sim(ctx, "c", encoder=enc)
    out["batch_pair"] = sim_c.checkpoint([{"content": x}, {"content": x2}])

    def raising(texts: Any) -> Any:
        raise ImportError("sentence_transformers")

    sim_d = _sim(ctx, "d", encoder=enc)
    sim_d.checkpoint([{"content": x}])
    out["import_error"] = sim_d.checkpoint([{"content": x2}], encode_fn=raising)
    sim_e = _sim(ctx, "e", encoder=enc)
    sim_e.checkpoint([{"content": x}])
    out["zeros"] = sim_e.checkpoint([{"content": x2}], encode_fn=lambda t: np.zeros((len(t), 384)))
    f = {k: (r["filed"], r["duplicates"]) for k, r in out.items() if k != "cosine"}
    return Observation.from_checks({
        "cosine_at_least_0_95": cos >= 0.95,
        "near_duplicate_rejected": f["near_dup"] == (0, 1),
        "threshold_1_files": f["threshold_1"] == (1, 0),
        "candidates_not_compared": f["batch_pair"] == (2, 0),
        "import_error_hash_only": f["import_error"] == (1, 0) and bool(out["import_error"]["info"]),
        "zero_vectors_admit": f["zeros"] == (1, 0),
    }, measured={"cosine": out["cosine"], "filed_duplicates": f}, evidence=json.dumps(f))


@claim("TOR-13", design=D, record="MEM-RTE-checkpoint-diary", kind="mechanism",
       statement="Malformed batches are refused before writing; a filed prefix is never rolled back.")
def tor_13(ctx: ClaimContext) -> Observation:
    bad = [{"content": "a"}, {"wing": "w"}]
    sim = _sim(ctx, "a")
    before = sim.store.table_counts()
    e1 = _code(lambda: sim.checkpoint(bad))
    unchanged = sim.store.table_counts() == before
    snap = _sim(ctx, "b", checkpoint_precheck=False)
    e2 = _code(lambda: snap.checkpoint(bad))
    snap_items = [r["c"] for r in _rows(snap, "MATCH (n:Point {pointKind:'checkpoint-item'}) RETURN n.content AS c")]
    faulty = _sim(ctx, "c", faults=FaultHooks(fail_create_point_at=2))
    e3 = _code(lambda: faulty.checkpoint([{"content": "first item"}, {"content": "second item"}]))
    f_items = [r["c"] for r in _rows(faulty, "MATCH (n:Point {pointKind:'checkpoint-item'}) RETURN n.content AS c")]
    return Observation.from_checks({
        "precheck_refuses": e1 == "CheckpointValidationError" and unchanged,
        "snapshot_files_prefix_then_errors": e2 == "CheckpointValidationError" and snap_items == ["a"],
        "fault_keeps_item_1": e3 == "FaultInjected" and f_items == ["first item"],
    }, measured={"errors": [e1, e2, e3], "snapshot_items": snap_items, "fault_items": f_items},
        evidence=json.dumps({"precheck": e1, "snapshot": snap_items, "fault": f_items}))


@claim("TOR-14", design=D, record="MEM-RTE-checkpoint-diary; CI 3", kind="mechanism",
       statement="Diary reads are identity/recency-scoped, status-blind, full rows.")
def tor_14(ctx: ClaimContext) -> Observation:
    sim = _sim(ctx)
    e1 = sim.diary_write("a", "Set up the repo", wing="w")["id"]
    e2 = sim.diary_write("a", "Wrote the store module")["id"]
    sim.diary_write("b", "Reviewed the claims")
    e3 = sim.diary_write("a", "Broke the build, reverted")["id"]
    sim.retract_point(e3)
    rows = sim.diary_read("a", last_n=2)
    wing = sim.diary_read("a", wing="w")
    return Observation.from_checks({
        "two_newest_of_a": [r["id"] for r in rows] == [e3, e2],
        "retracted_included": rows[0]["status"] == "retracted",
        "full_rows_with_embedding": all("embedding" in r and r["embedding"] is not None for r in rows),
        "wing_filter": [r["id"] for r in wing] == [e1],
    }, measured={"ids": [r["id"] for r in rows], "statuses": [r["status"] for r in rows]},
        evidence=json.dumps([{"id": r["id"], "content": r["content"], "status": r["status"]} for r in rows]))


# ============================================================================================ lifecycle
@claim("TOR-23", design=D, record="MEM-RTE-point-retraction", kind="mechanism",
       statement="Retraction is guarded and single-shot.")
def tor_23(ctx: ClaimContext) -> Observation:
    sim = _sim(ctx)
    p = _t0(sim, "decision", "Retire the legacy importer")
    q = _t0(sim, "decision", "Keep the importer tests")
    sim.retract_point(p)
    second = _code(lambda: sim.retract_point(p))
    n_events = len([e for e in sim.store.feed(["PointRetracted"]) if e["payload"]["id"] == p])
    op = sim.create_operator("IMPL", q, [p])
    on_op = _code(lambda: sim.retract_point(op))
    unknown = _code(lambda: sim.retract_point("no-such-id' OR 1=1"))
    o = sim.create_point("statement", "An outdated fact", status="outdated")["id"]
    on_outdated = _code(lambda: sim.retract_point(o))
    lax = _sim(ctx, "lax", outdated_terminal=False)
    o2 = lax.create_point("statement", "An outdated fact", status="outdated")["id"]
    lax_status = lax.retract_point(o2)["status"]
    return Observation.compare(
        {"second": "already_terminal", "events": 1, "operator": "operator", "unknown": "not_found",
         "outdated": "already_terminal", "outdated_lax": "retracted"},
        {"second": second, "events": n_events, "operator": on_op, "unknown": unknown, "outdated": on_outdated,
         "outdated_lax": lax_status},
        evidence=f"retract twice -> {second}; operator -> {on_op}; unknown -> {unknown}")


@claim("TOR-24", design=D, record="MEM-RTE-point-retraction; AN:emission", kind="mechanism",
       statement="The event precedes the CAS; neither vetoes the other.")
def tor_24(ctx: ClaimContext) -> Observation:
    faults = FaultHooks()
    sim = _sim(ctx, "a", faults=faults)
    p = _t0(sim, "decision", "Use blue-green deploys")
    n = _t0(sim, "decision", "Use canary deploys")
    faults.before_cas = lambda pid: sim.supersede_point(pid, n)
    err = _code(lambda: sim.retract_point(p))
    events = [e["payload"]["id"] for e in sim.store.feed(["PointRetracted"])]
    status_a = sim.get_point(p)["status"]
    sim_b = _sim(ctx, "b", faults=FaultHooks(fail_graph_feed={"PointRetracted"}))
    p2 = _t0(sim_b, "decision", "Use blue-green deploys")
    row = sim_b.retract_point(p2)
    return Observation.from_checks({
        "cas_failed": err == "cas_failed",
        "event_exists_anyway": events == [p],
        "status_is_superseded": status_a == "superseded",
        "feed_failure_no_veto": row["status"] == "retracted" and sim_b.store.feed(["PointRetracted"]) == [],
    }, measured={"error": err, "events": events, "status": status_a, "feed_failures": sim_b.store.event_failures},
        evidence=f"before_cas supersede -> {err}; PointRetracted ids on feed: {events}")


@claim("TOR-25", design=D, record="MEM-RTE-point-retraction", kind="mechanism",
       statement="The window cannot invert; dry run writes nothing.")
def tor_25(ctx: ClaimContext) -> Observation:
    sim = _sim(ctx)
    p = sim.create_point("decision", "Freeze the schema", validFrom="2026-02-01T00:00:00.000000+00:00")["id"]
    inv = _code(lambda: sim.retract_point(p, valid_to="2026-01-01T00:00:00.000000+00:00"))
    feed_before = len(sim.store.feed())
    row_before = _no_emb(sim.get_point(p))
    dry = sim.retract_point(p, valid_to="2026-03-01T00:00:00.000000+00:00", dry_run=True)
    dry_clean = len(sim.store.feed()) == feed_before and _no_emb(sim.get_point(p)) == row_before
    row = sim.retract_point(p, valid_to="2026-03-01T00:00:00.000000+00:00")
    ev = sim.store.feed(["PointRetracted"])[-1]["payload"]
    return Observation.from_checks({
        "inverted_window": inv == "inverted_window",
        "dry_run_preview": dry.get("dry_run") is True and dry["would_set"]["status"] == "retracted",
        "dry_run_writes_nothing": dry_clean,
        "validTo_stored": row["validTo"] == "2026-03-01T00:00:00.000000+00:00",
        "validTo_in_payload": ev.get("validTo") == "2026-03-01T00:00:00.000000+00:00",
    }, measured={"inverted": inv, "dry_run": dry, "payload": ev}, evidence=json.dumps(dry))


@claim("TOR-27", design=D, record="II 2; CI 3", kind="mechanism",
       statement="Withdrawal is consumer-specific: volunteering drops a retracted point, the digest keeps it.")
def tor_27(ctx: ClaimContext) -> Observation:
    sim = _sim(ctx)
    p = _t0(sim, "decision", "Adopt trunk-based development for the mobile app")
    before = [x["id"] for x in sim.volunteer_context(_ask("What did we decide about trunk-based development?"))[
        "pointers"]]
    sim.retract_point(p)
    calls: list[list[str] | None] = []

    def spy(q: str, limit: int, ex: list[str], exo: bool) -> Any:
        from tortoise_sim.search import search_points

        hits, trace = search_points(sim.store, q, limit, ex, exo)
        calls.append(ex)
        return hits, trace

    after = sim.volunteer_context(_ask("What did we decide about trunk-based development?"), search_fn=spy)
    ctx_rows = [r["id"] for r in sim.session_context()["points"]]
    digest = sim.context()
    return Observation.from_checks({
        "pointer_before": before == [p],
        "no_pointer_after": after["pointers"] == [],
        "both_arms_ran": calls == [["retracted", "superseded", "outdated", "archived", "deprecated"], ["retracted"]],
        "digest_rows_contain": p in ctx_rows,
        "rendered_digest_contains": "Adopt trunk-based development for the mobile app" in digest,
    }, measured={"before": before, "after": after["pointers"], "arms": calls}, evidence=digest)


# ============================================================================================ digest + hooks
@claim("TOR-30", design=D, record="MEM-RTE-start-digest", kind="mechanism",
       statement="The digest is recency-selected with fixed caps.")
def tor_30(ctx: ClaimContext) -> Observation:
    empty = _sim(ctx, "empty").context()
    sim = _sim(ctx, extractor=None)
    sim.diary_write("bot", "Reviewed the schema with the team.")
    sim.capture_session([{"role": "user", "content": "kickoff call"}], "kick")
    decisions = [f"Decision {i:02d}: " + "keep the rollout notes terse and numbered " * 6 for i in range(12)]
    for d in decisions:
        sim.create_point("decision", d)
    text = sim.context()
    lines = text.splitlines()
    point_bullets = [ln for ln in lines if ln.startswith("- (")]
    diary_bullets = [ln for ln in lines if ln.startswith("- [2")]
    expected = [f"- (decision) {d[:160]}" for d in reversed(decisions)][:8]
    return Observation.from_checks({
        "eight_newest_decisions": point_bullets == expected,
        "content_cut_160": all(len(b) <= len("- (decision) ") + 160 for b in point_bullets),
        "one_diary_bullet": len(diary_bullets) == 1 and diary_bullets[0].startswith("- [2026-03-01] "),
        "no_event_printed": "session_kick" not in text and "sessionCaptured" not in text,
        "empty_store_one_line": len(empty.splitlines()) == 1,
    }, measured={"point_bullets": len(point_bullets), "diary_bullets": len(diary_bullets), "empty": empty.strip()},
        evidence=text[:1200])


@claim("TOR-31", design=D, record="MEM-RTE-start-digest", kind="consequence",
       statement="The noise filter runs after the LIMIT, so one capture can empty the points section.")
def tor_31(ctx: ClaimContext) -> Observation:
    out = {}
    for name, flt in (("on", True), ("off", False)):
        sim = _sim(ctx, name, extractor=None, digest_noise_filter=flt)
        for i in range(3):
            sim.create_point("decision", f"Decision number {i} about the release train")
        sim.capture_session([{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} chatter"}
                             for i in range(25)], "s1")
        out[name] = sim.context()
    bullets_off = [ln for ln in out["off"].splitlines() if ln.startswith("- (")]
    return Observation.from_checks({
        "no_points_section": "## Recent points" not in out["on"] and "- (decision)" not in out["on"],
        "unfiltered_8_turn_bullets": len(bullets_off) == 8
        and all(b.startswith("- (event) [user] ") or b.startswith("- (event) [assistant] ") for b in bullets_off),
    }, measured={"filtered": out["on"], "unfiltered_bullets": bullets_off[:3]}, evidence=out["on"])


@claim("TOR-32", design=D, record="MEM-BAP-start-digest", kind="mechanism",
       statement="Session-start supply is automatic, advisory stdout, task-independent.")
def tor_32(ctx: ClaimContext) -> Observation:
    from tortoise_sim.hooks import hook_session_start

    sim = _sim(ctx)
    _t0(sim, "decision", "Use Kuzu for the simulator store.")
    sim.diary_write("bot", "Reviewed the schema with the team.")
    out1 = sim.hook_session_start()
    # the upcoming task differs; the hook takes none, so its output cannot depend on it
    v1 = sim.volunteer_context(_ask("What did we decide about the simulator store?"))["pointers"]
    v2 = sim.volunteer_context(_ask("How do we rotate the deploy keys next week?"))["pointers"]
    out2 = sim.hook_session_start()

    def broken() -> Any:
        raise OSError("store locked")

    failing = hook_session_start(broken)
    return Observation.from_checks({
        "stdout_is_digest": out1 == (sim.context(), 0),
        "same_for_two_tasks": out1 == out2 and v1 != v2,
        "failing_store_empty_exit0": failing == ("", 0),
    }, measured={"exit": out1[1], "failing": failing}, evidence=out1[0])


@claim("TOR-33", design=D, record="MEM-RTE-hook-volunteer", kind="mechanism",
       statement="The prompt hook wraps one block per harness, or prints nothing.")
def tor_33(ctx: ClaimContext) -> Observation:
    sim = _sim(ctx)
    _t0(sim, "decision", "Use Kuzu for the simulator store.")
    q = "What did we decide about the simulator store?"
    block = sim.volunteer_context(_ask(q))["block"]
    out = {h: sim.hook_volunteer_turn(json.dumps({"prompt": q}).encode(), h) for h in
           ("claude", "codex", "devin", "cline", "other")}
    shape = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": block}}
    alt = sim.hook_volunteer_turn(json.dumps({"userPrompt": q}).encode(), "claude")
    bare = sim.hook_volunteer_turn(json.dumps(q).encode(), "claude")
    blank = sim.hook_volunteer_turn(b'{"prompt": "   "}', "claude")
    nothing = sim.hook_volunteer_turn(b'{"prompt": "How do I bake sourdough bread at home?"}', "claude")
    no_prompt = sim.hook_volunteer_turn(b'{"session_id": "x"}', "claude")
    garbage = sim.hook_volunteer_turn(b"\xff\xfe not json {", "claude")
    codes = {v[1] for v in [*out.values(), alt, bare, blank, nothing, no_prompt, garbage]}
    lines = {h: out[h][0].splitlines() for h in out}
    return Observation.from_checks({
        "block_nonempty": bool(block),
        "claude_codex_devin_shape": all(len(lines[h]) == 1 and json.loads(out[h][0]) == shape
                                        for h in ("claude", "codex", "devin")),
        "cline_shape": json.loads(out["cline"][0]) == {"contextModification": {"context": block}},
        "other_raw_block": out["other"][0] == block,
        "userPrompt_and_json_string": json.loads(alt[0]) == shape and json.loads(bare[0]) == shape,
        "blank_and_ineligible_empty": blank[0] == "" and nothing[0] == "" and no_prompt[0] == "",
        "garbage_exit0": garbage[1] == 0,
        "always_exit_0": codes == {0},
    }, measured={"claude_stdout": out["claude"][0][:300]}, evidence=out["claude"][0])


# ============================================================================================ volunteering
@claim("TOR-34", design=D, record="AN:delivery", kind="mechanism",
       statement="Reflex input and output are capped.")
def tor_34(ctx: ClaimContext) -> Observation:
    sim = _sim(ctx)
    for i in range(10):
        _t0(sim, "decision", f"Runbook rule {i}: escalate paging incidents within {i + 5} minutes")
    q = _ask("What are the runbook rules for paging incidents?")
    codes = {
        "turns_1001": _code(lambda: sim.volunteer_context([{"role": "user", "content": "x"}] * 1001)),
        "bytes_15400": _code(lambda: sim.volunteer_context(_ask("a" * 15400))),
        "max_pointers_6": _code(lambda: sim.volunteer_context(q, max_pointers=6)),
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
    sim = _sim(ctx)
    p = _t0(sim, "decision", "Ship the offline sync feature in March")
    s = _t0(sim, "observation", "Beta testers requested airplane-mode editing")
    q = _t0(sim, "statement", "Quarter capacity is consumed by compliance audits")
    sim.create_operator("IMPL", s, [p])
    sim.create_direct_edge(q, p, "NAND")
    res = sim.volunteer_context(_ask("When do we ship the offline sync feature?"))
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
    sim = _sim(ctx)
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
        pid = _t0(sim, "decision", content)
        cases.append((t, k, pid, content.index(k), i < 5))
    lost = {True: 0, False: 0}
    for t, k, pid, _pos, late in cases:
        res = sim.volunteer_context(_ask(f"What did we decide for the {t} project?"), max_pointers=1)
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


@claim("TOR-37", design=D, record="AN:delivery (consequence d)", kind="consequence",
       statement="Re-mention suppression frees slots, persists nothing, yields to explicit asks.")
def tor_37(ctx: ClaimContext) -> Observation:
    sim = _sim(ctx)
    ids = []
    for content, a in BILLING:
        pid = sim.create_point("decision", content)["id"]
        sim.update_point(pid, status="live")
        sim.set_point_baseline(pid, a, 1)
        ids.append(pid)
    names = {pid: f"P{i + 1}" for i, pid in enumerate(ids)}
    q1 = "What did we decide about the billing migration?"
    r1 = sim.volunteer_context(_ask(q1))
    r2 = sim.volunteer_context(_ask("Continue with the billing migration work from yesterday please"),
                               prior_context=r1["block"])
    r3 = sim.volunteer_context(_ask(q1), prior_context=r1["block"] + r2["block"])
    got = [[names[p["id"]] for p in r["pointers"]] for r in (r1, r2, r3)]
    return Observation.compare({"turn1": ["P1", "P2", "P3"], "turn2": ["P4", "P5"], "turn3": ["P1", "P2", "P3"],
                                "overlap_1_2": []},
                               {"turn1": got[0], "turn2": got[1], "turn3": got[2],
                                "overlap_1_2": sorted(set(got[0]) & set(got[1]))}, evidence=r2["block"])


@claim("TOR-38", design=D, record="AN:delivery", kind="mechanism",
       statement="No retrieval intent => no graph access.")
def tor_38(ctx: ClaimContext) -> Observation:
    sim = _sim(ctx)
    _t0(sim, "decision", "Help desk tickets are triaged daily")
    calls: list[str] = []

    def spy(q: str, limit: int, ex: list[str], exo: bool) -> Any:
        from tortoise_sim.search import search_points

        calls.append(q)
        return search_points(sim.store, q, limit, ex, exo)

    seen = {}
    for text in ("thanks!", "ok do it", "Can you help"):
        n = len(calls)
        res = sim.volunteer_context(_ask(text), search_fn=spy)
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

    sim = _sim(ctx)
    raw = sim.create_point("decision", "Vendor contract renewal happens every April", confidence=0.95)["id"]
    sim.update_point(raw, status="live")
    r_raw = [p["id"] for p in sim.volunteer_context(_ask("When is the vendor contract renewal?"))["pointers"]]
    base = _t0(sim, "decision", "Database failover drills run every quarter")
    r_base = [p["id"] for p in sim.volunteer_context(_ask("How often do database failover drills run?"))["pointers"]]
    c = sim.create_point("hypothesis", "Caching layer explains the latency regression")["id"]
    sim.update_point(c, status="live")
    sim.set_point_baseline(c, 1.3, 0.7)  # mean 0.65, variance 0.0758 (contested)
    hit = {"id": c, "content": "Caching layer explains the latency regression", "point_kind": "hypothesis",
           "status": "live", "rank": 1}

    def forced(q: str, limit: int, ex: list[str], exo: bool) -> Any:
        return [hit], SearchTrace()

    r_c_rel = [p["id"] for p in sim.volunteer_context(_ask("Is the caching layer to blame here?"),
                                                      search_fn=forced)["pointers"]]
    r_c_irr = [p["id"] for p in sim.volunteer_context(_ask("What should we present at the offsite?"),
                                                      search_fn=forced)["pointers"]]
    out = {}
    for name, decay in (("default", False), ("decay", True)):
        s2 = _sim(ctx, name, terminal_decay=decay)
        o = _t0(s2, "decision", "Nightly exports land in the analytics bucket")
        n = _t0(s2, "decision", "Hourly exports land in the analytics bucket")
        s2.supersede_point(o, n)
        res = s2.volunteer_context(_ask("Where do the analytics bucket exports land?"))
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

    sim = _sim(ctx)
    wide = "\U0001d538"  # 4-byte UTF-8 character
    for i in range(5):
        _t0(sim, "decision", f"zebra{i} zebra " + " ".join([wide * 8] * 40))
    res = sim.volunteer_context(_ask("What about the zebra?"), max_pointers=5)
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


@claim("TOR-41", design=D, record="AN:emission", kind="mechanism",
       statement="Event sinks are independent and best-effort.")
def tor_41(ctx: ClaimContext) -> Observation:
    sim = _sim(ctx, "a", faults=FaultHooks(fail_journal={"PointAdded"}))
    p = sim.create_point("decision", "Adopt semantic versioning")["id"]
    feed_types = [e["type"] for e in sim.store.feed()]
    journal = [j["type"] for j in sim.store.journal_lines()]
    nolog = Tortoise(ctx.tmp_path / "b.kuzu", config=SimConfig(embedder="hashing"), clock=StepClock())
    x = nolog.create_point("decision", "Delete me")["id"]
    y = nolog.create_point("decision", "Retract me")["id"]
    nolog.delete_point(x)
    nolog.retract_point(y)
    retracted = [e["payload"]["id"] for e in nolog.store.feed(["PointRetracted"])]
    seqs = [e["seq"] for e in nolog.store.feed()]
    files = sorted(f.name for f in Path(ctx.tmp_path).iterdir() if f.suffix == ".jsonl")
    return Observation.from_checks({
        "point_exists": sim.get_point(p) is not None,
        "feed_has_PointAdded": "PointAdded" in feed_types,
        "journal_lacks_PointAdded": "PointAdded" not in journal,
        "no_log_path_no_file": files == ["a.journal.jsonl"] or files == [],
        "delete_and_retract_both_PointRetracted": retracted == [x, y],
        "seq_1_2_3": seqs == list(range(1, len(seqs) + 1)),
    }, measured={"feed": feed_types, "journal": journal, "seqs": seqs}, evidence=json.dumps(seqs))


# ============================================================================================ spool
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


# ============================================================================================ expansion
def _session_turns(n: int, point_line: str | None = None, at: int = 0) -> list[dict[str, str]]:
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} of the discussion"}
             for i in range(n)]
    if point_line is not None:
        turns[at] = {"role": "user", "content": point_line}
    return turns


@claim("TOR-44", design=D, record="MEM-RTE-source-expansion", kind="mechanism",
       statement="Expansion is seeded, capped, placed after each session's last base hit.")
def tor_44(ctx: ClaimContext) -> Observation:
    sim = _sim(ctx, capture_promotes=False)
    p1 = sim.capture_session(_session_turns(6, "decision: adopt the alpha plan"), "s1")["points"][0]["id"]
    p2 = sim.capture_session(_session_turns(6, "decision: adopt the beta plan"), "s2")["points"][0]["id"]
    pool = [{"id": p1, "session_id": "s1"}, {"id": "x", "session_id": None}, {"id": p2, "session_id": "s2"}]
    new, rep = sim.expand_pool(pool, enabled=True)
    order = [h["id"] for h in new]
    s1_block = order[1:4]
    s2_block = order[order.index(p2) + 1:]
    big = _sim(ctx, "big", capture_promotes=False)
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
    sim = _sim(ctx, capture_promotes=False)
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
        sim = _sim(ctx, mode, turn_store=mode, capture_promotes=False)
        pid = sim.capture_session(_session_turns(6, "decision: adopt the delta plan"), "s1")["points"][0]["id"]
        new, rep = sim.expand_pool([{"id": pid, "session_id": "s1"}], enabled=True)
        out[mode] = {"record_rows": len(sim.record_store.rows("s1")), "added": len(new) - 1}
    return Observation.compare({"record": {"record_rows": 6, "added": 0}, "both": {"record_rows": 6, "added": 3}},
                               out, evidence=json.dumps(out))


@claim("TOR-47", design=D, record="II 4", kind="mechanism",
       statement="Live volunteering never expands or surfaces raw turns.")
def tor_47(ctx: ClaimContext) -> Observation:
    import tortoise_sim.expansion as expansion

    sim = _sim(ctx, extractor=None)
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
        res = sim.volunteer_context(_ask("When is the quarterly reindex of the search cluster scheduled?"),
                                    search_fn=spy)
    finally:
        expansion.expand_pool, expansion.source_session_chunk_pass = orig
    return Observation.from_checks({
        "turn_was_a_search_hit": "s1_t0" in raw_hits,
        "turn_never_a_pointer": all(p["id"] != "s1_t0" for p in res["pointers"]),
        "expansion_never_called": calls == [],
    }, measured={"raw_hits": raw_hits, "pointers": res["pointers"]}, evidence=json.dumps(raw_hits))


@claim("TOR-48", design=D, record="II 5", kind="mechanism",
       statement="Unresolved surfaces are explicit stubs.")
def tor_48(ctx: ClaimContext) -> Observation:
    sim = _sim(ctx)
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


@claim("TOR-49", design=D, record="Beyond report", kind="mechanism",
       statement="Supersession moves edges, clears messages, leaves a CORRECTS trail.")
def tor_49(ctx: ClaimContext) -> Observation:
    sim = _sim(ctx)
    a = _t0(sim, "decision", "Use REST for the public API")
    o = _t0(sim, "decision", "Version the API in the URL path")
    n = _t0(sim, "decision", "Version the API with a header")
    q = _t0(sim, "statement", "Clients cache by URL")
    x = sim.create_operator("IMPL", a, [o])
    sim.create_direct_edge(q, o, "NAND")
    sim.store.set_edge_messages("IMPL", x, o, msg=(0.4, -0.2))
    sim.store.set_edge_messages("NAND", q, o, msg=(-0.5, 0.3), back=(0.1, 0.1))
    sim.store.dirty_roots.clear()
    epoch = sim.store.ep_version()
    sim.supersede_point(o, n)
    op_edges = [(r["input_id"], r["idx"], r["msg_alpha"]) for r in sim.store.operator_edge_rows([x])]
    nand = [(r["src"], r["tgt"], r["msg_alpha"], r["back_msg_alpha"]) for r in sim.store.direct_edge_rows()
            if r["rel"] == "NAND"]
    old = sim.get_point(o)
    why = sim.why([o])[o]
    return Observation.from_checks({
        "operator_edge_targets_new_same_idx": sorted(op_edges) == sorted([(a, 0, None), (n, 1, None)]),
        "nand_joins_q_new": nand == [(q, n, None, None)],
        "both_dirty": {o, n} <= sim.store.dirty_roots and sim.get_point(n)["ep_dirty_at"] > epoch,
        "old_outdated_with_validTo": old["outdated"] is True and old["validTo"] is not None
        and old["status"] == "superseded",
        "corrects_trail": why.get("supersession", {}).get("superseded_by", {}).get("point_id") == n,
    }, measured={"operator_edges": op_edges, "nand": nand, "why": why}, evidence=json.dumps(why.get("supersession")))
