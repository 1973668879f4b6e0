"""``locomo-workers.{json,md}``: the same LoCoMo workload run once per worker count, side by side, to choose
``benchmarks.locomo.DEFAULT_WORKERS`` (``python -m benchmarks.locomo_workers 1,2,3 [--full] [--out DIR]``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS_DIR, _jsonable, machine_description, stamp_run, write_atomic
from benchmarks.locomo_page import workers_markdown
from harness.workloads.arms import parse_arms
from harness.workloads.locomo import load_locomo, resolve_locomo_path

WORKERS_NAME = "locomo-workers"


def compare_workers(out_dir: Path, *, workers: tuple[int, ...] = (1, 2, 3), quick: bool = True,
                    data: Path | None = None, conversations: list[str] | None = None, arms: str | None = None,
                    echo: Callable[[str], None] | None = None,
                    fault_hook: Callable[[str], None] | None = None) -> list[Path]:
    """The same LoCoMo workload once per worker count, one run after the other in this process, and
    ``locomo-workers.{json,md}``: each run's wall time, its speed-up over the first (the ratio of the two walls,
    measured side by side here) and whether its results equal the first run's (``comparable``: everything but
    timings and Fractal's wall-clock text). With ``quick`` each named conversation (default: every loaded one) is
    cut as ``--quick`` cuts it. The fastest count is the one ``DEFAULT_WORKERS`` should name."""
    if quick and Path(out_dir).resolve() == RESULTS_DIR.resolve():
        raise ValueError(f"{out_dir}: the committed results are full runs; write a quick comparison elsewhere "
                         "(or pass --full)")
    from benchmarks.locomo import DEFAULT_WORKERS, NAME, comparable, run

    t_start = time.perf_counter()
    src = resolve_locomo_path(data)
    names = conversations or [c.sample_id for c in load_locomo(src)]
    runs: list[dict[str, Any]] = []
    first: dict[str, Any] | None = None
    for n in workers:
        sub = out_dir / f"{WORKERS_NAME}-runs" / f"workers-{n}"
        run(sub, quick=quick, data=data, conversations=names, arms=arms, workers=n, echo=echo, explore=False)
        payload = json.loads((sub / f"{NAME}.json").read_text(encoding="utf-8"))
        convs = [json.loads((sub / NAME / f"{c}.json").read_text(encoding="utf-8")) for c in names]
        mine = {"payload": comparable(payload), "conversations": [comparable(c) for c in convs]}
        first = first or mine
        runs.append({"workers": n, "used": payload["config"]["workers"], "wall_s": payload["wall_s"],
                     "peak_rss_mb": payload["peak_rss_mb"], "identical_to_first": mine == first})
        if echo:
            echo(f"workers {n}: wall {payload['wall_s']:.1f} s")
    base = runs[0]["wall_s"]
    for r in runs:
        r["speedup_vs_first"] = base / r["wall_s"] if r["wall_s"] else None
    fastest = min(runs, key=lambda r: r["wall_s"])["workers"]
    result = {"name": WORKERS_NAME, "config": {"data": src.name, "conversations": names, "quick": quick,
                                               "arms": parse_arms(arms, quick), "workers": list(workers)},
              "runs": runs, "fastest_workers": fastest, "default_workers": DEFAULT_WORKERS,
              "meta": {"machine": machine_description(), "quick": quick,
                       "wall_s": time.perf_counter() - t_start}}
    md = workers_markdown(stamp_run(result))
    jp, mp = out_dir / f"{WORKERS_NAME}.json", out_dir / f"{WORKERS_NAME}.md"
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(jp, (json.dumps(_jsonable(result), indent=2) + "\n").encode("utf-8"), fault_hook,
                 "locomo.workers.write")
    write_atomic(mp, (md + "\n").encode("utf-8"), fault_hook, "locomo.workers.write")
    return [jp, mp]


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.locomo_workers COUNTS [--full] [--out DIR] [--arms A,B]``."""
    import argparse

    from benchmarks.common import set_torch_threads
    from harness.results_dir import default_out

    ap = argparse.ArgumentParser(prog="python -m benchmarks.locomo_workers",
                                 description="Run the LoCoMo workload once per worker count and write "
                                             "locomo-workers.{json,md}.")
    ap.add_argument("counts", help="comma-separated worker counts, e.g. 1,2,3")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default the bench run folder; "
                                                          "benchmarks/results takes --full runs only)")
    ap.add_argument("--full", action="store_true", help="whole conversations, not quick slices")
    ap.add_argument("--arms", default=None, help="comma-separated arms (default: every default arm)")
    args = ap.parse_args(argv)
    set_torch_threads(1)
    try:
        counts = tuple(int(x) for x in args.counts.split(","))
        for path in compare_workers(args.out or default_out("bench"), workers=counts, quick=not args.full,
                                    arms=args.arms, echo=print):
            print(f"wrote {path}")
    except (OSError, ValueError) as exc:
        print(f"error: {' '.join(str(exc).split())}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
