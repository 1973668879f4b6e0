"""``memsim data check``: good inputs (the shipped copies when present, a checkout made here) and broken ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.datacheck import check_agentfly, check_locomo

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
runner = CliRunner()


def _jsonl(path: Path, rows: list, raw_tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + raw_tail, encoding="utf-8")
    return path


def _checkout(root: Path) -> Path:
    """A small AgentFly checkout in the upstream layout (memory/, data/)."""
    plan = json.dumps({"plan": [{"id": 1, "description": "look it up"}]})
    _jsonl(root / "memory" / "memory.jsonl", [{"case": f"q{i}", "plan": plan, "case_label": "positive"}
                                              for i in range(3)])
    _jsonl(root / "memory" / "training_data.jsonl",
           [{"query": "a", "case": "q0", "case_label": "positive", "plan": plan, "truth_label": True},
            {"query": "a", "case": "q1", "case_label": "positive", "plan": plan, "truth_label": True},
            {"query": "b", "case": "q1", "case_label": "positive", "plan": plan, "truth_label": False}])
    _jsonl(root / "memory" / "dummy_memo.jsonl", [{"question": "q0", "plan": plan, "reward": 1},
                                                  {"reward": 0, "plan": plan}])
    _jsonl(root / "data" / "deepresearcher.jsonl",
           [{"question": "x", "ground_truth": "1", "data_source": "s"},
            {"question": "x", "ground_truth": "2", "data_source": "s"},
            {"question": "y", "ground_truth": "a<|answer_split|>b", "data_source": "s"}])
    return root


def _by_name(reports) -> dict:
    return {Path(r.path).name: r for r in reports}


def test_made_checkout_counts_and_quirks(tmp_path: Path) -> None:
    reps = _by_name(check_agentfly(_checkout(tmp_path / "AgentFly")))
    assert all(r.usable for r in reps.values()), {n: r.errors for n, r in reps.items()}
    assert reps["memory.jsonl"].rows == 3 and reps["memory.jsonl"].shapes == {"case,case_label,plan": 3}
    tr = reps["training_data.jsonl"]
    assert tr.facts["queries"] == 2 and tr.facts["queries_with_one_label"] == 2
    assert any("single truth_label" in q for q in tr.quirks)
    np_bank = reps["dummy_memo.jsonl"]
    assert np_bank.facts["extracted_pairs"] == 2
    assert any("first key -> question" in q for q in np_bank.quirks)  # {"reward", "plan"}: reward becomes the key
    ds = reps["deepresearcher.jsonl"]
    assert ds.rows == 3 and ds.facts["distinct_questions"] == 2
    assert any("1 question(s) occur more than once" in q and "1 with differing" in q for q in ds.quirks)
    assert any("<|answer_split|>" in q for q in ds.quirks)


def test_broken_checkout_one_error_per_unusable_file(tmp_path: Path) -> None:
    root = _checkout(tmp_path / "AgentFly")
    _jsonl(root / "memory" / "memory.jsonl", [{"case": "q0", "plan": "p"}], raw_tail="{not json\n")
    _jsonl(root / "memory" / "training_data.jsonl", [{"query": "a", "case": "q0"}])
    (root / "data" / "deepresearcher.jsonl").unlink()
    _jsonl(root / "memory" / "dummy_memo.jsonl", [{"question": "q0", "plan": "p", "reward": 1}],
           raw_tail="oops\n")
    reps = _by_name(check_agentfly(root))
    assert "AGF-07" in reps["memory.jsonl"].errors[0] and "line 2" in reps["memory.jsonl"].errors[0]
    assert "lacks one of" in reps["training_data.jsonl"].errors[0]
    assert reps["deepresearcher.jsonl"].errors[0].startswith("missing")
    assert reps["dummy_memo.jsonl"].usable  # the NP loader skips a bad line: a quirk, not an error
    assert any("AGF-05" in q for q in reps["dummy_memo.jsonl"].quirks)

    res = runner.invoke(app, ["data", "check", "--agentfly", str(root)])
    assert res.exit_code == 1
    err_lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(err_lines) == 3
    assert any("deepresearcher.jsonl: missing" in ln for ln in err_lines)


def test_dataset_blank_line_is_unusable(tmp_path: Path) -> None:
    root = _checkout(tmp_path / "AgentFly")
    _jsonl(root / "data" / "deepresearcher.jsonl", [{"question": "x", "ground_truth": "1"}], raw_tail="\n")
    assert "refuses to start" in _by_name(check_agentfly(root))["deepresearcher.jsonl"].errors[0]


def _conv(sample: str, evidence: list[str]) -> dict:
    return {"speaker_a": "Ann", "speaker_b": "Bob", "session_1_date_time": "1:00 pm on 1 May, 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "hi"},
                          {"speaker": "Bob", "dia_id": "D1:2", "text": "look", "img_url": ["u"],
                           "blip_caption": "a dog"}],
            "qa": [{"question": "who?", "answer": "Ann", "evidence": evidence, "category": 4},
                   {"question": "why?", "adversarial_answer": "no", "evidence": ["D1:2"], "category": 5}]}


def test_locomo_both_layouts_and_quirks(tmp_path: Path) -> None:
    v2 = tmp_path / "conv-1.json"
    v2.write_text(json.dumps(_conv("conv-1", ["D1:1; D1:2", "D", "D9:9"])), encoding="utf-8")
    canon = tmp_path / "locomo10.json"
    c = _conv("conv-2", ["D1:1"])
    canon.write_text(json.dumps([{"sample_id": "conv-2", "conversation": {k: v for k, v in c.items() if k != "qa"},
                                  "qa": c["qa"]}]), encoding="utf-8")
    reps = _by_name(check_locomo(tmp_path))
    r1, r2 = reps["conv-1.json"], reps["locomo10.json"]
    assert r1.facts["turns"] == 2 and r1.facts["qa"] == 2 and r1.facts["qa_by_category"] == {"4": 1, "5": 1}
    assert r2.facts["layout"].startswith("list")
    quirks = "\n".join(r1.quirks)
    for text in ("several ids", "not a dia_id", "naming no turn", "sharing a photo", "adversarial_answer"):
        assert text in quirks
    assert "several ids" not in "\n".join(r2.quirks)


def test_locomo_unusable_inputs(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{oops", encoding="utf-8")
    (tmp_path / "wrong.json").write_text(json.dumps({"hello": 1}), encoding="utf-8")
    noqa = _conv("c", [])
    del noqa["qa"]
    (tmp_path / "noqa.json").write_text(json.dumps(noqa), encoding="utf-8")
    reps = _by_name(check_locomo(tmp_path))
    assert reps["bad.json"].errors[0].startswith("not loadable as JSON text: Expecting property name")
    assert "neither LoCoMo layout" in reps["wrong.json"].errors[0]
    # valid JSON of the wrong layout says so (what was found, what is expected), not "not loadable as JSON text"
    assert reps["wrong.json"].errors[0].startswith("valid JSON, but not LoCoMo data")
    assert "an object with keys 'hello'" in reps["wrong.json"].errors[0]
    assert "no 'qa' list" in reps["noqa.json"].errors[0]
    assert not check_locomo(tmp_path / "absent.json")[0].usable
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no *.json" in check_locomo(empty)[0].errors[0]
    res = runner.invoke(app, ["data", "check", "--locomo", str(tmp_path / "wrong.json")])
    assert res.exit_code == 1 and res.stderr.strip().startswith("error:")
    assert len(res.stderr.strip().splitlines()) == 1
    assert "not loadable as JSON" not in res.stderr and "not LoCoMo data" in res.stderr


def test_cli_needs_a_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MEMSIM_AGENTFLY_DATA", raising=False)
    monkeypatch.delenv("MEMSIM_LOCOMO_DATA", raising=False)
    monkeypatch.setenv("MEMSIM_DATA_DIR", str(tmp_path / "nothing-fetched"))
    res = runner.invoke(app, ["data", "check"])
    assert res.exit_code == 1 and "nothing to check" in res.stderr


@pytest.mark.corpus
def test_shipped_agentfly_copy(tmp_path: Path) -> None:
    src = SHARED / "agentfly"
    if not (src / "memory.jsonl").exists():
        pytest.skip("../shared/data/agentfly absent")
    reps = _by_name(check_agentfly(src))
    assert all(r.usable for r in reps.values())
    assert reps["memory.jsonl"].rows == 1278 and reps["training_data.jsonl"].rows == 7000
    assert reps["dummy_memo.jsonl"].rows == 8 and reps["deepresearcher.jsonl"].rows == 3197
    out = tmp_path / "report.json"
    res = runner.invoke(app, ["data", "check", "--agentfly", str(src), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert len(json.loads(out.read_text())) == 4 and f"wrote {out}" in res.output


def test_shipped_locomo_copy() -> None:
    src = SHARED / "locomo"
    if not (src / "conv-26.json").exists():
        pytest.skip("../shared/data/locomo absent")
    reps = _by_name(check_locomo(src))
    assert all(r.usable for r in reps.values()), {n: r.errors for n, r in reps.items()}
    assert reps["conv-26.json"].facts["turns"] == 419 and reps["conv-26.json"].facts["qa"] == 199
    assert any("several ids" in q for q in reps["conv-26.json"].quirks)
    assert any("naming no turn" in q for q in reps["conv-42.json"].quirks)
