"""EP engine and dream pass: the fused EP engine and the bulk dream write path against the code they replace.

Two sections, each measured side by side in one run, "before" = the previous default kept as a named option,
"after" = the new default:

1. **run_ep** on the ``benchmarks.ep_scaling`` graph (in-memory snapshot, no censoring): ``engine="batched"``
   vs ``engine="fused"``, alternating, each run starting from an empty quadrature cache. Beliefs, boundary
   beliefs and messages are compared with ``np.array_equal`` on the float arrays, iteration and censoring counts
   with ``==``. One more instrumented fused run splits the time into LAPACK eigenvalues, Jacobi polynomial
   recurrences, Legendre/Gegenbauer rules (alpha == beta, scipy's scalar path), tilted moments and the rest.
2. **Dream pass** (``dream(mode="local", budget=F)``) on a fresh on-disk Kuzu store per run (the
   ``ep_scaling`` graph and bulk load): before = ``ep_engine="batched", store_io="unwind", scope="graph",
   edge_write="update"``, after = the defaults (``"fused"``, ``"bulk"``, ``"component"``, ``"rewrite"``); split
   into load, EP, flush + write-back (with the feed events separately); the two stores' Point EP columns, edge
   messages and feeds are compared.
4. **Two dreams in a row** with a CHECKPOINT between, at the dream size, each run in a child process
   (``benchmarks.dream_abort.compare``): Kuzu 0.11.3 fails the old in-place edge update there; the default
   delete-and-create write completes and leaves the same store as the old write without the checkpoint.
3. **Eigenvalues** (why LAPACK ``dsterf`` runs, and whether its bits come cheaper): the nodes of every
   Gauss-Jacobi rule are the eigenvalues of its 8 x 8 Jacobi matrix (Golub-Welsch, as scipy's ``roots_jacobi``),
   so each distinct cavity (alpha, beta) costs one ``dsterf``. The Jacobi matrices the fused engine solves in one
   ``run_ep`` are recorded, with how many distinct (alpha, beta) bit patterns they come from (what any cache could
   save), and solved twice side by side: one ``dsterf`` call per matrix (the engine's way) and one call per
   ``STACK_BLOCKS`` matrices stacked block-diagonally (``stacked_dsterf``), each block scaled by its own power of
   4 so that its eigenvalues land in their own exponent band of the one sorted output; scaling by a power of 4 is
   exact and every operation of ``dsterf`` commutes with it, so the values are compared bit for bit with the
   per-matrix ones.

    .venv/bin/python -m benchmarks.ep_engine --out DIR            # 2,000-factor run_ep, 10,000-factor dream
    .venv/bin/python -m benchmarks.ep_engine --quick --out DIR    # 300 / 1,000 factors

Writes ep-engine.{json,md} to --out (default: the bench results folder); ``--render`` rewrites the md from the
JSON already there.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import (
    default_out_dir,
    machine_description,
    md_table,
    meta_block,
    write_results,
)
from benchmarks.ep_scaling import store_state as _store_state
from benchmarks.progress import given_or_own

NAME = "ep-engine"
DREAM_BEFORE = {"ep_engine": "batched", "store_io": "unwind", "scope": "graph", "edge_write": "update"}
# what results written before the dream options were recorded measured (the edge write was always in place then)
_DREAM_OPTIONS_UNRECORDED = {"before": {k: v for k, v in DREAM_BEFORE.items() if k != "edge_write"},
                             "after": {"ep_engine": "fused", "store_io": "bulk", "scope": "component",
                                       "edge_write": "update"}}


def dream_defaults() -> dict[str, Any]:
    """The defaults of `dream` for the options the before run names (what the after run uses)."""
    import inspect

    from tortoise_sim import dream as dr

    params = inspect.signature(dr.dream).parameters
    return {k: params[k].default for k in DREAM_BEFORE}
LEVELS = {"run_ep_s": 0.5, "dream_s": 3.0}


def factor_graph(n_factors: int, seed: int) -> Any:
    """The in-memory factor graph of the ``ep_scaling`` graph with every operator as a seed (max_hops 2)."""
    from benchmarks.ep_scaling import generate
    from tortoise_sim.ep import EdgeRow, GraphSnapshot, PointRow

    g = generate(n_factors, seed)
    pts = [PointRow(c["id"], False, None, None, "live", None, "statement", c["baseline"], c["a"], c["b"])
           for c in g["claims"]]
    pts += [PointRow(o["id"], True, o["op_type"], o["direction"], None) for o in g["ops"]]
    edges = [EdgeRow(rel, e["o"], e["x"], e["i"]) for rel, rows in g["edges"].items() for e in rows]
    return GraphSnapshot(pts, edges).load([o["id"] for o in g["ops"]], 2).fg


def result_arrays(res: Any) -> dict[str, np.ndarray]:
    """An EP result as float arrays in a fixed key order (for bitwise comparison)."""
    return {
        "beliefs": np.array([res.beliefs[c] for c in sorted(res.beliefs)], dtype=float).reshape(-1, 2),
        "boundary": np.array([res.boundary_beliefs[c] for c in sorted(res.boundary_beliefs)],
                             dtype=float).reshape(-1, 2),
        "msgs": np.array([res.msgs[k] for k in sorted(res.msgs)], dtype=float).reshape(-1, 2),
    }


def identical(a: Any, b: Any) -> bool:
    """Same keys, same iteration/censoring counts, float arrays equal bit for bit (NaN where NaN)."""
    if (sorted(a.beliefs), sorted(a.boundary_beliefs), sorted(a.msgs)) != (
            sorted(b.beliefs), sorted(b.boundary_beliefs), sorted(b.msgs)):
        return False
    if (a.iterations, a.converged, a.warm_skipped) != (b.iterations, b.converged, b.warm_skipped):
        return False
    xa, xb = result_arrays(a), result_arrays(b)
    return all(np.array_equal(xa[k], xb[k], equal_nan=True) for k in xa)


class _Split:
    """Wraps module attributes with timers for one instrumented run."""

    def __init__(self, targets: dict[str, tuple[Any, str]]) -> None:
        self.targets = targets
        self.t = dict.fromkeys(targets, 0.0)
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> _Split:
        for key, (mod, attr) in self.targets.items():
            fn = getattr(mod, attr)
            self._saved.append((mod, attr, fn))
            setattr(mod, attr, self._wrap(key, fn))
        return self

    def _wrap(self, key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.t[key] += time.perf_counter() - t0
        return timed

    def __exit__(self, *exc: object) -> None:
        for mod, attr, fn in reversed(self._saved):
            setattr(mod, attr, fn)


def ep_section(n_factors: int, seed: int, repeat: int) -> dict[str, Any]:
    from tortoise_sim import ep_fused
    from tortoise_sim.ep import gauss_jacobi_nodes, run_ep

    fg = factor_graph(n_factors, seed)
    threads = ep_fused.EIG_THREADS
    other = 2 if threads == 1 else 1
    variants = {"batched": ("batched", threads), "fused": ("fused", threads), "fused_other": ("fused", other)}
    times: dict[str, list[float]] = {k: [] for k in variants}
    results: dict[str, Any] = {}
    try:
        for _ in range(repeat):
            for name, (engine, n_threads) in variants.items():
                ep_fused.EIG_THREADS = n_threads
                gauss_jacobi_nodes.cache_clear()
                gc.collect()
                t0 = time.perf_counter()
                results[name] = run_ep(fg, engine=engine)
                times[name].append(time.perf_counter() - t0)
    finally:
        ep_fused.EIG_THREADS = threads
    before, after = results["batched"], results["fused"]
    gauss_jacobi_nodes.cache_clear()
    parts = {f"eigenvalues (LAPACK dsterf, {threads} thread(s))": (ep_fused, "eigenvalues"),
             "Jacobi polynomial recurrences": (ep_fused, "jacobi_eval"),
             "Jacobi recurrence factors (per rule)": (ep_fused, "jacobi_coefficients"),
             "alpha == beta rules (scipy roots_jacobi)": (ep_fused, "gauss_jacobi_nodes"),
             "tilted moments": (ep_fused, "tilted_moments_fused")}
    with _Split(parts) as split:
        t0 = time.perf_counter()
        run_ep(fg, engine="fused")
        total = time.perf_counter() - t0
    breakdown = {k: v for k, v in split.t.items()}
    breakdown["rest (cavities, memo, messages, beliefs)"] = total - sum(split.t.values())
    med = {k: float(np.median(v)) for k, v in times.items()}
    return {"factors": len(fg.factors), "variables": len(fg.claims), "repeat": repeat, "eig_threads": threads,
            "batched_s": times["batched"], "fused_s": times["fused"], "other_threads": other,
            "fused_other_threads_s": times["fused_other"], "batched_median_s": med["batched"],
            "fused_median_s": med["fused"], "fused_other_threads_median_s": med["fused_other"],
            "ratio": med["batched"] / med["fused"],
            "iterations": [before.iterations, after.iterations], "converged": [before.converged, after.converged],
            "bit_identical": identical(before, after) and identical(before, results["fused_other"]),
            "instrumented_s": total, "breakdown_s": breakdown}


def _dream_once(n_factors: int, seed: int, tmp: Path, before: bool, tag: str) -> tuple[dict[str, Any], Any]:
    from benchmarks import ep_scaling as es
    from tortoise_sim import dream as dr
    from tortoise_sim.config import SimConfig
    from tortoise_sim.ep import gauss_jacobi_nodes
    from tortoise_sim.store import StepClock, TortoiseStore

    store = TortoiseStore(tmp / f"dream_{tag}.kuzu", config=SimConfig(embedder="none"), clock=StepClock(),
                          seed=seed, buffer_pool_size=es.BUFFER_POOL)
    es.bulk_load(store, es.generate(n_factors, seed))
    gauss_jacobi_nodes.cache_clear()
    gc.collect()
    opts = DREAM_BEFORE if before else {}
    events = _Split({"events": (store, "emit_events")})
    with es._Timers() as tm, events:
        t0 = time.perf_counter()
        res = dr.dream(store, mode="local", budget=n_factors, require_calibration=False, **opts)
        wall = time.perf_counter() - t0
    state = _store_state(store)
    out = {"wall_s": wall, "load_s": tm.t["load"], "ep_s": tm.t["ep"],
           "flush_writeback_s": tm.t["flush"] - events.t["events"], "events_s": events.t["events"],
           "iterations": res.iterations, "converged": res.converged_all, "events": res.events,
           "affected_claims": len(res.affected_claims), "event_failures": len(store.event_failures)}
    store.close()
    return out, state


def dream_section(n_factors: int, seed: int, tmp: Path, repeat: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    states: dict[str, Any] = {}
    for r in range(repeat):
        for which in ("before", "after"):
            out, state = _dream_once(n_factors, seed, tmp, which == "before", f"{which}{r}")
            runs[which].append(out)
            states.setdefault(which, state)
    med = {w: {k: float(np.median([o[k] for o in runs[w]])) for k in
               ("wall_s", "load_s", "ep_s", "flush_writeback_s", "events_s")} for w in runs}
    sb, sa = states["before"], states["after"]
    return {"factors": n_factors, "repeat": repeat, "runs": runs, "median": med,
            "options": {"before": DREAM_BEFORE, "after": dream_defaults()},
            "ratio": med["before"]["wall_s"] / med["after"]["wall_s"],
            "same_points": sb[0] == sa[0], "same_edges": sb[1] == sa[1], "same_feed": sb[2] == sa[2],
            "points": len(sa[0]), "edges": len(sa[1]), "feed_rows": len(sa[2])}


STACK_BLOCKS = 21  # matrices per stacked dsterf call: scale exponents -120 .. 120 in steps of 12
STACK_STEP = 12  # exponent distance of neighbouring blocks' scales (even: square roots stay exact)
STACK_SPAN = 120


def stacked_dsterf(diag: np.ndarray, off: np.ndarray, per_call: int = STACK_BLOCKS) -> np.ndarray:
    """Eigenvalues of M tridiagonal matrices with one LAPACK ``dsterf`` call per ``per_call`` of them, stacked
    block-diagonally (the zero off-diagonal between blocks splits the problem exactly where separate calls would).
    Block i of a call is scaled by 2^(STACK_STEP i - STACK_SPAN): its eigenvalues (|x| in [2^-11, 2) for a block
    whose Gershgorin bound is < 1.99) fall into their own binary-exponent band, so the one ascending output of the
    call splits back into the blocks. A call whose bands do not hold exactly n values each (an eigenvalue below
    2^-11 in magnitude, a zero, a LAPACK failure) and every matrix outside the safe range are solved one by one."""
    from tortoise_sim.ep_batched import _dsterf_pointer, tridiagonal_eigvals

    d0, e0 = np.asarray(diag, dtype=float), np.asarray(off, dtype=float)
    m, n = d0.shape
    fn = _dsterf_pointer()
    if fn is None or n < 2 or m == 0:
        return tridiagonal_eigvals(d0, e0)
    import ctypes

    out = np.empty((m, n))
    ad, ae = np.abs(d0), np.abs(e0)
    g = ad.copy()
    g[:, 1:] += ae
    g[:, :-1] += ae
    with np.errstate(invalid="ignore"):
        tiny = np.minimum(np.where(ad > 0, ad, np.inf).min(axis=1), ae.min(axis=1))
        ok = np.isfinite(g).all(axis=1) & (g.max(axis=1) < 1.99) & (tiny >= 2.0 ** -300)
    good, bad = np.flatnonzero(ok), np.flatnonzero(~ok)
    gn = good.size
    if gn:
        sh = STACK_STEP * (np.arange(gn) % per_call) - STACK_SPAN
        big_d = np.ldexp(d0[good], sh[:, None]).reshape(-1)
        big_e = np.zeros((gn, n))
        big_e[:, : n - 1] = np.ldexp(e0[good], sh[:, None])
        big_e = big_e.reshape(-1)
        info = ctypes.c_int(0)
        pinfo = ctypes.byref(info)
        nn = ctypes.c_int(per_call * n)
        pn = ctypes.byref(nn)
        step = 8 * n * per_call
        n_calls = (gn + per_call - 1) // per_call
        failed = np.zeros(n_calls, dtype=bool)
        for c in range(n_calls):
            nn.value = min(per_call, gn - c * per_call) * n
            fn(pn, big_d.ctypes.data + c * step, big_e.ctypes.data + c * step, pinfo)
            failed[c] = info.value != 0
            info.value = 0
        _, ex = np.frexp(big_d)
        call = np.arange(gn * n) // (n * per_call)
        band = (ex + (STACK_SPAN + STACK_STEP - 2)) // STACK_STEP
        wrong = (big_d == 0) | (band < 0) | (band >= np.minimum(per_call, gn - call * per_call))
        label = call * per_call + np.where(wrong, 0, band)
        failed[np.unique(call[wrong])] = True
        failed[np.unique(np.flatnonzero(np.bincount(label, minlength=gn) != n) // per_call)] = True
        vals = big_d[np.argsort(label, kind="stable")].reshape(gn, n)
        out[good] = np.ldexp(vals, -sh[:, None])
        redo = good[failed[np.arange(gn) // per_call]]
        if redo.size:
            out[redo] = tridiagonal_eigvals(d0[redo], e0[redo])
    if bad.size:
        out[bad] = tridiagonal_eigvals(d0[bad], e0[bad])
    return out


def eig_section(n_factors: int, seed: int, repeat: int) -> dict[str, Any]:
    from tortoise_sim import ep_fused
    from tortoise_sim.ep import gauss_jacobi_nodes, run_ep
    from tortoise_sim.ep_batched import tridiagonal_eigvals

    fg = factor_graph(n_factors, seed)
    batches: list[tuple[np.ndarray, np.ndarray]] = []
    keys: list[np.ndarray] = []
    real_eig, real_rules = ep_fused.eigenvalues, ep_fused._rules_general

    def record_eig(diag: np.ndarray, off: np.ndarray, threads: int | None = None) -> np.ndarray:
        batches.append((diag.copy(), off.copy()))
        return real_eig(diag, off, threads)

    def record_rules(alpha: np.ndarray, beta: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        keys.append(np.stack([alpha.view(np.uint64), beta.view(np.uint64)], axis=1).copy())
        return real_rules(alpha, beta, n)

    gauss_jacobi_nodes.cache_clear()
    ep_fused.eigenvalues, ep_fused._rules_general = record_eig, record_rules
    try:
        res = run_ep(fg, engine="fused")
    finally:
        ep_fused.eigenvalues, ep_fused._rules_general = real_eig, real_rules
    matrices = sum(d.shape[0] for d, _ in batches)
    distinct = int(np.unique(np.concatenate(keys), axis=0).shape[0]) if keys else 0
    times: dict[str, list[float]] = {"per_matrix": [], "stacked": []}
    same = True
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        one = [tridiagonal_eigvals(d, e) for d, e in batches]
        times["per_matrix"].append(time.perf_counter() - t0)
        gc.collect()
        t0 = time.perf_counter()
        two = [stacked_dsterf(d, e) for d, e in batches]
        times["stacked"].append(time.perf_counter() - t0)
        same = same and all(np.array_equal(a, b) for a, b in zip(one, two, strict=True))
    med = {k: float(np.median(v)) for k, v in times.items()}
    return {"factors": len(fg.factors), "iterations": res.iterations, "calls": len(batches), "matrices": matrices,
            "distinct_alpha_beta": distinct, "repeat": repeat, "blocks_per_call": STACK_BLOCKS,
            "per_matrix_s": times["per_matrix"], "stacked_s": times["stacked"],
            "per_matrix_median_s": med["per_matrix"], "stacked_median_s": med["stacked"],
            "us_per_matrix": 1e6 * med["per_matrix"] / max(matrices, 1),
            "ratio": med["per_matrix"] / med["stacked"], "bit_identical": bool(same)}


def second_dream_section(n_factors: int, seed: int, tmp: Path) -> dict[str, Any]:
    """``benchmarks.dream_abort.compare`` at this size: two dreams in a row with a CHECKPOINT between, each run
    in a child process (old edge write, default, old then default, and the old one without the checkpoint)."""
    from benchmarks import dream_abort

    return dream_abort.compare(n_factors, seed, tmp / "second_dream")


def _dreams_s(run: dict[str, Any]) -> float | None:
    res = run.get("result")
    return sum(d["wall_s"] for d in res["dreams"]) if res else None


def levels(res: dict[str, Any]) -> list[dict[str, Any]]:
    ep, dm = res["ep"], res["dream"]
    after = dm["median"]["after"]
    out = [
        {"level": f"run_ep on the {ep['factors']:,}-factor ep_scaling graph <= {LEVELS['run_ep_s']} s, bit-identical",
         "measured_s": ep["fused_median_s"], "before_s": ep["batched_median_s"], "bit_identical": ep["bit_identical"],
         "met": ep["fused_median_s"] <= LEVELS["run_ep_s"] and ep["bit_identical"]},
        {"level": f"dream pass at {dm['factors']:,} factors <= {LEVELS['dream_s']} s, same store",
         "measured_s": after["wall_s"], "before_s": dm["median"]["before"]["wall_s"],
         "bit_identical": dm["same_points"] and dm["same_edges"] and dm["same_feed"],
         "met": after["wall_s"] <= LEVELS["dream_s"] and dm["same_points"] and dm["same_edges"] and dm["same_feed"]},
    ]
    sd = res.get("second_dream")
    if sd:
        runs = sd["runs"]
        same = sd["same_as_reference"]["default"]
        out.append({"level": f"two dreams in a row at {sd['factors']:,} factors with a CHECKPOINT between complete "
                             "(default edge write), same store as the old write without the checkpoint",
                    "measured_s": _dreams_s(runs["default"]),
                    "before_s": _dreams_s(runs["old"]) if "old" in runs else None,
                    "bit_identical": same, "met": runs["default"]["completed"] and same})
    return out


def render(payload: dict[str, Any]) -> str:
    """The Markdown page, from the results JSON only."""
    ep, dm, meta = dict(payload["ep"]), payload["dream"], payload["meta"]
    if "fused_other_threads_median_s" not in ep:  # results written when the option row was the 1-thread run
        ep["other_threads"], ep["fused_other_threads_median_s"] = 1, ep["fused_1thread_median_s"]
    head = ["measurement", "size", "before s", "after s", "speed-up", "identical"]
    rows = [
        [f"run_ep (`batched` -> `fused`, {ep['eig_threads']} eigenvalue thread(s)), median of {ep['repeat']}",
         f"{ep['factors']:,} factors", ep["batched_median_s"], ep["fused_median_s"], f"{ep['ratio']:.2f}x",
         f"{ep['bit_identical']} (iterations {ep['iterations'][0]} / {ep['iterations'][1]})"],
        [f"run_ep (`batched` -> `fused`, {ep['other_threads']} eigenvalue thread(s), the `EIG_THREADS` option), "
         f"median of {ep['repeat']}", f"{ep['factors']:,} factors", ep["batched_median_s"],
         ep["fused_other_threads_median_s"], f"{ep['batched_median_s'] / ep['fused_other_threads_median_s']:.2f}x",
         f"{ep['bit_identical']}"],
        [f"dream pass (`batched`+`unwind` -> `fused`+`bulk`), median of {dm['repeat']}", f"{dm['factors']:,} factors",
         dm["median"]["before"]["wall_s"], dm["median"]["after"]["wall_s"], f"{dm['ratio']:.2f}x",
         f"points {dm['same_points']}, edges {dm['same_edges']}, feed {dm['same_feed']}"],
    ]
    phases = [[k, dm["median"]["before"][k + "_s"], dm["median"]["after"][k + "_s"]]
              for k in ("load", "ep", "flush_writeback", "events", "wall")]
    parts = [[k, v, v / ep["instrumented_s"]] for k, v in ep["breakdown_s"].items()]
    lv = [[x["level"], x["before_s"], x["measured_s"], x["bit_identical"], "met" if x["met"] else "missed"]
          for x in payload["levels"]]
    eig = payload.get("eig")
    eig_md = ""
    if eig:
        eig_md = ("## Eigenvalues: why `dsterf` runs, and what stacking the calls buys\n\n"
                  f"One fused `run_ep` on the {eig['factors']:,}-factor graph ({eig['iterations']} iterations) "
                  f"solves {eig['matrices']:,} Jacobi matrices (8 x 8) in {eig['calls']} batches; they come from "
                  f"{eig['distinct_alpha_beta']:,} distinct cavity (alpha, beta) bit patterns, so a cache across "
                  "iterations or slots could skip at most the difference. Each matrix's eigenvalues are the rule's "
                  "nodes before scipy's Newton step, whose result and the weights depend on every bit of them. The "
                  f"same matrices solved side by side (median of {eig['repeat']}):\n\n"
                  + md_table(["eigenvalue path", "s", "us per matrix", "identical to per-matrix"],
                             [["one `dsterf` call per matrix (the engine)", eig["per_matrix_median_s"],
                               eig["us_per_matrix"], True],
                              [f"one `dsterf` call per {eig['blocks_per_call']} matrices stacked (power-of-4 scaled "
                               "blocks)", eig["stacked_median_s"],
                               1e6 * eig["stacked_median_s"] / max(eig["matrices"], 1), eig["bit_identical"]]])
                  + f"\n\nStacked / per-matrix speed-up: {eig['ratio']:.2f}x.\n\n")
    sd_md = _second_dream_md(payload["second_dream"]) if payload.get("second_dream") else ""
    opts = dm.get("options") or _DREAM_OPTIONS_UNRECORDED
    return ("# EP engine and dream pass: before and after, side by side\n\n"
            "Before = the previous default kept as a named option (`run_ep(engine=\"batched\")`; "
            f"`dream({_kw(opts['before'])})`), after = the new default (`run_ep(engine=\"fused\")`; "
            f"`dream({_kw(opts['after'])})` in this run). Identical means "
            "bit for bit: EP beliefs, boundary beliefs and messages compared with `np.array_equal`, iteration "
            "counts equal; for the dream pass every Point's EP columns and timestamps, every edge message and every "
            "feed row equal.\n\n"
            + md_table(head, rows) + "\n\n## Levels\n\n"
            + md_table(["level", "before s", "after s", "identical", "verdict"], lv) + "\n\n"
            "## Where the fused engine's time goes (one instrumented run)\n\n"
            + md_table(["part", "s", "share"], parts) + "\n\n"
            "## Dream pass phases (median s)\n\n"
            + md_table(["phase", "before", "after"], phases) + "\n\n" + sd_md + eig_md + meta_block(meta, payload.get("run")) + "\n")


def _kw(opts: dict[str, str]) -> str:
    return ", ".join(f'{k}="{v}"' for k, v in opts.items())


def _outcome(run: dict[str, Any]) -> str:
    if run["completed"]:
        return "completed"
    how = "timed out" if run.get("timed_out") else (f"killed by {run['signal']}" if run.get("signal")
                                                    else f"exit status {run['returncode']}")
    return f"failed ({how}{', Kuzu KU_UNREACHABLE' if run['ku_unreachable'] else ''})"


def _second_dream_md(sd: dict[str, Any]) -> str:
    """The second-dream section, from ``benchmarks.dream_abort.compare``'s result."""
    names = {"old": "old edge write (in-place SET) both times", "default": "default edge write (delete + create) "
             "both times", "old_then_default": "old write, then the default one", "reference": "old edge write, "
             "no checkpoint (reference)"}
    rows = []
    for key, run in sd["runs"].items():
        res = run.get("result") or {}
        walls = [d["wall_s"] for d in res.get("dreams", [])] + [None, None]
        kept = res.get("edges_kept_between")
        rows.append([names.get(key, key), " + ".join(run["edge_writes"]), run["between"], _outcome(run),
                     walls[0], walls[1], "n/a" if kept is None else kept,
                     "reference" if key == "reference" else sd["same_as_reference"].get(key)])
    failed = [k for k, r in sd["runs"].items() if not r["completed"]]
    tails = "".join(f"\n\nLast stderr line of `{k}`: `{sd['runs'][k]['stderr_tail'].splitlines()[-1]}`"
                    for k in failed if sd["runs"][k]["stderr_tail"])
    when = ""
    if sd.get("meta"):
        m = sd["meta"]["machine"]
        when = (f"Measured in a run of its own ({m['date_utc']}, {sd['meta']['wall_s']:.0f} s, Kuzu "
                f"{m['versions'].get('kuzu')}), after the sections above. ")
    return (f"## Two dreams in a row, a CHECKPOINT between ({sd['factors']:,} factors)\n\n" + when +
            "Each run in its own child process (`benchmarks.dream_abort`): the store is opened, dreamed, every claim "
            f"marked dirty again, then `{sd['between']}` (Kuzu writes the store's pages and empties its WAL; closing "
            "a store does the same), and dreamed again; the reference run has no checkpoint at all (Kuzu's automatic "
            "one, at 16 MiB of WAL, turned off). \"Edges unchanged\" compares every edge a snapshot reads "
            "(values and order) before and after that step; \"same store\" compares every Point's EP columns, "
            "every edge message, every feed row and the edge order after both dreams with the reference run.\n\n"
            + md_table(["run", "edge writes", "between", "outcome", "dream 1 s", "dream 2 s", "edges unchanged",
                        "same store"], rows) + tails + "\n\n")


