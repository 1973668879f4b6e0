"""Quick runs of the four comparison benches on small hand-made data (no data download), shared by the tests that
read their files: the LoCoMo design run on the two-conversation fixture of ``tests/harness/test_locomo_unchanged.py``
(quick, one arm of every design and every fast baseline), the LongMemEval design run and the official protocol on
the quirky questions of ``tests/harness/lme_fixture.py``, and the LoCoMo paper protocol on the two-session
conversation of ``tests/harness/test_paper_protocol.py``. Each is made once per test session (and shared by
pytest-xdist's workers through a lock in the session's temporary folder, as ``tests/harness/explore_runs.py`` does)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

LME_ARMS = "full,bm25,hybrid,oracle,np-mean,tortoise"
RETRIEVERS = "bm25,minilm"


@dataclass
class BenchRun:
    """A run folder, the run's name and the paths its ``run()`` returned."""

    out: Path
    name: str
    paths: list[Path]

    @property
    def payload(self) -> dict[str, Any]:
        return json.loads((self.out / f"{self.name}.json").read_text(encoding="utf-8"))

    @property
    def table(self) -> Path:
        return self.out / f"{self.name}.probes.parquet"


def _locomo(root: Path) -> BenchRun:
    from benchmarks import locomo
    from tests.harness.test_locomo_unchanged import ARMS, locomo_file

    out = root / "locomo-out"
    paths = locomo.run(out, quick=True, data=locomo_file(root / "tiny.json"), arms=ARMS, k_values=(2, 4), workers=1,
                       embed="per-call")
    return BenchRun(out, locomo.NAME, paths)


def _lme_file(root: Path) -> Path:
    from tests.harness import lme_fixture as fx

    path = root / "lme.json"
    return path if path.exists() else fx.write(path, fx.quirky_questions())


def _lme(root: Path) -> BenchRun:
    from benchmarks import longmemeval

    out = root / "lme-out"
    paths = longmemeval.run(out, data=_lme_file(root), arms=LME_ARMS, k_values=(1, 4), embed="per-call")
    return BenchRun(out, longmemeval.NAME, paths)


def _protocol(root: Path) -> BenchRun:
    from benchmarks import longmemeval_protocol

    out = root / "protocol-out"
    paths = longmemeval_protocol.run(out, data=_lme_file(root), retrievers=RETRIEVERS)
    return BenchRun(out, longmemeval_protocol.NAME, paths)


def _paper(root: Path) -> BenchRun:
    from benchmarks import locomo_paper
    from tests.harness.test_paper_protocol import conv_json

    data = root / "paper-data" / "conv-t.json"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text(json.dumps(conv_json()), encoding="utf-8")
    out = root / "paper-out"
    paths = locomo_paper.run(out, data=data, retrievers=RETRIEVERS, arms="oracle,bm25,np-mean,np-pooler")
    return BenchRun(out, locomo_paper.NAME, paths)


MAKERS = {"locomo": _locomo, "longmemeval": _lme, "longmemeval-protocol": _protocol, "locomo-paper": _paper}
_CACHE: dict[str, BenchRun] = {}


def bench_run(kind: str, factory: pytest.TempPathFactory) -> BenchRun:
    """The run ``kind`` (a key of :data:`MAKERS`), made once per test session."""
    import fcntl
    import os
    import pickle
    import shutil

    import torch

    torch.set_num_threads(1)
    if kind in _CACHE:
        return _CACHE[kind]
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder = root / f"bench-run-{kind}"
    with open(root / f"bench-run-{kind}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = folder / "run.pickle"
        if done.exists():
            got = pickle.loads(done.read_bytes())
        else:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            got = MAKERS[kind](folder)
            done.write_bytes(pickle.dumps(got))
    _CACHE[kind] = got
    return got
