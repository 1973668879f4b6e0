"""``memsim bench sweep``: config validation, the statistics, and local vs Ray executors cell by cell."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks import sweep
from harness.cli.main import app
from tests.numbers import assert_same_numbers

runner = CliRunner()

TINY = """\
name: tiny
benchmark: {bench}
seeds: [3, 4]
sizes: [{size}]
configs: {configs}
metric: "{metric}"
compare: {compare}
workers: 2
"""


def _tiny(path: Path, **fields: str) -> Path:
    """Write a two-seed, two-worker sweep config (``TINY`` filled with ``fields``) to ``path``."""
    path.write_text(TINY.format(**fields), encoding="utf-8")
    return path


def _tiny_selectors(tmp: Path) -> Path:
    return _tiny(tmp / "sel.yaml", bench="selectors", size="{n_cases: 60, n_queries: 6}",
                 configs="[{selectors: [oracle, bm25, recency, random]}]", metric="P@8",
                 compare='[["BM25 (bm25s)", "random"]]')


def _tiny_cbr(tmp: Path) -> Path:
    return _tiny(tmp / "cbr.yaml", bench="cbr-loop", size="{rounds: 2, per_round: 4}",
                 configs="[{arm: none, k: 8}, {arm: oracle, k: 2}]", metric="mean_accuracy",
                 compare='[["oracle K=2", "no memory K=8"]]')


def test_config_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    for text, needle in [("name: x\nbenchmark: nope\nseeds: 2\nconfigs: [{}]\nmetric: m\n", "benchmark"),
                         ("name: x\nbenchmark: cbr-loop\nseeds: [1, 1]\nconfigs: [{}]\nmetric: m\n", "distinct"),
                         ("name: x\nbenchmark: cbr-loop\nseeds: 2\nconfigs: [{}]\nmetric: m\nextra: 1\n", "extra"),
                         ("name: x\nbenchmark: selectors\nseeds: 2\nconfigs: [{selectors: [bm26]}]\nmetric: m\n",
                          "bm26"),
                         ("[unclosed", "not valid YAML")]:
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=needle) as exc:
            sweep.load_config(bad)
        assert str(bad) in str(exc.value)
    res = runner.invoke(app, ["bench", "sweep", str(bad), "--no-progress"])
    assert res.exit_code == 1 and res.stderr.startswith("error:") and str(bad) in res.stderr
    res = runner.invoke(app, ["bench", "sweep", str(bad), "--address", "auto"])
    assert res.exit_code == 2 and "--executor ray" in res.stderr  # a usage error, before the file is read


def _synthetic_results(cfg: sweep.SweepConfig, gaps: list[tuple[float, float]], n_probes: int = 20) -> list[dict]:
    """Cells of rows a and b over ``n_probes`` probes per seed: a = the seed's base (+ probe noise), b = a + gap."""
    import numpy as np

    out = []
    for s, (base, gap) in zip(cfg.seeds, gaps, strict=True):
        rng = np.random.default_rng(s)
        a = np.clip(base + rng.normal(0, 0.05, n_probes), 0, 1)
        probes = [{"workload": "t", "cluster": "", "probe": str(j), "category": "x", "abstention": False,
                   "has_evidence": True, "seed": s, "row": row, "arm": row, "m": float(v)}
                  for row, vals in (("a", a), ("b", a + gap)) for j, v in enumerate(vals)]
        out.append({"cell": {"benchmark": "cbr-loop", "seed": s, "config": {}, "size": {}},
                    "rows": [{"name": "a", "m": float(a.mean())}, {"name": "b", "m": float((a + gap).mean())}],
                    "row_ids": {"a": "a", "b": "b"}, "probes": probes, "seconds": 0.0})
    return out


