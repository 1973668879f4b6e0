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
    res["meta"] = {"machine": {"date_utc": "d", "cpu": "c", "affinity_cpus": 2, "cpu_count": 2, "mem_total_gib": 1,
                               "torch_threads": 1, "platform": "p", "python": "3", "versions": {}},
                   "seeds": {"graph": 1}, "quick": True, "wall_s": 1.0}
    out = tmp_path / "out"
    out.mkdir()
    (out / "ep-engine.json").write_text(json.dumps(res), encoding="utf-8")
    # the second-dream section measured on its own and merged into those results (four child processes)
    ep_engine.main(["--second-dream-only", "--out", str(out)])
    res = json.loads((out / "ep-engine.json").read_text(encoding="utf-8"))
    sd = res["second_dream"]
    assert sd["factors"] == 120 and sd["meta"]["seeds"] == {"graph": 1}
    assert all(r["completed"] for r in sd["runs"].values())  # too small a store for Kuzu's failure
    assert sd["same_as_reference"] == {"old": True, "default": True, "old_then_default": True}
    expected = [ep["fused_median_s"] <= 0.5 and ep["bit_identical"],
                dm["median"]["after"]["wall_s"] <= 3 and dm["same_points"] and dm["same_edges"] and dm["same_feed"],
                True]
    assert [lv["met"] for lv in res["levels"]] == expected
    ep_engine.main(["--render", "--out", str(out)])
    md = (out / "ep-engine.md").read_text(encoding="utf-8")
    assert md == ep_engine.render(res).rstrip() + "\n"
    assert f"{ep['fused_median_s']:.3f}" in md
    assert ('`dream(ep_engine="batched", store_io="unwind", scope="graph", edge_write="update")`), after = the new '
            'default (`run_ep(engine="fused")`; `dream(ep_engine="fused", store_io="bulk", scope="component", '
            'edge_write="rewrite")` in this run)') in md
    # the Levels table: one row per level of the payload, in order, each with the verdict its payload computed
    section = md.split("## Levels\n", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith("| level |")]
    assert [r.split(" | ")[0].removeprefix("| ") for r in rows] == [lv["level"] for lv in res["levels"]]
    assert [r.rsplit(" | ", 1)[1].removesuffix(" |") for r in rows] == [
        "met" if lv["met"] else "missed" for lv in res["levels"]]
    assert "## Two dreams in a row, a CHECKPOINT between (120 factors)\n\nMeasured in a run of its own" in md
    assert "| default edge write (delete + create) both times | rewrite + rewrite | checkpoint | completed |" in md


def test_stacked_dsterf_equals_one_call_per_matrix_bitwise() -> None:
    """The stacked path returns the per-matrix bits on Jacobi-like matrices, on matrices with an eigenvalue near 0
    (a band check must send the call to the per-matrix path), zeros, a non-finite row and out-of-range rows."""
    import numpy as np

    from tortoise_sim.ep_batched import tridiagonal_eigvals

    rng = np.random.default_rng(5)
    m, n = 400, 8
    diag = rng.uniform(-0.6, 0.6, (m, n))
    off = rng.uniform(0.05, 0.6, (m, n - 1))
    diag[10] = 0.0
    off[10] = 0.5  # symmetric spectrum with paired +-x: fine; and the odd 3 x 3 below has an exact zero
    diag[11, :] = [0.0, 1e-9, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    diag[12] *= 1e-120
    off[13] *= 40.0  # Gershgorin bound >= 1.99: per-matrix path
    diag[14, 3] = np.nan
    expected = tridiagonal_eigvals(diag, off)
    got = ep_engine.stacked_dsterf(diag, off)
    assert np.array_equal(got, expected, equal_nan=True)
    odd = rng.uniform(-0.5, 0.5, (50, 3))
    odd[::2] = 0.0  # 3 x 3 with zero diagonal: one eigenvalue exactly 0
    odd_off = rng.uniform(0.1, 0.5, (50, 2))
    assert np.array_equal(ep_engine.stacked_dsterf(odd, odd_off, 7), tridiagonal_eigvals(odd, odd_off))


def test_eig_section_counts_and_compares() -> None:
    eig = ep_engine.eig_section(100, 0, 1)
    assert eig["bit_identical"] and eig["matrices"] >= eig["distinct_alpha_beta"] > 0 and eig["calls"] > 1
