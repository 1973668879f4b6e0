"""What a new user met trying every command (progress, empty output folders, 80-column output, data lookup,
arm naming, messages that say what is wrong): one test per finding, each failing on the code before its fix."""

from __future__ import annotations

import json
from pathlib import Path

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
