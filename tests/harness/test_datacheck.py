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


# --------------------------------------------------------------------------------------------------- LongMemEval
def _lme(tmp_path: Path, mutate=None, name: str = "lme.json") -> Path:
    from tests.harness import lme_fixture

    qs = json.loads(json.dumps(lme_fixture.quirky_questions()))  # no shared sub-objects
    if mutate is not None:
        mutate(qs)
    return lme_fixture.write(tmp_path / name, qs)


def test_longmemeval_check_counts_by_hand(tmp_path: Path) -> None:
    from harness.datacheck import check_longmemeval

    def more(qs):
        qs[0]["note"] = 1
        del qs[4]["answer_session_ids"]
        qs.append(json.loads(json.dumps(qs[0])))  # the same question id twice

    [rep] = check_longmemeval(_lme(tmp_path, more))
    assert rep.usable, rep.errors
    f = rep.facts
    assert rep.rows == 6 and f["questions_by_type"]["single-session-user"] == 2 and f["abstention"] == 1
    # sessions per question: 3, 3, 3, 2, 3, 3; turns: 10, 6, 6, 6, 6, 10
    assert f["sessions_per_question"] == {"min": 2, "median": 3.0, "max": 3}
    assert f["turns_per_question"] == {"min": 6, "median": 6.0, "max": 10}
    assert f["session_occurrences"] == 17 and f["turns"] == 44
    # has_answer true: q_user_1 one user turn (twice: the repeated question), q_asst_1 one assistant turn,
    # q_multi_1 two, q_temp one, q_ku one
    assert f["has_answer_true_turns"] == {"user": 6, "assistant": 1}
    assert f["questions_without_user_evidence"] == 1  # q_asst_1
    assert f["averaging_n"] == {"paper": 5, "strict": 4}
    assert f["unknown_fields"] == {"note": 2}
    assert "not a published release" in f["release"]
    quirks = "\n".join(rep.quirks)
    for text in ("1 question(s) list a session id more than once (1 extra", "1 question id(s) occur more than once",
                 "6 question(s) have haystack dates out of order", "1 session(s) in 1 question(s) are dated after",
                 "the strict averaging drops them", "1 assistant turn(s) have has_answer true",
                 "answer_session_ids absent in 1", "unknown fields ignored: note (2)", "1 answer(s) are numbers",
                 "2 evidence session(s) have no user turn with has_answer true"):  # answer_2222_1, answer_5555_1
        assert text in quirks, (text, quirks)


def test_longmemeval_check_reports_the_loader_error_and_streams(tmp_path: Path, monkeypatch) -> None:
    from harness.datacheck import check_longmemeval

    path = _lme(tmp_path, lambda qs: qs[2]["haystack_sessions"][0][0].pop("has_answer"))

    def no_whole_file_load(*a, **k):
        raise AssertionError("the check must stream the file, not json.load it")

    monkeypatch.setattr(json, "load", no_whole_file_load)
    monkeypatch.setattr(json, "loads", no_whole_file_load)
    [rep] = check_longmemeval(path)
    assert not rep.usable and rep.rows == 2  # the questions before the bad one were read
    assert rep.errors == ["question q_multi_1: haystack_sessions[0][0] (session answer_3333_1, turn 1): has_answer: "
                          "missing on a user turn of an evidence session, expected a boolean (the official "
                          "retrieval code fails there)"]
    assert "a folder" in check_longmemeval(tmp_path)[0].errors[0]
    (tmp_path / "empty.json").write_text("[]")
    assert check_longmemeval(tmp_path / "empty.json")[0].errors == ["no questions (an empty array)"]


def test_cli_check_longmemeval_option_environment_and_errors(tmp_path: Path, monkeypatch) -> None:
    good = _lme(tmp_path)
    res = runner.invoke(app, ["data", "check", "--longmemeval", str(good), "--json", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    assert "1 file(s) usable" in res.stdout and json.loads((tmp_path / "r.json").read_text())[0]["rows"] == 5
    bad = _lme(tmp_path, lambda qs: qs[1]["haystack_dates"].pop(), name="bad.json")
    res = runner.invoke(app, ["data", "check", "--longmemeval", str(bad)])
    assert res.exit_code == 1
    assert [ln for ln in res.stderr.splitlines() if ln.strip()] == [
        f"error: {bad}: question q_asst_1: haystack_session_ids, haystack_dates, haystack_sessions: lists of "
        "different lengths (3, 2, 3)"]
    for env in ("MEMSIM_AGENTFLY_DATA", "MEMSIM_LOCOMO_DATA"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv("MEMSIM_DATA_DIR", str(tmp_path / "nothing-fetched"))
    monkeypatch.setenv("MEMSIM_LONGMEMEVAL_DATA", str(good))
    res = runner.invoke(app, ["data", "check"])
    assert res.exit_code == 0, res.output
    assert f"LongMemEval: {good} (from $MEMSIM_LONGMEMEVAL_DATA)" in res.stdout and "LoCoMo: not found" in res.stdout


def test_longmemeval_check_progress_reaches_the_file_size(tmp_path: Path) -> None:
    from harness.datacheck import check_longmemeval

    path = _lme(tmp_path)
    seen: list[tuple[int, int]] = []
    check_longmemeval(path, progress=lambda done, total: seen.append((done, total)))
    size = path.stat().st_size
    assert len(seen) == 5 and all(t == size for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and 0 < seen[-1][0] <= size


def test_cli_check_names_a_generated_file_and_every_question_type(tmp_path: Path) -> None:
    """A generated file whose sidecar matches it is named as generated (the label every bench uses), every one of
    its question types is shown (none hidden behind "+1 more"), and once another file is saved over it the stale
    sidecar is reported instead of trusted."""
    import shutil

    from benchmarks.worlds import longmemeval as W

    lme, other = tmp_path / "lme.json", tmp_path / "other.json"
    W.write_file(lme, 12, seed=9, sessions=8)
    W.write_file(other, 4, seed=3, sessions=8)
    res = runner.invoke(app, ["data", "check", "--longmemeval", str(lme)], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    flat = " ".join(res.stdout.split())
    assert "release: generated by benchmarks.worlds.longmemeval seed 9, not a published release" in flat
    types = json.loads(W.sidecar_path(lme).read_text())["question_types"]
    assert len(types) == 6 and "more" not in flat.split("questions_by_type:")[1].split("abstention:")[0]
    for t, n in types.items():
        assert f"{t}: {n}" in flat
    shutil.copyfile(other, lme)
    res = runner.invoke(app, ["data", "check", "--longmemeval", str(lme)], env={"COLUMNS": "400"})
    flat = " ".join(res.stdout.split())
    assert res.exit_code == 0 and "generated by" not in flat and "release: not a published release" in flat
    assert "lme.json.generator.json does not describe lme.json (it records" in flat
