"""JSONL artefacts of AgentFly: NP bank, PM bank, training pairs, result records, benchmark dataset (spec §2).

Every writer appends ``json.dumps(obj, ensure_ascii=False) + "\\n"`` in UTF-8 append mode with default separators,
keys in the documented order, and no locking, fsync, atomic rename, deduplication or content check (spec §2).
Readers reproduce the reference quirks:

- NP ``load_jsonl`` skips a malformed line with a ``[WARN]`` on stderr, which shifts later indices (AGF-05).
- NP ``extract_pairs`` has the two-key fallback (the first key becomes the question, even ``reward``) (AGF-05).
- PM ``load_pool`` fails the whole load on one malformed line (AGF-07).
- The dataset loader fails on any blank or malformed line; ``gt_map`` keeps the last occurrence (AGF-29).
- ``read_finished`` reads ``query`` or ``question`` of every parseable result line (AGF-08, AGF-25, AGF-30).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .plans import build_icl_text

FaultHook = Callable[[str], None]


class JsonlLineError(ValueError):
    """A JSONL line that a strict reader cannot accept; carries the file and 1-based physical line number."""

    def __init__(self, path: str | os.PathLike[str], lineno: int, message: str, display: str | None = None):
        self.path = str(path)
        self.lineno = lineno
        self.message = message
        super().__init__(display if display is not None else f"{self.path}:{lineno}: {message}")


# --------------------------------------------------------------------------------------------------- writing
def dumps_line(obj: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    """The exact upstream line: ``json.dumps(obj, ensure_ascii=False) + "\\n"`` (``default=str`` for results)."""
    return json.dumps(obj, ensure_ascii=False, default=default) + "\n"


def append_jsonl(path: str | os.PathLike[str], obj: Any, *, default: Callable[[Any], Any] | None = None) -> None:
    """Append one record in UTF-8 append mode (no lock, no fsync, no dedup), as every upstream writer does."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(dumps_line(obj, default=default))


def np_case_row(question: str, plan: str, reward: int) -> dict[str, Any]:
    """NP bank row ``{"question", "plan", "reward"}`` (spec §2.1)."""
    return {"question": question, "plan": plan, "reward": reward}


def pm_case_row(case: str, plan: str, positive: bool) -> dict[str, Any]:
    """PM bank row ``{"case", "plan", "case_label"}`` (spec §2.2)."""
    return {"case": case, "plan": plan, "case_label": "positive" if positive else "negative"}


def pair_row(query: str, retrieved: dict[str, Any], truth_label: bool) -> dict[str, Any]:
    """Training pair from one retrieved case; ``truth_label`` is the query's judgement (spec §2.3, AGF-09)."""
    return {
        "query": query,
        "case": retrieved.get("case"),
        "case_label": retrieved.get("case_label", "unknown"),
        "plan": retrieved.get("plan"),
        "truth_label": truth_label,
    }


# ------------------------------------------------------------------------------------------------ NP reading
def load_jsonl(path: str | os.PathLike[str], *, stderr: TextIO | None = None) -> list[Any]:
    """NP loader (spec §3.1): skip blank lines; a malformed line prints ``[WARN] Failed to parse line {ln},
    skipped: {e}`` to stderr and is skipped, so the indices of later items shift (AGF-05)."""
    err = stderr if stderr is not None else sys.stderr
    items: list[Any] = []
    with open(path, encoding="utf-8") as f:
        for ln, line in enumerate(f, 1):
            s = line.strip()
            if not s:
                continue
            try:
                items.append(json.loads(s))
            except Exception as e:  # noqa: BLE001 - upstream catches everything here
                print(f"[WARN] Failed to parse line {ln}, skipped: {e}", file=err)
    return items


def extract_pairs(items: list[Any], key_field: str = "question", value_field: str = "plan") -> list[tuple[Any, ...]]:
    """``(question, value, i)`` tuples (spec §3.2, AGF-05).

    1. both fields present -> ``(str(obj[key]), obj[value], i)``;
    2. exactly two keys -> the first key (in JSON order) becomes the question, even when it is ``reward``;
    3. otherwise the item is skipped silently but keeps its index.
    Non-dict items go through the same Python operations and may raise, aborting the whole extraction.
    """
    pairs: list[tuple[Any, ...]] = []
    for i, obj in enumerate(items):
        if key_field in obj and value_field in obj:
            pairs.append((str(obj[key_field]), obj[value_field], i))
        elif len(obj) == 2:
            k0, k1 = list(obj.keys())
            pairs.append((str(obj[k0]), obj[k1], i))
    return pairs


