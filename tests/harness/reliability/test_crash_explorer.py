"""The crash-point explorer on a toy store with a known loss window, and on Fractal's save sequence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fractal_sim.durable import write_file
from harness.reliability.crash import Acks, Check, CrashHook, CrashPoint, Scenario, crash_points, explore


def _toy_run(root: Path, hook: Any, mode: str, acks: Acks) -> None:
    """A toy store: every add rewrites the whole list (in place, or atomically in hardened mode)."""
    items: list[str] = []
    for item in ("a", "b", "c"):
        items.append(item)
        write_file(root / "items.json", json.dumps(items).encode(), step="toy.save", hook=hook,
                   mode="overwrite" if mode == "faithful" else "atomic")
        acks.append(item)


def _toy_check(root: Path, acks: list[str], mode: str) -> Check:
    c = Check()
    path = root / "items.json"
    try:
        stored = json.loads(path.read_text()) if path.exists() else []
    except json.JSONDecodeError:
        stored = []
        c.notes.append(f"{path} unreadable")
    c.lost = [a for a in acks if a not in stored]
    c.duplicates = [s for s in set(stored) if stored.count(s) > 1]
    return c


TOY = Scenario("toy", "toy.rewrite", "three whole-file rewrites", _toy_run, _toy_check)


def test_crash_points_enumerate_before_after_and_torn() -> None:
    hook = CrashHook()
    hook("s")
    hook.after_write("s", None, None)
    (ev_before, ev_after) = hook.events
    assert ev_before.kind == "before" and ev_after.kind == "after" and ev_after.nbytes is None
    pts = crash_points(hook.events)
    assert [p.kind for p in pts] == ["before", "after"]


def test_toy_loss_window_found_in_faithful_mode() -> None:
    res = explore(TOY, "faithful")
    # 3 writes: before + after + torn(0, 1, half, n-1) each
    assert res.step_events == 6 and len(res.points) == 3 * (1 + 1 + 4)
    lost = [p for p in res.points if p.check.lost]
    assert lost and all(p.point.kind == "torn" for p in lost)
    # the first write has nothing acknowledged before it; the 2nd and 3rd torn writes lose acked items
    assert {p.point.index for p in lost} == {3, 5}
    assert all(p.fired for p in res.points)


def test_toy_hardened_shows_no_loss() -> None:
    res = explore(TOY, "hardened")
    assert res.points and res.lost_points == 0 and res.duplicate_points == 0
    kinds = {p.point.kind for p in res.points}
    assert kinds == {"before", "after", "torn"}  # torn applies to the temp file


def test_torn_point_leaves_prefix(tmp_path: Path) -> None:
    target = CrashPoint("torn", 1, "toy.save", keep=3)
    hook = CrashHook(target)
    with pytest.raises(BaseException) as info:
        write_file(tmp_path / "f", b"abcdefgh", step="toy.save", hook=hook)
    assert type(info.value).__name__ == "Crash"
    assert (tmp_path / "f").read_bytes() == b"abc"


@pytest.mark.parametrize("sequence", ["fractal.submit", "fractal.listing"])
def test_fractal_faithful_loses_turns_and_atomic_does_not(sequence: str) -> None:
    from harness.reliability.scenarios.fractal import scenarios

    sc = next(s for s in scenarios() if s.sequence == sequence)
    faithful = explore(sc, "faithful")
    assert faithful.lost_points > 0 and all(p.point.kind == "torn" for p in faithful.points if p.check.lost)
    hardened = explore(sc, "hardened")
    assert hardened.lost_points == 0 and hardened.duplicate_points == 0
    assert all(p.outcome == "ok" for p in hardened.points)


def test_memsim_crash_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from harness.cli.main import app

    runner = CliRunner()
    r = runner.invoke(app, ["crash", "--design", "bogus"])
    assert r.exit_code == 2 and "invalid value for '--design': 'bogus'" in r.output  # a usage error
    r = runner.invoke(app, ["crash", "--sequence", "fractal.nope", "--design", "fractal"])
    assert r.exit_code == 2 and "invalid value for '--sequence': 'fractal.nope'" in r.output
    out = tmp_path / "res"
    r = runner.invoke(app, ["crash", "--design", "fractal", "--sequence", "fractal.submit", "--hardened",
                            "--max-points", "6", "--out", str(out)])
    assert r.exit_code == 0, r.output
    report = json.loads((out / "crash.json").read_text())
    assert [(s["sequence"], s["mode"], s["crash_points"]) for s in report["sequences"]] == [
        ("fractal.submit", "faithful", 6), ("fractal.submit", "hardened", 6)]
    assert "| fractal | fractal.submit | faithful |" in (out / "crash.md").read_text()


def test_rel02_refuted_when_atomic_saves_write_in_place(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The hardened claim observes the files: break the atomic writer and it comes out refuted."""
    import fractal_sim.session as session_mod
    from harness.claims import ClaimContext, all_claims

    real = session_mod.write_file

    def in_place(path, data, *, step, hook, mode="overwrite"):
        return real(path, data, step=step, hook=hook, mode="overwrite")

    monkeypatch.setattr(session_mod, "write_file", in_place)
    (rel02,) = all_claims(ids=["REL-02"])
    obs = rel02.demonstrate(ClaimContext(tmp_path=tmp_path, seed=0, data_dir=None, quick=True))
    assert obs.verdict == "refuted"


def test_a_restart_refused_with_a_clear_error_is_ok_for_the_explorer_but_not_for_a_hardened_claim() -> None:
    from harness.claims.harness_reliability import _all_ok

    def refusing_check(root: Path, acks: list[str], mode: str) -> Check:
        c = _toy_check(root, acks, mode)
        if mode == "hardened":
            c.start = "clear_error"  # e.g. "error: <file>: unreadable": names the file, but nothing restarts
            c.lost = []
        return c

    refusing = Scenario("toy", "toy.refuse", "restart refuses", _toy_run, refusing_check)
    res = explore(refusing, "hardened")
    assert all(p.outcome == "ok" for p in res.points) and all(p.check.start == "clear_error" for p in res.points)
    assert res.as_dict()["refused_restarts"] == len(res.points)
    obs = _all_ok({p.point.label(): p.check for p in res.points[:2]}, "")
    assert obs.verdict == "refuted" and obs.measured["mismatches"]["restarts_not_clean"]["observed"]
    good = explore(TOY, "hardened")
    assert good.as_dict()["refused_restarts"] == 0
    assert _all_ok({p.point.label(): p.check for p in good.points[:2]}, "").verdict == "holds"
