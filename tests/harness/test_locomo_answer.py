"""Optional answering: LoCoMo scoring rules, and the --lm path end to end through dspy and its HTTP client against
a loopback OpenAI-compatible server started here (the recorded prompt must hold the delivered text)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.workloads.answer import Answerer, multi_answer_f1, score_answer, token_f1
from harness.workloads.locomo import Probe


def test_scoring_rules() -> None:
    assert token_f1("The Sunrise!", "sunrise") == 1.0
    assert token_f1("running dogs", "dog runs") == 1.0  # stemmed
    assert token_f1("a cat", "dog") == 0.0
    assert multi_answer_f1("pottery, painting", "painting, pottery, camping") == pytest.approx(2 / 3)
    p5 = Probe(index=0, question="q", adversarial_answer="x", category=5)
    assert score_answer("It is not mentioned in the conversation", p5) == 1.0
    assert score_answer("x", p5) == 0.0
    p3 = Probe(index=1, question="q", answer="likely yes; because she likes it", category=3)
    assert score_answer("likely yes", p3) == 1.0
    assert score_answer("anything", Probe(index=2, question="q", category=4)) is None


class _Server:
    """OpenAI-compatible /v1/chat/completions on 127.0.0.1 that records each request body."""

    def __init__(self, answer: str) -> None:
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                outer.requests.append({"path": self.path, "body": body})
                content = f"[[ ## answer ## ]]\n{answer}\n\n[[ ## completed ## ]]"
                payload = json.dumps({
                    "id": "chatcmpl-loopback", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "test"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.timeout = 5
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def test_answer_through_dspy_and_loopback_http(tmp_path: Path) -> None:
    delivered = "[D1:1] 1:00 pm on 1 May, 2023 | Ann: I adopted a grey cat called Tom."
    probe = Probe(index=0, question="What is the name of Ann's cat?", answer="Tom", evidence=["D1:1"], category=4)
    with _Server("Tom") as srv:
        answerer = Answerer("openai/test", api_base=f"http://127.0.0.1:{srv.port}/v1", api_key="x", cache=False,
                            num_retries=0, timeout=20)
        got = answerer(probe, delivered)
    assert got == {"prediction": "Tom", "f1": 1.0}
    assert len(srv.requests) == 1 and srv.requests[0]["path"] == "/v1/chat/completions"
    prompt = "\n".join(str(m.get("content")) for m in srv.requests[0]["body"]["messages"])
    assert delivered in prompt and probe.question in prompt


def test_answer_error_is_recorded_not_scored() -> None:
    answerer = Answerer("openai/test", api_base="http://127.0.0.1:9/v1", api_key="x", cache=False,
                        num_retries=0, timeout=5)
    got = answerer(Probe(index=0, question="q", answer="a", category=4), "text")
    assert got["f1"] is None and "answer_error" in got
