"""Tortoise lifecycle claims TOR-23..25, 27, 49 (spec §8: retraction, supersession, invalidation).

Shared set-up lives in ``tortoise_common``.
"""

from __future__ import annotations

import json
from typing import Any

from harness.claims import ClaimContext, Observation, claim
from harness.claims.tortoise_common import (
    D,
    ask,
    error_code,
    new_sim,
    supported_and_contested,
    t0_point,
    without_embedding,
)
from tortoise_sim import (
    FaultHooks,
)


@claim("TOR-23", design=D, record="MEM-RTE-point-retraction", kind="mechanism",
       statement="Retraction is guarded and single-shot.")
def tor_23(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx)
    p = t0_point(sim, "decision", "Retire the legacy importer")
    q = t0_point(sim, "decision", "Keep the importer tests")
    sim.retract_point(p)
    second = error_code(lambda: sim.retract_point(p))
    n_events = len([e for e in sim.store.feed(["PointRetracted"]) if e["payload"]["id"] == p])
    op = sim.create_operator("IMPL", q, [p])
    on_op = error_code(lambda: sim.retract_point(op))
    unknown = error_code(lambda: sim.retract_point("no-such-id' OR 1=1"))
    o = sim.create_point("statement", "An outdated fact", status="outdated")["id"]
    on_outdated = error_code(lambda: sim.retract_point(o))
    lax = new_sim(ctx, "lax", outdated_terminal=False)
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
    sim = new_sim(ctx, "a", faults=faults)
    p = t0_point(sim, "decision", "Use blue-green deploys")
    n = t0_point(sim, "decision", "Use canary deploys")
    faults.before_cas = lambda pid: sim.supersede_point(pid, n)
    err = error_code(lambda: sim.retract_point(p))
    events = [e["payload"]["id"] for e in sim.store.feed(["PointRetracted"])]
    status_a = sim.get_point(p)["status"]
    sim_b = new_sim(ctx, "b", faults=FaultHooks(fail_graph_feed={"PointRetracted"}))
    p2 = t0_point(sim_b, "decision", "Use blue-green deploys")
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
    sim = new_sim(ctx)
    p = sim.create_point("decision", "Freeze the schema", validFrom="2026-02-01T00:00:00.000000+00:00")["id"]
    inv = error_code(lambda: sim.retract_point(p, valid_to="2026-01-01T00:00:00.000000+00:00"))
    feed_before = len(sim.store.feed())
    row_before = without_embedding(sim.get_point(p))
    dry = sim.retract_point(p, valid_to="2026-03-01T00:00:00.000000+00:00", dry_run=True)
    dry_clean = len(sim.store.feed()) == feed_before and without_embedding(sim.get_point(p)) == row_before
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
    sim = new_sim(ctx)
    p = t0_point(sim, "decision", "Adopt trunk-based development for the mobile app")
    before = [x["id"] for x in sim.volunteer_context(ask("What did we decide about trunk-based development?"))[
        "pointers"]]
    sim.retract_point(p)
    calls: list[list[str] | None] = []

    def spy(q: str, limit: int, ex: list[str], exo: bool) -> Any:
        from tortoise_sim.search import search_points

        hits, trace = search_points(sim.store, q, limit, ex, exo)
        calls.append(ex)
        return hits, trace

    after = sim.volunteer_context(ask("What did we decide about trunk-based development?"), search_fn=spy)
    ctx_rows = [r["id"] for r in sim.session_context()["points"]]
    digest = sim.context()
    return Observation.from_checks({
        "pointer_before": before == [p],
        "no_pointer_after": after["pointers"] == [],
        "both_arms_ran": calls == [["retracted", "superseded", "outdated", "archived", "deprecated"], ["retracted"]],
        "digest_rows_contain": p in ctx_rows,
        "rendered_digest_contains": "Adopt trunk-based development for the mobile app" in digest,
    }, measured={"before": before, "after": after["pointers"], "arms": calls}, evidence=digest)


@claim("TOR-49", design=D, record="Beyond report", kind="mechanism",
       statement="Supersession moves edges, clears messages, leaves a CORRECTS trail.")
def tor_49(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx)
    o, a, q, x = supported_and_contested(sim, ("decision", "Version the API in the URL path"),
                                         ("decision", "Use REST for the public API"),
                                         ("statement", "Clients cache by URL"))
    n = t0_point(sim, "decision", "Version the API with a header")
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
