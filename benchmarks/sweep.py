"""``memsim bench sweep CONFIG.yaml``: a grid of seeds x configurations x sizes, with 95% confidence intervals.

A sweep is described by a YAML file (see ``benchmarks/sweeps/*.yaml``)::

    name: cbr-loop                # results go to sweep-<name>.{json,md,png}
    benchmark: cbr-loop           # selectors | cbr-loop | locomo
    seeds: [0, 1, 2, 3, 4]        # or a count: 5 means 0..4
    sizes:                        # each merged into the cell's parameters
      - {rounds: 5, per_round: 80}
    configs:                      # what runs inside one cell (benchmark specific, see below)
      - {arm: np, k: 8}
      - {arm: pm, k: 8}
    metric: mean_accuracy         # the headline metric of the differences table
    metrics: [mean_accuracy, final_accuracy]   # columns of the table (default: metric only)
    compare:                      # pairs of row names whose paired difference is tested
      - ["NP (pooler) K=8", "PM (classifier) K=8"]
    workers: 2                    # processes (local) or concurrent tasks (Ray, local cluster)

Every cell is a pure function of ``{"benchmark", "seed", "config", "size"}`` (:func:`run_cell`): it builds its own
world from the seed, runs in its own temporary directory with torch and BLAS pinned to one thread, and returns
named rows of metrics. The local executor
(a process pool) and the Ray executor therefore return identical rows for identical cells; only ``seconds`` differs.

Cells per benchmark:

- ``selectors``: config ``{"selectors": [oracle, np_pooler, np_mean, bm25, rrf, recency, random, pm]}`` (any
  subset; ``rrf`` needs ``bm25`` and ``np_mean``), size ``{"n_cases", "n_queries"}``. Same seeds and code path as
  ``memsim bench selectors`` (world ``seed``, queries ``seed + 1000``, random ranking ``seed``); the real-corpus
  section is not part of a cell. One row per selector (``pm`` gives three rows).
- ``cbr-loop``: config ``{"arm": none|np|np-mean|pm|oracle, "k": K}``, size ``{"rounds", "per_round"}``. Same
  code path as ``memsim bench cbr-loop`` (:func:`benchmarks.cbr_loop.run_arm`). One row per cell.
- ``locomo``: config ``{"arms": "a,b", "k": [4, 8], "data": PATH}``, size ``{"conversation": "conv-26",
  "quick": false}``; the arms of ``memsim bench locomo`` over that conversation (the data path defaults to
  ``$MEMSIM_LOCOMO_DATA``, else the copy ``memsim data fetch locomo`` placed in the data folder). One row per delivered row, headline metrics only (no timings).

Aggregation: for every (size, row, metric), the mean over seeds and a two-sided 95% t interval
(mean +- t_{0.975, n-1} * sd / sqrt(n)). Differences listed under ``compare`` are paired by seed (both rows of one
seed see the same world): the mean difference, its 95% t interval, the paired t-test p-value and the
Holm-adjusted p-value over all listed pairs; "significant" means Holm-adjusted p < 0.05.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from benchmarks.common import machine_description, md_table, set_torch_threads, write_results
from benchmarks.progress import as_tracker

BENCHMARKS = ("selectors", "cbr-loop", "locomo")
SELECTOR_STEPS = ("oracle", "np_pooler", "np_mean", "bm25", "rrf", "recency", "random", "pm")


SEED_LIMIT = 2**32
"""Seeds seed numpy and torch: each must be in ``[0, 2**32)``."""

# Row names each selector step gives (one source: the cell names its rows from here; ``pm`` gives three rows).
SELECTOR_ROWS: dict[str, tuple[str, ...]] = {
    "oracle": ("oracle (hidden truth)",), "np_pooler": ("NP faithful (pooler)",), "np_mean": ("NP mean-pooling",),
    "bm25": ("BM25 (bm25s)",), "rrf": ("hybrid RRF (BM25 + mean)",), "recency": ("recency",), "random": ("random",),
    "pm": ("PM untrained head (bootstrap ckpt)", "PM classifier (burn-in pairs)", "PM classifier (family labels)"),
}
CBR_NAMES = {"none": "no memory", "np": "NP (pooler)", "np-mean": "NP (mean pooling)", "pm": "PM (classifier)",
             "oracle": "oracle"}
CBR_METRICS = ("mean_accuracy", "final_accuracy", "bank_cases", "share_with_positive_example",
               "share_copied_right_plan")
"""The metrics of a cbr-loop row, besides ``round_<r>`` for every round r."""
LOCOMO_METRICS = ("evidence_recall", "all_evidence_rate", "stored_recall", "delivered_turns", "tokens_mean",
                  "answer_present")
"""The headline metrics of a locomo row (no ``f1``: a sweep cell runs no answering LM)."""

_Count = Annotated[int, Field(strict=True, ge=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SelectorsCellConfig(_Strict):
    """``configs`` entry of a selectors sweep."""

    selectors: list[Literal[SELECTOR_STEPS]] = Field(min_length=1)  # type: ignore[valid-type]
    np_faithful_checks: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _rrf(self) -> SelectorsCellConfig:
        if "rrf" in self.selectors and not {"bm25", "np_mean"} <= set(self.selectors):
            raise ValueError("the rrf selector needs bm25 and np_mean in the same config")
        return self


class SelectorsCellSize(_Strict):
    """``sizes`` entry of a selectors sweep (the bank needs at least 20 cases, as ``memsim bench selectors``)."""

    n_cases: int = Field(default=2000, strict=True, ge=20)
    n_queries: _Count = 300
    quick: bool = False


class CbrCellConfig(_Strict):
    """``configs`` entry of a cbr-loop sweep."""

    arm: Literal[tuple(CBR_NAMES)]  # type: ignore[valid-type]
    k: _Count = 8


class CbrCellSize(_Strict):
    """``sizes`` entry of a cbr-loop sweep."""

    rounds: _Count = 5
    per_round: _Count = 80


class LocomoCellConfig(_Strict):
    """``configs`` entry of a locomo sweep."""

    arms: str | None = None
    k: list[_Count] = Field(default_factory=lambda: [4, 8], min_length=1)
    data: str | None = None


class LocomoCellSize(_Strict):
    """``sizes`` entry of a locomo sweep."""

    conversation: str | None = None
    quick: bool = False


CELL_MODELS: dict[str, tuple[type[_Strict], type[_Strict]]] = {
    "selectors": (SelectorsCellConfig, SelectorsCellSize), "cbr-loop": (CbrCellConfig, CbrCellSize),
    "locomo": (LocomoCellConfig, LocomoCellSize)}


class SweepConfig(BaseModel):
    """A sweep file, validated (unknown keys are errors). :func:`load_config` also checks each ``configs`` and
    ``sizes`` entry against its benchmark (:data:`CELL_MODELS`), the metrics and the row names of ``compare``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    benchmark: Literal["selectors", "cbr-loop", "locomo"]
    seeds: list[Annotated[int, Field(strict=True, ge=0, lt=SEED_LIMIT)]]
    configs: list[dict[str, Any]] = Field(min_length=1)
    sizes: list[dict[str, Any]] = Field(default_factory=lambda: [{}], min_length=1)
    metric: str
    metrics: list[str] = Field(default_factory=list)
    compare: list[tuple[str, str]] = Field(default_factory=list)
    workers: int = Field(default=1, strict=True, ge=1)
    description: str = ""

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            if v < 1:
                raise ValueError("a seed count must be at least 1")
            return list(range(v))
        return v

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        if not v or len(set(v)) != len(v):
            raise ValueError("seeds must be a non-empty list of distinct integers")
        return v

    def table_metrics(self) -> list[str]:
        return self.metrics or [self.metric]


