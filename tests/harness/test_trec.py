"""TREC run and qrels files: the format rules, and ir_measures reading them gets memsim's own numbers (nDCG with
trec_eval's discount, recall, hit rate at k) on synthetic rankings."""

from __future__ import annotations

import ir_measures
import numpy as np
import pytest
from ir_measures import RR, P, R, Success, nDCG

from benchmarks.metrics import ndcg_at, precision_at, recall_at, reciprocal_rank
from harness.trec import (
    LEVELS,
    flatten,
    level_qrels,
    level_rankings,
    qrels_text,
    query_id,
    run_text,
    slots,
    write_trec,
)
from harness.workloads.metrics import ranked_metrics

SESSION_OF = {f"D{s}:{t}": s for s in range(1, 13) for t in range(1, 4)}


def _per_query(qrels_path, run_path, measures):
    got: dict[str, dict[str, float]] = {}
    for m in ir_measures.iter_calc(measures, ir_measures.read_trec_qrels(str(qrels_path)),
                                   ir_measures.read_trec_run(str(run_path))):
        got.setdefault(m.query_id, {})[str(m.measure)] = m.value
    return got


def test_run_file_rules():
    text = run_text({"c/1": slots(flatten(["a", ["b", "c"], "?", "a", None, "d"]))}, "bm25@8")
    lines = [ln.split() for ln in text.splitlines()]
    assert [ln[2] for ln in lines] == ["a", "b", "c", "#slot3", "#slot4", "#slot5", "d"]
    assert [int(ln[3]) for ln in lines] == list(range(1, 8))
    scores = [float(ln[4]) for ln in lines]
    assert all(a > b for a, b in zip(scores, scores[1:], strict=False)) and {ln[5] for ln in lines} == {"bm25@8"}
    with pytest.raises(ValueError, match="listed twice"):
        run_text({"q": ["a", "a"]}, "r")
    with pytest.raises(ValueError, match="whitespace"):
        run_text({"q 1": ["a"]}, "r")
    with pytest.raises(ValueError, match="whitespace"):
        query_id("conv 26", 1)
    assert qrels_text({"c/1": {"a": 1, "b": 2}}) == "c/1 0 a 1\nc/1 0 b 2\n"


def _synthetic(seed: int, n: int, repeat_sessions: bool):
    rng = np.random.default_rng(seed)
    turns = list(SESSION_OF)
    queries = []
    for q in range(n):
        ev = [str(t) for t in rng.choice(turns, size=int(rng.integers(1, 4)), replace=False)]
        ranking: list = [str(t) for t in rng.choice(turns + ["?"], size=int(rng.integers(1, 14)))]
        if not repeat_sessions:  # at most one ranked turn per session
            seen, kept = set(), []
            for t in ranking:
                if t == "?" or SESSION_OF[t] not in seen:
                    kept.append(t)
                    seen.add(SESSION_OF.get(t))
            ranking = kept
        elif rng.random() < 0.3:
            ranking.insert(1, [turns[0], turns[4]])  # a unit carrying two turn ids
        queries.append((query_id("conv-1", q), ev, ranking))
    return queries


def _write(tmp_path, queries):
    runs = {"row@8": {lv: {} for lv in LEVELS}}
    qrels = {lv: {} for lv in LEVELS}
    for qid, ev, ranking in queries:
        lr, lq = level_rankings(ranking, SESSION_OF), level_qrels(ev, SESSION_OF)
        for lv in LEVELS:
            runs["row@8"][lv][qid] = lr[lv]
            qrels[lv][qid] = lq[lv]
    paths = write_trec(tmp_path, runs, qrels)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in paths) == [
        "qrels.session.trec", "qrels.turn.trec", "runs/row@8.session.trec", "runs/row@8.turn.trec"]


def _check_against_memsim(tmp_path, queries, levels):
    measures = [m @ k for k in (5, 10) for m in (nDCG, Success, R)]
    for lv in levels:
        got = _per_query(tmp_path / f"qrels.{lv}.trec", tmp_path / "runs" / f"row@8.{lv}.trec", measures)
        assert len(got) == len(queries)
        for qid, ev, ranking in queries:
            mine = ranked_metrics(flatten(ranking), ev, SESSION_OF)[lv]  # type: ignore[arg-type]
            for k in (5, 10):
                g = got[qid]
                assert g[f"nDCG@{k}"] == pytest.approx(mine[f"ndcg_any@{k}"], abs=1e-12), (lv, qid, k)
                assert g[f"Success@{k}"] == mine[f"recall_any@{k}"], (lv, qid, k)
                assert float(g[f"R@{k}"] >= 1 - 1e-12) == mine[f"recall_all@{k}"], (lv, qid, k)


def test_ir_measures_reads_memsims_numbers_at_turn_level(tmp_path):
    queries = _synthetic(0, 150, repeat_sessions=True)
    _write(tmp_path, queries)
    _check_against_memsim(tmp_path, queries, ["turn"])


def test_ir_measures_reads_memsims_numbers_at_session_level(tmp_path):
    queries = _synthetic(1, 150, repeat_sessions=False)
    _write(tmp_path, queries)
    _check_against_memsim(tmp_path, queries, ["turn", "session"])


def test_session_level_with_repeated_sessions_matches_memsim(tmp_path):
    queries = [(query_id("conv-1", 0), ["D1:1"], ["D1:1", "D2:1", "D3:1", "D4:1", "D5:1", "D6:1", "D1:2"])]
    _write(tmp_path, queries)
    _check_against_memsim(tmp_path, queries, ["session"])


def test_ir_measures_reads_the_selector_metrics(tmp_path):
    """benchmarks.metrics (graded relevance, indices) against the same files read by ir_measures."""
    rng = np.random.default_rng(2)
    runs, qrels, mine = {"sel": {"turn": {}}}, {"turn": {}}, {}
    for q in range(60):
        rel = rng.choice([0, 0, 0, 1, 2], size=40)
        if not rel.any():
            rel[0] = 1
        ranking = [int(i) for i in rng.permutation(40)[: int(rng.integers(8, 20))]]
        qid = f"q{q}"
        runs["sel"]["turn"][qid] = [f"c{i}" for i in ranking]
        qrels["turn"][qid] = {f"c{i}": int(r) for i, r in enumerate(rel) if r > 0}
        mine[qid] = {"R@4": recall_at(ranking, rel, 4), "R@8": recall_at(ranking, rel, 8),
                     "P@8": precision_at(ranking, rel, 8), "nDCG@10": ndcg_at(ranking, rel, 10),
                     "RR": reciprocal_rank(ranking, rel)}
    write_trec(tmp_path, runs, qrels)
    got = _per_query(tmp_path / "qrels.turn.trec", tmp_path / "runs" / "sel.turn.trec",
                     [R @ 4, R @ 8, P @ 8, nDCG @ 10, RR])
    for qid, m in mine.items():
        for name, v in m.items():
            assert got[qid][name] == pytest.approx(v, abs=1e-12), (qid, name)


def test_row_names_must_be_plain(tmp_path):
    with pytest.raises(ValueError, match="plain name"):
        write_trec(tmp_path, {"../x": {"turn": {"q": ["a"]}}}, {})
