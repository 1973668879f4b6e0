"""The per-probe run format: one table per comparison run, one row per (probe, row), ids and numbers only.

Every bench that compares rows on shared probes writes ``<name>.probes.parquet`` beside its ``<name>.json`` (one
of the run's own names, see :mod:`harness.runs`); its aggregates, intervals, paired tests and TREC run files all
derive from it. Columns:

**Id columns** (the only columns that may hold strings; each value at most :data:`MAX_ID_CHARS` characters, no
line breaks or other control characters):

==============  ======  ===============================================================================
``workload``    string  ``locomo``, ``longmemeval``, ``selectors``, ...
``cluster``     string  what the probe shares a history with: the conversation (LoCoMo) or the question
                        (LongMemEval, one haystack per question); the stratum of a stratified bootstrap
``probe``       string  the probe's id within its cluster (LoCoMo: the question's index; LongMemEval: the
                        question id)
``category``    string  the category (``"1"`` .. ``"5"``) or the question type
``abstention``  bool    an abstention question (no answer in the history)
``has_evidence`` bool   the probe has annotated evidence (recall-type metrics are null without it)
``row``         string  the compared row (``hybrid@8``, ``tortoise-eval``)
``arm``         string  the arm that produced the row (``hybrid``, ``tortoise``)
``seed``        int64   optional: the seed of a sweep cell (then a probe is identified by seed and probe)
==============  ======  ===============================================================================

A probe is identified across rows by its **key**: (``cluster``, ``probe``), with ``seed`` first when the table has
it. Each (key, row) appears once.

**Metric columns**: any other name, boolean, integer or float, null where the metric is not defined for that
probe and row (no evidence, an unranked row). Names used by the LoCoMo and LongMemEval benches
(:func:`from_probe_record`): ``evidence_recall``, ``all_evidence``, ``stored_recall``, ``delivered_turns``,
``tokens``, ``tokens_cl100k``, ``chars4``, ``answer_present``, ``latency_ms``, ``design_ms``, ``harness_ms``,
``arm_design_ms``, ``f1``, the ranked metrics as ``<level>.<metric>@<k>`` (``turn.recall_any@5``,
``session.ndcg_any@10``), LongMemEval's user-only view (``official_recall``, ...), and a design's numeric
delivery measurements as ``meta.<key>``. Strings are refused: no text from a data file is ever stored.

**Metadata** (the Parquet schema's ``memsim.probes`` key, JSON): ``format`` and ``version``, ``data`` (the data
label), ``config`` (the run's configuration), ``code`` (:func:`harness.runs.code_identity`), ``kinds`` (per metric:
``binary`` for 0/1 outcomes, which get Wilson intervals, else ``mean``; inferred from the values unless given),
``probe_sets`` (named filters, e.g. ``{"headline": {"category": ["1", "2", "3", "4"]}}``), ``stratify`` (whether
the clusters are strata of the bootstrap) and ``headline_metrics``.

:func:`aggregate` is the one aggregation: per row, the mean and count (and optional percentiles) of each metric
over a probe set.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

FORMAT = "memsim-probes"
VERSION = 1
META_KEY = b"memsim.probes"
SUFFIX = ".probes.parquet"
MAX_ID_CHARS = 200
ID_COLUMNS: dict[str, pa.DataType] = {
    "workload": pa.string(), "cluster": pa.string(), "probe": pa.string(), "category": pa.string(),
    "abstention": pa.bool_(), "has_evidence": pa.bool_(), "row": pa.string(), "arm": pa.string(),
}
"""Required id columns and their types."""
OPTIONAL_ID_COLUMNS: dict[str, pa.DataType] = {"seed": pa.int64()}
WRITE_STEP = "probes.write"
"""Fault-hook step name of the one durable write (:func:`write_probes`)."""


class ProbeTableError(ValueError):
    """A per-probe table that cannot be written or read (one line naming the file or the column)."""


def probes_path(results_json: Path | str) -> Path:
    """``<out>/<name>.probes.parquet`` beside ``<out>/<name>.json``."""
    p = Path(results_json)
    return p.with_name(p.name[: -len(".json")] + SUFFIX if p.name.endswith(".json") else p.name + SUFFIX)


def resolve_run(arg: Path | str) -> Path:
    """The per-probe table a user names: a ``.probes.parquet`` file as given, ``<folder>/<name>.json`` (the results
    JSON beside it) or ``<folder>/<name>`` (the run's name) -> ``<folder>/<name>.probes.parquet``."""
    text = str(arg)
    if text.endswith(SUFFIX):
        return Path(text)
    return probes_path(Path(text if text.endswith(".json") else text + ".json"))


def key_columns(table: pa.Table) -> list[str]:
    """The columns that identify a probe across rows: ``seed`` (when present), ``cluster``, ``probe``."""
    return [*(["seed"] if "seed" in table.column_names else []), "cluster", "probe"]


def metric_columns(table: pa.Table) -> list[str]:
    return [c for c in table.column_names if c not in ID_COLUMNS and c not in OPTIONAL_ID_COLUMNS]


# ------------------------------------------------------------------------------------------------ building
def _metric_array(name: str, values: list[Any]) -> pa.Array:
    present = [v for v in values if v is not None]
    for v in present:
        if isinstance(v, str | bytes):
            raise ProbeTableError(f"metric column {name!r} holds text ({str(v)[:20]!r}...); only the id "
                                  f"columns ({', '.join(ID_COLUMNS)}) may hold strings")
        if not isinstance(v, bool | int | float | np.bool_ | np.integer | np.floating):
            raise ProbeTableError(f"metric column {name!r} holds a {type(v).__name__}; use numbers or booleans")
    if present and all(isinstance(v, bool | np.bool_) for v in present):
        return pa.array(values, type=pa.bool_())
    if present and all(isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_) for v in present):
        return pa.array(values, type=pa.int64())
    return pa.array([None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
                     for v in values], type=pa.float64())