def _where(loc: Sequence[Any]) -> str:
    return ".".join(str(p) for p in loc) or "(top)"


def _error_line(path: Path, exc: ValidationError, prefix: tuple[Any, ...], model: type[BaseModel]) -> str:
    """The first validation error as ``<file>: <key>: <what>`` (an unknown key lists the keys allowed there; it
    comes first, since a misspelled key is also a missing one)."""
    errors = exc.errors()
    e = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
    loc = (*prefix, *e["loc"])
    if e["type"] == "extra_forbidden" and len(e["loc"]) == 1:
        allowed = ", ".join(model.model_fields)
        return f"{path}: {_where(loc)}: unknown key (allowed here: {allowed})"
    msg = e["msg"].removeprefix("Value error, ")
    if e["type"] == "missing":
        msg = "required key missing"
    elif isinstance(e.get("input"), str | int | float | bool) and e["type"] != "value_error":
        msg += f", not {e['input']!r}"
    return f"{path}: {_where(loc)}: {msg}"


def _close(name: str, options: Sequence[str]) -> str:
    import difflib

    by_lower = {o.lower(): o for o in options}
    near = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean {by_lower[near[0]]!r}?" if near else ""


def selector_metrics() -> tuple[str, ...]:
    """The metric names of a selectors row: the keys :func:`benchmarks.metrics.evaluate_run` returns."""
    from benchmarks.metrics import evaluate_run

    return tuple(evaluate_run([[0]], [np.array([0])], positive_label=np.array([True])))


