"""``memsim bench selectors|cbr-loop|cost --quick`` each write json/md/png with the rows their pages need (their
speed is measured by the benchmarks, not asserted here)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from harness.cli.main import app

runner = CliRunner()


def _run(args: list[str], out) -> tuple[dict, str]:
    res = runner.invoke(app, ["bench", *args, "--quick", "--no-progress", "--out", str(out)])
    assert res.exit_code == 0, res.output
    name = args[0]
    for ext in ("json", "md", "png"):
        assert (out / f"{name}.{ext}").stat().st_size > 0
        assert f"{name}.{ext}" in res.output  # every output path is printed
    payload = json.loads((out / f"{name}.json").read_text(encoding="utf-8"))
    meta = payload["meta"]
    assert meta["quick"] is True and meta["seeds"] and meta["machine"]["versions"]["numpy"]
    return payload, (out / f"{name}.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_bench_selectors_quick(tmp_path) -> None:
    payload, md = _run(["selectors"], tmp_path)
    rows = {r["selector"]: r for r in payload["rows"]}
    # the oracle is an upper bound and random a floor, on every ranking metric
    for m in ("R@8", "nDCG@10", "MRR"):
        assert rows["oracle (hidden truth)"][m] >= max(r[m] for r in payload["rows"]) - 1e-12
        assert rows["NP mean-pooling"][m] > rows["random"][m]
    assert rows["NP faithful (pooler)"]["faithful_check_identical_top8"] == \
        rows["NP faithful (pooler)"]["faithful_check_queries"]
    assert "| selector |" in md


@pytest.mark.slow
def test_bench_cost_quick(tmp_path) -> None:
    payload, md = _run(["cost"], tmp_path)
    rows = payload["np"]["rows"]
    measured = [r for r in rows if r["np_faithful_measured"]]
    assert measured and all(r["np_cached_ms"] < r["np_faithful_ms"] for r in measured)
    assert payload["pm"]["max_abs_score_diff"] <= 1e-5
    assert any("faster than NP faithful" in r["text"] for r in payload["ratios"])
    assert "### Ratios measured in this run" in md


@pytest.mark.slow
def test_bench_cbr_loop_quick(tmp_path) -> None:
    payload, md = _run(["cbr-loop"], tmp_path)
    arms = {(a["arm"], a["k"]) for a in payload["arms"]}
    assert {("none", 8), ("np", 8), ("pm", 8), ("oracle", 8)} <= arms
    assert {k for a, k in arms if a == "np"} == {1, 2, 4, 8, 16}
    for a in payload["arms"]:
        assert all(r["questions"] == payload["meta"]["per_round"] for r in a["rounds"])
        if a["arm"] == "none":  # the no-memory arm never delivers an example
            assert all(r["share_with_positive_example"] == 0 for r in a["rounds"])
    assert "scripted policy" in md
