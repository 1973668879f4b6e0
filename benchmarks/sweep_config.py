"""Sweep files: the YAML format of ``memsim bench sweep``, validated before any cell runs, and the grid of cells.

A sweep file (``benchmarks/sweeps/*.yaml``) names a benchmark, seeds, ``configs`` and ``sizes`` (each entry
checked against the benchmark's own models, :data:`CELL_MODELS`), the metrics of its table (``metric`` first, then
``metrics``) and the comparator pairs (``compare``, rows by their display names). Everything is checked when the
file is read (:func:`load_config`): an unknown key, a number out of range, an unknown selector, arm or metric, or a
``compare`` row that no cell gives ends in one line naming the file and the key.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from benchmarks.selector_probes import STEP_ROWS, STEPS

BENCHMARKS = ("selectors", "cbr-loop", "locomo")
SELECTOR_STEPS = STEPS
SEED_LIMIT = 2**32
"""Seeds seed numpy and torch: each must be in ``[0, 2**32)``."""
SELECTOR_ROWS = STEP_ROWS
"""The row names each selector step gives (``pm`` gives three rows)."""
CBR_NAMES = {"none": "no memory", "np": "NP (pooler)", "np-mean": "NP (mean pooling)", "pm": "PM (classifier)",
             "oracle": "oracle"}
CBR_METRICS = ("mean_accuracy", "final_accuracy", "bank_cases", "share_with_positive_example",
               "share_copied_right_plan")
"""The metrics of a cbr-loop row, besides ``round_<r>`` for every round r."""
CELL_ONLY = {"bank_cases": "a count per cell (the bank at the end of an arm), not a mean over questions"}
"""Metrics of a cell's row that no per-probe table holds, so a sweep's table cannot show them."""
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
    """Every per-probe metric of this sweep, which its table can show (cbr-loop: ``round_<r>`` up to the fewest
    rounds of any size; not the per-cell counts of :data:`CELL_ONLY`)."""
    if cfg.benchmark == "selectors":
        return selector_metrics()
    if cfg.benchmark == "cbr-loop":
        rounds = min(CbrCellSize.model_validate(size).rounds for size in cfg.sizes)
        return (*(m for m in CBR_METRICS if m not in CELL_ONLY), *(f"round_{r}" for r in range(1, rounds + 1)))
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
        if name in CELL_ONLY:
            raise ValueError(f"{path}: {key}: {name!r} is {CELL_ONLY[name]}; a sweep's table shows per-probe "
                             f"metrics (known: {', '.join(metrics)})")
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


