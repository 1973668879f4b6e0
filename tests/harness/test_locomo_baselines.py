"""Baseline arms, the arm registry and the metrics on hand-made conversations (sets known by construction), plus
a cross-check of recall@K against pytrec_eval on a shipped conversation."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.workloads.arms import SPECS, ArmUnavailable, build_arm, parse_arms
from harness.workloads.base import ArmContext, Delivery
from harness.workloads.baselines import BASELINES, BM25Arm, HybridArm, MeanPoolArm
from harness.workloads.locomo import (
    Conversation,
    Probe,
    Session,
    Turn,
    find_locomo_path,
    load_locomo,
    render_turn,
)
from harness.workloads.metrics import normalize_answer, probe_record, summarize
from harness.workloads.runner import run_conversation

torch.set_num_threads(1)


def tiny() -> Conversation:
    lines = [
        (1, "Ann", "I adopted a grey cat called Tom."), (1, "Bob", "Nice, I bought a red bicycle."),
        (1, "Ann", "Tom sleeps all day."), (2, "Bob", "I rode the bicycle to the lake."),
        (2, "Ann", "I painted the lake at sunrise."), (2, "Bob", "Send me the painting!"),
    ]
    sessions = []
    for s in (1, 2):
        turns = [Turn(dia_id=f"D{s}:{i + 1}", speaker=sp, text=tx, session=s, index_in_session=i,
                      caption="a photo of a lake" if tx.startswith("I painted") else None)
                 for i, (_, sp, tx) in enumerate(x for x in lines if x[0] == s)]
        sessions.append(Session(index=s, date_time=f"{s}:00 pm on {s} May, 2023", turns=turns))
    probes = [
        Probe(index=0, question="What is the name of Ann's cat?", answer="Tom", evidence=["D1:1"], category=4),
        Probe(index=1, question="What did Bob buy and where did he ride it?", answer="bicycle, lake",
              evidence=["D1:2", "D2:1"], category=1),
        Probe(index=2, question="When did Ann paint the lake?", answer="2 May 2023", evidence=["D2:2"],
              category=2),
        Probe(index=3, question="What is Bob's cat called?", adversarial_answer="Tom", evidence=[], category=5),
    ]
    return Conversation(sample_id="tiny", speaker_a="Ann", speaker_b="Bob", sessions=sessions, probes=probes,
                        source="memory")


def ctx(tmp_path: Path, k=(1, 2)) -> ArmContext:
    return ArmContext(workdir=tmp_path, k_values=k)


def test_render_turn_format() -> None:
    t = tiny().turns()[4]
    assert render_turn(t, "2:00 pm on 2 May, 2023") == \
        "[D2:2] 2:00 pm on 2 May, 2023 | Ann: I painted the lake at sunrise. [photo: a photo of a lake]"
    assert render_turn(t, "x", dates=False) == "[D2:2] Ann: I painted the lake at sunrise. [photo: a photo of a lake]"


def test_transcript_arms_and_oracle(tmp_path: Path) -> None:
    c = tiny()
    every = frozenset(t.dia_id for t in c.turns())
    full = BASELINES["full"](ctx(tmp_path))
    full.ingest(c)
    d = full.deliver(c.probes[0])["full"]
    assert d.dia_ids == every and full.stored() == every and d.text.count("\n") == 5
    last = BASELINES["last20"](ctx(tmp_path))
    last.ingest(c)
    assert last.deliver(c.probes[0])["last20"].dia_ids == every  # 6 turns < 20
    from harness.workloads.baselines import LastTurnsArm

    l2 = LastTurnsArm(ctx(tmp_path), n=2)
    l2.ingest(c)
    assert l2.rows == ("last2",) and l2.deliver(c.probes[0])["last2"].dia_ids == {"D2:2", "D2:3"}
    assert l2.stored() == {"D2:2", "D2:3"}
    orc = BASELINES["oracle"](ctx(tmp_path))
    orc.ingest(c)
    d = orc.deliver(c.probes[1])["oracle"]
    assert d.dia_ids == {"D1:2", "D2:1"} and "1 May, 2023" in d.text and "2 May, 2023" in d.text
    nod = BASELINES["oracle-nodate"](ctx(tmp_path))
    nod.ingest(c)
    d2 = nod.deliver(c.probes[1])["oracle-nodate"]
    assert d2.dia_ids == d.dia_ids and "May" not in d2.text
    assert orc.deliver(c.probes[3])["oracle"] == Delivery(text="", dia_ids=frozenset(), meta={})


@pytest.mark.parametrize("cls", [BM25Arm, MeanPoolArm, HybridArm])
def test_ranked_arms(tmp_path: Path, cls) -> None:
    c = tiny()
    arm = cls(ctx(tmp_path))
    arm.ingest(c)
    assert arm.rows == (f"{arm.prefix}@1", f"{arm.prefix}@2")
    got = arm.deliver(c.probes[0])
    top1, top2 = got[arm.rows[0]], got[arm.rows[1]]
    assert top1.dia_ids == {"D1:1"}  # "cat" + "name" point at the adoption turn for every ranker
    assert top1.dia_ids < top2.dia_ids and len(top2.dia_ids) == 2
    assert top2.meta["ranked"][0] == "D1:1" and top2.text.startswith("[D1:1]")
    assert arm.stored() == frozenset(t.dia_id for t in c.turns())


def test_bm25_query_of_stopwords_only(tmp_path: Path) -> None:
    c = tiny()
    arm = BM25Arm(ctx(tmp_path))
    arm.ingest(c)
    got = arm.deliver(Probe(index=9, question="what is it?", category=4))
    assert got["bm25@2"].meta["ranked"] == ["D1:1", "D1:2"]  # all scores 0: earlier turns first


def test_registry_reports_unavailable_design_arm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.workloads import arms

    monkeypatch.setitem(arms.SPECS, "ghost", arms.ArmSpec("ghost", "design", "x", "harness.workloads.no_such",
                                                          "Ghost"))
    with pytest.raises(ArmUnavailable, match="does not exist"):
        build_arm("ghost", ctx(tmp_path))
    monkeypatch.setitem(arms.SPECS, "ghost2", arms.ArmSpec("ghost2", "design", "x", "harness.workloads.baselines",
                                                           "NoClass"))
    with pytest.raises(ArmUnavailable, match="no arm class NoClass"):
        build_arm("ghost2", ctx(tmp_path))
    res = run_conversation(tiny(), ["ghost", "full"], tmp_path)
    assert res["arms"]["ghost"]["status"] == "unavailable" and "does not exist" in res["arms"]["ghost"]["message"]
    assert res["arms"]["full"]["status"] == "ok" and {r["row"] for r in res["records"]} == {"full"}
    with pytest.raises(ValueError, match="unknown arm"):
        parse_arms("full,nope")
    assert parse_arms("baselines") == [n for n, s in SPECS.items() if s.kind == "baseline"]


def test_runner_metrics_by_construction(tmp_path: Path) -> None:
    c = tiny()
    res = run_conversation(c, ["last20", "oracle", "bm25"], tmp_path, k_values=(1,))
    summ = summarize(res["records"], {"oracle": 0.0})
    assert summ["oracle"]["headline"]["evidence_recall"] == 1.0
    assert summ["oracle"]["headline"]["n_scored"] == 3 and summ["oracle"]["by_category"]["5"]["n_no_evidence"] == 1
    assert summ["last20"]["headline"]["stored_recall"] == 1.0
    b = summ["bm25@1"]["headline"]
    # bm25@1 delivers one turn: the multi-hop probe (2 evidence turns) can never reach all-evidence
    assert b["all_evidence_rate"] <= 2 / 3 and b["stored_recall"] == 1.0
    recs = [r for r in res["records"] if r["row"] == "oracle" and r["probe"] == 2]
    assert recs[0]["answer_present"] == 1.0  # "2 May 2023" is in the dated oracle text


def test_probe_record_counts() -> None:
    p = Probe(index=0, question="q", answer="The cats, and dogs!", evidence=["a", "b"], category=1)
    d = Delivery(text="cat dog a b", dia_ids=frozenset({"a", "x"}))
    r = probe_record("c", p, "row", d, frozenset({"a", "b"}), 1.0)
    assert (r["recall"], r["all_evidence"], r["stored_recall"], r["delivered_turns"]) == (0.5, False, 1.0, 2)
    assert r["answer_present"] == 1.0 and r["chars4"] == 3 and r["tokens"] == 4
    assert normalize_answer("The cats, and dogs!") == "cats dogs"


SHIPPED = find_locomo_path()


@pytest.mark.skipif(SHIPPED is None, reason="LoCoMo data not present")
def test_recall_at_k_matches_pytrec_eval(tmp_path: Path) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    conv = min(load_locomo(SHIPPED), key=lambda c: len(c.turns()))
    conv = conv.model_copy(update={"probes": [p for p in conv.probes if p.evidence][:60]})
    res = run_conversation(conv, ["bm25"], tmp_path, k_values=(4, 8))
    summ = summarize(res["records"])
    qrels = {str(p.index): {e: 1 for e in p.evidence} for p in conv.probes}
    for k in (4, 8):
        recs = [r for r in res["records"] if r["row"] == f"bm25@{k}"]
        run = {str(r["probe"]): {d: 1.0 / (i + 1) for i, d in enumerate(r["meta"]["ranked"])} for r in recs}
        ev = pytrec_eval.RelevanceEvaluator(qrels, {f"recall.{k}"})
        per_q = ev.evaluate(run)
        for r in recs:  # per probe: my recall of the delivered ids == trec_eval's recall@K of the ranking
            assert abs(r["recall"] - per_q[str(r["probe"])][f"recall_{k}"]) < 1e-9
        head = [r["recall"] for r in recs if r["category"] in (1, 2, 3, 4)]
        theirs = [per_q[str(r["probe"])][f"recall_{k}"] for r in recs if r["category"] in (1, 2, 3, 4)]
        assert abs(summ[f"bm25@{k}"]["headline"]["evidence_recall"] - sum(theirs) / len(theirs)) < 1e-9
        assert len(head) == len(theirs) > 0
