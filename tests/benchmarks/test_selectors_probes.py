"""The selector benchmark's per-probe table: its means are the benchmark's numbers, every headline number has an
interval, the Differences cover the fixed pairs, and the TREC files give memsim's numbers through ir_measures."""

from __future__ import annotations

import json
from pathlib import Path

import ir_measures
import numpy as np
import pytest
from ir_measures import RR, P, R, nDCG

from benchmarks import rankers, selectors
from benchmarks import selector_probes as sp
from benchmarks.metrics import evaluate_run
from benchmarks.worlds import CBRWorld
from harness.probes import aggregate, read_probes
from harness.trec import query_id
from tests.numbers import assert_same_numbers

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
MEASURES = {"R@1": R @ 1, "R@4": R @ 4, "R@8": R @ 8, "P@8": P @ 8, "nDCG@10": nDCG @ 10, "MRR": RR}


def _small_run(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict, list]:
    """A selectors payload from four cheap selectors on a small world, written and computed as ``run`` does."""
    world = CBRWorld(seed=1)
    bank = world.bank(90, seed=1)
    queries = world.queries(14, seed=1001)
    qrels = world.qrels(queries, bank)
    by_name = {"oracle (hidden truth)": rankers.rank_oracle(qrels, selectors.DEPTH),
               "BM25 (bm25s)": rankers.rank_bm25(bank.questions(), queries.questions(), selectors.DEPTH),
               "recency": rankers.rank_recency(len(bank), len(queries), selectors.DEPTH),
               "random": rankers.rank_random(len(bank), len(queries), selectors.DEPTH, 1)}
    by_id = {sp.row_id(n): r for n, r in by_name.items()}
    types = [f.entity_type for f in world.families]
    probes = selectors.write_table(tmp, sp.probe_rows(by_id, qrels, bank.label, queries.family, types),
                                   data="test", config={})
    qids = [query_id(f"f{int(f)}", j) for j, f in enumerate(queries.family)]
    sp.write_trec_files(tmp / "selectors", *sp.trec_inputs(by_id, qrels, qids))
    # pairs among the rows this run has (the benchmark's own pairs name rows it does not run)
    monkeypatch.setattr(sp, "PAIRS", (("bm25", "random"), ("oracle", "bm25"), ("bm25", "np-mean")))
    payload = {"rows": [{"selector": n, "row": sp.row_id(n), "seconds": 0.0} for n in by_name]}
    selectors.apply_table(payload, probes)
    expected = {n: evaluate_run([list(r) for r in ranks], qrels, positive_label=bank.label)
                for n, ranks in by_name.items()}
    return payload, expected, qids


