"""benchmarks.stats_speed: it times the headline intervals and pairs of a 584 x 21 table, prints the time and
states the level on its page (no test asserts the level: timings of a shared machine vary)."""

from __future__ import annotations

import json

from benchmarks import stats_speed


def test_speed_benchmark_writes_and_prints(tmp_path, capsys):
    stats_speed.main(["--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert out.startswith("intervals ") and " s, pairs " in out and "wrote " in out
    r = json.loads((tmp_path / "stats-speed.json").read_text())["result"]
    assert (r["rows"], r["probes"], r["clusters"]) == (21, 584, 4)
    assert r["intervals"] == 21 * len(stats_speed.HEADLINE_METRICS)
    assert r["family"] == len(stats_speed.headline_pairs()) * len(stats_speed.FAMILY_METRICS)
    assert r["permutations"] + 1 >= 20 * r["family"] / 0.05
    page = (tmp_path / "stats-speed.md").read_text()
    assert "paired comparisons" in page
    data = json.loads((tmp_path / "stats-speed.json").read_text())
    assert data["level_s"] == stats_speed.LEVEL_S and data["meets_level"] == (r["total_s"] <= data["level_s"])
    assert f"within {stats_speed.LEVEL_S:g} s: {'met' if data['meets_level'] else 'NOT met'}" in page
