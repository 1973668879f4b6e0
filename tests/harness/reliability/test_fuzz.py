"""Fuzzed loaders: every target ends every input in a documented outcome (bounded example counts
here; ``memsim fuzz --examples 10000`` is the long run)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from harness.reliability.fuzz import OUTCOMES, FuzzInput, Target, run_one, run_target, targets

EXAMPLES = 120


@pytest.mark.parametrize("name", sorted(targets()))
def test_target_has_no_crash_and_no_partial_write(name):
    slow_yaml = name in ("fractal-replay-yaml", "hosts-scenario")  # PyYAML's pure-Python scanner: ~5 s on 20 MB
    res = run_target(name, 60 if slow_yaml else EXAMPLES, seed=1,
                     skip_specials=("big_line",) if slow_yaml else ())
    assert res["outcomes"]["crash"] == 0 and res["outcomes"]["partial_write"] == 0, res["failures"]
    assert res["examples"] == sum(res["outcomes"].values()) >= (60 if slow_yaml else EXAMPLES)
    assert sum(1 for o in OUTCOMES if res["outcomes"][o]) >= 2  # the inputs reach more than one outcome


def test_an_uncaught_exception_is_counted_as_a_crash_not_hidden():
    def broken(inp, tmp):
        json.loads(inp.data or b"")
        return "accepted"

    toy = Target("toy", "json.loads", broken, b"{}", ("a",), False, "none")
    assert run_one(toy, FuzzInput("seed", b"{}"))[0] == "accepted"
    outcome, detail = run_one(toy, FuzzInput("truncated", b"{"))
    assert outcome == "crash" and "JSONDecodeError" in detail


def test_faithful_np_skip_is_counted_as_skipped():
    np_bank = targets()["agentfly-np-bank"]
    data = b'{"question": "q", "plan": "p"}\nnot json\n'
    assert run_one(np_bank, FuzzInput("x", data))[0] == "skipped"
    assert run_one(np_bank, FuzzInput("x", data.split(b"\n")[0] + b"\n"))[0] == "accepted"


def test_fractal_session_backup_must_be_a_complete_copy():
    session = targets()["fractal-session"]
    assert run_one(session, FuzzInput("truncated", b'{"schema_version": 1, "sess'))[0] == "skipped"


def test_memsim_fuzz_writes_its_report(tmp_path):
    from harness.cli.main import app

    r = CliRunner().invoke(app, ["fuzz", "--target", "locomo", "--target", "agentfly-dataset", "--examples", "5",
                                 "--no-specials", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "fuzz.json").read_text())
    assert [t["target"] for t in data["targets"]] == ["locomo", "agentfly-dataset"]
    assert data["summary"]["outcomes"]["crash"] == 0
    assert "| locomo |" in (tmp_path / "fuzz.md").read_text()
    r = CliRunner().invoke(app, ["fuzz", "--target", "nope", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "invalid value for '--target': 'nope'" in r.output  # a usage error


def test_memsim_fuzz_name_writes_a_named_report_in_one_run(tmp_path):
    from harness.cli.main import app

    r = CliRunner().invoke(app, ["fuzz", "--target", "locomo", "--target", "agentfly-dataset", "--examples", "3",
                                 "--no-specials", "--out", str(tmp_path), "--name", "fuzz-tiny"])
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "fuzz.json").exists()
    data = json.loads((tmp_path / "fuzz-tiny.json").read_text())
    assert data["targets_planned"] == ["locomo", "agentfly-dataset"]
    assert data["run"]["command"].endswith("--examples 3 --seed 0 --no-specials --out "
                                           f"{tmp_path} --name fuzz-tiny")
    md = (tmp_path / "fuzz-tiny.md").read_text()
    assert "All 2 planned targets finished." in md and data["run"]["command"] in md
    assert f"Total: {data['summary']['examples']} inputs" in md
    r = CliRunner().invoke(app, ["fuzz", "--target", "locomo", "--out", str(tmp_path), "--name", "a/b"])
    assert r.exit_code == 2 and "plain file name" in r.output  # a usage error


def test_fuzz_report_of_a_run_killed_part_way_names_the_missing_targets(tmp_path):
    from harness.reliability.fuzz import render_md, write_report

    res = run_target("locomo", 2, seed=0, specials=False)
    write_report([res], tmp_path, examples=2, seed=0, name="part", planned=["locomo", "agentfly-dataset"])
    md = (tmp_path / "part.md").read_text()
    assert "1 of 2 planned targets finished; not run: `agentfly-dataset`." in md
    assert render_md(json.loads((tmp_path / "part.json").read_text())) == md


def test_spool_meta_with_an_infinite_count_is_an_outcome_and_a_torn_meta_is_a_partial_write(tmp_path):
    from harness.reliability.fuzz import PartialWrite
    from harness.reliability.fuzz_tortoise import check_spool
    from tortoise_sim.spool import Spool, entry_key

    meta = targets()["tortoise-spool-meta"]
    data = meta.seed_doc.replace(b'"turns_count": 2', b'"turns_count": 1e9999992')
    assert b"1e9999992" in data
    assert run_one(meta, FuzzInput("inserted", data))[0] in ("accepted", "skipped", "rejected")
    root = tmp_path / "spool"
    Spool(root).spool_write("s1", [{"role": "user", "content": "decision: keep"}], "claude", "hook", "m1")
    check_spool(root)
    path = root / "entries" / f"{entry_key('s1')}.meta.json"
    path.write_bytes(path.read_bytes()[:20])  # torn by the spool's own writer, not the fuzzer's input
    with pytest.raises(PartialWrite, match="does not parse"):
        check_spool(root)


def test_spool_turns_outcomes_follow_the_guarded_flush():
    """The turn log target classifies by the spool's ledger: a flush never stops on a turn log (spec 10.1 items
    15 and 17)."""
    turns = targets()["tortoise-spool-turns"]
    assert run_one(turns, FuzzInput("directory", None))[0] == "rejected"  # entry_failed under its guard, kept
    assert run_one(turns, FuzzInput("x", b"\xff\xfe not utf-8\n"))[0] == "skipped"  # no turns: transcript_empty
    assert run_one(turns, FuzzInput("x", b'not json\n{"role": "user", "content": "decision: a"}\n'))[0] == "accepted"
    assert "SpoolTurnsError" not in turns.documented and "transcript_empty" in turns.documented
