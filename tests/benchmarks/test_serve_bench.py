"""``benchmarks.serve`` bookkeeping on hand-made rows (the timed run itself is `memsim bench serve`)."""

from __future__ import annotations

from benchmarks import serve


def _s(p50: float, n: int = 3, fired: int = 3, errors: int = 0) -> dict:
    return {"n": n, "p50_ms": p50, "p95_ms": p50 * 1.5, "p99_ms": p50 * 2, "mean_ms": p50, "max_ms": p50 * 2,
            "fired": fired, "errors": errors}


def _rows() -> list[dict]:
    small = {"points": 1000, "cold_courtesy": _s(200), "cold_retrieval": _s(900), "warm_courtesy": _s(60),
             "warm_retrieval": _s(90), "legacy_retrieval": _s(8000), "legacy_courtesy": _s(900),
             "service_start_s": 2.0, "service_rss_after_warm_bytes": 3e8, "service_rss_end_bytes": 3.2e8,
             "capture_s": _s(300), "first_after_capture": _s(95), "cache_refresh_s": 0.01,
             "cold_equals_warm": 10, "cold_equals_warm_of": 10}
    server = {"n": 30, "snapshot": 0, "total_ms": {"p50": 40.0, "p95": 60.0, "max": 70.0},
              "lock_wait_ms": {"p50": 1.0, "p95": 2.0, "max": 3.0}, "encode_ms": {"p50": 25.0, "p95": 30.0, "max": 31.0},
              "search_why_ms": {"p50": 14.0, "p95": 28.0, "max": 36.0}}
    big = dict(small, points=100_000, warm_retrieval=_s(180), service_rss_end_bytes=1.2e9,
               warm_retrieval_server=server,
               load={"clients": 8, "seconds": 60.0, "hooks": 500, "errors": 2, "error_kinds": {"exit 1": 2},
                     "throughput_per_s": 8.3, "all": _s(400), "retrieval": _s(450), "courtesy": _s(350),
                     "captures": 11, "capture_errors": 0, "capture_s": [0.5] * 11,
                     "first_retrieval_after_capture": _s(500), "timeline": [(0.1, 0.4, "retrieval", False),
                                                                           (0.2, 0.3, "courtesy", True)],
                     "capture_times": [(5.0, 0.5)], "server": dict(server, snapshot=4)})
    return [small, big]


def test_levels_ratios_and_report():
    rows = _rows()
    lv = {x["level"]: x for x in serve.levels(rows)}
    assert lv["warm retrieval hook p50 <= 60 ms at 100,000 points"]["met"] is False
    assert lv["warm retrieval hook p95 <= 100 ms at 100,000 points"]["met"] is False
    assert lv["retrieval hook p95 <= 500 ms under 8 concurrent hook clients with a capture every 5 s"]["met"] is False
    assert "service p50 40 ms (n=30): lock wait 1 ms, query encode 25 ms, search and why-blocks 14 ms" in lv[
        "warm retrieval hook p50 <= 60 ms at 100,000 points"]["measured"]
    assert lv["cold retrieval hook (no service) <= 2 s at 1,000 points"]["met"] is True
    assert lv["zero errors under 8 concurrent hook clients with a capture every 5 s"]["met"] is False
    assert lv["service memory <= 1 GB at 100,000 points"]["met"] is False
    ratios = {r["key"]: r["value"] for r in serve.ratios(rows)}
    assert ratios["cold_vs_warm_retrieval@1000"] == 10.0 and ratios["legacy_vs_warm_retrieval@1000"] == 8000 / 90
    payload = {"meta": {"machine": {"cpu": "x", "affinity_cpus": 2, "cpu_count": 2, "mem_total_gib": 1,
                                    "torch_threads": 1, "platform": "p", "python": "3", "versions": {},
                                    "date_utc": "d"}, "quick": True, "wall_s": 1.0},
               "builds": [{"points": 1000, "embed_s": 1.0, "load_s": 1.0, "bytes": 2**20, "cached": True}],
               "rows": rows, "ratios": serve.ratios(rows), "levels": serve.levels(rows)}
    md = serve.render_markdown(payload)
    assert "| 100,000 | retrieval | warm |" in md and "Errors by kind" in md and "| NO |" in md
    assert "## Inside the service" in md and "| 100,000 | load | 30 | 4 |" in md
    fig = serve.figure(payload)
    assert len(fig.axes) == 2


def test_bad_output_detection():
    ok = {"rc": 0, "stderr": "", "stdout": '{"hookSpecificOutput": {"additionalContext": "x"}}\n'}
    assert serve._bad(ok) is None
    assert serve._bad({**ok, "stdout": ""}) is None
    assert serve._bad({**ok, "rc": 2}) == "exit 2"
    assert serve._bad({**ok, "stdout": "not json\n"}) == "output is not one line of harness JSON"
    assert serve._bad({**ok, "stderr": "Traceback (most recent call last)"}) == "traceback on stderr"
    late = ("memsim hook: the Tortoise service on /s accepted the connection but did not answer within 1 s "
            "($MEMSIM_HOOK_TIMEOUT); printing nothing\n")
    assert serve._bad({**ok, "stdout": "", "stderr": late}) == "service answer past the hook timeout"
    assert serve._bad({**ok, "stdout": "", "stderr": "memsim hook: the Tortoise service on /s failed: x"}) == (
        "hook failure note on stderr")


