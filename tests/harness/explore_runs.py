"""Design run folders the delivery-store and explorer tests read: a quick LoCoMo slice through every arm (skipped
without the LoCoMo data), two generated LongMemEval questions, and the hand-made tiny conversation. Each is made once
per test process (session fixtures under pytest's temporary folder) through :func:`write_design_run`, which runs
``harness.workloads.runner.run_conversation`` and writes the per-probe table and the delivery store; every
delivered row is also kept as the arm returned it (``Capture``), so tests compare the store with the real texts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.deliveries.run import write_design_run
from harness.workloads.arms import DEFAULT_ARMS
from harness.workloads.locomo import Conversation, find_locomo_path, load_locomo


@dataclass
class Capture:
    """A run folder and what each row delivered: ``texts[(cluster, probe, row)]`` and the deliveries."""

    run_dir: Path
    name: str
    conversations: list[Conversation]
    texts: dict[tuple[str, str, str], str] = field(default_factory=dict)
    deliveries: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def table(self) -> Path:
        return self.run_dir / f"{self.name}.probes.parquet"

    @property
    def store(self) -> Path:
        return self.run_dir / f"{self.name}.deliveries.json.gz"


def _run(tmp: Path, name: str, convs: list[Conversation], arms: list[str], data: str, *, synthetic: bool = False,
         others: Any = None) -> Capture:
    """One run folder over ``convs`` (LoCoMo: one conversation, so a probe's key needs only the probe)."""
    from harness.deliveries import probe_key

    cap = Capture(tmp / "run", name, convs)
    cap.run_dir.mkdir(parents=True)

    def keep(row: str, probe: Any, d: Any) -> None:
        key = (*probe_key(probe, convs[0]), row)
        cap.texts[key] = d.text
        cap.deliveries[key] = d

    _, _, cap.results = write_design_run(cap.run_dir, name, convs, arms, tmp / "work", data=data, synthetic=synthetic,
                                         others=others, quick=True, on_delivery=keep)
    return cap


def locomo_quick(tmp: Path) -> Capture:
    """The first LoCoMo conversation cut as ``--quick`` cuts it, every default arm (PM trains on the others)."""
    from benchmarks.locomo import quick_slice

    path = find_locomo_path()
    if path is None:
        pytest.skip("LoCoMo data not found (set MEMSIM_LOCOMO_DATA)")
    loaded = load_locomo(path)
    conv = quick_slice(loaded[0])
    others = tuple(c for c in loaded[1:])
    return _run(tmp, "locomo", [conv], list(DEFAULT_ARMS), "data: locomo quick slice", others=lambda c: others)


def lme_generated(tmp: Path, n: int = 2, sessions: int = 8) -> Capture:
    """``n`` generated LongMemEval questions (``sessions`` sessions each), every arm that applies."""
    from benchmarks.longmemeval import default_arms
    from benchmarks.worlds.longmemeval import generate
    from harness.workloads.lme_workload import to_conversation
    from harness.workloads.longmemeval import parse_question

    convs = [to_conversation(parse_question(q, source="generated.json", index=i))
             for i, q in enumerate(generate(n, seed=3, sessions=sessions))]
    pm_train = tuple(to_conversation(parse_question(q, source="train.json", index=i))
                     for i, q in enumerate(generate(3, seed=11, sessions=sessions)))
    return _run(tmp, "longmemeval", convs, list(default_arms()), "data: synthetic, benchmarks.worlds.longmemeval "
                "seed 3", synthetic=True, others=lambda c: pm_train)


def tiny(tmp: Path, arms: list[str] | None = None) -> Capture:
    """The hand-made two-session conversation (no data needed), PM trained on a second copy of it."""
    from tests.harness.locomo_arms_fixture import tiny_conversation

    other = tiny_conversation("tiny-2")
    return _run(tmp, "tiny", [tiny_conversation()], arms or ["full", "bm25", "oracle-nodate", "fractal", "np-mean",
                                                                  "pm", "tortoise"], "data: hand-made",
                others=lambda c: (other,))


_CACHE: dict[str, Capture] = {}
_MAKERS = {"locomo": locomo_quick, "lme": lme_generated, "tiny": tiny}


def cached(kind: str, factory: pytest.TempPathFactory) -> Capture:
    """The run ``kind`` (``locomo``, ``lme``, ``tiny``), made once per test session and shared by the test modules
    and worker processes that ask for it: the first maker holds a lock in the session's temporary folder (the one
    pytest-xdist's workers share, as its documentation shows for session fixtures) and leaves the run and a pickle
    of its capture there; the others read them. A skip (LoCoMo without its data) is raised again each time."""
    import fcntl
    import os
    import pickle
    import shutil

    if kind in _CACHE:
        return _CACHE[kind]
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder = root / f"explore-run-{kind}"
    with open(root / f"explore-run-{kind}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = folder / "capture.pickle"
        if done.exists():
            cap = pickle.loads(done.read_bytes())
        else:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            cap = _MAKERS[kind](folder)
            done.write_bytes(pickle.dumps(cap))
    _CACHE[kind] = cap
    return cap
