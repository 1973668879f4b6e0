"""The documented examples run as written: the ``fractal replay`` script (docs/cli.md) and the Tortoise hook wiring
(docs/tortoise-hooks.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from typer.testing import CliRunner

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _section(page: str, title: str) -> str:
    text = (DOCS / page).read_text(encoding="utf-8")
    start = text.index(title)
    nxt = re.search(r"^#{2,3} ", text[start + len(title):], flags=re.M)
    return text[start: start + len(title) + (nxt.start() if nxt else len(text))]


def _block(section: str, lang: str) -> str:
    return re.search(rf"```{lang}\n(.*?)```", section, flags=re.S).group(1)


def test_replay_script_example_runs(tmp_path, monkeypatch):
    from fractal_sim.replay import parse_replay_script
    from harness.cli.main import app

    sec = _section("cli.md", "## `memsim fractal replay` scripts")
    script = _block(sec, "yaml")
    parsed = parse_replay_script(yaml.safe_load(script))
    assert [t.message for t in parsed.turns] == ["Add a --verbose flag to app.py", "Run the tests",
                                                 "Summarise what changed"]
    (tmp_path / "demo.yaml").write_text(script)
    monkeypatch.setenv("FRACTAL_STATE_HOME", str(tmp_path / "state"))
    ws = tmp_path / "ws"
    res = CliRunner().invoke(app, ["fractal", "replay", str(tmp_path / "demo.yaml"), "-w", str(ws)])
    assert res.exit_code == 0, res.output
    assert (ws / "app.py").read_text() == "import sys\nprint('hello', '--verbose' in sys.argv)\n"
    assert "failed" in res.output and "tests failed" in res.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("turns:\n  - message: x\n  - message: y\n    actions: [{exec: ls}]\n")
    res = CliRunner().invoke(app, ["fractal", "replay", str(bad), "-w", str(ws)])
    assert res.exit_code != 0 and "turns[1].actions[0]: unknown action 'exec'" in res.output
    for key in ("read", "write", "safe_replace", "delete", "open", "run", "emit", "set_interrupt"):
        assert f"`{key}" in sec  # every action kind the parser knows is documented


def test_hook_wiring_example_names_real_commands():
    import shlex

    import typer.main

    from harness.cli.main import app

    sec = _section("tortoise-hooks.md", "## Claude Code")
    hooks = json.loads(_block(sec, "json"))["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "SessionEnd"}
    tortoise = typer.main.get_command(app).commands["tortoise"].commands
    want = {"SessionStart": "hook-session-start", "UserPromptSubmit": "hook-volunteer",
            "SessionEnd": "hook-session-end"}
    for event, entries in hooks.items():
        argv = shlex.split(entries[0]["hooks"][0]["command"])
        assert argv[0].endswith("/memsim") and argv[1:3] == ["tortoise", want[event]], argv
        params = {o for p in tortoise[want[event]].params for o in p.opts}
        assert {a for a in argv[3:] if a.startswith("--")} <= params, argv
    page = (DOCS / "tortoise-hooks.md").read_text(encoding="utf-8")
    assert "spool-flush" in _section("tortoise-hooks.md", "## When the spool is flushed")
    assert "Could not set lock" in _section("tortoise-hooks.md", "## The store lock")
    for cmd in ("hook-session-start", "hook-volunteer", "hook-session-end"):
        assert f"`memsim tortoise {cmd} " in page  # the hook table names every hook command
