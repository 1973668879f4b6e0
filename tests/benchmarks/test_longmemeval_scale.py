"""The LongMemEval scale benchmark in its quick form, with tiny sizes (seconds): what it measures and writes."""

from __future__ import annotations

import json

import pytest

from benchmarks import longmemeval_scale as S
from harness.faults import FaultInjected, FaultPlan


def test_fit_through_two_points_by_hand():
    # (10, 5) and (30, 9): slope 4/20 = 0.2, intercept 5 - 2 = 3
    icpt, slope = S._fit(10, 5, 30, 9)
    assert slope == pytest.approx(0.2) and icpt == pytest.approx(3.0)


def test_unknown_part_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="unknown part"):
        S.run(tmp_path / "o", quick=True, parts=["protocl"])
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("given, message", [
    ({"parts": []}, "--parts selects nothing"),
    ({"protocol_questions": 0}, "--protocol-questions must be at least 1, got 0"),
    ({"design_questions": 0}, "--design-questions must be at least 1, got 0"),
    ({"loader_bytes": 0}, "--loader-bytes must be at least 1, got 0"),
    ({"design_sessions": (4, 16)}, "at least 8 sessions per question"),
])
def test_a_selection_of_nothing_is_refused_before_any_work(tmp_path, given, message):
    with pytest.raises(ValueError, match=message):
        S.run(tmp_path / "o", quick=True, tmp_dir=tmp_path, **{"parts": ["protocol"], **given})
    assert list(tmp_path.iterdir()) == []  # no output folder, no temp folder


def test_a_selection_of_nothing_is_a_usage_error_on_the_command_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        S.main(["--parts", "", "--out", str(tmp_path / "o")])
    assert exc.value.code == 2 and "--parts selects nothing" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def _designs(turn_ratio, wall_ratio, intercept=0.0):
    return {"turn_ratio": turn_ratio, "wall_fit": {"measured_ratio": wall_ratio, "intercept": intercept}}


def test_the_ratio_sentence_compares_with_a_stated_tolerance():
    within = S.ratio_sentence(_designs(4.00, 4.10))
    assert within.startswith("Turn ratio 4.00, measured wall ratio 4.10: within 5% of each other")
    below = S.ratio_sentence(_designs(4.24, 3.00, intercept=1.5))
    assert "the wall ratio is 29% below the turn ratio (more than 5%)" in below and "fixed" in below
    assert "1.50 s" in below
    above = S.ratio_sentence(_designs(4.00, 4.24))
    assert "the wall ratio is 6% above the turn ratio (more than 5%)" in above
    assert all("equal ratios" not in x for x in (within, below, above))


def test_the_docs_page_command_is_one_code_span():
    """The page's "Re-measure with" line puts the command in one code span: no backtick inside it."""
    from benchmarks.docs_pages import PAGES

    (page,) = [p for p in PAGES if p.slug == "longmemeval-scale"]
    assert "`" not in page.command and page.command.startswith("python -m benchmarks.longmemeval_scale ")


def test_loader_part_streams_and_cleans(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    got = S.measure_loader(work, target_bytes=3_000_000, seed=1, sessions=16)
    assert got["status"] == "ok"
    assert got["questions"] == got["expected_questions"] and got["turns"] == got["expected_turns"]
    assert 0.7 * 3_000_000 < got["file_bytes"] < 1.3 * 3_000_000  # sized from the first questions' mean
    assert got["peak_rss_bytes"] >= got["baseline_rss_bytes"] > 0
    assert got["within_level"] == (got["peak_rss_bytes"] < S.LEVEL_LOADER_BYTES)
    assert list(work.iterdir()) == []  # the generated file and its sidecar are deleted


def test_quick_run_writes_results_from_measurements(tmp_path):
    out = tmp_path / "out"
    paths = S.run(out, quick=True, seed=2, parts=["protocol", "loader"], protocol_questions=3,
                  loader_bytes=2_000_000, retrievers=("bm25",), tmp_dir=tmp_path, protocol_target=12)
    assert sorted(p.name for p in paths) == sorted(f"longmemeval-scale.{e}" for e in ("json", "md", "png"))
    payload = json.loads((out / "longmemeval-scale.json").read_text())
    p = payload["protocol"]
    assert p["status"] == "ok" and p["questions"] == 3 and p["projected"]
    assert p["wall_s_for_target"] == pytest.approx(p["wall_s"] * 12 / 3)
    assert p["within_level"] == (p["wall_s_for_target"] <= 1200)
    # more questions, more distinct texts, but fewer than proportionally once pool sessions recur
    assert p["distinct_texts"] < p["distinct_texts_target"] <= p["distinct_texts"] * 12 / 3
    assert {r["granularity"] for r in p["rows_paper_averaging"]} == {"session", "turn"}
    assert payload["data"] == "data: synthetic, benchmarks.worlds.longmemeval seed 2"
    md = (out / "longmemeval-scale.md").read_text()
    assert payload["data"] in md and "projected from 3 questions" in md
    assert S.render_markdown(payload).rstrip() == md.rstrip()  # the page is rendered from the JSON alone
    assert [x.name for x in tmp_path.iterdir() if x.name.startswith("memsim-lme-scale-")] == []


def test_designs_part_two_sizes(tmp_path):
    got = S.measure_designs(tmp_path, n_questions=1, sessions=(8, 14), seed=0, quick=True, arms="full,bm25")
    assert got["status"] == "ok"
    a, b = got["points"]
    assert b["turns_per_question"] > a["turns_per_question"]
    assert got["turn_ratio"] == pytest.approx(b["turns_per_question"] / a["turns_per_question"])
    f = got["wall_fit"]
    # the fitted line goes through both measured points
    assert f["intercept"] + f["per_turn"] * a["turns_per_question"] == pytest.approx(a["question_wall_s"])
    assert f["intercept"] + f["per_turn"] * b["turns_per_question"] == pytest.approx(b["question_wall_s"])
    assert got["projection_s"]["S"] == pytest.approx(500 * f["per_question_S"])
    assert got["turns_per_question"]["M"] > got["turns_per_question"]["S"]
    assert set(got["arm_ingest_fit"]) >= {"full", "bm25"}


def test_interrupted_write_leaves_no_json(tmp_path):
    payload = {"benchmark": S.NAME, "data": "data: synthetic, benchmarks.worlds.longmemeval seed 0",
               "generator": {"reuse": 0.6, "pool_size": 2000},
               "meta": {"quick": True, "wall_s": 1.0, "seeds": {"seed": 0}, "machine": {}}}
    with pytest.raises(FaultInjected):
        S.write_outputs(tmp_path, payload, FaultPlan({"longmemeval_scale.json": 1}))
    assert not (tmp_path / "longmemeval-scale.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
