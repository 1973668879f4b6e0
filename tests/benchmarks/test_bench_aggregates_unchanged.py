"""The point estimates of the LongMemEval design run, the LoCoMo paper protocol and the LongMemEval protocol are
unchanged by the per-probe table (every aggregate now computed from ``<name>.probes.parquet``).

The snapshot ``tests/benchmarks/data/bench_aggregates_snapshot.json`` holds, for each of the three benches, the
aggregates of its results JSON on a small slice (the hand-made LongMemEval questions of ``lme_fixture`` and the
two-session LoCoMo conversation of the paper-protocol tests), with what depends on time or machine removed. It was
written by the code before the table existed (``python -m tests.benchmarks.test_bench_aggregates_unchanged
--write``, :func:`run_slices`). The test reads the same aggregates from the shared quick runs
(``tests/benchmarks/bench_runs.py``: the same data and settings, plus a second retriever and two more arms, whose
rows it leaves out) and compares every number (relative tolerance 1e-12: a mean summed in another order may differ
in its last bit) and every other value exactly. The LoCoMo design run has its own
snapshot (``tests/harness/test_locomo_unchanged.py``).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.harness import lme_fixture as fx

torch.set_num_threads(1)

SNAPSHOT = Path(__file__).parent / "data" / "bench_aggregates_snapshot.json"
LME_ARMS = "full,bm25,hybrid,oracle,np-mean,tortoise"


def _conv_file(path: Path) -> Path:
    from tests.harness.test_paper_protocol import conv_json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(conv_json()), encoding="utf-8")
    return path


def run_slices(tmp: Path) -> dict[str, Any]:
    """Each bench's aggregates on its slice, without timings (how the snapshot was written)."""
    from benchmarks import locomo_paper, longmemeval, longmemeval_protocol
    from benchmarks.locomo import without_timings

    lme = fx.write(tmp / "lme.json", fx.quirky_questions())
    out: dict[str, Any] = {}
    longmemeval.run(tmp / "designs", data=lme, arms=LME_ARMS, k_values=(1, 4), embed="per-call")
    p = json.loads((tmp / "designs" / "longmemeval.json").read_text(encoding="utf-8"))
    agg = p["aggregate"]
    out["longmemeval"] = without_timings({"rows": agg["rows"], "expansion": agg["expansion"]})
    longmemeval_protocol.run(tmp / "protocol", data=lme, retrievers=("bm25",))
    p = json.loads((tmp / "protocol" / "longmemeval-protocol.json").read_text(encoding="utf-8"))
    out["longmemeval-protocol"] = p["rows"]
    locomo_paper.run(tmp / "paper", data=_conv_file(tmp / "data" / "conv-t.json"), retrievers="bm25",
                     arms="oracle,bm25")
    p = json.loads((tmp / "paper" / "locomo-paper.json").read_text(encoding="utf-8"))
    out["locomo-paper"] = {"rows": p["rows"], "design_rows": p["design_rows"]}
    return json.loads(json.dumps(out))


def shared_slices(factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same aggregates from the shared quick runs (``bench_runs``), which add retrievers and arms the slices
    did not have: their bm25 rows and the slices' design rows are compared."""
    from benchmarks.locomo import without_timings
    from tests.benchmarks.bench_runs import bench_run

    agg = bench_run("longmemeval", factory).payload["aggregate"]
    proto = bench_run("longmemeval-protocol", factory).payload
    paper = bench_run("locomo-paper", factory).payload
    keep = {"oracle", "bm25@4", "bm25@8"}
    return json.loads(json.dumps({
        "longmemeval": without_timings({"rows": agg["rows"], "expansion": agg["expansion"]}),
        "longmemeval-protocol": [r for r in proto["rows"] if r["retriever"] == "bm25"],
        "locomo-paper": {"rows": [r for r in paper["rows"] if r["retriever"] == "bm25"],
                         "design_rows": [r for r in paper["design_rows"] if r["retriever"] in keep]}}))


def close(a: Any, b: Any, where: str = "") -> list[str]:
    """Every place where ``a`` and ``b`` differ (numbers within 1e-12 relative are equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}/{k}: only in one" for k in set(a) ^ set(b)]
        for k in a.keys() & b.keys():
            out += close(a[k], b[k], f"{where}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} != {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in close(x, y, f"{where}[{i}]")]
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        return [] if math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15) else [f"{where}: {a} != {b}"]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def test_aggregates_equal_the_pre_table_snapshot(tmp_path_factory: pytest.TempPathFactory) -> None:
    expected = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert close(shared_slices(tmp_path_factory), expected) == []


if __name__ == "__main__" and "--write" in sys.argv:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        snap = run_slices(Path(d))
    SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
    SNAPSHOT.write_text(json.dumps(snap, sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {SNAPSHOT}")
