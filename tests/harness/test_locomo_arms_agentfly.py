from __future__ import annotations

import json

import pytest
import torch

from agentfly_sim.bank import extract_pairs, load_jsonl
from agentfly_sim.embedding import NpSelector
from agentfly_sim.prompts import PLANNER_SYSTEM
from harness.workloads.agentfly_arm import NPArm
from harness.workloads.arm_text import dated_line
from harness.workloads.base import Arm, ArmContext
from tests.harness.locomo_arms_fixture import ALL_IDS, DATES, tiny_conversation

torch.set_num_threads(1)


_ARMS: dict[str, tuple] = {}


def _built(pooling, tmp_path_factory):
    if pooling not in _ARMS:
        conv = tiny_conversation()
        arm = NPArm(ArmContext(workdir=tmp_path_factory.mktemp("np"), k_values=(2, 8)), pooling=pooling)
        arm.ingest(conv)
        _ARMS[pooling] = (conv, arm)
    return _ARMS[pooling]


@pytest.fixture(params=["pooler", "mean"])
def np_arm(request, tmp_path_factory):
    return _built(request.param, tmp_path_factory)


def test_bank_has_one_dated_case_per_turn(np_arm):
    conv, arm = np_arm
    assert isinstance(arm, Arm)
    rows = [json.loads(line) for line in arm.bank_path.read_text(encoding="utf-8").splitlines()]
    expected = [dated_line(t, s) for s in conv.sessions for t in s.turns]
    assert [r["question"] for r in rows] == expected
    assert all(r["plan"] == "" and r["reward"] == 1 for r in rows)
    assert rows[0]["question"].startswith(f"[{DATES[0]}] Alice:")
    assert arm.stored() == ALL_IDS


def test_delivery_is_planner_input_with_ranked_cases(np_arm):
    conv, arm = np_arm
    assert arm.rows == (f"{arm.name}@2", f"{arm.name}@8")
    before = arm.bank_path.read_bytes()
    for probe in conv.probes:
        out = arm.deliver(probe)
        small, large = out[f"{arm.name}@2"], out[f"{arm.name}@8"]
        assert small.text.startswith(PLANNER_SYSTEM) and probe.question in small.text
        assert "Showing 2 of 2" in small.text and "Showing 6 of 6" in large.text
        assert small.dia_ids == frozenset(small.meta["ranked_ids"]) and len(small.dia_ids) == 2
        assert large.meta["ranked_ids"][:2] == small.meta["ranked_ids"]
        assert large.dia_ids == ALL_IDS  # K=8 over a six-case bank delivers every turn
        assert small.meta["faithful_texts_per_probe"] == 7 and small.meta["cached_texts_per_probe"] == 1
        assert small.meta["faithful"] is (arm.pooling == "pooler")
    assert arm.bank_path.read_bytes() == before  # probes never append cases
    assert not (arm.root / "result").exists()


def test_cached_ranking_equals_faithful_recompute(tmp_path_factory):
    conv, arm = _built("pooler", tmp_path_factory)
    items = load_jsonl(arm.bank_path)
    pairs = extract_pairs(items)
    faithful = NpSelector(cached=False)
    for probe in conv.probes:
        want = [c["line_index"] for c in faithful.retrieve(probe.question, pairs, top_k=6)]
        got = arm.deliver(probe)[f"{arm.name}@8"].meta["ranked_ids"]
        assert got == [conv.turns()[i].dia_id for i in want]


def test_mean_pooling_finds_the_named_dog_first(tmp_path_factory):
    conv, arm = _built("mean", tmp_path_factory)
    assert arm.deliver(conv.probes[0])[f"{arm.name}@2"].meta["ranked_ids"][0] == "D1:1"
