"""Dream on the Kuzu store (spec §9.6-§9.9): 14.1 through load + flush, scheduling, guards, events, seams."""

from __future__ import annotations

import math

import pytest

from tortoise_sim import admission as adm
from tortoise_sim import dream as dr
from tortoise_sim.capture import capture_session
from tortoise_sim.config import FaultHooks, SimConfig
from tortoise_sim.ep import Claim, Factor, FactorGraph, run_ep
from tortoise_sim.errors import UnknownPoint
from tortoise_sim.extraction import MarkerExtractor
from tortoise_sim.lifecycle import retract_point
from tortoise_sim.store import StepClock, TortoiseStore

EP_COLS = ("confidence", "posterior_alpha", "posterior_beta", "ep_alpha", "ep_beta", "ep_dirty", "ep_dirty_at",
           "lastDreamedAt", "updatedAt")


def make_store(**cfg: object) -> TortoiseStore:
    return TortoiseStore(config=SimConfig(embedder="none", **cfg), clock=StepClock(),  # type: ignore[arg-type]
                         faults=FaultHooks())


def build_14_1(store: TortoiseStore) -> dict[str, str]:
    ids = {n: adm.create_point(store, "statement", f"Claim {n} of the acceptance graph", status="live")["id"]
           for n in "ABC"}
    adm.set_point_baseline(store, ids["A"], 10, 1)
    adm.set_point_baseline(store, ids["C"], 5, 1)
    ids["O1"] = adm.create_operator(store, "IMPL", ids["A"], [ids["B"]])
    ids["O2"] = adm.create_operator(store, "NAND", ids["B"], [ids["C"]])
    return ids


def pure_14_1() -> FactorGraph:
    return FactorGraph(
        {"A": Claim("A", (10, 1), (10, 1)), "B": Claim("B", None, (1, 1)), "C": Claim("C", (5, 1), (5, 1))},
        [Factor("O1", "IMPL", 1.0, "bidirectional", ["A", "B"]), Factor("O2", "NAND", 8.0, "bidirectional", ["B", "C"])])


def edge_msgs(store: TortoiseStore) -> list[tuple]:
    return sorted(tuple(r.values()) for r in store.query(
        "MATCH (a:Point)-[r:IMPL|NAND]->(b) RETURN a.id, b.id, r.msg_alpha, r.msg_beta, r.back_msg_alpha, "
        "r.back_msg_beta"))


def test_14_1_kuzu_load_run_flush_matches_pure_engine() -> None:
    s = make_store()
    ids = build_14_1(s)
    out = dr.run(s, [ids["O1"], ids["O2"]], max_hops=2, warm_start=False)
    assert (out["iterations"], out["converged"], out["flush_skipped"]) == (35, True, False)
    pure = run_ep(pure_14_1())
    for n in "ABC":
        assert out["beliefs"][ids[n]] == pure.beliefs[n]
    rows = {n: s.get_point(ids[n]) for n in "ABC"}
    assert {n: rows[n]["confidence"] for n in "ABC"} == {"A": 0.8972, "B": 0.2546, "C": 0.7782}
    assert {n: round(rows[n]["posterior_alpha"] / (rows[n]["posterior_alpha"] + rows[n]["posterior_beta"]), 6)
            for n in "ABC"} == {"A": 0.897152, "B": 0.254643, "C": 0.778180}
    assert (rows["A"]["ep_alpha"], rows["A"]["ep_beta"]) == (10.0, 1.0)
    assert (rows["C"]["ep_alpha"], rows["C"]["ep_beta"]) == (5.0, 1.0)
    assert (rows["B"]["ep_alpha"], rows["B"]["ep_beta"]) == (rows["B"]["posterior_alpha"], rows["B"]["posterior_beta"])
    assert round(rows["B"]["ep_alpha"], 4) == 0.5462 and round(rows["B"]["ep_beta"], 4) == 1.5987
    msgs = edge_msgs(s)
    assert len(msgs) == 4 and all(m[2] is not None and m[3] is not None for m in msgs)


