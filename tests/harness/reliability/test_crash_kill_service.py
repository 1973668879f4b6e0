"""SIGKILL of the resident Tortoise service in the middle of a capture: nothing acknowledged is lost."""

from __future__ import annotations

import json
import subprocess
import sys

from harness.reliability.kill import kill_run
from harness.reliability.kill_service import SERVICE_KILL_PLANS


def test_service_killed_mid_capture_loses_nothing_acknowledged():
    r = kill_run(SERVICE_KILL_PLANS[0], timeout=120)
    assert r["killed"] and r["child_returncode"] == -9, r  # the service really died of SIGKILL ...
    assert r["unacknowledged"], r  # ... while a capture was in flight (that capture got no answer)
    assert r["acked"] == SERVICE_KILL_PLANS[0].occurrence - 1, r
    assert r["start"] == "ok" and r["lost"] == [] and r["duplicates"] == [] and r["outcome"] == "ok", r


def test_the_check_reports_an_acknowledged_capture_that_is_missing(tmp_path):
    """The restart check can fail: acknowledgements naming a capture the store never saw are reported lost."""
    from harness.reliability.kill_service import conversation
    from tortoise_sim import SimConfig, Tortoise

    t = Tortoise(tmp_path / "db.kuzu", config=SimConfig(embedder="hashing"), seed=None)
    t.capture_session(conversation(1), session_id="svc-cap-1")
    t.close()
    (tmp_path / "acks.json").write_text(json.dumps(["svc-cap-1", "svc-cap-2"]))
    r = subprocess.run([sys.executable, "-m", "harness.reliability.kill_service", "check", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["outcome"] == "failed" and out["acked"] == 2, out
    assert any(x.startswith("svc-cap-2: Session node") for x in out["lost"]), out
    assert not any(x.startswith("svc-cap-1") for x in out["lost"]), out
