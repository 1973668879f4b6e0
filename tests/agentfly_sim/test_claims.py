"""The AgentFly claims are registered and the fast ones hold (the full ledger runs via ``memsim claims``)."""

from __future__ import annotations

import pytest

from harness.claims import ClaimContext, all_claims

FAST = ["AGF-02", "AGF-04", "AGF-05", "AGF-06", "AGF-07", "AGF-08", "AGF-09", "AGF-11", "AGF-12", "AGF-13",
        "AGF-14", "AGF-16", "AGF-18", "AGF-19", "AGF-20", "AGF-21", "AGF-23", "AGF-25", "AGF-27", "AGF-28",
        "AGF-29", "AGF-30", "AGF-31", "AGF-32", "AGF-33", "AGF-34", "AGF-38"]


def test_all_38_registered():
    ids = [c.id for c in all_claims(design="agentfly")]
    assert ids == [f"AGF-{i:02d}" for i in range(1, 39)]
    kinds = {c.id: c.kind for c in all_claims(design="agentfly")}
    assert [i for i, k in kinds.items() if k == "consequence"] == ["AGF-35", "AGF-36", "AGF-37", "AGF-38"]


@pytest.mark.parametrize("claim_id", FAST)
def test_fast_claims_hold(claim_id, tmp_path):
    (c,) = all_claims(ids=[claim_id])
    obs = c.demonstrate(ClaimContext(tmp_path=tmp_path, seed=0, data_dir=None, quick=True))
    assert obs.verdict == "holds", obs.measured


def test_corpus_claims_skip_without_data(tmp_path):
    for cid in ("AGF-22", "AGF-24", "AGF-35", "AGF-37"):
        (c,) = all_claims(ids=[cid])
        obs = c.demonstrate(ClaimContext(tmp_path=tmp_path / cid, seed=0, data_dir=None, quick=True))
        assert obs.verdict == "skipped" and "not found" in obs.note
