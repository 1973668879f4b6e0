"""Wire observations on hand-written requests in each API's shape (our own words, no host's text)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.hosts.wire import (
    compare_turns,
    count_tokens,
    deliveries,
    hook_records,
    items_from_records,
    memory_items,
    observe_request,
    prompt_latencies,
    request_blocks,
    request_size,
    store_turns,
    turns_from_rows,
)
from tortoise_sim.digest import render_digest
from tortoise_sim.volunteer import REMINDER, build_block

PID = "pt_0a1b2c3d4e5f6a7b"
OTHER = "pt_99887766554433"
BLOCK = build_block([f"- **ledger database** \u2192 point/{PID} \u2014 the ledger runs on Postgres ({REMINDER})"])
OTHER_BLOCK = build_block([f"- **cache** \u2192 point/{OTHER} \u2014 the cache is Redis ({REMINDER})"])
DIGEST = render_digest({"diary": [], "events": [], "confidence": [], "points": [
    {"pointKind": "decision", "content": "the ledger runs on Postgres"},
    {"pointKind": "observation", "content": "nightly imports finish before six"}]})
FRAME = "UserPromptSubmit hook additional context: "
START_FRAME = "SessionStart:startup hook success: "
TOOL_WITH_BLOCK = {"name": "Shell", "description": "runs a command; example output:\n" + BLOCK,
                   "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}


def _claude_json(text: str) -> str:
    return json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": text}})


def _pointer() -> list:
    return memory_items("UserPromptSubmit", _claude_json(BLOCK) + "\n")


def _digest() -> list:
    return memory_items("SessionStart", DIGEST)


def anthropic_request(*, block_text: str = BLOCK, tools: list | None = None) -> dict:
    return {"seq": 3, "t": 10.0, "api": "anthropic.messages", "body": {
        "model": "m", "stream": True,
        "system": [{"type": "text", "text": "You are a test assistant."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "what database does the ledger use?"}]},
            {"role": "system", "content": [{"type": "text", "text": START_FRAME + DIGEST},
                                           {"type": "text", "text": FRAME + block_text}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Shell",
                                               "input": {"command": "echo hi"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "hi"}]},
        ],
        "tools": [TOOL_WITH_BLOCK] if tools is None else tools}}


def responses_request() -> dict:
    return {"seq": 0, "t": 1.0, "api": "openai.responses", "body": {
        "model": "m", "instructions": "Be brief.", "tools": [{"type": "function", "name": "run",
                                                              "parameters": {"type": "object"}}],
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "house rules"}]},
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": DIGEST}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "which database?"}]},
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": BLOCK}]},
            {"type": "function_call", "name": "run", "arguments": "{\"cmd\": \"ls\"}", "call_id": "c1"},
            {"type": "function_call_output", "call_id": "c1", "output": "notes.md"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Postgres."}]},
        ]}}


def chat_request(content: str) -> dict:
    return {"seq": 1, "t": 2.0, "api": "openai.chat", "body": {"model": "m", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "which database?"},
                                     {"type": "text", "text": content}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "x", "content": "done"}]}}


def gemini_request(text: str) -> dict:
    return {"seq": 2, "t": 3.0, "api": "gemini.generate", "body": {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [{"role": "user", "parts": [{"text": text}]}],
        "tools": [{"functionDeclarations": [{"name": "run", "description": "run it"}]}]}}


# ------------------------------------------------------------------------------------------------ memory items
def test_claude_json_pointer_block_yields_its_point_ids() -> None:
    (item,) = _pointer()
    assert item.kind == "pointer_block" and item.point_ids == [PID] and item.text == BLOCK
    assert item.event == "UserPromptSubmit"


def test_cline_shapes_and_plain_text() -> None:
    (obj,) = memory_items("UserPromptSubmit", json.dumps({"contextModification": {"context": BLOCK}}))
    (string,) = memory_items("PostToolUse", json.dumps({"contextModification": BLOCK}))
    (plain,) = memory_items("UserPromptSubmit", BLOCK)
    assert obj.text == string.text == plain.text == BLOCK
    assert {obj.kind, string.kind, plain.kind} == {"pointer_block"}


def test_digest_lines_and_other_text() -> None:
    (d,) = _digest()
    assert d.kind == "digest"
    assert d.lines == ["- (decision) the ledger runs on Postgres", "- (observation) nightly imports finish before six"]
    (t,) = memory_items("SessionStart", "remember: tabs over spaces\n")
    assert t.kind == "hook_text" and t.point_ids == []


@pytest.mark.parametrize("out", ["", "  \n", json.dumps({"continue": True}), _claude_json("")])
def test_no_context_no_item(out: str) -> None:
    assert memory_items("UserPromptSubmit", out) == []


# ------------------------------------------------------------------------------------------------ deliveries
def test_pointer_block_after_framing_prefix_is_exact() -> None:
    ds = deliveries(anthropic_request(), _pointer())
    assert len(ds) == 1
    (d,) = ds
    assert (d.message_index, d.role, d.block_index, d.part) == (1, "system", 1, "message")
    assert d.prefix == FRAME and d.exact and d.encoding is None and not d.trimmed
    assert d.point_ids == [PID]
    assert d.bytes == len(BLOCK.encode("utf-8")) and d.tokens == count_tokens(BLOCK) > 0


def test_trailing_newline_stripped_by_the_host_is_still_exact_but_marked_trimmed() -> None:
    (d,) = deliveries(anthropic_request(block_text=BLOCK.strip()), _pointer())
    assert d.exact and d.trimmed and d.prefix == FRAME


def test_digest_found_in_its_system_block() -> None:
    (d,) = deliveries(anthropic_request(), _digest())
    assert d.prefix == START_FRAME and d.exact and d.whole and d.block_index == 0
    assert d.lines_found == _digest()[0].lines


def test_digest_lines_found_when_the_host_reframes_it() -> None:
    reframed = "Earlier notes:\n" + "\n".join(_digest()[0].lines) + "\n(end)"
    (d,) = deliveries(chat_request(reframed), _digest())
    assert not d.whole and d.lines_found == _digest()[0].lines and d.message_index == 1 and d.block_index == 1


def test_html_escaped_block_is_found_and_marked_not_exact() -> None:
    text = '<hook_context source="BeforeAgent">' + html.escape(BLOCK) + "</hook_context>"
    (d,) = deliveries(gemini_request(text), _pointer())
    assert not d.exact and d.encoding == "html-escaped"
    assert d.prefix == '<hook_context source="BeforeAgent">' and d.point_ids == [PID]
    assert d.text != BLOCK.strip() and "&lt;!--" in d.text


def test_responses_developer_messages() -> None:
    req = responses_request()
    (p,) = deliveries(req, _pointer())
    (g,) = deliveries(req, _digest())
    assert (p.message_index, p.role, p.prefix, p.exact) == (3, "developer", "", True)
    assert (g.message_index, g.role, g.prefix, g.exact) == (1, "developer", "", True)


def test_tool_definitions_are_not_deliveries_nor_message_tokens() -> None:
    bare = anthropic_request(block_text="nothing here", tools=[])
    with_tool = anthropic_request(block_text="nothing here")
    assert deliveries(with_tool, _pointer()) == []
    a, b = request_size(bare), request_size(with_tool)
    assert a["bytes"] == b["bytes"] and a["tokens"] == b["tokens"]
    assert a["tool_bytes"] == 0 and b["tool_bytes"] > len(BLOCK.encode()) and b["tool_tokens"] > 0


def test_request_size_counts_every_text_block() -> None:
    req = anthropic_request(tools=[])
    texts = [b.text for b in request_blocks(req)]
    assert request_size(req)["bytes"] == sum(len(t.encode("utf-8")) for t in texts)
    assert "hi" in texts and '{"command":"echo hi"}' in texts  # tool result and tool use are message text


def test_no_false_positive_when_absent_or_for_another_point() -> None:
    assert deliveries(anthropic_request(block_text=OTHER_BLOCK), _pointer()) == []
    assert deliveries(chat_request("the ledger runs on MySQL"), _digest()) == []
    assert deliveries(gemini_request("nothing"), _pointer()) == []


def test_every_occurrence_is_reported() -> None:
    req = chat_request(BLOCK)
    req["body"]["messages"].append({"role": "user", "content": FRAME + BLOCK})
    assert [(d.message_index, d.prefix) for d in deliveries(req, _pointer())] == [(1, ""), (4, FRAME)]


def test_observe_request_share() -> None:
    obs = observe_request(anthropic_request(), _pointer() + _digest())
    assert obs["memory_tokens"] == count_tokens(BLOCK) + count_tokens(DIGEST)
    assert 0 < obs["memory_token_share"] < 1 and obs["conversation"]
    json.dumps(obs)


# ------------------------------------------------------------------------------------------------ latency
def test_prompt_latencies_skip_side_calls_and_count_tokens() -> None:
    reqs = [{"seq": 0, "t": 100.2, "api": "anthropic.count_tokens", "body": {"tools": [1]}},
            {"seq": 1, "t": 100.4, "api": "anthropic.messages", "body": {"messages": []}},  # side: no tools
            {"seq": 2, "t": 100.9, "api": "anthropic.messages", "body": {"tools": [{}]}},
            {"seq": 3, "t": 101.5, "api": "anthropic.messages", "body": {"tools": [{}]}},
            {"seq": 4, "t": 105.25, "api": "anthropic.messages", "body": {"tools": [{}]}}]
    run = SimpleNamespace(prompt_times=[100.0, 105.0, 110.0], requests=reqs)
    got = prompt_latencies(run)
    assert [g["seq"] for g in got] == [2, 4, None]
    assert got[0]["latency_s"] == pytest.approx(0.9) and got[1]["latency_s"] == pytest.approx(0.25)


# ------------------------------------------------------------------------------------------------ store vs transcript
def test_compare_turns_equal_missing_extra_and_feedback() -> None:
    conv = [{"role": "user", "content": "which database?"}, {"role": "assistant", "content": "Postgres."}]
    assert compare_turns(conv, conv)["equal"]
    extra = [*conv[:1], {"role": "user", "content": "reminder\n" + BLOCK}, conv[1]]
    res = compare_turns(extra, conv)
    assert not res["equal"] and res["stored"] == 3 and res["memory_fed_back"] == 1 and len(res["extra"]) == 1
    res = compare_turns(conv[:1], conv)
    assert res["missing"] == conv[1:] and res["memory_fed_back"] == 0


def test_turns_from_rows_order_and_prefix() -> None:
    rows = [{"id": "s1_t1", "role": "assistant", "content": "[assistant] b"},
            {"id": "s1_t0", "role": "user", "content": "[user] a"},
            {"id": "s10_t0", "role": "user", "content": "[user] other session"}]
    assert turns_from_rows(rows, "s1") == [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]


def test_store_turns_of_a_captured_session(tmp_path: Path) -> None:
    from tortoise_sim.resident import open_sim

    conv = [{"role": "user", "content": "we keep the ledger on Postgres"}, {"role": "assistant", "content": "ok"}]
    sim = open_sim(tmp_path / "s.kuzu", "analysed", "hashing")
    try:
        sim.capture_session(conv, session_id="sess-1")
    finally:
        sim.close()
    assert store_turns(tmp_path / "s.kuzu", "sess-1") == conv
    assert store_turns(tmp_path / "s.kuzu", "sess-2") == []


# ------------------------------------------------------------------------------------------------ hooktee
def test_hooktee_records_and_passes_through(tmp_path: Path) -> None:
    import subprocess

    tee = Path(__file__).resolve().parents[3] / "harness" / "hosts" / "hooktee.sh"
    cmd = "cat > /dev/null; printf '%s' \"$MEMO\"; echo note >&2; exit 0"
    out = subprocess.run(["sh", str(tee), str(tmp_path / "h"), "UserPromptSubmit", cmd],
                         input=b'{"prompt": "x"}', capture_output=True, timeout=20,
                         env={"PATH": "/usr/bin:/bin", "MEMO": _claude_json(BLOCK)})
    assert out.returncode == 0 and out.stdout.decode() == _claude_json(BLOCK) and out.stderr == b"note\n"
    (rec,) = hook_records(tmp_path / "h")
    assert rec["event"] == "UserPromptSubmit" and rec["stdin"] == '{"prompt": "x"}' and rec["rc"] == 0
    assert rec["end"] >= rec["start"]
    (item,) = items_from_records([rec])
    assert item.point_ids == [PID]


def test_prefix_is_the_framing_on_the_items_line_when_a_block_carries_more() -> None:
    text = (START_FRAME + "a note from the session start.\n\n# Host context\nsome host lines\n\n" + FRAME + BLOCK
            + "\nhost text after it")
    (d,) = deliveries(chat_request(text), _pointer())
    assert d.prefix == FRAME and d.exact and d.offset == text.index(BLOCK)


def test_the_same_block_printed_on_two_prompts_is_counted_once_per_occurrence() -> None:
    req = chat_request(FRAME + BLOCK)
    req["body"]["messages"].append({"role": "system", "content": FRAME + BLOCK})
    ds = deliveries(req, _pointer() + _pointer())
    assert [d.message_index for d in ds] == [1, 4]
    assert observe_request(req, _pointer() + _pointer())["memory_tokens"] == 2 * count_tokens(BLOCK)
