"""The approximate-nearest-neighbour index alone at N points: build time, search p50/p95, recall@8 against exact.

What is measured: the FAISS HNSW index of ``tortoise_sim.ann`` (no Kuzu store, no re-ranking), over N MiniLM vectors
(all-MiniLM-L6-v2, mean pooling, L2-normalised, ``tortoise_sim.light_encoder.LightMiniLM``) of short sentences from
a deterministic generator seeded by ``--seed`` (agent-memory style facts built from word lists; not random vectors).
Queries are 300 held-out sentences of a separate stream (never in the index); a second stream of 300 is the
validation split on which efSearch is chosen (the smallest value of the sweep whose recall@8 reaches the target).
Recall@8 is ``|ANN top-8 ∩ exact top-8| / 8`` against FAISS ``IndexFlatIP`` on the same queries, and the exact flat
search p50 is measured in the same run, side by side, one query at a time, one thread.

Vectors are cached under ``~/.cache/memsim/ann/`` in chunks (embedding is the expensive part), so a large N is
embedded once and reused; ``embed`` fills the cache without timing anything.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import (
    default_out_dir,
    machine_description,
    md_table,
    meta_block,
    percentile,
    write_results,
)
from benchmarks.progress import as_tracker
from tortoise_sim.ann import DEFAULT_EF_CONSTRUCTION as EF_CONSTRUCTION

CHUNK = 10_000
GENERATOR_VERSION = 1
CACHE_ROOT = Path(os.environ.get("MEMSIM_ANN_CACHE", str(Path.home() / ".cache" / "memsim" / "ann")))

_PEOPLE = ("Ada", "Boris", "Celia", "Dario", "Elin", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kaia", "Lorenz",
           "Mira", "Nils", "Oona", "Pavel", "Quinn", "Rosa", "Soren", "Talia", "Umar", "Vera", "Wim", "Xenia",
           "Yusuf", "Zora", "Arvid", "Bettina", "Cosmo", "Dagny", "the user", "my manager", "the new intern",
           "our designer", "the on-call engineer", "my sister", "the landlord", "the client")
_PROJECTS = ("the billing service", "the mobile app", "the data pipeline", "the search backend", "the wiki",
             "the deploy script", "the payment gateway", "the onboarding flow", "the analytics dashboard",
             "the build cache", "the auth module", "the recommendation model", "the garden plan", "the wedding budget",
             "the tax return", "the novel draft", "the podcast feed", "the CI runner", "the API gateway",
             "the monorepo", "the backup job", "the marketing site", "the inventory sheet", "the travel itinerary")
_TOOLS = ("Postgres", "Redis", "Kafka", "Docker", "Kubernetes", "Terraform", "pytest", "ruff", "poetry", "uv",
          "Rust", "Go", "TypeScript", "React", "Vue", "Django", "FastAPI", "Flask", "numpy", "pandas", "Spark",
          "Airflow", "Grafana", "Prometheus", "nginx", "SQLite", "DuckDB", "GitHub Actions", "vim", "VS Code",
          "tmux", "zsh", "Excel", "Notion", "Slack", "a spreadsheet", "a paper notebook", "the terminal")
_PREFS = ("prefers", "avoids", "switched to", "keeps forgetting", "wants to learn", "complained about",
          "recommended", "stopped using", "is migrating to", "benchmarked", "wrote a guide for", "distrusts")
_ADJ = ("slow", "flaky", "broken", "fast", "expensive", "outdated", "noisy", "fragile", "reliable", "confusing",
        "undocumented", "overloaded", "stable", "new", "legacy", "shared", "private", "experimental")
_EVENTS = ("fails", "times out", "crashes", "leaks memory", "returns stale data", "hangs", "double-charges",
           "loses the cursor", "skips a row", "logs passwords", "ignores the config", "runs twice")
_WHEN = ("on Mondays", "every night", "after the upgrade", "during the demo", "since last week", "at midnight",
         "under load", "on the laptop", "in staging", "in production", "after a restart", "when offline",
         "in March", "before lunch", "on weekends", "during backups", "after the holidays", "at month end")
_FOODS = ("spicy ramen", "oat milk", "black coffee", "green tea", "sourdough", "dark chocolate", "lentil soup",
          "sushi", "falafel", "porridge", "mango", "espresso", "peanuts", "shellfish", "gluten", "cilantro")
_PLACES = ("Lisbon", "Oslo", "Kyoto", "Nairobi", "Lima", "Tallinn", "Quebec", "Hanoi", "Porto", "Gdansk",
           "Zurich", "Reykjavik", "Seville", "Busan", "Tbilisi", "Valencia", "the office", "the cabin", "the gym")
_NUMS = tuple(str(n) for n in (2, 3, 4, 5, 8, 10, 12, 15, 20, 30, 45, 60, 90, 128, 256, 500))
_UNITS = ("minutes", "seconds", "hours", "days", "retries", "workers", "gigabytes", "replicas", "percent")

_TEMPLATES: tuple[Callable[[random.Random], str], ...] = (
    lambda r: f"{r.choice(_PEOPLE)} {r.choice(_PREFS)} {r.choice(_TOOLS)} for {r.choice(_PROJECTS)}.",
    lambda r: f"{r.choice(_PROJECTS).capitalize()} on {r.choice(_TOOLS)} {r.choice(_EVENTS)} {r.choice(_WHEN)}, "
              f"{r.choice(_PEOPLE)} says.",
    lambda r: f"{r.choice(_PEOPLE)} says {r.choice(_TOOLS)} is {r.choice(_ADJ)} {r.choice(_WHEN)}.",
    lambda r: f"Set the {r.choice(_TOOLS)} timeout to {r.choice(_NUMS)} {r.choice(_UNITS)} in {r.choice(_PROJECTS)}.",
    lambda r: f"{r.choice(_PEOPLE)} is allergic to {r.choice(_FOODS)} and likes {r.choice(_FOODS)} in "
              f"{r.choice(_PLACES)}.",
    lambda r: f"{r.choice(_PEOPLE)} moves to {r.choice(_PLACES)} {r.choice(_WHEN)} to work on {r.choice(_PROJECTS)}.",
    lambda r: f"Never run {r.choice(_TOOLS)} on {r.choice(_PROJECTS)} {r.choice(_WHEN)}, says {r.choice(_PEOPLE)}.",
    lambda r: f"The {r.choice(_ADJ)} {r.choice(_TOOLS)} setup of {r.choice(_PROJECTS)} needs {r.choice(_NUMS)} "
              f"{r.choice(_UNITS)}.",
    lambda r: f"{r.choice(_PEOPLE)} asked {r.choice(_PEOPLE)} to review {r.choice(_PROJECTS)} in "
              f"{r.choice(_PLACES)}.",
    lambda r: f"Remember: {r.choice(_PROJECTS)} uses {r.choice(_TOOLS)}, not {r.choice(_TOOLS)}, {r.choice(_WHEN)}.",
    lambda r: f"{r.choice(_PEOPLE)} orders {r.choice(_FOODS)} {r.choice(_WHEN)} in {r.choice(_PLACES)}.",
    lambda r: f"Why does {r.choice(_PROJECTS)} {r.choice(_EVENTS).split()[0].rstrip('s')} "
              f"{r.choice(_WHEN)} on {r.choice(_TOOLS)}?",
)

STREAMS = {"base": 0, "test": 1, "validation": 2}


def sentence(seed: int, stream: str, i: int) -> str:
    """The ``i``-th sentence of ``stream`` (``base`` = the indexed points, ``test``/``validation`` = queries)."""
    r = random.Random((seed * 1_000_003 + STREAMS[stream]) * 10_000_019 + i)
    return r.choice(_TEMPLATES)(r)


def sentences(seed: int, stream: str, start: int, stop: int) -> list[str]:
    return [sentence(seed, stream, i) for i in range(start, stop)]


def cache_dir(seed: int) -> Path:
    """Per-seed cache folder; its name hashes the generator version, word lists and model, so a change re-embeds."""
    h = hashlib.sha256(json.dumps([GENERATOR_VERSION, _PEOPLE, _PROJECTS, _TOOLS, _PREFS, _ADJ, _EVENTS, _WHEN,
                                   _FOODS, _PLACES, _NUMS, _UNITS, "all-MiniLM-L6-v2-mean", CHUNK]).encode())
    return CACHE_ROOT / f"seed{seed}-{h.hexdigest()[:12]}"


def _encoder() -> Any:
    from harness.embedding import MeanPoolingEncoder

    return MeanPoolingEncoder(batch_size=256)


def _save_npy(path: Path, arr: np.ndarray) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        np.save(fh, arr)
    os.replace(tmp, path)


def _cached_vectors(path: Path, seed: int, stream: str, start: int, stop: int, encoder: Any | None) -> np.ndarray:
    """Float32 vectors of sentences ``[start, stop)`` of ``stream``, read from ``path`` or computed and saved there."""
    if path.exists():
        return np.load(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    enc = encoder if encoder is not None else _encoder()
    vec = np.asarray(enc.encode(sentences(seed, stream, start, stop)), dtype=np.float32)
    _save_npy(path, vec)
    return vec


def embed_chunk(seed: int, stream: str, k: int, encoder: Any | None = None) -> np.ndarray:
    """Vectors of sentences ``[k*CHUNK, (k+1)*CHUNK)`` of ``stream`` (cached; computed and saved when missing)."""
    return _cached_vectors(cache_dir(seed) / f"{stream}-{k:05d}.npy", seed, stream, k * CHUNK, (k + 1) * CHUNK,
                           encoder)


def queries(seed: int, stream: str, n: int = 300, encoder: Any | None = None) -> np.ndarray:
    """The first ``n`` vectors of a query stream (cached)."""
    return _cached_vectors(cache_dir(seed) / f"{stream}-q{n}.npy", seed, stream, 0, n, encoder)


def base_vectors(seed: int, n: int, encoder: Any | None = None) -> np.ndarray:
    """The first ``n`` base vectors (whole chunks from the cache, embedding missing ones)."""
    chunks = []
    for k in range((n + CHUNK - 1) // CHUNK):
        chunks.append(embed_chunk(seed, "base", k, encoder))
    return np.ascontiguousarray(np.concatenate(chunks)[:n])


def embed(seed: int, n: int, log: Callable[[str], None] = print) -> dict[str, float]:
    """Fill the cache up to ``n`` base points plus both query streams; report the embedding throughput."""
    enc = _encoder()
    queries(seed, "test", encoder=enc)
    queries(seed, "validation", encoder=enc)
    done = 0
    t_total = 0.0
    for k in range((n + CHUNK - 1) // CHUNK):
        path = cache_dir(seed) / f"base-{k:05d}.npy"
        if path.exists():
            continue
        t0 = time.perf_counter()
        embed_chunk(seed, "base", k, enc)
        dt = time.perf_counter() - t0
        done += CHUNK
        t_total += dt
        log(f"chunk {k}: {CHUNK / dt:.0f} sentences/s ({time.strftime('%H:%M:%S')})")
    return {"embedded": done, "seconds": t_total, "per_s": done / t_total if t_total else float("nan")}



NAME = "ann"
K = 8
TARGET_RECALL = 0.99
LEVEL_N = 1_000_000
LEVEL_P50_MS = 5.0
EF_SWEEP = (16, 32, 48, 64, 96, 128, 192, 256)
M_SWEEP = (16, 32)
SERVICE_CANDIDATES = 256  # SimConfig.ann_candidates default: what the search asks the index for


def _recall(found: np.ndarray, truth: np.ndarray) -> float:
    """Id overlap of the first ``K`` found with the exact top ``K`` (ties at the cut count as misses)."""
    return float(np.mean([len(set(f[:K].tolist()) & set(t.tolist())) / truth.shape[1]
                          for f, t in zip(found, truth, strict=True)]))


def _recall_ties(found: np.ndarray, kth: np.ndarray, xb: np.ndarray, qs: np.ndarray) -> float:
    """Tie-aware recall@K: the share of the first ``K`` found whose exact inner product reaches the exact K-th
    best (``kth``, within 1e-6). Generated sentences repeat now and then, so equal vectors tie at the cut and an
    id overlap would count an equally near point as a miss."""
    hits = 0
    for f, t, q in zip(found, kth, qs, strict=True):
        f = f[:K][f[:K] >= 0]
        hits += int(np.count_nonzero(xb[f] @ q >= t - 1e-6))
    return hits / (K * len(found))


def _one_by_one(search: Callable[[np.ndarray], np.ndarray], qs: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """Each query alone (the service's case), timed; returns the ids and the per-query seconds."""
    out, times = [], []
    for i in range(len(qs)):
        q = qs[i:i + 1]
        t0 = time.perf_counter()
        ids = search(q)
        times.append(time.perf_counter() - t0)
        out.append(ids[0])
    return np.asarray(out), times


def _stats(times: list[float]) -> dict[str, float]:
    return {"p50_ms": percentile(times, 50) * 1e3, "p95_ms": percentile(times, 95) * 1e3,
            "mean_ms": float(np.mean(times)) * 1e3}


def measure_size(seed: int, n: int, m_values: Sequence[int], ef_values: Sequence[int],
                 echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Exact flat vs HNSW at ``n`` points: build times, the efSearch sweep on both query splits, the choice."""
    import faiss

    faiss.omp_set_num_threads(1)
    xb = base_vectors(seed, n)
    q_test, q_val = queries(seed, "test"), queries(seed, "validation")
    flat = faiss.IndexFlatIP(xb.shape[1])
    t0 = time.perf_counter()
    flat.add(xb)
    flat_build = time.perf_counter() - t0
    truth, kth, splits = {}, {}, {"test": q_test, "validation": q_val}
    for name, qs in splits.items():
        truth[name], times = _one_by_one(lambda q: flat.search(q, K)[1], qs)
        kth[name] = flat.search(qs, K)[0][:, K - 1]
        if name == "test":
            flat_stats = _stats(times)

    def scored(name: str, ids: np.ndarray) -> dict[str, float]:
        return {"recall_at_8": _recall_ties(ids, kth[name], xb, splits[name]),
                "recall_at_8_id_overlap": _recall(ids, truth[name])}
    echo(f"N={n}: exact flat p50 {flat_stats['p50_ms']:.2f} ms")
    runs = []
    for m in m_values:
        index = faiss.IndexHNSWFlat(xb.shape[1], m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = EF_CONSTRUCTION
        t0 = time.perf_counter()
        index.add(xb)
        build_s = time.perf_counter() - t0
        sweep = []
        for ef in ef_values:
            params = faiss.SearchParametersHNSW(efSearch=ef)
            row: dict[str, Any] = {"M": m, "efSearch": ef}
            for name, qs in (("validation", q_val), ("test", q_test)):
                ids, times = _one_by_one(lambda q, p=params, ix=index: ix.search(q, K, params=p)[1], qs)
                row[name] = {**scored(name, ids), **_stats(times)}
            sweep.append(row)
            echo(f"N={n} M={m} ef={ef}: val recall@8 {row['validation']['recall_at_8']:.4f}, "
                 f"test p50 {row['test']['p50_ms']:.3f} ms")
        # the service's request: top SERVICE_CANDIDATES (efSearch raised to it), exact re-rank of those
        kc = min(SERVICE_CANDIDATES, n)
        params = faiss.SearchParametersHNSW(efSearch=kc)
        ids, times = _one_by_one(lambda q, p=params, kc=kc, ix=index: ix.search(q, kc, params=p)[1], q_test)
        # exact re-rank of the candidates (what the search does): their top K by exact inner product
        best = np.take_along_axis(ids, np.argsort(-np.einsum("qkd,qd->qk", xb[np.maximum(ids, 0)], q_test) - 9.0 *
                                                  (ids < 0), axis=1, kind="stable"), axis=1)
        service = {"candidates": kc, **{k.replace("recall_at_8", "recall_at_8_within_candidates"): v
                                        for k, v in scored("test", best).items()}, **_stats(times)}
        runs.append({"M": m, "efConstruction": EF_CONSTRUCTION, "build_s": build_s, "sweep": sweep,
                     "service_candidates": service})
    ok = [(r["validation"]["p50_ms"], r["M"], r["efSearch"]) for run in runs for r in run["sweep"]
          if r["validation"]["recall_at_8"] >= TARGET_RECALL]
    chosen = None
    if ok:
        _, m, ef = min(ok)
        run = next(r for r in runs if r["M"] == m)
        row = next(r for r in run["sweep"] if r["efSearch"] == ef)
        chosen = {"M": m, "efSearch": ef, "build_s": run["build_s"], "validation": row["validation"],
                  "test": row["test"], "rule": f"fastest validation p50 among the sweep rows with validation "
                                                f"recall@8 >= {TARGET_RECALL}"}
    return {"n": n, "dim": int(xb.shape[1]), "exact_flat": {"build_s": flat_build, **flat_stats},
            "hnsw": runs, "chosen": chosen}


def embedding_throughput(seed: int) -> dict[str, Any] | None:
    """Sentences per second of the cache fill: ``CHUNK`` over the median gap between consecutive chunk files'
    modification times (the fill writes chunk after chunk and does nothing else)."""
    d = cache_dir(seed)
    times = sorted(p.stat().st_mtime for p in d.glob("base-*.npy"))
    if len(times) < 3:
        return None
    gaps = np.diff(times)
    per_s = CHUNK / float(np.median(gaps))
    return {"chunks": len(times), "sentences_per_s": per_s, "projected_1e6_h": LEVEL_N / per_s / 3600}


def levels(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The expected level at 1e6 points, judged from the measured sizes (not measured when 1e6 is absent)."""
    at = next((s for s in payload["sizes"] if s["n"] == LEVEL_N), None)
    name = f"at {LEVEL_N:,} points: search p50 <= {LEVEL_P50_MS} ms with recall@8 >= {TARGET_RECALL}"
    if at is None:
        largest = max((s["n"] for s in payload["sizes"]), default=0)
        return [{"level": name, "measured": f"not measured (largest N measured: {largest:,})", "met": None}]
    c = at["chosen"]
    if c is None:
        return [{"level": name, "measured": f"no swept setting reached validation recall@8 {TARGET_RECALL}",
                 "met": False}]
    t = c["test"]
    return [{"level": name, "measured": f"p50 {t['p50_ms']:.2f} ms, recall@8 {t['recall_at_8']:.4f} "
                                        f"(M {c['M']}, efSearch {c['efSearch']})",
             "met": t["p50_ms"] <= LEVEL_P50_MS and t["recall_at_8"] >= TARGET_RECALL}]


def render_md(payload: dict[str, Any]) -> str:
    """ann.md from ann.json (nothing measured here)."""
    meta = payload["meta"]
    rows = []
    for s in payload["sizes"]:
        c = s["chosen"]
        e = s["exact_flat"]
        if c is None:
            rows.append([f"{s['n']:,}", "none reached the target", "", "", "", "", "", e["p50_ms"], ""])
            continue
        rows.append([f"{s['n']:,}", f"M {c['M']}, efSearch {c['efSearch']}", c["build_s"], c["test"]["p50_ms"],
                     c["test"]["p95_ms"], c["test"]["recall_at_8"], c["test"]["recall_at_8_id_overlap"], e["p50_ms"],
                     e["p50_ms"] / c["test"]["p50_ms"]])
    sweep = []
    for s in payload["sizes"]:
        for run in s["hnsw"]:
            for r in run["sweep"]:
                sweep.append([f"{s['n']:,}", r["M"], r["efSearch"], r["validation"]["recall_at_8"],
                              r["test"]["recall_at_8"], r["test"]["p50_ms"], r["test"]["p95_ms"]])
    svc = [[f"{s['n']:,}", run["M"], run["build_s"], run["service_candidates"]["candidates"],
            run["service_candidates"]["recall_at_8_within_candidates"], run["service_candidates"]["p50_ms"],
            run["service_candidates"]["p95_ms"]] for s in payload["sizes"] for run in s["hnsw"]]
    lv = [[v["level"], v["measured"], {True: "yes", False: "no", None: "not measured"}[v["met"]]]
          for v in payload["levels"]]
    emb = payload.get("embedding")
    emb_line = ("" if not emb else
                f"Embedding throughput of the vector cache fill on this machine: {emb['sentences_per_s']:.0f} "
                f"sentences/s ({emb['chunks']} chunks of {payload['meta']['chunk']:,}), so {LEVEL_N:,} points "
                f"would take about {emb['projected_1e6_h']:.1f} h to embed.\n\n")
    return (
        "# Approximate nearest neighbours for the Tortoise vector leg\n\n"
        "The FAISS HNSW index behind `SimConfig.ann_index=\"hnsw\"` measured alone (no Kuzu store, no re-ranking) "
        "at N points: MiniLM vectors (all-MiniLM-L6-v2, mean pooling, L2-normalised) of generated agent-memory "
        f"sentences (seed {meta['seeds']['sentences']}); {meta['queries']} held-out test queries and "
        f"{meta['queries']} validation queries from separate sentence streams. One query at a time, one thread. "
        f"Recall@{K} = the share of the HNSW top-{K} whose exact inner product reaches the exact {K}-th best of "
        f"FAISS `IndexFlatIP` on the same queries (tie-aware: generated sentences repeat now and then, and equal "
        f"vectors tie at the cut); recall@{K} (ids) = plain id overlap with the exact top-{K}. Exact flat search "
        "is timed in the same run. efSearch and M are chosen on the validation split "
        f"(the fastest validation p50 among settings with validation recall@{K} >= {TARGET_RECALL}); the test "
        "split gives the reported numbers.\n\n"
        + md_table(["N", "chosen", "build (s)", "p50 (ms)", "p95 (ms)", f"recall@{K}", f"recall@{K} (ids)",
                    "exact flat p50 (ms)", "exact / HNSW p50"], rows, floatfmt=".4f") + "\n\n"
        "Expected level:\n\n" + md_table(["level", "measured", "met"], lv) + "\n\n"
        + emb_line
        + f"The service's request (top {SERVICE_CANDIDATES} candidates, efSearch raised to that, then the exact "
        f"cosine rule): recall@{K} is the share of the exact top-{K} inside the candidate set.\n\n"
        + md_table(["N", "M", "build (s)", "candidates", f"recall@{K} within candidates", "p50 (ms)", "p95 (ms)"],
                   svc, floatfmt=".4f") + "\n\n"
        "efSearch sweep (recall and latency trade-off):\n\n"
        + md_table(["N", "M", "efSearch", f"validation recall@{K}", f"test recall@{K}", "test p50 (ms)",
                    "test p95 (ms)"], sweep, floatfmt=".4f") + "\n\n"
        + meta_block(meta, payload.get("run")) + "\n")


def make_figure(payload: dict[str, Any]) -> Any:
    """Test recall@8 against search p50 per HNSW run, one panel per size; each point labelled with its efSearch
    (labels placed apart); the exact scan's p50 and the recall target as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from benchmarks.plotting import place_labels

    sizes = payload["sizes"]
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.6 * len(sizes), 4.6), squeeze=False)
    points: list[tuple[Any, list[float], list[float], list[str]]] = []
    for ax, s in zip(axes[0], sizes, strict=True):
        lx: list[float] = []
        ly: list[float] = []
        lt: list[str] = []
        for run in s["hnsw"]:
            xs = [r["test"]["p50_ms"] for r in run["sweep"]]
            ys = [r["test"]["recall_at_8"] for r in run["sweep"]]
            ax.plot(xs, ys, marker="o", label=f"HNSW M={run['M']}")
            lx += xs
            ly += ys
            lt += [str(r["efSearch"]) for r in run["sweep"]]
        ax.axvline(s["exact_flat"]["p50_ms"], color="grey", ls="--", label="exact flat p50")
        ax.axhline(TARGET_RECALL, color="red", ls=":", lw=1, label=f"recall {TARGET_RECALL}")
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        lo = min(ly)
        ax.set_ylim(lo - (1.0 - lo) * 0.08, 1.0 + (1.0 - lo) * 0.12)
        ax.set_xlabel("search p50 per query (ms, log)")
        ax.set_ylabel(f"recall@{K} (test)")
        ax.set_title(f"N = {s['n']:,} (labels: efSearch)")
        ax.legend(fontsize=7, loc="lower right")
        points.append((ax, lx, ly, lt))
    fig.tight_layout()
    for ax, lx, ly, lt in points:
        place_labels(ax, lx, ly, lt, marker_pt=3.5)
    return fig


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, points: Sequence[int] | None = None,
        track: Any = None, echo: Callable[[str], None] = print) -> list[Path]:
    """Measure every size of ``points`` (default 10,000 / 100,000 / 1,000,000; quick 2,000) and write
    ann.{json,md,png} to ``out_dir``. Missing vectors are embedded first (cached; not part of any timing)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    t_start = time.perf_counter()
    sizes = list(points) if points else ([2_000] if quick else [10_000, 100_000, LEVEL_N])
    for n in sizes:
        if n < K + 1:
            raise ValueError(f"--points must be more than {K}, got {n}")
    ef_values = EF_SWEEP[:4] if quick else EF_SWEEP
    res = []
    track = as_tracker(track)
    for n in track(sorted(sizes), description="ANN sizes"):
        missing = sum(not (cache_dir(seed) / f"base-{k:05d}.npy").exists() for k in range((n + CHUNK - 1) // CHUNK))
        echo(f"N={n}: vectors (cache {cache_dir(seed)}; {missing * CHUNK:,} sentences to embed first)")
        with track.phase(f"N={n:,}: embedding {missing * CHUNK:,} sentences (cached after)"):
            base_vectors(seed, n)
        with track.phase(f"N={n:,}: HNSW builds and the efSearch sweep"):
            res.append(measure_size(seed, n, M_SWEEP, ef_values, echo))
    meta = {"machine": machine_description(), "seeds": {"sentences": seed}, "quick": quick, "queries": 300,
            "k": K, "chunk": CHUNK, "ef_sweep": list(ef_values), "m_sweep": list(M_SWEEP),
            "ef_construction": EF_CONSTRUCTION, "cache": str(cache_dir(seed)),
            "examples": sentences(seed, "base", 0, 5), "wall_s": time.perf_counter() - t_start}
    payload: dict[str, Any] = {"meta": meta, "sizes": res, "embedding": embedding_throughput(seed)}
    payload["levels"] = levels(payload)
    return write_results(out_dir, NAME, payload, render_md, make_figure(payload))


def rerender(out_dir: Path) -> list[Path]:
    """Recompute the level of ``out_dir/ann.json`` and rewrite ann.md and ann.png from it; nothing re-measured."""
    path = out_dir / f"{NAME}.json"
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        payload["levels"] = levels(payload)
        md, fig = render_md(payload), make_figure(payload)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not an ann results file ({exc})") from None
    return write_results(out_dir, NAME, payload, md, fig)


def main(argv: list[str] | None = None) -> list[Path]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd")
    e = sub.add_parser("embed", help="fill the vector cache up to N points (no timing)")
    e.add_argument("seed", type=int)
    e.add_argument("n", type=int)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--points", type=int, action="append")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--render", action="store_true", help="re-render ann.{md,png} from --out/ann.json")
    args = ap.parse_args(argv)
    if args.cmd == "embed":
        print(embed(args.seed, args.n, log=lambda s: print(s, flush=True)))
        return []
    out = args.out or default_out_dir(args.quick)
    paths = rerender(out) if args.render else run(out, quick=args.quick, seed=args.seed, points=args.points)
    for p in paths:
        print(f"wrote {p}")
    return paths


if __name__ == "__main__":
    main()
