"""Two dreams in a row on an ``ep_scaling`` store, each run in a child process: Kuzu's abort on in-place edge updates.

Kuzu 0.11.3 fails (``KU_UNREACHABLE`` in ``csr_node_group.cpp``) an in-place SET of IMPL edge properties on a
store whose earlier edge updates went through a CHECKPOINT (an explicit one, or the one closing a store does). A
dream flush writes every active factor's messages onto its edges, so the second dream of such a store meets it.
This module reproduces it where a crash cannot take the caller down: each scenario runs in a child process
(``python -m benchmarks.dream_abort --child ...``), and the parent records the exit status (the signal, when one
killed the child), the tail of its stderr and, when the child completed, what it measured.

A scenario: the ``ep_scaling`` graph of F factors is bulk-loaded into a store and closed (built once per (F,
seed) into a cache folder and copied per run); a run opens the copy, dreams (``mode="local", budget=F``, no
calibration) with the first edge-write path, marks every claim dirty again (``TortoiseStore.mark_dirty``, as new
writes would), checkpoints (``between="checkpoint"``), reopens (``"reopen"``) or does neither (``"none"``, which
also turns Kuzu's automatic checkpoint off for the run: a WAL past 16 MiB, as two 10,000-factor dreams write,
checkpoints on its own and corrupts in-place-updated edges as well), and
dreams again with the second edge-write path (``dream(..., edge_write=...)``: ``"update"`` the previous in-place
SET, ``"rewrite"`` the default delete-and-create). It reports both dreams' timings and results, and a digest of
the store afterwards (every Point's EP columns and timestamps, every edge message, every feed row, and the edge
order a snapshot reads), so runs can be compared: a checkpoint changes nothing a read returns, so the default path
with a checkpoint must leave the same store as the old path without one.

    .venv/bin/python -m benchmarks.dream_abort --factors 10000            # old path aborts, default completes
    .venv/bin/python -m benchmarks.dream_abort --sizes 2047 2048 2250     # the old path at each size
    .venv/bin/python -m benchmarks.dream_abort --bisect 1000 3000         # a failing F whose F - 1 completes

The base stores are cached in ``--cache`` (default ``$TMPDIR/memsim-dream-abort``); a cached base is reused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BETWEEN = ("checkpoint", "reopen", "none")
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "memsim-dream-abort"
CHILD_TIMEOUT_S = 1800


def _open(path: Path, seed: int) -> Any:
    from benchmarks import ep_scaling as es
    from tortoise_sim.config import SimConfig
    from tortoise_sim.store import StepClock, TortoiseStore

    return TortoiseStore(path, config=SimConfig(embedder="none"), clock=StepClock(), seed=seed,
                         buffer_pool_size=es.BUFFER_POOL)


def base_store(n_factors: int, seed: int, cache: Path) -> Path:
    """The closed, bulk-loaded ``ep_scaling`` store of (n_factors, seed) in ``cache``, built when missing (into a
    temporary name first, so an interrupted build is never taken for a finished one)."""
    from benchmarks import ep_scaling as es

    path = cache / f"ep_scaling_{n_factors}_{seed}.kuzu"
    if path.exists():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    part = cache / f".building_{n_factors}_{seed}_{os.getpid()}.kuzu"
    store = _open(part, seed)
    try:
        es.bulk_load(store, es.generate(n_factors, seed))
    finally:
        store.close()
    for suffix in (".wal", ".shadow"):
        if Path(str(part) + suffix).exists():  # a closed store leaves none; a leftover would be lost by the copy
            raise RuntimeError(f"{part}: Kuzu left {suffix} after close")
    part.replace(path)
    return path


def _digest(store: Any) -> tuple[str, dict[str, int]]:
    from benchmarks.ep_scaling import store_state as _store_state

    pts, edges, feed = _store_state(store)
    order = _edges(store)
    h = hashlib.sha256(pickle.dumps((pts, edges, feed, order))).hexdigest()[:16]
    return h, {"points": len(pts), "edges": len(edges), "feed_rows": len(feed)}


def _edges(store: Any) -> list[tuple[Any, ...]]:
    """Every IMPL/NAND edge as a snapshot reads it, in its order."""
    from tortoise_sim import dream as dr

    return [(e.type, e.src, e.tgt, e.idx, e.direction, e.weight, e.msg, e.back_msg)
            for e in dr.snapshot(store).edges]


def _remove(path: Path) -> None:
    for suffix in ("", ".wal", ".shadow"):
        p = Path(str(path) + suffix)
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists():
            p.unlink()


def scenario(n_factors: int, seed: int, cache: Path, work: Path, edge_writes: tuple[str, str],
             between: str) -> dict[str, Any]:
    """One run (see module doc), in this process: what the child does. Returns the two dreams' timings and
    results and the digest of the store afterwards."""
    from tortoise_sim import dream as dr
    from tortoise_sim.ep import gauss_jacobi_nodes

    if between not in BETWEEN:
        raise ValueError(f"between must be one of {BETWEEN}, got {between!r}")
    base = base_store(n_factors, seed, cache)
    _remove(work)
    shutil.copyfile(base, work)
    store = _open(work, seed)
    if between == "none":  # no checkpoint at all: Kuzu's automatic one (a WAL over 16 MiB) would corrupt the edges too
        store.execute("CALL auto_checkpoint=false")
    dreams = []
    try:
        claims = [r["id"] for r in store.query("MATCH (n:Point) WHERE n.is_operator = false RETURN n.id AS id")]
        kept = None
        for k, edge_write in enumerate(edge_writes):
            if k:
                store.mark_dirty(claims)
                before = _edges(store)
                if between == "checkpoint":
                    store.execute("CHECKPOINT")
                elif between == "reopen":
                    store.close()
                    store = _open(work, seed)
                kept = _edges(store) == before
            gauss_jacobi_nodes.cache_clear()
            print(f"dream {k + 1} (edge_write={edge_write}) ...", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            res = dr.dream(store, mode="local", budget=n_factors, require_calibration=False, edge_write=edge_write)
            dreams.append({"edge_write": edge_write, "wall_s": time.perf_counter() - t0,
                           "iterations": res.iterations, "converged": res.converged_all,
                           "affected_claims": len(res.affected_claims), "events": res.events})
        digest, counts = _digest(store)
    finally:
        store.close()
        _remove(work)
    return {"factors": n_factors, "seed": seed, "between": between, "edge_writes": list(edge_writes),
            "dreams": dreams, "edges_kept_between": kept, "digest": digest, **counts}


def run_child(n_factors: int, seed: int, cache: Path, edge_writes: tuple[str, str], between: str, *,
              timeout: float = CHILD_TIMEOUT_S) -> dict[str, Any]:
    """`scenario` in a child process. ``completed`` is True when the child exited 0 with its result;
    otherwise ``returncode``, ``signal`` (its name, when a signal ended the child) and ``stderr_tail`` say what
    happened (``ku_unreachable``: Kuzu's assertion is in that tail)."""
    cache.mkdir(parents=True, exist_ok=True)
    work = cache / f"work_{n_factors}_{seed}_{os.getpid()}_{time.monotonic_ns()}.kuzu"
    spec = {"factors": n_factors, "seed": seed, "cache": str(cache), "work": str(work),
            "edge_writes": list(edge_writes), "between": between}
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "benchmarks.dream_abort", "--child", json.dumps(spec)],
                              capture_output=True, text=True, timeout=timeout, cwd=root, env=env)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out = None, exc.stdout or ""
        err = (exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr) or ""
        out = out.decode() if isinstance(out, bytes) else out
    finally:
        _remove(work)
    result = None
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if rc == 0 and lines:
        result = json.loads(lines[-1])
    sig = None
    if rc is not None and rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = str(-rc)
    tail = "\n".join(err.strip().splitlines()[-6:])
    return {"factors": n_factors, "edge_writes": list(edge_writes), "between": between,
            "completed": result is not None, "returncode": rc, "signal": sig, "timed_out": rc is None,
            "ku_unreachable": "KU_UNREACHABLE" in err, "stderr_tail": tail[-1500:],
            "child_wall_s": time.perf_counter() - t0, "result": result}