def test_first_volunteer_after_a_capture_is_one_number_the_hook_through_the_service():
    rows = _rows()
    rows[1] = dict(rows[1], first_after_capture=_s(274), first_call_after_capture=_s(388))
    fv = serve.first_volunteer_after_capture(rows)
    assert fv["points"] == 100_000 and fv["hook_p50_ms"] == 274 and fv["service_call_p50_ms"] == 388
    (lv,) = [x for x in serve.levels(rows) if x["level"].startswith("first volunteer after a capture")]
    assert lv["met"] is False and lv["measured"].startswith("hook p50 274 ms")
    assert "qualified: the service's socket call alone p50 388 ms" in lv["measured"]
    rows[1] = dict(rows[1], first_after_capture=_s(80))
    assert serve.first_volunteer_after_capture(rows)["met"] is True
    rows[1] = dict(rows[1], first_call_after_capture_server_ms=[20.0, 30.0, 40.0])
    (lv,) = [x for x in serve.levels(rows) if x["level"].startswith("first service call after a capture")]
    assert lv["met"] is False and lv["measured"].startswith("p50 388 ms") and "in the service p50 30 ms" in lv[
        "measured"]


def test_decision_store_and_second_install_levels_and_report():
    rows = _rows()
    server = rows[1]["warm_retrieval_server"]
    drows = [{"points": 2000, "store": "decisions", "cold_retrieval": _s(900), "warm_courtesy": _s(40),
              "warm_retrieval": _s(45), "warm_retrieval_alt": _s(35), "warm_courtesy_alt": _s(30),
              "warm_alt_equals_warm": 3, "warm_retrieval_server": server, "service_rss_end_bytes": 4e8,
              "cold_equals_warm": 2, "cold_equals_warm_of": 2},
             {"points": 100_000, "store": "decisions", "cold_retrieval": _s(4000), "warm_courtesy": _s(40),
              "warm_retrieval": _s(70), "warm_retrieval_alt": _s(58), "warm_courtesy_alt": _s(30),
              "warm_alt_equals_warm": 3, "warm_retrieval_server": server, "service_rss_end_bytes": 9e8,
              "cold_equals_warm": 1, "cold_equals_warm_of": 2}]
    rows[1] = dict(rows[1], warm_retrieval_alt=_s(170), warm_alt_equals_warm=3)
    installs = {"default": {"exe": "/v/bin/memsim", "editable": True, "python_start_p50_ms": 25.0},
                "alt": {"exe": "/ne/bin/memsim", "editable": False, "python_start_p50_ms": 14.0}}
    lv = {x["level"]: x for x in serve.levels(rows, drows, installs)}
    d = lv["warm retrieval hook p50 <= 60 ms at 100,000 points (near-duplicate decision store)"]
    assert d["met"] is False and d["measured"].startswith("p50 70 ms (by size 2,000: 45 ms, 100,000: 70 ms)")
    assert lv["cold (in-process) and warm (service) hooks print the same on the decision store"]["met"] is False
    alt = lv["warm retrieval hook p50 <= 60 ms at 100,000 points (near-duplicate decision store), hook from the "
             "second install"]
    assert alt["met"] is True and alt["measured"].startswith(
        "p50 58 ms (non-editable install, bare interpreter start p50 14 ms) against 70 ms ")
    assert "from the default (editable install, bare interpreter start p50 25 ms)" in alt["measured"]
    assert lv["warm retrieval hook p50 <= 60 ms at 100,000 points, hook from the second install"]["met"] is False
    assert serve.levels(rows) == serve.levels(rows, [], None)[:len(serve.levels(rows))]
    payload = {"meta": {"machine": {"cpu": "x", "affinity_cpus": 2, "cpu_count": 2, "mem_total_gib": 1,
                                    "torch_threads": 1, "platform": "p", "python": "3", "versions": {},
                                    "date_utc": "d"}, "quick": True, "wall_s": 1.0, "installs": installs},
               "builds": [{"points": 2000, "store": "decisions", "distinct_texts": 975, "embed_s": 1.0,
                           "load_s": 1.0, "bytes": 2**20, "cached": True}],
               "rows": rows, "decision_rows": drows, "ratios": serve.ratios(rows),
               "levels": serve.levels(rows, drows, installs)}
    md = serve.render_markdown(payload)
    assert "## Near-duplicate store" in md and "| 2,000 | 975 | retrieval | warm, second install | 3 | 35 |" in md
    assert "| 100,000 | retrieval | warm, second install |" in md and "non-editable install" in md


def test_decision_store_texts_repeat_and_prompts_search():
    from tortoise_sim.volunteer import has_intent

    texts = serve.decisions(5000, 0)
    assert texts == serve.decisions(5000, 0) and len(set(texts)) < len(texts) / 2
    assert {t.split(":")[0] for t in texts} == {"decision"}
    assert all(has_intent(q) for q in serve.decision_questions(40, 0))
