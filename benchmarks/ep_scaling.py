"""EP scaling: time per dream pass and iterations to converge for windows of 100, 1,000 and 10,000 factors.

For each size F a generated graph is bulk-loaded into a fresh on-disk Kuzu store: F operator factors over F live
claims (70 % IMPL / 30 % NAND, 80 % bidirectional, 10 % ternary, inputs drawn from a local neighbourhood of 20 claim
ids so the graph is sparse and loopy), half the claims with a tier baseline, every claim dirty. One dream pass is
`dream(mode="local", budget=F, require_calibration=False)` (all claims are dirty roots, so the selector takes up to
F operators and one `ep.run` + flush + write-back covers them), timed end to end and split into load (graph
snapshot reads, incl. the calibration-gate and scheduler reads, + factor-graph build), EP, and flush + write-back
(+ one ConfidenceChanged event per written claim). The pure engine is also run on the loaded factor graph without censoring
(`warm_start=False`) for the iteration count of plain EP.

    .venv/bin/python -m benchmarks.ep_scaling            # 100, 1,000, 10,000 factors
    .venv/bin/python -m benchmarks.ep_scaling --quick    # 100, 1,000 factors, one repeat

Writes ep_scaling.{json,md,png} to --out (default: the ``bench`` run folder, ./memsim-results/bench).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import default_out_dir, machine_description, md_table, meta_block, write_results
from benchmarks.progress import given_or_own
from tortoise_sim import dream as dr
from tortoise_sim.config import SimConfig
from tortoise_sim.ep import gauss_jacobi_nodes, run_ep
from tortoise_sim.store import StepClock, TortoiseStore

NAME = "ep_scaling"
BUFFER_POOL = 2 << 30  # the store's 128 MiB default fills up on a 10,000-factor pass (feed events fail)
TIERS = [(10.0, 1.0), (5.0, 1.0), (3.0, 1.0), (2.0, 1.0), (1.1, 1.0)]


def generate(n_factors: int, seed: int) -> dict[str, Any]:
    """Claims, operators and operator edges of a random sparse graph (see module doc)."""
    rng = np.random.default_rng(seed)
    n_claims = n_factors
    claims = []
    for i in range(n_claims):
        row: dict[str, Any] = {"id": f"c{i:06d}", "content": f"generated claim {i}", "baseline": False,
                               "a": None, "b": None}
        if rng.random() < 0.5:
            a, b = TIERS[int(rng.integers(len(TIERS)))]
            if rng.random() < 0.3:
                a, b = b, a  # some priors lean false
            row.update(baseline=True, a=a, b=b)
        claims.append(row)
    ops, edges = [], {"IMPL": [], "NAND": []}
    for k in range(n_factors):
        kind = "IMPL" if rng.random() < 0.7 else "NAND"
        direction = "bidirectional" if rng.random() < 0.8 else "unidirectional"
        arity = 3 if rng.random() < 0.1 else 2
        src = int(rng.integers(n_claims))
        others = rng.choice(np.arange(1, 21), size=arity - 1, replace=False)
        inputs = [src] + [int((src + int(o)) % n_claims) for o in others]
        oid = f"op{k:06d}"
        ops.append({"id": oid, "op_type": kind, "direction": direction})
        for idx, c in enumerate(inputs):
            edges[kind].append({"o": oid, "x": f"c{c:06d}", "i": idx})
    return {"claims": claims, "ops": ops, "edges": edges}


def bulk_load(store: TortoiseStore, g: dict[str, Any]) -> None:
    """Write the generated graph with a few UNWIND statements (creating 10,000 operators one by one through
    `create_operator` would time the admission path, not EP). Every claim is flagged dirty."""
    now = store.now()
    with store.transaction():
        store.execute(
            "UNWIND $rows AS r CREATE (:Point {id: r.id, content: r.content, pointKind: 'statement', "
            "is_operator: false, status: 'live', baseline_set: r.baseline, ep_alpha: r.a, ep_beta: r.b, "
            "ep_dirty: true, ep_dirty_at: 1, createdAt: $now, updatedAt: $now})", {"rows": g["claims"], "now": now})
        store.execute(
            "UNWIND $rows AS r CREATE (:Point {id: r.id, is_operator: true, op_type: r.op_type, "
            "direction: r.direction, updatedAt: $now})", {"rows": g["ops"], "now": now})
        for rel, rows in g["edges"].items():
            if rows:
                store.execute(f"UNWIND $rows AS r MATCH (o:Point {{id: r.o}}), (x:Point {{id: r.x}}) "
                              f"CREATE (o)-[:{rel} {{idx: r.i}}]->(x)", {"rows": rows})
        store.execute("MATCH (m:EpMeta {key:'ep'}) SET m.ep_version = 1")


class _Timers:
    """Wraps the dream module's snapshot reads (whole graph and component), factor-graph load, `run_ep`, `flush` and
    `write_back` to split one pass into phases."""

    def __init__(self) -> None:
        self.t = {"load": 0.0, "ep": 0.0, "flush": 0.0}
        self._orig = (dr.snapshot, dr.component_snapshot, dr.load_factor_graph, dr.run_ep, dr.flush, dr.write_back)

    def __enter__(self) -> _Timers:
        snap, csnap, load, ep, flush, wb = self._orig

        def timed(key: str, fn: Any) -> Any:
            def wrapper(*a: Any, **k: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return fn(*a, **k)
                finally:
                    self.t[key] += time.perf_counter() - t0
            return wrapper

        dr.snapshot, dr.load_factor_graph = timed("load", snap), timed("load", load)
        dr.component_snapshot = timed("load", csnap)  # the default scope's read of the dirty roots' components
        dr.run_ep = timed("ep", ep)
        dr.flush, dr.write_back = timed("flush", flush), timed("flush", wb)
        return self

    def __exit__(self, *exc: object) -> None:
        (dr.snapshot, dr.component_snapshot, dr.load_factor_graph, dr.run_ep, dr.flush,
         dr.write_back) = self._orig


def measure(n_factors: int, seed: int, repeat: int, tmp: Path) -> dict[str, Any]:
    passes = []
    plain: dict[str, Any] = {}
    for r in range(repeat):
        path = tmp / f"g{n_factors}_{r}.kuzu"
        store = TortoiseStore(path, config=SimConfig(embedder="none"), clock=StepClock(), seed=seed,
                              buffer_pool_size=BUFFER_POOL)
        g = generate(n_factors, seed)
        t0 = time.perf_counter()
        bulk_load(store, g)
        t_build = time.perf_counter() - t0
        gauss_jacobi_nodes.cache_clear()
        with _Timers() as tm:
            t0 = time.perf_counter()
            res = dr.dream(store, mode="local", budget=n_factors, require_calibration=False)
            wall = time.perf_counter() - t0
        cache = gauss_jacobi_nodes.cache_info()
        passes.append({"wall_s": wall, "build_s": t_build, **{f"{k}_s": v for k, v in tm.t.items()},
                       "iterations": res.iterations, "converged": res.converged_all, "budget_used": res.budget_used,
                       "affected_claims": len(res.affected_claims), "batches": res.batches,
                       "quadrature_cache_hits": cache.hits, "quadrature_cache_misses": cache.misses})
        failures = list(store.event_failures)
        passes[-1]["event_failures"] = len(failures)
        store.close()
        if r == 0:
            fresh = TortoiseStore(tmp / f"p{n_factors}.kuzu", config=SimConfig(embedder="none"), clock=StepClock(),
                                  buffer_pool_size=BUFFER_POOL)
            bulk_load(fresh, g)
            loaded, _, _ = dr.load_factor_graph(fresh, [o["id"] for o in g["ops"]], 2)
            t0 = time.perf_counter()
            pr = run_ep(loaded.fg, warm_start=False)
            plain = {"plain_iterations": pr.iterations, "plain_converged": pr.converged, "plain_final_delta": pr.delta,
                     "plain_ep_s": time.perf_counter() - t0, "factors_in_graph": len(loaded.fg.factors),
                     "variables": len(loaded.fg.claims)}
            fresh.close()
    walls = [p["wall_s"] for p in passes]
    return {"factors": n_factors, "repeat": repeat, "passes": passes, "wall_median_s": float(np.median(walls)),
            "wall_min_s": float(np.min(walls)), **plain}


def plot(rows: list[dict[str, Any]]) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    f = [r["factors"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.loglog(f, [r["wall_median_s"] for r in rows], "o-", label="dream pass (median)")
    for key, style in (("load_s", "s--"), ("ep_s", "^--"), ("flush_s", "v--")):
        ax1.loglog(f, [np.median([p[key] for p in r["passes"]]) for r in rows], style, label=key[:-2])
    ax1.set_xlabel("factors in the window")
    ax1.set_ylabel("seconds")
    ax1.set_title("Time per dream pass")
    ax1.legend()
    ax1.grid(True, which="both", alpha=0.3)
    # equal counts would hide one series under the other: the dream's markers are large and hollow, plain EP's
    # small and filled, so a shared point shows both
    ax2.semilogx(f, [r["passes"][0]["iterations"] for r in rows], "o-", markersize=10, mfc="white", mew=1.5,
                 label="dream (censoring on)")
    ax2.semilogx(f, [r["plain_iterations"] for r in rows], "s--", markersize=5, label="plain EP (no censoring)")
    ax2.axhline(50, color="grey", lw=0.8, ls=":", label="max_iter")
    ax2.set_xlabel("factors in the window")
    ax2.set_ylabel("iterations")
    ax2.set_title("Iterations to converge")
    ax2.legend()
    ax2.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def render_markdown(payload: dict[str, Any]) -> str:
    """``ep_scaling.md`` rendered from a run's ``ep_scaling.json`` (``{"meta": ..., "rows": [...]}``)."""
    meta, rows = payload["meta"], payload["rows"]
    headers = ["factors", "variables", "pass median s", "load s", "EP s", "flush+write-back+events s", "iterations",
               "converged", "plain EP iterations", "plain EP final rel. change", "plain EP s", "operators used",
               "affected claims"]
    table = []
    for r in rows:
        p0 = r["passes"][0]
        table.append([r["factors"], r["variables"], r["wall_median_s"],
                      float(np.median([p["load_s"] for p in r["passes"]])),
                      float(np.median([p["ep_s"] for p in r["passes"]])),
                      float(np.median([p["flush_s"] for p in r["passes"]])), p0["iterations"], p0["converged"],
                      r["plain_iterations"], f"{r['plain_final_delta']:.1e}", r["plain_ep_s"], p0["budget_used"],
                      p0["affected_claims"]])
    md = ("# EP scaling: time per dream pass and iterations to converge\n\n"
          "One `dream(mode=\"local\", budget=F)` pass over a generated graph of F operator factors on F live claims "
          "(70% IMPL / 30% NAND, 10% ternary, local neighbourhoods, half the claims baselined, all dirty), on an "
          "on-disk Kuzu store; warm-start censoring on (the dream default). \"Plain EP\" reruns the engine on the "
          "same factor graph without censoring. Each factor needs two 8-node Gauss-Jacobi rules per iteration "
          "(scipy `roots_jacobi`, cached on exact parameters), which dominates the EP time. `converged False` means the "
          "pass hit `max_iter` = 50: it still flushes beliefs and messages but stamps no freshness (spec 9.4, 9.7); "
          "flush time includes one `ConfidenceChanged` feed event per written claim.\n\n"
          + md_table(headers, table, ".3f") + "\n\n" + meta_block(meta, payload.get("run")) + "\n")
    return md


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, echo: Callable[[str], None] = print,
        track: Any = None) -> list[Path]:
    """Measure every size (quick: 100 and 1,000 factors, one repeat) and write ``ep_scaling.{json,md,png}`` to
    ``out_dir``; returns the written paths."""
    sizes = [100, 1000] if quick else [100, 1000, 10000]
    t_start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="ep_scaling_"))
    rows = []
    try:
        with given_or_own(track) as shown:
            for n in shown(sizes, description="ep_scaling sizes"):
                repeat = 1 if (quick or n >= 10000) else 3
                echo(f"ep_scaling: {n} factors x {repeat} ...")
                rows.append(measure(n, seed, repeat, tmp))
                r = rows[-1]
                echo(f"  pass {r['wall_median_s']:.2f} s, iterations {r['passes'][0]['iterations']} "
                     f"(plain {r['plain_iterations']}), converged {r['passes'][0]['converged']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta = {"machine": machine_description(), "seeds": {"graph": seed}, "quick": quick,
            "wall_s": time.perf_counter() - t_start, "sizes": sizes}
    payload = {"meta": meta, "rows": rows}
    paths = write_results(out_dir, NAME, payload, render_markdown, plot(rows))
    echo(json.dumps({r["factors"]: round(r["wall_median_s"], 3) for r in rows}))
    return paths