def probe_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """A table from flat dicts, one per (probe, row): the id columns (``seed`` optional) and metric values
    (None or NaN = not defined). Metric columns missing from a dict are null there. Column order: ids, then
    metrics in first-seen order."""
    rows = list(rows)
    ids = dict(ID_COLUMNS)
    if any("seed" in r for r in rows):
        ids.update(OPTIONAL_ID_COLUMNS)
    metrics = list(dict.fromkeys(k for r in rows for k in r if k not in ids))
    arrays, names = [], []
    for col, typ in ids.items():
        vals = [r.get(col) for r in rows]
        if any(v is None for v in vals):
            i = next(i for i, v in enumerate(vals) if v is None)
            raise ProbeTableError(f"id column {col!r} is missing in row {i} of the table")
        if typ == pa.string():
            vals = [str(v) for v in vals]
        arrays.append(pa.array(vals, type=typ))
        names.append(col)
    for m in metrics:
        arrays.append(_metric_array(m, [r.get(m) for r in rows]))
        names.append(m)
    return pa.table(arrays, names=names)


_RECORD_METRICS = {
    "recall": "evidence_recall", "all_evidence": "all_evidence", "stored_recall": "stored_recall",
    "n_evidence": "n_evidence", "evidence_hits": "evidence_hits", "stored_hits": "stored_hits",
    "delivered_turns": "delivered_turns", "tokens": "tokens", "tokens_cl100k": "tokens_cl100k",
    "chars4": "chars4", "answer_present": "answer_present", "latency_ms": "latency_ms",
    "design_ms": "design_ms", "harness_ms": "harness_ms", "arm_design_ms": "arm_design_ms", "f1": "f1",
    "n_official_evidence": "n_official_evidence", "official_recall": "official_recall",
    "official_all_evidence": "official_all_evidence", "official_stored_recall": "official_stored_recall",
    "n_evidence_sessions": "n_evidence_sessions", "session_recall": "session_recall",
    "session_stored_recall": "session_stored_recall",
}
"""A probe record's key (:func:`harness.workloads.metrics.probe_record`) -> its metric column."""


