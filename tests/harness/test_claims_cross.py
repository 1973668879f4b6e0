"""Cross-design claims: registered under design ``cross``, skip cleanly without LoCoMo data, and turn refuted when
the behaviour they observe is changed (cheap arms only; the full set runs in ``memsim claims --design cross``)."""

from __future__ import annotations

import re

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


def test_skipped_without_data(monkeypatch: pytest.MonkeyPatch) -> None:
    xd._conversation.cache_clear()
    monkeypatch.setenv("MEMSIM_LOCOMO_DATA", "/nonexistent/locomo")
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