# ------------------------------------------------------------------------------------------------ PM reading
def load_pool(path: str | os.PathLike[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """PM pool loader (spec §4.3): blank lines skipped; **one malformed line fails the whole load** (AGF-07);
    a missing/null ``case`` raises ``ValueError``; an empty pool raises ``ValueError("Pool is empty")``.

    Returns ``(texts, metadata)`` with ``texts[i] = build_icl_text(case, plan)``. Errors carry the file and line.
    """
    texts: list[str] = []
    meta: list[dict[str, Any]] = []
    for ln, obj in iter_jsonl_strict(path):
        if not isinstance(obj, dict) or obj.get("case") is None:
            raise JsonlLineError(path, ln, "Each line in pool jsonl must contain 'case' field")
        plan = obj.get("plan")
        texts.append(build_icl_text(obj["case"], plan))
        meta.append({"case": obj["case"], "plan": plan, "case_label": obj.get("case_label", "unknown")})
    if not texts:
        raise ValueError("Pool is empty")
    return texts, meta


# ------------------------------------------------------------------------------------------- dataset / results
@dataclass
class Dataset:
    """Benchmark questions in file order (duplicates kept) and ``gt_map`` (last occurrence wins, AGF-29)."""

    questions: list[str]
    gt_map: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)


def load_dataset(path: str | os.PathLike[str]) -> Dataset:
    """Driver startup dataset load (spec §6.1 step 1): any blank or malformed line is a startup failure."""
    questions: list[str] = []
    gt_map: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for ln, line in enumerate(f, 1):
            _check_utf8(path, ln, line)
            try:
                row = json.loads(line)
            except (ValueError, RecursionError) as e:  # also 5000-digit ints and too-deep nesting
                raise JsonlLineError(path, ln, f"malformed dataset line: {e}") from e
            if not isinstance(row, dict) or "question" not in row:
                raise JsonlLineError(path, ln, "dataset row needs a 'question' field")
            try:
                gt_map[row["question"]] = row.get("ground_truth")
            except TypeError:  # a list/object question cannot key the ground-truth map
                raise JsonlLineError(path, ln, "dataset 'question' must be a string") from None
            questions.append(row["question"])
            rows.append(row)
    return Dataset(questions=questions, gt_map=gt_map, rows=rows)


def read_finished(path: str | os.PathLike[str]) -> list[str]:
    """Restart suppression (spec §6.1 step 4): ``record.get("query") or record.get("question")`` of every line that
    parses as a dict; any exception skips that line. Read **once** at startup (AGF-29, AGF-30)."""
    finished: list[str] = []
    if not os.path.exists(path):
        return finished
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                record = json.loads(line)
                finished.append(record.get("query") or record.get("question"))
            except Exception:  # noqa: BLE001
                continue
    return finished


def iter_jsonl_strict(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """``(line_number, object)`` for every non-blank line; the first malformed line raises ``JsonlLineError``
    (the whole-load-failure readers: PM pool, training pairs)."""
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for ln, line in enumerate(f, 1):
            s = line.strip()
            if not s:
                continue
            _check_utf8(path, ln, s)
            try:
                obj = json.loads(s)
            except (ValueError, RecursionError) as e:  # also 5000-digit ints and too-deep nesting
                raise JsonlLineError(path, ln, f"malformed JSON: {e}") from e
            yield ln, obj


def _check_utf8(path: str | os.PathLike[str], ln: int, line: str) -> None:
    """A strict reader's file is UTF-8: a line with undecodable bytes fails the load naming the file and line (the
    whole load fails either way; reading with ``surrogateescape`` only makes the error say where)."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as e:
        raise JsonlLineError(path, ln, f"not valid UTF-8 (character {e.start + 1})") from None


def read_jsonl_strict(path: str | os.PathLike[str]) -> list[Any]:
    """Read every non-blank line with ``json.loads`` (for inspection in tests and claims)."""
    return [obj for _, obj in iter_jsonl_strict(path)]


def write_jsonl(path: str | os.PathLike[str], rows: Iterable[Any]) -> Path:
    """Write rows in the upstream line format (a fresh file); returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(dumps_line(r))
    return p