def from_probe_record(rec: Mapping[str, Any], *, workload: str, arm: str, seed: int | None = None
                      ) -> dict[str, Any]:
    """One flat table row from a LoCoMo or LongMemEval probe record: the ids, every numeric measurement of
    :data:`_RECORD_METRICS`, the ranked metrics as ``<level>.<metric>`` and numeric ``meta`` values as
    ``meta.<key>``. Text in the record (the delivered text, an answer) is never copied."""
    lme = rec.get("question_type") is not None
    out: dict[str, Any] = {
        "workload": workload,
        "cluster": str(rec["question_id"] if lme else rec["conversation"]),
        "probe": str(rec["question_id"] if lme else rec["probe"]),
        "category": str(rec["question_type"] if lme else rec["category"]),
        "abstention": bool(rec.get("abstention", False)),
        "has_evidence": bool(rec.get("n_evidence")),
        "row": str(rec["row"]), "arm": arm,
    }
    if seed is not None:
        out["seed"] = int(seed)
    for key, col in _RECORD_METRICS.items():
        if key in rec:
            out[col] = rec[key]
    for level, metrics in (rec.get("ranked") or {}).items():
        for name, v in metrics.items():
            out[f"{level}.{name}"] = v
    for k, v in (rec.get("meta") or {}).items():
        if isinstance(v, int | float) and not isinstance(v, bool):
            out[f"meta.{k}"] = v
    return out


def infer_kinds(table: pa.Table) -> dict[str, str]:
    """Per metric column: ``binary`` when every non-null value is 0 or 1 (a 0/1 outcome), else ``mean``."""
    import pyarrow.compute as pc

    out = {}
    for m in metric_columns(table):
        col = table.column(m)
        if pa.types.is_boolean(col.type):
            out[m] = "binary"
            continue
        vals = col.drop_null()
        ok = len(vals) > 0 and pc.all(pc.is_in(vals, value_set=pa.array([0, 1], type=col.type))).as_py()
        out[m] = "binary" if ok else "mean"
    return out


# ------------------------------------------------------------------------------------------------ checks
def _check(table: pa.Table, where: str) -> None:
    """Raise :class:`ProbeTableError` (``where: ...``) unless ``table`` follows the schema of the module doc."""
    import pyarrow.compute as pc

    for col, typ in {**ID_COLUMNS, **OPTIONAL_ID_COLUMNS}.items():
        if col not in table.column_names:
            if col in OPTIONAL_ID_COLUMNS:
                continue
            raise ProbeTableError(f"{where}: the id column {col!r} is missing")
        got = table.schema.field(col).type
        if got != typ and not (pa.types.is_large_string(got) and typ == pa.string()):
            raise ProbeTableError(f"{where}: id column {col!r} is {got}, expected {typ}")
        if table.column(col).null_count:
            raise ProbeTableError(f"{where}: id column {col!r} has empty values")
        if typ == pa.string() and len(table):
            lengths = pc.utf8_length(table.column(col))
            if pc.max(lengths).as_py() > MAX_ID_CHARS:
                raise ProbeTableError(f"{where}: id column {col!r} holds a value longer than {MAX_ID_CHARS} "
                                      f"characters (ids only: no text from data files)")
            if pc.any(pc.match_substring_regex(table.column(col), r"[\x00-\x1f\x7f]")).as_py():
                raise ProbeTableError(f"{where}: id column {col!r} holds a control character (ids only)")
    for m in metric_columns(table):
        t = table.schema.field(m).type
        if not (pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t)):
            raise ProbeTableError(f"{where}: column {m!r} is {t}; only the id columns may hold strings and "
                                  f"metrics are numbers or booleans")
    keys = [*key_columns(table), "row"]
    if len(table) and len(table.group_by(keys).aggregate([])) != len(table):
        raise ProbeTableError(f"{where}: a (probe, row) appears twice (keys {', '.join(keys)})")