def known_metrics(cfg: SweepConfig) -> tuple[str, ...]:
    """Every metric a row of this sweep carries (cbr-loop: ``round_<r>`` up to the fewest rounds of any size)."""
    if cfg.benchmark == "selectors":
        return selector_metrics()
    if cfg.benchmark == "cbr-loop":
        rounds = min(CbrCellSize.model_validate(size).rounds for size in cfg.sizes)
        return (*CBR_METRICS, *(f"round_{r}" for r in range(1, rounds + 1)))
    return LOCOMO_METRICS


def row_names(cfg: SweepConfig) -> list[str] | None:
    """The row names the cells of this sweep give, or None for locomo (its arms name their rows as they are
    built; :func:`_locomo_row_known` checks a name's arm and K instead)."""
    names: list[str] = []
    for conf in cfg.configs:
        if cfg.benchmark == "selectors":
            steps = SelectorsCellConfig.model_validate(conf).selectors
            names += [n for step in SELECTOR_STEPS if step in steps for n in SELECTOR_ROWS[step]]
        elif cfg.benchmark == "cbr-loop":
            c = CbrCellConfig.model_validate(conf)
            names.append(f"{CBR_NAMES[c.arm]} K={c.k}")
        else:
            return None
    return list(dict.fromkeys(names))


def _locomo_row_known(name: str, arms: Sequence[str], ks: set[int]) -> bool:
    """A LoCoMo row is named by its arm: ``<arm>``, ``<arm>@<K>`` for a K of the config, or ``<arm>-<part>`` for a
    design or external arm that gives several rows (Tortoise's volunteered and evaluation rows)."""
    from harness.workloads.arms import SPECS

    for arm in arms:
        several = arm not in SPECS or SPECS[arm].kind != "baseline"
        if name == arm or (several and name.startswith(arm + "-") and name not in arms):
            return True
        head, sep, k = name.rpartition("@")
        if sep and head == arm and k.isdigit() and int(k) in ks:
            return True
    return False


