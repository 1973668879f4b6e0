"""The per-probe run format: build, write (atomic, checked), read (one line for a bad file), and the one
aggregation, which reproduces what the benches' summaries compute from their probe records."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.worlds.probe_results import locomo_table_rows
from harness.faults import FaultInjected, FaultPlan
from harness.probes import (
    ProbeTableError,
    aggregate,
    from_probe_record,
    infer_kinds,
    pivot,
    probe_table,
    probes_path,
    read_probes,
    resolve_run,
    write_probes,
)
from harness.runs import code_identity

HEADLINE = {"category": ["1", "2", "3", "4"]}


def _ids(**kw):
    base = {"workload": "locomo", "cluster": "conv-1", "probe": "0", "category": "1", "abstention": False,
            "has_evidence": True, "row": "bm25@4", "arm": "bm25"}
    return {**base, **kw}


def test_round_trip_keeps_ids_metrics_and_metadata(tmp_path):
    table = probe_table(locomo_table_rows(0, rows=("bm25@8", "hybrid@8", "fractal")))
    path = write_probes(tmp_path / "locomo.probes.parquet", table, data="locomo", config={"k": [4, 8]},
                        probe_sets={"headline": HEADLINE}, stratify=True, headline_metrics=["evidence_recall"])
    run = read_probes(path)
    assert run.table.equals(table.replace_schema_metadata(None))
    assert run.rows == ["bm25@8", "hybrid@8", "fractal"]
    assert run.meta["data"] == "locomo" and run.meta["config"] == {"k": [4, 8]} and run.meta["stratify"] is True
    assert run.meta["code"] == code_identity()
    assert run.kinds["all_evidence"] == "binary" and run.kinds["evidence_recall"] == "mean"
    assert run.kinds["turn.recall_any@5"] == "binary" and run.kinds["tokens_cl100k"] == "mean"
    assert run.probe_set("headline") == HEADLINE and run.probe_set("all") == {}
    assert "turn.ndcg_any@10" in run.metrics and "row" not in run.metrics


def test_paths():
    assert probes_path("out/locomo.json").as_posix() == "out/locomo.probes.parquet"
    for arg in ("out/locomo", "out/locomo.json", "out/locomo.probes.parquet"):
        assert resolve_run(arg).as_posix() == "out/locomo.probes.parquet"


def test_writer_refuses_text_in_a_metric_column(tmp_path):
    with pytest.raises(ProbeTableError, match="'answer' holds text"):
        probe_table([_ids(answer="7 May 2023", evidence_recall=1.0)])
    table = pa.table({**{k: [v] for k, v in _ids().items()}, "note": ["the delivered text"]})
    with pytest.raises(ProbeTableError, match="only the id columns may hold strings"):
        write_probes(tmp_path / "x.probes.parquet", table, data="locomo")
    assert not (tmp_path / "x.probes.parquet").exists()


@pytest.mark.parametrize("bad,match", [({"probe": "x" * 201}, "longer than 200"),
                                       ({"cluster": "line\nbreak"}, "control character")])
def test_writer_refuses_text_smuggled_into_ids(tmp_path, bad, match):
    with pytest.raises(ProbeTableError, match=match):
        write_probes(tmp_path / "x.probes.parquet", probe_table([_ids(**bad)]), data="locomo")


def test_writer_refuses_a_repeated_probe_and_missing_ids(tmp_path):
    with pytest.raises(ProbeTableError, match="appears twice"):
        write_probes(tmp_path / "x.probes.parquet", probe_table([_ids(), _ids()]), data="d")
    row = _ids()
    del row["arm"]
    with pytest.raises(ProbeTableError, match="'arm' is missing"):
        probe_table([row])


def test_write_is_atomic_under_a_fault(tmp_path):
    path = tmp_path / "locomo.probes.parquet"
    first = probe_table([_ids(evidence_recall=1.0)])
    write_probes(path, first, data="d")
    before = path.read_bytes()
    plan = FaultPlan({"probes.write": 1})
    with pytest.raises(FaultInjected):
        write_probes(path, probe_table([_ids(evidence_recall=0.0)]), data="d", fault_hook=plan)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_reader_gives_one_line_naming_the_file(tmp_path):
    good = write_probes(tmp_path / "a.probes.parquet", probe_table([_ids(evidence_recall=1.0)]), data="d")
    torn = tmp_path / "torn.probes.parquet"
    torn.write_bytes(good.read_bytes()[:-40])
    foreign = tmp_path / "foreign.probes.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), foreign)
    for path, match in ((torn, "not a readable Parquet file"), (foreign, "without memsim's per-probe metadata"),
                        (tmp_path / "none.probes.parquet", "no per-probe table there")):
        with pytest.raises(ProbeTableError) as err:
            read_probes(path)
        msg = str(err.value)
        assert msg.startswith(str(path)) and match in msg and "\n" not in msg


def test_aggregate_reproduces_the_bench_summary_from_records():
    """The benches' per-row summary (harness.workloads.metrics.summarize) and the one aggregation over the table
    built from the same records give the same numbers."""
    from harness.workloads.metrics import RANKED_METRICS, summarize

    rng = np.random.default_rng(0)
    records = []
    for conv in ("conv-a", "conv-b"):
        for i in range(40):
            n_ev = int(rng.integers(0, 3))
            for row in ("bm25@4", "full"):
                hits = int(rng.integers(0, n_ev + 1))
                ranked = {lv: {m: float(rng.integers(0, 2)) if "recall" in m else float(rng.random())
                               for m in RANKED_METRICS} for lv in ("turn", "session")} if row != "full" else None
                records.append({
                    "conversation": conv, "probe": i, "category": int(rng.integers(1, 6)), "row": row,
                    "n_evidence": n_ev, "evidence_hits": hits, "stored_hits": n_ev,
                    "recall": hits / n_ev if n_ev else None, "all_evidence": hits == n_ev if n_ev else None,
                    "stored_recall": 1.0 if n_ev else None, "delivered_turns": 4,
                    "tokens": int(rng.integers(50, 500)), "tokens_cl100k": int(rng.integers(50, 500)),
                    "chars4": int(rng.integers(50, 500)), "answer_present": float(rng.random()),
                    "latency_ms": float(rng.lognormal()), "is_ranked": ranked is not None,
                    "ranked": (ranked if n_ev else None) if ranked is not None else None,
                    "text": "never copied", "meta": {"pool": 3, "label": "x", "gated": True},
                })
    table = probe_table(from_probe_record(r, workload="locomo", arm=r["row"].split("@")[0]) for r in records)
    assert "text" not in table.column_names and "meta.label" not in table.column_names
    assert "meta.pool" in table.column_names and "meta.gated" not in table.column_names
    want = summarize(records)
    got = aggregate(table, HEADLINE, percentiles=(50, 95))
    for row in ("bm25@4", "full"):
        h, g = want[row]["headline"], got[row]["metrics"]
        assert got[row]["n_probes"] == h["n_probes"] and g["evidence_recall"]["n"] == h["n_scored"]
        for key, (col, stat) in {
            "evidence_recall": ("evidence_recall", "mean"), "all_evidence_rate": ("all_evidence", "mean"),
            "stored_recall": ("stored_recall", "mean"), "delivered_turns": ("delivered_turns", "mean"),
            "tokens_mean": ("tokens", "mean"), "tokens_median": ("tokens", "p50"),
            "tokens_cl100k_mean": ("tokens_cl100k", "mean"), "chars4_mean": ("chars4", "mean"),
            "answer_present": ("answer_present", "mean"), "latency_ms_median": ("latency_ms", "p50"),
            "latency_ms_p95": ("latency_ms", "p95"),
        }.items():
            assert g[col][stat] == pytest.approx(h[key], rel=1e-12), (row, key)
        if h["ranked"]:
            assert g["turn.recall_any@5"]["n"] == h["ranked"]["n"]
            for lv in ("turn", "session"):
                for m in RANKED_METRICS:
                    assert g[f"{lv}.{m}"]["mean"] == pytest.approx(h["ranked"][lv][m], rel=1e-12)


def test_lme_record_ids():
    rec = {"question_type": "multi-session", "question_id": "q7", "abstention": True, "row": "bm25@8",
           "n_evidence": 2, "recall": 0.5, "official_recall": 1.0, "conversation": "q7", "probe": 0, "category": 0}
    row = from_probe_record(rec, workload="longmemeval", arm="bm25", seed=3)
    assert (row["cluster"], row["probe"], row["category"], row["abstention"], row["seed"]) == \
        ("q7", "q7", "multi-session", True, 3)
    assert row["official_recall"] == 1.0 and row["evidence_recall"] == 0.5


def test_pivot_aligns_rows_on_probe_keys():
    rows = [_ids(probe="0", row="a", evidence_recall=1.0), _ids(probe="1", row="a", evidence_recall=0.0),
            _ids(probe="1", row="b", evidence_recall=0.5), _ids(probe="2", row="b", evidence_recall=None),
            _ids(probe="0", cluster="conv-2", row="b", evidence_recall=1.0)]
    keys, strata, vals = pivot(probe_table(rows), ["evidence_recall"], ["a", "b"])
    assert keys == [("conv-1", "0"), ("conv-1", "1"), ("conv-1", "2"), ("conv-2", "0")]
    assert strata == ["conv-1", "conv-1", "conv-1", "conv-2"]
    np.testing.assert_array_equal(vals["evidence_recall"]["a"], [1.0, 0.0, np.nan, np.nan])
    np.testing.assert_array_equal(vals["evidence_recall"]["b"], [np.nan, 0.5, np.nan, 1.0])


def test_infer_kinds_and_override(tmp_path):
    table = probe_table([_ids(probe=str(i), hit=float(i % 2), recall=i / 4) for i in range(4)])
    assert infer_kinds(table) == {"hit": "binary", "recall": "mean"}
    run = read_probes(write_probes(tmp_path / "k.probes.parquet", table, data="d", kinds={"hit": "mean"}))
    assert run.kinds == {"hit": "mean", "recall": "mean"}


def test_the_table_is_one_of_the_runs_own_names(tmp_path):
    """Written into a run's staging folder beside <name>.json, it is published with the run and replaced by the
    next run of that name (never by another name's run)."""
    from harness.runs import owned_run

    for value in (1.0, 0.0):
        with owned_run(tmp_path, ["locomo"]) as stage:
            write_probes(probes_path(stage / "locomo.json"), probe_table([_ids(evidence_recall=value)]), data="d")
            (stage / "locomo.json").write_text("{}")
    with owned_run(tmp_path, ["locomo-paper"]) as stage:
        (stage / "locomo-paper.json").write_text("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locomo-paper.json", "locomo.json", "locomo.probes.parquet"]
    assert aggregate(read_probes(tmp_path / "locomo.probes.parquet").table)["bm25@4"]["metrics"][
        "evidence_recall"]["mean"] == 0.0
