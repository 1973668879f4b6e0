"""Session level of the ranked metrics: a session is ranked where its first turn is, whatever later turns of it
are ranked below (the rule of the module docstring and of the TREC run files)."""

from __future__ import annotations

import math

import pytest

from harness.trec import level_rankings
from harness.workloads.metrics import ranked_metrics

SESSION_OF = {f"D{s}:{t}": s for s in range(1, 8) for t in range(1, 4)}


def test_a_session_ranked_again_lower_keeps_its_first_rank() -> None:
    # sessions by first occurrence: S1 (rank 1), S2 (rank 2); S1 again at rank 3 must not move it below S2
    got = ranked_metrics(["D1:1", "D2:1", "D1:2"], ["D2:3"], SESSION_OF)
    assert got is not None
    assert got["session"]["ndcg_any@5"] == pytest.approx(1 / math.log2(3))
    assert level_rankings(["D1:1", "D2:1", "D1:2"], SESSION_OF)["session"] == ["S1", "S2"]


def test_a_repeated_session_does_not_let_a_sixth_session_into_the_top_five() -> None:
    ranking = ["D1:1", "D2:1", "D3:1", "D4:1", "D5:1", "D6:1", "D1:2"]
    got = ranked_metrics(ranking, ["D6:2"], SESSION_OF)
    assert got is not None
    assert got["session"]["recall_any@5"] == 0.0 and got["session"]["recall_any@10"] == 1.0
    assert got["turn"]["recall_any@5"] == 0.0  # the turn level never depended on sessions
