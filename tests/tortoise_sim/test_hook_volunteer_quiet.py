"""``hook-volunteer`` before any memory exists (a fresh install: no store yet) prints nothing and writes no stderr
line; a store that really cannot be used still gets the hook's one stderr line. The pipeline's own answer is the
spec's either way (degraded ``assembly_error`` when its search cannot open a store)."""

from __future__ import annotations

import json

from tests.tortoise_sim.sessionkit import hook, short_tmp

PROMPTS = ("decision: the search index is rebuilt every Sunday night", "What did we decide about the index?")


def test_no_store_yet_is_quiet_and_creates_nothing():
    with short_tmp() as d:
        for prompt in PROMPTS:
            r = hook(["hook-volunteer", "--harness", "claude", "--db", str(d / "db" / "t.kuzu")],
                     json.dumps({"prompt": prompt}))
            assert (r.returncode, r.stdout, r.stderr) == (0, b"", b""), r
        assert list(d.iterdir()) == []


def test_the_pipeline_answer_on_no_store_is_still_the_specs():
    from tortoise_sim.hook_client import _LazyReadStore
    from tortoise_sim.volunteer import run_volunteer_pipeline

    with short_tmp() as d:
        res = run_volunteer_pipeline(_LazyReadStore(str(d / "t.kuzu")), [{"role": "user", "content": PROMPTS[1]}])
    assert res["pointers"] == [] and res["degraded_reason"] == "assembly_error"


def test_a_store_that_cannot_be_opened_is_one_stderr_line():
    with short_tmp() as d:
        bad = d / "t.kuzu"
        bad.write_bytes(b"not a kuzu store")
        r = hook(["hook-volunteer", "--harness", "claude", "--db", str(bad)], json.dumps({"prompt": PROMPTS[1]}))
    assert r.returncode == 0 and r.stdout == b""
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memsim hook: hook-volunteer:"), lines