def test_aggregate_pairs_by_seed_and_probe(tmp_path: Path) -> None:
    from benchmarks import sweep_stats

    cfg = sweep.SweepConfig(name="t", benchmark="cbr-loop", seeds=[0, 1, 2], configs=[{}], metric="m",
                            compare=[("b", "a")])
    # b is a + 0.1 on every probe of every seed, though the seeds themselves vary a lot: the paired test finds it
    res = _synthetic_results(cfg, [(0.1, 0.09), (0.5, 0.1), (0.85, 0.11)])
    probes, trec = sweep_stats.write_outputs(tmp_path, "sweep-t", cfg, res)
    assert trec == []  # no ranked rows
    payload = {"config": cfg.model_dump(), "cells": sweep_stats.json_cells(res)}
    sweep_stats.apply_table(payload, probes)
    (size,) = payload["aggregate"]["sizes"]
    rows = {r["name"]: r for r in size["rows"]}
    assert rows["a"]["stats"]["m"]["mean"] == pytest.approx(sum(c["rows"][0]["m"] for c in res) / 3)
    d = size["differences"]["pairs"][0]
    assert d["diff"]["estimate"] == pytest.approx(0.1, abs=0.01) and d["p_holm"] < 0.05 and d["verdict"] == "b > a"
    assert d["clusters_agree"] == 3 and len(d["clusters"]) == 3  # every seed agrees in sign
    assert d["n"] == 60  # paired by (seed, probe), not by seed alone
    st = rows["a"]["stats"]["m"]
    assert st["hi"] - st["lo"] > 0.3  # the two-level interval carries the spread between seeds
    assert d["diff"]["hi"] - d["diff"]["lo"] < 0.05  # the paired difference does not


def test_cbr_question_probes_give_the_arm_numbers() -> None:
    from benchmarks import cbr_loop, cbr_probes

    arm = {"arm": "np", "rounds": [{"round": 1, "accuracy": 0.5, "share_with_positive_example": 0.5},
                                   {"round": 2, "accuracy": 1.0, "share_with_positive_example": 0.0}],
           "questions": [{"round": 1, "index": 0, "correct": True, "copied_positive": 1, "copied_right_plan": 1},
                         {"round": 1, "index": 1, "correct": False, "copied_positive": 0, "copied_right_plan": 0},
                         {"round": 2, "index": 0, "correct": True, "copied_positive": 0, "copied_right_plan": 0},
                         {"round": 2, "index": 1, "correct": True, "copied_positive": 0, "copied_right_plan": 0}]}
    rows = cbr_probes.question_probes(arm, "np@8", 2)
    assert [r["probe"] for r in rows] == ["r1.0", "r1.1", "r2.0", "r2.1"]
    mean = {m: sum(float(r[m]) for r in rows if r[m] is not None) / sum(r[m] is not None for r in rows)
            for m in ("mean_accuracy", "final_accuracy", "round_1", "share_with_positive_example")}
    assert mean == {"mean_accuracy": cbr_loop._mean_acc(arm), "final_accuracy": 1.0, "round_1": 0.5,
                    "share_with_positive_example": 0.25}


def _cells(payload: dict) -> list[tuple[str, list]]:
    return [(json.dumps(c["cell"], sort_keys=True), c["rows"]) for c in payload["cells"]]


@pytest.mark.slow  # starts a 2-CPU Ray cluster and a 2-process pool: 20-50 s on a busy 2-core machine
def test_local_and_ray_executors_agree_cell_by_cell(tmp_path: Path) -> None:
    import ray  # noqa: F401 - in the test extras: a broken install fails here, never skips

    sel = _tiny_selectors(tmp_path)  # with the MiniLM mean-pooling encoder and RRF, so the model path is covered
    sel.write_text(sel.read_text(encoding="utf-8").replace("[oracle, bm25, recency, random]",
                                                           "[oracle, np_mean, bm25, rrf, recency, random]"),
                   encoding="utf-8")
    cfgs = [sel, _tiny_cbr(tmp_path)]
    todo = [c for p in cfgs for c in sweep.cells(sweep.load_config(p))]
    local = sweep.run_local(todo, workers=2)
    ray_res = sweep.run_ray(todo, workers=2)
    assert len(local) == len(ray_res) == len(todo) == 6
    for a, b, c in zip(local, ray_res, todo, strict=True):
        assert a["cell"] == b["cell"] == c
        assert a["rows"] == b["rows"]  # exact equality of every metric
        assert a["probes"] == b["probes"] and a["ranked"] == b["ranked"]
    # the seeds matter: two seeds of one config give different rows (so equality above is not vacuous)
    assert local[0]["rows"] != local[1]["rows"]


