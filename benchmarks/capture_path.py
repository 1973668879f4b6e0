"""Where a capture through the resident Tortoise service spends its time, and its engines side by side.

    python -m benchmarks.capture_path STORE.kuzu [--build N] [--captures N] [--out DIR]

The store is copied to a temporary folder and opened as the service opens it (``TortoiseService``: analysed
preset, light MiniLM, caches warmed), in this process without a socket. Each round sends the same kind of two-turn
capture ``memsim bench serve`` sends, once per engine, the engine order alternating between rounds:

- ``indexed``: the defaults, consolidation priors from the incrementally maintained index
  (``store.admission_priors="index"``) and few-id statements on the primary-key index (``store.id_io="keyed"``);
- ``graph dream``: the defaults, except that the ingest dream reads the whole graph (``dream(scope="graph")``,
  the previous dream path) instead of the dirty roots' components (``scope="component"``);
- ``scan``: the previous path, a full scan for the priors (``"scan"``), ``n.id IN $ids`` statements
  (``"listed"``) and the whole-graph ingest dream.

All write identical rows (``tests/tortoise_sim/test_priors.py``, ``tests/tortoise_sim/test_dream_scope.py``). Per capture the time of each stage (admission,
turn writer, payload writer, Session Event/Source, promotion, ingest dream, the service's cache refresh) is taken
with wrappers around those functions. The memory section reads the search cache's population in a fresh process
once as one Kuzu statement and once in id ranges (``TortoiseStore.scan_arrow``) and reports the RSS after each.
Writes ``capture_path.json`` and ``capture_path.md`` (rendered from the JSON) to ``--out``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import write_results

ENGINES: dict[str, dict[str, str]] = {  # store attributes, except dream_scope: the ingest dream's scope
    "indexed": {"admission_priors": "index", "id_io": "keyed", "dream_scope": "component"},
    "graph dream": {"admission_priors": "index", "id_io": "keyed", "dream_scope": "graph"},
    "scan": {"admission_priors": "scan", "id_io": "listed", "dream_scope": "graph"},
}
STAGES = [  # (label, module, attribute); a class attribute is "Class.method"
    ("admission gates", "tortoise_sim.capture", "execute_embed"),
    ("turn writer", "tortoise_sim.capture", "_write_turns"),
    ("payload writer", "tortoise_sim.capture", "_write_payload"),
    ("session event + source", "tortoise_sim.capture", "_session_event_and_source"),
    ("promotion", "tortoise_sim.capture", "promote_point"),
    ("mark dirty", "tortoise_sim.store", "TortoiseStore.mark_dirty"),
    ("ingest dream", "tortoise_sim.store", "TortoiseStore.run_ingest_dream"),
    ("cache refresh", "tortoise_sim.service", "TortoiseService._refresh_caches"),
]
TARGET_MS = 250.0


def _wrap(acc: dict[str, float]) -> list[tuple[Any, str, Any]]:
    """Install timing wrappers (outermost call only per stage); returns what to restore."""
    import importlib

    undo = []
    for label, mod_name, attr in STAGES:
        owner: Any = importlib.import_module(mod_name)
        name = attr
        if "." in attr:
            cls, name = attr.split(".")
            owner = getattr(owner, cls)
        fn = getattr(owner, name)
        depth = [0]

        def timed(*a: Any, _fn: Any = fn, _label: str = label, _depth: list[int] = depth, **k: Any) -> Any:
            _depth[0] += 1
            t0 = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                _depth[0] -= 1
                if not _depth[0]:
                    acc[_label] = acc.get(_label, 0.0) + time.perf_counter() - t0

        setattr(owner, name, timed)
        undo.append((owner, name, fn))
    return undo


def _conversation(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"decision: bench capture {i} keeps the weekly release train"},
            {"role": "assistant", "content": f"Noted: capture {i}."}]


def _p50(xs: list[float]) -> float:
    return round(1000 * statistics.median(xs), 1) if xs else float("nan")


def capture_section(src: Path, rounds: int) -> dict[str, Any]:
    from tortoise_sim.dream import ingest_dream
    from tortoise_sim.service import TortoiseService, rss_bytes

    tmp = Path(tempfile.mkdtemp(prefix="memsim-capture-path-"))
    try:
        for p in src.parent.glob(src.name + "*"):
            if p.is_file():
                shutil.copy2(p, tmp / p.name)
        svc = TortoiseService(tmp / src.name, socket_path=str(tmp / "s.sock"))
        t0 = time.perf_counter()
        svc.open()
        svc.warm()
        warm_s = time.perf_counter() - t0
        rss_warm = rss_bytes()
        store = svc.sim.store
        points = store.count("Point")
        acc: dict[str, float] = {}
        undo = _wrap(acc)
        totals: dict[str, list[float]] = {e: [] for e in ENGINES}
        stages: dict[str, dict[str, list[float]]] = {e: {s[0]: [] for s in STAGES} for e in ENGINES}
        n_sent = 0  # every capture carries a new decision (a repeated one would be consolidated, not written)
        try:
            for r in range(rounds + 1):  # round 0 warms each engine (the prior index is built there)
                order = list(ENGINES) if r % 2 == 0 else list(reversed(ENGINES))
                for engine in order:
                    for k, v in ENGINES[engine].items():
                        if k == "dream_scope":
                            store.ingest_dream_hook = functools.partial(ingest_dream, scope=v)
                        else:
                            setattr(store, k, v)
                    acc.clear()
                    t0 = time.perf_counter()
                    n_sent += 1
                    resp = svc.handle({"v": 1, "op": "capture", "args": {
                        "conversation": _conversation(n_sent), "session_id": f"capture-path-{engine}-{r}"}})
                    dt = time.perf_counter() - t0
                    res = resp.get("result") or {}
                    if not resp.get("ok") or not res.get("ok") or res.get("extracted") != 1:
                        raise RuntimeError(f"capture did not write its one decision: {resp}")
                    if r:
                        totals[engine].append(dt)
                        for label, _, _ in STAGES:
                            stages[engine][label].append(acc.get(label, 0.0))
        finally:
            store.ingest_dream_hook = None
            for owner, name, fn in undo:
                setattr(owner, name, fn)
        rss_end = rss_bytes()
        svc.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    engines = {}
    for e in ENGINES:
        st = {label: _p50(v) for label, v in stages[e].items()}
        engines[e] = {"p50_ms": _p50(totals[e]), "min_ms": round(1000 * min(totals[e]), 1),
                      "stages_p50_ms": st}
    return {"points": points, "rounds": rounds, "service_warm_s": round(warm_s, 1),
            "rss_after_warm_mib": round((rss_warm or 0) / 2**20), "rss_end_mib": round((rss_end or 0) / 2**20),
            "engines": engines,
            "ratio_scan_over_indexed": round(engines["scan"]["p50_ms"] / engines["indexed"]["p50_ms"], 2),
            "ratio_graph_dream_over_indexed": round(engines["graph dream"]["p50_ms"]
                                                    / engines["indexed"]["p50_ms"], 2)}


_SCAN_CHILD = """
import gc, json, sys
import pyarrow as pa
from tortoise_sim.service import rss_bytes
from tortoise_sim.store import TortoiseStore
st = TortoiseStore(sys.argv[1], seed=None, read_only=True, config=None, encoder=False)
before = rss_bytes()
where = "n.is_operator = false AND n.op_type IS NULL AND n.content IS NOT NULL"
returns = ("n.id AS id, n.content AS content, n.pointKind AS point_kind, n.status AS status, "
           "n.session_id AS session_id, n.outdated AS outdated, n.embedding AS embedding")
