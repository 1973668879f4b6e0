"""Dream scope: a local pass over the dirty roots' components (`scope="component"`, default) leaves the same Points,
edge messages, confidences and feed as the previous whole-graph pass (`scope="graph"`), on random stores with
captures, operators added across components, retractions and direct edges."""

from __future__ import annotations

import functools
import random
from typing import Any

import pytest

from benchmarks.ep_engine import _store_state
from tortoise_sim import admission as adm
from tortoise_sim import dream as dr
from tortoise_sim.capture import capture_session
from tortoise_sim.config import FaultHooks, SimConfig
from tortoise_sim.extraction import MarkerExtractor
from tortoise_sim.lifecycle import retract_point
from tortoise_sim.store import StepClock, TortoiseStore

CLUSTERS = 4


def _random_store(seed: int) -> tuple[TortoiseStore, list[list[str]]]:
    """Claims in separate clusters (operators and direct edges only inside a cluster), some drafts, baselines and
    unidirectional operators; one full dream so that edges carry messages."""
    rng = random.Random(seed)
    s = TortoiseStore(config=SimConfig(embedder="none"), clock=StepClock(), faults=FaultHooks(), seed=seed)
    clusters: list[list[str]] = []
    for k in range(CLUSTERS):
        ids = [adm.create_point(s, rng.choice(["statement", "observation", "decision"]), f"claim {k}.{i}",
                                status="draft" if rng.random() < 0.1 else "live")["id"]
               for i in range(rng.randint(2, 7))]
        for i in ids:
            if rng.random() < 0.4:
                adm.set_point_baseline(s, i, rng.choice([10.0, 5.0, 2.0, 1.0]), rng.choice([1.0, 3.0]))
        for _ in range(rng.randint(0, len(ids))):
            src, *rest = rng.sample(ids, min(len(ids), rng.choice([2, 2, 3])))
            if rest:
                adm.create_operator(s, rng.choice(["IMPL", "NAND"]), src, rest,
                                    direction=rng.choice(["bidirectional", "bidirectional", "unidirectional"]))
        if len(ids) >= 2 and rng.random() < 0.5:
            a, b = rng.sample(ids, 2)
            s.execute(f"MATCH (a:Point {{id: $a}}), (b:Point {{id: $b}}) CREATE (a)-[:{rng.choice(['IMPL', 'NAND'])} "
                      "{direction: $d, weight: 2.0}]->(b)",
                      {"a": a, "b": b, "d": rng.choice(["bidirectional", "unidirectional"])})
        clusters.append(ids)
    dr.dream(s, mode="full", require_calibration=False, stamp_dreamed_at=rng.random() < 0.5)
    return s, clusters


def _session(seed: int, scope: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[dict[str, Any]], int]:
    """Captures (each runs the ingest dream), an operator tying a captured claim to an old one, a retraction, and
    local and automatic dreams, all under `scope`. Returns the store state, the dream results and how many
    component snapshots were taken."""
    rng = random.Random(seed + 1)
    s, clusters = _random_store(seed)
    s.ingest_dream_hook = functools.partial(dr.ingest_dream, scope=scope)
    comp_calls = [0]
    component = dr.component_snapshot

    def counted(*a: Any, **k: Any) -> Any:
        comp_calls[0] += 1
        return component(*a, **k)

    monkeypatch.setattr(dr, "component_snapshot", counted)
    results = []
    for c in range(3):
        convo = [{"role": "user", "content": f"statement: capture {c} says yes\nobservation: capture {c} saw it\n"
                                             f"{rng.choice(['nand', 'impl'])}: 1 -> 2"}]
        resp = capture_session(s, convo, f"s{c}", extractor=MarkerExtractor())
        results.append(resp["ingest_dream"])
        new = [p["id"] for p in resp["points"]]
        old = rng.choice([ids for ids in clusters if ids])
        adm.create_operator(s, rng.choice(["IMPL", "NAND"]), rng.choice(new), [rng.choice(old)])
        results.append(dr.dream(s, mode="local", require_calibration=False, scope=scope).as_dict())
    victim = rng.choice(clusters[0])
    retract_point(s, victim)
    s.mark_dirty([victim, rng.choice(clusters[1])])
    results.append(dr.dream(s, require_calibration=False, scope=scope).as_dict())
    s.mark_dirty([rng.choice(clusters[2])])
    results.append(dr.dream(s, mode="local", require_calibration=False, budget=1, scope=scope).as_dict())
    return _store_state(s), results, comp_calls[0]



@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_component_scope_leaves_the_same_store_as_the_graph_scope(seed: int, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    graph_state, graph_results, graph_calls = _session(seed, "graph", monkeypatch)
    comp_state, comp_results, comp_calls = _session(seed, "component", monkeypatch)
    assert graph_calls == 0 and comp_calls >= 7  # every local pass of the component run read only its component
    pts, edges, feed = comp_state
    assert any(e["ma"] is not None for e in edges) and any(f[1] == "ConfidenceChanged" for f in feed)
    assert comp_results == graph_results
    assert comp_state == graph_state


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_component_snapshot_is_the_closed_part_of_the_whole_snapshot(seed: int) -> None:
    """The component snapshot holds the anchors' Points and every edge leaving them, in the whole snapshot's
    order, and no edge of it leads outside; operator selection and the loaded factor graph are the same."""
    s, clusters = _random_store(seed)
    rng = random.Random(seed)
    anchors = sorted({rng.choice(ids) for ids in rng.sample(clusters, 2)} | {"no-such-point"})
    full = dr.snapshot(s)
    for store_io in dr.STORE_IO:
        comp = dr.component_snapshot(s, anchors, store_io=store_io)
        assert set(comp.points) < set(full.points)
        assert comp.edges == [e for e in full.edges if e.src in comp.points]
        assert all(e.tgt in comp.points for e in full.edges if e.src in comp.points)
        assert all(e.src in comp.points for e in full.edges if e.tgt in comp.points)
        assert {p: comp.points[p] for p in comp.points} == {p: full.points[p] for p in comp.points}
        sel_c, sel_f = comp.select_operators(anchors), full.select_operators(anchors)
        assert sel_c == sel_f
        seeds = sel_f[0] + sorted({x for e in sel_f[1] for x in (e.src, e.tgt)})
        lc, lf = comp.load(seeds), full.load(seeds)
        assert lc.affected == lf.affected and lc.fg == lf.fg and lc.edge_msgs == lf.edge_msgs


def test_unknown_scope_is_rejected() -> None:
    s = TortoiseStore(config=SimConfig(embedder="none"), clock=StepClock(), faults=FaultHooks())
    with pytest.raises(ValueError, match="scope"):
        dr.dream(s, mode="local", scope="world")