def test_cli_writes_tables_and_figure(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = runner.invoke(app, ["bench", "sweep", str(_tiny_cbr(tmp_path)), "--out", str(out), "--no-progress",
                              "--workers", "1"])
    assert res.exit_code == 0, res.output
    for ext in ("json", "md", "png"):
        assert f"wrote {out / f'sweep-tiny.{ext}'}" in res.output
    assert f"wrote {out / 'sweep-tiny.probes.parquet'}" in res.output
    payload = json.loads((out / "sweep-tiny.json").read_text())
    _check_against_table(payload, out / "sweep-tiny.probes.parquet")
    (size,) = payload["aggregate"]["sizes"]
    rows = {r["name"]: r for r in size["rows"]}
    vals = [c["rows"][0]["mean_accuracy"] for c in payload["cells"] if c["cell"]["config"]["arm"] == "none"]
    assert rows["no memory K=8"]["stats"]["mean_accuracy"]["mean"] == pytest.approx(sum(vals) / 2)
    md = (out / "sweep-tiny.md").read_text()
    assert "### Differences" in md and "| oracle K=2 | no memory K=8 | mean_accuracy |" in md
    cell = f"{rows['oracle K=2']['stats']['mean_accuracy']['mean']:.3f} ["
    assert cell in md  # the headline number with its interval


def _check_against_table(payload: dict, probes: Path) -> None:
    """Every number of a sweep's aggregate recomputes from its per-probe table, and the table's per-seed means are
    the numbers each cell reported for its rows (the cells' own means, computed without the table)."""
    from benchmarks import sweep_stats
    from harness.probes import aggregate, read_probes

    again = {"config": payload["config"], "cells": payload["cells"]}
    sweep_stats.apply_table(again, probes)
    assert_same_numbers(json.loads(json.dumps(again["aggregate"])), payload["aggregate"])
    run = read_probes(probes)
    metrics = payload["aggregate"]["metrics"]
    checked = 0
    for c in payload["cells"]:
        per_seed = aggregate(run.table, {"seed": c["cell"]["seed"]}, metrics)
        for r in c["rows"]:
            got = per_seed[c["row_ids"][r["name"]]]["metrics"]
            for m in metrics:
                assert got[m]["mean"] == pytest.approx(r[m], abs=1e-12), (c["cell"], r["name"], m)
                checked += 1
    assert checked


def test_ray_missing_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    res = runner.invoke(app, ["bench", "sweep", str(_tiny_cbr(tmp_path)), "--executor", "ray", "--no-progress"])
    assert res.exit_code == 1 and "pip install -e '.[ray]'" in res.stderr


def test_shipped_sweep_files_are_valid() -> None:
    files = sorted((Path(__file__).resolve().parents[2] / "benchmarks" / "sweeps").glob("*.yaml"))
    assert {f.stem for f in files} >= {"selectors", "cbr-loop"}
    for f in files:
        cfg = sweep.load_config(f)
        assert sweep.cells(cfg) and cfg.name == f.stem


CBR = ("name: x\nbenchmark: cbr-loop\nseeds: 2\nsizes: [{size}]\nconfigs: [{{arm: np, k: 8}}, {{arm: none, k: 8}}]\n"
       "metric: {metric}\ncompare: [[{a}, \"no memory K=8\"]]\n")
SEL = "name: x\nbenchmark: selectors\nseeds: {seeds}\nsizes: [{size}]\nconfigs: [{conf}]\nmetric: P@8\n"
LOC = "name: x\nbenchmark: locomo\nseeds: 1\nconfigs: [{conf}]\nmetric: evidence_recall\ncompare: [[{a}, bm25@8]]\n"


def _cbr(size: str = "{rounds: 2, per_round: 4}", metric: str = "mean_accuracy", a: str = '"NP (pooler) K=8"') -> str:
    return CBR.format(size=size, metric=metric, a=a)


@pytest.mark.parametrize(("text", "key", "needle"), [
    (_cbr(size="{rounds: -1, per_round: 4}"), "sizes.0.rounds", "greater than or equal to 1"),
    (_cbr(size="{rounds: 2, per_round: 0}"), "sizes.0.per_round", "greater than or equal to 1"),
    (_cbr(size="{rounds: 2, per_rounds: 4}"), "sizes.0.per_rounds", "unknown key (allowed here: rounds, per_round)"),
    (_cbr(size="{rounds: 2.5}"), "sizes.0.rounds", "valid integer"),
    (_cbr().replace("{arm: np, k: 8}", "{arm: np, k: 0}"), "configs.0.k", "greater than or equal to 1"),
    (_cbr().replace("{arm: np, k: 8}", "{arm: np, kk: 8}"), "configs.0.kk", "unknown key"),
    (_cbr().replace("{arm: np, k: 8}", "{arm: nq, k: 8}"), "configs.0.arm", "'nq'"),
    (_cbr(metric="mean_acc"), "metric", "unknown metric 'mean_acc' for cbr-loop; did you mean 'mean_accuracy'?"),
    (_cbr(metric="bank_cases"), "metric", "'bank_cases' is a count per cell"),
    (_cbr() + "metrics: [mean_accuracy, round_3]\n", "metrics.1", "unknown metric 'round_3'"),
    (_cbr(a='"NP (poolr) K=8"'), "compare.0.0", "no row 'NP (poolr) K=8' in this sweep; did you mean 'NP (pooler) K=8'?"),
    (_cbr(a='"NP (pooler) K=4"'), "compare.0.0", "no row 'NP (pooler) K=4'"),
    (_cbr(a='"no memory K=8"'), "compare.0", "compared with itself"),
    (SEL.format(seeds=2, size="{n_cases: 5}", conf="{selectors: [bm25]}"), "sizes.0.n_cases", "greater than or equal"),
    (SEL.format(seeds=2, size="{}", conf="{selectors: [rrf, bm25]}"), "configs.0", "rrf selector needs bm25 and np_mean"),
    (SEL.format(seeds=2, size="{}", conf="{selectors: [bm26]}"), "configs.0.selectors.0", "'bm26'"),
    (SEL.format(seeds=2, size="{}", conf="{selector: [bm25]}"), "configs.0.selector", "unknown key"),
    (SEL.format(seeds="[0, -1]", size="{}", conf="{selectors: [bm25]}"), "seeds.1", "greater than or equal to 0"),
    (SEL.format(seeds=2, size="{}", conf="{selectors: [bm25]}") + "metrics: [P@8, ndcg@10]\n", "metrics.1",
     "did you mean 'nDCG@10'?"),
    (SEL.format(seeds=2, size="{}", conf="{selectors: [bm25]}") + "wokers: 2\n", "wokers", "unknown key"),
    (LOC.format(conf="{arms: 'bm25,np-mean', k: [4, 8]}", a="np-mean@16"), "compare.0.0", "no row 'np-mean@16'"),
    (LOC.format(conf="{arms: 'bm25,np-mean', k: [4, 8]}", a="tortoise-eval"), "compare.0.0", "no row"),
    (LOC.format(conf="{arms: 'bm25,np-meen', k: [4, 8]}", a="np-mean@8"), "configs.0.arms", "unknown arm 'np-meen'"),
    (LOC.format(conf="{arms: bm25, k: [0]}", a="bm25@4"), "configs.0.k.0", "greater than or equal to 1"),
    (LOC.format(conf="{arms: bm25, k: 8}", a="bm25@4"), "configs.0.k", "valid list"),
    (LOC.format(conf="{arms: bm25, k: [4]}", a="bm25@4").replace("metric: evidence_recall", "metric: f1"), "metric",
     "unknown metric 'f1' for locomo"),
])
def test_config_rejects_nonsense_in_one_line(tmp_path: Path, text: str, key: str, needle: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as exc:
        sweep.load_config(bad)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{bad}: {key}: "), msg
    assert needle in msg, msg


def test_valid_locomo_compare_rows_pass(tmp_path: Path) -> None:
    ok = tmp_path / "ok.yaml"
    ok.write_text(LOC.format(conf="{arms: 'bm25,np-mean,tortoise', k: [4, 8]}", a="tortoise-eval"), encoding="utf-8")
    assert sweep.load_config(ok).compare == [("tortoise-eval", "bm25@8")]


def test_negative_rounds_end_in_one_line_before_any_cell(tmp_path: Path) -> None:
    """``rounds: -1`` used to run every cell and end in an IndexError traceback."""
    bad = tmp_path / "neg.yaml"
    bad.write_text(_cbr(size="{rounds: -1, per_round: 4}"), encoding="utf-8")
    out = tmp_path / "out"
    res = runner.invoke(app, ["bench", "sweep", str(bad), "--out", str(out), "--no-progress", "--workers", "1"])
    assert res.exit_code == 1
    assert res.stderr.strip().splitlines() == [f"error: {bad}: sizes.0.rounds: Input should be greater than or "
                                               "equal to 1, not -1"]
    assert not out.exists()  # nothing was written, and the folder the run would have created is not left behind


def test_row_and_metric_names_match_what_the_cells_give(tmp_path: Path) -> None:
    import torch

    from benchmarks import cbr_loop

    torch.set_num_threads(1)
    assert set(sweep.CBR_NAMES) == set(cbr_loop.LABELS)
    (row,) = sweep.run_cell({"benchmark": "cbr-loop", "seed": 0, "config": {"arm": "none", "k": 2},
                             "size": {"rounds": 2, "per_round": 2}})["rows"]
    cfg = sweep.load_config(_tiny_cbr(tmp_path))
    assert set(row) - {"name"} == {*sweep.CBR_METRICS, "round_1", "round_2"}
    assert set(row) - {"name"} - set(sweep.CELL_ONLY) == set(sweep.known_metrics(cfg))
    rows = sweep.run_cell({"benchmark": "selectors", "seed": 0, "config": {"selectors": ["oracle", "bm25", "recency",
                                                                                        "random"]},
                           "size": {"n_cases": 40, "n_queries": 3}})["rows"]
    assert [r["name"] for r in rows] == [sweep.SELECTOR_ROWS[s][0] for s in ("oracle", "bm25", "recency", "random")]
    assert all(set(r) - {"name"} == set(sweep.selector_metrics()) for r in rows)
    # the rows the slow selectors (pm, the two MiniLM poolings, rrf) gave in the committed sweep
    committed = json.loads((Path(__file__).resolve().parents[2] / "benchmarks" / "results" /
                            "sweep-selectors.json").read_text(encoding="utf-8"))
    given = {r["name"] for c in committed["cells"] for r in c["rows"]}
    assert given == {n for names in sweep.SELECTOR_ROWS.values() for n in names}


@pytest.mark.parametrize("name", ["sweep-selectors", "sweep-cbr-loop"])
def test_committed_sweep_numbers_come_from_the_committed_table(name: str) -> None:
    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    payload = json.loads((results / f"{name}.json").read_text(encoding="utf-8"))
    _check_against_table(payload, results / f"{name}.probes.parquet")
    cfg = sweep.SweepConfig.model_validate(payload["config"])
    (size,) = payload["aggregate"]["sizes"]
    assert len(size["differences"]["pairs"]) == len(cfg.compare) * len(sweep.pair_metrics(cfg))


def test_locomo_cell_probes_give_its_rows() -> None:
    from harness.probes import aggregate, probe_table
    from harness.workloads.locomo import find_locomo_path

    data = find_locomo_path()
    if data is None:
        pytest.skip("LoCoMo data not present")
    res = sweep.run_cell({"benchmark": "locomo", "seed": 0, "config": {"arms": "bm25,full", "k": [4],
                                                                       "data": str(data)}, "size": {"quick": True}})
    table = probe_table(res["probes"])
    assert set(table.column("category").to_pylist()) <= {"1", "2", "3", "4"}  # the headline probes only
    agg = aggregate(table, None, list(sweep.LOCOMO_METRICS))
    for row in res["rows"]:
        got = agg[res["row_ids"][row["name"]]]["metrics"]
        for m in sweep.LOCOMO_METRICS:
            assert got[m]["mean"] == pytest.approx(row[m], abs=1e-12), (row["name"], m)
