"""Tortoise volunteering latency on Kuzu for ``memsim bench cost``.

A fresh on-disk Kuzu store (tortoise_sim ``Tortoise`` facade, default ``SimConfig``: MiniLM embedder, no vector
index; the encoder is injected as :class:`PrecomputedMiniLM`, the same MiniLM vectors computed in batches before
the build) is filled through ``create_point`` (kind ``statement``, status ``live``, credibility ``high`` so that the
points clear the 0.7 confidence gate), one store transaction per 1,000 points (the store offers no bulk loader;
batching the commits is the only speed-up its public API allows). Point texts are facts about the synthetic
CBR world's entities; volunteer windows are one user turn holding a world question (explicit ask, so the pipeline
always searches). Latency is wall time of ``Tortoise.volunteer_context`` per call.

A size whose projected build time (measured ms/point at the first size x points) exceeds ``build_budget_s`` is
not built: its p50/p95 are **extrapolated** linearly in the number of points from the measured sizes (search
scans every live point on every call, so cost is linear in N), and the row says so.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import percentile
from harness.worlds import CBRWorld


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


def _fill(t: Any, facts: list[str], track: Callable, chunk: int = 1000) -> float:
    n = len(facts)
    t0 = time.perf_counter()
    for s in track(range(0, n, chunk), description=f"Tortoise build {n:,} points", total=(n + chunk - 1) // chunk):
        with t.store.transaction():
            for i in range(s, min(n, s + chunk)):
                t.create_point("statement", facts[i], status="live", credibility="high")
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
    for n in sizes:
        if ms_per_point is not None and ms_per_point * n / 1000.0 > build_budget_s:
            rows.append({"points": n, "projected_build_s": ms_per_point * n / 1000.0, "extrapolated": True})
            continue
        facts = _facts(world, n, seed)
        encoder = PrecomputedMiniLM()
        t0 = time.perf_counter()
        encoder.precompute(facts)
        embed_s = time.perf_counter() - t0
        t = Tortoise(tmp / f"tortoise_{n}", config=SimConfig(), encoder=encoder, clock=StepClock(), seed=seed)
        try:
            build_s = embed_s + _fill(t, facts, track)
            ms_per_point = 1000.0 * build_s / n  # latest measured rate
            t.volunteer_context(windows[0])  # warm-up (loads the encoder)
            lat, pointers, degraded = [], 0, 0
            for w in windows[1:]:
                t0 = time.perf_counter()
                res = t.volunteer_context(w)
                lat.append(time.perf_counter() - t0)
                pointers += len(res["pointers"])
                degraded += int(res["degraded_reason"] is not None)
            rows.append({"points": n, "p50_ms": 1000 * statistics.median(lat), "p95_ms": 1000 * percentile(lat, 95),
                         "calls": len(lat), "mean_pointers": pointers / len(lat), "degraded_calls": degraded,
                         "build_s": build_s, "embed_s": embed_s, "build_ms_per_point": 1000.0 * build_s / n, "how": "measured"})
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
        note = ("Sizes marked extrapolated were not built: create_point costs "
                f"{ms_per_point:.1f} ms per point on this machine even with 1,000 points per transaction, and "
                "tortoise_sim offers no bulk loader.")
    return {"rows": rows, "config": "SimConfig() defaults (MiniLM embedder, batch-precomputed for the points; vector_index=False), "
                      "on-disk Kuzu",
            "windows": "one user turn = a synthetic world question", "note": note}
