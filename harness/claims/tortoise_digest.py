"""Tortoise hook and digest claims TOR-30..33 (spec §7: session-start digest, per-prompt hook).

Shared set-up lives in ``tortoise_common``.
"""

from __future__ import annotations

import json
from typing import Any

from harness.claims import ClaimContext, Observation, claim
from harness.claims.tortoise_common import D, ask, new_sim, t0_point


@claim("TOR-30", design=D, record="MEM-RTE-start-digest", kind="mechanism",
       statement="The digest is recency-selected with fixed caps.")
def tor_30(ctx: ClaimContext) -> Observation:
    empty = new_sim(ctx, "empty").context()
    sim = new_sim(ctx, extractor=None)
    sim.diary_write("bot", "Reviewed the schema with the team.")
    sim.capture_session([{"role": "user", "content": "kickoff call"}], "kick")
    decisions = [f"Decision {i:02d}: " + "keep the rollout notes terse and numbered " * 6 for i in range(12)]
    for d in decisions:
        sim.create_point("decision", d)
    text = sim.context()
    lines = text.splitlines()
    point_bullets = [ln for ln in lines if ln.startswith("- (")]
    diary_bullets = [ln for ln in lines if ln.startswith("- [2")]
    expected = [f"- (decision) {d[:160]}" for d in reversed(decisions)][:8]
    return Observation.from_checks({
        "eight_newest_decisions": point_bullets == expected,
        "content_cut_160": all(len(b) <= len("- (decision) ") + 160 for b in point_bullets),
        "one_diary_bullet": len(diary_bullets) == 1 and diary_bullets[0].startswith("- [2026-03-01] "),
        "no_event_printed": "session_kick" not in text and "sessionCaptured" not in text,
        "empty_store_one_line": len(empty.splitlines()) == 1,
    }, measured={"point_bullets": len(point_bullets), "diary_bullets": len(diary_bullets), "empty": empty.strip()},
        evidence=text[:1200])


@claim("TOR-31", design=D, record="MEM-RTE-start-digest", kind="consequence",
       statement="The noise filter runs after the LIMIT, so one capture can empty the points section.")
def tor_31(ctx: ClaimContext) -> Observation:
    out = {}
    for name, flt in (("on", True), ("off", False)):
        sim = new_sim(ctx, name, extractor=None, digest_noise_filter=flt)
        for i in range(3):
            sim.create_point("decision", f"Decision number {i} about the release train")
        sim.capture_session([{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} chatter"}
                             for i in range(25)], "s1")
        out[name] = sim.context()
    bullets_off = [ln for ln in out["off"].splitlines() if ln.startswith("- (")]
    return Observation.from_checks({
        "no_points_section": "## Recent points" not in out["on"] and "- (decision)" not in out["on"],
        "unfiltered_8_turn_bullets": len(bullets_off) == 8
        and all(b.startswith("- (event) [user] ") or b.startswith("- (event) [assistant] ") for b in bullets_off),
    }, measured={"filtered": out["on"], "unfiltered_bullets": bullets_off[:3]}, evidence=out["on"])


@claim("TOR-32", design=D, record="MEM-BAP-start-digest", kind="mechanism",
       statement="Session-start supply is automatic, advisory stdout, task-independent.")
def tor_32(ctx: ClaimContext) -> Observation:
    from tortoise_sim.hooks import hook_session_start

    sim = new_sim(ctx)
    t0_point(sim, "decision", "Use Kuzu for the simulator store.")
    sim.diary_write("bot", "Reviewed the schema with the team.")
    out1 = sim.hook_session_start()
    # the upcoming task differs; the hook takes none, so its output cannot depend on it
    v1 = sim.volunteer_context(ask("What did we decide about the simulator store?"))["pointers"]
    v2 = sim.volunteer_context(ask("How do we rotate the deploy keys next week?"))["pointers"]
    out2 = sim.hook_session_start()

    def broken() -> Any:
        raise OSError("store locked")

    failing = hook_session_start(broken)
    return Observation.from_checks({
        "stdout_is_digest": out1 == (sim.context(), 0),
        "same_for_two_tasks": out1 == out2 and v1 != v2,
        "failing_store_empty_exit0": failing == ("", 0),
    }, measured={"exit": out1[1], "failing": failing}, evidence=out1[0])


@claim("TOR-33", design=D, record="MEM-RTE-hook-volunteer", kind="mechanism",
       statement="The prompt hook wraps one block per harness, or prints nothing.")
def tor_33(ctx: ClaimContext) -> Observation:
    sim = new_sim(ctx)
    t0_point(sim, "decision", "Use Kuzu for the simulator store.")
    q = "What did we decide about the simulator store?"
    block = sim.volunteer_context(ask(q))["block"]
    out = {h: sim.hook_volunteer_turn(json.dumps({"prompt": q}).encode(), h) for h in
           ("claude", "codex", "devin", "cline", "other")}
    shape = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": block}}
    alt = sim.hook_volunteer_turn(json.dumps({"userPrompt": q}).encode(), "claude")
    bare = sim.hook_volunteer_turn(json.dumps(q).encode(), "claude")
    blank = sim.hook_volunteer_turn(b'{"prompt": "   "}', "claude")
    nothing = sim.hook_volunteer_turn(b'{"prompt": "How do I bake sourdough bread at home?"}', "claude")
    no_prompt = sim.hook_volunteer_turn(b'{"session_id": "x"}', "claude")
    garbage = sim.hook_volunteer_turn(b"\xff\xfe not json {", "claude")
    codes = {v[1] for v in [*out.values(), alt, bare, blank, nothing, no_prompt, garbage]}
    lines = {h: out[h][0].splitlines() for h in out}
    return Observation.from_checks({
        "block_nonempty": bool(block),
        "claude_codex_devin_shape": all(len(lines[h]) == 1 and json.loads(out[h][0]) == shape
                                        for h in ("claude", "codex", "devin")),
        "cline_shape": json.loads(out["cline"][0]) == {"contextModification": {"context": block}},
        "other_raw_block": out["other"][0] == block,
        "userPrompt_and_json_string": json.loads(alt[0]) == shape and json.loads(bare[0]) == shape,
        "blank_and_ineligible_empty": blank[0] == "" and nothing[0] == "" and no_prompt[0] == "",
        "garbage_exit0": garbage[1] == 0,
        "always_exit_0": codes == {0},
    }, measured={"claude_stdout": out["claude"][0][:300]}, evidence=out["claude"][0])