def test_14_1_full_dream_and_confidence_changed() -> None:
    s = make_store()
    ids = build_14_1(s)
    res = dr.dream(s, mode="full", require_calibration=False, warm_start=False)
    assert (res.iterations, res.converged, res.budget_used, res.batches) == (35, True, 2, 1)
    ev = {e["payload"]["id"]: e["payload"] for e in s.feed(["ConfidenceChanged"])}
    assert set(ev) == {ids["A"], ids["B"], ids["C"]}
    for n in "ABC":
        row = s.get_point(ids[n])
        assert ev[ids[n]]["confidence"] == row["confidence"]  # full precision in the write-back
        assert ev[ids[n]]["lastDreamedAt"] == row["lastDreamedAt"] is not None
    assert round(s.get_point(ids["B"])["confidence"], 6) == 0.254643
    assert not s.dirty_roots
    s2 = make_store(emit_confidence_changed=False)
    build_14_1(s2)
    dr.dream(s2, mode="full", require_calibration=False)
    assert s2.feed(["ConfidenceChanged"]) == []


def test_messages_warm_start_second_run() -> None:
    s = make_store()
    ids = build_14_1(s)
    first = dr.run(s, [ids["O1"], ids["O2"]])
    means = {n: s.get_point(ids[n])["confidence"] for n in "ABC"}
    second = dr.run(s, [ids["O1"], ids["O2"]])
    assert second["converged"] and second["iterations"] < first["iterations"]
    for n in "ABC":
        a, b = second["beliefs"][ids[n]]
        assert abs(a / (a + b) - means[n]) < 1e-3


def test_non_converged_keeps_stamps_and_retries_then_gives_up() -> None:
    s = make_store(ep_max_iter=5)
    ids = build_14_1(s)
    res = dr.dream(s, mode="local", require_calibration=False)
    b = s.get_point(ids["B"])
    assert not res.converged and b["confidence"] is not None and b["lastDreamedAt"] is None
    assert b["ep_dirty"] is True and ids["B"] in s.dirty_roots
    assert s.dream_state["retries"][ids["B"]]["attempts"] == 1
    assert s.dream_state["retries"][ids["B"]]["backoff_until"] is not None
    for _ in range(3):
        res = dr.dream(s, mode="local", require_calibration=False)
    assert ids["B"] in res.stale_unresolved and s.get_point(ids["B"])["ep_dirty"] is False
    assert s.get_point(ids["B"])["lastDreamedAt"] is None


def test_epoch_guard_discards_the_pass() -> None:
    s = make_store()
    ids = build_14_1(s)
    x = adm.create_point(s, "statement", "unrelated", status="live")["id"]
    before = {n: {c: s.get_point(ids[n])[c] for c in EP_COLS} for n in "ABC"}
    msgs = edge_msgs(s)
    s.faults.before_flush = lambda: s.mark_dirty([x])
    res = dr.dream(s, mode="full", require_calibration=False)
    assert res.flush_skipped
    s.faults.before_flush = None
    assert {n: {c: s.get_point(ids[n])[c] for c in EP_COLS} for n in "ABC"} == before
    assert edge_msgs(s) == msgs and s.feed(["ConfidenceChanged"]) == []
    assert {ids["A"], ids["B"], ids["C"]} <= s.dirty_roots


def test_window_is_stale_first_and_budgeted() -> None:
    s = make_store()
    old = [adm.create_point(s, "statement", f"old claim {i}", status="live", credibility="gold")["id"]
           for i in range(2)]
    dr.dream(s, mode="local", require_calibration=False)
    assert all(s.get_point(i)["lastDreamedAt"] for i in old) and not s.dirty_roots
    new = [adm.create_point(s, "statement", f"new claim {i}", status="live", credibility="gold")["id"]
           for i in range(2)]
    stamps_old = {i: s.get_point(i)["lastDreamedAt"] for i in old}
    zero = dr.dream(s, mode="window", budget=0, require_calibration=False)
    assert zero.noop and all(s.get_point(i)["lastDreamedAt"] is None for i in new)
    assert dr.dream(s, mode="window", budget=-3, require_calibration=False).noop
    res = dr.dream(s, mode="window", budget=2, require_calibration=False)
    assert sorted(res.stamped) == sorted(new) and res.coverage == 1.0
    assert all(s.get_point(i)["lastDreamedAt"] for i in new)
    assert {i: s.get_point(i)["lastDreamedAt"] for i in old} == stamps_old


