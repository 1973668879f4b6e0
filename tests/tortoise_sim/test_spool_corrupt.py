"""Corrupt spool meta: upstream deletes the entry with its intact turn log (spec 10.1 item 9, the default); the
hardened ``corrupt="quarantine"`` option keeps both files under ``quarantine/`` and the ledger says so."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tortoise_sim import SimConfig, StepClock, Tortoise
from tortoise_sim.spool import Spool, entry_key

TURNS = [{"role": "user", "content": "decision: keep the spool"}, {"role": "assistant", "content": "ok"}]


def _corrupt_entry(root):
    sp = Spool(root)
    sp.spool_write("s1", TURNS, "claude", "hook", "m1")
    meta = root / "entries" / f"{entry_key('s1')}.meta.json"
    meta.write_text("{not json")
    return meta, root / "entries" / f"{entry_key('s1')}.turns.jsonl"


def _ledger(root):
    return [json.loads(x) for x in (root / "discarded.jsonl").read_text().splitlines()]


def test_faithful_default_deletes_the_intact_turn_log(tmp_path):
    meta, turns = _corrupt_entry(tmp_path)
    assert turns.read_text().count("\n") == 2
    counts = Spool(tmp_path).flush_spool(lambda body: 200, 0)
    assert counts["discarded"] == 1 and not meta.exists() and not turns.exists()
    assert _ledger(tmp_path)[-1]["reason"] == "corrupt_entry"


@pytest.mark.parametrize("via", ["flush", "write"])
def test_quarantine_keeps_both_files(tmp_path, via):
    meta, turns = _corrupt_entry(tmp_path)
    sp = Spool(tmp_path, corrupt="quarantine")
    if via == "flush":
        sp.flush_spool(lambda body: 200, 0)
    else:
        sp.spool_write("s1", [*TURNS, {"role": "user", "content": "more"}], "claude", "hook", "m1")
    kept = sorted(p.name for p in (tmp_path / "quarantine").iterdir())
    assert len(kept) == 2 and any(k.endswith("turns.jsonl") for k in kept)
    saved = next(p for p in (tmp_path / "quarantine").iterdir() if p.name.endswith("turns.jsonl"))
    assert [json.loads(x) for x in saved.read_text().splitlines()] == TURNS
    assert _ledger(tmp_path)[-1]["reason"] == "corrupt_entry_quarantined"
    # a quarantined entry never re-enters a flush
    assert Spool(tmp_path, corrupt="quarantine").flush_spool(lambda body: 200, 0)["discarded"] == 0


def test_sdk_and_cli_expose_the_option(tmp_path):
    sim = Tortoise(None, config=SimConfig(embedder="hashing", spool_dir=str(tmp_path / "a"),
                                          spool_corrupt="quarantine"), clock=StepClock())
    assert sim.spool().corrupt == "quarantine"
    sim.close()
    from harness.cli.main import app

    root = tmp_path / "spool"
    _corrupt_entry(root)
    r = CliRunner().invoke(app, ["tortoise", "spool-flush", "--db", str(tmp_path / "t.kuzu"), "--spool-dir", str(root),
                                 "--on-corrupt", "quarantine"])
    assert r.exit_code == 0, r.output
    assert len(list((root / "quarantine").iterdir())) == 2
    r = CliRunner().invoke(app, ["tortoise", "spool-flush", "--db", str(tmp_path / "t.kuzu"), "--on-corrupt", "keep"])
    assert r.exit_code == 2 and "invalid value for '--on-corrupt': 'keep'" in r.output  # a usage error
