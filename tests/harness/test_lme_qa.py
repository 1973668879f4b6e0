"""LongMemEval QA: the official reader prompts and judge templates (typed here from the published evaluator, MIT,
Copyright (c) 2024 Di Wu), routing, the label rule, the aggregates on hand cases, the hypotheses file, and the
reader and judge end to end through dspy against the loopback OpenAI-compatible server (recorded request bodies)."""

from __future__ import annotations

import json
import socket
import string
from pathlib import Path

import pytest

from harness.faults import FaultInjected, FaultPlan
from harness.hosts.server import ModelServer, Reply
from harness.workloads.lme_qa import (
    JUDGE_TEMPLATES,
    OFFICIAL_JUDGE,
    READER_PROMPTS,
    Judge,
    LmUnavailable,
    Reader,
    judge_label,
    judge_prompt,
    judge_route,
    qa_aggregates,
    reader_prompt,
    write_hypotheses,
)

# The literals as the evaluator prints them, one sentence per line here (joined below).
_INTRO = ("I will give you a question, a correct answer, and a response from a model. "
          "Please answer yes if the response contains the correct answer. "
          "Otherwise, answer no. "
          "If the response is equivalent to the correct answer or contains all the intermediate steps to get the "
          "correct answer, you should also answer yes. "
          "If the response only contains a subset of the information required by the answer, answer no.")
_TAIL = "\n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only."
EXPECTED_JUDGE = {
    "basic": _INTRO + " " + _TAIL,
    "temporal": _INTRO + " In addition, do not penalize off-by-one errors for the number of days. "
                "If the question asks for the number of days/weeks/months, etc., and the model makes off-by-one "
                "errors (e.g., predicting 19 days when the answer is 18), the model's response is still correct. "
                + _TAIL,
    "knowledge-update": "I will give you a question, a correct answer, and a response from a model. "
                        "Please answer yes if the response contains the correct answer. Otherwise, answer no. "
                        "If the response contains some previous information along with an updated answer, the "
                        "response should be considered as correct as long as the updated answer is the required "
                        "answer." + _TAIL,
    "preference": "I will give you a question, a rubric for desired personalized response, and a response from a "
                  "model. Please answer yes if the response satisfies the desired response. Otherwise, answer no. "
                  "The model does not need to reflect all the points in the rubric. The response is correct as long "
                  "as it recalls and utilizes the user's personal information correctly."
                  "\n\nQuestion: {}\n\nRubric: {}\n\nModel Response: {}"
                  "\n\nIs the model response correct? Answer yes or no only.",
    "abstention": "I will give you an unanswerable question, an explanation, and a response from a model. "
                  "Please answer yes if the model correctly identifies the question as unanswerable. "
                  "The model could say that the information is incomplete, or some other information is given but "
                  "the asked information is not."
                  "\n\nQuestion: {}\n\nExplanation: {}\n\nModel Response: {}"
                  "\n\nDoes the model correctly identify the question as unanswerable? Answer yes or no only.",
}
_READER_HEAD = ("I will give you several history chats between you and a user. "
                "Please answer the question based on the relevant chat history.")
EXPECTED_CON = (_READER_HEAD + " Answer the question step by step: first extract all the relevant information, and "
                "then reason over the information to get the answer."
                "\n\n\nHistory Chats:\n\n{}\n\nCurrent Date: {}\nQuestion: {}\nAnswer (step by step):")
EXPECTED_DIRECT = _READER_HEAD + "\n\n\nHistory Chats:\n\n{}\n\nCurrent Date: {}\nQuestion: {}\nAnswer:"


def _placeholders(template: str) -> list[str | None]:
    return [field for _, field, _, _ in string.Formatter().parse(template) if field is not None]