# ------------------------------------------------------------------------------------------------ write / read
def write_probes(path: Path | str, table: pa.Table, *, data: str, config: Mapping[str, Any] | None = None,
                 kinds: Mapping[str, str] | None = None, probe_sets: Mapping[str, Mapping[str, Any]] | None = None,
                 stratify: bool = False, headline_metrics: Sequence[str] = (),
                 fault_hook: Callable[[str], None] | None = None) -> Path:
    """Check ``table`` and write it atomically to ``path`` with the run's metadata (see the module doc);
    ``kinds`` overrides the inferred kind of the metrics it names. The fault hook sees :data:`WRITE_STEP`."""
    import pyarrow.parquet as pq

    from harness.atomic import write_atomic
    from harness.runs import code_identity

    path = Path(path)
    _check(table, str(path))
    all_kinds = {**infer_kinds(table), **(kinds or {})}
    for m, k in all_kinds.items():
        if k not in ("binary", "mean"):
            raise ProbeTableError(f"{path}: kind of {m!r} is {k!r}; binary or mean")
        if m not in table.column_names:
            raise ProbeTableError(f"{path}: kind given for {m!r}, which is not a column")
    for name, flt in (probe_sets or {}).items():
        _mask(table, flt, f"{path}: probe set {name!r}")
    for m in headline_metrics:
        if m not in all_kinds:
            raise ProbeTableError(f"{path}: headline metric {m!r} is not a metric column")
    meta = {"format": FORMAT, "version": VERSION, "data": str(data), "config": dict(config or {}),
            "code": code_identity(), "kinds": all_kinds, "probe_sets": {k: dict(v) for k, v in
                                                                         (probe_sets or {}).items()},
            "stratify": bool(stratify), "headline_metrics": list(headline_metrics)}
    schema_meta = dict(table.schema.metadata or {})
    schema_meta[META_KEY] = json.dumps(meta, sort_keys=True, default=str).encode("utf-8")
    buf = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(schema_meta), buf, compression="zstd")
    write_atomic(path, buf.getvalue(), fault_hook, WRITE_STEP)
    return path


@dataclass
class ProbeRun:
    """A per-probe table read back: the table, its metadata and the file it came from."""

    path: Path
    table: pa.Table
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def kinds(self) -> dict[str, str]:
        return dict(self.meta.get("kinds") or {})

    @property
    def rows(self) -> list[str]:
        """Row names in their first-seen order."""
        return list(dict.fromkeys(self.table.column("row").to_pylist()))

    @property
    def metrics(self) -> list[str]:
        return metric_columns(self.table)

    def probe_set(self, name: str | None) -> dict[str, Any]:
        """The filter of a named probe set (``all`` or None: no filter)."""
        if name in (None, "all"):
            return {}
        sets = self.meta.get("probe_sets") or {}
        if name not in sets:
            raise KeyError(name)
        return dict(sets[name])