def main(argv: list[str] | None = None, track: Any = None) -> list[Path]:
    """The command line (``track``: the caller's progress display; without one the run opens its own)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 and 1,000 factors, one repeat")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    paths = run(args.out or default_out_dir(args.quick), quick=args.quick, seed=args.seed,
                echo=lambda text: print(text, flush=True), track=track)
    for p in paths:
        print(f"wrote {p}")
    return paths


if __name__ == "__main__":
    main()


def store_state(store: Any) -> tuple[Any, Any, Any]:
    """Every Point's belief columns, every Point-to-Point IMPL/NAND edge's messages (in a fixed order) and the
    event feed: what two dream runs must leave equal."""
    pts = store.query("MATCH (n:Point) RETURN n.id AS id, n.confidence AS c, n.posterior_alpha AS pa, "
                      "n.posterior_beta AS pb, n.ep_alpha AS ea, n.ep_beta AS eb, n.lastDreamedAt AS d, "
                      "n.updatedAt AS u, n.ep_dirty AS dirty ORDER BY id")
    edges = store.query("MATCH (a:Point)-[r:IMPL|NAND]->(b:Point) RETURN a.id AS s, label(r) AS rel, b.id AS t, "
                        "r.msg_alpha AS ma, r.msg_beta AS mb, r.back_msg_alpha AS ba, r.back_msg_beta AS bb "
                        "ORDER BY s, rel, t")
    feed = [(e["seq"], e["type"], e["ts"], e["payload"]) for e in store.feed()]
    return pts, edges, feed