def test_window_budget_limits_operators() -> None:
    s = make_store()
    pts = [adm.create_point(s, "statement", f"chain {i}", status="live", credibility="high")["id"] for i in range(6)]
    ops = [adm.create_operator(s, "IMPL", pts[i], [pts[i + 1]]) for i in range(5)]
    res = dr.dream_window(s, budget=2, require_calibration=False)
    assert res.budget_used == 2 and res.batches == 1
    assert len(ops) == 5


def test_dream_changes_only_numbers() -> None:
    s = make_store()
    ids = build_14_1(s)
    keep = ("content", "pointKind", "status", "content_hash", "createdAt", "is_operator", "op_type", "direction")
    before = {pid: s.get_point(pid) for pid in ids.values()}
    counts = s.table_counts()
    dr.dream(s, mode="full", require_calibration=False)
    assert s.table_counts()["Point"] == counts["Point"]
    changed_cols = set()
    for pid, row in before.items():
        after = s.get_point(pid)
        assert {k: after[k] for k in keep} == {k: row[k] for k in keep}
        changed_cols |= {k for k in row if row[k] != after[k]}
    assert changed_cols <= {"confidence", "posterior_alpha", "posterior_beta", "ep_alpha", "ep_beta", "ep_dirty",
                            "updatedAt", "lastDreamedAt"}


def test_retracted_claim_keeps_numerical_influence() -> None:
    for exclude, check in ((True, lambda d: abs(d) < 1e-3), (False, lambda d: d > 0.2)):
        s = make_store(ep_exclude_terminal=exclude)
        ids = build_14_1(s)
        dr.dream(s, mode="full", require_calibration=False)
        b0, c0 = s.get_point(ids["B"])["confidence"], s.get_point(ids["C"])["confidence"]
        retract_point(s, ids["C"])
        dr.dream(s, mode="full", require_calibration=False)
        assert check(s.get_point(ids["B"])["confidence"] - b0)
        if exclude:
            assert s.get_point(ids["C"])["confidence"] == c0


def test_calibration_gate() -> None:
    s = make_store()
    p = adm.create_point(s, "statement", "an unbaselined statement", status="live")["id"]
    with pytest.raises(dr.CalibrationError) as exc:
        dr.dream(s)
    assert exc.value.ids == [p]
    assert not dr.dream(s, require_calibration=False).noop
    adm.create_point(s, "decision", "a decision is not calibration-relevant", status="live")
    adm.set_point_baseline(s, p, 2, 1)
    dr.dream(s)


def test_drafts_are_not_written_and_bad_input() -> None:
    s = make_store()
    d = adm.create_point(s, "statement", "a draft", status="draft")["id"]
    ids = build_14_1(s)
    adm.create_operator(s, "NAND", ids["A"], [d])  # draft input is dropped: single live input -> skipped
    dr.dream(s, mode="full", require_calibration=False)
    assert s.get_point(d)["confidence"] is None
    with pytest.raises(ValueError):
        dr.dream(s, mode="weekly")
    with pytest.raises(ValueError):
        dr.dream(s, mode="local", budget=1.5)  # type: ignore[arg-type]
    s.set_point_props(ids["A"], {"ep_alpha": math.nan})
    s.mark_dirty([ids["A"]])
    before = {pid: s.get_point(pid)["updatedAt"] for pid in ids.values()}
    with pytest.raises(ValueError):
        dr.dream(s, mode="full", require_calibration=False)
    assert {pid: s.get_point(pid)["updatedAt"] for pid in ids.values()} == before


def test_get_confidence_runs_a_local_pass_when_dirty() -> None:
    s = make_store()
    ids = build_14_1(s)
    conf = dr.get_confidence(s, ids["B"])
    assert round(conf["mean"], 4) == 0.2546 and conf["effective_n"] == conf["alpha"] + conf["beta"]
    assert s.get_point(ids["B"])["lastDreamedAt"] is None  # non-stamping
    assert math.isclose(conf["variance"], conf["alpha"] * conf["beta"] / (conf["effective_n"] ** 2 *
                                                                          (conf["effective_n"] + 1)))
    with pytest.raises(UnknownPoint):
        dr.get_confidence(s, "nope")