def _check_against_benchmark(path: Path, cfg: SweepConfig) -> None:
    config_model, size_model = CELL_MODELS[cfg.benchmark]
    for key, entries, model in (("configs", cfg.configs, config_model), ("sizes", cfg.sizes, size_model)):
        for i, entry in enumerate(entries):
            try:
                model.model_validate(entry)
            except ValidationError as exc:
                raise ValueError(_error_line(path, exc, (key, i), model)) from None
    metrics = known_metrics(cfg)
    for key, name in [("metric", cfg.metric), *((f"metrics.{i}", m) for i, m in enumerate(cfg.metrics))]:
        if name not in metrics:
            raise ValueError(f"{path}: {key}: unknown metric {name!r} for {cfg.benchmark}{_close(name, metrics)} "
                             f"(known: {', '.join(metrics)})")
    rows = row_names(cfg)
    arms: list[str] = []
    ks: set[int] = set()
    if rows is None:  # locomo
        from harness.workloads.arms import parse_arms

        for i, conf in enumerate(cfg.configs):
            c = LocomoCellConfig.model_validate(conf)
            for size in cfg.sizes:
                try:
                    arms += parse_arms(c.arms, LocomoCellSize.model_validate(size).quick)
                except ValueError as exc:
                    raise ValueError(f"{path}: configs.{i}.arms: {str(exc).replace('--arms', 'arms')}") from None
            ks |= set(c.k)
        arms = list(dict.fromkeys(arms))
    for i, pair in enumerate(cfg.compare):
        if pair[0] == pair[1]:
            raise ValueError(f"{path}: compare.{i}: a row compared with itself ({pair[0]!r})")
        for j, name in enumerate(pair):
            known = name in rows if rows is not None else _locomo_row_known(name, arms, ks)
            if not known:
                listed = rows if rows is not None else [f"{a}[@K]" for a in arms]
                raise ValueError(f"{path}: compare.{i}.{j}: no row {name!r} in this sweep"
                                 f"{_close(name, rows or [])} (rows: {', '.join(listed)})")


def load_config(path: Path) -> SweepConfig:
    """Read and validate a sweep file; ValueError (one line naming the file and the key) when it cannot be used:
    unknown keys (at the top and in every ``configs``/``sizes`` entry), out-of-range numbers, unknown selectors,
    arms and metrics, and ``compare`` rows that no cell of the sweep gives."""
    import yaml

    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not valid UTF-8 (byte offset {exc.start})") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a sweep file is a YAML mapping")
    try:
        cfg = SweepConfig.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(_error_line(path, exc, (), SweepConfig)) from None
    _check_against_benchmark(path, cfg)
    return cfg


def cells(cfg: SweepConfig) -> list[dict[str, Any]]:
    """Every cell of the grid, in a fixed order (size, config, seed)."""
    return [{"benchmark": cfg.benchmark, "seed": seed, "config": dict(conf), "size": dict(size)}
            for size in cfg.sizes for conf in cfg.configs for seed in cfg.seeds]


def size_label(size: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in size.items()) or "default"


def cell_label(cell: dict[str, Any]) -> str:
    """``<config>, seed <s>[, <size>]``: which cell is running (the progress status)."""
    size = f", {size_label(cell['size'])}" if cell["size"] else ""
    return f"{size_label(cell['config'])}, seed {cell['seed']}{size}"


# ------------------------------------------------------------------------------------------------------ one cell
def run_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """Run one cell; ``{"cell", "rows": [{"name", metrics...}], "seconds", "pid"}``. Pure in everything but
    ``seconds`` and ``pid``."""
    from threadpoolctl import threadpool_limits

    import harness  # noqa: F401  (offline environment variables)

    set_torch_threads(1)
    t0 = time.perf_counter()
    bench = cell["benchmark"]
    cells_fn = {"selectors": _selectors_cell, "cbr-loop": _cbr_cell, "locomo": _locomo_cell}
    if bench not in cells_fn:
        raise ValueError(f"unknown benchmark {bench!r}")
    # BLAS pinned to one thread as well: its summation order depends on the thread count, which moves near-tied
    # scores (e.g. deep in the rankings that RRF fuses); pinned, a cell gives the same rows in any worker process.
    with threadpool_limits(1):
        rows = cells_fn[bench](cell["seed"], cell["config"], cell["size"])
    return {"cell": cell, "rows": rows, "seconds": time.perf_counter() - t0, "pid": os.getpid()}


