"""``memsim agentfly retrieve|train|run``: outputs, paths and one-line errors."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from harness.cli.agentfly import app

runner = CliRunner()


def _pool(tmp_path, n=6):
    p = tmp_path / "pool.jsonl"
    p.write_text("".join(json.dumps({"case": f"Case {i}?", "plan": '{"plan":[{"id":1,"description":"d"}]}',
                                     "case_label": "positive"}) + "\n" for i in range(n)))
    return p


def test_retrieve_format_and_topk(tmp_path, untrained_ckpt):
    pool = _pool(tmp_path)
    r = runner.invoke(app, ["retrieve", "--model_path", str(untrained_ckpt), "--pool_jsonl", str(pool),
                            "--query", "q?", "--topk", "2"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("[1] score=") and lines[0].endswith("label=positive")
    assert lines[1] == "[CASE]" and lines[2].startswith("Case ") and lines[3] == "[PLAN]" and lines[5] == "-" * 60
    assert r.output.count("-" * 60 + "\n") == 2
    r = runner.invoke(app, ["retrieve", "--model_path", str(untrained_ckpt), "--pool_jsonl", str(pool),
                            "--query", "q?", "--topk", "0", "--cache_case_vectors"])
    assert r.output.count("-" * 60 + "\n") == 6


def test_retrieve_bad_inputs_one_line(tmp_path, untrained_ckpt):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"case":"a"}\n{bad\n')
    r = runner.invoke(app, ["retrieve", "--model_path", str(untrained_ckpt), "--pool_jsonl", str(bad), "--query", "q"])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert f"{bad}:2: malformed JSON" in r.output
    r = runner.invoke(app, ["retrieve", "--model_path", str(tmp_path / "none.pt"), "--pool_jsonl",
                            str(_pool(tmp_path)), "--query", "q"])
    assert r.exit_code == 1 and "none.pt" in r.output and "Traceback" not in r.output
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    r = runner.invoke(app, ["retrieve", "--model_path", str(untrained_ckpt), "--pool_jsonl", str(empty), "--query", "q"])
    assert r.exit_code == 1 and "Pool is empty" in r.output


def test_train_cli_subset_and_bad_label(tmp_path):
    rows = [{"query": f"q{i % 3}", "case": f"c{i}", "case_label": "positive", "plan": "p", "truth_label": i % 3 == 0}
            for i in range(20)]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "ck"
    r = runner.invoke(app, ["train", "--train", str(data), "--output_dir", str(out), "--max_rows", "10",
                            "--epochs", "1", "--batch_size", "4", "--freeze_backbone", "--save_best", "--use_plan",
                            "--val_ratio", "0.3"])
    assert r.exit_code == 0, r.output
    assert (out / "last.pt").exists() and (out / "metrics.json").exists()
    assert f"wrote {out / 'last.pt'}" in r.output and "Training done. Final:" in r.output
    m = json.loads((out / "metrics.json").read_text())
    assert m["n_train"] + m["n_val"] == 10
    rows[3]["truth_label"] = "true"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = runner.invoke(app, ["train", "--train", str(data), "--output_dir", str(out)])
    assert r.exit_code == 1 and f"{data}:4:" in r.output and "Traceback" not in r.output


def test_run_np_and_bad_dataset(tmp_path):
    ds = tmp_path / "ds.jsonl"
    ds.write_text("".join(json.dumps({"question": f"Q{i}?", "ground_truth": "a"}) + "\n" for i in range(3)))
    bank = tmp_path / "bank.jsonl"
    bank.write_text(json.dumps({"question": "Seed?", "plan": "", "reward": 1}) + "\n")
    out = tmp_path / "out"
    r = runner.invoke(app, ["run", "--driver", "np", "--dataset", str(ds), "--bank", str(bank), "--out", str(out),
                            "--limit", "2"])
    assert r.exit_code == 0, r.output
    assert "processed 2" in r.output and str(out / "result/result_round_0.jsonl") in r.output
    assert len((out / "memory/dummy_memo.jsonl").read_text().splitlines()) == 3
    assert bank.read_text().count("\n") == 1  # the given bank is copied, never modified
    ds.write_text('{"question": "Q?"}\nnot json\n')
    r = runner.invoke(app, ["run", "--driver", "np", "--dataset", str(ds), "--bank", str(bank), "--out", str(out)])
    assert r.exit_code == 1 and f"{ds}:2:" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["run", "--driver", "xx", "--dataset", str(ds)])
    assert r.exit_code == 2 and "invalid value for '--driver': 'xx'; choose from np, pm" in r.output


def test_train_refuses_non_positive_schedule_flags_in_one_line(tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"query": "q", "case": "c", "plan": "p", "truth_label": True}) + "\n")
    for args in (["--eval_every", "0"], ["--batch_size", "0"], ["--epochs", "-1"], ["--val_ratio", "1.5"]):
        r = runner.invoke(app, ["train", "--train", str(pairs), "--output_dir", str(tmp_path / "o"), *args])
        assert r.exit_code == 2, (args, r.output)  # a usage error
        assert "Traceback" not in r.output and f"invalid value for '{args[0]}': {args[1]}" in r.output
        assert not (tmp_path / "o" / "last.pt").exists()


def test_run_refuses_negative_limit_and_top_k(tmp_path):
    for args in (["--limit", "-1"], ["--top_k", "-2"]):
        r = runner.invoke(app, ["run", "--driver", "np", "--out", str(tmp_path / "o"), *args])
        assert r.exit_code == 2 and f"invalid value for '{args[0]}': {args[1]}; 0 or more" in r.output
        assert "Traceback" not in r.output
        assert not (tmp_path / "o").exists()
