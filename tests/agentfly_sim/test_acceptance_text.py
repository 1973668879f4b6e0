"""Acceptance examples of spec §10.1-§10.3 and §10.7 (text-level, no torch)."""

from __future__ import annotations

import io
import json

import pytest

from agentfly_sim.bank import extract_pairs, load_jsonl
from agentfly_sim.classifier import format_ranked
from agentfly_sim.history import LenTokenCounter, trim_messages
from agentfly_sim.plans import build_icl_text
from agentfly_sim.prompts import (
    EXAMPLE_TRAILER,
    build_np_prompt_from_cases,
    build_pm_prompt_from_cases,
    ensure_list,
    strip_fences,
)

PFX = "[CASE]\nC\n"


@pytest.mark.parametrize("plan,expected", [
    (None, "[CASE]\nC"),
    ("", "[CASE]\nC\n[PLAN]"),
    ("  ", "[CASE]\nC\n[PLAN]"),
    ("not json", PFX + "[PLAN]\n- not json"),
    ('{"plan":[{"id":1,"description":"d1"},{"description":"d2"}]}', PFX + "[PLAN]\n1. d1\n- d2"),
    ([{"step": "s1"}, "x"], PFX + "[PLAN]\n1. s1\n2. x"),
    ({"other": 1}, PFX + '[PLAN]\n{"other": 1}'),
    ('{"plan":[]}', PFX + '[PLAN]\n{"plan": []}'),
    ('{"plan":"abc"}', PFX + '[PLAN]\n{"plan": "abc"}'),
    ("42", PFX + "[PLAN]\n42"),
    (42, PFX + "[PLAN]\n42"),
    ("null", PFX + "[PLAN]\nnull"),
    ("true", PFX + "[PLAN]\ntrue"),
    ('{"plan":[{"id":1,"description":"","desc":"D"}]}', PFX + "[PLAN]\n1. D"),
    ('{"plan":["a",{"id":0,"description":"z"}]}', PFX + "[PLAN]\n- a\n0. z"),
    ("[1,2]", PFX + "[PLAN]\n1. 1\n2. 2"),
    ({"plan": [{"id": 2, "description": "x", "tool": "t"}], "notes": "n"}, PFX + "[PLAN]\n2. x"),
])
def test_build_icl_text_table(plan, expected):
    assert build_icl_text("C", plan) == expected


def test_build_icl_text_misc():
    assert build_icl_text(7, None) == "[CASE]\n7"
    assert build_icl_text("  C  ", None) == "[CASE]\n  C"


def test_first_shipped_pool_text(data_dir):
    from agentfly_sim.bank import load_pool

    texts, meta = load_pool(data_dir / "memory.jsonl")
    assert texts[0] == "[CASE]\nWhat sport does Deportivo Cali play?\n[PLAN]\n1. Determine the primary sport played by Deportivo Cali."
    assert len(texts) == 1278


NP_ITEMS = [
    {"question": "Q0", "plan": '{"plan":[{"id":1,"description":"a"},{"id":2,"description":"b"}]}', "reward": 1},
    {"question": "Q1", "plan": '{"plan":[{"id":1,"description":"c"}]}', "reward": 0},
    {"question": "Q2", "plan": "", "reward": 1},
    {"question": "Q3", "plan": '{"plan":[{"id":1,"description":"e"}]}'},
]


def test_np_prompt_example():
    cases = [{"question": NP_ITEMS[i]["question"], "plan": NP_ITEMS[i]["plan"], "line_index": i} for i in (1, 0, 3, 2)]
    cases.append({"question": "QX", "plan": "", "line_index": 9})
    expected = (
        "Positive Examples (reward=1) - Showing 2 of 2:\nExample 1:\nQuestion: Q0\nPlan:\n1. a\n2. b\n\n"
        "Example 2:\nQuestion: Q2\nPlan: \n\n"
        "Negative Examples (reward=0) - Showing 2 of 2:\nExample 1:\nQuestion: Q1\n"
        'Plan: {"plan":[{"id":1,"description":"c"}]}\n\nExample 2:\nQuestion: Q3\n'
        'Plan: {"plan":[{"id":1,"description":"e"}]}\n\n' + EXAMPLE_TRAILER)
    assert build_np_prompt_from_cases("task", cases, NP_ITEMS, 8, 8) == expected