def _second_dream_only(args: argparse.Namespace) -> list[Path]:
    """``--second-dream-only``: the second-dream section at the results' dream size, merged into their JSON (the
    levels recomputed; the section carries its own ``meta``, which the page names)."""
    out_dir = args.out or default_out_dir(args.quick)
    src = out_dir / f"{NAME}.json"
    if not src.is_file():
        raise SystemExit(f"error: {src}: no such results file (run the benchmark first)")
    payload = json.loads(src.read_text(encoding="utf-8"))
    n = payload["dream"]["factors"]
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="ep_engine_"))
    try:
        seed = int(payload["meta"]["seeds"]["graph"])
        sd = second_dream_section(n, seed, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sd["meta"] = {"machine": machine_description(), "seeds": {"graph": seed},
                  "wall_s": time.perf_counter() - t0}
    payload["second_dream"] = sd
    payload["levels"] = levels(payload)
    payload = json.loads(json.dumps(payload))
    paths = write_results(out_dir, NAME, payload, render(payload), None)
    for p in paths:
        print(f"wrote {p}")
    return paths


def main(argv: list[str] | None = None, track: Any = None) -> list[Path]:
    """The command line (``track``: the caller's progress display; without one the run opens its own)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="300-factor run_ep, 1,000-factor dream, one repeat")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=None, help="run_ep repeats (default 3; quick 1)")
    ap.add_argument("--dream-repeat", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--render", action="store_true", help="rewrite ep-engine.md from the ep-engine.json in --out "
                                                          "(nothing is measured)")
    ap.add_argument("--second-dream-only", action="store_true",
                    help="measure only the second-dream section (a correctness check, no timed level) and add it to "
                         "the ep-engine.json in --out, with its own machine and date; the other sections stay")
    args = ap.parse_args(argv)
    if args.second_dream_only:
        return _second_dream_only(args)
    if args.render:
        out_dir = args.out or default_out_dir(args.quick)
        src = out_dir / f"{NAME}.json"
        if not src.is_file():
            raise SystemExit(f"error: {src}: no such results file (run the benchmark first)")
        md = out_dir / f"{NAME}.md"
        md.write_text(render(json.loads(src.read_text(encoding="utf-8"))).rstrip() + "\n", encoding="utf-8")
        print(f"wrote {md}")
        return [md]
    paths = run(args.out or default_out_dir(args.quick), quick=args.quick, seed=args.seed, repeat=args.repeat,
                dream_repeat=args.dream_repeat, track=track)
    for p in paths:
        print(f"wrote {p}")
    return paths


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, repeat: int | None = None, dream_repeat: int = 1,
        track: Callable[..., Any] | None = None) -> list[Path]:
    """Measure every section (quick: a 300-factor run_ep and a 1,000-factor dream, one repeat) and write
    ``ep-engine.{json,md}`` to ``out_dir``; returns the written paths."""
    sizes = {"ep": 300, "dream": 1000} if quick else {"ep": 2000, "dream": 10000}
    repeat = repeat or (1 if quick else 3)
    t_start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="ep_engine_"))
    res: dict[str, Any] = {}
    try:
        with given_or_own(track) as shown:
            for step in shown(["ep", "eig", "dream", "second_dream"], description="ep-engine"):
                if step == "ep":
                    res["ep"] = ep_section(sizes["ep"], seed, repeat)
                elif step == "eig":
                    res["eig"] = eig_section(sizes["ep"], seed, repeat)
                elif step == "dream":
                    res["dream"] = dream_section(sizes["dream"], seed, tmp, dream_repeat)
                else:
                    res["second_dream"] = second_dream_section(sizes["dream"], seed, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["levels"] = levels(res)
    res["meta"] = {"machine": machine_description(), "seeds": {"graph": seed}, "quick": quick,
                   "sizes": sizes, "wall_s": time.perf_counter() - t_start}
    payload = json.loads(json.dumps(res))
    return write_results(out_dir, NAME, payload, render, None)


if __name__ == "__main__":
    main()
