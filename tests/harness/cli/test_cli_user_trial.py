"""What a new user met trying every command (progress, empty output folders, 80-column output, data lookup,
arm naming, messages that say what is wrong): one test per finding, each failing on the code before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app

runner = CliRunner()


def test_agentfly_run_bank_that_is_a_folder_says_so(tmp_path: Path) -> None:
    dataset = tmp_path / "deepresearcher.jsonl"
    dataset.write_text(json.dumps({"question": "q?", "ground_truth": "a"}) + "\n", encoding="utf-8")
    bank = tmp_path / "bank"
    bank.mkdir()
    res = runner.invoke(app, ["agentfly", "run", "--driver", "np", "--dataset", str(dataset), "--bank", str(bank),
                              "--out", str(tmp_path / "out")])
    assert res.exit_code == 1
    assert f"{bank}: --bank is a directory" in res.stderr and "not found" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def _tiny_locomo(tmp_path: Path) -> Path:
    turns = [{"speaker": "Ann" if i % 2 == 0 else "Bob", "dia_id": f"D1:{i + 1}",
              "text": f"turn {i} about the {w} we saw"} for i, w in enumerate(["cat", "bicycle", "garden", "lake"])]
    conv = {"sample_id": "conv-t", "conversation": {"speaker_a": "Ann", "speaker_b": "Bob",
                                                    "session_1_date_time": "1:00 pm on 1 May, 2023",
                                                    "session_1": turns},
            "qa": [{"question": "What did we see at the lake?", "answer": "a lake", "evidence": ["D1:4"],
                    "category": 4},
                   {"question": "Which cat?", "answer": "the cat", "evidence": ["D1:1"], "category": 4}]}
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([conv]), encoding="utf-8")
    return path


ARM = '''
from harness.workloads.base import Delivery


class FirstTurnArm:
    name = "firstturn"
    rows = ("firstturn",)

    def __init__(self, ctx):
        self.ids = []

    def ingest(self, conversation):
        self.ids = [t.dia_id for t in conversation.turns()]

    def deliver(self, probe):
        return {"firstturn": Delivery(text="x", dia_ids=frozenset(self.ids[:1]), meta={})}

    def stored(self):
        return frozenset(self.ids)

    def close(self):
        pass
'''


def test_arm_class_runs_under_the_paper_protocol(tmp_path: Path, monkeypatch) -> None:
    import torch

    torch.set_num_threads(1)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "trial_arms.py").write_text(ARM, encoding="utf-8")
    monkeypatch.syspath_prepend(str(plugins))
    out = tmp_path / "out"
    res = runner.invoke(app, ["bench", "locomo", "--protocol", "locomo-paper", "--data", str(_tiny_locomo(tmp_path)),
                              "--retrievers", "bm25", "--arms", "none", "--arm-class", "trial_arms:FirstTurnArm",
                              "--no-progress", "--out", str(out)])
    assert res.exit_code == 0, res.output
    payload = json.loads((out / "locomo-paper.json").read_text())
    [row] = payload["design_rows"]
    assert row["retriever"] == "firstturn" and row["n_questions"] == 2 and row["conversations"] == ["conv-t"]
    assert payload["config"]["arm_classes"] == ["trial_arms:FirstTurnArm"]


def test_arms_naming_only_an_unimportable_arm_exits_1_with_one_line(tmp_path: Path, monkeypatch) -> None:
    import harness.workloads.arms as arms_mod
    from harness.workloads.arms import ArmSpec

    ghost = ArmSpec("ghost", "external", "entry point no_such_pkg_xyz:Ghost", "no_such_pkg_xyz", "Ghost")
    monkeypatch.setattr(arms_mod, "entry_point_specs", lambda: {"ghost": ghost})
    data = _tiny_locomo(tmp_path)
    for protocol in ("designs", "locomo-paper"):
        out = tmp_path / f"out-{protocol}"
        res = runner.invoke(app, ["bench", "locomo", "--protocol", protocol, "--data", str(data), "--arms", "ghost",
                                  "--retrievers" if protocol == "locomo-paper" else "--k",
                                  "bm25" if protocol == "locomo-paper" else "1", "--no-progress", "--out", str(out)])
        assert res.exit_code == 1, (protocol, res.output)
        [line] = res.stderr.strip().splitlines()
        assert line.startswith("error: no selected arm can run:") and "no_such_pkg_xyz" in line
        assert not out.exists()  # nothing written, no folder left behind


def test_failed_bench_run_leaves_no_empty_output_folder(tmp_path: Path) -> None:
    data = _tiny_locomo(tmp_path)
    folder = tmp_path / "conversations"
    folder.mkdir()  # a --data folder holding no conversation file
    malformed = tmp_path / "malformed.json"
    malformed.write_text("{oops", encoding="utf-8")
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"hello": 1}), encoding="utf-8")
    cases = [(["--data", str(data), "--conversation", "conv-99"], "unknown conversation conv-99"),
             (["--data", str(folder)], "no *.json"), (["--data", str(malformed)], "not JSON"),
             (["--data", str(wrong)], str(wrong))]
    for i, (args, needle) in enumerate(cases):
        out = tmp_path / f"x{i}" / "run"  # two levels that do not exist yet
        res = runner.invoke(app, ["bench", "locomo", *args, "--arms", "full", "--no-progress", "--out", str(out)])
        assert res.exit_code == 1 and needle in res.stderr, (args, res.output)
        assert not (tmp_path / f"x{i}").exists(), args
    kept = tmp_path / "kept"  # a folder that existed before the run stays, and so does what it held
    (kept / "old").mkdir(parents=True)
    res = runner.invoke(app, ["bench", "locomo", "--data", str(data), "--conversation", "conv-99", "--arms", "full",
                              "--no-progress", "--out", str(kept)])
    assert res.exit_code == 1 and (kept / "old").is_dir()


def test_crash_summary_is_words_at_80_columns_and_a_failed_run_leaves_no_folder(tmp_path: Path,
                                                                                 monkeypatch) -> None:
    import harness.reliability.crash as crash_mod

    monkeypatch.setenv("COLUMNS", "80")
    out = tmp_path / "crash"
    res = runner.invoke(app, ["crash", "--design", "fractal", "--sequence", "fractal.submit", "--max-points", "2",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert "{" not in res.stderr and "'ok'" not in res.stderr  # no raw Python dict
    assert any(line.strip().startswith("outcomes: ok ") for line in lines)
    # every line fits in 80 columns, except a `wrote <path>` line, which is printed whole (a path is never split)
    assert all(len(line) <= 80 for line in lines if not line.startswith("wrote ")), lines
    assert f"wrote {out / 'crash.json'}" in lines and f"wrote {out / 'crash.md'}" in lines

    def broken(*_a, **_k):
        raise RuntimeError("scenario broke")

    monkeypatch.setattr(crash_mod, "explore", broken)
    gone = tmp_path / "new" / "crash"
    res = runner.invoke(app, ["crash", "--design", "fractal", "--max-points", "1", "--out", str(gone)])
    assert res.exit_code == 1 and "scenario broke" in res.stderr
    assert not (tmp_path / "new").exists()


def test_data_check_names_every_data_set_and_reads_per_conversation_files(tmp_path: Path, monkeypatch) -> None:
    from harness.datapaths import resolve_locomo

    home = tmp_path / "data"
    (home / "agentfly").mkdir(parents=True)
    (home / "agentfly" / "dummy_memo.jsonl").write_text(json.dumps({"question": "q", "plan": "p", "reward": 1}) + "\n",
                                                        encoding="utf-8")
    monkeypatch.setenv("MEMSIM_DATA_DIR", str(home))
    monkeypatch.delenv("MEMSIM_LOCOMO_DATA", raising=False)
    monkeypatch.delenv("MEMSIM_AGENTFLY_DATA", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    res = runner.invoke(app, ["data", "check"])
    # only AgentFly is there: LoCoMo is named too, with where it was looked for
    assert "LoCoMo: not found" in res.stdout and "looked at $MEMSIM_LOCOMO_DATA (not set)" in res.stdout
    assert f"looked at {home / 'locomo' / 'locomo10.json'} (absent)" in res.stdout
    # per-conversation files copied into <data folder>/locomo/ are read as that folder
    conv = json.loads(_tiny_locomo(tmp_path).read_text())[0]
    (home / "locomo").mkdir()
    (home / "locomo" / "conv-t.json").write_text(json.dumps({**conv["conversation"], "qa": conv["qa"]}),
                                                 encoding="utf-8")
    assert resolve_locomo() == home / "locomo"
    res = runner.invoke(app, ["data", "check"])  # exit 1: three AgentFly files are missing (each an error line)
    assert f"LoCoMo: {home / 'locomo'} (per-conversation files in the data folder)" in res.stdout
    assert str(home / "locomo" / "conv-t.json") in res.stdout.splitlines()
    assert "conv-t.json" not in res.stderr  # the conversation file is usable


def test_data_check_without_a_terminal_keeps_paths_whole_at_80_columns(tmp_path: Path, monkeypatch) -> None:
    deep = tmp_path / "a-rather-long-folder-name" / "another-long-folder-name-for-paths"
    deep.mkdir(parents=True)
    data = _tiny_locomo(tmp_path)
    target = deep / "conversations-copied-by-hand.json"
    target.write_text(data.read_text(), encoding="utf-8")
    monkeypatch.setenv("COLUMNS", "80")
    res = runner.invoke(app, ["data", "check", "--locomo", str(target)])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert str(target) in lines  # the full path on a line of its own, never split mid-name
    assert all(len(line) <= 80 for line in lines if str(target) not in line)
    assert any(line.startswith("  what: LoCoMo conversations") for line in lines)


class _Recorder:
    """A ``track`` that records each bar's description and what ran while its item was current."""

    def __init__(self) -> None:
        self.bars: list[tuple[str, int | None]] = []
        self.log: list[str] = []

    def __call__(self, it, description: str = "", total: int | None = None):
        self.bars.append((description, total))
        for x in it:
            self.log.append(f"start {description}")
            yield x


