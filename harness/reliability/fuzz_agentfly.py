"""Fuzz targets of AgentFly's loaders: the NP bank (lenient, spec 3.1-3.2), the PM bank / retrieve pool, the training
pairs and the dataset (strict JSON lines: one bad line fails the load with its file and line)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.reliability.fuzz_core import (
    Crash,
    FuzzInput,
    Target,
    documented_rejection,
    no_writes,
    place,
    read_only,
    snapshot,
)


def _np_bank(inp: FuzzInput, tmp: Path) -> str:
    from agentfly_sim.bank import extract_pairs, load_jsonl

    path = tmp / "memory.jsonl"
    place(inp, path)
    before = snapshot(tmp)
    err = io.StringIO()
    try:
        items = load_jsonl(path, stderr=err)
    except (OSError, UnicodeDecodeError) as exc:  # a file the NP driver cannot open or decode at all
        no_writes(before, tmp)
        return documented_rejection(exc, path, (OSError,)) if isinstance(exc, OSError) else "rejected"
    no_writes(before, tmp)
    warned = err.getvalue().count("[WARN] Failed to parse line")
    try:
        extract_pairs(items)
    except (TypeError, AttributeError):  # spec 3.2: a non-object item aborts the extraction (faithful)
        return "skipped"
    return "skipped" if warned else "accepted"


def _strict_jsonl(make: Callable[[Path], Any]) -> Callable[[FuzzInput, Path], str]:
    def run(inp: FuzzInput, tmp: Path) -> str:
        from agentfly_sim.bank import JsonlLineError

        with read_only(inp, tmp / "rows.jsonl", tmp) as path:
            try:
                make(path)
            except (JsonlLineError, OSError, UnicodeDecodeError, ValueError) as exc:
                if isinstance(exc, UnicodeDecodeError):
                    raise Crash(f"UnicodeDecodeError without the file: {exc}") from None
                if isinstance(exc, JsonlLineError) and not (exc.path == str(path) and exc.lineno >= 1):
                    raise Crash(f"JsonlLineError without file/line: {exc}") from None
                if isinstance(exc, JsonlLineError) or str(exc) == "Pool is empty":
                    return "rejected"
                return documented_rejection(exc, path, (OSError,))
        return "accepted"

    return run


def _pool(path: Path) -> Any:
    from agentfly_sim.bank import load_pool

    return load_pool(path)


def _pairs(path: Path) -> Any:
    from agentfly_sim.training import PairJsonlDataset

    return PairJsonlDataset(path, use_plan=True)


def _dataset(path: Path) -> Any:
    from agentfly_sim.bank import load_dataset

    return load_dataset(path)


_NP_SEED = b'{"question": "q1", "plan": "p1", "reward": 1}\n{"question": "q2", "plan": "p2", "reward": 0}\n'
_POOL_SEED = b'{"case": "c1", "plan": "p1", "case_label": "positive"}\n{"case": "c2", "plan": {"steps": []}}\n'
_PAIRS_SEED = b'{"query": "q", "case": "c", "plan": "p", "truth_label": 1}\n{"query": "q", "case": "d", ' \
              b'"truth_label": false}\n'
_DATASET_SEED = b'{"question": "q1", "ground_truth": "a"}\n{"question": "q2", "ground_truth": "b"}\n'


def targets() -> list[Target]:
    """AgentFly's targets, in report order."""
    return [
        Target("agentfly-np-bank", "agentfly_sim.bank.load_jsonl + extract_pairs", _np_bank, _NP_SEED,
               ("question", "plan", "reward"), True,
               "malformed lines skipped with [WARN] and non-object items abort extraction (spec 3.1-3.2, AGF-05) "
               "= skipped; unreadable file = rejected"),
        Target("agentfly-pm-bank", "agentfly_sim.bank.load_pool (PM bank and retrieve pool)", _strict_jsonl(_pool),
               _POOL_SEED, ("case", "plan", "case_label"), True,
               "JsonlLineError <file>:<line> (one bad line fails the load, AGF-07) or 'Pool is empty' = rejected"),
        Target("agentfly-training-pairs", "agentfly_sim.training.PairJsonlDataset", _strict_jsonl(_pairs),
               _PAIRS_SEED, ("query", "case", "plan", "truth_label"), True, "JsonlLineError <file>:<line> = rejected"),
        Target("agentfly-dataset", "agentfly_sim.bank.load_dataset", _strict_jsonl(_dataset), _DATASET_SEED,
               ("question", "ground_truth"), True, "JsonlLineError <file>:<line> = rejected"),
    ]
