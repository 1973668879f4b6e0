"""``memsim compare``: one run or two, lines or one JSON document, and one-line errors for bad input."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from benchmarks.worlds.probe_results import locomo_table_rows
from harness.cli.main import app
from harness.probes import probe_table, write_probes
from harness.stats import holm

ROWS = ("bm25@8", "hybrid@8", "tortoise-eval", "fractal")
HEADLINE = {"category": ["1", "2", "3", "4"]}


def _write(folder, name="locomo", *, data="locomo", seed=0, keep=None, rows=ROWS):
    recs = locomo_table_rows(seed, rows=rows)
    if keep is not None:
        recs = [r for r in recs if keep(r)]
    folder.mkdir(parents=True, exist_ok=True)
    return write_probes(folder / f"{name}.probes.parquet", probe_table(recs), data=data,
                        probe_sets={"headline": HEADLINE}, stratify=True, headline_metrics=["evidence_recall"])


def _run(*args):
    return CliRunner().invoke(app, ["compare", *map(str, args)], prog_name="memsim")


def test_one_run_every_pair_in_lines_and_json(tmp_path):
    _write(tmp_path)
    res = _run(tmp_path / "locomo", "--rows", "hybrid@8,bm25@8,tortoise-eval")
    assert res.exit_code == 0, res.output
    out = res.output
    assert "probe set headline: 584 probes" in out and "stratified within 4 clusters" in out
    assert "hybrid@8 - bm25@8  evidence_recall  n 582" in out and "Holm over 3 comparison(s)" in out
    assert "bm25@8 - tortoise-eval" in out and "clusters agreeing" in out
    js = _run(tmp_path / "locomo.json", "--rows", "hybrid@8,bm25@8,tortoise-eval", "--json",
              "--metric", "evidence_recall,all_evidence")
    assert js.exit_code == 0, js.output
    doc = json.loads(js.output)
    assert len(doc["pairs"]) == 6 and {p["family"] for p in doc["pairs"]} == {6}
    assert [p["p_holm"] for p in doc["pairs"]] == pytest.approx(holm([p["p"] for p in doc["pairs"]]))
    assert doc["rows"]["all_evidence"]["bm25@8"]["method"] == "wilson"
    assert doc["rows"]["evidence_recall"]["bm25@8"]["method"] in ("bca", "percentile")
    for p in doc["pairs"]:
        assert p["wins"] + p["ties"] + p["losses"] == p["n"]
        assert p["verdict"] in ("inconclusive", f"{p['a']} > {p['b']}", f"{p['a']} < {p['b']}")
    assert doc["runs"][0]["path"].endswith("locomo.probes.parquet")


def test_all_probes_and_the_parquet_path(tmp_path):
    path = _write(tmp_path)
    doc = json.loads(_run(path, "--rows", "bm25@8,fractal", "--probes", "all", "--json").output)
    assert doc["n_probes"] == 584 and doc["probe_set"] == "all"


def test_two_runs_compare_on_shared_probes(tmp_path):
    _write(tmp_path / "a")
    _write(tmp_path / "b", seed=1, keep=lambda r: r["cluster"] != "conv-30")  # run b lacks one conversation
    res = _run(tmp_path / "a/locomo", tmp_path / "b/locomo", "--rows", "hybrid@8", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    (pair,) = doc["pairs"]
    assert (pair["a"], pair["b"]) == ("1:hybrid@8", "2:hybrid@8")
    assert doc["n_probes"] == 584 - 81 and doc["n_clusters"] == 3
    both = json.loads(_run(tmp_path / "a/locomo", tmp_path / "b/locomo", "--rows", "1:hybrid@8,2:bm25@8",
                           "--json").output)
    assert [(p["a"], p["b"]) for p in both["pairs"]] == [("1:hybrid@8", "2:bm25@8")]


def test_two_runs_on_different_data_refused_in_one_line(tmp_path):
    _write(tmp_path / "a")
    _write(tmp_path / "b", data="synthetic seed 9")
    res = _run(tmp_path / "a/locomo", tmp_path / "b/locomo", "--rows", "hybrid@8")
    assert res.exit_code == 1
    line = res.output.strip()
    assert "\n" not in line and line.startswith("error:") and "data is 'synthetic seed 9'" in line
    assert "'locomo'" in line and "same data" in line


@pytest.mark.parametrize("args,flag", [(["--rows", "hybrid@8,nope"], "--rows"),
                                       (["--rows", "hybrid@8"], "--rows"),
                                       (["--rows", "hybrid@8,bm25@8", "--metric", "nope"], "--metric"),
                                       (["--rows", "hybrid@8,bm25@8", "--probes", "nope"], "--probes"),
                                       ([], "--rows")])
def test_bad_options_are_usage_errors(tmp_path, args, flag):
    _write(tmp_path)
    res = _run(tmp_path / "locomo", *args)
    assert res.exit_code == 2, res.output
    assert "memsim compare: invalid" in res.output and flag in res.output and len(res.output.strip().splitlines()) == 1


def test_missing_and_damaged_tables_are_one_line(tmp_path):
    res = _run(tmp_path / "nothing", "--rows", "a,b")
    assert res.exit_code == 1 and "nothing.probes.parquet: no per-probe table there" in res.output
    bad = tmp_path / "bad.probes.parquet"
    bad.write_bytes(b"PAR1 not really")
    res = _run(bad, "--rows", "a,b")
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1 and str(bad) in res.output
    foreign = tmp_path / "foreign.probes.parquet"
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [1]}), foreign)
    res = _run(foreign, "--rows", "a,b")
    assert res.exit_code == 1 and "not written by memsim" in res.output
