"""The LongMemEval design run with the embedding store: the same deliveries as the earlier per-call encoders, a
second run that encodes nothing, a full disk that leaves the earlier results alone, and a killed run that resumes
to the uninterrupted run's results."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from benchmarks import longmemeval as bench
from benchmarks.locomo import comparable
from benchmarks.worlds import longmemeval as gen
from harness.embed_store import EmbedStoreFull
from harness.faults import FaultInjected, FaultPlan

torch.set_num_threads(1)
EMBEDDING_ARMS = "mean,hybrid,np-pooler,np-mean,pm,tortoise"
FAST = "oracle,mean"
DROP = ("config", "meta", "encoder_cache", "peak_rss_mb", "wall_s", "run")


def _data(tmp_path: Path, n: int = 8, seed: int = 2) -> Path:
    """A generated file: with seed 2 question 0 is evaluated by PM and 1 is in PM's training split (with 6 and 7,
    the three a quick run trains on)."""
    path = tmp_path / "lme.json"
    gen.write_file(path, n, seed=seed, sessions=8)
    return path


def _payload(out: Path) -> dict[str, Any]:
    return json.loads((out / "longmemeval.json").read_text(encoding="utf-8"))


def _delivered(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "longmemeval" / "delivered.jsonl").read_text(encoding="utf-8").splitlines()]


def _same(a: Path, b: Path) -> None:
    pa, pb = _payload(a), _payload(b)
    assert comparable({k: v for k, v in pa.items() if k not in DROP}) == \
        comparable({k: v for k, v in pb.items() if k not in DROP})
    assert _delivered(a) == _delivered(b)


@pytest.mark.slow  # three design runs of every embedding arm on two questions
def test_store_delivers_what_the_per_call_encoders_delivered(tmp_path: Path) -> None:
    data = _data(tmp_path)
    store = tmp_path / "store"
    kw: dict[str, Any] = {"data": data, "arms": EMBEDDING_ARMS, "quick": True, "limit": 2}
    bench.run(tmp_path / "per-call", embed="per-call", **kw)
    bench.run(tmp_path / "store-1", embed="store", embed_store=store, **kw)
    a, b = _payload(tmp_path / "per-call"), _payload(tmp_path / "store-1")
    assert a["config"]["embed"] == "per-call" and b["config"]["embed"] == "store"
    assert {r for r in b["aggregate"]["rows"]} >= {"mean@4", "hybrid@8", "np-pooler@4", "np-mean@8", "pm@4",
                                                   "tortoise-eval", "tortoise-volunteer"}
    # every delivered text (so every ranking: ranked rows deliver in rank order) and every metric is the same
    _same(tmp_path / "per-call", tmp_path / "store-1")
    assert sum(c["misses"] for c in b["encoder_cache"].values()) > 0
    # a second run on the same data reads every vector from the store: it encodes nothing
    bench.run(tmp_path / "store-2", embed="store", embed_store=store, **kw)
    c = _payload(tmp_path / "store-2")
    assert set(c["encoder_cache"]) == {"minilm-mean", "minilm-pooler", "pm-cls"}
    assert all(st["misses"] == 0 and st["hits"] > 0 for st in c["encoder_cache"].values())
    _same(tmp_path / "store-1", tmp_path / "store-2")
    # the run compacted what it sealed: one segment per namespace
    assert all(len(list(ns.glob("seg-*.json"))) == 1 for ns in store.iterdir() if ns.is_dir())


def test_a_full_disk_is_one_line_and_leaves_the_earlier_results(tmp_path: Path) -> None:
    data = _data(tmp_path, n=2)
    out = tmp_path / "out"
    bench.run(out, data=data, arms=FAST, embed="per-call")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def full(step: str) -> None:
        if step == "embed_store.segment.data":
            raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(EmbedStoreFull) as got:
        bench.run(out, data=data, arms=FAST, embed="store", embed_store=tmp_path / "store", fault_hook=full)
    assert "\n" not in str(got.value) and str(tmp_path / "store" / "minilm-mean-cpu") in str(got.value)
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and ".memsim-resume-" not in str(p)}
    assert after == before


def test_a_killed_run_resumes_to_the_uninterrupted_results(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = _data(tmp_path, n=4)
    store = tmp_path / "store"
    bench.run(tmp_path / "whole", data=data, arms=FAST, embed_store=store)
    out = tmp_path / "out"
    plan = FaultPlan({"longmemeval.journal.append": 3})  # killed while keeping the third question
    with pytest.raises(FaultInjected):
        bench.run(out, data=data, arms=FAST, embed_store=store, fault_hook=plan)
    [journal] = list(out.glob(".memsim-resume-longmemeval-*"))
    lines = (journal / "journal.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == 2 and not (out / "longmemeval.json").exists()
    # the process died in the middle of writing one more record: a partial last line
    (journal / "journal.jsonl").write_bytes(b"".join(lines) + lines[1][:40])
    capsys.readouterr()
    seen: list[str] = []
    bench.run(out, data=data, arms=FAST, embed_store=store, resume=True, echo=seen.append)
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "dropped 1 damaged record(s) (the last one partial)" in err
    assert any("resuming: 2 question(s) already done" in s for s in seen)
    assert _payload(out)["config"]["resumed_questions"] == 2
    _same(tmp_path / "whole", out)
    assert not journal.exists()  # removed once the results are written


def test_a_run_without_resume_starts_afresh(tmp_path: Path) -> None:
    data = _data(tmp_path, n=3)
    out = tmp_path / "out"
    with pytest.raises(FaultInjected):
        bench.run(out, data=data, arms="oracle", fault_hook=FaultPlan({"longmemeval.journal.append": 2}))
    [journal] = list(out.glob(".memsim-resume-longmemeval-*"))
    (journal / "journal.jsonl").write_text("not json\n")  # never read without --resume
    bench.run(out, data=data, arms="oracle")
    assert _payload(out)["config"]["resumed_questions"] == 0 and not journal.exists()
