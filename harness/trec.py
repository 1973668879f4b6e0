"""TREC run and qrels files for every ranked row, so any IR tool (trec_eval, ir_measures, ranx, PyTerrier) reads
memsim's rankings and scores them as memsim does.

Layout in a run's folder (``<out>/<name>/``): ``runs/<row>.<level>.trec`` (one file per ranked row and level) and
``qrels.<level>.trec`` (one per level). Levels: ``turn`` (turn ids against the evidence turns) and ``session``
(each ranked turn mapped to its session ``S<index>``, first occurrence kept, against the evidence sessions).

Run lines are ``<query> Q0 <doc> <rank> <score> <row>``; qrels lines ``<query> 0 <doc> <relevance>``. The rules
that make the files mean what memsim's metrics mean (:func:`harness.workloads.metrics.ranked_metrics`):

- trec_eval orders a query's documents by score, not by the rank column, so the score is the number of slots
  minus the 0-based rank: it strictly decreases with rank (no ties for trec_eval to break by document id);
- trec_eval rejects a document listed twice for one query, so a **placeholder** (a ranked entry that names no
  turn, ``"?"`` or None) and a **repeat** of an id already ranked keep their slot under a unique id
  ``#slot<rank>`` (0-based), never relevant: a delivered ranking is scored with its own length;
- **a unit carrying several turn ids** (a list in the ranking, e.g. a session-sized unit) is expanded in place:
  its turn ids take consecutive ranks, in the order the unit lists them (as memsim's metrics flatten it);
- a query id is ``<cluster>/<probe>`` (``conv-26/17``; a sweep's ``<seed>/<cluster>/<probe>``); no id may hold
  whitespace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

LEVELS = ("turn", "session")
SLOT_PREFIX = "#slot"
WRITE_STEP = "trec.write"


def query_id(*parts: Any) -> str:
    """``cluster/probe`` (or ``seed/cluster/probe``): the query id of a probe in run and qrels files."""
    qid = "/".join(str(p) for p in parts)
    _check_id(qid, "query id")
    return qid


def _check_id(x: str, what: str) -> None:
    if not x or any(c.isspace() for c in x):
        raise ValueError(f"{what} {x!r}: TREC ids are non-empty and hold no whitespace")


def flatten(ranking: Sequence[Any]) -> list[str | None]:
    """A delivered ranking with every multi-id unit expanded in place (see the module doc); None and ``"?"``
    stay as placeholders."""
    out: list[str | None] = []
    for x in ranking:
        items = list(x) if isinstance(x, list | tuple) else [x]
        out += [None if y is None or str(y) == "?" else str(y) for y in items]
    return out


def slots(ids: Sequence[str | None]) -> list[str]:
    """One unique document id per rank: the first occurrence of an id keeps it, a repeat or a placeholder
    becomes ``#slot<rank>``."""
    seen: set[str] = set()
    out = []
    for i, x in enumerate(ids):
        if x is None or x in seen:
            out.append(f"{SLOT_PREFIX}{i}")
        else:
            seen.add(x)
            out.append(x)
    return out


def level_rankings(ranking: Sequence[Any], session_of: Mapping[str, int]) -> dict[str, list[str]]:
    """A delivered ranking at both levels: ``turn`` (ids that name no turn of ``session_of`` are placeholders)
    and ``session`` (``S<index>`` of each ranked turn's session, first occurrence)."""
    turns = [t if t is not None and t in session_of else None for t in flatten(ranking)]
    sessions = list(dict.fromkeys(f"S{session_of[t]}" for t in turns if t is not None))
    return {"turn": slots(turns), "session": sessions}


def level_qrels(evidence: Sequence[str], session_of: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """Binary relevance at both levels: the evidence turns that exist, and their sessions."""
    ev = [e for e in dict.fromkeys(evidence) if e in session_of]
    return {"turn": {e: 1 for e in ev}, "session": {f"S{session_of[e]}": 1 for e in ev}}


def run_text(rankings: Mapping[str, Sequence[str]], tag: str) -> str:
    """The text of a run file: for each query (in the given order) its documents, best first, with strictly
    decreasing scores."""
    _check_id(tag, "run tag")
    lines = []
    for qid, docs in rankings.items():
        _check_id(qid, "query id")
        if len(set(docs)) != len(docs):
            raise ValueError(f"query {qid}: a document id is listed twice; pass the ranking through slots()")
        n = len(docs)
        for i, d in enumerate(docs):
            _check_id(d, "document id")
            lines.append(f"{qid} Q0 {d} {i + 1} {n - i} {tag}")
    return "".join(line + "\n" for line in lines)


def qrels_text(qrels: Mapping[str, Mapping[str, int]]) -> str:
    """The text of a qrels file (``query 0 doc relevance``)."""
    lines = []
    for qid, docs in qrels.items():
        _check_id(qid, "query id")
        for d, rel in docs.items():
            _check_id(d, "document id")
            lines.append(f"{qid} 0 {d} {int(rel)}")
    return "".join(line + "\n" for line in lines)


def _check_row(row: str) -> None:
    if not row or row.startswith(".") or any(c in row for c in "/\\") or any(c.isspace() for c in row):
        raise ValueError(f"row {row!r}: a run file is named after its row, which must be a plain name")


def write_trec(folder: Path | str, runs: Mapping[str, Mapping[str, Mapping[str, Sequence[str]]]],
               qrels: Mapping[str, Mapping[str, Mapping[str, int]]], *,
               fault_hook: Callable[[str], None] | None = None) -> list[Path]:
    """Write ``runs[row][level][query] = documents`` as ``folder/runs/<row>.<level>.trec`` and
    ``qrels[level][query] = {doc: relevance}`` as ``folder/qrels.<level>.trec`` (each file atomically; the fault
    hook sees :data:`WRITE_STEP`); returns the paths written."""
    from harness.atomic import write_atomic

    folder = Path(folder)
    paths = []
    for level, q in qrels.items():
        p = folder / f"qrels.{level}.trec"
        write_atomic(p, qrels_text(q).encode("utf-8"), fault_hook, WRITE_STEP)
        paths.append(p)
    for row, levels in runs.items():
        _check_row(row)
        for level, rankings in levels.items():
            p = folder / "runs" / f"{row}.{level}.trec"
            write_atomic(p, run_text(rankings, row).encode("utf-8"), fault_hook, WRITE_STEP)
            paths.append(p)
    return paths
