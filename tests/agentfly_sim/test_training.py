"""Trainer: labels (§10.4), splits and schedules (§10.5), checkpoints (§5.3)."""

from __future__ import annotations

import json
import os

import pytest

from agentfly_sim.bank import JsonlLineError
from agentfly_sim.training import (
    PairJsonlDataset,
    TrainConfig,
    class_weights,
    group_split_indices,
    normalize_label,
    query_leakage,
    schedule,
    stratified_split_indices,
    train,
)


@pytest.mark.parametrize("v", [True, 1, "1", " 1 ", 1.0, 0.5, [0]])
def test_labels_one(v):
    assert normalize_label(v) == 1


@pytest.mark.parametrize("v", [False, 0, 2, -1, "0", "2", 0.0, [], {}])
def test_labels_zero(v):
    assert normalize_label(v) == 0


@pytest.mark.parametrize("v", ["true", "", "1.0"])
def test_labels_raise(v):
    with pytest.raises(ValueError):
        normalize_label(v)


def _write(path, rows):
    path.write_text("".join((json.dumps(r) if not isinstance(r, str) else r) + "\n" for r in rows))
    return path


def test_dataset_errors_carry_line(tmp_path):
    p = _write(tmp_path / "p.jsonl", [{"query": "q", "case": "c", "truth_label": True}, "",
                                      {"query": "q", "case": "c"}])
    with pytest.raises(ValueError, match=r"^\[line 3\] missing query/case/truth_label$"):
        PairJsonlDataset(p)
    p = _write(tmp_path / "t.jsonl", [{"query": "q", "case": "c", "truth_label": "true"}])
    with pytest.raises(JsonlLineError) as e:
        PairJsonlDataset(p)
    assert e.value.lineno == 1
    p = _write(tmp_path / "m.jsonl", ["{bad"])
    with pytest.raises(JsonlLineError):
        PairJsonlDataset(p)


def test_icl_texts_use_plan(tmp_path):
    p = _write(tmp_path / "p.jsonl", [{"query": "q", "case": "c", "case_label": "x", "plan": '{"plan":[{"id":1,"description":"d"}]}',
                                       "truth_label": False}])
    assert PairJsonlDataset(p).samples[0] == {"natural": "q", "icl": "[CASE]\nc", "label": 0}
    assert PairJsonlDataset(p, use_plan=True).samples[0]["icl"] == "[CASE]\nc\n[PLAN]\n1. d"
    assert PairJsonlDataset(p, use_plan=True, plan_style="raw").samples[0]["icl"].endswith('[PLAN]\n{"plan":[{"id":1,"description":"d"}]}')


def test_small_split_rules():
    assert stratified_split_indices([1, 0], 0.1, 42) == ([0], [1])
    tr, va = stratified_split_indices([0] * 12, 1.0, 1, stratify=False)
    assert tr == [] and len(va) == 12


def test_shipped_splits(data_dir):
    ds = PairJsonlDataset(data_dir / "training_data.jsonl")
    tr, va = stratified_split_indices(ds.labels, 0.1, 42)
    assert (len(tr), len(va)) == (6300, 700)
    assert sum(ds.labels[i] for i in tr) == 1476 and sum(ds.labels[i] for i in va) == 164
    assert va[:10] == [5876, 3844, 184, 894, 4506, 2825, 2843, 6748, 6822, 5089]
    assert tr[:10] == [6339, 749, 6620, 5460, 2143, 2187, 4724, 5073, 5763, 3592]
    assert query_leakage(ds.queries, tr, va) == (700, 700)
    w = class_weights([ds.labels[i] for i in tr])
    assert w[0] == 1.0 and w[1] == pytest.approx(4824 / 1476)
    tr2, va2 = stratified_split_indices(ds.labels, 0.1, 42, stratify=False)
    assert len(va2) == 700 and sum(ds.labels[i] for i in va2) == 157
    assert query_leakage(ds.queries, tr2, va2) == (700, 700)
    tr3, va3 = group_split_indices(ds.queries, ds.labels, 0.1, 42)
    assert (len(tr3), len(va3), sum(ds.labels[i] for i in va3)) == (6312, 688, 160)
    assert query_leakage(ds.queries, tr3, va3) == (0, 688)


def test_schedules():
    s = schedule(6300, 32, 10, 0.06, 500)
    assert (s["batches_per_epoch"], s["total_steps"], s["warmup_steps"], s["step_evals"]) == (197, 1970, 118, [500, 1000, 1500])
    s = schedule(6300, 32, 3, 0.06, 500)
    assert (s["total_steps"], s["warmup_steps"], s["step_evals"]) == (591, 35, [500])


def _tiny(tmp_path, n=12):
    rows = []
    for i in range(n):
        rows.append({"query": f"query {i % 4}", "case": f"case {i}", "case_label": "positive",
                     "plan": '{"plan":[{"id":1,"description":"look it up"}]}', "truth_label": i % 4 == 0})
    return _write(tmp_path / "tiny.jsonl", rows)


def test_train_without_save_best_leaves_only_last(tmp_path):
    out = tmp_path / "ck"
    r = train(TrainConfig(train=str(_tiny(tmp_path)), output_dir=str(out), epochs=1, batch_size=8, val_ratio=0.25,
                          freeze_backbone=True), log=lambda s: None)
    assert sorted(os.listdir(out)) == ["last.pt", "metrics.json"]
    assert r.best_path is None
    m = json.loads((out / "metrics.json").read_text())
    assert m["n_train"] + m["n_val"] == 12 and m["evaluations"][-1]["kind"] == "epoch"


def test_train_save_best_strict(tmp_path):
    out = tmp_path / "ck"
    lines: list[str] = []
    r = train(TrainConfig(train=str(_tiny(tmp_path)), output_dir=str(out), epochs=2, batch_size=4, val_ratio=0.25,
                          save_best=True, eval_every=1, use_plan=True, freeze_backbone=True), log=lines.append)
    assert (out / "best.pt").exists() and (out / "last.pt").exists()
    updates = sum(1 for x in lines if x.startswith("  -> best updated:"))
    scores = [e["auc"] if e["auc"] == e["auc"] else e["f1"] for e in r.evaluations]
    strict = 0
    best = -1.0
    for s in scores:
        if s > best:
            strict += 1
            best = s
    assert updates == strict
    assert lines[-2].startswith("Training done. Final:") and lines[-1].startswith("Best checkpoint:")


def test_train_full_backbone_tiny(tmp_path):
    """Reference path (backbone trained, no freeze) on 8 rows, 1 epoch."""
    out = tmp_path / "ck"
    r = train(TrainConfig(train=str(_tiny(tmp_path, 8)), output_dir=str(out), epochs=1, batch_size=8,
                          val_ratio=0.25, max_len=32), log=lambda s: None)
    assert os.path.exists(r.last_path)
    import torch

    state = torch.load(r.last_path)
    assert "classifier.0.weight" in state and "classifier.3.weight" in state and any(k.startswith("sentence_bert.") for k in state)
