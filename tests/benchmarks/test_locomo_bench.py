"""``memsim bench locomo``: --quick end to end through the CLI, one-line data errors, and per-conversation files
that survive an interrupted run (fault injected at the write of the second conversation)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from harness.cli import app
from harness.faults import FaultInjected, FaultPlan
from harness.workloads.locomo import find_locomo_path

torch.set_num_threads(1)
runner = CliRunner()
SHIPPED = find_locomo_path()


def _tiny(sample: str) -> dict:
    return {
        "sample_id": sample,
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bob",
            "session_1_date_time": "1:00 pm on 1 May, 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat called Tom."},
                          {"speaker": "Bob", "dia_id": "D1:2", "text": "I bought a bicycle."}],
        },
        "qa": [{"question": "What is the cat called?", "answer": "Tom", "evidence": ["D1:1"], "category": 4},
               {"question": "What did Bob buy?", "answer": "a bicycle", "evidence": ["D1:2"], "category": 4}],
    }


@pytest.mark.skipif(SHIPPED is None, reason="LoCoMo data not present")
def test_bench_locomo_quick_cli(tmp_path: Path) -> None:
    res = runner.invoke(app, ["bench", "locomo", "--quick", "--no-progress", "--out", str(tmp_path),
                              "--arms", "full,last20,bm25,oracle,fractal", "--k", "2", "--k", "4"])
    assert res.exit_code == 0, res.output
    for ext in ("json", "md", "png"):
        assert (tmp_path / f"locomo.{ext}").stat().st_size > 0 and f"locomo.{ext}" in res.output
    payload = json.loads((tmp_path / "locomo.json").read_text())
    [conv] = payload["conversations"]
    assert (tmp_path / "locomo" / f"{conv['conversation']}.json").exists()
    rows = payload["aggregate"]["rows"]
    assert {"full", "last20", "bm25@2", "bm25@4", "oracle"} <= set(rows)
    assert 0 < conv["n_probes"] <= 6 and conv["n_sessions"] == 3
    assert rows["oracle"]["headline"]["evidence_recall"] == 1.0 and rows["full"]["headline"]["evidence_recall"] == 1.0
    assert rows["bm25@2"]["headline"]["delivered_turns"] == 2.0
    assert rows["full"]["headline"]["tokens_mean"] > rows["bm25@4"]["headline"]["tokens_mean"]
    fr = payload["aggregate"]["arm_status"]["fractal"][conv["conversation"]]
    assert fr["status"] in ("ok", "unavailable", "error")
    if fr["status"] == "ok":
        assert rows["fractal"]["headline"]["stored_recall"] is not None
    else:  # never a silent drop: the reason is in the report
        assert fr["message"] and "fractal" in (tmp_path / "locomo.md").read_text()
    assert "f1" not in rows["full"]["headline"]  # no --lm, no answer score


def test_bench_locomo_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    res = runner.invoke(app, ["bench", "locomo", "--data", str(bad), "--no-progress", "--out", str(tmp_path / "o")])
    assert res.exit_code == 1 and "not JSON" in res.output and str(bad) in res.output.replace("\n", "")
    res = runner.invoke(app, ["bench", "locomo", "--data", str(tmp_path / "none"), "--no-progress"])
    assert res.exit_code == 1 and "no such file" in res.output
    good = tmp_path / "d.json"
    good.write_text(json.dumps([_tiny("a")]))
    res = runner.invoke(app, ["bench", "locomo", "--data", str(good), "--arms", "nope", "--no-progress"])
    assert res.exit_code == 1 and "unknown arm" in res.output
    res = runner.invoke(app, ["bench", "locomo", "--data", str(good), "--conversation", "zz", "--no-progress",
                              "--arms", "full", "--out", str(tmp_path / "o")])
    assert res.exit_code == 1 and "unknown conversation zz" in res.output
    assert not (tmp_path / "o" / "locomo.json").exists()


def test_interrupted_run_keeps_finished_conversations(tmp_path: Path) -> None:
    from benchmarks import locomo as mod

    data = tmp_path / "d.json"
    data.write_text(json.dumps([_tiny("conv-a"), _tiny("conv-b")]))
    out = tmp_path / "out"
    plan = FaultPlan({"locomo.conversation.write": 2})
    with pytest.raises(FaultInjected):
        mod.run(out, data=data, arms="full,oracle", fault_hook=plan)
    files = sorted(p.name for p in (out / "locomo").iterdir())
    assert files == ["conv-a.json"]  # the finished one is kept, the interrupted one left no partial file
    first = json.loads((out / "locomo" / "conv-a.json").read_text())
    assert first["conversation"] == "conv-a" and {r["row"] for r in first["records"]} == {"full", "oracle"}
    assert first["summary"]["oracle"]["headline"]["evidence_recall"] == 1.0
    assert not (out / "locomo.json").exists()
    paths = mod.run(out, data=data, arms="full,oracle")
    assert sorted(p.name for p in (out / "locomo").iterdir()) == ["conv-a.json", "conv-b.json"]
    assert out / "locomo.md" in paths


def test_lm_answers_are_scored_per_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import locomo as mod
    from tests.harness.test_locomo_answer import _Server

    data = tmp_path / "d.json"
    data.write_text(json.dumps([_tiny("conv-a")]))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with _Server("Tom") as srv, pytest.raises(ValueError, match="--lm check call failed: .*API key"):
        mod.run(tmp_path / "out", data=data, arms="full", lm="openai/test",
                lm_base=f"http://127.0.0.1:{srv.port}/v1")
    assert not (tmp_path / "out").exists()
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    with _Server("Tom") as srv:
        mod.run(tmp_path / "out", data=data, arms="full,oracle", lm="openai/test",
                lm_base=f"http://127.0.0.1:{srv.port}/v1")
    payload = json.loads((tmp_path / "out" / "locomo.json").read_text())
    rows = payload["aggregate"]["rows"]
    # the server always answers "Tom": right for the cat question, wrong for the bicycle one
    assert rows["oracle"]["headline"]["f1"] == 0.5 and rows["oracle"]["headline"]["n_answered"] == 2
    assert len(srv.requests) == 5  # the check call, then 2 probes x 2 rows, each through HTTP
    assert "Answer F1 per category" in (tmp_path / "out" / "locomo.md").read_text()