def read_probes(path: Path | str) -> ProbeRun:
    """Read and check a per-probe table; :class:`ProbeTableError` (one line naming the file) for a missing,
    damaged or foreign file."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise ProbeTableError(f"{path}: no per-probe table there" + (" (a folder)" if path.is_dir() else ""))
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ProbeTableError(f"{path}: not a readable Parquet file ({first})") from None
    raw = (table.schema.metadata or {}).get(META_KEY)
    if raw is None:
        raise ProbeTableError(f"{path}: a Parquet file without memsim's per-probe metadata (not written by memsim)")
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProbeTableError(f"{path}: its memsim.probes metadata is not JSON") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ProbeTableError(f"{path}: its metadata does not name the {FORMAT} format")
    if meta.get("version") != VERSION:
        raise ProbeTableError(f"{path}: format version {meta.get('version')!r}; this memsim reads version {VERSION}")
    _check(table, str(path))
    kinds = meta.get("kinds")
    if not isinstance(kinds, dict) or set(kinds) != set(metric_columns(table)):
        raise ProbeTableError(f"{path}: its metadata's metric kinds do not match its columns")
    return ProbeRun(path, table.replace_schema_metadata(None), meta)


# ------------------------------------------------------------------------------------------------ selecting
def _mask(table: pa.Table, where: Mapping[str, Any] | None, what: str = "filter") -> np.ndarray:
    """Boolean mask of the table rows matching ``where``: column -> a value or a list of allowed values."""
    import pyarrow.compute as pc

    mask = np.ones(len(table), dtype=bool)
    for col, want in (where or {}).items():
        if col not in table.column_names:
            raise ProbeTableError(f"{what}: no column {col!r}")
        allowed = list(want) if isinstance(want, list | tuple | set | frozenset) else [want]
        column = table.column(col)
        try:
            values = pa.array(allowed, type=column.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            raise ProbeTableError(f"{what}: {allowed!r} are not values of column {col!r} ({column.type})") from None
        mask &= np.asarray(pc.is_in(column, value_set=values).to_numpy(zero_copy_only=False), dtype=bool)
    return mask


def select(table: pa.Table, where: Mapping[str, Any] | None = None, rows: Sequence[str] | None = None) -> pa.Table:
    """The table rows of the probe set ``where`` (column -> value or list of values) and of ``rows`` (all when
    None)."""
    return table.filter(pa.array(_mask(table, {**(where or {}), **({"row": list(rows)} if rows is not None else {})})))


def _floats(col: pa.ChunkedArray) -> np.ndarray:
    """A metric column as float64 with NaN for null (booleans as 0/1)."""
    import pyarrow.compute as pc

    return np.asarray(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def aggregate(table: pa.Table, where: Mapping[str, Any] | None = None, metrics: Sequence[str] | None = None,
              percentiles: Sequence[float] = ()) -> dict[str, dict[str, Any]]:
    """THE aggregation of a per-probe table: per row (first-seen order) over the probe set ``where``,
    ``n_probes`` and for each metric its ``mean`` and ``n`` (non-null values; mean None when n = 0), plus
    ``p<q>`` for each requested percentile (numpy's linear interpolation, as the benches' medians and p95)."""
    sub = select(table, where)
    names = list(metrics) if metrics is not None else metric_columns(sub)
    row_ids = np.asarray(sub.column("row").to_pylist(), dtype=object)
    order = list(dict.fromkeys(row_ids.tolist()))
    cols = {m: _floats(sub.column(m)) for m in names}
    out: dict[str, dict[str, Any]] = {}
    for row in order:
        sel = row_ids == row
        entry: dict[str, Any] = {"n_probes": int(sel.sum()), "metrics": {}}
        for m in names:
            v = cols[m][sel]
            v = v[~np.isnan(v)]
            st: dict[str, Any] = {"mean": float(v.mean()) if len(v) else None, "n": int(len(v))}
            for q in percentiles:
                st[f"p{q:g}"] = float(np.percentile(v, q)) if len(v) else None
            entry["metrics"][m] = st
        out[row] = entry
    return out


def pivot(table: pa.Table, metrics: Sequence[str], rows: Sequence[str], where: Mapping[str, Any] | None = None, *,
          strata: str = "cluster") -> tuple[list[tuple[Any, ...]], list[str], dict[str, dict[str, np.ndarray]]]:
    """Metrics as aligned per-probe arrays: the probe keys of the probe set (first-seen order), each probe's
    stratum label (the ``strata`` id column: ``cluster``, or ``seed`` for a sweep), and per metric and row an
    array over those keys (NaN where the row has no value or no entry)."""
    sub = select(table, where, rows)
    kcols = key_columns(sub)
    if strata not in kcols:
        raise ProbeTableError(f"strata: {strata!r} is not one of the key columns {', '.join(kcols)}")
    keys = list(zip(*(sub.column(c).to_pylist() for c in kcols), strict=True))
    order = list(dict.fromkeys(keys))
    pos = {k: i for i, k in enumerate(order)}
    idx = np.fromiter((pos[k] for k in keys), dtype=np.int64, count=len(keys))
    row_ids = np.asarray(sub.column("row").to_pylist(), dtype=object)
    sel = {r: row_ids == r for r in rows}
    out: dict[str, dict[str, np.ndarray]] = {}
    for m in metrics:
        vals = _floats(sub.column(m))
        out[m] = {}
        for r in rows:
            arr = np.full(len(order), np.nan)
            arr[idx[sel[r]]] = vals[sel[r]]
            out[m][r] = arr
    si = kcols.index(strata)
    return order, [str(k[si]) for k in order], out
