"""Cross-design claims: registered under design ``cross``, skip cleanly without LoCoMo data, and turn refuted when
the behaviour they observe is changed (cheap arms only; the full set runs in ``memsim claims --design cross``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from harness.claims import DESIGNS, all_claims
from harness.claims import cross as xd
from harness.ledger import run_claim
from harness.workloads.locomo import find_locomo_path

torch.set_num_threads(1)


def test_registered() -> None:
    claims = all_claims(design="cross")
    assert "cross" in DESIGNS and len(claims) >= 8
    assert all(re.fullmatch(r"XD-\d\d", c.id) and c.kind == "consequence" for c in claims)


def test_skipped_without_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    xd._conversation.cache_clear()
    monkeypatch.setenv("MEMSIM_LOCOMO_DATA", "/nonexistent/locomo")
    monkeypatch.delenv("MEMSIM_LONGMEMEVAL_DATA", raising=False)  # the LongMemEval claims: nothing set or fetched
    monkeypatch.setenv("MEMSIM_DATA_DIR", str(tmp_path))
    try:
        rows = [run_claim(c) for c in all_claims(design="cross")]
    finally:
        xd._conversation.cache_clear()
    assert {r.verdict for r in rows} == {"skipped"}


@pytest.mark.skipif(find_locomo_path() is None, reason="LoCoMo data not present")
def test_xd07_refuted_when_the_dates_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.workloads import baselines

    (c,) = all_claims(ids=["XD-07"])
    xd._CACHE.clear()
    assert run_claim(c).verdict == "holds"
    # break the mechanism: the "no date" oracle keeps its dates, so temporal questions lose nothing
    monkeypatch.setattr(baselines.OracleArm, "__init__", _oracle_init_keep_dates)
    xd._CACHE.clear()
    try:
        assert run_claim(c).verdict == "refuted"
    finally:
        xd._CACHE.clear()


def _oracle_init_keep_dates(self, ctx=None, *, dates: bool = True) -> None:
    from harness.workloads.baselines import _TurnArm

    _TurnArm.__init__(self, ctx, dates=True)
    self.name = "oracle" if dates else "oracle-nodate"
    self.rows = (self.name,)


@pytest.mark.skipif(find_locomo_path() is None, reason="LoCoMo data not present")
def test_xd04_observes_what_the_faithful_retrieval_embeds(monkeypatch: pytest.MonkeyPatch) -> None:
    """XD-04 counts the texts the faithful retrieval hands its tokenizer: a retriever that embeds only 16 keys of
    the bank refutes it (the claim conversation is cut to its first session here, 28 turns, to keep the arms cheap)."""
    import agentfly_sim.embedding as emb

    conv = xd._conversation()
    assert conv is not None
    small = conv.sliced(max_sessions=1)
    assert len(small.turns()) > 16
    monkeypatch.setattr(xd, "_conversation", lambda: small)
    (c,) = all_claims(ids=["XD-04"])
    xd._CACHE.clear()
    try:
        faithful = run_claim(c)
        assert faithful.verdict == "holds", faithful.measured
        real = emb.retrieve

        def part_of_the_bank(task, pairs, tokenizer, model, *args, **kwargs):  # embeds 16 keys, ranks those
            return real(task, pairs[:16], tokenizer, model, *args, **kwargs)

        monkeypatch.setattr(emb, "retrieve", part_of_the_bank)
        row = run_claim(c)
        assert row.verdict == "refuted"
        assert {"recompute_embeds_the_whole_bank", "estimate_counts_the_texts_encoded"} <= set(
            row.measured["failed_checks"])
        assert row.measured["texts_encoded_per_question"] == [17] * xd.XD04_TIMED_PROBES
        assert faithful.measured["texts_encoded_per_question"] == [len(small.turns()) + 1] * xd.XD04_TIMED_PROBES
    finally:
        xd._CACHE.clear()


def test_xd12_splits_the_raw_evidence_strings(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """XD-12's recovery check splits the raw evidence strings itself: a split string whose second id names no
    turn (``"D8:6; D9:170"``; the loader's cleaned evidence keeps only ``D8:6``) is not recovered, so it refutes."""
    import json

    from harness.claims import cross_paper as xp

    path = find_locomo_path()
    src = path / "conv-26.json" if path is not None and path.is_dir() else None
    if src is None or not src.is_file():
        pytest.skip("LoCoMo conversation conv-26 not found as a single-conversation file")
    (c,) = all_claims(ids=["XD-12"])
    assert run_claim(c).verdict == "holds"
    text = src.read_text(encoding="utf-8")
    assert text.count('"D8:6; D9:17"') == 1
    (tmp_path / "conv-26.json").write_text(text.replace('"D8:6; D9:17"', '"D8:6; D9:170"'), encoding="utf-8")
    monkeypatch.setenv("MEMSIM_LOCOMO_DATA", str(tmp_path))
    conv = xp._conversation()
    assert conv is not None
    (q,) = [p for p in conv.probes if p.raw_evidence == ["D8:6; D9:170"]]
    assert q.evidence == ["D8:6"]  # the loader's cleaned ids alone would recall it fully
    row = run_claim(c)
    assert row.verdict == "refuted"
    assert row.measured["failed_checks"] == ["split_raw_strings_recover_them"]
    assert json.dumps(row.measured["recall_with_split_raw_strings"]) == "[0.5]"