def test_table_means_intervals_and_differences(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload, expected, _ = _small_run(tmp_path, monkeypatch)
    stats = payload["stats"]
    for r in payload["rows"]:
        for m in sp.METRICS:  # the table's means are the benchmark's numbers, computed as before
            assert r[m] == pytest.approx(expected[r["selector"]][m], abs=1e-12), (r["row"], m)
            iv = stats["intervals"]["rows"][m][r["row"]]
            assert iv["lo"] <= iv["estimate"] <= iv["hi"] and iv["n"] == 14
            assert iv["estimate"] == pytest.approx(r[m], abs=1e-12)
    # the oracle's nDCG@10 is 1 on every query: an exact binomial interval, never [1, 1]
    oracle = stats["intervals"]["rows"]["nDCG@10"]["oracle"]
    assert oracle["method"] == "clopper-pearson" and oracle["hi"] == 1.0 and oracle["lo"] < 0.8
    diffs = stats["differences"]["pairs"]
    assert {(p["a"], p["b"]) for p in diffs} == {("bm25", "random"), ("oracle", "bm25")}
    assert {p["metric"] for p in diffs} == set(sp.PAIR_METRICS) and diffs[0]["family"] == 2 * len(sp.PAIR_METRICS)
    assert stats["not_compared"] == [["bm25", "np-mean"]]
    bm25_p8 = next(p for p in diffs if p["a"] == "bm25" and p["b"] == "random" and p["metric"] == "P@8")
    assert bm25_p8["diff"]["estimate"] == pytest.approx(expected["BM25 (bm25s)"]["P@8"] - expected["random"]["P@8"])
    assert bm25_p8["p_holm"] < 0.05 and bm25_p8["verdict"] == "bm25 > random"
    md = selectors.render_markdown({**payload, "meta": {"world": {"n_cases": 90, "n_queries": 14, "n_families": 40,
                                                                   "p_correct": 0.7, "label_noise": 0.1},
                                                         "machine": _machine()}, "notes": [], "corpus": {}})
    assert "### Differences" in md and "BM25 (bm25s) > random" in md and "Holm" in md and "unadjusted" in md
    assert f"{expected['BM25 (bm25s)']['P@8']:.3f} [" in md  # a headline cell with its interval


def test_trec_files_give_the_table_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _small_run(tmp_path, monkeypatch)
    run = read_probes(tmp_path / "selectors.probes.parquet")
    rows = run.table.to_pylist()
    qrels = list(ir_measures.read_trec_qrels(str(tmp_path / "selectors" / "qrels.case.trec")))
    checked = 0
    for row in ("oracle", "bm25", "recency", "random"):
        got: dict[str, dict[str, float]] = {}
        trec_run = list(ir_measures.read_trec_run(str(tmp_path / "selectors" / "runs" / f"{row}.case.trec")))
        for m in ir_measures.iter_calc(list(MEASURES.values()), qrels, trec_run):
            got.setdefault(m.query_id, {})[str(m.measure)] = m.value
        for rec in (r for r in rows if r["row"] == row):
            qid = query_id(rec["cluster"], rec["probe"])
            for name, measure in MEASURES.items():
                assert got[qid][str(measure)] == pytest.approx(rec[name], abs=1e-9), (row, qid, name)
                checked += 1
    assert checked == 4 * 14 * len(MEASURES)


def test_table_holds_ids_and_numbers_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _small_run(tmp_path, monkeypatch)
    run = read_probes(tmp_path / "selectors.probes.parquet")
    strings = {c for c in run.table.column_names if str(run.table.schema.field(c).type) == "string"}
    assert strings == {"workload", "cluster", "probe", "category", "row", "arm"}
    texts = set(CBRWorld(seed=1).queries(14, seed=1001).questions())
    for c in strings:
        assert not set(run.table.column(c).to_pylist()) & texts


def _machine() -> dict:
    from benchmarks.common import machine_description

    return machine_description()


def _check_payload_against_table(payload: dict, probes: Path) -> None:
    """Every mean of the payload's rows is the table's aggregate; every interval and difference recomputes."""
    run = read_probes(probes)
    agg = aggregate(run.table, None, list(sp.METRICS))
    for r in payload["rows"]:
        for m in sp.METRICS:
            assert r[m] == agg[r["row"]]["metrics"][m]["mean"], (r["row"], m)
    again = {"rows": [dict(r) for r in payload["rows"]]}
    selectors.apply_table(again, probes)
    assert_same_numbers(json.loads(json.dumps(again["stats"])), json.loads(json.dumps(payload["stats"])))


def test_committed_selectors_numbers_come_from_the_committed_table() -> None:
    payload = json.loads((RESULTS / "selectors.json").read_text(encoding="utf-8"))
    _check_payload_against_table(payload, RESULTS / "selectors.probes.parquet")
    assert {r["row"] for r in payload["rows"]} == set(sp.ROW_IDS.values())
    pairs = {(p["a"], p["b"]) for p in payload["stats"]["differences"]["pairs"]}
    assert pairs == set(sp.PAIRS)  # every fixed pair ran in the committed run


@pytest.mark.slow  # the quick benchmark run: MiniLM encoders and the PM classifier rows (about a minute)
def test_quick_run_writes_a_consistent_table(tmp_path: Path) -> None:
    import torch

    torch.set_num_threads(1)
    paths = selectors.run(tmp_path, quick=True)
    payload = json.loads((tmp_path / "selectors.json").read_text(encoding="utf-8"))
    assert tmp_path / "selectors.probes.parquet" in paths and (tmp_path / "selectors" / "qrels.case.trec") in paths
    _check_payload_against_table(payload, tmp_path / "selectors.probes.parquet")
    n_queries = payload["meta"]["world"]["n_queries"]
    assert payload["stats"]["n_probe_rows"] == n_queries * len(payload["rows"])
    for row in payload["rows"]:
        assert (tmp_path / "selectors" / "runs" / f"{row['row']}.case.trec").is_file()
    assert np.isfinite([r["P@8"] for r in payload["rows"]]).all()
