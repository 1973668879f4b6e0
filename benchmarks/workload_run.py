"""What the LoCoMo and LongMemEval design runs share: option checks, encoders, worker pools with their memory
sampling, the run's delivery store, table, statistics, TREC files and explorer page, and the pieces of their pages.

- :func:`check_run_options`, :func:`encoder_store`: the checks and the encoder setting both runs make before any
  work (the embedding store's configuration, torch pinned to one thread unless the store encodes on a GPU);
- :func:`spawn_pool`: spawned worker processes with the parent's progress relay (:class:`benchmarks.progress.Relay`)
  and :class:`RssSampler` (this process and its workers, summed every quarter second);
- :func:`finish_design_run`: the run's per-probe table (:mod:`benchmarks.probe_tables`), the delivery store
  (:mod:`harness.deliveries`), the TREC files and, unless ``explore`` is off, the explorer page
  (:func:`harness.explore.write_explorer`), all under the run's own names in the folder ``run()`` was given;
- rendering: :func:`order_rows`, :func:`excerpt_body` / :func:`example_lines` (the "what each row delivers"
  section), :func:`recall_figure` (recall against tokens with interval bars, and recall per group).
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import set_torch_threads

EXAMPLE_CHARS = 700
FENCE = "`" * 3
EMBED_MODES = ("store", "per-call")


# ------------------------------------------------------------------------------------------------ checks, encoders
def check_out_dir(out_dir: Path) -> None:
    """Refuse an output path that is (or lies under) an existing file before any work starts."""
    for p in (out_dir, *out_dir.parents):
        if p.exists():
            if not p.is_dir():
                raise ValueError(f"{p}: the output folder {'is' if p == out_dir else 'lies under'} a file, not a "
                                 f"folder")
            return


def check_run_options(out_dir: Path, k_values: Sequence[int], workers: int) -> None:
    """The checks both design runs make before any work (one-line ``ValueError``)."""
    check_out_dir(out_dir)
    if not k_values or min(k_values) < 1:
        raise ValueError(f"--k values must be positive, got {list(k_values)}")
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")


def encoder_store(embed: str, embed_store: Path | None) -> dict[str, Any] | None:
    """The embedding store's configuration for ``embed="store"`` (None for ``"per-call"``); torch is pinned to
    one thread unless the store encodes on a GPU."""
    from harness.store_encoders import StoreSession

    if embed not in EMBED_MODES:
        raise ValueError(f"--embed {embed!r}: choose {' or '.join(EMBED_MODES)}")
    store = StoreSession(embed_store).config() if embed == "store" else None
    if not (store and store["device"] == "cuda"):
        set_torch_threads(1)
    return store


# ------------------------------------------------------------------------------------------------ memory, pools
def _proc_kib(path: str, field: str) -> float:
    """The KiB number of the first line of ``path`` that starts with ``field`` (0 when the file or line is gone)."""
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith(field):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def rss_mb(pid: int) -> float:
    """Resident memory of one process in MiB (Linux ``/proc``; 0 when it is gone)."""
    return _proc_kib(f"/proc/{pid}/status", "VmRSS:") / 1024


def pss_mb(pid: int) -> float:
    """Proportional set size of one process in MiB (``/proc/<pid>/smaps_rollup``; 0 when it is gone or the kernel
    lacks the file)."""
    return _proc_kib(f"/proc/{pid}/smaps_rollup", "Pss:") / 1024


def peak_rss_mb() -> float:
    """Peak resident memory of this process and its waited-for children, in MiB (Linux reports KiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def own_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class RssSampler:
    """The resident memory of this process plus its worker processes, summed every quarter second (Linux
    ``/proc``); ``peak_mb`` is the largest sum seen: the run's memory at one moment, measured. ``peak_parts_mb``
    says what that sum was made of (``parent``, each ``workers`` entry), and ``peak_pss_mb`` is the largest sum of
    the same processes' proportional set sizes (a page mapped by several processes, such as a shared library or
    the embedding store's segments, counted once over them: what they take together), sampled at the same
    moments. ``VmRSS`` counts such a page in full in every process that maps it."""

    def __init__(self, pids: Callable[[], list[int]], every_s: float = 0.25) -> None:
        self.pids, self.every_s = pids, every_s
        self.peak_mb = 0.0
        self.peak_pss_mb = 0.0
        self.peak_parts_mb: dict[str, Any] = {"parent": 0.0, "workers": []}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            me, kids = rss_mb(os.getpid()), [rss_mb(p) for p in self.pids()]
            total = me + sum(kids)
            if total > self.peak_mb:
                self.peak_mb = total
                self.peak_parts_mb = {"parent": me, "workers": sorted(kids)}
            self.peak_pss_mb = max(self.peak_pss_mb, pss_mb(os.getpid()) + sum(pss_mb(p) for p in self.pids()))
            if self._stop.wait(self.every_s):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@contextlib.contextmanager
def spawn_pool(workers: int, initializer: Callable[..., None], initargs: Callable[[Any], tuple[Any, ...]],
               track: Any, echo: Callable[[str], None] | None = None) -> Iterator[tuple[Any, RssSampler]]:
    """A pool of ``workers`` spawned processes, each started by ``initializer(*initargs(events))`` where ``events``
    is the queue its progress goes to (relayed to ``track`` and ``echo`` here), with a memory sampler over this
    process and the workers. On any exception (Ctrl-C included) queued work is cancelled before the pool is shut
    down."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    from benchmarks.progress import Relay

    ctx = mp.get_context("spawn")
    events = ctx.Queue()
    relay = Relay(events, track, echo)  # each worker's arm phases shown in this process's display
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=initializer,
                               initargs=initargs(events))
    sampler = RssSampler(lambda: list(getattr(pool, "_processes", None) or {}))
    try:
        yield pool, sampler
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
        sampler.stop()
        relay.close()


# ------------------------------------------------------------------------------------------------ the run's files
def finish_design_run(out_dir: Path, name: str, table_rows: list[dict[str, Any]], *, data: str,
                      config: Mapping[str, Any], probe_sets: Mapping[str, Mapping[str, Any]], stratify: bool,
                      headline_metrics: Sequence[str], writer: Any = None, trec: Any = None, explore: bool = True,
                      echo: Callable[[str], None] | None = None, fault_hook: Callable[[str], None] | None = None,
                      placed: list[Path] | None = None) -> Any:
    """Write the design run's per-probe table, its delivery store (``writer``: a ``DeliveryWriter``), its TREC
    files (``trec``: :class:`benchmarks.probe_tables.TrecFiles`, into ``<out_dir>/<name>/``) and its explorer page
    (``explore``); returns the table as read back (:class:`harness.probes.ProbeRun`). Every path written is
    appended to ``placed`` (a run that fails later removes them). A page over the explorer's size level is not
    an error: the run says so in one line and goes on."""
    from benchmarks.probe_tables import write_table

    placed = placed if placed is not None else []
    run = write_table(out_dir, name, table_rows, data=data, config=config, probe_sets=probe_sets, stratify=stratify,
                      headline_metrics=headline_metrics, fault_hook=fault_hook)
    placed.append(run.path)
    if writer is not None:
        writer.fault_hook = fault_hook
        placed.append(writer.close())
    if trec is not None:
        placed += trec.write(out_dir / name, fault_hook)
    if explore and writer is not None:
        from harness.explore import ExploreError, write_explorer

        try:
            placed.append(write_explorer(out_dir, name, fault_hook=fault_hook))
        except ExploreError as exc:
            if echo:
                echo(f"explorer page not written: {exc}")
    return run


def remove_placed(placed: Sequence[Path], folders: Sequence[Path] = ()) -> None:
    """Remove what a failed run had placed, then ``folders`` (deepest first) when nothing else is in them."""
    for p in placed:
        with contextlib.suppress(OSError):
            p.unlink()
    for d in sorted(set(folders), key=lambda d: -len(d.parts)):
        with contextlib.suppress(OSError):
            d.rmdir()


# ------------------------------------------------------------------------------------------------ rendering
def order_rows(rows: Mapping[str, Any]) -> list[str]:
    """Rows in the order of the arm registry (designs, then baselines), external arms last, then by name."""
    from harness.workloads.arms import SPECS

    rank = {a: i for i, a in enumerate(SPECS)}
    return sorted(rows, key=lambda r: (rank.get(rows[r].get("arm") or "", 99), r))


def fmt(v: Any, spec: str = ".3f") -> str:
    return "n/a" if v is None else format(v, spec)


def excerpt_body(text: str, chars: int = EXAMPLE_CHARS) -> str:
    """A delivered text as a page shows it: whole when short, else its head and tail (``chars`` in all) around
    ``[...]``, with code fences defused so the text cannot close the block it sits in."""
    half = chars // 2
    return (text if len(text) <= chars else text[:half] + "\n[...]\n" + text[-half:]).replace(FENCE, "'" * 3)


def example_lines(examples: Mapping[str, Any], shown: Sequence[str], heading: str, *, with_probe: bool = True
                  ) -> list[str]:
    """The "what each row delivers" section: per shown row its example's question, evidence, delivered turn count
    and head and tail of its text."""
    if not shown:
        return []
    out = [heading, ""]
    for r in shown:
        e = examples[r]
        body = excerpt_body(e["text_excerpt"])
        q = f"Q{e['probe']} " if with_probe else ""
        out += [f"**{r}**: {q}\"{e['question']}\" evidence {', '.join(e['evidence'])}; delivered "
                f"{len(e['delivered_ids'])} turn(s), {e['chars']} characters.", "", FENCE + "text", body, FENCE, ""]
    return out


def _err(iv: Mapping[str, Any] | None, v: float) -> tuple[float, float]:
    if not iv or iv.get("lo") is None or iv.get("hi") is None:
        return 0.0, 0.0
    return max(0.0, v - iv["lo"]), max(0.0, iv["hi"] - v)


def recall_figure(order: Sequence[str], points: Mapping[str, tuple[float, float]], kinds: Mapping[str, str],
                  colors: Mapping[str, Any], groups: Sequence[tuple[str, Sequence[float | None]]], *,
                  stats: Mapping[str, Any] | None, x_metric: str, y_metric: str, xlabel: str, ylabel: str,
                  title: str, bars_title: str, bars_ylabel: str, legend_size: float = 8) -> Any:
    """Recall against tokens per row (log x; squares for designs, circles for baselines; 95% interval bars when
    ``stats`` holds intervals for ``x_metric`` / ``y_metric``; labels placed apart) and recall per group (a
    measured zero is a stroke on the axis, a group without a value has no mark)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.plotting import grouped_bars, place_labels, zero_legend_handle
    from benchmarks.probe_tables import interval

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 6.5), gridspec_kw={"width_ratios": [1, 1.3]})
    xs, ys = [], []
    for r in order:
        x, y = points[r]
        xs.append(x)
        ys.append(y)
        xe, ye = _err(interval(stats, x_metric, r), x), _err(interval(stats, y_metric, r), y)
        if any(xe) or any(ye):
            ax1.errorbar([x], [y], xerr=[[xe[0]], [xe[1]]], yerr=[[ye[0]], [ye[1]]], fmt="none", capsize=0,
                         ecolor=colors[r], elinewidth=0.8, alpha=0.7, zorder=2)
        ax1.scatter([x], [y], color=colors[r], marker="s" if kinds[r] == "design" else "o", s=55,
                    edgecolors="black", linewidths=0.5, zorder=3)
    ax1.set_xscale("log")
    ax1.set_xlabel(xlabel)
    ax1.set_ylabel(ylabel)
    ax1.set_ylim(-0.05, 1.1)
    ax1.set_title(title + ("; bars: 95% intervals" if stats else ""), fontsize=9)
    ax1.grid(alpha=0.3)
    colours = plt.get_cmap("tab10")
    zeros = grouped_bars(ax2, list(order), [(g, vals, colours(i % 10)) for i, (g, vals) in enumerate(groups)])
    ax2.set_xticks(ax2.get_xticks(), list(order), rotation=60, ha="right", fontsize=8)
    ax2.set_ylabel(bars_ylabel)
    ax2.set_ylim(0, 1.25)
    ax2.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax2.set_title(bars_title)
    handles, labels = ax2.get_legend_handles_labels()
    if zeros:
        handles.append(zero_legend_handle())
        labels.append(handles[-1].get_label())
    ax2.legend(handles, labels, fontsize=legend_size, ncols=3, loc="upper center")
    ax2.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    place_labels(ax1, xs, ys, list(order))
    return fig
