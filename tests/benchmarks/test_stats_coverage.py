"""benchmarks.stats_coverage: a small run of the coverage checks (the full 2,000-run page is the benchmark), proof
that the check fails an interval that is too narrow, and the tie-heavy 30-probe paired difference at enough runs to
tell 93.5% from 95%."""

from __future__ import annotations

import json

import pytest

from benchmarks import stats_coverage as sc


def _scenario(name):
    return next(s for s in sc.scenarios() if s.name == name)


def test_intervals_cover_and_the_test_keeps_its_level():
    cov = sc.evaluate(_scenario("evidence recall, LongMemEval slice"), 400, seed=1)
    assert 0.92 <= cov["rate"] <= 0.98 and cov["methods"].get("bca", 0) > 300
    wil = sc.evaluate(_scenario("all-evidence (0/1), LoCoMo headline"), 400, seed=2)
    assert 0.92 <= wil["rate"] <= 0.98 and set(wil["methods"]) == {"wilson"}
    null = sc.evaluate(_scenario("recall, null, LongMemEval slice"), 400, seed=3)
    assert null["rate"] <= 0.08
    hl = sc.evaluate(_scenario("latency shift, 10 runs per cell"), 400, seed=4)
    assert hl["rate"] >= 0.92


def test_a_too_narrow_interval_fails_the_check(monkeypatch):
    real = sc.bootstrap_intervals
    monkeypatch.setattr(sc, "bootstrap_intervals", lambda x, rs, **kw: real(x, rs, confidence=0.8, **kw))
    got = sc.evaluate(_scenario("evidence recall, LongMemEval slice"), 400, seed=1)
    assert got["outcome"] == "FAIL" and not got["passes"]


def test_quick_page_is_rendered_from_its_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sc, "QUICK_RUNS", 20)
    paths = sc.main(["--out", str(tmp_path), "--quick"])
    assert sorted(p.name for p in paths) == ["stats-coverage.json", "stats-coverage.md"]
    data = json.loads((tmp_path / "stats-coverage.json").read_text())
    assert data["runs"] == 20 and len(data["results"]) == len(sc.scenarios())
    assert data["run"]["commit"] is None or len(data["run"]["commit"]) == 40
    page = (tmp_path / "stats-coverage.md").read_text()
    for r in data["results"]:
        assert r["scenario"] in page and r["outcome"] in ("pass", "conservative", "FAIL")
    assert "wrote " in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging folder left


@pytest.mark.parametrize("name", ["hit at 5 (0/1), LongMemEval slice"])
def test_exact_binomial_coverage_is_reported(name):
    exact = sc.exact_coverage(_scenario(name))
    assert exact is not None and 0.94 < exact < 0.98


def test_a_bound_equal_to_the_truth_up_to_rounding_holds_it():
    truth = 0.8 - 0.7  # 0.10000000000000009
    assert sc.covers(0.0, 3 / 30, truth) and not sc.covers(0.0, 0.0999, truth)
    assert not sc.covers(None, 1.0, truth)


@pytest.mark.slow
def test_paired_difference_covers_when_most_differences_are_ties():
    """30 probes, most paired differences 0: the interval must cover 95% - 2 SE of 6,000 runs (94.44%). The
    expanded percentile interval alone covers about 93.5-94% here (below on every seed tried), the chosen one
    about 95.5%."""
    got = sc.evaluate(_scenario("recall difference, mostly ties, LongMemEval slice"), 6000, seed=2,
                      alternatives=False)
    assert got["rate"] >= 0.95 - 2 * got["se"], got["rate"]
    assert set(got["methods"]) <= {"expanded-percentile-t", "constant-bound"}


def test_paired_scenarios_score_each_method_alone_and_the_page_shows_them(tmp_path):
    got = sc.evaluate(_scenario("recall difference, nearly all ties, LongMemEval slice"), 250, seed=0)
    assert set(got["alternatives"]) == set(sc.ALTERNATIVES)
    assert all(a["width"] <= got["width"] + 1e-12 for k, a in got["alternatives"].items() if k != "bca")
    page = sc.paired_table({"results": [got]})
    assert "expanded percentile alone" in page and f"{got['width']:.3f}" in page