def test_judge_templates_are_the_official_literals() -> None:
    basic = EXPECTED_JUDGE["basic"]
    for qtype in ("single-session-user", "single-session-assistant", "multi-session"):
        assert JUDGE_TEMPLATES[qtype] == basic
    assert JUDGE_TEMPLATES["temporal-reasoning"] == EXPECTED_JUDGE["temporal"]
    assert JUDGE_TEMPLATES["knowledge-update"] == EXPECTED_JUDGE["knowledge-update"]
    assert JUDGE_TEMPLATES["single-session-preference"] == EXPECTED_JUDGE["preference"]
    assert JUDGE_TEMPLATES["abstention"] == EXPECTED_JUDGE["abstention"]
    for name, template in JUDGE_TEMPLATES.items():
        assert _placeholders(template) == ["", "", ""], name  # three positional fields: question, answer, response
        assert "\n\n\n" not in template and not template.endswith("\n")
    # The evaluator's quirk: a space before the first blank line in the basic and temporal templates only.
    for name in ("single-session-user", "temporal-reasoning"):
        first = JUDGE_TEMPLATES[name].index("\n\n")
        assert JUDGE_TEMPLATES[name][first - 1] == " " and JUDGE_TEMPLATES[name][first - 2] == "."
    for name in ("knowledge-update", "single-session-preference", "abstention"):
        first = JUDGE_TEMPLATES[name].index("\n\n")
        assert JUDGE_TEMPLATES[name][first - 1] == "."


def test_reader_prompts_are_the_official_literals() -> None:
    assert READER_PROMPTS == {"con": EXPECTED_CON, "direct": EXPECTED_DIRECT}
    for template in READER_PROMPTS.values():
        assert _placeholders(template) == ["", "", ""]
        assert "\n\n\nHistory Chats:\n\n" in template  # three line breaks before the history heading
    got = reader_prompt('[{"role": "user", "content": "a {brace} {}"}]', "2023/05/30 (Tue) 21:56", "Q?", "direct")
    assert got.endswith('History Chats:\n\n[{"role": "user", "content": "a {brace} {}"}]\n\n'
                        "Current Date: 2023/05/30 (Tue) 21:56\nQuestion: Q?\nAnswer:")
    assert reader_prompt("h", "d", "q") == EXPECTED_CON.format("h", "d", "q")  # chain-of-note is the default
    with pytest.raises(ValueError, match="unknown reader prompt 'cot'"):
        reader_prompt("h", "d", "q", "cot")


@pytest.mark.parametrize(("qtype", "qid", "route"), [
    ("temporal-reasoning", "gpt4_2655b836_abs", "abstention"),  # abstention wins over the type
    ("single-session-preference", "abc_abs", "abstention"),
    ("multi-session", "x_abs_2", "abstention"),  # a substring test, not a suffix test
    ("temporal-reasoning", "gpt4_2655b836", "temporal-reasoning"),
    ("knowledge-update", "k1", "knowledge-update"),
    ("single-session-preference", "p1", "single-session-preference"),
    ("single-session-assistant", "a1", "single-session-assistant"),
])
def test_judge_routing(qtype: str, qid: str, route: str) -> None:
    assert judge_route(qtype, qid) == route


def test_judge_prompt_texts_by_route() -> None:
    temporal = judge_prompt("temporal-reasoning", "t1", "How many days?", "18 days", "19 days")
    assert "do not penalize off-by-one errors" in temporal
    assert temporal.endswith("Question: How many days?\n\nCorrect Answer: 18 days\n\nModel Response: 19 days"
                             "\n\nIs the model response correct? Answer yes or no only.")
    pref = judge_prompt("single-session-preference", "p1", "Any tips?", "mentions the user's cat", "Walk the cat.")
    assert "\n\nRubric: mentions the user's cat\n\n" in pref and "Correct Answer" not in pref
    abst = judge_prompt("temporal-reasoning", "t1_abs", "When did I buy a boat?", "No boat was mentioned", "I don't know")
    assert "off-by-one" not in abst and "\n\nExplanation: No boat was mentioned\n\n" in abst
    assert abst.startswith("I will give you an unanswerable question")
    user = judge_prompt("single-session-user", "u1", "q", "a", "r")
    assert user == judge_prompt("multi-session", "m1", "q", "a", "r")
    assert "off-by-one" not in user and "updated answer" not in user
    with pytest.raises(ValueError, match=r"^question q9: question_type: unknown 'open-domain'") as err:
        judge_prompt("open-domain", "q9", "q", "a", "r")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("text", "label"), [
    ("Yes.", True), ("yes", True), ("  YES  ", True), ("Yes, the response is correct.", True),
    ("yes and no", True),  # the official rule is a substring test
    ("No, yes", True), ("eyes", True),
    (" no", False), ("No.", False), ("", False), ("y e s", False),
])
def test_label_rule(text: str, label: bool) -> None:
    assert judge_label(text) is label