def test_pm_prompt_example():
    plan = '{"plan":[{"id":3,"description":"x","extra":1}],"notes":"n"}'
    cases = [
        {"case": "A", "plan": plan, "case_label": "negative"},
        {"case": "B", "plan": plan, "case_label": "positive"},
        {"case": "C", "plan": None, "case_label": "positive"},
        {"case": "D", "plan": "p", "case_label": "unknown"},
        {"case": "E", "plan": "p", "case_label": "Positive"},
        {"case": "F", "plan": {"plan": [{"id": 1, "description": "dict"}]}, "case_label": "positive"},
    ]
    parts = ["Positive Examples - Showing 3 of 3:", "Example 1:\nQuestion: B\nPlan:\n3. x\n",
             "Example 2:\nQuestion: C\nPlan: None\n", "Example 3:\nQuestion: F\nPlan:\n1. dict\n",
             "Negative Examples - Showing 1 of 1:", f"Example 1:\nQuestion: A\nPlan: {plan}\n", EXAMPLE_TRAILER]
    assert build_pm_prompt_from_cases("t", cases, 8, 8) == "\n".join(parts)
    assert build_pm_prompt_from_cases("t", [cases[3]], 8, 8) == EXAMPLE_TRAILER


def test_trailer_structure():
    assert EXAMPLE_TRAILER.count("\n\n") == 1 and EXAMPLE_TRAILER.count("\n") == 2
    assert EXAMPLE_TRAILER.endswith(":")


def test_negative_caps_literal_header():
    one = [{"case": "A", "plan": "p", "case_label": "positive"}]
    assert build_pm_prompt_from_cases("t", one, -2, 8).startswith("Positive Examples - Showing -2 of 1:\n" + EXAMPLE_TRAILER[:10])
    two = one + [{"case": "B", "plan": "p", "case_label": "positive"}]
    out = build_pm_prompt_from_cases("t", two, -1, 8)
    assert out.startswith("Positive Examples - Showing -1 of 2:\nExample 1:\nQuestion: A") and "Question: B" not in out


def test_strip_fences():
    assert strip_fences('```json\n{"plan":[]}\n```') == '{"plan":[]}'
    assert strip_fences('Here: {"plan":[1]} ok') == '{"plan":[1]}'
    for t in ("FINAL ANSWER: 42", "no braces", '{"a":1} and {"b":2}'):
        assert strip_fences(t) == t
    with pytest.raises(json.JSONDecodeError):
        json.loads(strip_fences('{"a":1} and {"b":2}'))


@pytest.mark.parametrize("x,out", [
    (None, []), (["a", "b"], ["a", "b"]), ("a<|answer_split|>b", ["a<|answer_split|>b"]), (3, ["3"]),
    (2.5, ["2.5"]), (True, ["True"]), ({"k": 1}, ['{"k": 1}']), (("t",), ['["t"]']),
])
def test_ensure_list(x, out):
    assert ensure_list(x) == out


def test_extract_pairs_example():
    items = [{"question": "Q1", "plan": "P1", "reward": 1}, {"q": "Q2", "a": "A2"}, {"question": "Q3", "reward": 1},
             {"reward": 0, "question": "Q4"}, {"a": 1, "b": 2, "c": 3}, {"question": "Q6", "plan": None}]
    assert extract_pairs(items, "question", "plan") == [("Q1", "P1", 0), ("Q2", "A2", 1), ("Q3", 1, 2),
                                                        ("0", "Q4", 3), ("Q6", None, 5)]


def test_load_jsonl_warn(tmp_path):
    p = tmp_path / "b.jsonl"
    p.write_text('{"question":"a","plan":"","reward":1}\n\n{bad\n{"question":"c","plan":"","reward":0}\n')
    err = io.StringIO()
    items = load_jsonl(p, stderr=err)
    assert err.getvalue() == ("[WARN] Failed to parse line 3, skipped: Expecting property name enclosed in double "
                              "quotes: line 1 column 2 (char 1)\n")
    assert [i["question"] for i in items] == ["a", "c"]


def test_trimming_example():
    msgs = [{"role": "system", "content": "s" * 10}, {"role": "user", "content": "a"},
            {"role": "user", "content": "b" * 30}, {"role": "user", "content": "c" * 5}]
    assert trim_messages(msgs, 50, LenTokenCounter()) == [msgs[0], msgs[3]]
    assert trim_messages(msgs, 64, LenTokenCounter()) == msgs


def test_cli_block_and_topk_rule():
    results = [{"prompt": f"[CASE]\nc{i}", "score": s, "index": i, "case_label": "positive"}
               for i, s in enumerate([0.1, 0.5123, 0.3, 0.9, 0.2, 0.6])]
    out = format_ranked(results, 2)
    assert out.startswith("[1] score=0.9000 idx=3 label=positive\n[CASE]\nc3\n" + "-" * 60)
    assert out.count("score=") == 2
    for k in (0, -1, 6, 100):
        assert format_ranked(results, k).count("score=") == 6
    assert "[3] score=0.5123 idx=1 label=positive" in format_ranked(results, 0)