def test_redaction_bench_shows_a_bar_over_its_pipelines(tmp_path: Path, monkeypatch) -> None:
    from benchmarks import redaction

    ran: list[str] = []
    monkeypatch.setattr(redaction, "run_pipeline", lambda pipeline, mode, corpus, work, questions: (
        ran.append(f"{mode}/{pipeline}"),
        {"survivors": dict.fromkeys(redaction.CHANNELS, 0), "by_kind": {c: {} for c in redaction.CHANNELS},
         "channel_chars": dict.fromkeys(redaction.CHANNELS, 0)})[1])
    monkeypatch.setattr(redaction, "injection_and_json", lambda work, mode: (
        ran.append(f"{mode}/injection"),
        {"injection_in_block": False, "injection_after_data_notice": False, "injection_in_digest": False,
         "digest_injection_marked_as_data": False, "hook_json_valid": 4, "hook_json_total": 4})[1])
    rec = _Recorder()
    redaction.run(tmp_path, quick=True, per_kind=1, track=rec)
    steps = len(redaction.MODES) * (len(redaction.PIPELINES) + 1)
    assert rec.bars == [("redaction: pipelines x redactors", steps)] and len(ran) == steps
    assert len(rec.log) == steps  # every pipeline and the injection check is a step of the bar


def test_locomo_arm_ingest_is_a_phase_of_its_own_bar(tmp_path: Path) -> None:
    from harness.workloads.runner import run_conversation
    from tests.harness.locomo_arms_fixture import tiny_conversation

    rec = _Recorder()
    run_conversation(tiny_conversation(), ["full", "bm25"], tmp_path, k_values=(2,), track=rec)
    names = [d for d, _ in rec.bars]
    assert names == ["tiny-1 full ingest (6 turns)", "tiny-1 full", "tiny-1 bm25 ingest (6 turns)", "tiny-1 bm25"]
    assert rec.bars[0][1] == 1