def _items() -> list[dict]:
    return [
        {"question_id": "u1", "question_type": "single-session-user", "judge_label": True},
        {"question_id": "u2", "question_type": "single-session-user", "judge_label": False},
        {"question_id": "t1", "question_type": "temporal-reasoning", "judge_label": True},
        {"question_id": "t2_abs", "question_type": "temporal-reasoning", "judge_label": False},
        {"question_id": "t3", "question_type": "temporal-reasoning", "judge_label": True},
        {"question_id": "k1", "question_type": "knowledge-update", "judge_error": "LMTransportError: refused"},
        {"question_id": "p1", "question_type": "single-session-preference", "judge_label": True},
        {"question_id": "m1_abs", "question_type": "multi-session", "judge_label": True},
        {"question_id": "m2", "question_type": "multi-session", "reader_error": "LMTransportError: refused"},
    ]


def test_aggregates_on_a_hand_case() -> None:
    agg = qa_aggregates(_items(), "openai/gpt-4o-2024-08-06")
    assert agg["official"] is True and agg["label"] == "official"
    assert agg["n"] == 7 and agg["n_errors"] == 2
    assert agg["overall"] == pytest.approx(5 / 7)
    per = agg["per_type"]
    assert per["single-session-user"] == {"accuracy": 0.5, "n": 2, "n_errors": 0}
    assert per["temporal-reasoning"]["accuracy"] == pytest.approx(2 / 3)  # t2_abs stays in its base type
    assert per["knowledge-update"] == {"accuracy": None, "n": 0, "n_errors": 1}
    assert per["multi-session"] == {"accuracy": 1.0, "n": 1, "n_errors": 1}
    assert "single-session-assistant" not in per
    assert agg["types_missing"] == ["single-session-assistant", "knowledge-update"]
    # mean of the per-type accuracies present: (1/2 + 2/3 + 1 + 1) / 4, not the overall 5/7
    assert agg["task_averaged"] == pytest.approx((0.5 + 2 / 3 + 1 + 1) / 4)
    assert agg["abstention"] == {"accuracy": 0.5, "n": 2}


@pytest.mark.parametrize("model", ["gpt-4o-mini", "openai/gpt-4o", "openai/gpt-4o-2024-08-06-ft", "ollama/llama3"])
def test_other_judges_are_not_official(model: str) -> None:
    agg = qa_aggregates(_items()[:2], model)
    assert agg["official"] is False and agg["label"] == f"not official (judged by {model})"
    assert qa_aggregates([], OFFICIAL_JUDGE)["official"] is True


def test_aggregates_empty_and_unknown_type() -> None:
    agg = qa_aggregates([], "x")
    assert agg["n"] == 0 and agg["overall"] is None and agg["task_averaged"] is None
    assert agg["abstention"] == {"accuracy": None, "n": 0} and len(agg["types_missing"]) == 6
    with pytest.raises(ValueError, match="^question z1: question_type: unknown 'chit-chat'"):
        qa_aggregates([{"question_id": "z1", "question_type": "chit-chat", "judge_label": True}], "x")


