"""The synthetic CBR world is seeded, labelled as documented, and scales to 1e6 cases cheaply."""

from __future__ import annotations

import json
import time

import numpy as np

from benchmarks.worlds import CBRWorld
from benchmarks.worlds.cbr import PLAN_CANONICAL, PLAN_SIBLING, PLAN_TRUNCATED


def test_seeded_and_deterministic() -> None:
    a = CBRWorld(seed=5).bank(500)
    b = CBRWorld(seed=5).bank(500)
    c = CBRWorld(seed=6).bank(500)
    assert a.questions() == b.questions()
    assert [a.plan(i) for i in range(50)] == [b.plan(i) for i in range(50)]
    assert a.questions() != c.questions()


def test_plans_labels_and_relevance_are_consistent() -> None:
    world = CBRWorld(seed=1, p_correct=0.7, label_noise=0.1)
    bank = world.bank(4000)
    # the plan text decodes back to the family it was drawn from
    for i in range(300):
        fam = world.decode_plan(bank.plan(i))
        kind = int(bank.plan_kind[i])
        if kind == PLAN_CANONICAL:
            assert fam == int(bank.family[i]) and bank.correct[i]
        elif kind == PLAN_SIBLING:
            assert fam == int(bank.plan_family[i]) != int(bank.family[i]) and not bank.correct[i]
            assert world.families[fam].entity_type == world.families[int(bank.family[i])].entity_type
        else:
            assert kind == PLAN_TRUNCATED and fam is None and not bank.correct[i]
    assert abs(bank.correct.mean() - 0.7) < 0.03
    assert abs((bank.correct != bank.label).mean() - 0.1) < 0.02  # label noise
    rel = world.relevance(3, bank)
    assert set(np.unique(rel)) <= {0, 1, 2}
    assert np.array_equal(rel == 2, (bank.family == 3) & bank.correct)
    assert np.array_equal(rel == 1, (bank.family == 3) & ~bank.correct)
    assert abs((bank.family == 3).mean() - 1 / 40) < 0.01


def test_records_are_upstream_shaped(tmp_path) -> None:
    world = CBRWorld(seed=2)
    bank = world.bank(20)
    p = bank.write_jsonl(tmp_path / "memory.jsonl", kind="pm")
    rows = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines()]
    assert list(rows[0]) == ["case", "plan", "case_label"] and len(rows) == 20
    assert list(bank.np_records()[0]) == ["question", "plan", "reward"]
    qs = world.queries(50, seed=9)
    assert len(set(qs.questions())) == 50
    rows = qs.dataset_rows()
    assert list(rows[0]) == ["question", "ground_truth", "data_source"]
    assert rows[0]["ground_truth"] == world.answer(int(qs.family[0]), int(qs.entity[0]))
    more = world.queries(20, seed=10, exclude=qs.questions())
    assert not set(more.questions()) & set(qs.questions())


def test_million_case_bank_is_cheap() -> None:
    t0 = time.perf_counter()
    bank = CBRWorld(seed=0).bank(1_000_000)
    assert len(bank) == 1_000_000
    assert time.perf_counter() - t0 < 5.0
    assert isinstance(bank.question(999_999), str)
