"""harness.comparisons: per-probe tables to intervals and pairs, with the resampling each kind of run needs
(stratified by conversation, two-level for a sweep's seeds, plain otherwise) and alignment on shared probes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.comparisons import aligned, comparison_report, headline_intervals, resampling_plan
from harness.probes import ProbeRun, infer_kinds, probe_table


def _run(rows, meta=None):
    table = probe_table(rows)
    return ProbeRun(Path("t.probes.parquet"), table, {"kinds": infer_kinds(table), **(meta or {})})


def _ids(cluster, probe, row, **metrics):
    return {"workload": "w", "cluster": cluster, "probe": str(probe), "category": "1", "abstention": False,
            "has_evidence": True, "row": row, "arm": row, **metrics}


def test_resampling_plan_per_kind_of_run():
    plain = _run([_ids("q1", 1, "a", m=1.0)])
    assert resampling_plan(plain) == ("cluster", None)
    assert resampling_plan(_run([_ids("c", 1, "a", m=1.0)], {"stratify": True})) == ("cluster", "fixed")
    sweep = _run([{**_ids("c", 1, "a", m=1.0), "seed": 3}])
    assert resampling_plan(sweep) == ("seed", "random")


def test_sweep_pairs_by_seed_and_probe_with_two_level_resampling():
    rng = np.random.default_rng(0)
    rows = []
    for seed in range(5):
        effect = 0.1 + rng.normal(0, 0.05)
        for p in range(60):
            base = rng.random()
            rows.append({**_ids("world", p, "np", m=float(base + effect > rng.random())), "seed": seed})
            rows.append({**_ids("world", p, "pm", m=float(base > rng.random())), "seed": seed})
    run = _run(rows)
    rep = comparison_report([("np", run, "np"), ("pm", run, "pm")], [("np", "pm")], ["m"])
    (pair,) = rep["pairs"]
    assert rep["n_probes"] == 300 and rep["strata"] == "seed" and "two-level: 5 clusters" in rep["method"]["resampling"]
    assert [c["cluster"] for c in pair["clusters"]] == ["0", "1", "2", "3", "4"] and pair["n"] == 300
    keys, labels, vals = aligned([("np", run, "np"), ("pm", run, "pm")], ["m"], None, "seed")
    assert keys[0] == (0, "world", "0") and labels[:2] == ["0", "0"]
    assert pair["diff"]["estimate"] == pytest.approx(np.mean(vals["m"]["np"] - vals["m"]["pm"]))


def test_two_runs_align_on_shared_keys_only():
    a = _run([_ids("c1", p, "x", m=float(p % 2)) for p in range(6)])
    b = _run([_ids("c1", p, "x", m=1.0) for p in range(2, 9)])
    keys, _, vals = aligned([("1:x", a, "x"), ("2:x", b, "x")], ["m"], None)
    assert keys == [("c1", str(p)) for p in range(2, 6)]
    np.testing.assert_array_equal(vals["m"]["1:x"], [0.0, 1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="share no probe"):
        comparison_report([("1:x", a, "x"), ("2:x", _run([_ids("c9", 0, "x", m=1.0)]), "x")], [], ["m"])


def test_headline_intervals_use_each_metrics_kind():
    rows = [_ids(f"c{p % 3}", p, r, hit=bool((p + i) % 3), score=(p * (i + 1)) % 7 / 7)
            for p in range(60) for i, r in enumerate(("a", "b"))]
    run = _run(rows, {"stratify": True})
    got = headline_intervals(run, ["a", "b"], ["hit", "score"])
    assert got["hit"]["a"]["method"] == "wilson" and got["score"]["a"]["method"] in ("bca", "percentile")
    for metric in got.values():
        for iv in metric.values():
            assert iv["lo"] <= iv["estimate"] <= iv["hi"]
