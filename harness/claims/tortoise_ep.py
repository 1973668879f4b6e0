"""Tortoise EP / dream claims TOR-15..22, 26, 28, 29, 50 (spec shared/spec/tortoise.md §9, §13, §14).

Every demonstration builds a fresh on-disk Kuzu store under ``ctx.tmp_path``, drives ``tortoise_sim`` through its
public API (admission, lifecycle, capture, ``ep`` / ``dream``, volunteering, digest) and inspects what a user could
inspect: Point rows, edge messages, the GraphEvent feed, pointer sets and rendered digests.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.claims import ClaimContext, Observation, claim
from tortoise_sim import admission as adm
from tortoise_sim import dream as dr
from tortoise_sim.capture import capture_session
from tortoise_sim.config import FaultHooks, SimConfig
from tortoise_sim.digest import HEADINGS, render_digest, session_context
from tortoise_sim.ep import Claim, Factor, FactorGraph, run_ep
from tortoise_sim.extraction import MarkerExtractor
from tortoise_sim.lifecycle import retract_point
from tortoise_sim.store import StepClock, TortoiseStore
from tortoise_sim.volunteer import run_volunteer_pipeline
from tortoise_sim.why import ep_view

DESIGN = "tortoise"
EP_COLUMNS = {"confidence", "posterior_alpha", "posterior_beta", "ep_alpha", "ep_beta", "ep_dirty", "ep_dirty_at",
              "lastDreamedAt", "updatedAt"}


def _store(ctx: ClaimContext, name: str = "db", embedder: str = "none", **cfg: Any) -> TortoiseStore:
    path = Path(ctx.tmp_path) / f"{name}.kuzu"
    return TortoiseStore(path, config=SimConfig(embedder=embedder, **cfg), clock=StepClock(), seed=ctx.seed,
                         faults=FaultHooks())


def _t0(store: TortoiseStore, kind: str, content: str) -> str:
    """Spec §13 "T0 point": create_point(kind, content, credibility="gold") + update_point(status="live")."""
    pid = adm.create_point(store, kind, content, credibility="gold")["id"]
    adm.update_point(store, pid, status="live")
    return pid


def _acceptance(store: TortoiseStore) -> dict[str, str]:
    """§14.1: A (10,1), B (no baseline), C (5,1); O1 = IMPL [A, B], O2 = NAND [B, C], both bidirectional."""
    ids = {n: adm.create_point(store, "statement", f"Acceptance claim {n}", status="live")["id"] for n in "ABC"}
    adm.set_point_baseline(store, ids["A"], 10, 1)
    adm.set_point_baseline(store, ids["C"], 5, 1)
    ids["O1"] = adm.create_operator(store, "IMPL", ids["A"], [ids["B"]], direction="bidirectional")
    ids["O2"] = adm.create_operator(store, "NAND", ids["B"], [ids["C"]], direction="bidirectional")
    return ids


def _dreamed_acceptance(ctx: ClaimContext, name: str = "db", **cfg: Any) -> tuple[TortoiseStore, dict[str, str]]:
    """A fresh store holding the §14.1 acceptance graph after one full, uncalibrated dream."""
    store = _store(ctx, name, **cfg)
    ids = _acceptance(store)
    dr.dream(store, mode="full", require_calibration=False)
    return store, ids


def _per_setting(ctx: ClaimContext, option: str, values: tuple[Any, ...],
                 body: Callable[[TortoiseStore, dict[str, str]], dict[str, Any]]) -> dict[str, Any]:
    """Run ``body`` on a dreamed acceptance store per value of the config ``option``; ``{str(value): result}``."""
    out: dict[str, Any] = {}
    for value in values:
        store, ids = _dreamed_acceptance(ctx, f"db_{value}", **{option: value})
        out[str(value)] = body(store, ids)
        store.close()
    return out


def _row(store: TortoiseStore, pid: str, cols: tuple[str, ...]) -> dict[str, Any]:
    p = store.get_point(pid) or {}
    return {c: p.get(c) for c in cols}


def _edges(store: TortoiseStore) -> list[dict[str, Any]]:
    return store.query("MATCH (a:Point)-[r:IMPL|NAND]->(b) RETURN a.id AS src, b.id AS tgt, label(r) AS rel, "
                       "r.msg_alpha AS msg_alpha, r.msg_beta AS msg_beta, r.back_msg_alpha AS back_alpha, "
                       "r.back_msg_beta AS back_beta ORDER BY src, tgt")


def _mean(pair: tuple[float, float]) -> float:
    return pair[0] / (pair[0] + pair[1])


@claim("TOR-15", design=DESIGN, record="MEM-OBJ-belief-state", kind="mechanism",
       statement="The EP engine is exact on the acceptance graph (§14.1), in memory and via Kuzu load + flush.")
def tor_15(ctx: ClaimContext) -> Observation:
    fg = FactorGraph(
        {"A": Claim("A", (10, 1), (10, 1)), "B": Claim("B", None, (1, 1)), "C": Claim("C", (5, 1), (5, 1))},
        [Factor("O1", "IMPL", 1.0, "bidirectional", ["A", "B"]), Factor("O2", "NAND", 8.0, "bidirectional", ["B", "C"])])
    pure = run_ep(fg, warm_start=False)
    store = _store(ctx)
    ids = _acceptance(store)
    out = dr.run(store, [ids["O1"], ids["O2"]], max_hops=2, warm_start=False)
    rows = {n: _row(store, ids[n], ("confidence", "ep_alpha", "ep_beta", "posterior_alpha", "posterior_beta"))
            for n in "ABC"}
    store.close()
    observed = {
        "pure_iterations": pure.iterations, "pure_converged": pure.converged,
        "pure_means": {n: round(pure.mean(n), 6) for n in "ABC"},
        "pure_posteriors": {n: [round(x, 4) for x in pure.beliefs[n]] for n in "ABC"},
        "kuzu_iterations": out["iterations"], "kuzu_converged": out["converged"],
        "kuzu_means": {n: round(_mean(out["beliefs"][ids[n]]), 6) for n in "ABC"},
        "flushed_confidence": {n: rows[n]["confidence"] for n in "ABC"},
        "ep_prior_kept": {n: [rows[n]["ep_alpha"], rows[n]["ep_beta"]] for n in "AC"},
        "B_ep_equals_posterior": [rows["B"]["ep_alpha"], rows["B"]["ep_beta"]]
        == [rows["B"]["posterior_alpha"], rows["B"]["posterior_beta"]],
        "paths_identical": all(out["beliefs"][ids[n]] == pure.beliefs[n] for n in "ABC"),
    }
    means = {"A": 0.897152, "B": 0.254643, "C": 0.778180}
    expected = {
        "pure_iterations": 35, "pure_converged": True, "pure_means": means,
        "pure_posteriors": {"A": [9.1303, 1.0467], "B": [0.5462, 1.5987], "C": [3.5164, 1.0023]},
        "kuzu_iterations": 35, "kuzu_converged": True, "kuzu_means": means,
        "flushed_confidence": {"A": 0.8972, "B": 0.2546, "C": 0.7782},
        "ep_prior_kept": {"A": [10.0, 1.0], "C": [5.0, 1.0]}, "B_ep_equals_posterior": True, "paths_identical": True,
    }
    return Observation.compare(expected, observed, tol=0.0,
                               evidence=json.dumps({"B_row": rows["B"], "iterations": out["iterations"]}))


@claim("TOR-16", design=DESIGN, record="MEM-OBJ-belief-state", kind="mechanism",
       statement="Edge messages warm-start later runs; priors stay immutable.")
def tor_16(ctx: ClaimContext) -> Observation:
    store = _store(ctx)
    ids = _acceptance(store)
    first = dr.run(store, [ids["O1"], ids["O2"]], warm_start=False)
    edges = [e for e in _edges(store) if e["src"] in (ids["O1"], ids["O2"])]
    rows = {n: _row(store, ids[n], ("ep_alpha", "ep_beta", "posterior_alpha", "posterior_beta", "confidence"))
            for n in "ABC"}
    second = dr.run(store, [ids["O1"], ids["O2"]], warm_start=False)
    moves = {n: abs(_mean(second["beliefs"][ids[n]]) - _mean(first["beliefs"][ids[n]])) for n in "ABC"}
    store.close()
    checks = {
        "all_4_operator_edges_hold_messages": len(edges) == 4 and all(
            e["msg_alpha"] is not None and e["msg_beta"] is not None for e in edges),
        "A_keeps_prior": (rows["A"]["ep_alpha"], rows["A"]["ep_beta"]) == (10.0, 1.0),
        "C_keeps_prior": (rows["C"]["ep_alpha"], rows["C"]["ep_beta"]) == (5.0, 1.0),
        "posteriors_differ_from_priors": all(
            (rows[n]["posterior_alpha"], rows[n]["posterior_beta"]) != (rows[n]["ep_alpha"], rows[n]["ep_beta"])
            for n in "AC"),
        "second_run_fewer_iterations": second["converged"] and second["iterations"] < first["iterations"],
        "every_mean_moves_below_1e-3": max(moves.values()) < 1e-3,
    }
    return Observation.from_checks(checks, measured={
        "first_iterations": first["iterations"], "second_iterations": second["iterations"],
        "mean_moves": moves}, evidence=json.dumps(edges[:2]))


@claim("TOR-17", design=DESIGN, record="MEM-RTE-dream-writeback", kind="mechanism",
       statement="Freshness is stamped only on convergence; failing roots retry then give up.")
def tor_17(ctx: ClaimContext) -> Observation:
    store = _store(ctx, ep_max_iter=5)
    ids = _acceptance(store)
    res1 = dr.dream(store, mode="local", require_calibration=False)
    b1 = _row(store, ids["B"], ("confidence", "lastDreamedAt", "ep_dirty"))
    attempts1 = store.dream_state.get("retries", {}).get(ids["B"], {}).get("attempts")
    roots_dirty = {ids[n] for n in "ABC"} <= store.dirty_roots
    results = [dr.dream(store, mode="local", require_calibration=False) for _ in range(3)]
    b4 = _row(store, ids["B"], ("confidence", "lastDreamedAt", "ep_dirty"))
    store.close()
    checks = {
        "first_pass_not_converged": not res1.converged,
        "confidence_written": b1["confidence"] is not None,
        "lastDreamedAt_null": b1["lastDreamedAt"] is None,
        "roots_still_dirty": roots_dirty and b1["ep_dirty"] is True,
        "attempts_1": attempts1 == 1,
        "fourth_failure_gives_up": ids["B"] in results[-1].stale_unresolved,
        "flag_cleared_after_giving_up": b4["ep_dirty"] is False,
        "never_stamped": b4["lastDreamedAt"] is None,
    }
    return Observation.from_checks(checks, measured={
        "converged": [res1.converged] + [r.converged for r in results], "attempts_after_first": attempts1,
        "stale_unresolved": results[-1].stale_unresolved}, evidence=json.dumps({"B_after_1": b1, "B_after_4": b4}))


@claim("TOR-18", design=DESIGN, record="MEM-RTE-dream-writeback", kind="mechanism",
       statement="The epoch guard discards a stale pass completely.")
def tor_18(ctx: ClaimContext) -> Observation:
    store = _store(ctx)
    ids = _acceptance(store)
    other = adm.create_point(store, "decision", "An unrelated decision", status="live")["id"]
    cols = tuple(sorted(EP_COLUMNS))
    before = {n: _row(store, ids[n], cols) for n in "ABC"}
    msgs = _edges(store)
    store.faults.before_flush = lambda: store.mark_dirty([other])
    res = dr.dream(store, mode="full", require_calibration=False)
    store.faults.before_flush = None
    after = {n: _row(store, ids[n], cols) for n in "ABC"}
    checks = {
        "flush_skipped": res.flush_skipped,
        "ep_columns_unchanged": after == before,
        "messages_unchanged": _edges(store) == msgs,
        "no_confidence_changed": store.feed(["ConfidenceChanged"]) == [],
        "roots_still_dirty": {ids[n] for n in "ABC"} <= store.dirty_roots
        and all(after[n]["ep_dirty"] for n in "ABC"),
    }
    store.close()
    return Observation.from_checks(checks, measured={"result": res.as_dict()},
                                   evidence=json.dumps({"B": after["B"]}))


@claim("TOR-19", design=DESIGN, record="MEM-RTE-dream-writeback", kind="mechanism",
       statement="Window passes are stale-first and budgeted; zero budget is a no-op.")
def tor_19(ctx: ClaimContext) -> Observation:
    store = _store(ctx)
    early = [_t0(store, "decision", f"Earlier isolated decision {i}") for i in range(2)]
    dr.dream(store, mode="local", require_calibration=False)  # stamps the two earlier claims
    late = [_t0(store, "decision", f"Later isolated decision {i}") for i in range(2)]
    stamps0 = {p: store.get_point(p)["lastDreamedAt"] for p in early + late}
    zero = dr.dream(store, mode="window", budget=0, require_calibration=False)
    after_zero = {p: store.get_point(p)["lastDreamedAt"] for p in early + late}
    res = dr.dream(store, mode="window", budget=2, require_calibration=False)
    stamps = {p: store.get_point(p)["lastDreamedAt"] for p in early + late}
    store.close()
    checks = {
        "two_stamped_before": all(stamps0[p] for p in early) and not any(stamps0[p] for p in late),
        "budget_0_noop": zero.noop and after_zero == stamps0,
        "window_stamps_the_unstamped": all(stamps[p] for p in late),
        "earlier_stamps_untouched": all(stamps[p] == stamps0[p] for p in early),
        "stamped_in_id_order": res.stamped == sorted(late),
    }
    return Observation.from_checks(checks, measured={"window": res.as_dict(), "noop": zero.noop},
                                   evidence=json.dumps(stamps))


@claim("TOR-20", design=DESIGN, record="MEM-RTE-dream-writeback", kind="mechanism",
       statement="Committed write-backs are journaled per claim (ConfidenceChanged).")
def tor_20(ctx: ClaimContext) -> Observation:
    store, ids = _dreamed_acceptance(ctx)
    events = [e["payload"] for e in store.feed(["ConfidenceChanged"])]
    written = {ids[n]: _row(store, ids[n], ("confidence", "lastDreamedAt")) for n in "ABC"}
    store.close()
    off = _store(ctx, "db_off", emit_confidence_changed=False)
    _acceptance(off)
    dr.dream(off, mode="full", require_calibration=False)
    n_off = len(off.feed(["ConfidenceChanged"]))
    off.close()
    observed = {
        "events": len(events),
        "payloads_match_rows": all(written[e["id"]] == {"confidence": e["confidence"],
                                                        "lastDreamedAt": e["lastDreamedAt"]} for e in events),
        "ids": sorted(e["id"] for e in events), "events_when_disabled": n_off,
    }
    return Observation.compare({"events": 3, "payloads_match_rows": True, "ids": sorted(written),
                                "events_when_disabled": 0}, observed, evidence=json.dumps(events[:1]))


@claim("TOR-21", design=DESIGN, record="CI 4", kind="mechanism",
       statement="Maintenance changes numbers and eligibility, never meaning.")
def tor_21(ctx: ClaimContext) -> Observation:
    store = _store(ctx)
    ids = _acceptance(store)
    ops = {ids["O1"], ids["O2"]}
    before = {p: store.get_point(p) for p in ids.values()}
    count0 = store.count("Point")
    edges0 = _edges(store)
    dr.dream(store, mode="full", require_calibration=False)
    after = {p: store.get_point(p) for p in ids.values()}
    edges1 = _edges(store)
    count1 = store.count("Point")
    store.close()
    changed = sorted({k for p in ids.values() for k in before[p] if before[p][k] != after[p][k]})
    edge_changed = sorted({k for a, b in zip(edges0, edges1, strict=True) for k in a if a[k] != b[k]})
    meaning = ("content", "pointKind", "status")
    checks = {
        "content_kind_status_unchanged": all(before[p][k] == after[p][k] for p in ids.values() for k in meaning),
        "point_count_unchanged": count0 == count1,
        "only_ep_columns_changed": set(changed) <= EP_COLUMNS,
        "edges_only_messages_changed": set(edge_changed) <= {"msg_alpha", "msg_beta", "back_alpha", "back_beta"},
        "operators_untouched": all(before[o] == after[o] for o in ops),
    }
    return Observation.from_checks(checks, measured={"changed_point_columns": changed,
                                                     "changed_edge_columns": edge_changed},
                                   evidence=json.dumps({"changed": changed}))


P_D = "We will self-host Postgres on bare metal servers"
P_E = "Production traffic stays on the managed database cluster"
P_X = "The logging pipeline ships JSON lines to object storage"
PROMPTS = ["What did we decide about self-hosting Postgres on bare metal?",
           "What is the status of the managed database cluster?",
           "Where does the logging pipeline ship its JSON lines?"]


@claim("TOR-22", design=DESIGN, record="MEM-RTE-dream-writeback; MEM-OBJ-belief-state (consequence b)",
       kind="consequence", statement="Dream changes which pointers are volunteered (§14.7).")
def tor_22(ctx: ClaimContext) -> Observation:
    store = _store(ctx, embedder="hashing")
    d = adm.create_point(store, "statement", P_D, status="live")["id"]
    e = adm.create_point(store, "statement", P_E, status="live")["id"]
    x = adm.create_point(store, "statement", P_X, status="live")["id"]
    for pid, (a, b) in ((d, (3, 1)), (e, (10, 1)), (x, (10, 1))):
        adm.set_point_baseline(store, pid, a, b)
    adm.create_direct_edge(store, e, d, "NAND", direction="bidirectional")

    def sets() -> list[list[str]]:
        return [[p["id"] for p in run_volunteer_pipeline(store, [{"role": "user", "content": q}])["pointers"]]
                for q in PROMPTS]

    before = sets()
    res = dr.dream(store, mode="full")
    after = sets()
    views = {n: ep_view(store.get_point(pid) or {}) for n, pid in (("D", d), ("E", e), ("X", x))}
    means = {n: v["confidence_mean"] for n, v in views.items()}  # the gate's read: posterior, else prior
    store.close()
    changed = [i for i in range(3) if set(before[i]) != set(after[i])]
    held_d = [i for i in range(3) if d in before[i]]
    checks = {
        "D_volunteered_before": bool(held_d),
        "D_below_gate_after": means["D"] < 0.7 and not (views["D"]["contested"] and means["D"] >= 0.6),
        "E_X_still_eligible": means["E"] >= 0.7 and means["X"] >= 0.7,
        "changed_sets_are_the_D_prompts": changed == held_d and len(changed) >= 1,
        "no_prompt_gains_a_pointer": all(set(after[i]) <= set(before[i]) for i in range(3)),
        "X_prompt_unchanged": before[2] == after[2],
        "dream_converged": res.converged_all,
    }
    return Observation.from_checks(checks, measured={"changed_prompts": len(changed), "means_after": means,
                                                     "before": before, "after": after},
                                   evidence=json.dumps({"p1_before": before[0], "p1_after": after[0]}))


@claim("TOR-26", design=DESIGN, record="MEM-RTE-point-retraction", kind="mechanism",
       statement="Retraction tombstones: addressable, not dirtied, belief kept unless decay.")
def tor_26(ctx: ClaimContext) -> Observation:
    cols = ("confidence", "updatedAt", "ep_dirty", "posterior_alpha", "posterior_beta", "ep_alpha", "ep_beta",
            "status")

    def retract_b(store: TortoiseStore, ids: dict[str, str]) -> dict[str, Any]:
        b0 = _row(store, ids["B"], cols)
        retract_point(store, ids["B"])
        b1 = _row(store, ids["B"], cols)
        return {"before": b0, "after": b1, "readable": store.get_point(ids["B"]) is not None}

    out = _per_setting(ctx, "terminal_decay", (False, True), retract_b)
    f, t = out["False"], out["True"]
    checks = {
        "readable": f["readable"] and f["after"]["status"] == "retracted",
        "updatedAt_bumped": f["after"]["updatedAt"] > f["before"]["updatedAt"],
        "ep_dirty_unchanged": f["after"]["ep_dirty"] == f["before"]["ep_dirty"],
        "confidence_kept": f["after"]["confidence"] == f["before"]["confidence"],
        "decay_resets_to_half": t["after"]["confidence"] == 0.5
        and (t["after"]["posterior_alpha"], t["after"]["posterior_beta"]) == (1.0, 1.0),
        "decay_keeps_ep": (t["after"]["ep_alpha"], t["after"]["ep_beta"]) == (t["before"]["ep_alpha"],
                                                                            t["before"]["ep_beta"]),
    }
    return Observation.from_checks(checks, measured=out, evidence=json.dumps(f["after"]))


def _digest_points(text: str) -> list[str]:
    lines = text.splitlines()
    if HEADINGS["points"] not in lines:
        return []
    out = []
    for ln in lines[lines.index(HEADINGS["points"]) + 1:]:
        if not ln.startswith("- "):
            break
        out.append(ln)
    return out


def _withdrawal_run(store: TortoiseStore) -> dict[str, Any]:
    """§14.9: four sessions; P2 and P4 are retracted in session 2."""
    topics = ["billing", "search", "deploy", "backup", "logging", "caching", "auth", "metrics", "queue",
              "storage", "email", "payments", "reports", "sessions"]
    content = {i: f"Use the {topics[i - 1]} service v{i} for the {topics[i - 1]} subsystem" for i in range(1, 15)}
    adm.diary_write(store, "agent", "Reviewed the plan with the team.")
    p = {i: _t0(store, "decision", content[i]) for i in range(1, 5)}
    render_digest(session_context(store))  # session 2 start (D2)
    for i in (2, 4):
        retract_point(store, p[i])
    p.update({i: _t0(store, "decision", content[i]) for i in (5, 6)})
    d3 = render_digest(session_context(store))
    vol = {i: [q["id"] for q in run_volunteer_pipeline(store, [{"role": "user", "content":
           f"What did we decide about the {topics[i - 1]} subsystem?"}])["pointers"]] for i in (1, 2, 4)}
    p.update({i: _t0(store, "decision", content[i]) for i in range(7, 15)})
    d4 = render_digest(session_context(store))
    retracted = [2, 4]
    in_d3 = [i for i in retracted if any(content[i] in ln for ln in _digest_points(d3))]
    in_d4 = [i for i in retracted if any(content[i] in ln for ln in _digest_points(d4))]
    conf = {name: [i for i in retracted if f"[0.50] {content[i][:120]}" in d] for name, d in (("d3", d3), ("d4", d4))}
    return {
        "digest_exposure": len(set(in_d3) | set(in_d4)) / len(retracted),
        "volunteer_exposure": sum(1 for i in retracted if p[i] in vol[i]) / len(retracted),
        "d4_exposure": len(in_d4) / len(retracted),
        "d4_points_are_P14_to_P7": [ln for ln in _digest_points(d4)] == [f"- (decision) {content[i]}"
                                                                         for i in range(14, 6, -1)],
        "confidence_section_half": conf, "d3_excerpt": _digest_points(d3)[:6],
        "live_control_volunteered": p[1] in vol[1],  # the same question shape does surface a live decision
    }


@claim("TOR-28", design=DESIGN, record="II 2; MEM-RTE-start-digest (consequence a)", kind="consequence",
       statement="Across sessions the digest shows retracted points that volunteering never shows.")
def tor_28(ctx: ClaimContext) -> Observation:
    base = _withdrawal_run(s := _store(ctx, "default", embedder="hashing"))
    s.close()
    filt = _withdrawal_run(s := _store(ctx, "filter", embedder="hashing", digest_status_filter=True))
    s.close()
    decay = _withdrawal_run(s := _store(ctx, "decay", embedder="hashing", terminal_decay=True))
    s.close()
    observed = {
        "digest_exposure": base["digest_exposure"], "volunteer_exposure": base["volunteer_exposure"],
        "session4_digest_exposure": base["d4_exposure"], "session4_points_P14_to_P7": base["d4_points_are_P14_to_P7"],
        "status_filter_digest_exposure": filt["digest_exposure"],
        "decay_confidence_section": decay["confidence_section_half"],
        "live_control_volunteered": base["live_control_volunteered"],
    }
    expected = {"digest_exposure": 1.0, "volunteer_exposure": 0.0, "session4_digest_exposure": 0.0,
                "session4_points_P14_to_P7": True, "status_filter_digest_exposure": 0.0,
                "decay_confidence_section": {"d3": [2, 4], "d4": [2, 4]}, "live_control_volunteered": True}
    return Observation.compare(expected, observed, evidence="\n".join(base["d3_excerpt"]))


@claim("TOR-29", design=DESIGN, record="Beyond report", kind="consequence",
       statement="A retracted claim's numerical influence persists, per-version differently.")
def tor_29(ctx: ClaimContext) -> Observation:
    def retract_c_and_dream(store: TortoiseStore, ids: dict[str, str]) -> dict[str, Any]:
        b0, c0 = store.get_point(ids["B"])["confidence"], store.get_point(ids["C"])["confidence"]
        retract_point(store, ids["C"])
        dr.dream(store, mode="full", require_calibration=False)
        b1, c1 = store.get_point(ids["B"])["confidence"], store.get_point(ids["C"])["confidence"]
        return {"B_before": b0, "B_after": b1, "C_before": c0, "C_after": c1}

    out = _per_setting(ctx, "ep_exclude_terminal", (True, False), retract_c_and_dream)
    d, s = out["True"], out["False"]
    checks = {
        "default_B_moves_below_1e-3": abs(d["B_after"] - d["B_before"]) < 1e-3,
        "default_C_confidence_unchanged": d["C_after"] == d["C_before"],
        "snapshot_B_rises_over_0.2": s["B_after"] - s["B_before"] > 0.2,
        "snapshot_C_rewritten_as_variable": s["C_after"] != s["C_before"],
    }
    return Observation.from_checks(checks, measured=out, evidence=json.dumps(out))


@claim("TOR-50", design=DESIGN, record="Beyond report", kind="mechanism",
       statement="The calibration gate blocks default dreams once un-baselined live statements exist.")
def tor_50(ctx: ClaimContext) -> Observation:
    store = _store(ctx)
    resp = capture_session(store, [{"role": "user", "content": "statement: The cache is warmed nightly"}], "s1",
                           extractor=MarkerExtractor())
    pid = resp["points"][0]["id"] if resp["points"] else None
    try:
        dr.dream(store)
        named, raised = [], False
    except dr.CalibrationError as exc:
        named, raised = exc.ids, True
    ungated = dr.dream(store, require_calibration=False)
    runs = pid is not None and pid in set(ungated.stamped) | set(ungated.affected_claims)
    store.close()
    store2 = _store(ctx, "mitigation")
    a = _t0(store2, "decision", "Ship the release on Friday")
    b = _t0(store2, "decision", "Freeze deploys on Fridays")
    op = adm.create_operator(store2, "NAND", a, [b])
    mid = adm.mitigate_operator(store2, op, "release only behind a flag", 0.3)
    try:
        dr.dream(store2)
        named2: list[str] = []
    except dr.CalibrationError as exc:
        named2 = exc.ids
    res2 = dr.dream(store2, require_calibration=False)
    store2.close()
    observed = {"raised_after_capture": raised, "named": named == [pid] and pid is not None,
                "ungated_runs": runs, "mitigation_named": named2 == [mid], "ungated_mitigation_converged":
                res2.converged_all}
    return Observation.compare({"raised_after_capture": True, "named": True, "ungated_runs": True,
                                "mitigation_named": True, "ungated_mitigation_converged": True}, observed,
                               evidence=json.dumps({"captured": pid, "gate_named": named, "mitigation": named2}))