def _selectors_cell(seed: int, config: dict[str, Any], size: dict[str, Any]) -> list[dict[str, Any]]:
    """The selectors of ``config['selectors']`` on the world of ``seed``, as ``memsim bench selectors`` runs them."""
    from benchmarks import rankers
    from benchmarks import selectors as sel
    from benchmarks.metrics import evaluate_run
    from benchmarks.worlds import CBRWorld

    steps = [s for s in SELECTOR_STEPS if s in config["selectors"]]
    if "rrf" in steps and not {"bm25", "np_mean"} <= set(steps):
        raise ValueError("the rrf selector needs bm25 and np_mean in the same config")
    n_cases = int(size.get("n_cases", 2000))
    n_queries = int(size.get("n_queries", 300))
    quick = bool(size.get("quick", False))
    depth = sel.DEPTH
    world = CBRWorld(seed=seed)
    bank = world.bank(n_cases, seed=seed)
    queries = world.queries(n_queries, seed=seed + 1000)
    qrels = world.qrels(queries, bank)
    bank_q, query_q = bank.questions(), queries.questions()
    rows: list[dict[str, Any]] = []
    runs: dict[str, list[np.ndarray]] = {}

    def add(name: str, ranks: list[np.ndarray]) -> None:
        rows.append({"name": name, **evaluate_run([list(r) for r in ranks], qrels, positive_label=bank.label)})
        runs[name] = ranks

    for step in steps:
        if step == "oracle":
            add(SELECTOR_ROWS["oracle"][0], rankers.rank_oracle(qrels, depth))
        elif step == "np_pooler":
            ranks, _ = sel._np_pooler_rankings(bank_q, query_q, int(config.get("np_faithful_checks", 0)))
            add(SELECTOR_ROWS["np_pooler"][0], ranks)
        elif step == "np_mean":
            from harness.embedding import get_encoder

            enc = get_encoder("minilm-mean")
            add(SELECTOR_ROWS["np_mean"][0], rankers.rank_by_vectors(enc.encode(bank_q), enc.encode(query_q), depth))
        elif step == "bm25":
            add(SELECTOR_ROWS["bm25"][0], rankers.rank_bm25(bank_q, query_q, depth))
        elif step == "rrf":
            add(SELECTOR_ROWS["rrf"][0], rankers.rank_rrf([runs[SELECTOR_ROWS["bm25"][0]], runs[SELECTOR_ROWS["np_mean"][0]]],
                                                         depth))
        elif step == "recency":
            add(SELECTOR_ROWS["recency"][0], rankers.rank_recency(n_cases, n_queries, depth))
        elif step == "random":
            add(SELECTOR_ROWS["random"][0], rankers.rank_random(n_cases, n_queries, depth, seed))
        elif step == "pm":
            notes: list[str] = []
            with tempfile.TemporaryDirectory(prefix="memsim-sweep-") as td:
                pm = sel._pm_rows(world, bank, queries, qrels, seed, quick, Path(td),
                                  lambda it, description="", total=None: it, notes)
            if not pm:
                raise RuntimeError("PM rows unavailable: " + "; ".join(notes))
            for row in pm:
                add(row["selector"], row["rankings"])
    return rows


def _cbr_cell(seed: int, config: dict[str, Any], size: dict[str, Any]) -> list[dict[str, Any]]:
    """One arm of the CBR loop on the world of ``seed``, as ``memsim bench cbr-loop`` runs it."""
    from benchmarks import cbr_loop as cbr
    from benchmarks.worlds import CBRWorld

    arm = str(config["arm"])
    if arm not in cbr.LABELS:
        raise ValueError(f"unknown cbr-loop arm {arm!r}; choose one of {', '.join(cbr.LABELS)}")
    k = int(config.get("k", 8))
    rounds = int(size.get("rounds", 5))
    per_round = int(size.get("per_round", 80))
    world = CBRWorld(seed=seed)
    sets = cbr._round_sets(world, rounds, per_round, seed)
    lookup = cbr._lookup(sets)
    np_selector = None
    if arm == "np":
        from agentfly_sim.embedding import NpSelector

        np_selector = NpSelector("cpu", cached=True)
    with tempfile.TemporaryDirectory(prefix="memsim-sweep-") as td:
        a = cbr.run_arm(arm, world, sets, lookup, Path(td) / f"{arm}_k{k}", k=k, seed=seed, np_selector=np_selector)
    rs = a["rounds"]
    row: dict[str, Any] = {"name": f"{CBR_NAMES[arm]} K={k}", "mean_accuracy": cbr._mean_acc(a),
                           "final_accuracy": rs[-1]["accuracy"], "bank_cases": a["bank_cases"],
                           "share_with_positive_example": float(np.mean([r["share_with_positive_example"] for r in rs])),
                           "share_copied_right_plan": float(np.mean([r["share_copied_right_plan"] for r in rs]))}
    for r in rs:
        row[f"round_{r['round']}"] = r["accuracy"]
    return [row]


