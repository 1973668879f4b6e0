"""The spool claims TOR-51 and TOR-52 hold on the simulator and turn ``refuted`` (never ``error``) when the behaviour
they describe is mutated: the per-entry guard of a flush removed (TOR-51), and the faithful flush given the hardened
``turns_unreadable="keep"`` in place of upstream's discard (TOR-52)."""

from __future__ import annotations

import pytest

from harness.claims import Observation, all_claims
from harness.ledger import run_claim


def _run(claim_id: str) -> Observation:
    (c,) = all_claims(ids=[claim_id])
    return run_claim(c)


@pytest.mark.parametrize("claim_id", ["TOR-51", "TOR-52"])
def test_holds_on_the_simulator(claim_id: str) -> None:
    obs = _run(claim_id)
    assert obs.verdict == "holds", (obs.measured, obs.evidence)


def test_tor51_refuted_when_an_entry_failure_escapes_the_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard removed: entry A's failure (``int("x")`` after its 503) leaves ``flush_spool`` instead of being
    recorded for A alone, so B is never posted in that flush. The claim records the raise as a failed check."""
    from tortoise_sim.spool import Spool

    def unguarded(self: Spool, key: str, meta: dict, now_ms: int, exc: Exception) -> None:
        raise exc

    monkeypatch.setattr(Spool, "_entry_failed", unguarded)
    obs = _run("TOR-51")
    assert obs.verdict == "refuted", (obs.verdict, obs.measured, obs.evidence)
    failed = obs.measured["failed_checks"]
    assert "flush_never_raised" in failed and "later_entry_backed_off" in failed, failed
    assert obs.measured["flush_raised"] == ["ValueError: invalid literal for int() with base 10: 'x'"]
    assert "flush raised ValueError" in obs.evidence


def test_tor52_refuted_when_the_faithful_flush_keeps_the_torn_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every spool given the hardened named option ``turns_unreadable="keep"``: the faithful arm no longer loses the
    torn session, which is what the claim says it does."""
    from tortoise_sim.spool import Spool

    real = Spool.__init__

    def keeping(self: Spool, *args: object, **kw: object) -> None:
        real(self, *args, **{**kw, "turns_unreadable": "keep"})  # type: ignore[arg-type]

    monkeypatch.setattr(Spool, "__init__", keeping)
    obs = _run("TOR-52")
    assert obs.verdict == "refuted", (obs.verdict, obs.measured, obs.evidence)
    failed = obs.measured["failed_checks"]
    assert {"faithful_discards_transcript_empty", "faithful_deletes_both_files"} <= set(failed), failed
    assert "flush_never_raised" not in failed
