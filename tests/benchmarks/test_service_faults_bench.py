"""``memsim bench service-faults``: a small stress run holds (0 crashes, 0 lost acknowledged captures, every
hostile client answered or closed) and the lost-capture check can fail."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from benchmarks.service_faults import HOSTILE_KINDS, capture_conversation, lost_captures, render, stress


def test_small_stress_run_loses_nothing_and_renders_from_json():
    work = Path(tempfile.mkdtemp(prefix="sft", dir="/tmp"))
    try:
        s = stress(work, good=20, hostile=20, time_limit_s=120, embedder="hashing", seed=1,
                   track=lambda it, description="", total=None: it)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert s["service_crashes"] == 0 and s["service_pid_unchanged"] and s["service_stopped_cleanly"], s
    assert s["acknowledged_captures"] > 0 and s["lost_acknowledged_captures"] == 0, s
    assert s["requests_done"] == {"good": 20, "hostile": 20} and s["good_errors"] == {}, s
    assert set(s["hostile_answers"]) == set(HOSTILE_KINDS)
    for kind, answers in s["hostile_answers"].items():
        assert "ok" not in answers, (kind, answers)  # no hostile frame is served as a request
    assert s["service_errors_counted"] >= sum(sum(v.values()) for k, v in s["hostile_answers"].items()
                                              if k != "connect_close")
    payload = {"stress": s, "kills": [], "capacity": {"returncode": 0, "sessions": 3, "captured": 3, "points": 9,
                                                      "capture_seconds": 0.1, "buffer_pool_mib": 1024.0,
                                                      "full_at": None},
               "quick": True, "seed": 1, "seconds": 1.0,
               "machine": {"date_utc": "d", "cpu": "c", "affinity_cpus": 2, "cpu_count": 2, "mem_total_gib": 1,
                           "torch_threads": 1, "platform": "p", "python": "3", "versions": {}}}
    md = render(payload)
    assert f"lost: **{s['lost_acknowledged_captures']}**" in md and "Service crashes: **0**" in md


def test_lost_capture_check_reports_a_missing_capture(tmp_path):
    from tortoise_sim import SimConfig, Tortoise

    t = Tortoise(tmp_path / "db.kuzu", config=SimConfig(embedder="hashing"), seed=None)
    try:
        t.capture_session(capture_conversation(1), session_id="sf-1")
        assert lost_captures(t, ["sf-1"]) == []
        assert lost_captures(t, ["sf-1", "sf-2"]) == ["sf-2"]
    finally:
        t.close()