def _locomo_cell(seed: int, config: dict[str, Any], size: dict[str, Any]) -> list[dict[str, Any]]:
    """Every delivered row of the LoCoMo arms on one conversation, as ``memsim bench locomo`` runs them.

    config ``{"arms": "a,b" (default: the benchmark's), "k": [4, 8], "data": PATH (default $MEMSIM_LOCOMO_DATA, else the fetched copy)}``,
    size ``{"conversation": "conv-26", "quick": false}``. Rows carry the headline (categories 1-4) metrics of
    :data:`LOCOMO_METRICS` only: latencies and ingest times are measurements, not functions of the cell."""
    import shutil

    from benchmarks import locomo as bl
    from harness.workloads.arms import parse_arms
    from harness.workloads.locomo import load_locomo, resolve_locomo_path, select_conversations
    from harness.workloads.metrics import summarize
    from harness.workloads.runner import run_conversation

    quick = bool(size.get("quick", False))
    names = parse_arms(config.get("arms"), quick)
    loaded = load_locomo(resolve_locomo_path(config.get("data")))
    conv = select_conversations(loaded, [str(size["conversation"])])[0] if "conversation" in size else loaded[0]
    others = tuple(c for c in loaded if c.sample_id != conv.sample_id)
    if quick:
        conv = bl.quick_slice(conv)
    work = Path(tempfile.mkdtemp(prefix="memsim-sweep-locomo-"))
    try:
        res = run_conversation(conv, names, work, k_values=tuple(int(k) for k in config.get("k", (4, 8))),
                               others=others, quick=quick, seed=seed)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    for name, summ in summarize(res["records"]).items():
        head = summ["headline"]
        rows.append({"name": name, **{m: head[m] for m in LOCOMO_METRICS if m in head}})
    return sorted(rows, key=lambda r: r["name"])


# ------------------------------------------------------------------------------------------------------ executors
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


# ---------------------------------------------------------------------------------------------------- statistics
def t_interval(values: Sequence[float]) -> dict[str, float]:
    """Mean, sample sd, n and the two-sided 95% t interval (half-width ``ci``); a single value has ci = nan."""
    from scipy import stats

    xs = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=np.float64)
    n = len(xs)
    if n == 0:
        return {"mean": float("nan"), "sd": float("nan"), "n": 0, "ci": float("nan"), "lo": float("nan"),
                "hi": float("nan")}
    mean = float(xs.mean())
    sd = float(xs.std(ddof=1)) if n > 1 else float("nan")
    half = float(stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)) if n > 1 else float("nan")
    return {"mean": mean, "sd": sd, "n": n, "ci": half, "lo": mean - half, "hi": mean + half}


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (same order as given)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adj = [float("nan")] * m
    running = 0.0
    for rank, i in enumerate(order):
        p = pvalues[i]
        if math.isnan(p):
            continue
        running = max(running, min(1.0, (m - rank) * p))
        adj[i] = running
    return adj


