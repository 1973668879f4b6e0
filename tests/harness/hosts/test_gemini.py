"""Gemini: the loopback server's Gemini API (no host), the driver's settings, and one real Gemini CLI 0.61.0 session
per hook shape when it is installed (conftest.require_host)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from harness.hosts.drivers import HookSet, SessionSpec, gemini_settings, run_session
from harness.hosts.server import ModelServer, Reply, classify, schema_instance
from tests.harness.hosts.conftest import require_host
from tortoise_sim.hooks import format_hook_output

CONV = {"contents": [{"role": "user", "parts": [{"text": "hello from a test"}]}],
        "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]}
ROUTER = {"contents": [{"role": "user", "parts": [{"text": "pick a model"}]}],
          "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {
              "type": "OBJECT", "properties": {"why": {"type": "STRING"}, "score": {"type": "INTEGER"},
                                               "choice": {"type": "STRING", "enum": ["small", "big"]}},
              "required": ["why", "score", "choice"]}}}


def post(url: str, body: dict) -> tuple[str, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json",
                                                                               "x-goog-api-key": "k"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.headers.get("content-type", ""), r.read()


def test_gemini_paths_are_classified() -> None:
    assert classify("POST", "/v1beta/models/m-1:generateContent") == "gemini.generate"
    assert classify("POST", "/v1beta/models/m-1:streamGenerateContent?alt=sse") == "gemini.generate"
    assert classify("POST", "/v1beta/models/m-1:countTokens") == "gemini.count_tokens"
    assert classify("GET", "/v1beta/models/m-1:generateContent") == "other"


def test_gemini_generate_stream_and_tool_call(tmp_path: Path) -> None:
    script = [Reply(text="plain answer"), Reply(text="streamed answer"), Reply(text="array answer"),
              Reply(tool="run_shell_command", input={"command": "ls"})]
    with ModelServer(script, record=tmp_path / "r.jsonl") as srv:
        base = f"{srv.url}/v1beta/models/mock-model"
        ctype, data = post(f"{base}:generateContent", CONV)
        one = json.loads(data)
        assert ctype == "application/json"
        assert one["candidates"][0]["content"] == {"role": "model", "parts": [{"text": "plain answer"}]}
        assert one["candidates"][0]["finishReason"] == "STOP" and one["usageMetadata"]["promptTokenCount"] > 0
        ctype, data = post(f"{base}:streamGenerateContent?alt=sse", CONV)
        events = [json.loads(ln[6:]) for ln in data.decode().splitlines() if ln.startswith("data: ")]
        assert ctype == "text/event-stream" and len(events) >= 2
        assert "".join(p["text"] for e in events for p in e["candidates"][0]["content"]["parts"]) == "streamed answer"
        assert events[-1]["candidates"][0]["finishReason"] == "STOP" and "finishReason" not in events[0]["candidates"][0]
        ctype, data = post(f"{base}:streamGenerateContent", CONV)
        arr = json.loads(data)
        assert isinstance(arr, list) and "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in arr) \
            == "array answer"
        _, data = post(f"{base}:generateContent", CONV)
        assert json.loads(data)["candidates"][0]["content"]["parts"] == [
            {"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}}]
        _, data = post(f"{base}:countTokens", CONV)
        assert json.loads(data)["totalTokens"] > 0
    recs = [json.loads(ln) for ln in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert [r["api"] for r in recs] == ["gemini.generate"] * 4 + ["gemini.count_tokens"]
    assert [r["stream"] for r in recs[:4]] == [False, True, True, False]
    assert [r["reply"] for r in recs] == [0, 1, 2, 3, None]
    assert recs[0]["headers"]["x-goog-api-key"] == "<redacted>" and recs[0]["body"] == CONV


def test_json_schema_side_call_is_answered_without_consuming(tmp_path: Path) -> None:
    with ModelServer([Reply(text="the real answer")]) as srv:
        base = f"{srv.url}/v1beta/models/mock-model"
        _, data = post(f"{base}:generateContent", ROUTER)
        routed = json.loads(json.loads(data)["candidates"][0]["content"]["parts"][0]["text"])
        _, data = post(f"{base}:streamGenerateContent?alt=sse", CONV)
        text = "".join(json.loads(ln[6:])["candidates"][0]["content"]["parts"][0]["text"]
                       for ln in data.decode().splitlines() if ln.startswith("data: "))
    assert routed == {"why": "memsim", "score": 1, "choice": "small"}
    assert text == "the real answer" and [r["reply"] for r in srv.requests] == [None, 0]
    assert schema_instance({"type": "number", "minimum": 5}) == 5
    assert schema_instance({"type": "array", "items": {"type": "boolean"}}) == [False]


def test_gemini_settings_name_its_events_and_ms_timeouts() -> None:
    s = gemini_settings(HookSet(session_start="a", user_prompt_submit="b", session_end="c",
                                timeouts={"SessionEnd": 2}))
    assert s["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert sorted(s["hooks"]) == ["BeforeAgent", "SessionEnd", "SessionStart"]
    assert s["hooks"]["BeforeAgent"][0]["hooks"][0] == {"type": "command", "command": "b"}
    assert s["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] == 2000


BLOCK = "<!-- memsim:pointers -->\n- pt_gem1 & \"kept\" <b>\n<!-- /memsim -->"
DIGEST = "# Memory digest\n- (turn) decided the gemini check"


def _session(tmp_path: Path, start_out: str, prompt_out: str) -> list[dict]:
    (tmp_path / "start.txt").write_text(start_out)
    (tmp_path / "prompt.txt").write_text(prompt_out)
    hooks = HookSet(session_start=f"cat {tmp_path / 'start.txt'}", user_prompt_submit=f"cat {tmp_path / 'prompt.txt'}")
    spec = SessionSpec(prompts=["say hello"], replies=[[Reply(text="hello")]], home=tmp_path / "home",
                       cwd=tmp_path / "ws", hooks=hooks, timeout_s=60)
    run = run_session("gemini", spec, tmp_path / "run")
    assert run.exit_code == 0 and not run.timed_out and "hello" in run.stdout
    assert run.transcript_path is not None and run.session_id in run.transcript_path.read_text()
    conv = [r for r in run.requests if r["reply"] is not None]
    assert conv, [r["path"] for r in run.requests]
    return conv


def _user_texts(req: dict) -> list[str]:
    return [p.get("text", "") for c in req["body"]["contents"] if c.get("role") == "user" for p in c["parts"]]


def test_real_gemini_delivers_the_claude_json_shape_html_escaped(tmp_path: Path) -> None:
    require_host("gemini")
    start = json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": DIGEST}})
    conv = _session(tmp_path, start + "\n", format_hook_output(BLOCK, "claude"))
    texts = _user_texts(conv[0])
    escaped = BLOCK.replace("<", "&lt;").replace(">", "&gt;")
    assert f"<hook_context>{escaped}</hook_context>" in texts  # its own part; only < and > escaped
    assert f"<hook_context>{DIGEST}</hook_context>\n\nsay hello" in texts  # prepended to the prompt's text
    assert BLOCK not in "\n".join(texts)  # never unescaped


def test_real_gemini_drops_plain_stdout(tmp_path: Path) -> None:
    require_host("gemini")
    conv = _session(tmp_path, DIGEST + "\n", format_hook_output(BLOCK, "other"))
    body = json.dumps(conv[0]["body"])
    assert "pt_gem1" not in body and "decided the gemini check" not in body
    assert "say hello" in _user_texts(conv[0])
