"""``memsim hosts run``, ``install`` and ``list`` without running a host: every option value the command checks
itself is a usage error in the one-line format (exit 2), and a run that runs nothing writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.hosts.scenario import SCENARIO_DIR

runner = CliRunner()
SCN = str(SCENARIO_DIR / "pointer-delivery.yaml")


@pytest.mark.parametrize(("args", "line"), [
    (["hosts", "run", SCN, "--host", "vim"],
     "error: memsim hosts run: invalid value for '--host': 'vim'; choose from claude-code, codex, cline, gemini "
     "(see `memsim hosts run --help`)"),
    (["hosts", "run", SCN, "--host", "gemini"],
     "error: memsim hosts run: invalid value for '--host': 'gemini'; the scenario(s) run on claude-code, codex "
     "(see `memsim hosts run --help`)"),
    (["hosts", "run", SCN, "--isolation", "none"],
     "error: memsim hosts run: invalid value for '--isolation': 'none'; choose from auto, netns, base-url "
     "(see `memsim hosts run --help`)"),
    (["hosts", "install", "vim"],
     "error: memsim hosts install: invalid value for 'NAME': 'vim'; choose from claude-code, codex, gemini, cline "
     "(see `memsim hosts install --help`)"),
], ids=["unknown-host", "host-no-scenario-runs-on", "isolation", "install-name"])
def test_checked_values_are_one_line_usage_errors(tmp_path: Path, args: list[str], line: str) -> None:
    out = tmp_path / "out"
    res = runner.invoke(app, [*args, *(["--out", str(out)] if args[1] == "run" else [])], prog_name="memsim")
    assert res.exit_code == 2, res.output
    assert [ln for ln in res.output.splitlines() if ln.strip()] == [line]
    assert not out.exists()


def test_two_files_with_one_scenario_name_are_refused(tmp_path: Path) -> None:
    copy = tmp_path / "copy.yaml"
    copy.write_text(Path(SCN).read_text(encoding="utf-8"), encoding="utf-8")
    res = runner.invoke(app, ["hosts", "run", SCN, str(copy), "--out", str(tmp_path / "out")])
    assert res.exit_code == 1
    (line,) = [ln for ln in res.output.splitlines() if ln.strip()]
    assert line.startswith(f"error: {copy}: the scenario name 'pointer-delivery' is also the name of ")
    assert not (tmp_path / "out").exists()


def test_a_run_that_runs_nothing_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pair skipped (the hosts are not installed): one line each, no folder, no summary."""
    monkeypatch.setenv("MEMSIM_HOSTS_DIR", str(tmp_path / "no-hosts"))
    monkeypatch.delenv("MEMSIM_HOSTS_EXTRA", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMSIM_RESULTS_DIR", raising=False)
    res = runner.invoke(app, ["hosts", "run", SCN])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == [
        "pointer-delivery claude-code: skipped: claude-code 2.1.328 is not installed (memsim hosts install "
        "claude-code)",
        "pointer-delivery codex: skipped: codex 0.169.0 is not installed (memsim hosts install codex)"]
    assert list(tmp_path.iterdir()) == []