def aggregate(results: Sequence[dict[str, Any]], cfg: SweepConfig) -> dict[str, Any]:
    """Per (size, row, metric) t intervals across seeds, and paired differences for ``cfg.compare``."""
    from scipy import stats

    per: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    order: list[tuple[str, str]] = []
    for res in results:
        sl = size_label(res["cell"]["size"])
        for row in res["rows"]:
            key = (sl, row["name"])
            if key not in per:
                per[key] = {}
                order.append(key)
            per[key][res["cell"]["seed"]] = row
    table = []
    for sl, name in order:
        by_seed = per[(sl, name)]
        metrics = [m for m in by_seed[next(iter(by_seed))] if m != "name"]
        table.append({"size": sl, "name": name, "seeds": sorted(by_seed),
                      "stats": {m: t_interval([_num(by_seed[s].get(m)) for s in sorted(by_seed)]) for m in metrics}})
    diffs = []
    not_compared = []  # a pair naming a row that no cell of a size gave (an arm unavailable here): said, not dropped
    for sl in dict.fromkeys(k[0] for k in order):
        for a, b in cfg.compare:
            if (sl, a) not in per or (sl, b) not in per:
                missing = [x for x in (a, b) if (sl, x) not in per]
                not_compared.append({"size": sl, "a": a, "b": b, "missing": missing})
                continue
            seeds = sorted(set(per[(sl, a)]) & set(per[(sl, b)]))
            d = [_num(per[(sl, a)][s].get(cfg.metric)) - _num(per[(sl, b)][s].get(cfg.metric)) for s in seeds]
            ci = t_interval(d)
            if len(d) > 1 and np.std(d) > 0:
                p = float(stats.ttest_1samp(d, 0.0).pvalue)
            else:
                p = float("nan") if len(d) < 2 else (1.0 if np.mean(d) == 0 else 0.0)
            diffs.append({"size": sl, "a": a, "b": b, "metric": cfg.metric, "seeds": seeds, "per_seed": d,
                          **{f"diff_{k}": v for k, v in ci.items() if k != "n"}, "p": p})
    for sl in dict.fromkeys(x["size"] for x in diffs):
        group = [x for x in diffs if x["size"] == sl]
        for x, adj in zip(group, holm([x["p"] for x in group]), strict=True):
            x["p_holm"] = adj
            x["significant"] = bool(not math.isnan(adj) and adj < 0.05)
    return {"rows": table, "differences": diffs, "not_compared": not_compared}


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


# ----------------------------------------------------------------------------------------------------- reporting
def _fmt(st: dict[str, float]) -> str:
    if math.isnan(st["mean"]):
        return "n/a"
    if math.isnan(st["ci"]):
        return f"{st['mean']:.3f}"
    return f"{st['mean']:.3f} ± {st['ci']:.3f}"


def render_markdown(payload: dict[str, Any]) -> str:
    from harness.runs import code_text

    cfg = payload["config"]
    agg = payload["aggregate"]
    metrics = cfg["metrics"] or [cfg["metric"]]
    n = len(cfg["seeds"])
    lines = [f"## Sweep `{cfg['name']}` ({cfg['benchmark']}): mean ± 95% CI over {n} seeds", ""]
    if cfg.get("description"):
        lines += [cfg["description"].strip(), ""]
    lines += [f"Seeds {cfg['seeds']}; {len(payload['cells'])} cells; executor {payload['meta']['executor']}. "
              "Each entry is the mean over seeds ± the half-width of the two-sided 95% t interval "
              "(t_0.975,n-1 · sd / √n). In selectors and cbr-loop every seed draws its own world; in locomo the seed reaches only the seeded parts of the arms.", ""]
    for sl in dict.fromkeys(r["size"] for r in agg["rows"]):
        lines += [f"### {sl}", ""]
        rows = [(r["name"], *[_fmt(r["stats"][m]) if m in r["stats"] else "n/a" for m in metrics])
                for r in agg["rows"] if r["size"] == sl]
        lines += [md_table(("row", *metrics), rows), ""]
        diffs = [d for d in agg["differences"] if d["size"] == sl]
        if diffs:
            lines += [f"Paired differences in `{cfg['metric']}` (a − b per seed; Holm-adjusted over the "
                      f"{len(diffs)} listed pairs; significant = adjusted p < 0.05):", ""]
            lines += [md_table(("a", "b", "mean diff ± 95% CI", "p", "p (Holm)", "significant"),
                               [(d["a"], d["b"], _fmt({"mean": d["diff_mean"], "ci": d["diff_ci"]}),
                                 f"{d['p']:.3g}" if not math.isnan(d["p"]) else "n/a",
                                 f"{d['p_holm']:.3g}" if not math.isnan(d["p_holm"]) else "n/a",
                                 "yes" if d["significant"] else "no") for d in diffs]), ""]
    for nc in agg.get("not_compared", []):
        lines += [f"Not compared ({nc['size']}): {nc['a']} vs {nc['b']}: no cell gave "
                  f"{', '.join(nc['missing'])}.", ""]
    m = payload["meta"]
    mach = m["machine"]
    lines += [f"![sweep-{cfg['name']}](sweep-{cfg['name']}.png)", "",
              f"_Run {mach['date_utc']} on {mach['cpu']} ({mach['affinity_cpus']} usable cores), Python "
              f"{mach['python']}, torch threads per cell 1; {m['workers']} worker(s); wall {m['wall_s']:.0f} s, "
              f"sum of cell times {m['cell_seconds']:.0f} s. Reproduce: `memsim bench sweep {m['config_path']}`. "
              f"Code: {code_text(payload.get('run'))}._"]
    return "\n".join(lines)


