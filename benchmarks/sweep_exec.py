"""Where the cells of a sweep run: a local process pool (:func:`run_local`) or Ray (:func:`run_ray`, a local
cluster or one at an address, through :func:`ray_session`, which every benchmark offering ``--executor ray``
uses). Both return the cells' results in the order they were given."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from benchmarks.progress import as_tracker
from benchmarks.sweep_cells import run_cell
from benchmarks.sweep_config import cell_label

Track = Callable[..., Any]


def _no_track(it: Any, description: str = "", total: int | None = None) -> Any:
    return it


def run_local(todo: Sequence[dict[str, Any]], workers: int, track: Track = _no_track) -> list[dict[str, Any]]:
    """Run cells in a pool of ``workers`` fresh (spawned) processes; results in the order of ``todo``.
    With one worker the cells run one after the other in this process (same results, no start-up cost)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    if workers == 1:  # the status names the cell running
        tracker, out = as_tracker(track), []
        with tracker.phase("sweep cells (local)", total=len(todo), unit="cells") as ph:
            for c in todo:
                ph.update(status=cell_label(c))
                out.append(run_cell(c))
                ph.update(advance=1)
        return out
    results: list[dict[str, Any] | None] = [None] * len(todo)
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        futures = {pool.submit(run_cell, c): i for i, c in enumerate(todo)}
        for fut in track(as_completed(futures), description="sweep cells (local)", total=len(todo)):
            results[futures[fut]] = fut.result()
    return [r for r in results if r is not None]


def import_ray() -> Any:
    """Import Ray or raise ImportError with the install hint."""
    try:
        import ray
    except ImportError:
        raise ImportError("Ray is not installed: pip install -e '.[ray]' (or pip install 'ray>=2.9')") from None
    return ray


@contextlib.contextmanager
def ray_session(workers: int, address: str | None = None) -> Iterator[Any]:
    """Ray for one run: joins ``address`` (``auto``, ``ray://host:10001``) or starts a local cluster of ``workers``
    CPUs, with one thread per task and Hugging Face offline; yields the ``ray`` module and shuts down a cluster it
    started (one already running is left as it was). Every benchmark that offers ``--executor ray`` uses it."""
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        env = {"env_vars": {"TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1",
                            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}}
        if address:
            ray.init(address=address, runtime_env=env, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, runtime_env=env, log_to_driver=False)
    try:
        yield ray
    finally:
        if started_here:
            ray.shutdown()


def run_ray(todo: Sequence[dict[str, Any]], workers: int, address: str | None = None,
            track: Track = _no_track) -> list[dict[str, Any]]:
    """Run cells as Ray tasks (one CPU each). ``address`` joins an existing cluster (``auto`` or
    ``ray://host:10001``); without it a local cluster of ``workers`` CPUs is started and shut down afterwards.
    Every node must have memsim installed (``pip install -e .`` in the node's environment)."""
    with ray_session(workers, address) as ray:
        remote = ray.remote(num_cpus=1, max_retries=0)(run_cell)
        refs = [remote.remote(c) for c in todo]
        index = {ref: i for i, ref in enumerate(refs)}
        results: list[dict[str, Any] | None] = [None] * len(todo)
        pending = list(refs)

        def done_iter():  # type: ignore[no-untyped-def]
            nonlocal pending
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                yield ready[0]

        for ref in track(done_iter(), description="sweep cells (ray)", total=len(todo)):
            results[index[ref]] = ray.get(ref)
        return [r for r in results if r is not None]
