"""Crash sequences of AgentFly and Tortoise: the reports' loss windows are found, the hardened options close them."""

from __future__ import annotations

from harness.reliability.crash import (
    CrashPoint,
    Scenario,
    clean_crash_points,
    crash_at,
    explore,
    find_scenario,
)


def _at(sc: Scenario, mode: str, pick: list[tuple[str, str]], tmp_path) -> dict[str, object]:
    """Run ``sc`` crashing at the first crash point of each (kind, step) in ``pick``; outcome per pick."""
    _, points = clean_crash_points(sc, mode)
    out: dict[str, object] = {}
    for kind, step in pick:
        point: CrashPoint = next(p for p in points if p.kind == kind and p.step == step)
        root = tmp_path / f"{mode}-{kind}-{step}"
        root.mkdir()
        out[f"{kind} {step}"] = crash_at(sc, mode, root, point)
    return out


def test_agentfly_np_faithful_windows_and_journal_closes_them() -> None:
    sc = find_scenario("agentfly", "agentfly.np")
    faithful = explore(sc, "faithful")
    after_result = [p for p in faithful.points if p.point.kind == "after" and p.point.step == "agentfly.result_write"]
    assert after_result and all(p.check.lost for p in after_result)  # AGF-38: the case is lost for good
    torn_result = [p for p in faithful.points if p.point.kind == "torn" and p.point.step == "agentfly.result_write"]
    assert any(p.check.duplicates for p in torn_result)  # AGF-30: the question runs again, its case lands twice
    hardened = explore(sc, "hardened")
    assert hardened.lost_points == 0 and hardened.duplicate_points == 0
    assert all(p.outcome == "ok" for p in hardened.points)


def test_agentfly_pm_pairs_window(tmp_path) -> None:
    sc = find_scenario("agentfly", "agentfly.pm")
    res = _at(sc, "faithful", [("after", "agentfly.pairs_write")], tmp_path)
    assert res["after agentfly.pairs_write"].lost  # pairs on disk, case never written, restart skips the question
    res = _at(sc, "hardened", [("after", "agentfly.pairs_write"), ("torn", "agentfly.case_write"),
                               ("torn", "agentfly.journal")], tmp_path)
    assert all(c.outcome == "ok" for c in res.values())


def test_tortoise_lifecycle_event_before_cas(tmp_path) -> None:
    sc = find_scenario("tortoise", "tortoise.lifecycle")
    res = _at(sc, "faithful", [("before", "retract.cas"), ("after", "kuzu.commit")], tmp_path)
    assert any("PointRetracted" in d for d in res["before retract.cas"].disagree)  # TOR-24: event, no CAS
    res = _at(sc, "hardened", [("after", "kuzu.commit"), ("before", "event.journal"), ("torn", "event.journal")],
              tmp_path)
    assert all(c.outcome == "ok" for c in res.values()), {k: c.disagree for k, c in res.items()}


def test_tortoise_capture_commit_then_feed_window(tmp_path) -> None:
    sc = find_scenario("tortoise", "tortoise.capture")
    res = _at(sc, "faithful", [("after", "kuzu.commit")], tmp_path)
    assert res["after kuzu.commit"].disagree  # turns committed, their PointAdded events never written
    res = _at(sc, "hardened", [("after", "kuzu.commit"), ("torn", "event.journal")], tmp_path)
    assert all(c.outcome == "ok" for c in res.values()), {k: c.disagree for k, c in res.items()}
