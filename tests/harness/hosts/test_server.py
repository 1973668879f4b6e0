"""The loopback model server's protocol handling, tested without any host.

Request bodies are hand-written in the shapes the hosts send (our own words, never a host's prompt or tool text)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.hosts.server import ModelServer, Reply, load_script

TOOLS_ANTHROPIC = [{"name": "Bash", "description": "run a shell line (test fixture)",
                    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
TOOLS_OPENAI = [{"type": "function", "name": "exec_command", "description": "run a command (test fixture)",
                 "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]


def claude_body(prompt: str = "list the files", *, stream: bool = True, tools: bool = True) -> dict[str, Any]:
    """A Claude Code-shaped request: a user message, then a role "system" message inside ``messages``."""
    body: dict[str, Any] = {
        "model": "claude-test", "max_tokens": 512, "stream": stream,
        "system": [{"type": "text", "text": "You are a test assistant."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]},
                     {"role": "system", "content": [{"type": "text", "text": "SessionStart:startup hook success: "
                                                                             "memo line \u00e9\u2713"}]}]}
    if tools:
        body["tools"] = TOOLS_ANTHROPIC
    return body


def codex_body(prompt: str = "say hello", *, stream: bool = True) -> dict[str, Any]:
    return {"model": "mock-model", "stream": stream, "instructions": "be brief (fixture)", "tools": TOOLS_OPENAI,
            "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "memo"}]},
                      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}]}


def chat_body(*, stream: bool, tools: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "mock-model", "stream": stream,
                            "messages": [{"role": "system", "content": "fixture system"},
                                         {"role": "user", "content": "what is two plus two"}]}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": "exec_command", "parameters": {"type": "object"}}}]
    return body


def post(srv: ModelServer, path: str, body: Any, *, raw: bytes | None = None, method: str = "POST",
         headers: dict[str, str] | None = None) -> tuple[int, bytes, str]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=data, headers={"content-type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    out = resp.read()
    ctype = resp.getheader("content-type") or ""
    conn.close()
    return resp.status, out, ctype


def sse(data: bytes) -> list[tuple[str | None, Any]]:
    """Parse server-sent events into (event name, data) pairs (data JSON-decoded unless it is [DONE])."""
    events = []
    for block in data.decode().split("\n\n"):
        if not block.strip():
            continue
        name, payload = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                payload = line[6:]
        events.append((name, payload if payload == "[DONE]" else json.loads(payload or "null")))
    return events


@pytest.fixture
def server(tmp_path: Path):  # type: ignore[no-untyped-def]
    def make(script: list[Reply] = (), **kw: Any) -> ModelServer:  # type: ignore[assignment]
        srv = ModelServer(script, record=tmp_path / "requests.jsonl", **kw)
        srv.start()
        made.append(srv)
        return srv

    made: list[ModelServer] = []
    yield make
    for s in made:
        s.stop()


def test_reply_has_exactly_one_of_text_or_tool() -> None:
    with pytest.raises(ValueError):
        Reply()
    with pytest.raises(ValueError):
        Reply(text="a", tool="Bash")
    with pytest.raises(ValueError):
        Reply.from_dict({"text": "a", "colour": "red"})
    assert Reply.from_dict(Reply(tool="Bash", input={"command": "ls"}).to_dict()) == Reply(tool="Bash",
                                                                                           input={"command": "ls"})


def test_anthropic_stream_text(server) -> None:  # type: ignore[no-untyped-def]
    srv = server([Reply(text="the answer is four")])
    status, data, ctype = post(srv, "/v1/messages?beta=true", claude_body())
    assert status == 200 and ctype.startswith("text/event-stream")
    ev = sse(data)
    names = [n for n, _ in ev]
    assert names[0] == "message_start" and names[1] == "content_block_start"
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[2:-3]) == {"content_block_delta"}
    assert all(n == d["type"] for n, d in ev)
    assert ev[1][1]["content_block"]["type"] == "text"
    text = "".join(d["delta"]["text"] for n, d in ev if n == "content_block_delta")
    assert text == "the answer is four"
    assert all(d["delta"]["type"] == "text_delta" for n, d in ev if n == "content_block_delta")
    delta = dict(ev)["message_delta"]
    assert delta["delta"]["stop_reason"] == "end_turn" and delta["usage"]["output_tokens"] > 0
    assert dict(ev)["message_start"]["message"]["usage"]["input_tokens"] > 0


def test_anthropic_stream_tool_use(server) -> None:  # type: ignore[no-untyped-def]
    srv = server([Reply(tool="Bash", input={"command": "echo hi", "description": "say hi"})])
    ev = sse(post(srv, "/v1/messages?beta=true", claude_body())[1])
    start = dict(ev)["content_block_start"]["content_block"]
    assert start["type"] == "tool_use" and start["name"] == "Bash" and start["id"].startswith("toolu_")
    parts = [d["delta"] for n, d in ev if n == "content_block_delta"]
    assert all(p["type"] == "input_json_delta" for p in parts)
    assert json.loads("".join(p["partial_json"] for p in parts)) == {"command": "echo hi", "description": "say hi"}
    assert dict(ev)["message_delta"]["delta"]["stop_reason"] == "tool_use"


def test_anthropic_not_streaming(server) -> None:  # type: ignore[no-untyped-def]
    srv = server([Reply(text="plain"), Reply(tool="Read", input={"file_path": "/tmp/x"})])
    one = json.loads(post(srv, "/v1/messages", claude_body(stream=False))[1])
    assert one["content"] == [{"type": "text", "text": "plain"}] and one["stop_reason"] == "end_turn"
    two = json.loads(post(srv, "/v1/messages", claude_body(stream=False))[1])
    assert two["stop_reason"] == "tool_use"
    assert two["content"][0]["name"] == "Read" and two["content"][0]["input"] == {"file_path": "/tmp/x"}


def test_script_consumed_in_order_then_default(server) -> None:  # type: ignore[no-untyped-def]
    srv = server([Reply(text="first"), Reply(text="second")], default_text="fallback")
    got = [json.loads(post(srv, "/v1/messages", claude_body(stream=False))[1])["content"][0]["text"]
           for _ in range(3)]
    assert got == ["first", "second", "fallback"]
    assert [r["reply"] for r in srv.requests] == [0, 1, None]


def test_count_tokens_and_side_calls_do_not_consume(server) -> None:  # type: ignore[no-untyped-def]
    srv = server([Reply(text="scripted")], default_text="side")
    status, data, _ = post(srv, "/v1/messages/count_tokens", claude_body(stream=False))
    assert status == 200 and json.loads(data)["input_tokens"] > 0
    side = json.loads(post(srv, "/v1/messages", claude_body("title this", stream=False, tools=False))[1])
    assert side["content"][0]["text"] == "side"
    conv = json.loads(post(srv, "/v1/messages", claude_body(stream=False))[1])
    assert conv["content"][0]["text"] == "scripted"
    assert [(r["api"], r["reply"]) for r in srv.requests] == [
        ("anthropic.count_tokens", None), ("anthropic.messages", None), ("anthropic.messages", 0)]


def test_responses_stream_text(server) -> None:  # type: ignore[no-untyped-def]
    srv = server([Reply(text="hello there")])
    status, data, ctype = post(srv, "/v1/responses", codex_body())
    assert status == 200 and ctype.startswith("text/event-stream")
    ev = sse(data)
    names = [n for n, _ in ev]
    assert names[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert names[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    assert set(names[4:-4]) == {"response.output_text.delta"}
    assert [d["sequence_number"] for _, d in ev] == list(range(len(ev)))
    assert "".join(d["delta"] for n, d in ev if n == "response.output_text.delta") == "hello there"
    done = dict(ev)["response.completed"]["response"]
    assert done["status"] == "completed" and done["usage"]["total_tokens"] > 0
    assert done["output"][0]["content"][0] == {"type": "output_text", "text": "hello there", "annotations": []}


def test_responses_stream_function_call(server) -> None:  # type: ignore[no-untyped-def]
    srv = server([Reply(tool="exec_command", input={"cmd": "echo hi"})])
    ev = sse(post(srv, "/v1/responses", codex_body())[1])
    added = dict(ev)["response.output_item.added"]["item"]
    item = dict(ev)["response.output_item.done"]["item"]
    assert item["type"] == "function_call" and item["name"] == "exec_command"
    assert json.loads(item["arguments"]) == {"cmd": "echo hi"} and item["call_id"] == added["call_id"]
    deltas = "".join(d["delta"] for n, d in ev if n == "response.function_call_arguments.delta")
    assert json.loads(deltas) == {"cmd": "echo hi"}
    assert dict(ev)["response.completed"]["response"]["output"] == [item]


def test_responses_not_streaming(server) -> None:  # type: ignore[no-untyped-def]
    srv = server([Reply(text="whole")])
    obj = json.loads(post(srv, "/v1/responses", codex_body(stream=False))[1])
    assert obj["object"] == "response" and obj["output"][0]["content"][0]["text"] == "whole"


def test_chat_completions_stream_and_not(server) -> None:  # type: ignore[no-untyped-def]
    srv = server([Reply(text="four"), Reply(tool="exec_command", input={"cmd": "ls"}), Reply(text="plain four"),
                  Reply(tool="exec_command", input={"cmd": "pwd"})])
    ev = sse(post(srv, "/v1/chat/completions", {**chat_body(stream=True), "stream_options": {"include_usage": True}})[1])
    assert ev[-1] == (None, "[DONE]")
    chunks = [d for _, d in ev[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == "four"
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert chunks[-1]["usage"]["total_tokens"] > 0
    ev = sse(post(srv, "/v1/chat/completions", chat_body(stream=True, tools=True))[1])
    calls = [c for _, d in ev[:-1] for c in d["choices"][0]["delta"].get("tool_calls") or []]
    assert calls[0]["function"]["name"] == "exec_command"
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == {"cmd": "ls"}
    assert ev[-2][1]["choices"][0]["finish_reason"] == "tool_calls"
    one = json.loads(post(srv, "/v1/chat/completions", chat_body(stream=False))[1])
    assert one["choices"][0]["message"] == {"role": "assistant", "content": "plain four"}
    two = json.loads(post(srv, "/v1/chat/completions", chat_body(stream=False, tools=True))[1])
    assert two["choices"][0]["finish_reason"] == "tool_calls"
    assert json.loads(two["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == {"cmd": "pwd"}


def test_recording_is_byte_exact_and_unvalidated(server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    srv = server([Reply(text="x")])
    body = claude_body("d\u00e9cision: keep \u201cquotes\u201d \U0001f600")
    raw = json.dumps(body, ensure_ascii=False, indent=3).encode("utf-8")  # unusual spacing and raw UTF-8
    post(srv, "/v1/messages?beta=true", None, raw=raw, headers={"x-api-key": "secret-1",
                                                                 "authorization": "Bearer secret-2"})
    junk = b"not json \xff\xfe\x00 tail"
    post(srv, "/v1/messages", None, raw=junk)
    srv.stop()
    lines = [json.loads(ln) for ln in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert lines == srv.requests
    first, second = lines
    assert first["body"] == json.loads(raw) and "raw" not in first
    assert first["body"]["messages"][1]["role"] == "system"  # kept as sent, nothing validated
    assert first["path"] == "/v1/messages?beta=true" and first["method"] == "POST" and first["stream"] is True
    assert first["headers"]["x-api-key"] == "<redacted>" and first["headers"]["authorization"] == "<redacted>"
    assert first["headers"]["content-length"] == str(len(raw))
    assert second["body"] is None and second["raw"].encode("utf-8", "surrogateescape") == junk
    assert [r["seq"] for r in lines] == [0, 1] and first["t"] <= second["t"]
    assert "secret" not in (tmp_path / "requests.jsonl").read_text()


def test_unknown_path_is_404_and_recorded(server) -> None:  # type: ignore[no-untyped-def]
    srv = server([Reply(text="kept")])
    status, data, _ = post(srv, "/v1/models", None, method="GET")
    assert status == 404 and json.loads(data)["type"] == "error"
    status, _, _ = post(srv, "/v2/other", {"a": 1})
    assert status == 404
    assert [(r["api"], r["method"], r["reply"]) for r in srv.requests] == [("other", "GET", None),
                                                                            ("other", "POST", None)]
    assert json.loads(post(srv, "/v1/messages", claude_body(stream=False))[1])["content"][0]["text"] == "kept"


def test_stops_by_itself_after_max_requests(server) -> None:  # type: ignore[no-untyped-def]
    srv = server(max_requests=2, max_seconds=30)
    post(srv, "/v1/messages", claude_body(stream=False))
    assert not srv.stopped.is_set()
    post(srv, "/v1/messages", claude_body(stream=False))
    assert srv.wait(5) and srv.stop_reason == "max_requests"
    with pytest.raises(OSError):
        post(srv, "/v1/messages", claude_body(stream=False))
    assert len(srv.requests) == 2


def test_stops_by_itself_after_max_seconds_and_cuts_delays(server) -> None:  # type: ignore[no-untyped-def]
    srv = server([Reply(text="late", delay_s=60)], max_seconds=1.0)
    t = time.monotonic()
    status, data, _ = post(srv, "/v1/messages", claude_body(stream=False))
    assert status == 200 and json.loads(data)["content"][0]["text"] == "late"
    assert srv.wait(5) and srv.stop_reason == "max_seconds"
    assert time.monotonic() - t < 10  # the 60 s delay was cut at the deadline


def test_binds_loopback_only(server) -> None:  # type: ignore[no-untyped-def]
    srv = server()
    assert srv.url == f"http://127.0.0.1:{srv.port}"
    assert srv._httpd is not None and srv._httpd.server_address[0] == "127.0.0.1"
    with pytest.raises(ValueError):
        ModelServer().start("0.0.0.0")
    ips = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)} - {"127.0.0.1"}
    for ip in list(ips)[:1]:  # a non-loopback address of this machine does not reach it
        with pytest.raises(OSError):
            socket.create_connection((ip, srv.port), timeout=2).close()


def test_standalone_command(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"text": "from the file"}]))
    rec = tmp_path / "r.jsonl"
    root = Path(__file__).resolve().parents[3]
    p = subprocess.Popen([sys.executable, "-m", "harness.hosts.server", "--script", str(script), "--record", str(rec),
                          "--max-requests", "1", "--max-seconds", "20"], stdout=subprocess.PIPE, text=True,
                         cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    try:
        assert p.stdout is not None
        port = int(p.stdout.readline().split()[-1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/v1/messages", body=json.dumps(claude_body(stream=False)))
        assert json.loads(conn.getresponse().read())["content"][0]["text"] == "from the file"
        assert p.wait(10) == 0  # stopped by itself after one request
        assert json.loads(rec.read_text())["reply"] == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


# ----------------------------------------------------------------------------------- official client libraries
def test_openai_client_reads_responses_and_chat_streams(server) -> None:  # type: ignore[no-untyped-def]
    openai = pytest.importorskip("openai", reason="the openai package is not installed")
    srv = server([Reply(text="via responses"), Reply(tool="exec_command", input={"cmd": "echo hi"}),
                  Reply(text="via chat"), Reply(tool="exec_command", input={"cmd": "ls"})])
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="dummy", max_retries=0, timeout=10)
    with client.responses.stream(model="mock-model", input="hi", tools=TOOLS_OPENAI) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    assert final.output_text == "via responses"
    with client.responses.stream(model="mock-model", input="hi", tools=TOOLS_OPENAI) as stream:
        for _ in stream:
            pass
        call = stream.get_final_response().output[0]
    assert call.type == "function_call" and json.loads(call.arguments) == {"cmd": "echo hi"}
    parts = [c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model="mock-model", messages=[{"role": "user", "content": "hi"}], stream=True) if c.choices]
    assert "".join(parts) == "via chat"
    done = client.chat.completions.create(model="mock-model", messages=[{"role": "user", "content": "hi"}],
                                          tools=[{"type": "function", "function": {"name": "exec_command",
                                                                                   "parameters": {"type": "object"}}}])
    assert json.loads(done.choices[0].message.tool_calls[0].function.arguments) == {"cmd": "ls"}


def test_litellm_reads_anthropic_and_chat_streams(server) -> None:  # type: ignore[no-untyped-def]
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    litellm = pytest.importorskip("litellm", reason="litellm is not installed")
    srv = server([Reply(text="chat via litellm"), Reply(text="anthropic via litellm")])
    parts = [c.choices[0].delta.content or "" for c in litellm.completion(
        model="openai/mock-model", api_base=srv.url + "/v1", api_key="dummy", stream=True,
        messages=[{"role": "user", "content": "hi"}]) if c.choices]
    assert "".join(parts) == "chat via litellm"
    parts = [c.choices[0].delta.content or "" for c in litellm.completion(
        model="anthropic/claude-test", api_base=srv.url, api_key="dummy", stream=True, max_tokens=50,
        tools=[{"type": "function", "function": {"name": "Bash", "parameters": {"type": "object"}}}],
        messages=[{"role": "user", "content": "hi"}]) if c.choices]
    assert "".join(parts) == "anthropic via litellm"
    assert [r["api"] for r in srv.requests] == ["openai.chat", "anthropic.messages"]


@pytest.mark.parametrize(("text", "expected"), [
    ("{", "not JSON"), ('{"text": "a"}', "a script is a JSON list of replies, not dict"),
    ('[{"text": "a"}, 5]', "[1]: a reply is an object, not int"),
    ('[{"text": "a"}, {"txt": "b"}]', "[1]: unknown Reply keys: ['txt']"),
    ('[{"text": "a", "tool": "Bash"}]', "[0]: a Reply has exactly one of text or tool")])
def test_script_problems_name_the_file_and_entry(tmp_path: Path, text: str, expected: str) -> None:
    from harness.hosts.server import main

    script = tmp_path / "s.json"
    script.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as exc:
        load_script(script)
    assert str(exc.value).startswith(f"{script}: ") and expected in str(exc.value)
    assert main(["--script", str(script)]) == 1


def test_standalone_help_documents_every_option() -> None:
    import contextlib
    import io

    from harness.hosts.server import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit):
        main(["--help"])
    text = buf.getvalue()
    for opt in ("--script", "--record", "--port", "--host", "--max-requests", "--max-seconds", "--default-text"):
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(opt))
        assert len(line.split(None, 2)) == 3, line  # the option, its value name and a help text
    assert "script format:" in text and "example:" in text
