"""Values that a command checks itself (a name outside its list, a number outside its rule, options that do not go
together) are usage errors like the parser's: exit status 2 and one ``error:`` line naming the command, the option,
the value and what is allowed, never a traceback (docs/cli.md). Failures that are not about the command line (a
missing file, data not found) keep exit status 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app

DB = "{tmp}/t.kuzu"  # never created: every check below runs before a store is opened
WS = "{tmp}"

# (argv, the option the line must name, the value it must quote or None when the option's use is wrong)
CHECKS: list[tuple[list[str], str, str | None]] = [
    (["claims", "--design", "nope"], "--design", "nope"),
    (["claims", "--kind", "nope"], "--kind", "nope"),
    (["claims", "--id", "NOPE-99"], "--id", "NOPE-99"),
    (["claims", "--seed", "-1"], "--seed", None),
    (["claims", "--id", "FRA-01", "--design", "tortoise"], "--design/--id/--kind", None),
    (["fuzz", "--target", "nope"], "--target", "nope"),
    (["fuzz", "--name", "a/b"], "--name", "a/b"),
    (["crash", "--design", "nope"], "--design", "nope"),
    (["crash", "--max-points", "0"], "--max-points", None),
    (["crash", "--design", "fractal", "--sequence", "nope"], "--sequence", "nope"),
    (["data", "fetch", "nope"], "DATASET", "nope"),
    (["fractal", "show", "s1", "-w", WS, "--counter", "zzz"], "--counter", "zzz"),
    (["agentfly", "retrieve", "--model_path", "{tmp}/m.pt", "--pool_jsonl", "{tmp}/p.jsonl", "--query", "q",
      "--device", "tpu"], "--device", "tpu"),
    (["agentfly", "train", "--train", "{tmp}/t.jsonl", "--output_dir", "{tmp}/o", "--plan_style", "fancy"],
     "--plan_style", "fancy"),
    (["agentfly", "train", "--train", "{tmp}/t.jsonl", "--output_dir", "{tmp}/o", "--epochs", "0"], "--epochs",
     None),
    (["agentfly", "train", "--train", "{tmp}/t.jsonl", "--output_dir", "{tmp}/o", "--val_ratio", "1.5"],
     "--val_ratio", None),
    (["agentfly", "train", "--train", "{tmp}/t.jsonl", "--output_dir", "{tmp}/o", "--lr", "0"], "--lr", None),
    (["agentfly", "run", "--limit", "-1", "--out", "{tmp}/o"], "--limit", None),
    (["agentfly", "run", "--top_k", "-1", "--out", "{tmp}/o"], "--top_k", None),
    (["agentfly", "run", "--p_correct", "2", "--out", "{tmp}/o"], "--p_correct", None),
    (["agentfly", "run", "--driver", "xx", "--out", "{tmp}/o"], "--driver", "xx"),
    (["agentfly", "run", "--executor", "xx", "--out", "{tmp}/o"], "--executor", "xx"),
    (["agentfly", "run", "--judge", "xx", "--out", "{tmp}/o"], "--judge", "xx"),
    (["tortoise", "diary-read", "a", "--last-n", "-1", "--db", DB], "--last-n", None),
    (["tortoise", "retract", "p1", "--valid-to", "not a date", "--db", DB], "--valid-to", "not a date"),
    (["tortoise", "feed", "--last", "-1", "--db", DB], "--last", None),
    (["tortoise", "volunteer", "--max-pointers", "9", "--db", DB], "--max-pointers", None),
    (["tortoise", "volunteer", "--min-confidence", "nan", "--db", DB], "--min-confidence", None),
    (["tortoise", "checkpoint", "--threshold", "0", "--db", DB], "--threshold", None),
    (["tortoise", "create-point", "decision", "x", "--credibility", "hihg", "--db", DB], "--credibility", "hihg"),
    (["tortoise", "create-point", "no-such-kind", "x", "--db", DB], "KIND", "no-such-kind"),
    (["tortoise", "spool-flush", "--on-corrupt", "keep", "--db", DB], "--on-corrupt", "keep"),
    (["tortoise", "dream", "--mode", "weekly", "--db", DB], "--mode", "weekly"),
    (["tortoise", "dream", "--max-hops", "-1", "--db", DB], "--max-hops", None),
    (["tortoise", "dream", "--preset", "bogus", "--db", DB], "--preset", "bogus"),
    (["tortoise", "confidence", "p1", "--preset", "bogus", "--db", DB], "--preset", "bogus"),
    (["tortoise", "serve", "--preset", "bogus", "--db", DB], "--preset", "bogus"),
    (["tortoise", "serve", "--embedder", "bogus", "--db", DB], "--embedder", "bogus"),
    (["tortoise", "serve", "--stop", "--status", "--db", DB], "--stop/--status", None),
    (["bench", "locomo", "--protocol", "nope"], "--protocol", "nope"),
    (["bench", "locomo", "--retrievers", "bm25"], "--retrievers", None),
    (["bench", "locomo", "--arms", "nope"], "--arms", "nope"),
    (["bench", "locomo", "--arms", ""], "--arms", ""),
    (["bench", "locomo", "--arm-class", "no colon here"], "--arm-class", "no colon here"),
    (["bench", "locomo", "--protocol", "locomo-paper", "--lm", "openai/x"], "--lm", None),
    (["bench", "locomo", "--protocol", "locomo-paper", "--retrievers", "dragon"], "--retrievers", "dragon"),
    (["bench", "locomo", "--protocol", "locomo-paper", "--arms", "nope"], "--arms", "nope"),
    (["bench", "sweep", "{tmp}/s.yaml", "--executor", "slurm"], "--executor", "slurm"),
    (["bench", "sweep", "{tmp}/s.yaml", "--address", "auto"], "--address", None),
    (["bench", "service-faults", "--embedder", "bogus", "--out", "{tmp}/o"], "--embedder", "bogus"),
    (["bench", "serve", "--decision-size", "5", "--out", "{tmp}/o"], "--decision-size", None),
    (["fuzz", "--name", ".hidden"], "--name", ".hidden"),
    (["bench", "longmemeval", "--protocol", "nope"], "--protocol", "nope"),
    (["bench", "longmemeval", "--arms", "nope"], "--arms", "nope"),
    (["bench", "longmemeval", "--arms", ""], "--arms", ""),
    (["bench", "longmemeval", "--arm-class", "no colon here"], "--arm-class", "no colon here"),
    (["bench", "longmemeval", "--limit", "0"], "--limit", None),
    (["bench", "longmemeval", "--workers", "0"], "--workers", None),
    (["bench", "longmemeval", "--executor", "slurm"], "--executor", "slurm"),
    (["bench", "longmemeval", "--address", "auto"], "--address", None),
    (["bench", "longmemeval", "--types", "nope"], "--types", "nope"),
    (["bench", "longmemeval", "--reader-prompt", "fancy"], "--reader-prompt", "fancy"),
    (["bench", "longmemeval", "--judge-lm", "openai/x"], "--judge-lm", None),
    (["bench", "longmemeval", "--retrievers", "bm25"], "--retrievers", None),
    (["bench", "longmemeval", "--encoder", "minilm"], "--encoder", None),
    (["bench", "longmemeval", "--dense-cache"], "--dense-cache", None),
    (["bench", "longmemeval", "--protocol", "longmemeval", "--arms", "bm25"], "--arms", None),
    (["bench", "longmemeval", "--protocol", "longmemeval", "--retrievers", "dragon"], "--retrievers", "dragon"),
    (["bench", "longmemeval", "--protocol", "longmemeval", "--retrievers", "bm25", "--encoder", "minilm"],
     "--encoder", None),
    (["bench", "longmemeval-scale", "--parts", "nope"], "--parts", "nope"),
    (["bench", "hosts", "--isolation", "nope"], "--isolation", "nope"),
    (["bench", "hosts", "--hosts", "nope"], "--hosts", "nope"),
    # the hosts commands' own checks (their module is another change's; both merge into this list)
    (["hosts", "run", "{tmp}/s.yaml", "--isolation", "nope"], "--isolation", "nope"),
    (["hosts", "run", "{tmp}/s.yaml", "--host", "nope"], "--host", "nope"),
    (["hosts", "install", "nope"], "NAME", "nope"),
    (["bench", "locomo", "--embed", "nope"], "--embed", "nope"),
    (["bench", "locomo", "--embed", "per-call", "--embed-store", "{tmp}/e"], "--embed-store", None),
    (["bench", "locomo", "--protocol", "locomo-paper", "--embed", "per-call"], "--embed", None),
    (["bench", "longmemeval", "--protocol", "longmemeval", "--resume"], "--resume", None),
    (["bench", "longmemeval", "--protocol", "longmemeval", "--no-explore"], "--no-explore", None),
    (["bench", "locomo", "--protocol", "locomo-paper", "--no-explore"], "--no-explore", None),
    (["bench", "longmemeval-scale", "--embed", "nope"], "--embed", "nope"),
    (["explore", "{tmp}/run", "--limit", "0"], "--limit", None),
    (["explore", "{tmp}/run", "--rows", " , "], "--rows", " , "),
    # {run}: a small per-probe table made outside {tmp} (the checks below need a run to read its rows and metrics)
    (["compare", "{run}"], "--rows", None),
    (["compare", "{run}", "--rows", "a"], "--rows", None),
    (["compare", "{run}", "--rows", "a,nope"], "--rows", "nope"),
    (["compare", "{run}", "--rows", "a,b", "--metric", "nope"], "--metric", "nope"),
    (["compare", "{run}", "--rows", "a,b", "--probes", "nope"], "--probes", "nope"),
]


@pytest.fixture(scope="module")
def probe_run(tmp_path_factory) -> Path:
    """A two-row per-probe table (rows a and b on three probes) for the ``compare`` checks."""
    from harness.probes import probe_table, write_probes

    rows = [{"workload": "locomo", "cluster": "conv-1", "probe": str(i), "category": "1", "abstention": False,
             "has_evidence": True, "row": row, "arm": row, "evidence_recall": float((i + j) % 2)}
            for i in range(3) for j, row in enumerate(("a", "b"))]
    return write_probes(tmp_path_factory.mktemp("run") / "x.probes.parquet", probe_table(rows), data="test")


def _leaves(cmd, path):
    subs = getattr(cmd, "commands", None)
    if subs:
        for name, sub in subs.items():
            yield from _leaves(sub, [*path, name])
    else:
        yield path, cmd


def test_every_value_a_command_checks_itself_has_a_case_above():
    """Walk the click command tree: every option a command's own code refuses with ``bad_option("--x", ...)`` has
    a case in CHECKS for that command, so a new command or check is covered by the test above."""
    import inspect
    import re

    import typer.main

    missing = {}
    for path, cmd in _leaves(typer.main.get_command(app), []):
        source = inspect.getsource(inspect.unwrap(cmd.callback))
        checked = set(re.findall(r'bad_option\(\s*"([^"]+)"', source))
        covered = {option for argv, option, _ in CHECKS if argv[:len(path)] == path}
        if checked - covered:
            missing[" ".join(path)] = sorted(checked - covered)
    assert not missing, missing


@pytest.mark.parametrize("argv,option,value", CHECKS, ids=[" ".join(a) for a, _, _ in CHECKS])
def test_a_value_the_command_checks_itself_is_a_usage_error(tmp_path: Path, monkeypatch, probe_run, argv, option,
                                                            value):
    monkeypatch.chdir(tmp_path)  # a default output folder would land here (none may be created)
    args = [a.format(tmp=tmp_path, run=probe_run) for a in argv]
    r = CliRunner().invoke(app, args, prog_name="memsim", input="")
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert r.stdout == "", r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    line = lines[0]
    assert line.startswith("error: memsim ") and "Traceback" not in r.stderr, line
    assert f"'{option}'" in line, (option, line)
    if value is not None:
        assert repr(value) in line, (value, line)
    assert f"(see `memsim {argv[0]}" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a usage error wrote or created something"


def test_a_failure_that_is_not_about_the_command_line_keeps_exit_1(tmp_path: Path):
    missing = tmp_path / "missing.json"
    r = CliRunner().invoke(app, ["bench", "locomo", "--data", str(missing), "--arms", "full", "--out",
                                 str(tmp_path / "o")], prog_name="memsim")
    assert r.exit_code == 1, r.output
    [line] = r.stderr.splitlines()
    assert line.startswith("error: ") and str(missing) in line and "invalid value" not in line
    r = CliRunner().invoke(app, ["bench", "locomo", "--arm-class", "no_such_pkg_xyz:Arm", "--out",
                                 str(tmp_path / "o")], prog_name="memsim")  # names something that is not there
    assert r.exit_code == 1 and "no module named no_such_pkg_xyz" in r.stderr, r.output


def test_bad_option_line_and_status(capsys):
    from harness.cli.boundary import bad_option

    exc = bad_option("--mode", "weekly", ("local", "full"))
    assert exc.exit_code == 2
    assert capsys.readouterr().err == "error: invalid value for '--mode': 'weekly'; choose from local, full\n"
    assert bad_option("--stop/--status", None, "give one of them, not both").exit_code == 2
    assert capsys.readouterr().err == "error: invalid use of '--stop/--status': give one of them, not both\n"


def test_the_command_checked_example_of_the_cli_page_is_what_memsim_prints():
    import re

    page = (Path(__file__).resolve().parents[3] / "docs" / "cli.md").read_text(encoding="utf-8")
    (example,) = re.findall(r"``(error: memsim crash: .*?)``", page, re.S)
    r = CliRunner().invoke(app, ["crash", "--design", "nope"], prog_name="memsim")
    assert r.exit_code == 2
    assert " ".join(example.split()) == r.stderr.strip(), (example, r.stderr)
