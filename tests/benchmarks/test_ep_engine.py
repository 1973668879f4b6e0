"""benchmarks.ep_engine at toy sizes: both sections measure, compare bit for bit, and the page renders from JSON."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import ep_engine


def test_sections_levels_and_render(tmp_path: Path) -> None:
    ep = ep_engine.ep_section(100, 0, 1)
    dm = ep_engine.dream_section(120, 1, tmp_path, 1)
    assert ep["bit_identical"] and ep["iterations"][0] == ep["iterations"][1] > 1
    assert dm["same_points"] and dm["same_edges"] and dm["same_feed"] and dm["feed_rows"] > 50
    assert set(ep["breakdown_s"]) >= {"tilted moments", "Jacobi polynomial recurrences"}
    res = {"ep": ep, "dream": dm}
    res["levels"] = ep_engine.levels(res)
    assert [lv["met"] for lv in res["levels"]] == [ep["fused_median_s"] <= 0.5, dm["median"]["after"]["wall_s"] <= 3]
    res["meta"] = {"machine": {"date_utc": "d", "cpu": "c", "affinity_cpus": 2, "cpu_count": 2, "mem_total_gib": 1,
                               "torch_threads": 1, "platform": "p", "python": "3", "versions": {}},
                   "seeds": {"graph": 0}, "quick": True, "wall_s": 1.0}
    out = tmp_path / "out"
    out.mkdir()
    (out / "ep-engine.json").write_text(json.dumps(res), encoding="utf-8")
    ep_engine.main(["--render", "--out", str(out)])
    md = (out / "ep-engine.md").read_text(encoding="utf-8")
    assert f"{ep['fused_median_s']:.3f}" in md and "## Levels" in md and ("met" in md or "missed" in md)