def test_tortoise_create_point_says_it_is_loading_the_encoder(tmp_path: Path, monkeypatch) -> None:
    import numpy as np

    from harness import embedding
    from harness.cli import tortoise_store

    monkeypatch.setattr(embedding, "_CACHE", {})  # not loaded yet in this process
    monkeypatch.setattr(tortoise_store._LazyEncoder, "encode",
                        lambda self, texts: np.ones((len(texts), 384), dtype=np.float32) / np.sqrt(384))
    monkeypatch.delenv("MEMSIM_TORTOISE_SERVICE", raising=False)
    res = runner.invoke(app, ["tortoise", "create-point", "decision", "we keep kuzu", "--db", str(tmp_path / "s.kuzu")])
    assert res.exit_code == 0, res.output
    assert "loading the MiniLM sentence encoder to embed the point" in res.stderr
    assert res.stdout.strip().count("\n") == 0  # stdout is still the id alone


def test_fuzz_summary_keeps_every_target_name_whole_at_80_columns(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("hypothesis")
    monkeypatch.setenv("COLUMNS", "80")
    res = runner.invoke(app, ["fuzz", "--target", "tortoise-spool-meta", "--target", "locomo", "--examples", "1",
                              "--no-specials", "--out", str(tmp_path / "fz")])
    assert res.exit_code == 0, res.output
    out = res.stdout.splitlines()
    assert any(line.startswith("tortoise-spool-meta  1 examples:") for line in out)  # the full name, no "…"
    assert "…" not in res.stdout and all(len(line) <= 80 for line in out if not line.startswith("wrote "))
    assert any("partial write;" in line and line.rstrip().endswith(" s") for line in out)  # unit labelled


def test_claims_table_labels_its_time_column(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    res = runner.invoke(app, ["claims", "--id", "TOR-43", "--out", str(tmp_path / "ledger")])
    assert res.exit_code == 0, res.output
    header = next(line for line in res.stdout.splitlines() if " id " in line and "statement" in line)
    assert "time (s)" in header and "TOR-43" in res.stdout


def test_bench_locomo_lines_are_never_broken_at_80_columns(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = tmp_path / "a-long-output-folder-name-to-push-the-wrote-lines-past-eighty-columns" / "run"
    res = runner.invoke(app, ["bench", "locomo", "--data", str(_tiny_locomo(tmp_path)), "--quick", "--arms", "full",
                              "--no-progress", "--out", str(out)])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert any(line.startswith("--quick: 1 conversation(s)") and line.endswith(": conv-t") for line in lines)
    assert f"wrote {out / 'locomo.json'}" in lines


def test_claims_and_fuzz_stopped_before_writing_leave_no_empty_folder(tmp_path: Path, monkeypatch) -> None:
    import harness.ledger as ledger_mod
    import harness.reliability.fuzz as fuzz_mod

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(ledger_mod, "run_claims", interrupted)
    res = runner.invoke(app, ["claims", "--id", "TOR-43", "--out", str(tmp_path / "c" / "ledger")])
    assert res.exit_code != 0 and not (tmp_path / "c").exists()
    pytest.importorskip("hypothesis")
    monkeypatch.setattr(fuzz_mod, "run_target", interrupted)
    res = runner.invoke(app, ["fuzz", "--target", "locomo", "--examples", "1", "--out", str(tmp_path / "f" / "fz")])
    assert res.exit_code != 0 and not (tmp_path / "f").exists()


def test_paper_protocol_shows_its_retriever_load_as_a_bar(tmp_path: Path) -> None:
    from benchmarks import locomo_paper

    events: list[str] = []
    rec = _Recorder()

    def track(it, description: str = "", total: int | None = None):
        events.append(f"bar {description}")
        yield from rec(it, description, total)

    locomo_paper.run(tmp_path / "out", data=_tiny_locomo(tmp_path), retrievers="bm25", arms="none", track=track,
                     echo=lambda text: events.append(f"echo {text}"))
    assert events[:2] == ["bar loading retrievers bm25", "bar paper protocol: conversations x retrievers"]
    assert rec.bars[0] == ("loading retrievers bm25", 1)


def test_written_paths_are_whole_lines_past_80_columns(tmp_path: Path) -> None:
    """A `wrote <path>` or `looked at <path>` line longer than the console is printed whole (a path split over two
    lines cannot be copied); it failed for claims, crash and data check whenever the path passed 80 columns."""
    deep = tmp_path / ("a folder name long enough to pass eighty columns [x] :smile: é" + "-" * 20) / "out"
    res = runner.invoke(app, ["claims", "--id", "FRA-01", "--out", str(deep)], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    for name in ("ledger.json", "ledger.md", "ledger.html"):
        assert f"wrote {deep / name}\n" in res.stdout
    home = tmp_path / ("data" + "-" * 80)
    res = runner.invoke(app, ["data", "check"], env={"COLUMNS": "80", "MEMSIM_DATA_DIR": str(home),
                                                     "MEMSIM_LOCOMO_DATA": "", "MEMSIM_AGENTFLY_DATA": ""})
    assert f"  looked at {home / 'agentfly'} (absent)\n" in res.stdout, res.stdout
    assert f"  looked at {home / 'locomo' / 'locomo10.json'} (absent), and no other *.json file in " \
           f"{home / 'locomo'}\n" in res.stdout, res.stdout
