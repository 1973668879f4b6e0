"""``memsim bench hosts`` (benchmarks/hosts.py, hosts_cells.py, hosts_page.py): the level computation, the overhead
intervals, the per-run table, the excerpt cutter and the renderer on hand-made results (no host), and one short quick
run on the real Claude Code when it is installed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import hosts as bench
from benchmarks import hosts_cells, hosts_page
from harness.hosts.wire import MemoryItem
from harness.stats import hodges_lehmann
from tortoise_sim.hook_client import TIMEOUT_ENV
from tortoise_sim.volunteer import BLOCK_HEADER


def _session(cell: str, run: int, first: float | None, later: float | None, filed: float | None = None,
             hooks: tuple[tuple[str, float], ...] = ()) -> dict[str, Any]:
    return {"cell": cell, "run": run, "label": f"r{run}", "session_id": f"{cell}-{run}", "exit_code": 0,
            "timed_out": False, "isolation": "netns", "version": "x",
            "latency_s": [first] + ([later] if later is not None else []),
            "hooks": [{"event": e, "wall_s": w, "rc": 0, "signal": None} for e, w in hooks],
            "session_end_to_filed_s": filed, "filed_seen": filed is not None}


def _latency(served_extra: float, filed_max: float, runs: int = 4) -> dict[str, Any]:
    sessions = []
    for r in range(runs):
        sessions.append(_session("none", r, 0.5 + 0.01 * r, 0.2 + 0.01 * r))
        sessions.append(_session("cold", r, 2.5 + 0.01 * r, 1.5, filed=3.0,
                                 hooks=(("SessionStart", 1.0), ("UserPromptSubmit", 1.2), ("SessionEnd", 0.3))))
        sessions.append(_session("served", r, 0.5 + served_extra + 0.01 * r, 0.2 + served_extra + 0.01 * r,
                                 filed=filed_max if r == 0 else 0.2,
                                 hooks=(("SessionStart", 0.1), ("UserPromptSubmit", 0.1))))
        sessions.append(_session("hung", r, 3.0, 1.4, hooks=(("SessionStart", 1.05), ("UserPromptSubmit", 1.05))))
    return bench.summarize_cells({"runs": runs, "prompts": 2, "sessions": sessions, "prepare": {}})


def _scenario(name: str, host: str, lost: bool | None, latency: list[float | None],
              hooks: list[tuple[str, float]]) -> dict[str, Any]:
    delivered = [{"kind": "pointer_block", "event": "UserPromptSubmit", "point_ids": ["p1"], "message_index": 1,
                  "role": "system", "block_index": 0, "part": "message",
                  "prefix": "UserPromptSubmit hook additional context: ", "exact": True, "trimmed": False,
                  "encoding": None, "whole": True, "bytes": 120, "tokens": 30, "first_seq": 0, "requests": 1}]
    return {"scenario": name, "records": ["MEM-RTE-hook-volunteer"], "host": host, "version": "1", "isolation": "netns",
            "sessions": [{"session": 0, "name": None, "session_id": "sid", "exit_code": 0, "timed_out": False,
                          "requests": 1, "items": [], "delivered": delivered if name == "pointer-delivery" else [],
                          "latency_s": latency,
                          "hooks": [{"event": e, "wall_s": w, "rc": 0, "signal": None} for e, w in hooks],
                          "store_vs_transcript": {"equal": True, "stored": 2, "conversation": 2,
                                                  "memory_fed_back": 0},
                          "store_unread": None, "lost": lost, "checks": {"lost": lost is False},
                          "checks_failed": [] if lost is False else ["lost"], "memory_token_share": 0.01,
                          "requests_full": [{"seq": 0, "conversation": True, "memory_bytes": 120, "memory_tokens": 30,
                                             "memory_token_share": 30 / 3000,
                                             "size": {"bytes": 12000, "tokens": 3000, "tool_bytes": 50000,
                                                      "tool_tokens": 11000, "blocks": 3, "tools": 20}}]}]}


def _payload(*, served_extra: float = 0.1, filed_max: float = 0.4, lost: bool | None = False,
             hung_latency: float = 3.2) -> dict[str, Any]:
    lat = {"claude-code": _latency(served_extra, filed_max)}
    scen = [_scenario("pointer-delivery", "claude-code", False, [0.9], [("UserPromptSubmit", 0.1)]),
            _scenario("hung-service", "claude-code", lost, [hung_latency],
                      [("SessionStart", 1.05), ("UserPromptSubmit", 1.05)])]
    cells = {h: v["cells"] for h, v in lat.items()}
    p: dict[str, Any] = {
        "quick": False, "seed": 0,
        "options": {"hosts": ["claude-code"], "scenarios": ["pointer-delivery", "hung-service"], "runs": 4,
                    "prompts_per_latency_session": 2, "isolation": "auto", "hook_timeout_s": 1.0,
                    "hook_slack_s": bench.HOOK_SLACK_S},
        "skipped_hosts": {"codex": "codex 0.169.0 not installed (memsim hosts install codex)"},
        "host_versions": {"claude-code": "2.1.328"}, "scenarios": scen, "latency": lat,
        "excerpts": {"claude-code": {"scenario": "pointer-delivery", "session": "s0", "seq": 0,
                                     "api": "anthropic.messages",
                                     "blocks": [{"message_index": 1, "role": "system", "block_index": 0,
                                                 "part": "message", "block_bytes": 900, "kinds": ["pointer_block"],
                                                 "text": "[... 700 bytes of host text ...]\nUserPromptSubmit hook "
                                                         "additional context: " + BLOCK_HEADER[0]}]}},
        "fault_delays": bench.fault_delays(scen, cells, 1.0), "tokens": bench.token_share(scen),
        "seconds": 12.0,
        "machine": {"date_utc": "2026-01-01T00:00:00+00:00", "cpu": "cpu", "cpu_count": 2, "affinity_cpus": 2,
                    "mem_total_gib": 8.0, "platform": "linux", "python": "3.12", "torch_threads": 1,
                    "versions": {"memsim": "0"}},
    }
    p["levels"] = bench.levels(p)
    return p


def _level(p: dict[str, Any], prefix: str) -> dict[str, Any]:
    return next(lv for lv in p["levels"] if lv["level"].startswith(prefix))


def test_cells_overhead_is_p50_minus_no_hooks_p50() -> None:
    lat = _latency(0.1, 0.4)
    none = lat["cells"]["none"]["first"]["p50"]
    served = lat["cells"]["served"]["first"]["p50"]
    assert lat["cells"]["served"]["first"]["overhead_p50"] == pytest.approx(served - none)
    assert lat["cells"]["served"]["first"]["overhead_p50"] == pytest.approx(0.1)
    assert lat["cells"]["cold"]["hook_wall_s"]["UserPromptSubmit"]["p50"] == pytest.approx(1.2)
    assert lat["cells"]["served"]["session_end_to_filed_s"]["max"] == pytest.approx(0.4)


def test_levels_pass_and_fail_from_the_data() -> None:
    good = _payload()
    assert all(lv["pass"] for lv in good["levels"]), good["levels"]
    slow = _payload(served_extra=0.45)
    assert not _level(slow, "served prompt overhead p50 (first").get("pass")
    assert not _level(slow, "served prompt overhead p50 (later").get("pass")
    late = _payload(filed_max=1.6)
    assert not _level(late, "session end to filed").get("pass")
    assert _level(late, "session end to filed")["value"] == pytest.approx(1.6)
    lost = _payload(lost=True)
    assert _level(lost, "fault scenarios: sessions lost")["value"] == 1
    assert not _level(lost, "fault scenarios: sessions lost")["pass"]
    unknown = _payload(lost=None)
    assert not _level(unknown, "fault scenarios: sessions lost")["pass"]


def test_overhead_interval_is_the_hodges_lehmann_shift_over_no_hooks() -> None:
    lat = _latency(0.1, 0.4)
    none = [0.5 + 0.01 * r for r in range(4)]
    for c, first in (("cold", [2.5 + 0.01 * r for r in range(4)]), ("served", [0.6 + 0.01 * r for r in range(4)]),
                     ("hung", [3.0] * 4)):
        iv = lat["cells"][c]["first"]["overhead_interval"]
        assert iv == hodges_lehmann(first, none).to_dict()
        assert iv["method"] == "hodges-lehmann" and iv["confidence"] == 0.95
    served = lat["cells"]["served"]["first"]["overhead_interval"]
    # four runs per cell: the exact interval is [smallest, largest] pairwise difference
    assert (served["estimate"], served["lo"], served["hi"]) == pytest.approx((0.1, 0.07, 0.13))
    assert lat["cells"]["none"]["first"]["overhead_interval"] is None
    json.dumps(lat)  # the intervals are plain JSON


def test_quick_runs_are_the_fewest_with_interval_bounds() -> None:
    n = bench.QUICK_RUNS
    assert n == 4 and bench.FULL_RUNS >= 30
    assert hodges_lehmann(range(n), [x + 0.5 for x in range(n)]).hi is not None
    assert hodges_lehmann(range(n - 1), [x + 0.5 for x in range(n - 1)]).hi is None


def _served_level(served_first: list[float], none_first: list[float]) -> dict[str, Any]:
    sessions = []
    for r, (sv, nv) in enumerate(zip(served_first, none_first, strict=True)):
        sessions += [_session("none", r, nv, None), _session("served", r, sv, None, filed=0.2),
                     _session("cold", r, 2.0, None, filed=0.5), _session("hung", r, 3.0, None)]
    lat = bench.summarize_cells({"runs": len(served_first), "prompts": 1, "sessions": sessions, "prepare": {}})
    return _level({"latency": {"claude-code": lat}, "levels": bench.levels({"latency": {"claude-code": lat}})},
                  "served prompt overhead p50 (first")


def test_level_fails_when_only_the_point_estimate_is_within_it() -> None:
    none = [0.5 + 0.001 * r for r in range(10)]
    spread = [0.0, 0.05, 0.1, 0.15, 0.2, 0.21, 0.25, 0.6, 0.8, 1.0]  # median 0.205: the point is within 300 ms
    lv = _served_level([0.5 + d for d in spread], none)
    assert lv["value"] <= bench.SERVED_OVERHEAD_LEVEL_S
    assert lv["interval"]["hi"] > bench.SERVED_OVERHEAD_LEVEL_S
    assert lv["pass"] is False and "upper bound is not" in lv["note"]
    tight = _served_level([0.7 + 0.001 * r for r in range(10)], none)  # the same median overhead, no spread
    assert tight["interval"]["hi"] <= bench.SERVED_OVERHEAD_LEVEL_S and tight["pass"] is True


def test_level_is_decided_by_the_upper_bound() -> None:
    def st(est: float, lo: float | None, hi: float | None) -> dict[str, Any]:
        return {"n": 10, "overhead_p50": est,
                "overhead_interval": {"estimate": est, "lo": lo, "hi": hi, "n": 20, "method": "hodges-lehmann",
                                      "confidence": 0.95}}

    assert bench.overhead_level("claude-code", "first", st(0.2, 0.1, 0.29))["pass"] is True
    assert bench.overhead_level("claude-code", "first", st(0.2, 0.1, 0.300))["pass"] is True
    assert bench.overhead_level("claude-code", "first", st(0.2, 0.1, 0.301))["pass"] is False
    no_bounds = bench.overhead_level("claude-code", "first", st(0.05, None, None))
    assert no_bounds["pass"] is False and f"at least {bench.QUICK_RUNS} per cell" in no_bounds["note"]
    three = _served_level([0.6, 0.61, 0.62], [0.5, 0.51, 0.52])  # three runs per cell: no 95% interval
    assert three["interval"]["hi"] is None and three["pass"] is False


def test_hooked_cells_pin_the_documented_hook_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.hosts.scenario import SCENARIO_DIR, load_scenario

    monkeypatch.setenv(TIMEOUT_ENV, "7")  # the caller's environment never reaches a host's hooks
    for c in bench.CELLS:
        cell = hosts_cells._Cell(c, "claude-code", tmp_path / c, tmp_path, "memsim")
        assert cell.env.get(TIMEOUT_ENV) == (None if c == "none" else "1"), c
    assert hosts_cells.HOOK_TIMEOUT_S == 1.0
    hung = load_scenario(SCENARIO_DIR / "hung-service.yaml")
    assert hosts_cells.hook_budget_s({**hung.hooks.env, **hung.sessions[0].env}) == 1.0
    assert hosts_cells.hook_budget_s({}) == 1.0
    assert hosts_cells.hook_budget_s({TIMEOUT_ENV: "2.5"}) == 2.5
    assert hosts_cells.hook_budget_s({TIMEOUT_ENV: "soon"}) == 1.0


def test_fault_budget_is_the_sessions_own_hook_timeout() -> None:
    p = _payload()
    scen = [dict(sc) for sc in p["scenarios"]]
    hung = next(sc for sc in scen if sc["scenario"] == "hung-service")
    hung["sessions"] = [dict(hung["sessions"][0], hook_timeout_s=2.0)]
    cells = {h: v["cells"] for h, v in p["latency"].items()}
    row = next(r for r in bench.fault_delays(scen, cells, 1.0) if r["scenario"] == "hung-service")
    assert row["budget_s"] == pytest.approx(2 * (2.0 + 0.25) + 1.0 + 1.2)
    assert "hung-service 2 s" in hosts_page.fault_budgets({**p, "scenarios": scen})


def test_probe_table_holds_every_latency_session(tmp_path: Path) -> None:
    from harness.probes import aggregate, read_probes

    lat = {"claude-code": _latency(0.1, 0.4), "codex": _latency(0.2, 0.3)}
    path = hosts_cells.write_probe_table(tmp_path / "hosts.probes.parquet", lat, data="hosts: test",
                                         config={"runs": 4})
    run = read_probes(path)
    assert len(run.table) == 2 * 4 * len(bench.CELLS)
    assert set(run.rows) == set(bench.CELLS)
    assert run.meta["headline_metrics"] == ["latency_first_s", "latency_later_s"]
    assert run.kinds["latency_first_s"] == "mean" and run.meta["stratify"] is False
    for host, lc in lat.items():
        agg = aggregate(run.table, run.probe_set(host), ["latency_first_s", "latency_later_s"], percentiles=(50,))
        for c in bench.CELLS:
            assert agg[c]["n_probes"] == 4
            for pos, col in hosts_cells.PROBE_METRICS.items():
                assert agg[c]["metrics"][col]["p50"] == pytest.approx(lc["cells"][c][pos]["p50"]), (host, c, pos)


def test_run_time_of_the_full_run_is_computed_from_the_json() -> None:
    p = _payload()
    p["latency"]["claude-code"].update(seconds=50.0, run_seconds=[10.0, 10.0, 10.0, 10.0])
    p["scenario_seconds"] = 100.0
    text = hosts_page.run_time(p)
    # 100 s of scenarios + 10 s preparing + 30 runs of 10 s
    assert f"At the full run's {bench.FULL_RUNS} runs per cell these hosts and scenarios take about 7 min." in text
    p["options"] = dict(p["options"], runs=bench.FULL_RUNS)
    p["latency"]["claude-code"].update(run_seconds=[10.0] * bench.FULL_RUNS, seconds=310.0)
    p["seconds"] = 410.0
    assert "This is a full run (30 runs per cell): the full run takes 7 min." in hosts_page.run_time(p)
    del p["scenario_seconds"]
    assert "did not record its phase times" in hosts_page.run_time(p)


def test_prompt_delayed_past_its_hooks_budget() -> None:
    # budget per hook: 1.0 s timeout + 0.25 s + the cold cell's p95 of that hook (SessionStart 1.0, UPS 1.2)
    none_p50 = _latency(0.1, 0.4)["cells"]["none"]["first"]["p50"]
    p = _payload(hung_latency=none_p50 + 2 * 1.25 + 1.0 + 1.2 - 0.05)
    row = next(r for r in p["fault_delays"] if r["scenario"] == "hung-service")
    assert row["budget_s"] == pytest.approx(2 * 1.25 + 1.0 + 1.2)
    assert row["over_budget"] is False
    assert _level(p, "fault scenarios: prompts delayed")["pass"]
    p = _payload(hung_latency=0.5 + 6.0)
    assert next(r for r in p["fault_delays"] if r["scenario"] == "hung-service")["over_budget"] is True
    assert not _level(p, "fault scenarios: prompts delayed")["pass"]


def test_excerpt_keeps_only_memory_and_its_framing() -> None:
    host_before = "Host environment text that must not be copied. " * 5
    pointer = f"{BLOCK_HEADER[0]}\n- point/abc123 The ledger uses Postgres\n"
    digest = "Not a digest, just words here"
    block = (host_before + "\nUserPromptSubmit hook additional context: " + pointer + "More host text after.\n")
    req = {"seq": 3, "api": "anthropic.messages",
           "body": {"system": [{"type": "text", "text": "Host system prompt words."}],
                    "tools": [{"name": "Bash", "description": "host tool text"}],
                    "messages": [{"role": "user", "content": "What database?"},
                                 {"role": "system", "content": [{"type": "text", "text": block}]}]}}
    items = [MemoryItem("pointer_block", pointer, ["abc123"], "UserPromptSubmit"),
             MemoryItem("hook_text", digest, [], "SessionStart")]
    blocks = bench.excerpt_blocks(req, items)
    assert len(blocks) == 1
    b = blocks[0]
    assert (b["message_index"], b["role"], b["block_index"]) == (1, "system", 0)
    assert "UserPromptSubmit hook additional context: " + pointer in b["text"]
    assert "Host environment text" not in b["text"] and "More host text" not in b["text"]
    assert "Host system prompt" not in b["text"] and "host tool text" not in b["text"]
    # the newline that ends the host text before the framing line is kept and not counted
    assert f"[... {len(host_before.encode('utf-8'))} bytes of host text ...]\nUserPromptSubmit" in b["text"]
    assert f"[... {len(b'More host text after.')} bytes of host text ...]" in b["text"]


def test_render_is_computed_from_the_json() -> None:
    p = _payload()
    md = bench.render_markdown(p)
    assert "| served prompt overhead p50 (first prompt) | claude-code | 100 ms | 100 [70, 130] | <= 300 ms | pass |" \
        in md
    assert "| claude-code | served | first | 4 | 615 | 628 | 100 | 100 [70, 130] | 0 |" in md
    assert "Hodges-Lehmann shift" in md and "predates" not in md
    assert "`MEMSIM_HOOK_TIMEOUT` = 1 s" in md
    late = bench.render_markdown(_payload(filed_max=1.6))
    assert "| session end to filed with the service (max over runs) | claude-code | 1600 ms | every run (the maximum) " \
           "| <= 1500 ms | FAIL |" in late
    assert "codex 0.169.0 not installed" in md
    assert "[... 700 bytes of host text ...]" in md
    assert "pointer_block from UserPromptSubmit: messages[1] (system, block 0), byte for byte, after " \
           "`UserPromptSubmit hook additional context:`" in md
    assert "1.00%" in md  # memory's share: 30 of 3000 tokens


def test_results_written_before_the_intervals_get_them_at_render() -> None:
    p = _payload()
    old = json.loads(json.dumps(p))
    for lc in old["latency"].values():
        for cell in lc["cells"].values():
            for pos in ("first", "later"):
                cell[pos].pop("overhead_interval")
    for lv in old["levels"]:
        lv.pop("interval", None)
        lv.pop("rule", None)
    done = bench.complete(old)
    assert done["derived_at_render"] is True
    assert done["latency"]["claude-code"]["cells"]["served"]["first"]["overhead_interval"] == \
        p["latency"]["claude-code"]["cells"]["served"]["first"]["overhead_interval"]
    assert done["levels"] == p["levels"]
    assert "overhead_interval" not in old["latency"]["claude-code"]["cells"]["served"]["first"]  # not mutated
    md = bench.render_markdown(old)
    assert "predates the overhead intervals" in md and "100 [70, 130]" in md
    assert bench.complete(p) is p


def test_docs_page_renders_the_hosts_json(tmp_path: Path) -> None:
    from benchmarks import docs_pages

    (tmp_path / "hosts.json").write_text(json.dumps(_payload()), encoding="utf-8")
    page = next(pg for pg in docs_pages.PAGES if pg.slug == "hosts")
    text, figures = docs_pages.render_page(page, tmp_path)
    assert text.startswith("# Real agent hosts")
    assert "## Levels" in text and "memsim bench hosts --out benchmarks/results" in text
    assert figures == {}


@pytest.mark.slow
def test_quick_run_on_real_claude_code(tmp_path: Path) -> None:
    """One short run on the real host, checked as a whole (one test, so parallel workers never repeat the run):
    the JSON, its intervals and levels, the per-run table and the page."""
    from harness.probes import aggregate, read_probes
    from tests.harness.hosts.conftest import require_host

    require_host("claude-code")
    out = tmp_path / "out"
    paths = bench.run(out, quick=True, hosts=["claude-code"], scenarios=["pointer-delivery"], runs=1)
    assert {p.name for p in paths} == {"hosts.json", "hosts.md", "hosts.png", "hosts.probes.parquet"}
    p = json.loads((out / "hosts.json").read_text(encoding="utf-8"))
    cells = p["latency"]["claude-code"]["cells"]
    assert {c: cells[c]["first"]["n"] for c in bench.CELLS} == {c: 1 for c in bench.CELLS}
    assert cells["served"]["session_end_to_filed_s"]["n"] == 1
    (sc,) = p["scenarios"]
    kinds = {d["kind"] for d in sc["sessions"][0]["delivered"]}
    assert "pointer_block" in kinds
    assert sc["sessions"][0]["hook_timeout_s"] == 1.0
    ex = p["excerpts"]["claude-code"]
    text = "".join(b["text"] for b in ex["blocks"])
    assert BLOCK_HEADER[0] in text and "bytes of host text ...]" in text
    # the intervals: the Hodges-Lehmann shift of every hooked cell; one run per cell (the run as short as it can be)
    # is too few for bounds, so the latency level fails and says why
    for c in ("cold", "served", "hung"):
        iv = cells[c]["first"]["overhead_interval"]
        assert iv["method"] == "hodges-lehmann" and iv["n"] == 2 and iv["estimate"] is not None
        assert iv["lo"] is None and iv["hi"] is None
    lv = _level(p, "served prompt overhead p50 (first")
    assert lv["interval"] == cells["served"]["first"]["overhead_interval"] and lv["pass"] is False
    assert f"at least {bench.QUICK_RUNS} per cell" in lv["note"]
    assert p["options"]["hook_timeout_s"] == 1.0 and p["options"]["runs"] == 1
    assert p["scenario_seconds"] > 0 and len(p["latency"]["claude-code"]["run_seconds"]) == 1
    # the per-run table holds the same sessions as the JSON
    run = read_probes(out / "hosts.probes.parquet")
    assert len(run.table) == p["probes"]["rows"] == len(bench.CELLS)
    assert set(run.table.column("probe").to_pylist()) == {"0"}
    agg = aggregate(run.table, run.probe_set("claude-code"), ["latency_first_s"], percentiles=(50,))
    for c in bench.CELLS:
        assert agg[c]["metrics"]["latency_first_s"]["p50"] == pytest.approx(cells[c]["first"]["p50"])
    md = (out / "hosts.md").read_text(encoding="utf-8")
    assert "overhead shift [95% interval]" in md and "[no bounds at n = 2]" in md
    assert "At the full run's 30 runs per cell" in md
