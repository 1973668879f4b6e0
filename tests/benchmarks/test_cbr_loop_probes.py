"""``memsim bench cbr-loop``'s per-probe table: the arms' numbers (from the result files) are the table's means,
and the page's intervals and Differences recompute from it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import cbr_loop, cbr_probes
from harness.probes import aggregate, read_probes
from tests.numbers import assert_same_numbers

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def _check(payload: dict, probes: Path) -> None:
    run = read_probes(probes)
    rounds = payload["meta"]["rounds"]
    agg = aggregate(run.table, None, cbr_probes.metrics(rounds))
    for a in payload["arms"]:
        got = agg[cbr_probes.row_id(a["arm"], a["k"])]["metrics"]
        rs = a["rounds"]
        for r in rs:
            assert got[f"round_{r['round']}"]["mean"] == pytest.approx(r["accuracy"], abs=1e-12)
            assert got[f"round_{r['round']}"]["n"] == r["questions"] == payload["meta"]["per_round"]
        assert got["mean_accuracy"]["mean"] == pytest.approx(cbr_loop._mean_acc(a), abs=1e-12)
        assert got["final_accuracy"]["mean"] == pytest.approx(rs[-1]["accuracy"], abs=1e-12)
        for m in ("share_with_positive_example", "share_copied_right_plan"):
            assert got[m]["mean"] == pytest.approx(float(np.mean([r[m] for r in rs])), abs=1e-12), (a["arm"], m)
    again = {"arms": payload["arms"], "meta": payload["meta"]}
    cbr_probes.apply_table(again, probes)
    assert_same_numbers(json.loads(json.dumps(again["stats"])), json.loads(json.dumps(payload["stats"])))
    assert {(p["a"], p["b"]) for p in payload["stats"]["differences"]["pairs"]} == set(cbr_probes.PAIRS)


def test_committed_cbr_loop_numbers_come_from_the_committed_table() -> None:
    payload = json.loads((RESULTS / "cbr-loop.json").read_text(encoding="utf-8"))
    _check(payload, RESULTS / "cbr-loop.probes.parquet")


@pytest.mark.slow  # the quick benchmark (2 rounds x 6 questions, 13 arms, PM retraining): about half a minute
def test_quick_run_writes_a_consistent_table(tmp_path: Path) -> None:
    import torch

    torch.set_num_threads(1)
    paths = cbr_loop.run(tmp_path, quick=True)
    assert tmp_path / "cbr-loop.probes.parquet" in paths
    payload = json.loads((tmp_path / "cbr-loop.json").read_text(encoding="utf-8"))
    assert all("questions" not in a for a in payload["arms"])  # the questions live in the table, not the JSON
    _check(cbr_loop.from_json(payload), tmp_path / "cbr-loop.probes.parquet")
    md = (tmp_path / "cbr-loop.md").read_text(encoding="utf-8")
    assert "### Differences" in md and "Per-probe table" in md
