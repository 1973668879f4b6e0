"""Claims observe behaviour: breaking the mechanism a claim is about turns its verdict to ``refuted``.

(Fractal's own mutation tests live in tests/fractal_sim/test_claims.py; these cover AgentFly and Tortoise.)
"""

from __future__ import annotations

import pytest

from harness.claims import all_claims
from harness.ledger import run_claim


def _verdict(claim_id: str) -> str:
    (c,) = all_claims(ids=[claim_id])
    return run_claim(c).verdict


def test_agf07_refuted_when_the_pool_loader_skips_malformed_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import agentfly_sim.driver as driver
    from agentfly_sim.plans import build_icl_text

    assert _verdict("AGF-07") == "holds"

    def lenient_load_pool(path):  # the "fix" a reader might assume: skip bad lines like the NP loader
        texts, meta = [], []
        for line in open(path, encoding="utf-8"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            texts.append(build_icl_text(obj["case"], obj.get("plan")))
            meta.append({"case": obj["case"], "plan": obj.get("plan"), "case_label": obj.get("case_label")})
        return texts, meta

    monkeypatch.setattr(driver, "load_pool", lenient_load_pool)
    assert _verdict("AGF-07") == "refuted"


def test_tor37_refuted_without_remention_suppression(monkeypatch: pytest.MonkeyPatch) -> None:
    import tortoise_sim.volunteer as volunteer

    assert _verdict("TOR-37") == "holds"
    # Suppression has two rules (ids already in the prior context; >= 60% token overlap with it), both skipped
    # for explicit asks: treating every prompt as explicit switches suppression off.
    monkeypatch.setattr(volunteer, "is_explicit_ask", lambda text: True)
    assert _verdict("TOR-37") == "refuted"


def test_tor15_refuted_when_the_nand_weight_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    import tortoise_sim.ep as ep

    assert _verdict("TOR-15") == "holds"
    monkeypatch.setattr(ep, "NAND_BASE_WEIGHT", 4.0)
    assert _verdict("TOR-15") == "refuted"


def test_rel07_refuted_when_a_later_write_can_lose_an_acknowledged_one(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path) -> None:
    """A diary that rewrites its whole page on every write (delete, then re-create every entry) loses acknowledged
    entries when a crash hits the rewrite: only crash points after an acknowledgement can see it, and the claim's
    pre-acknowledgement picks all stay ok."""
    from harness.claims import ClaimContext
    from tortoise_sim.sdk import Tortoise

    real = Tortoise.diary_write

    def rewriting_diary_write(self, agent_name, entry, topic=None, wing=None):
        old = [r["content"] for r in reversed(self.diary_read(agent_name, last_n=50))]
        with self.store.operation():
            self.store.query("MATCH (n:Point) WHERE n.pointKind = 'diary' AND n.authoredBy = $a DETACH DELETE n",
                             {"a": agent_name})
        out = None
        for e in [*old, entry]:
            out = real(self, agent_name, e, topic, wing)
        return out

    monkeypatch.setattr(Tortoise, "diary_write", rewriting_diary_write)
    (c,) = all_claims(ids=["REL-07"])
    obs = c.demonstrate(ClaimContext(tmp_path=tmp_path, seed=0, data_dir=None, quick=True))
    assert obs.verdict == "refuted"
    failing = obs.measured["not_ok"]
    assert failing and all(k.startswith("tortoise.diary:") and k.endswith("(after an ack)") for k in failing)
    assert "lost" in " ".join(failing.values())
    assert all(p["outcome"] == "ok" and p["acked"] == 0 for p in obs.measured["picked"].values())


def test_rel03_refuted_when_only_the_case_is_lost(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A driver that appends the training pairs before the result line: a crash after the result append then
    loses the case but not the pairs, which a check of the case alone cannot tell apart from AGF-38."""
    from agentfly_sim.bank import dumps_line, pair_row
    from agentfly_sim.driver import PMDriver
    from harness.claims import ClaimContext

    real = PMDriver._append_result

    def pairs_first(self, record):
        cases = record.get("retrieved_cases") or []
        if cases:
            self._makedirs_for(self.cfg.training_data_path)
            with open(self.resolve(self.cfg.training_data_path), "a", encoding="utf-8") as f:
                for case in cases:
                    f.write(dumps_line(pair_row(record["query"], case, record["judgement"] == "correct")))
        real(self, {**record, "retrieved_cases": list(cases)})
        cases.clear()  # the driver's own pair append after the result now has nothing to write

    monkeypatch.setattr(PMDriver, "_append_result", pairs_first)
    (c,) = all_claims(ids=["REL-03"])
    obs = c.demonstrate(ClaimContext(tmp_path=tmp_path, seed=0, data_dir=None, quick=True))
    assert obs.verdict == "refuted"
    assert obs.measured["failed_checks"] == ["the in-flight question's training pairs are lost",
                                             "both belong to the same question"]
