"""The design part of ``longmemeval-scale``: the turn keys equal the arms' view of a question, the reuse profile,
the non-negative fit recovers a known cost, the projections and the level follow from the runs, and one real run
is recorded per question."""

from __future__ import annotations

import json

import pytest

from benchmarks import longmemeval_scale_designs as D
from benchmarks.worlds import longmemeval as gen


def test_question_keys_are_the_arms_turns(tmp_path):
    """One key per turn, equal for two turns exactly when ``to_conversation`` gives them the same id, role and
    text (a repeated session id's second occurrence is another turn; the first turn carries its session date)."""
    from harness.workloads.lme_workload import to_conversation
    from harness.workloads.longmemeval import iter_questions

    data = tmp_path / "q.json"
    gen.write_file(data, 4, seed=7, sessions=9)
    for raw, q in zip(gen.generate(4, seed=7, sessions=9), iter_questions(data), strict=True):
        conv = to_conversation(q)
        turns = conv.turns()
        keys = D.question_keys(raw)
        assert len(keys) == len(turns) == q.n_turns
        seen: dict[tuple[str, str, str], bytes] = {}
        for k, t in zip(keys, turns, strict=True):
            assert seen.setdefault((t.dia_id, t.role, t.text), k) == k
        assert len(set(keys)) == len(set(seen))


def test_reuse_profile_counts_turns_new_to_the_history():
    qs = list(gen.generate(30, seed=2, sessions=12))
    prof = D.reuse_profile(qs)
    assert [t for t, _ in prof] == [len(D.question_keys(q)) for q in qs]
    assert prof[0][0] == prof[0][1]  # the first question: every turn is new
    assert all(0 <= n <= t for t, n in prof)
    assert sum(n for _, n in prof) < sum(t for t, _ in prof)  # filler recurs across questions
    seen: set[bytes] = set()
    D.reuse_profile(qs, seen)
    assert D.reuse_profile(qs, seen) == [(t, 0) for t, _ in prof]  # a warm history: nothing new


def _run(mode, sessions, pts, workers=1, setup=10.0, loading=0.0):
    qs = [{"index": i, "turns": t, "new_turns": n, "wall_s": w, "question_wall_s": w, "encoded": n,
           "first_of_process": i == 0, "arm_ingest_ms": {}} for i, (t, n, w) in enumerate(pts)]
    return {"label": f"{mode}-{sessions}-w{workers}", "mode": mode, "sessions": sessions, "workers": workers,
            "questions": qs, "setup_s": setup, "loading_s": loading, "run_wall_s": 0.0, "question_loop_s": 0.0, "encoder_cache": {},
            "n_questions": len(qs), "turns_per_question": sum(t for t, _, _ in pts) / len(pts)}