def probe_sizes(sizes: list[int], seed: int, cache: Path, *, between: str = "checkpoint",
                log: Any = None) -> list[dict[str, Any]]:
    """The old path (``update`` twice) at each factor count, one child each: which sizes fail."""
    probes = []
    for n in sizes:
        r = run_child(n, seed, cache, ("update", "update"), between)
        probes.append({"factors": n, "completed": r["completed"], "ku_unreachable": r["ku_unreachable"],
                       "returncode": r["returncode"], "signal": r["signal"]})
        if log:
            log(f"  {n} factors: {'completed' if r['completed'] else 'failed'} (rc {r['returncode']}"
                f"{', KU_UNREACHABLE' if r['ku_unreachable'] else ''})")
    return probes


def failing_boundary(lo: int, hi: int, seed: int, cache: Path, *, between: str = "checkpoint",
                     log: Any = None) -> dict[str, Any]:
    """Bisect [lo, hi] (``hi`` failing, ``lo`` completing) for a factor count F whose old path fails while F - 1
    completes. The failure is not monotone in F (seed 0: 2,048 fails, 2,250 and 2,281 complete), so this is a
    boundary, not the smallest failing size; every probe is recorded. ``boundary`` is None when ``hi`` completes
    or ``lo`` fails."""
    probes: list[dict[str, Any]] = []

    def fails(n: int) -> bool:
        probes.extend(probe_sizes([n], seed, cache, between=between, log=log))
        return not probes[-1]["completed"]

    if not fails(hi) or fails(lo):
        return {"lo": lo, "hi": hi, "boundary": None, "probes": probes}
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(mid):
            hi = mid
        else:
            lo = mid
    return {"lo": lo, "hi": hi, "boundary": hi, "probes": probes}


