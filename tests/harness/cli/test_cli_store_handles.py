"""A command that opens the Tortoise store closes it when the command ends, so a later command in the same process
(a CliRunner, a program embedding the app) never works beside a live handle on the same files: a late-collected
handle's close checkpoints its stale view over the newer one (a retraction seen undone, or Kuzu's KU_UNREACHABLE on
the next open)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from harness.cli.main import app


def test_every_store_command_closes_the_handle_it_opened(tmp_path: Path, monkeypatch) -> None:
    import tortoise_sim.sdk as sdk

    monkeypatch.setenv("MEMSIM_TORTOISE_DB", str(tmp_path / "s.kuzu"))
    opened: list[object] = []
    closed: list[object] = []
    real_init, real_close = sdk.Tortoise.__init__, sdk.Tortoise.close

    def init(self, *a, **k):  # type: ignore[no-untyped-def]
        real_init(self, *a, **k)
        opened.append(self)

    def close(self):  # type: ignore[no-untyped-def]
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(sdk.Tortoise, "__init__", init)
    monkeypatch.setattr(sdk.Tortoise, "close", close)
    runner = CliRunner()
    res = runner.invoke(app, ["tortoise", "create-point", "decision", "Use Kuzu for the store.", "--live"])
    assert res.exit_code == 0, res.output
    pid = res.stdout.strip()
    for argv, code in ((["tortoise", "retract", pid], 0), (["tortoise", "retract", pid], 1),
                       (["tortoise", "show", pid], 0)):
        res = runner.invoke(app, argv)
        assert res.exit_code == code, (argv, res.output)
        assert opened and all(any(c is o for c in closed) for o in opened), argv
    assert '"status": "retracted"' in res.stdout
