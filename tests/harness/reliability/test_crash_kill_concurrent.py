"""Real SIGKILLs (child process, restart in a fresh one) and concurrent writers, bounded in time."""

from __future__ import annotations

import pytest

from harness.reliability.concurrent import agentfly_case, fractal_case, tortoise_case
from harness.reliability.kill import KILL_PLANS, kill_run


def _plan(sequence: str, mode: str):
    return next(p for p in KILL_PLANS if p.sequence == sequence and p.mode == mode)


def test_kill_fractal_faithful_keeps_acked_turn_and_hardened_leaves_only_a_temp_file() -> None:
    r = kill_run(_plan("fractal.submit", "faithful"), timeout=60)
    assert r["killed"] and r["outcome"] == "ok" and r["acked"] == 1
    r = kill_run(_plan("fractal.submit", "hardened"), timeout=60)
    assert r["killed"] and r["outcome"] == "ok" and r["start"] == "ok" and len(r["leftover_temp_files"]) == 1


def test_kill_agentfly_after_result_append() -> None:
    r = kill_run(_plan("agentfly.pm", "faithful"), timeout=60)
    assert r["killed"] and r["lost"] and "suppressed by restart" in r["lost"][0]  # AGF-38 in a real process
    r = kill_run(_plan("agentfly.pm", "hardened"), timeout=60)
    assert r["killed"] and r["outcome"] == "ok" and r["start"] == "ok"


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
    faithful = tortoise_case("faithful", n=2, timeout=90)
    hardened = tortoise_case("hardened", n=2, timeout=90)
    for r in (faithful, hardened):
        assert r["tracebacks"] == 0 and r["errors"] == 0 and r["hook_nonzero_exits"] == 0
        # the contests really happened: each side's open failed while the other held the store
        assert r["hook_lock_errors_while_writer_held"] == r["writer_lock_errors_while_hook_held"] == 2
    # faithful: the hook's opens during the writer's hold failed (Kuzu's raw lock error), it printed nothing and
    # its prompts got no memory; the captures opened during the hook's hold are lost
    assert faithful["hook_open_failures"] == 2 and faithful["failure_types"] == ["RuntimeError"]
    assert faithful["hook_served_while_writer_held"] == faithful["hook_volunteered_while_writer_held"] == 0
    assert faithful["hook_failed_calls_printing"] == 0 and faithful["hook_volunteered"] == 2
    assert faithful["writer_open_failures"] == faithful["lost_updates"] == faithful["lost_while_hook_held"] == 2
    assert faithful["captures_stored"] == 2
    # hardened: both sides waited for the holder; every prompt got the memory and every capture is stored
    assert hardened["open_failures"] == 0 and hardened["hook_volunteered"] == hardened["hook_calls"] == 4
    assert hardened["captures_stored"] == 4 and hardened["lost_updates"] == 0