def test_capture_promotion_runs_the_ingest_dream() -> None:
    s = make_store()
    convo = [{"role": "user", "content": "decision: use Kuzu for the store\nstatement: Kuzu is embedded\n"
                                         "nand: 1 -> 2"}]
    resp = capture_session(s, convo, "s1", extractor=MarkerExtractor())
    assert resp["ingest_dream"]["mode"] == "local" and resp["ingest_dream"]["converged"]
    assert resp["ingest_dream"]["budget_used"] == 1
    conf = [s.get_point(p["id"])["confidence"] for p in resp["points"]]
    assert all(c is not None for c in conf)
    assert s.feed(["ConfidenceChanged"])


def test_boundary_claims_get_messages_but_no_flush() -> None:
    s = make_store()
    ids = [adm.create_point(s, "decision", f"chain {i}", status="live", credibility="high")["id"] for i in range(4)]
    for a, b in zip(ids, ids[1:], strict=False):
        adm.create_direct_edge(s, a, b, "IMPL")
    out = dr.run(s, [ids[0]], max_hops=1)
    assert out["affected"] == sorted(ids[:2]) and out["converged"]
    assert s.get_point(ids[2])["confidence"] is None  # boundary: fixed, never flushed
    edge = s.query("MATCH (a:Point {id:$a})-[r:IMPL]->(b:Point {id:$b}) RETURN r.msg_alpha AS m, r.back_msg_alpha AS bm",
                   {"a": ids[1], "b": ids[2]})[0]
    assert edge["m"] is not None and edge["bm"] is not None  # messages to and from the boundary claim stored
    far = s.query("MATCH (a:Point {id:$a})-[r:IMPL]->(b:Point {id:$b}) RETURN r.msg_alpha AS m",
                  {"a": ids[2], "b": ids[3]})[0]
    assert far["m"] is None


def test_unidirectional_direct_edge_back_message_untouched_on_flush() -> None:
    s = make_store()
    p, q = (adm.create_point(s, "decision", f"pair {i}", status="live", credibility="gold")["id"] for i in range(2))
    adm.create_direct_edge(s, p, q, "NAND")  # NAND default direction: unidirectional
    s.set_edge_messages("NAND", p, q, back=(0.5, -0.25))
    dr.run(s, [p])
    row = s.query("MATCH (a:Point {id:$a})-[r:NAND]->(b:Point {id:$b}) RETURN r.direction AS d, r.msg_alpha AS m, "
                  "r.back_msg_alpha AS ba, r.back_msg_beta AS bb", {"a": p, "b": q})[0]
    assert row["d"] == "unidirectional" and row["m"] is not None and (row["ba"], row["bb"]) == (0.5, -0.25)
    assert s.get_point(p)["posterior_alpha"] == 10.0  # the source receives nothing


def test_window_chunks_budget_and_full_budget_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dr, "CHUNK", 2)
    s = make_store()
    pts = [adm.create_point(s, "decision", f"w{i}", status="live", credibility="high")["id"] for i in range(6)]
    lone = adm.create_point(s, "decision", "isolated", status="live", credibility="high")["id"]
    for i in range(0, 6, 2):
        adm.create_operator(s, "IMPL", pts[i], [pts[i + 1]])
    res = dr.dream_window(s, budget=2)
    assert res.budget_used == 2 and res.batches == 2 and res.converged_all
    # every chunk that ran converged: the factor-less window claim is stamped, the claims of the operator cut by
    # the budget are not
    assert s.get_point(lone)["lastDreamedAt"] is not None
    assert s.get_point(pts[4])["lastDreamedAt"] is None and s.get_point(pts[5])["lastDreamedAt"] is None
    counts = s.table_counts()
    with pytest.raises(dr.BudgetExceededError):
        dr.dream(s, mode="full", budget=2, require_calibration=False)
    assert s.table_counts() == counts
    full = dr.dream(s, mode="full", budget=3, require_calibration=False)
    assert full.batches == 3 and full.budget_used == 3 and s.get_point(pts[5])["lastDreamedAt"] is not None
