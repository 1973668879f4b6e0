"""Engines: each engine speed-up measured side by side with the code it replaces, in one run.

Four sections, each "before" = the previous implementation kept as a named option, "after" = the new default:

1. **EP engine**: pure ``run_ep`` (no censoring) on the ``ep_scaling`` graph of 2,000 factors (built in memory
   with the same generator and snapshot rules), ``engine="reference"`` vs ``engine="batched"``; beliefs and
   messages compared bit for bit, iteration counts compared. The current default ``engine="fused"`` is timed on
   the same graph and compared bit for bit with the batched engine (``benchmarks.ep_engine`` measures it in
   full).
2. **Dream pass** at 10,000 factors on an on-disk Kuzu store (``benchmarks.ep_scaling`` graph and bulk load):
   before = reference engine + one ``ConfidenceChanged`` feed transaction per claim, after = the current defaults
   (fused engine, bulk store I/O) + ``TortoiseStore.emit_events``; split into load / EP / flush + write-back + events; the two stores' Point EP
   columns and feeds are compared.
3. **Incremental caches** at 1e5 points (bulk-loaded plain claims, a deterministic stand-in encoder so building
   the store does not time MiniLM): the first volunteer call after a capture with ``search_cache_mode="rebuild"``
   vs ``"incremental"`` (the same store, alternating), hits compared with the Kuzu scan; cache memory (numeric
   arrays; the float32 matrix dominates) against what the previous cache held (raw + unit float32 and a float64
   filtered copy). This is the in-process cache refresh only (``volunteer_context`` in the process that
   captured): the path a user runs, a hook process through the resident service, is timed by
   ``benchmarks.serve``, whose figure the rendered levels show as the one "first volunteer after a capture".
4. **NP**: NP cached vs NP faithful at the shipped bank's 1,278 cases (before = batch-path query encode, after =
   ``embed_one``), identical top-8 checked; and the index side at 1e6 random unit keys: torch top-k vs the FAISS
   backend vs raw FAISS ``IndexFlatIP``, identical top-k checked.

    .venv/bin/python -m benchmarks.engines            # full sizes (several minutes)
    .venv/bin/python -m benchmarks.engines --quick    # small sizes

Writes engines.{json,md,png} to --out (default: the ``bench`` run folder, ./memsim-results/bench).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import shutil
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import default_out_dir, machine_description, md_table, meta_block, write_results
from benchmarks.cost import NP_CACHED_LEVEL_X, np_shipped_ratio, np_synthetic_ratio
from benchmarks.progress import as_tracker

NAME = "engines"


def _rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


# ---------------------------------------------------------------------------------------------------------------
# 1. EP engine


def ep_section(n_factors: int, seed: int) -> dict[str, Any]:
    from benchmarks.ep_scaling import generate
    from tortoise_sim.ep import EdgeRow, GraphSnapshot, PointRow, run_ep

    g = generate(n_factors, seed)
    pts = [PointRow(c["id"], False, None, None, "live", None, "statement", c["baseline"], c["a"], c["b"])
           for c in g["claims"]]
    pts += [PointRow(o["id"], True, o["op_type"], o["direction"], None) for o in g["ops"]]
    edges = [EdgeRow(rel, e["o"], e["x"], e["i"]) for rel, rows in g["edges"].items() for e in rows]
    fg = GraphSnapshot(pts, edges).load([o["id"] for o in g["ops"]], 2).fg
    t0 = time.perf_counter()
    ref = run_ep(fg, engine="reference")
    t_ref = time.perf_counter() - t0
    t0 = time.perf_counter()
    bat = run_ep(fg, engine="batched")
    t_bat = time.perf_counter() - t0
    t0 = time.perf_counter()
    fus = run_ep(fg, engine="fused")
    t_fus = time.perf_counter() - t0
    same = ref.beliefs == bat.beliefs and ref.msgs == bat.msgs and ref.iterations == bat.iterations
    same_fused = bat.beliefs == fus.beliefs and bat.msgs == fus.msgs and bat.iterations == fus.iterations
    diff = max((abs(a - b) for c in ref.beliefs for a, b in zip(ref.beliefs[c], bat.beliefs[c], strict=True)),
               default=0.0)
    return {"factors": len(fg.factors), "variables": len(fg.claims), "reference_s": t_ref, "batched_s": t_bat,
            "ratio": t_ref / t_bat, "iterations": [ref.iterations, bat.iterations],
            "bit_identical": same, "max_belief_diff": diff, "fused_s": t_fus, "fused_bit_identical": same_fused}


# ---------------------------------------------------------------------------------------------------------------
# 2. Dream pass


def _dream_once(n_factors: int, seed: int, tmp: Path, before: bool) -> tuple[dict[str, Any], Any, Any]:
    from benchmarks import ep_scaling as es
    from tortoise_sim import dream as dr
    from tortoise_sim.config import SimConfig
    from tortoise_sim.ep import run_ep
    from tortoise_sim.store import StepClock, TortoiseStore

    store = TortoiseStore(tmp / f"dream_{'before' if before else 'after'}.kuzu", config=SimConfig(embedder="none"),
                          clock=StepClock(), seed=seed, buffer_pool_size=es.BUFFER_POOL)
    es.bulk_load(store, es.generate(n_factors, seed))
    saved = dr.run_ep
    if before:
        dr.run_ep = functools.partial(run_ep, engine="reference")

        def one_by_one(type_: str, payloads: list[dict[str, Any]]) -> None:
            for p in payloads:
                store.emit_event(type_, p)

        store.emit_events = one_by_one  # type: ignore[method-assign]
    try:
        with es._Timers() as tm:
            t0 = time.perf_counter()
            res = dr.dream(store, mode="local", budget=n_factors, require_calibration=False)
            wall = time.perf_counter() - t0
    finally:
        dr.run_ep = saved
    cols = store.query("MATCH (n:Point) WHERE n.is_operator = false RETURN n.id AS id, n.confidence AS c, "
                       "n.posterior_alpha AS a, n.posterior_beta AS b ORDER BY id")
    feed = [(e["seq"], e["type"], e["payload"].get("id"), e["payload"].get("confidence")) for e in store.feed()]
    out = {"wall_s": wall, **{f"{k}_s": v for k, v in tm.t.items()}, "iterations": res.iterations,
           "converged": res.converged_all, "events": res.events, "event_failures": len(store.event_failures)}
    store.close()
    return out, cols, feed


def dream_section(n_factors: int, seed: int, tmp: Path) -> dict[str, Any]:
    before, cols_b, feed_b = _dream_once(n_factors, seed, tmp, True)
    gc.collect()
    after, cols_a, feed_a = _dream_once(n_factors, seed, tmp, False)
    return {"factors": n_factors, "before": before, "after": after, "ratio": before["wall_s"] / after["wall_s"],
            "same_points": cols_b == cols_a, "same_feed": feed_b == feed_a}


# ---------------------------------------------------------------------------------------------------------------
# 3. Incremental caches


class _StandInEncoder:
    """Deterministic 384-d unit vectors from word seeds (shared words pull texts together): builds a 1e5-point
    store in seconds. Query encodes cost the same in both modes, so the comparison is the caches'."""

    dim = 384

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.split()[:12]:
                out[i] += np.random.default_rng(zlib.crc32(w.encode())).standard_normal(self.dim)
            out[i] += 0.5 * np.random.default_rng(zlib.crc32(t.encode())).standard_normal(self.dim)
            out[i] /= np.linalg.norm(out[i]) or 1.0
        return out