def figure(payload: dict[str, Any]) -> Any:
    """One panel per table metric (up to 4): mean per row with 95% CI error bars, one colour per size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = payload["config"]
    metrics = (cfg["metrics"] or [cfg["metric"]])[:4]
    rows = payload["aggregate"]["rows"]
    names = list(dict.fromkeys(r["name"] for r in rows))
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics) + 2.5, 0.38 * len(names) + 1.8),
                             squeeze=False, sharey=True)
    cmap = plt.get_cmap("tab10")
    y = np.arange(len(names))
    step = 0.8 / max(1, len(sizes))
    for j, met in enumerate(metrics):
        ax = axes[0][j]
        for si, sl in enumerate(sizes):
            means, cis, ys = [], [], []
            for i, nm in enumerate(names):
                r = next((r for r in rows if r["name"] == nm and r["size"] == sl), None)
                if r is None or met not in r["stats"]:
                    continue
                st = r["stats"][met]
                means.append(st["mean"])
                cis.append(0.0 if math.isnan(st["ci"]) else st["ci"])
                ys.append(y[i] - 0.4 + step * (si + 0.5))
            ax.errorbar(means, ys, xerr=cis, fmt="o", color=cmap(si % 10), capsize=3, ms=4,
                        label=sl if len(sizes) > 1 else None)
        ax.set_title(met)
        ax.grid(axis="x", alpha=0.3)
        if j == 0:
            ax.set_yticks(y, names)
            ax.invert_yaxis()
    if len(sizes) > 1:
        axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"sweep {cfg['name']} ({cfg['benchmark']}): mean and 95% CI over {len(cfg['seeds'])} seeds",
                 fontsize=10)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------------------------------------- run
def run(config_path: Path, out_dir: Path, *, executor: Literal["local", "ray"] = "local", address: str | None = None,
        workers: int | None = None, track: Track = _no_track) -> list[Path]:
    """Run the sweep in ``config_path`` and write ``sweep-<name>.{json,md,png}`` to ``out_dir``."""
    cfg = load_config(config_path)
    if executor == "ray":
        import_ray()
    n_workers = workers or cfg.workers
    todo = cells(cfg)
    t0 = time.perf_counter()
    if executor == "ray":
        results = run_ray(todo, n_workers, address=address, track=track)
    elif executor == "local":
        results = run_local(todo, n_workers, track=track)
    else:
        raise ValueError(f"unknown executor {executor!r}; choose local or ray")
    payload = {"name": f"sweep-{cfg.name}", "config": cfg.model_dump(),
               "meta": {"machine": machine_description(), "executor": executor, "address": address,
                        "workers": n_workers, "wall_s": time.perf_counter() - t0,
                        "cell_seconds": float(sum(r["seconds"] for r in results)),
                        "config_path": str(config_path)},
               "cells": results, "aggregate": aggregate(results, cfg)}
    return write_results(out_dir, f"sweep-{cfg.name}", payload, render_markdown, figure(payload))


def rerender(json_path: Path) -> list[Path]:
    """Rewrite the Markdown and PNG of a finished sweep from its JSON (no re-run)."""
    payload = json.loads(Path(json_path).read_text(encoding="utf-8"))
    cfg = SweepConfig.model_validate(payload["config"])
    payload["aggregate"] = aggregate(payload["cells"], cfg)
    return write_results(Path(json_path).parent, payload["name"], payload, render_markdown(payload), figure(payload))
