"""The world's scripted planner reads agentfly example prompts and behaves as documented."""

from __future__ import annotations

import json

from benchmarks.worlds import CBRWorld
from benchmarks.worlds.cbr_agents import NoMemorySelector, OracleSelector, WorldPlanner, parse_examples

PROMPT = ("Positive Examples (reward=1) - Showing 1 of 1:\nExample 1:\nQuestion: {q}\nPlan:\n{steps}\n\n"
          "Negative Examples (reward=0) - Showing 1 of 1:\nExample 1:\nQuestion: Other?\nPlan: {{\"plan\": []}}\n\n"
          "Plan the current task from these examples.\n\nPlan:")


def _setup():
    world = CBRWorld(seed=0)
    qs = world.queries(60, seed=1)
    lookup = {q: (int(f), int(e)) for q, f, e in zip(qs.questions(), qs.family, qs.entity, strict=True)}
    return world, qs, lookup


def test_parse_examples_sections() -> None:
    ex = parse_examples(PROMPT.format(q="Who directed X?", steps="1. a\n2. b"))
    assert [(e["section"], e["question"]) for e in ex] == [("pos", "Who directed X?"), ("neg", "Other?")]
    assert ex[0]["steps"] == ["a", "b"] and ex[1]["raw"] == '{"plan": []}'


def test_planner_copies_same_type_positive_and_answers() -> None:
    world, qs, lookup = _setup()
    q, ex_q = qs.questions()[0], None
    qf = int(qs.family[0])
    for other, f in zip(qs.questions()[1:], qs.family[1:], strict=True):
        if int(f) == qf:
            ex_q = other
            break
    assert ex_q is not None
    ex_plan = json.loads(world.canonical_plan(qf, 5))["plan"]
    steps = "\n".join(f"{s['id']}. {s['description']}" for s in ex_plan)
    planner = WorldPlanner(world, lookup, seed=0, p_exec=1.0)
    planner.begin_question(q, "gt-answer")
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": q},
            {"role": "user", "content": PROMPT.format(q=ex_q, steps=steps)}]
    plan = planner.complete(msgs)
    assert world.decode_plan(plan) == qf and planner.stats["copied_right_plan"] == 1
    msgs += [{"role": "assistant", "content": plan}, {"role": "assistant", "content": "Task 1 result: ok"}]
    assert planner.complete(msgs) == "FINAL ANSWER: gt-answer"


def test_selectors() -> None:
    world, qs, lookup = _setup()
    q = qs.questions()[0]
    qf, qe = lookup[q]
    same = [x for x in qs.questions()[1:] if lookup[x][0] == qf]
    other = [x for x in qs.questions()[1:] if lookup[x][0] != qf][:3]
    pairs = [(x, world.canonical_plan(lookup[x][0], 1), i) for i, x in enumerate(other + same)]
    res = OracleSelector(world, lookup).retrieve(q, pairs, top_k=2)
    assert lookup[res[0]["question"]][0] == qf and res[0]["score"] == 2.0
    assert NoMemorySelector().retrieve(q, pairs, top_k=8) == []
