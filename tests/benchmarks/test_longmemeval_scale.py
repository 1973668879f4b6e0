"""The LongMemEval scale benchmark in its quick form, with tiny sizes (seconds): what it measures and writes."""

from __future__ import annotations

import json

import pytest

from benchmarks import longmemeval_scale as S
from benchmarks import longmemeval_scale_designs as D
from harness.faults import FaultInjected, FaultPlan


def test_unknown_part_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="unknown part"):
        S.run(tmp_path / "o", quick=True, parts=["protocl"])
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("given, message", [
    ({"parts": []}, "--parts selects nothing"),
    ({"protocol_questions": 0}, "--protocol-questions must be at least 1, got 0"),
    ({"design_questions": 0}, "--design-questions must be at least 1, got 0"),
    ({"loader_bytes": 0}, "--loader-bytes must be at least 1, got 0"),
    ({"design_sessions": (4, 16, 32)}, "at least 8 sessions per question"),
    ({"design_sessions": (8, 16)}, "three different haystack sizes"),
    ({"design_sessions": (8, 16, 16)}, "three different haystack sizes"),
    ({"design_questions": 1}, "--design-questions must be at least 2"),
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


@pytest.mark.slow
def test_designs_part_before_and_after_at_three_sizes(tmp_path):
    """The design part end to end on tiny settings: each size runs per-call, a cold store and a warm one; the page
    and figure are rendered from the JSON alone."""
    out = tmp_path / "out"
    S.run(out, quick=True, seed=0, parts=["designs"], design_questions=2, design_sessions=(8, 9, 10),
          profile_questions=2, arms="full,mean", tmp_dir=tmp_path, two_workers=False)
    payload = json.loads((out / "longmemeval-scale.json").read_text())
    d = payload["designs"]
    assert d["status"] == "ok" and payload["levels"]["design_s_two_workers"] == 4 * 3600
    assert [(r["sessions"], r["mode"]) for r in d["runs"]] == [(s, m) for s in (8, 9, 10) for m in D.MODES]
    warm = [q for r in d["runs"] if r["mode"] == "store-warm" for q in r["questions"]]
    cold = [q for r in d["runs"] if r["mode"] == "store-cold" for q in r["questions"]]
    assert all(q["encoded"] == 0 and q["new_turns"] == 0 for q in warm)  # a second run on the store encodes nothing
    assert all(q["encoded"] > 0 for q in cold) and all(q["new_turns"] > 0 for q in cold)
    assert set(d["projection"]) == {"store", "per-call"} and set(d["projection"]["store"]) == {"S", "M"}
    assert d["encode_floor"]["minilm-mean"]["floor_texts"] > 0
    md = (out / "longmemeval-scale.md").read_text()
    assert S.render_markdown(payload).rstrip() == md.rstrip()
    assert "## Design run cost: before and after the embedding store" in md
    assert (out / "longmemeval-scale.png").stat().st_size > 0


def test_interrupted_write_leaves_no_json(tmp_path):
    payload = {"benchmark": S.NAME, "data": "data: synthetic, benchmarks.worlds.longmemeval seed 0",
               "generator": {"reuse": 0.6, "pool_size": 2000},
               "meta": {"quick": True, "wall_s": 1.0, "seeds": {"seed": 0}, "machine": {}}}
    with pytest.raises(FaultInjected):
        S.write_outputs(tmp_path, payload, FaultPlan({"longmemeval_scale.json": 1}))
    assert not (tmp_path / "longmemeval-scale.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