WORDS = ("kuzu store release deploy canary rollback latency budget schema migration index vector cache token "
         "graph claim status quorum replica shard pipeline service hook encoder socket lock writer").split()


def cache_section(n_points: int, seed: int, tmp: Path, repeats: int) -> dict[str, Any]:
    from tortoise_sim import SimConfig, StepClock, Tortoise
    from tortoise_sim import search as search_mod
    from tortoise_sim.admission import bulk_create_points

    rng = np.random.default_rng(seed)
    sim = Tortoise(tmp / "cache.kuzu", config=SimConfig(embedder="none"), encoder=_StandInEncoder(),
                   clock=StepClock(), seed=seed)
    store = sim.store
    t0 = time.perf_counter()
    rows = [{"kind": "statement", "status": "live",
             "content": " ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) + f" n{i}"}
            for i in range(n_points)]
    bulk_create_points(store, rows, embed_batch=512)
    # a settled store: the seeding loader leaves every point a dirty EP root, and the first capture's bounded
    # ingest dream would then touch (settle) all of them
    store.execute("MATCH (n:Point) SET n.ep_dirty = false")
    store.dirty_roots.clear()
    t_build = time.perf_counter() - t0
    window = [{"role": "user", "content": "What did we decide about the kuzu store lock and the hook writer?"}]
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    sim.volunteer_context(window)
    t_cold = time.perf_counter() - t0
    rss1 = _rss_mb()
    cache = store._search_cache
    nbytes = cache.nbytes
    dim = cache.raw.shape[1]
    n = cache.n
    old_equiv = 2 * n * dim * 4 + n * dim * 8 + 8 * n  # raw + unit float32, one float64 filtered copy, norms
    timings: dict[str, list[float]] = {"rebuild": [], "incremental": []}
    agree = 0
    checks = 0
    for r in range(repeats):
        for mode in ("rebuild", "incremental"):
            store.search_cache_mode = mode
            turns = [{"role": "user", "content": f"decision: pin the kuzu store lock writer {mode} {r}"},
                     {"role": "assistant", "content": f"noted the hook writer socket change {r}"}]
            sim.capture_session(turns, f"bench-{mode}-{r}")
            t0 = time.perf_counter()
            sim.volunteer_context(window)
            timings[mode].append(time.perf_counter() - t0)
    store.search_cache_mode = "incremental"
    cache = store._search_cache
    for q in ("kuzu store lock", "hook writer socket", "canary rollback budget"):
        a = sim.search_points(q, 10)
        b = search_mod.search_points(store, q, 10, cached=False)
        checks += 1
        agree += int(a[0] == b[0] and vars(a[1]) == vars(b[1]))
    out = {"points": n_points, "build_s": t_build, "cold_first_volunteer_s": t_cold,
           "rebuild_ms": [x * 1000 for x in timings["rebuild"]],
           "incremental_ms": [x * 1000 for x in timings["incremental"]],
           "rebuild_median_ms": float(np.median(timings["rebuild"]) * 1000),
           "incremental_median_ms": float(np.median(timings["incremental"]) * 1000),
           "cache_array_mb": nbytes / 2**20, "previous_cache_array_mb": old_equiv / 2**20,
           "rss_growth_first_volunteer_mb": rss1 - rss0, "scan_agreement": f"{agree}/{checks}",
           "incremental_updates": cache.updates, "rows_reread": cache.updated_rows}
    out["ratio"] = out["rebuild_median_ms"] / out["incremental_median_ms"]
    store.close()
    return out


# ---------------------------------------------------------------------------------------------------------------
# 4. NP


def np_bank_section(n_queries: int, n_faithful: int) -> dict[str, Any] | None:
    import torch

    from agentfly_sim.embedding import CachedKeyIndex, load_np_encoder, retrieve
    from harness.datapaths import find_agentfly

    data = find_agentfly()  # the one data resolver: $MEMSIM_AGENTFLY_DATA, else the fetched copy
    path = data / "memory.jsonl" if data is not None else None
    if path is None or not path.is_file():
        return None
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    pairs = [(r["case"], r["plan"], i) for i, r in enumerate(rows)]
    tok, model = load_np_encoder()
    queries = [rows[(37 * j) % len(rows)]["case"] + " (which one?)" for j in range(n_queries)]
    before = CachedKeyIndex(tok, model, query_encode="batch")
    after = CachedKeyIndex(tok, model, query_encode="one")
    before.rebuild(pairs)
    after.rebuild(pairs)
    t_b, t_a, same = [], [], 0
    with torch.no_grad():
        for q in queries:
            for idx, acc in ((before, t_b), (after, t_a)):
                t0 = time.perf_counter()
                idx.retrieve(q, pairs, device_str="cpu", top_k=8)
                acc.append(time.perf_counter() - t0)
    t_f = []
    for q in queries[:n_faithful]:
        t0 = time.perf_counter()
        ref = retrieve(q, pairs, tok, model, device_str="cpu", top_k=8)
        t_f.append(time.perf_counter() - t0)
        got = after.retrieve(q, pairs, device_str="cpu", top_k=8)
        same += int([r["line_index"] for r in ref] == [r["line_index"] for r in got])
    f = float(np.median(t_f))
    b, a = float(np.median(t_b)), float(np.median(t_a))
    return {"cases": len(pairs), "faithful_ms": f * 1000, "cached_before_ms": b * 1000, "cached_after_ms": a * 1000,
            "ratio_before": f / b, "ratio_after": f / a, "identical_top8": f"{same}/{n_faithful}",
            "queries": n_queries}


def np_index_section(n_cases: int, n_queries: int, seed: int) -> dict[str, Any]:
    import faiss
    import torch

    from agentfly_sim.embedding import CachedKeyIndex, _faiss_flat_ip

    faiss.omp_set_num_threads(1)
    rng = np.random.default_rng(seed)
    dim = 384
    mat = rng.standard_normal((n_cases, dim), dtype=np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    pairs = [(f"k{i}", "", i) for i in range(n_cases)]
    keys = [p[0] for p in pairs]
    tmat = torch.from_numpy(mat)
    to = CachedKeyIndex(None, None, backend="torch")
    fa = CachedKeyIndex(None, None, backend="faiss")
    for idx in (to, fa):
        idx.keys, idx.matrix = keys, tmat
    fa._faiss = _faiss_flat_ip(tmat)
    raw = fa._faiss
    qs = rng.standard_normal((n_queries, dim), dtype=np.float32)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    times: dict[str, list[float]] = {"torch": [], "faiss_backend": [], "faiss_raw": []}
    got: dict[str, list[list[int]]] = {"torch": [], "faiss_backend": []}
    # one loop per contender (each runs warm on its own), 2 untimed warm-up queries first
    for name in ("torch", "faiss_raw", "faiss_backend"):
        for j, q in enumerate(np.concatenate([qs[:2], qs])):
            qv = torch.from_numpy(q)
            t0 = time.perf_counter()
            if name == "faiss_raw":
                raw.search(q[None], 8)
                r = None
            else:
                r = (to if name == "torch" else fa).search(qv, pairs, 8)
            dt = time.perf_counter() - t0
            if j >= 2:
                times[name].append(dt)
                if r is not None:
                    got[name].append([x["line_index"] for x in r])
    same = sum(int(a == b) for a, b in zip(got["torch"], got["faiss_backend"], strict=True))
    med = {k: float(np.median(v) * 1000) for k, v in times.items()}
    return {"cases": n_cases, "queries": n_queries, **{f"{k}_ms": v for k, v in med.items()},
            "torch_vs_faiss": med["torch"] / med["faiss_raw"],
            "backend_vs_faiss": med["faiss_backend"] / med["faiss_raw"], "identical_top8": f"{same}/{n_queries}",
            "exact_fallbacks": fa.exact_fallbacks}


# ---------------------------------------------------------------------------------------------------------------


def plot(res: dict[str, Any]) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, before, after = [], [], []
    ep, dm, ca = res["ep"], res["dream"], res["cache"]
    labels.append(f"run_ep\n{ep['factors']:,} factors (s)")
    before.append(ep["reference_s"])
    after.append(ep["batched_s"])
    labels.append(f"dream pass\n{dm['factors']:,} factors (s)")
    before.append(dm["before"]["wall_s"])
    after.append(dm["after"]["wall_s"])
    labels.append(f"1st volunteer after capture,\nin-process, {ca['points']:,} pts (s)")
    before.append(ca["rebuild_median_ms"] / 1000)
    after.append(ca["incremental_median_ms"] / 1000)
    if res.get("np_bank"):
        labels.append(f"NP cached query\n{res['np_bank']['cases']:,} cases (ms)")
        before.append(res["np_bank"]["cached_before_ms"])
        after.append(res["np_bank"]["cached_after_ms"])
    ni = res["np_index"]
    labels.append(f"NP index side\n{ni['cases']:,} cases (ms)")
    before.append(ni["torch_ms"])
    after.append(ni["faiss_backend_ms"])
    fig, ax = plt.subplots(figsize=(11, 4.2))
    x = np.arange(len(labels))
    ax.bar(x - 0.2, before, 0.4, label="before (reference option)", color="#b0b0b0")
    ax.bar(x + 0.2, after, 0.4, label="after (new default / backend)", color="#2a7ab9")
    for i, (b, a) in enumerate(zip(before, after, strict=True)):
        ax.text(i + 0.2, a, f"{b / a:.1f}x", ha="center", va="bottom", fontsize=9)
    ax.set_yscale("log")
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("time (log scale; unit in the label)")
    ax.set_title("Engines: before vs after, same run (label = speed-up)")
    ax.set_ylim(top=max(before + after) * 8)
    ax.legend(loc="upper left", fontsize=8, ncol=2)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def levels(res: dict[str, Any], serve: dict[str, Any] | None = None, cost: dict[str, Any] | None = None
           ) -> list[dict[str, Any]]:
    """The expected levels, computed from the measured sections. ``serve``: the ``serve.json`` payload of the same
    results folder, when there is one: the "first volunteer after a capture" level is judged on its number (a
    hook through the service, the path a user runs); this run's in-process figure is a separate, qualified level.
    ``met`` is None where the number is not in the folder. ``cost``: the ``cost.json`` payload of the same folder,
    whose synthetic-bank NP figure and verdict the NP level quotes beside this run's shipped-bank one
    (``benchmarks.cost.NP_CACHED_LEVEL_X``)."""
    ep, dm, ca, ni = res["ep"], res["dream"], res["cache"], res["np_index"]
    if serve is not None and serve.get("rows"):
        from benchmarks.serve import first_volunteer_after_capture

        fv = first_volunteer_after_capture(serve["rows"])
        user_path = {"level": f"first volunteer after a capture at {fv['points']:,} points <= {fv['target_ms']} ms, "
                              "through the service (the path a user runs; from serve.json)",
                     "measured": f"hook p50 {fv['hook_p50_ms']:.0f} ms" if fv["hook_p50_ms"] is not None else "n/a",
                     "met": fv["met"] if fv["hook_p50_ms"] is not None else None}
    else:
        user_path = {"level": "first volunteer after a capture at 1e5 points <= 100 ms, through the service (the path "
                              "a user runs)", "measured": "not in this results folder: run `memsim bench serve`",
                     "met": None}
    out = [
        {"level": "pure run_ep on the 2,000-factor ep_scaling graph >= 3x faster than the reference engine",
         "measured": f"{ep['ratio']:.1f}x ({ep['reference_s']:.1f} s -> {ep['batched_s']:.1f} s), bit-identical "
                     f"{ep['bit_identical']}, iterations {ep['iterations'][0]} = {ep['iterations'][1]}",
         "met": ep["ratio"] >= 3 and ep["bit_identical"]},
        {"level": "dream pass at 10,000 factors <= 15 s",
         "measured": f"{dm['after']['wall_s']:.1f} s (before {dm['before']['wall_s']:.1f} s; after: load "
                     f"{dm['after']['load_s']:.1f}, EP {dm['after']['ep_s']:.1f}, flush+events "
                     f"{dm['after']['flush_s']:.1f} s); same rows {dm['same_points']}, same feed {dm['same_feed']}",
         "met": dm["after"]["wall_s"] <= 15 and dm["factors"] >= 10000},
        user_path,
        {"level": "in-process cache refresh only (volunteer_context in the capturing process; no service, no hook "
                  "process): first volunteer after a capture at 1e5 points <= 100 ms",
         "measured": f"{ca['incremental_median_ms']:.0f} ms at {ca['points']:,} (rebuild "
                     f"{ca['rebuild_median_ms']:.0f} ms); scan agreement {ca['scan_agreement']}",
         "met": ca["incremental_median_ms"] <= 100 and ca["points"] >= 100000},
        {"level": "search cache memory at 1e5 points well under 1 GB",
         "measured": f"{ca['cache_array_mb']:.0f} MB arrays (previous layout {ca['previous_cache_array_mb']:.0f} MB)",
         "met": ca["cache_array_mb"] < 512 and ca["points"] >= 100000},
        {"level": "NP cached index side at 1e6 cases <= 1.2x FAISS flat, identical top-k",
         "measured": f"{ni['backend_vs_faiss']:.2f}x with the FAISS backend ({ni['faiss_backend_ms']:.2f} vs "
                     f"{ni['faiss_raw_ms']:.2f} ms; torch backend {ni['torch_vs_faiss']:.2f}x); identical top-8 "
                     f"{ni['identical_top8']}",
         "met": ni["backend_vs_faiss"] <= 1.2 and ni["cases"] >= 10**6
                and ni["identical_top8"].split("/")[0] == ni["identical_top8"].split("/")[1]},
    ]
    nb = res.get("np_bank")
    if nb:
        ratio, ident = np_shipped_ratio(res) or (float("nan"), False)
        out.append({"level": f"NP cached >= {NP_CACHED_LEVEL_X}x faster than NP faithful at 1,278 cases, identical "
                             "rankings (judged here on the shipped bank; the synthetic CBR bank is judged on the cost "
                             "page)",
                    "measured": f"shipped bank: {nb['ratio_after']:.0f}x (before {nb['ratio_before']:.0f}x; query "
                                f"{nb['cached_after_ms']:.1f} ms vs {nb['cached_before_ms']:.1f} ms, faithful "
                                f"{nb['faithful_ms']:.0f} ms); identical top-8 {nb['identical_top8']}; "
                                f"{_synthetic_bank_note(cost)}",
                    "met": bool(ratio >= NP_CACHED_LEVEL_X and ident)})
    return out


def _synthetic_bank_note(cost: dict[str, Any] | None) -> str:
    got = np_synthetic_ratio(cost) if cost is not None else None
    if got is None:
        return "synthetic bank: not in this results folder (cost.json, `memsim bench cost`)"
    ratio, ident = got
    verdict = "met" if ratio >= NP_CACHED_LEVEL_X and ident else "missed"
    return f"synthetic bank (cost.json): {ratio:,.0f}x, {verdict} there"


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, track: Any = None, echo: Any = print
        ) -> list[Path]:
    """Run the four sections; returns the written paths."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass
    sizes = ({"ep": 300, "dream": 1000, "cache": 5000, "np_index": 100_000, "repeats": 2, "np_q": 6, "np_f": 1}
             if quick else
             {"ep": 2000, "dream": 10000, "cache": 100_000, "np_index": 1_000_000, "repeats": 3, "np_q": 20,
              "np_f": 3})
    t_start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="engines_"))
    res: dict[str, Any] = {}
    steps: list[tuple[str, str, Callable[[], Any]]] = [
        ("ep", f"EP engine on the {sizes['ep']:,}-factor ep_scaling graph", lambda: ep_section(sizes["ep"], seed)),
        ("dream", f"dream pass at {sizes['dream']:,} factors (before, after)",
         lambda: dream_section(sizes["dream"], seed, tmp)),
        ("cache", f"caches at {sizes['cache']:,} points",
         lambda: cache_section(sizes["cache"], seed, tmp, sizes["repeats"])),
        ("np_bank", "NP on the shipped bank", lambda: np_bank_section(sizes["np_q"], sizes["np_f"])),
        ("np_index", f"NP index side at {sizes['np_index']:,} cases",
         lambda: np_index_section(sizes["np_index"], 30, seed)),
    ]
    try:
        with as_tracker(track).phase("engines sections", total=len(steps)) as ph:
            for key, label, step in steps:
                echo(f"engines: {label} ...")
                ph.update(status=label)
                res[key] = step()
                ph.update(advance=1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["levels"] = levels(res, *_beside(out_dir))
    meta = {"machine": machine_description(), "seeds": {"graph": seed}, "quick": quick, "sizes": sizes,
            "wall_s": time.perf_counter() - t_start}
    payload = {"meta": meta, **res}
    return write_results(out_dir, NAME, payload, render_md, plot(res))


def _met(x: bool | None) -> str:
    return "n/a" if x is None else "yes" if x else "no"


def render_md(payload: dict[str, Any]) -> str:
    """engines.md from the engines.json payload (every number and level read from it)."""
    meta = payload["meta"]
    ep, dm, ca, ni, nb = (payload["ep"], payload["dream"], payload["cache"], payload["np_index"],
                          payload.get("np_bank"))
    rows = [
        ["run_ep, ep_scaling graph", f"{ep['factors']:,} factors", f"{ep['reference_s']:.2f} s",
         f"{ep['batched_s']:.2f} s", f"{ep['ratio']:.1f}x",
         f"bit-identical {ep['bit_identical']}, iterations {ep['iterations'][0]}/{ep['iterations'][1]}"],
        ["dream pass", f"{dm['factors']:,} factors", f"{dm['before']['wall_s']:.1f} s",
         f"{dm['after']['wall_s']:.1f} s", f"{dm['ratio']:.1f}x",
         f"same rows {dm['same_points']}, same feed {dm['same_feed']}"],
        ["1st volunteer after a capture, in-process cache refresh only (no service)", f"{ca['points']:,} points",
         f"{ca['rebuild_median_ms']:.0f} ms", f"{ca['incremental_median_ms']:.0f} ms", f"{ca['ratio']:.0f}x",
         f"scan agreement {ca['scan_agreement']}"],
        ["search cache arrays", f"{ca['points']:,} points", f"{ca['previous_cache_array_mb']:.0f} MB",
         f"{ca['cache_array_mb']:.0f} MB", f"{ca['previous_cache_array_mb'] / ca['cache_array_mb']:.1f}x", ""],
        ["NP index side (top-8)", f"{ni['cases']:,} cases", f"{ni['torch_ms']:.2f} ms", f"{ni['faiss_backend_ms']:.2f} ms",
         f"{ni['torch_ms'] / ni['faiss_backend_ms']:.1f}x",
         f"FAISS flat {ni['faiss_raw_ms']:.2f} ms; identical top-8 {ni['identical_top8']}"],
    ]
    if nb:
        rows.append(["NP cached query vs faithful", f"{nb['cases']:,} cases", f"{nb['cached_before_ms']:.1f} ms",
                     f"{nb['cached_after_ms']:.1f} ms", f"{nb['cached_before_ms'] / nb['cached_after_ms']:.2f}x",
                     f"faithful {nb['faithful_ms']:.0f} ms: {nb['ratio_before']:.0f}x -> {nb['ratio_after']:.0f}x; "
                     f"identical top-8 {nb['identical_top8']}"])
    phases = [[k, f"{dm['before'][k + '_s']:.2f}", f"{dm['after'][k + '_s']:.2f}"] for k in ("load", "ep", "flush")]
    lv = [[x["level"], x["measured"], _met(x["met"])] for x in payload["levels"]]
    return ("# Engines: speed-ups against the code they replace, same run\n\n"
            "Before = the previous implementation, kept as a named option (`run_ep(engine=\"reference\")`, one feed "
            "transaction per ConfidenceChanged event, `store.search_cache_mode = \"rebuild\"`, the batch-path query "
            "encode, the torch top-k); after = the new default or backend. Results are compared in the same run "
            "(columns on the right). The first volunteer after a capture is timed here in the capturing process "
            "only (the search-cache refresh); a user's hook goes through the resident service, timed by "
            "`memsim bench serve` (serve.json), and the levels below judge that figure.\n\n"
            + md_table(["what", "size", "before", "after", "speed-up", "checks"], rows) + "\n\n"
            "Dream pass phases (s):\n\n" + md_table(["phase", "before", "after"], phases) + "\n\n"
            "Expected levels:\n\n" + md_table(["level", "measured", "met"], lv) + "\n\n"
            + meta_block(meta, payload.get("run")) + "\n")


def rerender(out_dir: Path) -> list[Path]:
    """Recompute the levels of ``out_dir/engines.json`` from its measured sections (and ``serve.json`` and
    ``cost.json`` beside it, if any) and rewrite ``engines.json`` and ``engines.md``; nothing is re-measured,
    the figure is kept."""
    payload = json.loads((out_dir / f"{NAME}.json").read_text(encoding="utf-8"))
    payload["levels"] = levels(payload, *_beside(out_dir))
    return write_results(out_dir, NAME, payload, render_md(payload), None)


def _beside(out_dir: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The ``serve.json`` and ``cost.json`` payloads of the same results folder (None where absent; the folder a
    run is published to, not its staging folder: ``harness.runs.published_folder``)."""
    from harness.runs import published_folder

    found = []
    for name in ("serve", "cost"):
        path = published_folder(out_dir) / f"{name}.json"
        found.append(json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None)
    return found[0], found[1]


def main(argv: list[str] | None = None) -> list[Path]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--render", action="store_true",
                    help="re-render engines.{json,md} in --out from its engines.json (and serve.json) without "
                         "measuring")
    args = ap.parse_args(argv)
    if args.render:
        paths = rerender(args.out or default_out_dir(args.quick))
    else:
        paths = run(args.out or default_out_dir(args.quick), quick=args.quick, seed=args.seed)
    for p in paths:
        print(f"wrote {p}")
    return paths


if __name__ == "__main__":
    main()
