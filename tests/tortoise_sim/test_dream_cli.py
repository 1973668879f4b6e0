"""`memsim tortoise dream` / `memsim tortoise confidence` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from harness.cli.tortoise import app
from tortoise_sim import admission as adm
from tortoise_sim.config import SimConfig
from tortoise_sim.store import StepClock, TortoiseStore


def _seed(path: Path) -> dict[str, str]:
    s = TortoiseStore(path, config=SimConfig(embedder="none"), clock=StepClock())
    ids = {n: adm.create_point(s, "statement", f"Claim {n}", status="live")["id"] for n in "ABC"}
    adm.set_point_baseline(s, ids["A"], 10, 1)
    adm.set_point_baseline(s, ids["C"], 5, 1)
    adm.create_operator(s, "IMPL", ids["A"], [ids["B"]])
    adm.create_operator(s, "NAND", ids["B"], [ids["C"]])
    s.close()
    return ids


def test_dream_and_confidence_commands(tmp_path: Path) -> None:
    db = tmp_path / "t.kuzu"
    ids = _seed(db)
    runner = CliRunner()
    gated = runner.invoke(app, ["dream", "--db", str(db)])
    assert gated.exit_code == 1 and "live claim(s) lack a baseline" in gated.output and ids["B"] in gated.output
    assert gated.output.startswith("error: ") and "CalibrationError" not in gated.output  # the message, not the class
    res = runner.invoke(app, ["dream", "--db", str(db), "--mode", "full", "--no-calibration", "--no-censoring",
                              "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    assert (out["iterations"], out["converged_all"], out["budget_used"]) == (35, True, 2)
    assert out["affected_claims"] == sorted(ids.values())
    conf = runner.invoke(app, ["confidence", ids["B"], "--db", str(db), "--json"])
    assert conf.exit_code == 0 and round(json.loads(conf.output)["mean"], 6) == 0.254643
    table = runner.invoke(app, ["dream", "--db", str(db), "--mode", "window", "--no-calibration"])
    assert table.exit_code == 0 and "budget used" in table.output and str(db) in table.output
    assert runner.invoke(app, ["dream", "--db", str(db), "--budget", "0", "--no-calibration"]).exit_code == 0
    assert runner.invoke(app, ["dream", "--db", str(db), "--mode", "weekly"]).exit_code == 2  # a usage error
    assert runner.invoke(app, ["confidence", "nope", "--db", str(db)]).exit_code == 1
    assert runner.invoke(app, ["dream", "--db", str(tmp_path / "missing.kuzu")]).exit_code == 1