def test_hypotheses_file_is_jsonl_and_atomic(tmp_path: Path) -> None:
    path = tmp_path / "run" / "hyp.jsonl"
    items = [{"question_id": "q1", "hypothesis": "Tom \u00e9"}, {"question_id": "q2", "reader_error": "boom"},
             {"question_id": "q3_abs", "hypothesis": "I do not know.\nReally.", "judge_label": True}]
    assert write_hypotheses(path, items) == 2
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert rows == [{"question_id": "q1", "hypothesis": "Tom \u00e9"},
                    {"question_id": "q3_abs", "hypothesis": "I do not know.\nReally."}]
    before = path.read_bytes()
    plan = FaultPlan({"longmemeval.hypotheses.write": 1})
    with pytest.raises(FaultInjected):
        write_hypotheses(path, [{"question_id": "q9", "hypothesis": "new"}], fault_hook=plan)
    assert plan.calls == ["longmemeval.hypotheses.write"]
    assert path.read_bytes() == before and sorted(p.name for p in path.parent.iterdir()) == ["hyp.jsonl"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chat_bodies(srv: ModelServer) -> list[dict]:
    return [r["body"] for r in srv.requests if r["api"] == "openai.chat"]


def test_reader_and_judge_end_to_end_on_the_loopback_server() -> None:
    history = '\n### Session 1:\nSession Date: 2023/05/01 (Mon) 10:00\nSession Content:\n[{"role": "user", ' \
              '"content": "I adopted a grey cat called Tom."}]\n'
    script = [Reply(text="The user adopted a cat called Tom. Answer: Tom"), Reply(text="Tom"),
              Reply(text="Yes."), Reply(text=" no"), Reply(text="Tom again")]
    with ModelServer(script) as srv:
        base = f"{srv.url}/v1"
        reader = Reader("openai/reader-test", lm_base=base, api_key="x", num_retries=0)
        direct = Reader("openai/reader-test", lm_base=base, style="direct", api_key="x", num_retries=0)
        judge = Judge("openai/gpt-4o-2024-08-06", lm_base=base, api_key="x", num_retries=0)
        got = reader("What is my cat called?", "2023/05/30 (Tue) 21:56", history)
        got_direct = direct("What is my cat called?", "2023/05/30 (Tue) 21:56", history)
        yes = judge("q1", "single-session-user", "What is my cat called?", "Tom", got["hypothesis"])
        no = judge("q2_abs", "temporal-reasoning", "When did I buy a boat?", "No boat was mentioned", "Last May")
        again = reader("What is my cat called?", "2023/05/30 (Tue) 21:56", history)  # no cache: a second call
        bodies = _chat_bodies(srv)
    assert got == {"hypothesis": "The user adopted a cat called Tom. Answer: Tom", "history_cut": False}
    assert got_direct["hypothesis"] == "Tom" and again["hypothesis"] == "Tom again"
    assert yes == {"judge_label": True, "judge_response": "Yes."}
    assert no == {"judge_label": False, "judge_response": " no"}
    assert judge.official
    assert len(bodies) == 5
    for body in bodies:  # one user message, no system prompt, temperature 0, one completion
        assert len(body["messages"]) == 1 and body["messages"][0]["role"] == "user"
        assert body["temperature"] == 0 and body.get("n", 1) == 1
        assert "tools" not in body and "response_format" not in body
    con_prompt = bodies[0]["messages"][0]["content"]
    assert con_prompt == (EXPECTED_CON.split("{}")[0] + history + "\n\nCurrent Date: 2023/05/30 (Tue) 21:56"
                          "\nQuestion: What is my cat called?\nAnswer (step by step):")
    assert bodies[1]["messages"][0]["content"].endswith("\nQuestion: What is my cat called?\nAnswer:")
    assert bodies[2]["messages"][0]["content"] == EXPECTED_JUDGE["basic"].format(
        "What is my cat called?", "Tom", "The user adopted a cat called Tom. Answer: Tom")
    assert bodies[3]["messages"][0]["content"] == EXPECTED_JUDGE["abstention"].format(
        "When did I buy a boat?", "No boat was mentioned", "Last May")
    assert bodies[4] == bodies[0]
    limits = [b.get("max_completion_tokens", b.get("max_tokens")) for b in bodies]
    assert limits == [800, 500, 10, 10, 800]  # chain-of-note 800, direct 500, judge 10


def test_check_passes_with_one_call_and_fails_fast_in_one_line() -> None:
    with ModelServer([Reply(text="Tom"), Reply(text="yes")]) as srv:
        Reader("openai/r", lm_base=f"{srv.url}/v1", api_key="x").check()
        Judge("openai/j", lm_base=f"{srv.url}/v1", api_key="x").check()
        assert len(_chat_bodies(srv)) == 2
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    for cls, role in ((Reader, "reader LM"), (Judge, "judge LM")):
        with pytest.raises(LmUnavailable) as err:
            cls("openai/absent-model", lm_base=url, api_key="x").check()  # default retries: check makes one try
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith(f"{role} openai/absent-model at {url}: check call failed: ")
        assert isinstance(err.value, ValueError)


def test_failed_calls_are_recorded_not_scored() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    got = Reader("openai/r", lm_base=url, api_key="x", num_retries=0)("q", "d", "h")
    assert set(got) == {"reader_error"} and "\n" not in got["reader_error"]
    judged = Judge("openai/j", lm_base=url, api_key="x", num_retries=0)("q1", "multi-session", "q", "a", "h")
    assert set(judged) == {"judge_error"}
    agg = qa_aggregates([{"question_id": "q1", "question_type": "multi-session", **judged}], "openai/j")
    assert agg["n"] == 0 and agg["n_errors"] == 1 and agg["overall"] is None


def test_history_cut_to_the_window_in_cl100k_tokens() -> None:
    from fractal_sim.context_meter import get_counter

    get_counter("cl100k-bundled")  # litellm (a dependency) bundles the encoding: a missing one is a failure
    # chain-of-note generates 800 tokens and the margin is 1000: a window of 1805 leaves 5 tokens of history.
    reader = Reader("openai/r", lm_base="http://127.0.0.1:9/v1", api_key="x", window_tokens=1805)
    assert reader.history_limit == 5
    assert reader.cut_history("one two three four five six seven") == ("one two three four five", True)
    assert reader.cut_history("one two three") == ("one two three", False)
    assert reader.prompt("q", "d", "one two three four five six").startswith(
        EXPECTED_CON.split("{}")[0] + "one two three four five\n\nCurrent Date: d")
    uncut = Reader("openai/r", lm_base="http://127.0.0.1:9/v1", api_key="x")
    assert uncut.cut_history("word " * 5000) == ("word " * 5000, False)  # no window given: nothing is cut
    assert Reader("openai/r", api_key="x", style="direct", window_tokens=1505).history_limit == 5
    with pytest.raises(ValueError, match="leaves no room for history"):
        Reader("openai/r", api_key="x", window_tokens=1800)


def test_check_makes_one_attempt_where_a_run_call_retries() -> None:
    """A server that answers 503 to everything: ``check`` tries once whatever ``num_retries`` says, while a call
    during a run uses the configured retries before recording the error."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    hits: list[str] = []

    class Overloaded(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            hits.append(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
            body = b'{"error": {"message": "overloaded", "type": "server_error"}}'
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Overloaded)
    thread = Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        reader = Reader("openai/r", lm_base=f"http://127.0.0.1:{httpd.server_address[1]}/v1", api_key="x",
                        num_retries=1)
        with pytest.raises(LmUnavailable, match="check call failed: .*overloaded"):
            reader.check()
        assert len(hits) == 1
        hits.clear()
        got = reader("q", "d", "h")
        assert set(got) == {"reader_error"} and "overloaded" in got["reader_error"]
        assert len(hits) == 2  # the first try and one retry
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def test_lm_errors_are_one_whole_line_naming_the_key_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing key names the variable; a refused one says to check it; any other message keeps its first
    paragraph, cut between words (never mid-word, never the provider's multi-line guidance)."""
    from harness.workloads.answer import Answerer, lm_error_line
    from harness.workloads.locomo import Probe

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LmUnavailable) as exc:
        Reader("openai/foo", lm_base="http://127.0.0.1:9/v1").check()
    assert str(exc.value) == ("reader LM openai/foo at http://127.0.0.1:9/v1: check call failed: no API key: set "
                              "OPENAI_API_KEY in the environment (for a local server that checks no key, any value)")
    with pytest.raises(ValueError, match="^--lm check call failed: no API key: set OPENAI_API_KEY in the "):
        Answerer("openai/foo", api_base="http://127.0.0.1:9/v1").check()
    got = Answerer("openai/foo", api_base="http://127.0.0.1:9/v1")(Probe(index=0, question="q?", answer="a",
                                                                          category=4), "memory")
    assert got["answer_error"].startswith("no API key: set OPENAI_API_KEY") and got["f1"] is None

    class AuthError(Exception):
        code = "auth"
        env_keys = ("OPENAI_API_KEY",)

    monkeypatch.setenv("OPENAI_API_KEY", "wrong")
    assert lm_error_line(AuthError("401 invalid key\n\n  To fix:\n    - ...")) == (
        "the provider refused the key in OPENAI_API_KEY: check its value")
    long = RuntimeError("word " * 200 + "\n\n  To fix:\n    - something")
    line = lm_error_line(long, limit=60)
    assert line.startswith("RuntimeError: word word") and line.endswith(" word...") and len(line) <= 60
    assert "\n" not in line and "To fix" not in line
