"""Driver loops (spec §6): order, process_query internals, restart, failure matrix with fault injection."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from agentfly_sim.agents import (
    Flaky,
    ScriptedExecutor,
    ScriptedJudge,
    ScriptedPlanner,
    call_with_retries,
    tool_call,
)
from agentfly_sim.driver import DriverConfig, NPDriver, PMDriver, cap_tokens
from agentfly_sim.errors import ExecutorStalled, FaultSchedule, InjectedFailure, SimulatedCrash
from agentfly_sim.history import HeuristicTokenCounter, SharedHistory
from agentfly_sim.testing import ScoreFunctionRetriever, rank_by_index


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def _layout(tmp: Path, n: int = 3, *, bank: list[dict] | None = None, pm: bool = True, result_dir: bool = True):
    client = tmp / "client"
    client.mkdir(parents=True)
    (tmp / "memory").mkdir()
    (tmp / "data").mkdir()
    if result_dir:
        (tmp / "result").mkdir()
    qs = [{"question": f"Question number {i}?", "ground_truth": f"ans{i}<|answer_split|>alt{i}"} for i in range(n)]
    (tmp / "data/deepresearcher.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    if bank is None:
        bank = ([{"case": f"Seed case {i}?", "plan": '{"plan":[{"id":1,"description":"s"}]}',
                  "case_label": "positive" if i % 2 == 0 else "negative"} for i in range(3)] if pm else
                [{"question": f"Seed question {i}?", "plan": '{"plan":[{"id":1,"description":"s"}]}', "reward": i % 2}
                 for i in range(3)])
    name = "memory.jsonl" if pm else "dummy_memo.jsonl"
    (tmp / "memory" / name).write_text("".join(json.dumps(b) + "\n" for b in bank))
    return client, [q["question"] for q in qs]


def _pm(client, planner=None, executor=None, judge=None, **kw):
    kw.setdefault("retriever", ScoreFunctionRetriever(rank_by_index))
    return PMDriver(client, planner or ScriptedPlanner(), executor or ScriptedExecutor(), judge or ScriptedJudge(),
                    out=io.StringIO(), **kw)


def _np(client, planner=None, executor=None, judge=None, **kw):
    return NPDriver(client, planner or ScriptedPlanner(), executor or ScriptedExecutor(), judge or ScriptedJudge(),
                    out=io.StringIO(), **kw)


def test_pm_loop_order_and_record_shape(tmp_path):
    client, qs = _layout(tmp_path)
    d = _pm(client, planner=ScriptedPlanner(p_correct=1.0))
    s = d.run()
    assert (s.processed, s.skipped, s.errors) == (3, 0, 0)
    recs = _rows(tmp_path / "result/result_parametric.jsonl")
    assert list(recs[0]) == ["task_id", "query", "model_output", "plan_json", "meta_trace", "executor_trace",
                             "tool_history", "retrieved_cases", "question", "plan", "ground_truth", "pred_answer",
                             "judgement", "rationale"]
    assert recs[0]["task_id"] == "0" and recs[0]["model_output"] == "ans0" and recs[0]["judgement"] == "correct"
    assert [len(r["retrieved_cases"]) for r in recs] == [3, 4, 5]
    assert list(recs[0]["retrieved_cases"][0]) == ["prompt", "score", "index", "case_label", "case", "plan"]
    pairs = _rows(tmp_path / "memory/training_data.jsonl")
    assert len(pairs) == 12 and list(pairs[0]) == ["query", "case", "case_label", "plan", "truth_label"]
    bank = _rows(tmp_path / "memory/memory.jsonl")
    assert bank[3] == {"case": qs[0], "plan": recs[0]["plan_json"], "case_label": "positive"}
    assert (tmp_path / "memory/memory.jsonl").read_text().splitlines()[3].startswith('{"case": "Question number 0?", "plan": ')


def test_np_record_shape_and_history_reset(tmp_path):
    client, qs = _layout(tmp_path, pm=False)
    d = _np(client)
    d.run()
    recs = _rows(tmp_path / "result/result_round_0.jsonl")
    assert list(recs[0])[-1] == "reward" and recs[0]["task_id"] == 0 and "retrieved_cases" not in recs[0]
    assert recs[1]["meta_trace"][0]["input"][1] == qs[1]
    assert recs[1]["meta_trace"][0]["input"][2].startswith("Positive Examples (reward=1)")
    assert _rows(tmp_path / "memory/dummy_memo.jsonl")[3]["question"] == qs[0]


def test_process_query_cycles_and_plan_semantics(tmp_path):
    client, qs = _layout(tmp_path, 4)
    plan_a = '```json\n{"plan":[{"id":1,"description":"a"}]}\n```'
    scripts = {
        qs[0]: [plan_a, "not json", "FINAL ANSWER: late"],
        qs[1]: ['{"plan":[{"id":7,"description":"x"}]}', '{"plan":[{"id":8,"description":"y"}]}',
                '{"plan":[{"id":9,"description":"z"}]}'],
        qs[2]: [" FINAL ANSWER: spaced"],
        qs[3]: [None, "FINAL ANSWER: ok"],
    }
    d = _pm(client, planner=ScriptedPlanner(scripts=scripts))
    d.run()
    recs = {r["query"]: r for r in _rows(tmp_path / "result/result_parametric.jsonl")}
    r0 = recs[qs[0]]
    assert r0["plan_json"] == '{"plan":[{"id":1,"description":"a"}]}'
    assert r0["model_output"].startswith("[planner error] Expecting value: line 1 column 1 (char 0): not json")
    assert r0["executor_trace"] == [{"task_id": 1, "input": "Task 1: a", "output": "Result of task 1"}]
    r1 = recs[qs[1]]
    assert r1["model_output"] == '{"plan":[{"id":9,"description":"z"}]}' and len(r1["meta_trace"]) == 3
    assert r1["plan_json"] == '{"plan":[{"id":9,"description":"z"}]}'
    assert recs[qs[2]]["model_output"].startswith("[planner error]")  # leading space: not an answer, not JSON
    assert recs[qs[3]]["meta_trace"][0]["output"] == "" and recs[qs[3]]["model_output"].startswith("[planner error]")
    hist = r0["meta_trace"][1]["input_messages"]
    assert hist[-2] == plan_a and hist[-1] == "Task 1 result: Result of task 1"


def test_tool_calls_and_truthy_content_wins(tmp_path):
    client, qs = _layout(tmp_path, 1)
    cache = str(tmp_path / "cache")
    call = tool_call("write_workspace_file", {"filename": "a.txt", "content": "hi", "task_cache_dir": cache})
    both = {"content": "final text", "tool_calls": call["tool_calls"]}
    ex = ScriptedExecutor(scripts={(qs[0], 1): [call, both]})
    planner = ScriptedPlanner(scripts={qs[0]: ['{"plan":[{"id":1,"description":"w"}]}', "FINAL ANSWER: x"]})
    _pm(client, planner=planner, executor=ex).run()
    rec = _rows(tmp_path / "result/result_parametric.jsonl")[0]
    assert len(rec["tool_history"]) == 1
    th = rec["tool_history"][0]
    assert th["tool"] == "write_workspace_file" and th["arguments"]["filename"] == "a.txt"
    assert th["result"].startswith("[TextContent(type='text', text='✅ File CREATED: a.txt")
    second = ex.calls[1]
    assert second[-2]["role"] == "assistant" and second[-2]["tool_calls"] and second[-1]["role"] == "tool"
    assert rec["executor_trace"][0]["output"] == "final text"


def test_retries_flaky_and_exhausted(tmp_path):
    client, qs = _layout(tmp_path, 2)
    sleeps: list[float] = []
    planner = ScriptedPlanner(scripts={qs[0]: [Flaky(2, "FINAL ANSWER: ok")], qs[1]: [Flaky(3, "FINAL ANSWER: no")]})
    d = _pm(client, planner=planner, sleep=sleeps.append)
    s = d.run()
    assert s.processed == 1 and s.errors == 1
    assert sleeps == [2.0, 2.0, 2.0, 2.0]
    assert any("Error processing query: flaky agent failure 3/3" in x for x in d.log)
    with pytest.raises(ValueError):
        call_with_retries(lambda: (_ for _ in ()).throw(ValueError("boom")))


def test_pm_history_carryover_np_reset(tmp_path):
    client, qs = _layout(tmp_path, 2)
    ex = ScriptedExecutor(scripts={(qs[0], 1): [tool_call("unknown_tool", {})]})
    planner = ScriptedPlanner(scripts={qs[0]: ['{"plan":[{"id":1,"description":"t"}]}']})
    d = _pm(client, planner=planner, executor=ex)
    d.run()
    rec = _rows(tmp_path / "result/result_parametric.jsonl")[0]
    inp = rec["meta_trace"][0]["input_messages"]
    assert inp[1] == qs[0] and qs[1] in inp
    client2, qs2 = _layout(tmp_path / "np", 2, pm=False)
    ex2 = ScriptedExecutor(scripts={(qs2[0], 1): [tool_call("unknown_tool", {})]})
    planner2 = ScriptedPlanner(scripts={qs2[0]: ['{"plan":[{"id":1,"description":"t"}]}']})
    d2 = _np(client2, planner=planner2, executor=ex2)
    d2.run()
    rec2 = _rows(tmp_path / "np/result/result_round_0.jsonl")[0]
    assert rec2["meta_trace"][0]["input"][1] == qs2[1]
    assert any(x.startswith("[ERROR]: 'unknown_tool'") for x in d2.log)


def test_shared_history_cap():
    h = SharedHistory(cap=3)
    for i in range(5):
        h.add("user", str(i))
    assert [m["content"] for m in h.messages] == ["2", "3", "4"]


def test_executor_stalls_on_calls_limit(tmp_path):
    client, qs = _layout(tmp_path, 1)
    loop = ScriptedExecutor(default=lambda q, sid: tool_call("read_workspace_file",
                                                             {"filename": "x", "task_cache_dir": str(tmp_path / "c")}))
    events: list[dict] = []
    with pytest.raises(ExecutorStalled) as e:
        _pm(client, executor=loop, on_event=events.append).run()
    assert e.value.event["calls"] == 64 and e.value.event["empty_replies"] == 0 and events == [e.value.event]
    assert set(e.value.event) == {"event", "question", "task_id", "plan_step_id", "empty_replies", "calls"}
    assert not (tmp_path / "result/result_parametric.jsonl").exists()


def test_judge_wrapper_modes(tmp_path):
    client, qs = _layout(tmp_path, 1)
    d = _pm(client)
    d.gt_map = {}
    for mode, want in [("correct", "correct"), ("incorrect", "incorrect"), ("malformed", "incorrect"),
                       ("raise", "incorrect"), ("verbose", "incorrect")]:
        d.judge = ScriptedJudge(mode)
        assert d.llm_judge("q", "a", "a").judgement == want
    d.judge = ScriptedJudge("match")
    assert d.llm_judge("q", "Foo<|answer_split|>Bar", " bar ").judgement == "correct"
    assert d.llm_judge("q", ["x", "Foo<|answer_split|>Bar"], "foo").judgement == "correct"

    class Odd:
        def complete(self, prompt, max_tokens=300):
            return '```json\n{"judgement": "Maybe", "rationale": 5}\n```'

    d.judge = Odd()
    r = d.llm_judge("q", "a", "a")
    assert (r.judgement, r.rationale) == ("incorrect", "5")
    assert cap_tokens("x" * 2000, 300, HeuristicTokenCounter()) == "x" * 1200


def test_seeded_judge_is_deterministic():
    j1, j2 = ScriptedJudge("seeded", p=0.5, seed=3), ScriptedJudge("seeded", p=0.5, seed=3)
    prompts = [f"Question: q{i}\nGround truth answers (a semantic match with any one item suffices): [\"a\"]\n"
               f"Predicted answer: p\n" for i in range(20)]
    a = [j1.complete(p) for p in prompts]
    assert a == [j2.complete(p) for p in reversed(prompts)][::-1]
    assert 0 < sum('"correct"' in x for x in a) < 20


@pytest.mark.parametrize("point,kind", [("process_query", "fail"), ("judge", "fail"), ("result_write", "fail"),
                                        ("pairs_write", "fail"), ("case_write", "fail"), ("reload", "fail")])
def test_pm_failure_matrix(tmp_path, point, kind):
    client, qs = _layout(tmp_path, 2)
    nth = 2 if point == "reload" else 1  # reload #1 is the startup load; #2 follows q0's case append
    d = _pm(client, judge=ScriptedJudge("correct"), fault_hook=FaultSchedule({(point, nth): kind}))
    d.run()
    res = [r["query"] for r in _rows(tmp_path / "result/result_parametric.jsonl")]
    bank = [b["case"] for b in _rows(tmp_path / "memory/memory.jsonl")][3:]
    pairs = {p["query"] for p in _rows(tmp_path / "memory/training_data.jsonl")}
    pair_truth = {p["truth_label"] for p in _rows(tmp_path / "memory/training_data.jsonl") if p["query"] == qs[0]}
    q0 = qs[0]
    expect = {
        "process_query": (False, False, False),
        "judge": (True, True, True),
        "result_write": (False, False, False),
        "pairs_write": (True, False, False),
        "case_write": (True, True, False),
        "reload": (True, True, True),
    }[point]
    assert (q0 in res, q0 in pairs, q0 in bank) == expect
    if point == "judge":
        assert pair_truth == {False}
    if point == "reload":
        assert _rows(tmp_path / "result/result_parametric.jsonl")[1]["retrieved_cases"] == []  # pool was None
        assert d.pool is not None and len(d.pool) == 5  # q1's append reloaded it again
    if point == "process_query":
        rec1 = _rows(tmp_path / "result/result_parametric.jsonl")[0]
        assert rec1["meta_trace"][0]["input_messages"][1] == q0  # history carried over
    assert qs[1] in res and qs[1] in bank


@pytest.mark.parametrize("point", ["process_query", "judge", "result_write", "case_write", "reload"])
def test_np_failure_matrix(tmp_path, point):
    client, qs = _layout(tmp_path, 2, pm=False)
    d = _np(client, judge=ScriptedJudge("correct"), fault_hook=FaultSchedule({(point, 1): "fail"}))
    d.run()
    res = [r["query"] for r in _rows(tmp_path / "result/result_round_0.jsonl")]
    bank = [b["question"] for b in _rows(tmp_path / "memory/dummy_memo.jsonl")][3:]
    expect = {"process_query": (False, False), "judge": (True, True), "result_write": (False, False),
              "case_write": (True, False), "reload": (True, True)}[point]
    assert (qs[0] in res, qs[0] in bank) == expect
    if point == "judge":
        assert _rows(tmp_path / "memory/dummy_memo.jsonl")[3]["reward"] == 0
    if point == "reload":
        assert len(d.items) == 5


def test_crash_after_result_and_foundation_fault_plan(tmp_path):
    from harness.faults import FaultInjected, FaultPlan

    client, qs = _layout(tmp_path, 3)
    with pytest.raises(SimulatedCrash):
        _pm(client, fault_hook=FaultSchedule({("after_result_write", 1): "crash"})).run()
    assert [r["query"] for r in _rows(tmp_path / "result/result_parametric.jsonl")] == [qs[0]]
    assert not (tmp_path / "memory/training_data.jsonl").exists()
    plan = FaultPlan({"agentfly.case_write": 1})
    d = _pm(client, fault_hook=plan)
    d.run()
    assert plan.fired == [("agentfly.case_write", 1)]
    assert any("Error processing query: injected fault at agentfly.case_write" in x for x in d.log)
    assert issubclass(FaultInjected, Exception)  # an ordinary failure: handled by the per-question handler
    assert plan.steps()[:4] == ["agentfly.reload", "agentfly.process_query", "agentfly.judge", "agentfly.result_write"]


def test_fault_schedule_validation():
    with pytest.raises(ValueError):
        FaultSchedule({("nope", 1): "fail"})
    with pytest.raises(ValueError):
        FaultSchedule({("case_write", 1): "torn"})
    with pytest.raises(ValueError):
        FaultSchedule({("after_result_write", 1): "fail"})
    f = FaultSchedule({("judge", 2): "fail"})
    f("agentfly.judge")
    with pytest.raises(InjectedFailure):
        f("agentfly.judge")


def test_empty_dataset_and_no_result_dir_option(tmp_path):
    client, _ = _layout(tmp_path, 0)
    d = _pm(client)
    d.run()
    assert d.log == ["⚠️  query_list is empty – add questions to process."]
    client2, qs = _layout(tmp_path / "b", 1, result_dir=False)
    _pm(client2, config=DriverConfig(create_result_dir=True)).run()
    assert len(_rows(tmp_path / "b/result/result_parametric.jsonl")) == 1


def test_dataset_malformed_is_startup_failure(tmp_path):
    from agentfly_sim.bank import JsonlLineError

    client, _ = _layout(tmp_path, 2)
    with open(tmp_path / "data/deepresearcher.jsonl", "a") as f:
        f.write("\n")
    with pytest.raises(JsonlLineError) as e:
        _pm(client).run()
    assert e.value.lineno == 3


def test_dspy_agents_match_plain_agents(tmp_path):
    from harness.claims.agentfly_common import offline_agents

    outs = []
    for maker in ("plain", "dspy"):
        root = tmp_path / maker
        client, qs = _layout(root, 2)
        planner = ScriptedPlanner(p_correct=0.5, seed=1)
        judge = ScriptedJudge("match")
        cache = str(root / "cache")
        ex = ScriptedExecutor(scripts={(qs[0], 1): [
            tool_call("write_workspace_file", {"filename": "f.txt", "content": "c", "task_cache_dir": cache})]})
        if maker == "dspy":
            a = offline_agents(planner=planner, executor=ex, judge=judge, seed=1)
            d = _pm(client, planner=a.planner, executor=a.executor, judge=a.judge)
        else:
            d = _pm(client, planner=planner, executor=ex, judge=judge)
        d.run()
        outs.append([(r["model_output"], r["plan_json"], r["judgement"], r["meta_trace"],
                      [(t["tool"], t["arguments"]["filename"]) for t in r["tool_history"]])
                     for r in _rows(root / "result/result_parametric.jsonl")])
        if maker == "dspy":
            assert a.planner.lm.requests and a.planner.lm.requests[0].messages[0]["role"] == "system"
    assert outs[0][0][4] == [("write_workspace_file", "f.txt")]
    assert outs[0] == outs[1]


@pytest.mark.parametrize("k,want", [(8, 8), (0, 0), (-2, 8), (3, 3)])
def test_pm_driver_topk_rule(tmp_path, k, want):
    bank = [{"case": f"Seed {i}?", "plan": "", "case_label": "positive"} for i in range(10)]
    client, _ = _layout(tmp_path, 1, bank=bank)
    _pm(client, config=DriverConfig(memory_top_k=k)).run()
    rec = _rows(tmp_path / "result/result_parametric.jsonl")[0]
    assert len(rec["retrieved_cases"]) == want
    assert len(rec["meta_trace"][0]["input_messages"]) == (2 if want == 0 else 3)


def test_np_driver_topk_zero_and_negative(tmp_path):
    from agentfly_sim.prompts import EXAMPLE_TRAILER

    client, _ = _layout(tmp_path / "z", 1, pm=False)
    _np(client, config=DriverConfig(memory_top_k=0)).run()
    rec = _rows(tmp_path / "z/result/result_round_0.jsonl")[0]
    assert rec["meta_trace"][0]["input"][2] == EXAMPLE_TRAILER
    client, _ = _layout(tmp_path / "n", 1, pm=False)
    d = _np(client, config=DriverConfig(memory_top_k=-1))
    d.run()
    rec = _rows(tmp_path / "n/result/result_round_0.jsonl")[0]
    assert len(rec["meta_trace"][0]["input"]) == 2 and any("Memory retrieve failed" in x for x in d.log)
