"""Real SIGKILLs (child process, restart in a fresh one) and concurrent writers, bounded in time."""

from __future__ import annotations

import pytest

from harness.crash_concurrent import agentfly_case, fractal_case, tortoise_case
from harness.crash_kill import KILL_PLANS, kill_run


def _plan(sequence: str, mode: str):
    return next(p for p in KILL_PLANS if p.sequence == sequence and p.mode == mode)


def test_kill_fractal_faithful_keeps_acked_turn_and_hardened_leaves_only_a_temp_file() -> None:
    r = kill_run(_plan("fractal.submit", "faithful"), timeout=60)
    assert r["killed"] and r["outcome"] == "ok" and r["acked"] == 1
    r = kill_run(_plan("fractal.submit", "hardened"), timeout=60)
    assert r["killed"] and r["outcome"] == "ok" and len(r["leftover_temp_files"]) == 1


def test_kill_agentfly_after_result_append() -> None:
    r = kill_run(_plan("agentfly.pm", "faithful"), timeout=60)
    assert r["killed"] and r["lost"] and "suppressed by restart" in r["lost"][0]  # AGF-38 in a real process
    r = kill_run(_plan("agentfly.pm", "hardened"), timeout=60)
    assert r["killed"] and r["outcome"] == "ok"


def test_kill_tortoise_mid_transaction_recovers_from_wal() -> None:
    r = kill_run(_plan("tortoise.capture", "faithful"), timeout=90)
    assert r["killed"] and r["start"] == "ok"  # the store reopens: Kuzu dropped the uncommitted transaction
    assert not r["lost"] and r["disagree"]  # the committed turns stay, one without its PointAdded event


@pytest.mark.parametrize("mode", ["faithful", "hardened"])
def test_concurrent_fractal_session(mode: str) -> None:
    r = fractal_case(mode, n=8, timeout=60)
    assert r["errors"] == 0 and r["tracebacks"] == 0
    if mode == "faithful":
        assert r["lost_updates"] > 0  # the last save wins
    else:
        assert r["lost_updates"] == 0 and r["stored"] == 16


@pytest.mark.parametrize("mode", ["faithful", "hardened"])
def test_concurrent_agentfly_drivers(mode: str) -> None:
    r = agentfly_case(mode, n=8, timeout=60)
    assert r["errors"] == 0 and r["tracebacks"] == 0 and r["lost_updates"] == 0
    assert (r["duplicates"] > 0) if mode == "faithful" else (r["duplicates"] == 0 and r["processed"] == 8)


def test_concurrent_tortoise_hook_and_capture() -> None:
    faithful = tortoise_case("faithful", n=3, timeout=90)
    hardened = tortoise_case("hardened", n=3, timeout=90)
    for r in (faithful, hardened):
        assert r["tracebacks"] == 0 and r["hook_nonzero_exits"] == 0
    assert hardened["open_failures"] == 0 and hardened["hook_store_opened"] == hardened["hook_calls"]
    assert hardened["captures_stored"] == 3
    # faithful: whichever side opens second gets Kuzu's raw lock error (the hook swallows it; a capture is lost)
    assert all(t == "RuntimeError" for t in faithful["failure_types"])
    assert faithful["captures_stored"] == 3 - faithful["writer_open_failures"]
