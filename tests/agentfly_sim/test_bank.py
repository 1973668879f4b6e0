"""Bank formats (spec §2) on the shipped corpora (skipped when absent) and writer line format."""

from __future__ import annotations

import json
from collections import Counter

from agentfly_sim import bank
from agentfly_sim.training import PairJsonlDataset


def test_writer_line_format(tmp_path):
    p = tmp_path / "b.jsonl"
    bank.append_jsonl(p, {"case": "Ünïcode ‘q’", "plan": "", "case_label": "positive"})
    bank.append_jsonl(p, {"a": 1})
    assert p.read_text(encoding="utf-8") == '{"case": "Ünïcode ‘q’", "plan": "", "case_label": "positive"}\n{"a": 1}\n'
    assert bank.dumps_line({"x": {1}}, default=str) == '{"x": "{1}"}\n'


def test_shipped_memory_round_trips_byte_for_byte(data_dir):
    lines = (data_dir / "memory.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    rows = [json.loads(x) for x in lines]
    assert [bank.dumps_line(r) for r in rows] == lines
    assert len(rows) == 1278 and Counter(r["case_label"] for r in rows) == {"positive": 897, "negative": 381}
    assert sum(1 for x in lines if "\\u" in x) == 0 and sum(1 for x in lines if not x.isascii()) == 53
    texts, meta = bank.load_pool(data_dir / "memory.jsonl")
    assert len(texts) == 1278 and meta[0]["case_label"] == "positive"


def test_shipped_pairs_dummy_and_dataset(data_dir):
    ds = PairJsonlDataset(data_dir / "training_data.jsonl")
    assert len(ds) == 7000 and sum(ds.labels) == 1640 and len(set(ds.queries)) == 874
    items = bank.load_jsonl(data_dir / "dummy_memo.jsonl")
    pairs = bank.extract_pairs(items)
    assert len(pairs) == 8 and [i["reward"] for i in items] == [0, 0, 0, 0, 1, 1, 1, 1]
    bench = bank.load_dataset(data_dir / "deepresearcher.jsonl")
    assert len(bench.questions) == 3197 and len(set(bench.questions)) == 3193
    assert Counter(r["data_source"] for r in bench.rows)["Bamboogle"] == 125
    pilot = "Who was the director of Pilot?"
    last = [r["ground_truth"] for r in bench.rows if r["question"] == pilot][-1]
    assert bench.gt_map[pilot] == last


def test_read_finished_rules(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text('{"query": "a"}\n{"question": "b"}\n[1, 2]\n{"query": "", "question": "c"}\n{"query": "torn\n\n')
    assert bank.read_finished(p) == ["a", "b", "c"]
    assert bank.read_finished(tmp_path / "missing.jsonl") == []
