"""Tortoise direct admission and provenance claims TOR-10..14, 41 (spec §4: create_point, diary, checkpoint; §5: event sinks and the journal).

Shared set-up lives in ``tortoise_common``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.claims import ClaimContext, Observation, claim
from harness.claims.tortoise_common import D, ask, error_code, new_sim, query_rows, without_embedding
from tortoise_sim import (
    FaultHooks,
    SimConfig,
    StepClock,
    Tortoise,
)


@claim("TOR-10", design=D, record="MEM-OBJ-authored-points", kind="mechanism",
       statement="Checkpoint/diary are caller doors; provenance names an agent, not an author; admission != "
                 "eligibility.")
def tor_10(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx)
    a, b = "Pin kuzu 0.11.3 in the lock file", "Nightly backups go to the cold bucket"
    res = sim.checkpoint([{"content": a}, {"content": a}, {"content": b}], agent_name="bot")
    items = query_rows(sim, "MATCH (n:Point {pointKind:'checkpoint-item'}) RETURN n.id AS id, n.status AS s, "
                       "n.authoredBy AS author ORDER BY id")
    prov = query_rows(sim, "MATCH (s:Subject)-[:performs]->(e:Event)-[:produces]->(o:Object) "
                      "RETURN s.name AS subject, e.eventKind AS kind, o.name AS object ORDER BY object")
    vol = sim.volunteer_context(ask("What did we pin in the lock file for kuzu?"))
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
    sim = new_sim(ctx)
    k = "Move the billing cron to 02:00 UTC"
    pid = sim.create_point("decision", k)["id"]
    sim.update_point(pid, status="live")
    sim.retract_point(pid)
    before = without_embedding(sim.get_point(pid))
    res = sim.checkpoint([{"content": k}])
    after = without_embedding(sim.get_point(pid))
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
    sim = new_sim(ctx, "a", encoder=enc)
    sim.checkpoint([{"content": x}])
    out["near_dup"] = sim.checkpoint([{"content": x2}])
    sim_b = new_sim(ctx, "b", encoder=enc)
    sim_b.checkpoint([{"content": x}])
    out["threshold_1"] = sim_b.checkpoint([{"content": x2}], threshold=1.0)
    sim_c = new_sim(ctx, "c", encoder=enc)
    out["batch_pair"] = sim_c.checkpoint([{"content": x}, {"content": x2}])

    def raising(texts: Any) -> Any:
        raise ImportError("sentence_transformers")

    sim_d = new_sim(ctx, "d", encoder=enc)
    sim_d.checkpoint([{"content": x}])
    out["import_error"] = sim_d.checkpoint([{"content": x2}], encode_fn=raising)
    sim_e = new_sim(ctx, "e", encoder=enc)
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
    sim = new_sim(ctx, "a")
    before = sim.store.table_counts()
    e1 = error_code(lambda: sim.checkpoint(bad))
    unchanged = sim.store.table_counts() == before
    snap = new_sim(ctx, "b", checkpoint_precheck=False)
    e2 = error_code(lambda: snap.checkpoint(bad))
    snap_items = [r["c"] for r in query_rows(snap, "MATCH (n:Point {pointKind:'checkpoint-item'}) RETURN n.content AS c")]
    faulty = new_sim(ctx, "c", faults=FaultHooks(fail_create_point_at=2))
    e3 = error_code(lambda: faulty.checkpoint([{"content": "first item"}, {"content": "second item"}]))
    f_items = [r["c"] for r in query_rows(faulty, "MATCH (n:Point {pointKind:'checkpoint-item'}) RETURN n.content AS c")]
    return Observation.from_checks({
        "precheck_refuses": e1 == "CheckpointValidationError" and unchanged,
        "snapshot_files_prefix_then_errors": e2 == "CheckpointValidationError" and snap_items == ["a"],
        "fault_keeps_item_1": e3 == "FaultInjected" and f_items == ["first item"],
    }, measured={"errors": [e1, e2, e3], "snapshot_items": snap_items, "fault_items": f_items},
        evidence=json.dumps({"precheck": e1, "snapshot": snap_items, "fault": f_items}))


@claim("TOR-14", design=D, record="MEM-RTE-checkpoint-diary; CI 3", kind="mechanism",
       statement="Diary reads are identity/recency-scoped, status-blind, full rows.")
def tor_14(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx)
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


@claim("TOR-41", design=D, record="AN:emission", kind="mechanism",
       statement="Event sinks are independent and best-effort.")
def tor_41(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx, "a", faults=FaultHooks(fail_journal={"PointAdded"}))
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