RUNS = {  # name: (edge write of the first dream, of the second, between them: None = the compare's `between`)
    "old": (("update", "update"), None),
    "default": (("rewrite", "rewrite"), None),
    "old_then_default": (("update", "rewrite"), None),
    "reference": (("update", "update"), "none"),
}


def compare(n_factors: int, seed: int, cache: Path, *, between: str = "checkpoint",
            runs: tuple[str, ...] = tuple(RUNS)) -> dict[str, Any]:
    """The runs of `RUNS` side by side, each in its own child: the old path with ``between`` (the failure), the
    default path with it, the old path then the default one (a store the old code wrote, then the new code), and
    the old path without a checkpoint (the reference: the same reads, no CHECKPOINT). ``same_as_reference``
    compares each completed run's digest with the reference's (False when either did not complete)."""
    out = {name: run_child(n_factors, seed, cache, RUNS[name][0], RUNS[name][1] or between) for name in runs}
    ref = out.get("reference", {}).get("result")
    same = {k: (r["result"] is not None and ref is not None and r["result"]["digest"] == ref["digest"])
            for k, r in out.items() if k != "reference"}
    return {"factors": n_factors, "seed": seed, "between": between, "runs": out, "same_as_reference": same}


def _child(spec_text: str) -> None:
    spec = json.loads(spec_text)
    out = scenario(int(spec["factors"]), int(spec["seed"]), Path(spec["cache"]), Path(spec["work"]),
                   tuple(spec["edge_writes"]), spec["between"])  # type: ignore[arg-type]
    print(json.dumps(out), flush=True)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--factors", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--between", choices=BETWEEN, default="checkpoint")
    ap.add_argument("--bisect", type=int, nargs=2, metavar=("LO", "HI"), default=None,
                    help="bisect [LO, HI] for a factor count whose old path fails while one fewer completes")
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="run the old path at each of these sizes")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--json", type=Path, default=None, help="also write the result to this file")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        _child(args.child)
        return {}
    log = lambda m: print(m, flush=True)  # noqa: E731
    if args.sizes:
        out = {"probes": probe_sizes(args.sizes, args.seed, args.cache, between=args.between, log=log)}
    elif args.bisect:
        out = failing_boundary(args.bisect[0], args.bisect[1], args.seed, args.cache, between=args.between, log=log)
    else:
        out = compare(args.factors, args.seed, args.cache, between=args.between)
        for k, r in out["runs"].items():
            res = r["result"]
            walls = ", ".join(f"{d['wall_s']:.2f}" for d in res["dreams"]) if res else ""
            print(f"{k:17s} {'+'.join(r['edge_writes']):15s} {r['between']:10s} "
                  f"{'completed' if r['completed'] else 'FAILED'} rc={r['returncode']} signal={r['signal']} "
                  f"KU_UNREACHABLE={r['ku_unreachable']} dreams s: {walls}", flush=True)
        print("same as reference:", out["same_as_reference"], flush=True)
    text = json.dumps(out, indent=1)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    else:
        print(text[-3000:] if (args.bisect or args.sizes) else "")
    return out


if __name__ == "__main__":
    main()