def test_the_fit_recovers_a_known_cost_and_the_projection_follows_it():
    """Walls made by a known rule (store: 1 + 0.01 t + 1e-5 t^2 + 0.05 new; per-call: 2 + 0.08 t) at three sizes:
    the fits give the rule back, the projection is the rule summed over the generator's questions, and two workers
    divide the per-question part by the measured speed-up."""
    def store_wall(t, n):
        return 1 + 0.01 * t + 1e-5 * t * t + 0.05 * n

    runs = []
    for s, base in ((8, 80), (16, 160), (32, 320)):
        ts = [base + k for k in range(6)]
        runs.append(_run("store-cold", s, [(t, t, store_wall(t, t)) for t in ts], loading=7.0))
        runs.append(_run("store-warm", s, [(t, 0, store_wall(t, 0)) for t in ts]))
        runs.append(_run("per-call", s, [(t, t, 2 + 0.08 * t) for t in ts]))
    alone = next(r for r in runs if r["mode"] == "store-cold" and r["sessions"] == 16)
    two = _run("store-cold", 16, [(q["turns"], q["new_turns"], q["wall_s"] * 1.25) for q in alone["questions"]],
               workers=2)
    runs.append(two)
    got = D.summarize(runs, {}, seed=0, quick=True, shapes={"S": 12, "M": 20}, profile_questions=4, middle=16)
    c = got["fits"]["store"]["coef"]
    assert c["1"] == pytest.approx(1, abs=1e-6) and c["turns"] == pytest.approx(0.01, rel=1e-6)
    assert c["turns^2"] == pytest.approx(1e-5, rel=1e-4) and c["new_turns"] == pytest.approx(0.05, rel=1e-6)
    assert got["fits"]["per-call"]["coef"] == pytest.approx({"1": 2, "turns": 0.08, "turns^2": 0}, abs=1e-6)
    assert got["speedup_two_workers"]["store"] == pytest.approx(2 / 1.25)
    assert got["speedup_two_workers"]["per-call"] is None  # no two-worker per-call run
    prof = D.generated_profile(4, sessions=12, seed=0)
    p = got["projection"]["store"]["S"]
    per = sum(store_wall(t, n) for t, n in prof) * 500 / 4
    assert p["questions_s"] == pytest.approx(per)
    # the largest size's setup scaled by questions, its model loading once
    assert p["setup_s"] == pytest.approx(10.0 * 500 / 6 + 7.0)
    assert p["one_worker_s"] == pytest.approx(p["setup_s"] + per)
    assert p["two_workers_s"] == pytest.approx(p["setup_s"] + per / (2 / 1.25))
    assert got["level"]["measured_s"] == p["two_workers_s"]
    assert got["level"]["met"] == (p["two_workers_s"] <= D.LEVEL_DESIGN_S)
    assert all(abs(r["gap"]) < 1e-6 for r in got["residuals"]["store"])
    md = "\n".join(D.render_section(got, {"reuse": 0.6, "pool_size": 2000}))
    assert "not on the real S or M" in md and "reuse 0.6 from a pool of 2000" in md
    assert ("**met**" if got["level"]["met"] else "**missed**") in md


def test_a_superlinear_cost_is_kept_by_the_three_sizes():
    """Walls that grow with the square of the turns: the quadratic fit projects M far above the linear one."""
    runs = [_run("per-call", s, [(t, t, 1e-4 * t * t) for t in (base, base + 3, base + 6)])
            for s, base in ((8, 80), (16, 160), (32, 320))]
    got = D.summarize(runs, {}, seed=0, quick=True, shapes={"S": 10, "M": 60}, profile_questions=2, middle=16)
    quad = got["projection"]["per-call"]["M"]["one_worker_s"]
    assert quad > 1.2 * got["projection_linear_one_worker_s"]["per-call"]["M"]


def test_one_run_is_recorded_per_question(tmp_path):
    data = tmp_path / "d.json"
    gen.write_file(data, 3, seed=4, sessions=8)
    prof = D.reuse_profile(gen.generate(3, seed=4, sessions=8))
    got = D.run_once(tmp_path, data, label="t", n=3, seed=0, quick=True, arms="full,bm25", embed="per-call",
                     store=None, workers=1, new_turns=[n for _, n in prof])
    qs = got["questions"]
    assert [q["index"] for q in qs] == [0, 1, 2] and [q["turns"] for q in qs] == [t for t, _ in prof]
    assert [q["first_of_process"] for q in qs] == [True, False, False]
    assert all(q["wall_s"] >= q["question_wall_s"] > 0 for q in qs)
    assert set(qs[0]["arm_ingest_ms"]) == {"full", "bm25"}
    assert got["loading_s"] == pytest.approx(max(0.0, qs[0]["wall_s"] - (qs[1]["wall_s"] + qs[2]["wall_s"]) / 2))
    assert not (tmp_path / "run-t").exists()
    json.dumps(got)


def test_results_of_the_earlier_design_part_still_render():
    """A results file written by the earlier design part (two sizes, ``points``) renders a note instead of the new
    tables, and the figure's design panels stay empty: the committed page can be rebuilt before it is re-measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    earlier = {"status": "ok", "quick": False, "points": [], "wall_fit": {}, "turn_ratio": 4.0}
    md = "\n".join(D.render_section(earlier, {"reuse": 0.6, "pool_size": 2000}))
    assert "earlier version of the design part" in md and "| setting" not in md
    fig, ax = plt.subplots(1, 2)
    D.plot_level(ax[0], earlier)
    assert D.plot(ax[1], earlier) == [] and not ax[0].patches
    plt.close(fig)
