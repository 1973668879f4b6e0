"""``memsim bench hosts`` (benchmarks/hosts.py): the level computation, the excerpt cutter and the renderer on
hand-made results (no host), and one short quick run on the real Claude Code when it is installed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import hosts as bench
from harness.hosts.wire import MemoryItem
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
    assert "| served prompt overhead p50 (first prompt) | claude-code | 100 ms | <= 300 ms | pass |" in md
    late = bench.render_markdown(_payload(filed_max=1.6))
    assert "| session end to filed with the service (max over runs) | claude-code | 1600 ms | <= 1500 ms | FAIL |" \
        in late
    assert "codex 0.169.0 not installed" in md
    assert "[... 700 bytes of host text ...]" in md
    assert "pointer_block from UserPromptSubmit: messages[1] (system, block 0), byte for byte, after " \
           "`UserPromptSubmit hook additional context:`" in md
    assert "1.00%" in md  # memory's share: 30 of 3000 tokens


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
    from tests.harness.hosts.conftest import require_host

    require_host("claude-code")
    paths = bench.run(tmp_path / "out", quick=True, hosts=["claude-code"], scenarios=["pointer-delivery"], runs=1)
    assert {p.name for p in paths} == {"hosts.json", "hosts.md", "hosts.png"}
    p = json.loads((tmp_path / "out" / "hosts.json").read_text(encoding="utf-8"))
    cells = p["latency"]["claude-code"]["cells"]
    assert {c: cells[c]["first"]["n"] for c in bench.CELLS} == {c: 1 for c in bench.CELLS}
    assert cells["served"]["session_end_to_filed_s"]["n"] == 1
    (sc,) = p["scenarios"]
    kinds = {d["kind"] for d in sc["sessions"][0]["delivered"]}
    assert "pointer_block" in kinds
    ex = p["excerpts"]["claude-code"]
    text = "".join(b["text"] for b in ex["blocks"])
    assert BLOCK_HEADER[0] in text and "bytes of host text ...]" in text
    assert {lv["level"] for lv in p["levels"]} >= {"served prompt overhead p50 (first prompt)",
                                                   "session end to filed with the service (max over runs)"}
