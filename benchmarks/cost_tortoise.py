"""Tortoise volunteering latency on Kuzu for ``memsim bench cost``.

A fresh on-disk Kuzu store (tortoise_sim ``Tortoise`` facade, default ``SimConfig``: MiniLM embedder, no vector
index, ``search_cache=True``; the encoder is injected as :class:`PrecomputedMiniLM`, the same MiniLM vectors
computed in batches before the build) is filled through ``tortoise_sim.admission.bulk_create_points`` (kind
``statement``, status ``live``, credibility ``high`` so that the points clear the 0.7 confidence gate): the
pyarrow ``LOAD FROM`` seeding path, which writes the same Point columns as ``create_point`` but emits no per-point
provenance events (``create_point`` costs ~25 ms per point on this machine, which made 1e5 points unbuildable
in budget). Point texts are facts about the synthetic CBR world's entities; volunteer windows are one user turn
holding a world question (explicit ask, so the pipeline always searches). Latency is wall time of
``Tortoise.volunteer_context`` per call, after one warm-up call (which builds the per-process search and
why-block caches: ``warm_s``).

A size whose projected build time (measured s/point at the previous size x points) exceeds ``build_budget_s`` is
not built: its p50/p95 are **extrapolated** linearly in the number of points from the measured sizes, and the row
says so.

``python -m benchmarks.cost_tortoise [out_dir]`` re-measures only this section and rewrites
``cost.{json,md,png}`` in ``out_dir`` (default: the ``bench`` run folder, ./memsim-results/bench) via ``benchmarks.cost.rerun_tortoise``; the
other sections' numbers are kept as they were measured.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import percentile
from benchmarks.progress import as_tracker
from benchmarks.worlds import CBRWorld


class PrecomputedMiniLM:
    """The store's MiniLM encoder with the point texts embedded up front in batches (identical vectors, computed
    64 at a time instead of one per ``create_point``); unseen texts (the volunteer queries) go to MiniLM live."""

    dim = 384

    def __init__(self) -> None:
        from tortoise_sim.embed import MiniLMEncoder

        self.live = MiniLMEncoder()
        self.cache: dict[str, np.ndarray] = {}

    def precompute(self, texts: list[str], batch: int = 256) -> None:
        from tortoise_sim.embed import cut_words

        cut = list(dict.fromkeys(cut_words(t) for t in texts))
        for s in range(0, len(cut), batch):
            vecs = self.live.encode(cut[s:s + batch])
            self.cache.update(zip(cut[s:s + batch], vecs, strict=True))

    def encode(self, texts: Any) -> np.ndarray:
        texts = list(texts)
        missing = [t for t in texts if t not in self.cache]
        live = dict(zip(missing, self.live.encode(missing), strict=True)) if missing else {}
        return np.stack([self.cache[t] if t in self.cache else live[t] for t in texts]).astype(np.float32)


def _facts(world: CBRWorld, n: int, seed: int) -> list[str]:
    bank = world.bank(n, seed=seed)
    return [f"{bank.question(i).rstrip('?.')}: {world.answer(int(bank.family[i]), int(bank.entity[i]))}"
            for i in range(n)]


def _fill(t: Any, facts: list[str], track: Callable, chunk: int = 20_000) -> float:
    from tortoise_sim.admission import bulk_create_points

    n = len(facts)
    t0 = time.perf_counter()
    for s in track(range(0, n, chunk), description=f"Tortoise build {n:,} points", total=(n + chunk - 1) // chunk):
        bulk_create_points(t.store, [{"kind": "statement", "content": f, "status": "live", "credibility": "high"}
                                     for f in facts[s:s + chunk]], embed_batch=256)
    return time.perf_counter() - t0


def tortoise_section(sizes: list[int], *, quick: bool, seed: int, tmp: Path, track: Callable,
                     build_budget_s: float = 300.0) -> dict[str, Any]:
    from tortoise_sim.config import SimConfig
    from tortoise_sim.sdk import Tortoise
    from tortoise_sim.store import StepClock

    world = CBRWorld(seed=seed)
    n_calls = 10 if quick else 30
    windows = [[{"role": "user", "content": q}] for q in world.queries(n_calls + 1, seed=seed + 55).questions()]
    rows: list[dict[str, Any]] = []
    ms_per_point: float | None = None
    track = as_tracker(track)
    for n in track(sizes, description="Tortoise volunteering sizes"):
        if ms_per_point is not None and ms_per_point * n / 1000.0 > build_budget_s:
            rows.append({"points": n, "projected_build_s": ms_per_point * n / 1000.0, "extrapolated": True})
            continue
        facts = _facts(world, n, seed)
        encoder = PrecomputedMiniLM()
        t0 = time.perf_counter()
        with track.phase(f"embedding {len(set(facts)):,} facts for {n:,} points"):
            encoder.precompute(facts)
        embed_s = time.perf_counter() - t0
        t = Tortoise(tmp / f"tortoise_{n}", config=SimConfig(), encoder=encoder, clock=StepClock(), seed=seed)
        try:
            load_s = _fill(t, facts, track)
            build_s = embed_s + load_s
            ms_per_point = 1000.0 * build_s / n  # latest measured rate
            t0 = time.perf_counter()
            t.volunteer_context(windows[0])  # warm-up (loads the encoder, builds the search / why caches)
            warm_s = time.perf_counter() - t0
            cache = getattr(t.store, "_search_cache", None)
            fb0, sc0 = getattr(cache, "exact_fallbacks", 0), getattr(cache, "searches", 0)
            lat, pointers, degraded = [], 0, 0
            for w in windows[1:]:
                t0 = time.perf_counter()
                res = t.volunteer_context(w)
                lat.append(time.perf_counter() - t0)
                pointers += len(res["pointers"])
                degraded += int(res["degraded_reason"] is not None)
            rows.append({"points": n, "p50_ms": 1000 * statistics.median(lat), "p95_ms": 1000 * percentile(lat, 95),
                         "calls": len(lat), "mean_pointers": pointers / len(lat), "degraded_calls": degraded,
                         "build_s": build_s, "embed_s": embed_s, "load_s": load_s, "warm_s": warm_s,
                         "build_ms_per_point": 1000.0 * build_s / n,
                         "exact_fallbacks": getattr(getattr(t.store, "_search_cache", None), "exact_fallbacks", 0)
                         - fb0, "searches": getattr(getattr(t.store, "_search_cache", None), "searches", 0) - sc0,
                         "how": "measured"})
        finally:
            t.close()
    measured = [r for r in rows if not r.get("extrapolated")]
    note = ""
    if any(r.get("extrapolated") for r in rows):
        if len(measured) >= 2:
            x = np.array([r["points"] for r in measured], dtype=float)
            for key in ("p50_ms", "p95_ms"):
                slope, icpt = np.polyfit(x, np.array([r[key] for r in measured]), 1)
                for r in rows:
                    if r.get("extrapolated"):
                        r[key] = float(icpt + slope * r["points"])
        for r in rows:
            if r.get("extrapolated"):
                r["how"] = (f"extrapolated (linear fit over the measured sizes); not built: projected build "
                            f"{r['projected_build_s'] / 60:.0f} min at {ms_per_point:.1f} ms/point")
        note = (f"Sizes marked extrapolated were not built: the build (MiniLM embedding + bulk load) costs "
                f"{ms_per_point:.1f} ms per point on this machine.")
    return {"rows": rows, "config": "SimConfig() defaults (MiniLM embedder, batch-precomputed for the points; "
                      "vector_index=False; search_cache=True), on-disk Kuzu, built with bulk_create_points",
            "windows": "one user turn = a synthetic world question", "note": note}


def cache_note(rows: list[dict[str, Any]]) -> str:
    """What the p50/p95 do not show: the cache (re)build paid by the first volunteer call after any write, and
    how many searches took the exact near-tie path."""
    meas = [r for r in rows if r.get("warm_s") is not None]
    if not meas:
        return ""
    warm = ", ".join(f"{r['warm_s']:.2f} s at {r['points']:,}" for r in meas)
    fb = ", ".join(f"{r.get('exact_fallbacks', 0)} at {r['points']:,}" for r in meas)
    return (f"The first volunteer call after any write rebuilds the per-process caches (warm-up call: {warm}); "
            f"searches whose vector leg hit a near tie and was recomputed the scan's way (exact path), over "
            f"the timed calls: {fb}.")


if __name__ == "__main__":
    import sys

    from benchmarks.common import default_out_dir
    from benchmarks.cost import rerun_tortoise

    for p in rerun_tortoise(Path(sys.argv[1]) if len(sys.argv) > 1 else default_out_dir()):
        print(p)
