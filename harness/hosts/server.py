"""A loopback model server for real agent hosts: it records every request as received and answers from a script.

APIs answered (see ``spec/hosts.md`` for what each host calls):

- Anthropic Messages ``POST /v1/messages`` (any query string, e.g. Claude Code's ``?beta=true``): ``"stream": true``
  gets server-sent events (``message_start``, ``content_block_start``, ``content_block_delta`` with ``text_delta``
  or, for a tool call, ``input_json_delta``, ``content_block_stop``, ``message_delta`` with ``stop_reason``
  ``end_turn`` / ``tool_use`` and ``usage``, ``message_stop``); otherwise one JSON message.
  ``POST /v1/messages/count_tokens`` answers ``{"input_tokens": n}`` (a byte-count estimate).
- OpenAI Responses ``POST /v1/responses`` (Codex): SSE ``response.created``, ``response.in_progress``,
  ``response.output_item.added``, then for text ``response.content_part.added``, ``response.output_text.delta``,
  ``response.output_text.done``, ``response.content_part.done``, or for a tool call
  ``response.function_call_arguments.delta`` / ``.done`` (a ``function_call`` item, e.g. Codex ``exec_command``
  with ``{"cmd": ...}``), then ``response.output_item.done`` and ``response.completed``. ``"stream": false`` gets
  the final response object as JSON.
- OpenAI Chat Completions ``POST /v1/chat/completions`` (the dspy/litellm seam, Cline): streaming chunks ending in
  ``data: [DONE]`` (text or ``tool_calls``), or one JSON completion.
- Gemini ``POST /v1beta/models/<model>:generateContent`` (one JSON ``GenerateContentResponse``) and
  ``:streamGenerateContent`` (Gemini CLI): with ``?alt=sse`` server-sent ``data:`` events, each a
  ``GenerateContentResponse`` chunk (the last carries ``finishReason`` and ``usageMetadata``), else the same chunks
  as one JSON array, as the Gemini API streams without ``alt=sse``. A tool call is a ``functionCall`` part
  (``{"name", "args"}``); recorded ``api`` "gemini.generate", ``stream`` true for ``:streamGenerateContent``.
  ``:countTokens`` answers ``{"totalTokens": n}`` (``api`` "gemini.count_tokens").
- Anything else: a 404 JSON error, recorded with ``api`` "other".

Script rule: each *conversation* request consumes the next :class:`Reply` in order; an exhausted script answers
``default_text``. Requests that do not consume: ``count_tokens``, 404s, and side calls: a Gemini request that asks
for JSON output (``generationConfig.responseMimeType`` "application/json", or a ``responseSchema`` /
``responseJsonSchema``: Gemini CLI 0.61.0's model-routing classifier and its next-speaker check, which without an
answer retry until the CLI is killed) is answered with an instance of the requested schema built by
:func:`schema_instance` (first enum value, so the next-speaker check says "user" and the turn ends); an Anthropic
Messages request that carries no ``tools`` (the APIs listed in ``side_calls_without_tools``; OpenAI is not listed by default, since a
plain Chat Completions client sends no tools). Observed with Claude Code 2.1.328 under the drivers' environment
(``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``): every request was a conversation request carrying its tools, and
no count_tokens or other side call came; Codex 0.169.0 sent only ``POST /v1/responses``. The rule guards the script
against a tool-less side query (title, topic) a host may make in another configuration.

Recording: nothing is validated (Claude Code sends ``role: "system"`` entries inside ``messages``). Each request is
one JSON object (in :attr:`ModelServer.requests` and one line of ``record``): ``seq``, ``t`` (``time.time()`` at
receipt), ``method``, ``path`` (with query), ``api``, ``headers`` (lower-case names; ``authorization``,
``x-api-key`` and ``x-goog-api-key`` values redacted), ``body`` (the parsed JSON, or ``null``), ``raw`` (only when
the body is not JSON: the bytes decoded as UTF-8 with ``surrogateescape``, so ``raw.encode("utf-8",
"surrogateescape")`` gives the bytes back), ``stream`` and ``reply`` (the index of the script entry used, or
``null``).

Bounds: it binds 127.0.0.1 by default (any other address is refused unless it is a loopback address), each
connection has a read timeout, a request body is capped, and the server stops by itself after ``max_requests``
recorded requests or ``max_seconds`` from start (a ``Reply.delay_s`` is cut at that deadline).

Why the standard library (``http.server.ThreadingHTTPServer``): the server runs inside a fresh network namespace next
to the host, started by the runner process for every session, so it must start in milliseconds with no import cost
(an ASGI stack such as uvicorn/starlette takes hundreds of milliseconds to import and brings an event loop we would
have to bound separately), and it must see the body bytes exactly as sent with no framework parsing, validation or
re-encoding in between. SSE needs nothing more than writing ``event:``/``data:`` lines and flushing; one thread per
connection is plenty for one host.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REDACTED_HEADERS = ("authorization", "x-api-key", "x-goog-api-key")
MAX_BODY_BYTES = 64 * 1024 * 1024
READ_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Reply:
    """One scripted model turn: a text reply, or a tool call the host executes for real."""

    text: str | None = None
    tool: str | None = None  # Claude Code: "Bash", "Read"; Codex: "exec_command"
    input: dict | None = None  # the tool call's arguments
    delay_s: float = 0.0  # wait before answering (cut at the server's max_seconds deadline)

    def __post_init__(self) -> None:
        if (self.text is None) == (self.tool is None):
            raise ValueError("a Reply has exactly one of text or tool")
        if self.delay_s < 0:
            raise ValueError("Reply.delay_s must be >= 0")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Reply:
        unknown = set(d) - {"text", "tool", "input", "delay_s"}
        if unknown:
            raise ValueError(f"unknown Reply keys: {sorted(unknown)}")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and not (k == "delay_s" and v == 0.0)}


def classify(method: str, path: str) -> str:
    """The API a request path belongs to ("other" for anything this server does not answer)."""
    p = path.split("?", 1)[0].rstrip("/")
    if method != "POST":
        return "other"
    if p == "/v1/messages":
        return "anthropic.messages"
    if p == "/v1/messages/count_tokens":
        return "anthropic.count_tokens"
    if p == "/v1/responses":
        return "openai.responses"
    if p == "/v1/chat/completions":
        return "openai.chat"
    if p.startswith(("/v1beta/models/", "/v1/models/", "/v1alpha/models/")):
        if p.endswith((":generateContent", ":streamGenerateContent")):
            return "gemini.generate"
        if p.endswith(":countTokens"):
            return "gemini.count_tokens"
    return "other"


def _estimate_tokens(body: Any) -> int:
    return max(1, len(json.dumps(body, ensure_ascii=False)) // 4) if body is not None else 1


def _sse(event: str | None, data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def _chunks(text: str, n: int = 3) -> list[str]:
    """Split ``text`` into at most ``n`` deltas (at least one, possibly empty)."""
    if not text:
        return [""]
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)]


# ---------------------------------------------------------------------------------------------------- Anthropic
def anthropic_events(reply: Reply, *, model: str, input_tokens: int) -> Iterator[bytes]:
    mid = f"msg_{uuid.uuid4().hex[:24]}"
    yield _sse("message_start", {"type": "message_start", "message": {
        "id": mid, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                                         "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
    if reply.tool is not None:
        block = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": reply.tool, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": part}
                  for part in _chunks(json.dumps(reply.input or {}))]
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": part} for part in _chunks(reply.text or "")]
        stop = "end_turn"
    yield _sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})
    for d in deltas:
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d})
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": 10}})
    yield _sse("message_stop", {"type": "message_stop"})


def anthropic_message(reply: Reply, *, model: str, input_tokens: int) -> dict[str, Any]:
    if reply.tool is not None:
        content = [{"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": reply.tool,
                    "input": reply.input or {}}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": reply.text or ""}]
        stop = "end_turn"
    return {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 10}}


# ---------------------------------------------------------------------------------------------------- Responses
def _responses_item(reply: Reply, *, done: bool) -> dict[str, Any]:
    status = "completed" if done else "in_progress"
    if reply.tool is not None:
        return {"id": "fc_1", "type": "function_call", "status": status, "call_id": f"call_{uuid.uuid4().hex[:12]}",
                "name": reply.tool, "arguments": json.dumps(reply.input or {}) if done else ""}
    content = [{"type": "output_text", "text": reply.text or "", "annotations": []}] if done else []
    return {"id": "msg_1", "type": "message", "status": status, "role": "assistant", "content": content}


def responses_object(reply: Reply, *, model: str, input_tokens: int, rid: str, done: bool,
                     item: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model,
                           "status": "completed" if done else "in_progress", "output": [item] if item else []}
    if done:
        obj["usage"] = {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": input_tokens + 10}
    return obj


def responses_events(reply: Reply, *, model: str, input_tokens: int) -> Iterator[bytes]:
    rid = f"resp_{uuid.uuid4().hex[:24]}"
    seq = iter(range(1_000_000))

    def ev(kind: str, **fields: Any) -> bytes:
        return _sse(kind, {"type": kind, "sequence_number": next(seq), **fields})

    yield ev("response.created", response=responses_object(reply, model=model, input_tokens=input_tokens, rid=rid,
                                                           done=False))
    yield ev("response.in_progress", response=responses_object(reply, model=model, input_tokens=input_tokens,
                                                               rid=rid, done=False))
    start, final = _responses_item(reply, done=False), _responses_item(reply, done=True)
    if reply.tool is not None:
        start["call_id"] = final["call_id"]
    yield ev("response.output_item.added", output_index=0, item=start)
    if reply.tool is not None:
        for part in _chunks(final["arguments"]):
            yield ev("response.function_call_arguments.delta", item_id=final["id"], output_index=0, delta=part)
        yield ev("response.function_call_arguments.done", item_id=final["id"], output_index=0,
                 arguments=final["arguments"])
    else:
        text = reply.text or ""
        yield ev("response.content_part.added", item_id=final["id"], output_index=0, content_index=0,
                 part={"type": "output_text", "text": "", "annotations": []})
        for part in _chunks(text):
            yield ev("response.output_text.delta", item_id=final["id"], output_index=0, content_index=0, delta=part)
        yield ev("response.output_text.done", item_id=final["id"], output_index=0, content_index=0, text=text)
        yield ev("response.content_part.done", item_id=final["id"], output_index=0, content_index=0,
                 part={"type": "output_text", "text": text, "annotations": []})
    yield ev("response.output_item.done", output_index=0, item=final)
    yield ev("response.completed", response=responses_object(reply, model=model, input_tokens=input_tokens, rid=rid,
                                                             done=True, item=final))


# ---------------------------------------------------------------------------------------------------- Chat
def chat_events(reply: Reply, *, model: str, input_tokens: int, include_usage: bool) -> Iterator[bytes]:
    cid, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None) -> bytes:
        return _sse(None, {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    if reply.tool is not None:
        args = json.dumps(reply.input or {})
        yield chunk({"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
             "function": {"name": reply.tool, "arguments": ""}}]}, None)
        for part in _chunks(args):
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}, None)
        yield chunk({}, "tool_calls")
    else:
        yield chunk({"role": "assistant", "content": ""}, None)
        for part in _chunks(reply.text or ""):
            yield chunk({"content": part}, None)
        yield chunk({}, "stop")
    if include_usage:
        yield _sse(None, {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                          "choices": [], "usage": {"prompt_tokens": input_tokens, "completion_tokens": 10,
                                                   "total_tokens": input_tokens + 10}})
    yield _sse(None, "[DONE]")


def chat_completion(reply: Reply, *, model: str, input_tokens: int) -> dict[str, Any]:
    if reply.tool is not None:
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
             "function": {"name": reply.tool, "arguments": json.dumps(reply.input or {})}}]}
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": reply.text or ""}, "stop"
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": input_tokens, "completion_tokens": 10, "total_tokens": input_tokens + 10}}


# ---------------------------------------------------------------------------------------------------- Gemini
def gemini_schema(body: Any) -> Any:
    """The JSON schema a Gemini request asks its answer to follow (None: a conversation request)."""
    gc = body.get("generationConfig") if isinstance(body, dict) else None
    if not isinstance(gc, dict):
        return None
    for key in ("responseJsonSchema", "responseSchema", "response_json_schema", "response_schema"):
        if isinstance(gc.get(key), dict):
            return gc[key]
    if str(gc.get("responseMimeType", "")).lower() == "application/json":
        return {}
    return None


def schema_instance(schema: Any, depth: int = 0) -> Any:
    """A small value that satisfies ``schema`` (JSON Schema or Gemini ``Type`` names): the first enum value, the
    required properties of an object, one item of an array, ``"memsim"`` for a string, 0 for a number."""
    if not isinstance(schema, dict) or depth > 8:
        return {}
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema_instance(schema[key][0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if str(k).lower() != "null"), "string")
    kind = str(kind or ("object" if "properties" in schema else "string")).lower()
    if kind == "object":
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        names = schema.get("required") if isinstance(schema.get("required"), list) else list(props)
        return {n: schema_instance(props.get(n, {}), depth + 1) for n in names if isinstance(n, str)}
    if kind == "array":
        return [schema_instance(schema.get("items", {}), depth + 1)]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        return int(low) + (1 if "exclusiveMinimum" in schema else 0) if isinstance(low, int | float) else 1
    if kind == "boolean":
        return False
    return "memsim"


def gemini_model(path: str) -> str:
    tail = path.split("?", 1)[0].rsplit("/models/", 1)[-1]
    return tail.split(":", 1)[0] or "mock-model"


def gemini_chunks(reply: Reply, *, model: str, input_tokens: int) -> list[dict[str, Any]]:
    """The ``GenerateContentResponse`` chunks of one reply (text in up to three parts, or one ``functionCall``)."""
    rid = uuid.uuid4().hex[:20]
    if reply.tool is not None:
        parts: list[list[dict[str, Any]]] = [[{"functionCall": {"name": reply.tool, "args": reply.input or {}}}]]
    else:
        parts = [[{"text": t}] for t in _chunks(reply.text or "")]
    out = []
    for k, p in enumerate(parts):
        cand: dict[str, Any] = {"content": {"role": "model", "parts": p}, "index": 0}
        chunk: dict[str, Any] = {"candidates": [cand], "modelVersion": model, "responseId": rid}
        if k == len(parts) - 1:
            cand["finishReason"] = "STOP"
            chunk["usageMetadata"] = {"promptTokenCount": input_tokens, "candidatesTokenCount": 10,
                                      "totalTokenCount": input_tokens + 10}
        out.append(chunk)
    return out


def gemini_response(reply: Reply, *, model: str, input_tokens: int) -> dict[str, Any]:
    """One non-streamed ``GenerateContentResponse`` (the chunks' parts joined)."""
    chunks = gemini_chunks(reply, model=model, input_tokens=input_tokens)
    last = json.loads(json.dumps(chunks[-1]))
    if reply.tool is None:
        last["candidates"][0]["content"]["parts"] = [{"text": reply.text or ""}]
    return last


# ---------------------------------------------------------------------------------------------------- server
class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: ModelServer


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = READ_TIMEOUT_S  # per-connection socket timeout (reads of a stalled client end)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (quiet)
        return

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            out = bytearray()
            while len(out) <= MAX_BODY_BYTES:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                out += self.rfile.read(size)
                self.rfile.readline()
            return bytes(out)
        n = int(self.headers.get("content-length") or 0)
        return self.rfile.read(min(n, MAX_BODY_BYTES)) if n > 0 else b""

    def _handle(self) -> None:
        owner = self.server.owner
        t = time.time()
        try:
            raw = self._read_body()
        except (OSError, ValueError):
            self.close_connection = True
            return
        owner._serve(self, t, raw)

    do_POST = _handle
    do_GET = _handle
    do_PUT = _handle
    do_DELETE = _handle
    do_PATCH = _handle
    do_HEAD = _handle

    def send_json(self, status: int, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_json_stream(self, items: list[dict[str, Any]]) -> None:
        """A JSON array written element by element (the Gemini API's streaming without ``alt=sse``)."""
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for k, item in enumerate(items):
            self.wfile.write((("[" if k == 0 else ",\r\n") + json.dumps(item)).encode())
            self.wfile.flush()
        self.wfile.write(b"]" if items else b"[]")
        self.wfile.flush()

    def send_sse(self, events: Iterator[bytes]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for e in events:
            self.wfile.write(e)
            self.wfile.flush()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class ModelServer:
    """The scripted loopback server (see the module docstring); a context manager (start on enter, stop on exit)."""

    def __init__(self, script: Sequence[Reply] = (), *, record: Path | None = None, max_requests: int = 200,
                 max_seconds: float = 300.0, default_text: str = "ok",
                 side_calls_without_tools: tuple[str, ...] = ("anthropic.messages",)) -> None:
        self.script = list(script)
        self.record = Path(record) if record is not None else None
        self.max_requests = max_requests
        self.max_seconds = max_seconds
        self.default_text = default_text
        self.side_calls_without_tools = side_calls_without_tools
        self.requests: list[dict[str, Any]] = []
        self.port = 0
        self.url = ""
        self.stopped = threading.Event()
        self.stop_reason: str | None = None
        self._next = 0
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._deadline = 0.0

    # lifecycle -------------------------------------------------------------------------------------------
    def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Bind ``host:port`` (a loopback address only), serve in a thread, and return the bound port."""
        if not _is_loopback(host):
            raise ValueError(f"the model server binds loopback only, not {host!r}")
        if self.record is not None:
            self.record.parent.mkdir(parents=True, exist_ok=True)
            self.record.write_text("")
        httpd = _Server((host, port), _Handler)
        httpd.owner = self
        httpd.timeout = 0.5
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self._deadline = time.monotonic() + self.max_seconds
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
                                        name="memsim-model-server")
        self._thread.start()
        threading.Thread(target=self._watchdog, daemon=True, name="memsim-model-server-watchdog").start()
        return self.port

    def _watchdog(self) -> None:
        while not self.stopped.wait(0.05):
            if time.monotonic() >= self._deadline:
                self._stop_later("max_seconds")
                return

    def _stop_later(self, reason: str) -> None:
        with self._lock:
            if self.stop_reason is None:
                self.stop_reason = reason
        threading.Thread(target=self.stop, daemon=True).start()

    def stop(self) -> None:
        """Stop serving (idempotent); requests already recorded stay in :attr:`requests` and ``record``."""
        httpd = self._httpd
        if httpd is None:
            return
        with self._lock:
            if self.stopped.is_set():
                return
            self.stopped.set()
            if self.stop_reason is None:
                self.stop_reason = "stopped"
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the server has stopped (by itself or by :meth:`stop`); True when it has."""
        return self.stopped.wait(timeout)

    def __enter__(self) -> ModelServer:
        if self._httpd is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # requests --------------------------------------------------------------------------------------------
    def _take(self, api: str, body: Any) -> tuple[Reply, int | None]:
        """The reply for a conversation request (the next script entry, or the default text)."""
        if api in self.side_calls_without_tools and not (isinstance(body, dict) and body.get("tools")):
            return Reply(text=self.default_text), None
        if api == "gemini.generate":
            schema = gemini_schema(body)
            if schema is not None:  # a JSON-schema side call (routing, next speaker): answered, not consumed
                return Reply(text=json.dumps(schema_instance(schema))), None
        if self._next < len(self.script):
            i = self._next
            self._next += 1
            return self.script[i], i
        return Reply(text=self.default_text), None

    def _serve(self, h: _Handler, t: float, raw: bytes) -> None:
        api = classify(h.command, h.path)
        try:
            body = json.loads(raw) if raw else None
            raw_text = None
        except (ValueError, UnicodeDecodeError):
            body, raw_text = None, raw.decode("utf-8", "surrogateescape")
        headers = {k.lower(): ("<redacted>" if k.lower() in REDACTED_HEADERS else v) for k, v in h.headers.items()}
        stream = bool(isinstance(body, dict) and body.get("stream"))
        if api == "gemini.generate":
            stream = h.path.split("?", 1)[0].endswith(":streamGenerateContent")
        with self._lock:
            if self.stopped.is_set() or len(self.requests) >= self.max_requests:
                accepted = False
            else:
                accepted = True
                reply, idx = (self._take(api, body) if api in ("anthropic.messages", "openai.responses",
                                                                "openai.chat", "gemini.generate")
                              else (None, None))
                rec: dict[str, Any] = {"seq": len(self.requests), "t": t, "method": h.command, "path": h.path,
                                       "api": api, "headers": headers, "body": body}
                if raw_text is not None:
                    rec["raw"] = raw_text
                rec["stream"] = stream
                rec["reply"] = idx
                self.requests.append(rec)
                if self.record is not None:
                    with self.record.open("a", encoding="utf-8") as f:
                        f.write(json.dumps(rec) + "\n")
                full = len(self.requests) >= self.max_requests
        if not accepted:
            h.send_json(503, {"type": "error", "error": {"type": "overloaded_error",
                                                         "message": "memsim model server stopped"}})
            return
        try:
            self._answer(h, api, body, reply, stream)
        except (BrokenPipeError, ConnectionResetError, OSError):
            h.close_connection = True
        finally:
            if full:
                self._stop_later("max_requests")

    def _answer(self, h: _Handler, api: str, body: Any, reply: Reply | None, stream: bool) -> None:
        model = str(body.get("model", "mock-model")) if isinstance(body, dict) else "mock-model"
        tokens = _estimate_tokens(body)
        if api == "anthropic.count_tokens":
            h.send_json(200, {"input_tokens": tokens})
            return
        if api == "gemini.count_tokens":
            h.send_json(200, {"totalTokens": tokens})
            return
        if reply is None:
            h.send_json(404, {"type": "error", "error": {"type": "not_found_error",
                                                         "message": f"memsim model server: no route {h.path}"}})
            return
        if reply.delay_s:
            time.sleep(max(0.0, min(reply.delay_s, self._deadline - time.monotonic())))
        if api == "anthropic.messages":
            if stream:
                h.send_sse(anthropic_events(reply, model=model, input_tokens=tokens))
            else:
                h.send_json(200, anthropic_message(reply, model=model, input_tokens=tokens))
        elif api == "openai.responses":
            if stream:
                h.send_sse(responses_events(reply, model=model, input_tokens=tokens))
            else:
                rid = f"resp_{uuid.uuid4().hex[:24]}"
                h.send_json(200, responses_object(reply, model=model, input_tokens=tokens, rid=rid, done=True,
                                                  item=_responses_item(reply, done=True)))
        elif api == "gemini.generate":
            model = gemini_model(h.path)
            if not stream:
                h.send_json(200, gemini_response(reply, model=model, input_tokens=tokens))
            elif "alt=sse" in h.path.split("?", 1)[-1]:
                h.send_sse(_sse(None, c) for c in gemini_chunks(reply, model=model, input_tokens=tokens))
            else:
                h.send_json_stream(gemini_chunks(reply, model=model, input_tokens=tokens))
        else:  # openai.chat
            if stream:
                opts = body.get("stream_options") if isinstance(body, dict) else None
                usage = bool(isinstance(opts, dict) and opts.get("include_usage"))
                h.send_sse(chat_events(reply, model=model, input_tokens=tokens, include_usage=usage))
            else:
                h.send_json(200, chat_completion(reply, model=model, input_tokens=tokens))


def load_script(path: Path) -> list[Reply]:
    """A script file: a JSON list of replies, each ``{"text": ...}`` or ``{"tool": NAME, "input": {...}}``, with an
    optional ``"delay_s"``; a problem is a ``ValueError`` naming the file (and the entry)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, list):
        raise ValueError(f"{path}: a script is a JSON list of replies, not {type(data).__name__}")
    out = []
    for i, d in enumerate(data):
        try:
            if not isinstance(d, dict):
                raise ValueError(f"a reply is an object, not {type(d).__name__}")
            out.append(Reply.from_dict(d))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: [{i}]: {exc}") from None
    return out


USAGE_EPILOG = """\
script format: a JSON list of replies, consumed in order by the conversation requests (count_tokens calls, 404s
and tool-less side calls consume none); each is {"text": "..."} or {"tool": "NAME", "input": {...}} (a tool call
the host runs for real: Claude Code "Bash" with {"command": ...}, Codex "exec_command" with {"cmd": ...}), with an
optional "delay_s" (seconds before answering). An exhausted script answers --default-text.

example:
  echo '[{"text": "It uses Postgres."}]' > script.json
  python -m harness.hosts.server --script script.json --record requests.jsonl --port 8765 &
  ANTHROPIC_BASE_URL=http://127.0.0.1:8765 ANTHROPIC_API_KEY=dummy claude -p "What database?"
"""


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.hosts.server``: run the server until it stops by itself or Ctrl-C / SIGTERM; one line
    when it listens (``listening URL port N``) and one when it stops; a bad option or script is one ``error:``
    line (exit 2 or 1)."""
    import signal

    ap = argparse.ArgumentParser(prog="python -m harness.hosts.server", description=__doc__.split("\n\n")[0],
                                 epilog=USAGE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--script", type=Path, metavar="FILE",
                    help="JSON list of scripted replies (format below; default: none, every request gets "
                         "--default-text)")
    ap.add_argument("--record", type=Path, metavar="FILE",
                    help="write every request as received to FILE, one JSON object per line (emptied at start; "
                         "default: not written)")
    ap.add_argument("--port", type=int, default=0, help="port to bind (default 0: a free one, printed)")
    ap.add_argument("--host", default="127.0.0.1",
                    help="address to bind, a loopback address only (default 127.0.0.1)")
    ap.add_argument("--max-requests", type=int, default=200, metavar="N",
                    help="stop after this many recorded requests (default 200)")
    ap.add_argument("--max-seconds", type=float, default=300.0, metavar="S",
                    help="stop this many seconds after start; a reply's delay is cut there (default 300)")
    ap.add_argument("--default-text", default="ok", metavar="TEXT",
                    help="the reply once the script is exhausted, and to side calls (default 'ok')")
    a = ap.parse_args(argv)
    try:
        script = load_script(a.script) if a.script else []
        server = ModelServer(script, record=a.record, max_requests=a.max_requests, max_seconds=a.max_seconds,
                             default_text=a.default_text)
        port = server.start(a.host, a.port)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    print(f"listening {server.url} port {port}", flush=True)
    try:
        server.wait()
    except KeyboardInterrupt:
        server.stop()
    print(f"stopped ({server.stop_reason}) after {len(server.requests)} requests", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
