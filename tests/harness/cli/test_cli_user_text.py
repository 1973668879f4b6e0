"""User text at the CLI boundary: paths, ids, option values and messages are printed as given (no rich markup, no
emoji codes), error lines keep the file name whole, and usage errors are one ``error:`` line with exit status 2.

The walks discover the commands from the click command tree of the typer app, so a command added later is covered
without touching this file."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from harness.cli.boundary import is_hook_command
from harness.cli.main import app

# Every marker that rich would interpret: a tag, a closing tag that matches nothing (a MarkupError), an emoji code,
# and letters outside ASCII.
WEIRD = "[x] [/x] :smile: Ünïcødé"


def _leaves(cmd: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    subs = getattr(cmd, "commands", None)
    if subs:
        for name, sub in subs.items():
            yield from _leaves(sub, [*path, name])
    else:
        yield path, cmd


COMMANDS = list(_leaves(typer.main.get_command(app), []))


def _is_path(param: Any) -> bool:
    ann = param.type_descriptor.annotation
    return ann is pathlib.Path or "Path" in str(ann)


def _flag(param: Any) -> str | None:
    """The long option name of an option, None for an argument."""
    if param.param_type_name != "option":
        return None
    return next((o for o in param.opts if o.startswith("--")), param.opts[0])


PATH_COMMANDS = [(path, cmd) for path, cmd in COMMANDS if any(_is_path(p) for p in cmd.params)]


def run(args: list[str], input: str | None = "") -> Any:  # noqa: A002
    return CliRunner().invoke(app, args, input=input)


def test_the_walk_finds_the_commands():
    names = {" ".join(p) for p, _ in PATH_COMMANDS}
    assert len(COMMANDS) > 40
    assert {"data check", "tortoise capture", "fractal replay", "claims", "bench locomo",
            "tortoise hook-volunteer"} <= names


def _bad_path_args(cmd: Any, blocker: Path) -> tuple[list[str], list[str]]:
    """Arguments for ``cmd`` naming a distinct weird path (inside a regular file, so it neither exists nor can be
    created) for EVERY path parameter, and a weird word for other required parameters (an id, an agent name);
    returns (args, the values given)."""
    args: list[str] = []
    paths: list[str] = []
    for p in cmd.params:
        flag = _flag(p)
        if _is_path(p):
            value = str(blocker / f"{p.name} {WEIRD}.json")
            paths.append(value)
        elif p.required:
            value = f"{p.name} {WEIRD}"
            paths.append(value)
        else:
            continue
        args += [flag, value] if flag else [value]
    return args, paths


@pytest.mark.parametrize("path,cmd", PATH_COMMANDS, ids=[" ".join(p) for p, _ in PATH_COMMANDS])
def test_every_path_taking_command_names_the_weird_file_exactly(tmp_path, monkeypatch, path, cmd):
    """Each command gets weird, unusable paths for all its path parameters: the error line names one of them (or
    the id it looked up) in full, exactly as given, with no traceback; a hook command exits 0 without an error."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMSIM_RESULTS_DIR", str(tmp_path / "results"))
    blocker = tmp_path / "plain.txt"
    blocker.write_text("a file, so nothing can be created below it\n")
    args, paths = _bad_path_args(cmd, blocker)
    r = run([*path, *args])
    assert "Traceback" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    if is_hook_command(path[-1]):  # no store: volunteer and session-end print nothing, session-start its one line
        assert r.exit_code == 0, r.output
        assert "error" not in r.stdout and WEIRD not in r.stdout, r.stdout
        return
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    if r.exit_code == 0:  # a read command for which a missing folder is simply empty (fractal sessions)
        assert errors == [], r.stderr
        return
    assert len(errors) == 1, r.stderr
    # exit 1 for the file; 2 when a weird word is a bad value the command checks (create-point's KIND): a usage error
    assert r.exit_code == (2 if "invalid value for" in errors[0] else 1), (r.exit_code, r.output)
    assert any(p in errors[0] for p in paths), (errors[0], paths)
    assert "\\[" not in r.output and "😄" not in r.output, r.output


def _files(tmp_path: Path) -> dict[str, Path]:
    tmp_path.joinpath("plain.txt").write_text("x\n")
    return {"missing": tmp_path / f"results [old] {WEIRD}" / "x.json", "blocked": tmp_path / "plain.txt" / f"o{WEIRD}"}


