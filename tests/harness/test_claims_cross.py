"""Cross-design claims: registered under design ``cross``, skip cleanly without LoCoMo data, and turn refuted when
the behaviour they observe is changed, or when the two sides a claim compares are swapped (its test then finds the
difference significant the other way). The swaps relabel the probe records of the very runs the claim observed
(each run is cached per process), so a claim is run once as it is and once reversed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from harness.claims import DESIGNS, all_claims
from harness.claims import cross as xd
from harness.ledger import LedgerRow, run_claim
from harness.workloads.locomo import find_locomo_path
from harness.workloads.metrics import summarize

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
    # break the mechanism: the "no date" oracle keeps its dates, so no category loses anything: no difference
    # either way, which the tests cannot call significant (the swap below is what refutes it)
    monkeypatch.setattr(baselines.OracleArm, "__init__", _oracle_init_keep_dates)
    xd._CACHE.clear()
    try:
        row = run_claim(c)
        assert row.verdict == "inconclusive"
        assert all(t["estimate"] == 0 and t["p"] == 1 for t in row.measured["tests"])
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
        assert [e["probe"] for e in faithful.measured["examples"]] == [
            r["probe"] for r in xd._recs(xd._run(("np-pooler", "np-mean")), "np-pooler@8")][:xd.XD04_TIMED_PROBES]
        [timing] = faithful.measured["tests"]
        assert timing["outcome"] == "holds" and timing["n"] == xd.XD04_TIMED_PROBES

        # the sides reversed: the "recompute" timed is no work at all, so every cached probe is the slower one
        monkeypatch.setattr(emb, "retrieve", lambda task, pairs, tokenizer, model, *args, **kwargs: [])
        reverse = run_claim(c)
        assert reverse.verdict == "refuted"
        assert reverse.measured["refuted_tests"] == ["faithful recompute ms > cached probe ms"]
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


# ------------------------------------------------------------------------------------------- sides reversed
needs_locomo = pytest.mark.skipif(find_locomo_path() is None, reason="LoCoMo data not present")
SMALL_SESSIONS = 4
"""The claim conversation is cut to its first sessions in these tests (the arms stay cheap; a claim's "whole
conversation" is then that slice): a reversal large enough to refute a claim there refutes it at any size."""


def _reversed(res: dict, rows: tuple[tuple[str, str], ...] = (), categories: dict[int, int] | None = None) -> dict:
    """A copy of a run with the rows of each pair (and the categories of ``categories``) swapped in its probe
    records; the summary recomputed from them."""
    swap = {**{a: b for a, b in rows}, **{b: a for a, b in rows}}
    recs = [{**r, "row": swap.get(r["row"], r["row"]),
             "category": (categories or {}).get(r["category"], r["category"])} for r in res["records"]]
    return {**res, "records": recs, "summary": summarize(recs)}


def _delivers_what_it_stores(res: dict, rows: tuple[str, ...]) -> dict:
    """A copy of a run where each of ``rows`` delivers every evidence turn it stores (and volunteers a block):
    the other side of "delivers fewer than" and of "delivers well under what it stores"."""
    recs = []
    for r in res["records"]:
        if r["row"] in rows:
            r = {**r, "recall": r["stored_recall"], "evidence_hits": r["stored_hits"],
                 "all_evidence": None if r["stored_recall"] is None else r["stored_recall"] == 1.0,
                 "meta": {**r["meta"], "pointers": ["every stored evidence turn"]}}
        recs.append(r)
    return {**res, "records": recs, "summary": summarize(recs)}


def _patch_runs(m: pytest.MonkeyPatch, change) -> None:
    real = xd._run
    m.setattr(xd, "_run", lambda *a, **k: change(real(*a, **k)))


def _row(claim_id: str) -> LedgerRow:
    (c,) = all_claims(ids=[claim_id])
    return run_claim(c)


def _refuted_by_its_tests(row: LedgerRow, before: LedgerRow | None = None) -> None:
    """Refuted because its tests are significant the other way (not by a check): every test; or, given the
    unmutated row, tests that held there (none holds any more; near the Holm threshold a reversed one may end
    inconclusive, the permutation p-values being Monte Carlo estimates)."""
    assert row.verdict == "refuted", (row.verdict, row.measured.get("tests"), row.evidence[-2000:])
    assert "failed_checks" not in row.measured
    refuted = set(row.measured["refuted_tests"])
    if before is None:
        assert refuted == {t["name"] for t in row.measured["tests"]}, row.measured["tests"]
        return
    held = {t["name"] for t in before.measured["tests"] if t["outcome"] == "holds"}
    assert held and refuted and refuted <= held, (held, row.measured["tests"])
    assert not any(t["outcome"] == "holds" for t in row.measured["tests"]), row.measured["tests"]


def _not_refuted(claim_id: str) -> LedgerRow:
    row = _row(claim_id)
    assert row.verdict in ("holds", "inconclusive"), (row.verdict, row.measured, row.evidence[-2000:])
    assert row.measured["examples"] and all({"conversation", "probe"} <= set(e) for e in row.measured["examples"])
    return row


@pytest.fixture
def small_conversation(monkeypatch: pytest.MonkeyPatch):
    conv = xd._conversation()
    assert conv is not None
    small = conv.sliced(max_sessions=SMALL_SESSIONS)
    monkeypatch.setattr(xd, "_conversation", lambda: small)
    monkeypatch.setattr(xd, "WHOLE_CONVERSATIONS", (xd.CLAIM_CONVERSATION,))  # the slice alone
    monkeypatch.setattr(xd, "PM_TRAINING_CONVERSATIONS", ("conv-41",))  # one classifier training, not three
    xd._CACHE.clear()
    yield small
    xd._CACHE.clear()


@needs_locomo
def test_xd07_refuted_with_dates_and_no_dates_swapped(monkeypatch: pytest.MonkeyPatch) -> None:
    before = _not_refuted("XD-07")
    _patch_runs(monkeypatch, lambda res: _reversed(res, rows=(("oracle", "oracle-nodate"),)))
    _refuted_by_its_tests(_row("XD-07"), before)


@needs_locomo
@pytest.mark.slow
def test_fractal_np_and_pm_claims_refuted_reversed(small_conversation, monkeypatch: pytest.MonkeyPatch) -> None:
    """XD-02 with Fractal and the transcript swapped; XD-03 and XD-10 (fewer evidence turns than another row)
    with that row delivering every evidence turn it stores."""
    for cid in ("XD-02", "XD-03", "XD-10"):
        _not_refuted(cid)
    with monkeypatch.context() as m:
        _patch_runs(m, lambda res: _reversed(res, rows=(("fractal", "full"),)))
        _refuted_by_its_tests(_row("XD-02"))
    for cid, rows in (("XD-03", ("np-pooler@4", "np-pooler@8")), ("XD-10", ("pm@4", "pm@8"))):
        with monkeypatch.context() as m:
            _patch_runs(m, lambda res, rows=rows: _delivers_what_it_stores(res, rows))
            _refuted_by_its_tests(_row(cid))


@needs_locomo
@pytest.mark.slow
def test_tortoise_claims_refuted_reversed(small_conversation, monkeypatch: pytest.MonkeyPatch) -> None:
    """XD-06 with the evaluation path and the volunteered block swapped; XD-05 and XD-09 (one-sample, against
    thresholds) with the rows delivering every evidence turn they store."""
    before = {cid: _not_refuted(cid) for cid in ("XD-05", "XD-06", "XD-09")}
    with monkeypatch.context() as m:
        _patch_runs(m, lambda res: _reversed(res, rows=(("tortoise-eval", "tortoise-volunteer"),)))
        _refuted_by_its_tests(_row("XD-06"), before["XD-06"])
    rows = ("np-pooler@8", "np-mean@8", "tortoise-eval", "tortoise-volunteer")
    _patch_runs(monkeypatch, lambda res: _delivers_what_it_stores(res, rows))
    for cid in ("XD-05", "XD-09"):
        _refuted_by_its_tests(_row(cid))


@needs_locomo
@pytest.mark.slow
def test_xd08_refuted_with_the_categories_swapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the claim conversation alone (whole), multi-hop and single-hop questions swapped."""
    monkeypatch.setattr(xd, "WHOLE_CONVERSATIONS", (xd.CLAIM_CONVERSATION,))
    before = _not_refuted("XD-08")
    _patch_runs(monkeypatch, lambda res: _reversed(res, categories={1: 4, 4: 1}))
    _refuted_by_its_tests(_row("XD-08"), before)


@needs_locomo
def test_xd11_refuted_when_observations_name_no_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Observation units that carry no turn id credit no evidence, so dialog turns win on the same questions."""
    import dataclasses

    from harness.workloads import paper_protocol as pp

    real = _not_refuted("XD-11")
    assert real.measured["category_1_questions"] > 100
    build = pp.observation_units
    monkeypatch.setattr(pp, "observation_units",
                        lambda conv: [dataclasses.replace(u, ids=()) for u in build(conv)])
    _refuted_by_its_tests(_row("XD-11"))


@needs_locomo
@pytest.mark.slow
def test_xd14_refuted_when_verbatim_capture_delivers_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.claims import cross_recorded as xr

    observe = xr._observe
    monkeypatch.setattr(xr, "SLICE_SESSIONS", SMALL_SESSIONS)
    observe.cache_clear()
    try:
        _not_refuted("XD-14")
        observed = observe()
        monkeypatch.setattr(xr, "_observe", lambda: _delivers_what_it_stores(observed, ("tortoise-eval",)))
        _refuted_by_its_tests(_row("XD-14"))
    finally:
        observe.cache_clear()  # the next caller observes the claim's own slice again
