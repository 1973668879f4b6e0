"""Shared scenario helpers for the AgentFly claims (AGF-nn) and the ``memsim agentfly`` CLI.

``offline_agents`` builds the default agents of the harness: dspy modules (``agentfly_sim.dspy_agents``) whose
LMs are ``harness.offline_lm.ScriptedLM`` instances driven by the offline scripted policies of
``agentfly_sim.agents`` (spec §1.1). ``plain_agents`` returns the scripted policies themselves (no dspy hop), which
the claims use where the point is the driver's behaviour rather than the LM seam.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentfly_sim.agents import ScriptedExecutor, ScriptedJudge, ScriptedPlanner


@dataclass
class Agents:
    planner: Any
    executor: Any
    judge: Any
    scripted_planner: ScriptedPlanner
    scripted_executor: ScriptedExecutor
    scripted_judge: ScriptedJudge


def plain_agents(*, planner: ScriptedPlanner | None = None, executor: ScriptedExecutor | None = None,
                 judge: ScriptedJudge | None = None, seed: int = 0) -> Agents:
    p = planner or ScriptedPlanner(seed=seed)
    e = executor or ScriptedExecutor()
    j = judge or ScriptedJudge()
    return Agents(p, e, j, p, e, j)


def offline_agents(*, planner: ScriptedPlanner | None = None, executor: ScriptedExecutor | None = None,
                   judge: ScriptedJudge | None = None, seed: int = 0) -> Agents:
    """dspy planner/executor/judge modules over ``ScriptedLM`` policies (the harness's offline default)."""
    from agentfly_sim.dspy_agents import ExecutorModule, JudgeModule, PlannerModule
    from agentfly_sim.workspace import TOOL_SCHEMAS
    from harness.offline_lm import ScriptedLM

    sp = planner or ScriptedPlanner(seed=seed)
    se = executor or ScriptedExecutor()
    sj = judge or ScriptedJudge()

    class _Planner(PlannerModule):
        def begin_question(self, question: str, ground_truth: Any = None) -> None:
            super().begin_question(question, ground_truth)
            sp.begin_question(question, ground_truth)

    class _Executor(ExecutorModule):
        def begin_question(self, question: str, ground_truth: Any = None) -> None:
            super().begin_question(question, ground_truth)
            se.begin_question(question, ground_truth)

        def begin_task(self, question: str, step_id: Any) -> None:
            super().begin_task(question, step_id)
            se.begin_task(question, step_id)

    planner_lm = ScriptedLM(policy=lambda req: sp.complete(req.messages) or "", seed=seed)
    executor_lm = ScriptedLM(policy=lambda req: json.dumps(se.complete(req.messages)), seed=seed)
    judge_lm = ScriptedLM(policy=lambda req: sj.complete(req.user), seed=seed)
    return Agents(_Planner(planner_lm), _Executor(executor_lm, TOOL_SCHEMAS), JudgeModule(judge_lm), sp, se, sj)


def corpus(data_dir: Path | None, name: str) -> Path | None:
    """A shipped corpus file when the corpora directory is present, else None."""
    if data_dir is None:
        return None
    p = Path(data_dir) / name
    return p if p.is_file() else None


def upstream_layout(root: Path, *, bank: Path | None = None, bank_name: str = "dummy_memo.jsonl",
                    dataset_rows: list[dict[str, Any]] | None = None, result_dir: bool = True) -> Path:
    """An upstream checkout layout under ``root``: ``client/`` (the working dir), ``memory/``, ``data/`` and
    (optionally) ``result/``. Returns ``client_dir``."""
    client = root / "client"
    client.mkdir(parents=True, exist_ok=True)
    (root / "memory").mkdir(exist_ok=True)
    (root / "data").mkdir(exist_ok=True)
    if result_dir:
        (root / "result").mkdir(exist_ok=True)
    if bank is not None:
        shutil.copyfile(bank, root / "memory" / bank_name)
    if dataset_rows is not None:
        with open(root / "data" / "deepresearcher.jsonl", "w", encoding="utf-8") as f:
            for r in dataset_rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return client


def read_rows(path: Path | str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ------------------------------------------------------------------------------------------ scenario helpers
_CKPTS: dict[int, Path] = {}


def untrained_checkpoint(seed: int = 0) -> Path:
    """A seeded untrained MiniLM classifier checkpoint, written once per process (an input artefact, ~92 MB)."""
    import atexit
    import tempfile

    if seed not in _CKPTS:
        from agentfly_sim.classifier import make_untrained_checkpoint

        d = Path(tempfile.mkdtemp(prefix="memsim-agf-ckpt-"))
        atexit.register(shutil.rmtree, d, True)
        _CKPTS[seed] = Path(make_untrained_checkpoint(d / f"untrained_{seed}.pt", seed=seed))
    return _CKPTS[seed]


def set_threads() -> None:
    import torch

    torch.set_num_threads(1)


def np_layout(tmp_path: Path, dataset_rows: list[dict[str, Any]]) -> tuple[Path, Path]:
    """One torch thread, then an upstream layout under ``tmp_path/np`` with ``dataset_rows`` as the benchmark.
    Returns ``(root, client_dir)``."""
    set_threads()
    root = tmp_path / "np"
    return root, upstream_layout(root, dataset_rows=dataset_rows)


def plan_text(*steps: str, compact: bool = True) -> str:
    plan = {"plan": [{"id": i, "description": s} for i, s in enumerate(steps, 1)]}
    return json.dumps(plan, separators=(",", ":")) if compact else json.dumps(plan)


def pm_rows(labels: list[str], prefix: str = "Case") -> list[dict[str, Any]]:
    return [{"case": f"{prefix} question {i}?", "plan": plan_text(f"step for {prefix.lower()} {i}"),
             "case_label": lab} for i, lab in enumerate(labels)]


def np_rows(rewards: list[int | None], prefix: str = "Which city hosts landmark") -> list[dict[str, Any]]:
    rows = []
    for i, r in enumerate(rewards):
        row: dict[str, Any] = {"question": f"{prefix} {i}?", "plan": plan_text(f"look up landmark {i}")}
        if r is not None:
            row["reward"] = r
        rows.append(row)
    return rows


def questions(n: int, prefix: str = "What is the answer to synthetic question") -> list[dict[str, Any]]:
    return [{"question": f"{prefix} {i}?", "ground_truth": f"answer {i}", "data_source": "synthetic"}
            for i in range(n)]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


def quiet() -> Any:
    import io

    return io.StringIO()