@pytest.mark.parametrize("args", [
    ["data", "check", "--locomo", "{missing}"],
    ["data", "check", "--agentfly", "{missing}"],
    ["tortoise", "capture", "{missing}"],
    ["tortoise", "checkpoint", "{missing}"],
    ["fractal", "replay", "{missing}", "-w", "{missing}"],
    ["claims", "--out", "{blocked}", "--id", "FRA-01"],
    ["bench", "locomo", "--data", "{missing}", "--quick"],
    ["tortoise", "serve", "--db", "{blocked}"],
])
def test_reported_paths_keep_brackets_and_emoji_codes(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    files = _files(tmp_path)
    argv = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    r = run(argv)
    assert r.exit_code == 1, (r.exit_code, r.output)
    assert "Traceback" not in r.output, r.output
    named = [str(v) for k, v in files.items() if "{" + k + "}" in args]
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and any(n in line for n in named), (line, named)
    assert not any(tmp_path.joinpath("plain.txt").parent.glob("ledger*")), "claims wrote before failing"


def test_claims_with_a_closing_tag_in_out_writes_and_names_the_folder(tmp_path, monkeypatch):
    """``claims --out 'o[/x]'`` used to write the ledger, then crash on printing the path (a MarkupError)."""
    monkeypatch.chdir(tmp_path)
    r = run(["claims", "--out", "o[/x] :smile:", "--id", "HAR-01", "--quick"])
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit), r.output
    assert r.exit_code in (0, 1), r.output
    for name in ("ledger.json", "ledger.md", "ledger.html"):
        assert (tmp_path / "o[/x] :smile:" / name).is_file()
        assert f"wrote o[/x] :smile:/{name}" in r.stdout, r.stdout


def test_an_arm_class_option_value_is_printed_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run(["bench", "locomo", "--arm-class", "nosuchmod:X", "--quick", "--out", str(tmp_path / "o")])
    assert r.exit_code == 1, r.output
    assert "--arm-class nosuchmod:X:" in r.stderr, r.stderr
    assert "❌" not in r.output


def test_fail_prints_markup_and_emoji_codes_as_text(capsys):
    from harness.cli.boundary import fail, warn

    exc = fail("a [bold]b[/] [/x] :smile: \\[c]")
    warn("w [/y] :cross_mark:")
    err = capsys.readouterr().err
    assert exc.exit_code == 1
    assert err == "error: a [bold]b[/] [/x] :smile: \\[c]\nwarning: w [/y] :cross_mark:\n"


# ------------------------------------------------------------------------------------------- usage errors
USAGE_COMMANDS = [(p, c) for p, c in COMMANDS]


@pytest.mark.parametrize("path,cmd", USAGE_COMMANDS, ids=[" ".join(p) for p, _ in USAGE_COMMANDS])
def test_an_unknown_option_is_one_line_exit_2_without_an_irrelevant_suggestion(path, cmd):
    r = run([*path, "--foo"])
    if is_hook_command(path[-1]):
        assert r.exit_code == 0 and r.stdout == "", (r.exit_code, r.output)
        return
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert r.stdout == "", r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ") and "--foo" in lines[0] and " ".join(path) in lines[0], lines[0]
    assert "did you mean" not in lines[0] and "Possible options" not in lines[0], lines[0]


@pytest.mark.parametrize("args,needles", [
    (["bench", "locomo", "--k", "0"], ["--k", "greater than or equal to 1"]),
    (["fuzz", "--examples", "-1"], ["--examples", "greater than or equal to 0"]),
    (["claims", "--seed", "abc"], ["--seed", "integer"]),
    (["data", "fetch", "--timeout", "0"], ["--timeout", "1"]),
    (["crash", "--desing", "x"], ["no such option --desing", "did you mean --design?"]),
    (["tortoise", "show"], ["missing argument", "point_id"]),
    (["tortoise", "nosuch"], ["no such command 'nosuch'", "choose one of", "capture"]),
    (["nosuch"], ["no such command 'nosuch'", "claims, fuzz"]),
])
def test_usage_errors_name_the_option_and_the_allowed_values(args, needles):
    r = run(args)
    assert r.exit_code == 2, (r.exit_code, r.output)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_a_hook_command_with_an_option_missing_its_value_exits_0_with_nothing_on_stdout():
    r = run(["tortoise", "hook-session-start", "--db"], input="{}")
    assert r.exit_code == 0 and r.stdout == "", (r.exit_code, r.output)


def test_a_shortened_error_keeps_the_file_name_whole():
    from harness.cli.boundary import describe_error

    path = "/data/" + "deep folder [x]/" * 25 + "two  spaces :smile:.json"
    line = describe_error(ValueError(f"{path}: line 3: " + "unexpected value " * 40))
    assert line.startswith(f"{path}: line 3: unexpected value"), line
    assert line.endswith("...") and len(line) < len(path) + 200
    assert describe_error(ValueError("a  b.json:\n  bad\tvalue")) == "a  b.json: bad value"


def test_the_usage_error_example_of_the_cli_page_is_what_memsim_prints():
    import re

    page = (Path(__file__).resolve().parents[3] / "docs" / "cli.md").read_text(encoding="utf-8")
    (example,) = re.findall(r"``(error: memsim bench locomo: .*?)``", page, re.S)
    r = CliRunner().invoke(app, ["bench", "locomo", "--k", "0"], prog_name="memsim")
    assert r.exit_code == 2
    assert " ".join(example.split()) == r.stderr.strip(), (example, r.stderr)


def test_cli_modules_print_only_through_the_boundary_consoles():
    """A console built elsewhere would have markup and emoji codes on again (rich's defaults)."""
    import re

    cli = Path(__file__).resolve().parents[3] / "harness" / "cli"
    offenders = [f"{p.name}:{i}" for p in sorted(cli.glob("*.py")) if p.name != "boundary.py"
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if re.search(r"\bConsole\(|rich\.print|from rich import print|markup\.escape|\[/\]", line)]
    assert offenders == []
