"""create-point (with --live) and retract are applied by a running service, so a user creating or retracting a point
between two host sessions need not stop it (a real-host scenario with the service running needs exactly that)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.tortoise_sim.test_service import _Running
from tortoise_sim.service import TortoiseService


@pytest.fixture
def short_dir():
    d = tempfile.mkdtemp(prefix="msp", dir="/tmp")  # AF_UNIX paths are limited to ~107 bytes
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def test_create_point_live_and_retract_go_through_the_service(short_dir: Path, monkeypatch) -> None:  # noqa: ANN001
    from typer.testing import CliRunner

    from harness.cli.main import app

    monkeypatch.setenv("MEMSIM_HOOK_TIMEOUT", "60")
    db, sock = short_dir / "db.kuzu", str(short_dir / "s.sock")
    monkeypatch.setenv("MEMSIM_TORTOISE_SOCKET", sock)
    runner = CliRunner()
    with _Running(TortoiseService(db, sock, embedder="hashing")) as svc:
        r = runner.invoke(app, ["tortoise", "create-point", "decision", "The queue runs on RabbitMQ",
                                "--credibility", "high", "--live", "--db", str(db)])
        assert r.exit_code == 0, r.output
        pid = r.stdout.strip().splitlines()[-1]
        row = svc._store_op(lambda sim: sim.store.get_point(pid), False)
        assert row["status"] == "live" and row["content"] == "The queue runs on RabbitMQ"
        r = runner.invoke(app, ["tortoise", "retract", pid, "--db", str(db)])
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["id"] == pid
        row = svc._store_op(lambda sim: sim.store.get_point(pid), False)
        assert row["status"] == "retracted"
        r = runner.invoke(app, ["tortoise", "retract", "no-such-point", "--db", str(db)])
        assert r.exit_code == 1 and "not_found" in r.output
        assert svc.writes == 4  # create, --live, retract, and the refused retract (a write attempt)
