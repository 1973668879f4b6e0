from __future__ import annotations

from typer.testing import CliRunner

from harness.cli.tortoise import app


def test_diary_read_refuses_negative_last_n_in_one_line(tmp_path):
    r = CliRunner().invoke(app, ["diary-read", "someone", "--last-n", "-1", "--db", str(tmp_path / "db.kuzu")])
    assert r.exit_code == 2 and "invalid value for '--last-n': -1" in r.output and "Traceback" not in r.output
