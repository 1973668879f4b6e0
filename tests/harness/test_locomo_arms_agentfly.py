from __future__ import annotations

import json

import pytest
import torch

from agentfly_sim.bank import extract_pairs, load_jsonl
from agentfly_sim.embedding import NpSelector
from agentfly_sim.prompts import PLANNER_SYSTEM
from harness.workloads.agentfly_arm import NPArm
from harness.workloads.arm_text import dated_line
from harness.workloads.base import ArmContext
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
    assert set(arm.deliver(conv.probes[0])) == set(arm.rows)  # one Delivery per named row (Arm protocol)
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


def _other_conversation():
    from harness.workloads.locomo import Conversation, Probe, Session, Turn

    lines = [("D1:1", "Carol", "I planted tomatoes and basil in my balcony garden."),
             ("D1:2", "Dan", "Nice, I repaired my grandfather's bicycle this weekend."),
             ("D1:3", "Carol", "The basil already smells wonderful in the evening."),
             ("D1:4", "Dan", "I rode the bicycle to the lake on Sunday.")]
    turns = [Turn(dia_id=d, speaker=s, text=t, session=1, index_in_session=i) for i, (d, s, t) in enumerate(lines)]
    probes = [Probe(index=0, question="What did Carol plant on her balcony?", evidence=["D1:1", "D1:3"], category=4),
              Probe(index=1, question="Whose bicycle did Dan repair?", evidence=["D1:2"], category=4),
              Probe(index=2, question="Where did Dan ride on Sunday?", evidence=["D1:4"], category=4),
              Probe(index=3, question="Is Dan afraid of water?", evidence=["D1:4"], category=5)]
    return Conversation(sample_id="tiny-2", speaker_a="Carol", speaker_b="Dan",
                        sessions=[Session(index=1, date_time="9:00 am on 1 March, 2023", turns=turns)],
                        probes=probes, source="<hand-made>")


@pytest.fixture(scope="module")
def pm_arm(tmp_path_factory):
    from harness.workloads.agentfly_arm import PMArm

    conv = tiny_conversation()
    arm = PMArm(ArmContext(workdir=tmp_path_factory.mktemp("pm"), k_values=(2, 8), others=(_other_conversation(),),
                           quick=True))
    arm.ingest(conv)
    yield conv, arm
    arm.close()


def test_pm_trains_on_evidence_pairs_of_the_other_conversation(pm_arm):
    conv, arm = pm_arm
    rows = [json.loads(line) for line in arm.pairs_path.read_text(encoding="utf-8").splitlines()]
    # categories 1-4 only: 4 evidence turns -> 4 positives, quick -> 1 negative each
    assert sum(r["truth_label"] for r in rows) == 4 and len(rows) == 8
    assert {r["query"] for r in rows} == {p.question for p in _other_conversation().probes[:3]}
    assert all(r["case"].startswith("[9:00 am on 1 March, 2023] ") for r in rows)
    assert not any(p.question in {r["query"] for r in rows} for p in conv.probes)  # leave-one-out
    info = arm.train_info
    assert info["pairs"] == 8 and info["train_s"] > 0 and "AGF-35" in info["labelling"]
    assert arm.stored() == ALL_IDS


def test_pm_delivers_driver_prompt_at_each_k(pm_arm):
    conv, arm = pm_arm
    assert arm.rows == ("pm@2", "pm@8")
    before = arm.bank_path.read_bytes()
    for probe in conv.probes:
        out = arm.deliver(probe)
        small, large = out["pm@2"], out["pm@8"]
        assert small.text.startswith(PLANNER_SYSTEM) and probe.question in small.text
        assert "Positive Examples - Showing 2 of 2" in small.text
        assert small.dia_ids == frozenset(small.meta["ranked_ids"]) and len(small.dia_ids) == 2
        assert large.meta["ranked_ids"][:2] == small.meta["ranked_ids"]
        assert large.dia_ids == ALL_IDS
        assert small.meta["faithful"] is False and small.meta["labelling"].startswith("non-faithful")
    assert arm.bank_path.read_bytes() == before


def test_pm_without_other_conversations_is_an_error(tmp_path):
    from harness.workloads.agentfly_arm import PMArm

    arm = PMArm(ArmContext(workdir=tmp_path, quick=True))
    with pytest.raises(ValueError, match="leave-one-conversation-out"):
        arm.ingest(tiny_conversation())


@pytest.mark.parametrize("pooling", ["pooler", "mean"])
def test_the_faithful_batch_is_timed_once_per_shape_unless_every_bank_is_asked_for(pooling, tmp_path, monkeypatch):
    """Two banks of the same batch shape: with ``per-shape`` timing the second reports the first's per-text cost
    and runs no timing batch; with ``per-bank`` it runs its own. The encoder calls are observed, not assumed."""
    import harness.workloads.agentfly_arm as af

    calls: list[int] = []
    timing = [False]  # encoder calls are counted while the arm times its batch only (not its index)
    if pooling == "pooler":
        import agentfly_sim.embedding as emb

        real = emb.embed_texts
        monkeypatch.setattr(emb, "embed_texts",
                            lambda texts, *a, **k: (timing[0] and calls.append(len(texts))) or real(texts, *a, **k))
    else:
        from harness.embedding import MeanPoolingEncoder

        real_mean = MeanPoolingEncoder.encode
        monkeypatch.setattr(MeanPoolingEncoder, "encode",
                            lambda self, texts: (timing[0] and calls.append(len(texts))) or real_mean(self, texts))
    real_measure = NPArm._measure_faithful_batch

    def measure(self):
        timing[0] = True
        try:
            return real_measure(self)
        finally:
            timing[0] = False

    monkeypatch.setattr(NPArm, "_measure_faithful_batch", measure)
    monkeypatch.setattr(af, "_TIMED_BATCHES", {})
    got = {}
    for mode in ("per-shape", "per-bank"):
        for i in range(2):
            calls.clear()
            arm = NPArm(ArmContext(workdir=tmp_path / f"{mode}{i}", k_values=(2,)), pooling=pooling,
                        recompute_timing=mode)
            arm.ingest(tiny_conversation())
            meta = arm.deliver(tiny_conversation().probes[0])[f"{arm.name}@2"].meta
            got[(mode, i)] = (arm.timed_shape, arm.timing_reused, list(calls), meta)
    shape = got[("per-shape", 0)][0]
    assert shape[0] == 6 and all(g[0] == shape for g in got.values())  # the same bank: the same shape
    assert got[("per-shape", 0)][1:3] == (False, [2, 6])  # warm-up of two texts, then the timed batch
    assert got[("per-shape", 1)][1:3] == (True, [])  # nothing timed again
    assert got[("per-shape", 1)][3]["per_text_encode_ms"] == got[("per-shape", 0)][3]["per_text_encode_ms"]
    assert got[("per-shape", 1)][3]["recompute_timing"] == "per-shape"
    assert got[("per-bank", 1)][1:3] == (False, [2, 6])  # the previous behaviour: every bank timed
    with pytest.raises(ValueError, match="recompute_timing"):
        NPArm(ArmContext(workdir=tmp_path / "x"), recompute_timing="never")
