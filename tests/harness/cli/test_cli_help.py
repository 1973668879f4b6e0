"""--help of every memsim command: placeholders that say what to type, no doubled negations, prose that is not
broken at the docstring's line ends; plus the small newcomer fixes (--harness choices, write summaries)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from harness.cli.help_format import reflow
from harness.cli.main import app

WIDE = 400  # wide enough that no help line needs wrapping


def _paths(cmd, prefix=()):
    yield list(prefix)
    for name, sub in (getattr(cmd, "commands", None) or {}).items():
        yield from _paths(sub, (*prefix, name))


ROOT = typer.main.get_command(app)
ALL = list(_paths(ROOT))


def _help(path: list[str]) -> str:
    res = CliRunner().invoke(app, [*path, "--help"], terminal_width=WIDE, env={"COLUMNS": str(WIDE)})
    assert res.exit_code == 0, (path, res.output)
    return res.output


def test_every_command_is_covered():
    names = {" ".join(p) for p in ALL}
    assert {"claims", "tortoise hook-volunteer", "tortoise capture", "agentfly run", "fractal replay",
            "bench selectors"} <= names


@pytest.mark.parametrize("path", ALL, ids=lambda p: " ".join(p) or "memsim")
def test_help_has_no_type_placeholders_or_double_negations(path):
    out = _help(path)
    assert not re.search(r"<(bool|str|int|float|path|list\[[a-z]+\])>", out), out
    assert "--no-no-" not in out
    for line in out.splitlines():  # flags take no value: nothing between the flag and its help
        m = re.match(r"\W*(--help)\s+(\S+)", line)
        if m:
            assert m.group(2) == "Show", line


def test_group_listing_shows_each_first_paragraph_on_one_line():
    for path in ALL:
        cmd = ROOT
        for name in path:
            cmd = cmd.commands[name]
        subs = getattr(cmd, "commands", None)
        if not subs:
            continue
        out = _help(path)
        for name, sub in subs.items():
            first = reflow(sub.help or "").split("\n\n")[0].strip()
            row = next(ln for ln in out.splitlines() if re.match(rf"\W*{re.escape(name)}\s", ln))
            assert first[:60] in row, (name, row)


def test_reflow_keeps_paragraphs_and_lists():
    assert reflow("a sentence that\n  goes on.\n\nnext\npara") == "a sentence that goes on.\n\nnext para"
    assert reflow("items:\n- one\n- two") == "items:\n- one\n- two"
    assert reflow("\bkeep\nas is") == "\bkeep\nas is"


def test_placeholders_name_the_value():
    out = _help(["claims"])
    assert re.search(r"--design\s+DESIGN\s", out) and re.search(r"--seed\s+INTEGER\s", out)
    assert re.search(r"--out\s+PATH\s", out) and re.search(r"--list\s+List the selected", out)
    cap = _help(["tortoise", "capture"])
    assert re.search(r"--no-extractor\s+Capture turns", cap)


def test_agentfly_run_out_has_a_default_and_is_not_required():
    out = _help(["agentfly", "run"])
    line = next(ln for ln in out.splitlines() if "--out" in ln)
    assert "[default: out/agentfly]" in line and "*" not in line.split("--out")[0]
    reference = (Path(__file__).resolve().parents[3] / "docs" / "cli.md").read_text()
    row = next(ln for ln in reference.splitlines() if ln.startswith("| `memsim agentfly run"))
    assert "[--out DIR]" in row


def test_hook_volunteer_harness_is_an_explicit_choice(tmp_path, monkeypatch):
    from tortoise_sim.hook_client import DEFAULT_HARNESS, HARNESSES, HookUsageError, parse_hook_args

    out = _help(["tortoise", "hook-volunteer"])
    assert "[claude|codex|devin|cline|cline-string|other]" in out and "[default: codex]" in out and DEFAULT_HARNESS == "codex"
    monkeypatch.setenv("MEMSIM_TORTOISE_DB", str(tmp_path / "h.kuzu"))
    res = CliRunner().invoke(app, ["tortoise", "hook-volunteer", "--harness", "claud"],
                             input='{"prompt": "What did we decide about the store?"}')
    assert res.exit_code == 0 and res.stdout == "" and "unknown --harness 'claud'" in res.stderr
    for h in HARNESSES:
        assert parse_hook_args("hook-volunteer", ["--harness", h]) == {"harness": h}
    with pytest.raises(HookUsageError, match="choose one of claude, codex, devin, cline, cline-string, other"):
        parse_hook_args("hook-volunteer", ["--harness=Claude"])
    assert parse_hook_args("hook-session-end", ["--harness", "my-tool"]) == {"harness": "my-tool"}  # a spool label


def test_writing_commands_say_what_they_wrote(tmp_path, monkeypatch):
    import harness.cli.tortoise as cmd
    from tortoise_sim.embed import HashingEncoder

    monkeypatch.setattr(cmd._LazyEncoder, "encode", lambda self, texts: HashingEncoder().encode(texts))
    db = tmp_path / "w.kuzu"
    monkeypatch.setenv("MEMSIM_TORTOISE_DB", str(db))
    r = CliRunner()
    res = r.invoke(app, ["tortoise", "create-point", "decision", "Use Kuzu", "--credibility", "gold", "--live"])
    pid = res.stdout.strip()
    assert res.exit_code == 0 and re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", pid)
    *status, last = res.stderr.strip().splitlines()  # before it, at most the line saying the encoder loads
    assert last == f"created decision point {pid} (live, credibility gold) in {db}"
    assert all(line.startswith("loading the MiniLM sentence encoder") for line in status) and len(status) <= 1
    res = r.invoke(app, ["tortoise", "diary-write", "alice", "Reviewed the schema", "--topic", "schema"])
    did = res.stdout.strip()
    assert f"wrote diary entry {did} for agent 'alice' (19 chars, topic 'schema') in {db}" in res.stderr
    items = tmp_path / "c.json"
    items.write_text('[{"content": "Pin kuzu in the lock file"}, {"content": "Pin kuzu in the lock file"}]')
    res = r.invoke(app, ["tortoise", "checkpoint", str(items)])
    assert res.exit_code == 0, res.output
    filed = __import__("json").loads(res.stdout)["ids"]
    assert len(filed) == 1
    assert f"filed 1 checkpoint item(s) for 'checkpoint' ({filed[0]}), skipped 1 duplicate(s), in {db}" in res.stderr


def test_bench_says_where_results_go(capsys, tmp_path, monkeypatch):
    from harness.cli import bench_run

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMSIM_RESULTS_DIR", raising=False)
    bench_run.run_bench(lambda out_dir, quick, track: [], ["x"], None, quick=True, progress=False)
    printed = " ".join(capsys.readouterr().out.split())
    assert f"writing results to {tmp_path / 'memsim-results' / 'bench'} (the default run folder" in printed
    bench_run.run_bench(lambda out_dir, quick, track: [], ["x"], Path("elsewhere"), quick=True, progress=False)
    assert "writing results" not in capsys.readouterr().out


# ------------------------------------------------------------------ what a user cannot open is never cited
PRIVATE = re.compile(r"\.\./shared|\bshared/(spec|reports|data|DESIGN)|/work/|heavy\.lock|memsim-heavy|flock /tmp")
UNOPENABLE = re.compile(r"§|\bspec\b|\bspecification\b|\bsection \d|\bissue \d+", re.IGNORECASE)


def _texts(cmd, path=()):
    """Every text of a command's --help: its help and epilog, each option's help, default and metavar."""
    yield " ".join(path) or "memsim", "help", f"{cmd.help or ''} {cmd.epilog or ''}"
    for p in cmd.params:
        yield " ".join(path), p.name, f"{getattr(p, 'help', None) or ''} {p.default!s} {p.metavar or ''}"
    for name, sub in (getattr(cmd, "commands", None) or {}).items():
        yield from _texts(sub, (*path, name))


def test_help_names_no_private_path_and_cites_no_spec_section():
    bad = [(where, what, m.group(0)) for where, what, text in _texts(ROOT)
           for pattern in (PRIVATE, UNOPENABLE) for m in [pattern.search(text)] if m]
    assert not bad, bad


def test_bench_help_lists_every_bench():
    """Every registered bench command is listed, and every benchmark script is a command or named in the help."""
    from harness.cli.bench import app as bench_app

    out = _help(["bench"])
    listed = {m.group(1) for m in re.finditer(r"^\W*([a-z][a-z0-9-]+)\s{2,}\S", out.split("Commands")[-1], re.M)}
    registered = {c.name or c.callback.__name__.replace("_", "-") for c in bench_app.registered_commands}
    assert registered and listed == registered, (listed, registered)
    every_help = " ".join(text for _, _, text in _texts(ROOT.commands["bench"]))
    root = Path(__file__).resolve().parents[3] / "benchmarks"
    for script in sorted(root.glob("*.py")):
        source = script.read_text(encoding="utf-8")
        if '__name__ == "__main__"' not in source and not re.search(r"^def run\(out_dir", source, re.M):
            continue
        stem = script.stem
        assert (stem.replace("_", "-") in registered or f"benchmarks.{stem}" in every_help
                or stem.replace("_", "-") in every_help), f"benchmarks/{script.name} is not reachable from memsim bench --help"


def test_error_lines_do_not_lead_with_exception_class_names():
    from harness.cli.boundary import describe_error

    assert describe_error(ValueError("rounds must be at least 1")) == "rounds must be at least 1"
    assert describe_error(FileNotFoundError(2, "No such file or directory", "x.json")) == \
        "x.json: No such file or directory"
    line = describe_error(IndexError("list index out of range"))
    assert line.startswith("list index out of range (an internal IndexError; MEMSIM_TRACEBACK=1")
    assert describe_error(RuntimeError()).startswith("failed (an internal RuntimeError")
    demo = typer.Typer()

    @demo.command()
    def boom() -> None:
        from harness.cli.boundary import cli_errors

        with cli_errors():
            raise ValueError("a.yaml: rounds: must be at least 1")

    @demo.command()
    def other() -> None:
        pass

    res = CliRunner().invoke(demo, ["boom"])
    assert res.exit_code == 1 and res.output.strip() == "error: a.yaml: rounds: must be at least 1"


def test_agentfly_bad_input_line_gives_the_file_and_the_message(capsys):
    from harness.cli.agentfly import _bad_input

    _bad_input(ValueError("pool row 3 has no 'question'"), "pool.jsonl")
    assert capsys.readouterr().err.strip() == "error: pool.jsonl: pool row 3 has no 'question'"


# ------------------------------------------------------------------ 80 columns, and a newcomer's first look
def _help80(path: list[str]) -> str:
    res = CliRunner().invoke(app, [*path, "--help"], terminal_width=80, env={"COLUMNS": "80"})
    assert res.exit_code == 0, (path, res.output)
    return res.output


@pytest.mark.parametrize("path", ALL, ids=lambda p: " ".join(p) or "memsim")
def test_help_at_80_columns_cuts_nothing(path):
    """A word longer than its column (an environment variable, a default path) folds onto the next line; it is
    never cut with an ellipsis (``$MEMSIM_LONGMEMEVAL_…``)."""
    out = _help80(path)
    assert "…" not in out, [line for line in out.splitlines() if "…" in line]


def test_bench_longmemeval_help_shows_its_defaults_whole_at_80_columns():
    flat = "".join(line.strip("│ ").replace(" ", "") for line in _help80(["bench", "longmemeval"]).splitlines())
    for text in ("$MEMSIM_LONGMEMEVAL_DATA", "./memsim-results/bench", "$MEMSIM_RESULTS_DIR/bench"):
        assert text in flat, text


def test_memsim_help_names_every_capability():
    """A newcomer reading ``memsim --help`` finds what memsim does: each group's line names its commands' work."""
    listing = " ".join(_help80([]).split())
    for needle in ("claims ledger", "LoCoMo", "LongMemEval", "agent hosts", "crash points", "fuzzing"):
        assert needle in listing.split("Options")[0], needle
    commands = listing.split("Commands")[-1]
    hosts = commands.split(" hosts ", 1)[1]
    assert all(w in hosts for w in ("install", "list", "run scenarios")), hosts
    bench = commands.split(" bench ", 1)[1].split(" data ", 1)[0]
    assert all(w in bench for w in ("LoCoMo", "LongMemEval", "hosts")), bench


def test_longmemeval_scale_script_help_names_itself_and_ends_its_sentence(capsys):
    from benchmarks import longmemeval_scale

    with pytest.raises(SystemExit):
        longmemeval_scale.main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m benchmarks.longmemeval_scale") and "memsim bench" not in out, out
    description = " ".join(out.split("\n\n")[1].split())
    assert description.endswith("peak memory on a multi-GB file."), description
    entries = re.split(r"\n  (?=-)", out.split("options:", 1)[1])
    for option in ("--seed", "--out", "--protocol-questions", "--design-questions", "--loader-bytes"):
        (entry,) = [e for e in entries if e.startswith(option)]
        assert "default" in entry, entry  # every option says what it does and its default