chunk = None if sys.argv[2] == "none" else int(sys.argv[2])
tbl = st.scan_arrow(where, returns, chunk=chunk)
rows = tbl.num_rows
del tbl
gc.collect()
pa.default_memory_pool().release_unused()
print(json.dumps({"rows": rows, "rss_before_mib": round(before / 2**20), "rss_after_mib": round(rss_bytes() / 2**20)}))
"""


def memory_section(src: Path) -> dict[str, Any]:
    """RSS of a fresh process after reading the search cache's population (all columns the cache reads) as one
    statement and in id ranges, the table dropped afterwards (what stays is Kuzu's and the allocators')."""
    from tortoise_sim.store import SCAN_CHUNK

    out = {}
    for label, chunk in (("one statement", "none"), (f"id ranges of {SCAN_CHUNK:,}", str(SCAN_CHUNK))):
        p = subprocess.run([sys.executable, "-c", _SCAN_CHILD, str(src), chunk], capture_output=True, text=True,
                           timeout=900, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
        if p.returncode:
            raise RuntimeError(f"scan child failed: {p.stderr.strip().splitlines()[-1:]}")
        out[label] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


def levels(result: dict[str, Any]) -> list[dict[str, Any]]:
    cap = result["capture"]
    idx = cap["engines"]["indexed"]
    st = idx["stages_p50_ms"]
    parts = "; ".join(f"{label} {ms}" for label, ms in st.items())
    graph = cap["engines"].get("graph dream")
    prev = (f"; whole-graph ingest dream {graph['stages_p50_ms']['ingest dream']} ms in the graph dream run"
            if graph else "")
    return [{"level": f"capture through the service p50 <= {TARGET_MS:.0f} ms at {cap['points']:,} points",
             "measured": f"{idx['p50_ms']} ms (stages p50 in ms: {parts}{prev}; previous path "
                         f"{cap['engines']['scan']['p50_ms']} ms)",
             "met": idx["p50_ms"] <= TARGET_MS}]


def render_markdown(result: dict[str, Any]) -> str:
    cap = result["capture"]
    lines = ["# Capture path through the service", "",
             f"Store `{result['store']}`: {cap['points']:,} Points; {cap['rounds']} captures per engine (two turns each, one "
             "extracted decision), alternating order; times in ms (p50 per stage). A store built with `--build N` "
             "holds the CBR-world facts `memsim bench serve` uses, embedded with the hashing encoder.", "",
             "| stage | " + " | ".join(cap["engines"]) + " |", "|---|" + "---:|" * len(cap["engines"])]
    labels = list(next(iter(cap["engines"].values()))["stages_p50_ms"])
    for label in labels:
        lines.append(f"| {label} | " + " | ".join(str(e["stages_p50_ms"][label]) for e in cap["engines"].values())
                     + " |")
    lines.append("| **capture total** | " + " | ".join(f"**{e['p50_ms']}**" for e in cap["engines"].values())
                 + " |")
    graph = (f" Whole-graph ingest dream / component ingest dream, whole capture (p50): "
             f"{cap['ratio_graph_dream_over_indexed']}x." if "ratio_graph_dream_over_indexed" in cap else "")
    lines += ["", f"Previous path / new path (p50): {cap['ratio_scan_over_indexed']}x.{graph} Service RSS after warm-up "
              f"{cap['rss_after_warm_mib']} MiB, after the captures {cap['rss_end_mib']} MiB.", ""]
    mem = result.get("memory")
    if mem:
        lines += ["## Reading the search cache's population", "",
                  "| read | rows | RSS before MiB | RSS after MiB |", "|---|---:|---:|---:|"]
        for label, m in mem.items():
            lines.append(f"| {label} | {m['rows']:,} | {m['rss_before_mib']} | {m['rss_after_mib']} |")
        lines.append("")
    lines += ["## Expected levels", "", "| level | measured | met |", "|---|---|---|"]
    for lv in result["levels"]:
        lines.append(f"| {lv['level']} | {lv['measured']} | {'yes' if lv['met'] else 'no'} |")
    from harness.runs import code_text

    lines += ["", f"Code: {code_text(result.get('run'))}."]
    return "\n".join(lines) + "\n"


def build_store(path: Path, n: int, seed: int = 0) -> None:
    """``n`` CBR-world facts written as ``memsim bench serve`` writes its stores (``bulk_create_points``, live,
    credibility high), embedded with the hashing encoder (the capture path's timing does not depend on the vectors'
    values; building with MiniLM takes much longer)."""
    from benchmarks.cost_tortoise import _facts, _fill
    from benchmarks.worlds import CBRWorld
    from tortoise_sim.config import SimConfig
    from tortoise_sim.embed import HashingEncoder
    from tortoise_sim.sdk import Tortoise
    from tortoise_sim.store import StepClock

    t = Tortoise(path, config=SimConfig(), encoder=HashingEncoder(), clock=StepClock(), seed=seed)
    try:
        _fill(t, _facts(CBRWorld(seed=seed), n, seed), lambda it, **_: it)
    finally:
        t.close()


def rerender(out: Path) -> None:
    """Re-render ``capture_path.md`` from ``capture_path.json`` in ``out`` (no measuring)."""
    result = json.loads((out / "capture_path.json").read_text(encoding="utf-8"))
    result["levels"] = levels(result)
    write_results(out, "capture_path", result, render_markdown(result), None)


def run(out_dir: Path, store: Path, *, captures: int = 7, memory: bool = True, build: int | None = None,
        echo: Any = print) -> list[Path]:
    """Measure (building ``store`` with ``build`` points first when it does not exist) and write
    ``capture_path.{json,md}`` to ``out_dir``; returns the written paths."""
    if not store.exists() and build:
        build_store(store, build)
    if not store.exists():
        raise FileNotFoundError(2, "no such store (pass --build N to build one)", str(store))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    result: dict[str, Any] = {"store": store.name, "capture": capture_section(store, captures)}
    if memory:
        result["memory"] = memory_section(store)
    result["levels"] = levels(result)
    paths = write_results(out_dir, "capture_path", result, render_markdown, None)
    echo(render_markdown(result))
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--captures", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--build", type=int, default=None, metavar="N",
                    help="build the store with N points first when it does not exist (see build_store)")
    args = ap.parse_args(argv)
    try:
        run(args.out, args.store, captures=args.captures, memory=not args.no_memory, build=args.build)
    except FileNotFoundError as exc:
        print(f"{exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
