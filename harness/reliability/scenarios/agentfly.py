"""AgentFly write sequences: NP and PM per-question appends and restart suppression (spec §2, §6.1, §6.5, §6.8).

Faithful: result line, PM pairs and the case are separate appends; restart suppression trusts the result line
alone. A crash after the result append loses the case (and pairs) for good (AGF-38, REL-03); a torn result line
makes the question re-run, and its record lands on the torn line, so every later restart re-runs it again and
appends its case again (AGF-30, REL-04). A torn case line makes the PM pool unloadable (AGF-07).
Hardened: ``DriverConfig(durability="journal")`` (``agentfly_sim.journal``).

The check restarts the driver on the same files and lets it run to completion (twice, since a torn line shows
its harm on the second restart), then reads every file: each dataset question must have exactly one parseable
result line, exactly one case, and (PM) one group of training pairs; no unparseable lines may remain.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from agentfly_sim.agents import ScriptedExecutor, ScriptedJudge, ScriptedPlanner
from agentfly_sim.driver import DriverConfig, NPDriver, PMDriver
from agentfly_sim.testing import ScoreFunctionRetriever, rank_by_index
from harness.reliability.crash import Acks, Check, Scenario

QUESTIONS = [f"Which year did event {i} happen?" for i in range(3)]
SEED_PLAN = '{"plan":[{"id":1,"description":"search"}]}'


class _NoRetrieval:
    """NP selector stand-in: no examples (retrieval is not what these sequences exercise; avoids torch)."""

    def retrieve(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return []


def layout(root: Path, kind: str, questions: list[str] | None = None) -> Path:
    client = root / "client"
    for d in (client, root / "memory", root / "data", root / "result"):
        d.mkdir(parents=True, exist_ok=True)
    rows = [{"question": q, "ground_truth": f"answer {i}"} for i, q in enumerate(questions or QUESTIONS)]
    (root / "data/deepresearcher.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if kind == "pm":
        bank = [{"case": f"Seed case {i}?", "plan": SEED_PLAN, "case_label": "positive"} for i in range(2)]
        (root / "memory/memory.jsonl").write_text("".join(json.dumps(b) + "\n" for b in bank))
    else:
        bank = [{"question": f"Seed question {i}?", "plan": SEED_PLAN, "reward": 1} for i in range(2)]
        (root / "memory/dummy_memo.jsonl").write_text("".join(json.dumps(b) + "\n" for b in bank))
    return client


def make_driver(client: Path, kind: str, mode: str, hook: Any = None,
                on_question: Any = None) -> NPDriver | PMDriver:
    cfg = DriverConfig(durability="faithful" if mode == "faithful" else "journal")
    agents = (ScriptedPlanner(), ScriptedExecutor(), ScriptedJudge())
    if kind == "pm":
        return PMDriver(client, *agents, config=cfg, retriever=ScoreFunctionRetriever(rank_by_index),
                        fault_hook=hook, out=io.StringIO(), on_question=on_question)
    return NPDriver(client, *agents, config=cfg, selector=_NoRetrieval(), fault_hook=hook, out=io.StringIO(),
                    on_question=on_question)


def _runner(kind: str):
    def run(root: Path, hook: Any, mode: str, acks: Acks) -> None:
        client = layout(root, kind)
        current: list[str] = []

        def on_question(i: int, n: int, q: str) -> None:
            if current:
                acks.append(current.pop())
            current.append(q)

        make_driver(client, kind, mode, hook, on_question).run()
        if current:
            acks.append(current.pop())
    return run


def _lines(path: Path) -> tuple[list[dict[str, Any]], int]:
    if not path.exists():
        return [], 0
    good, bad = [], 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(obj, dict):
            good.append(obj)
        else:
            bad += 1
    return good, bad


def _checker(kind: str):
    def check(root: Path, acks: list[str], mode: str) -> Check:
        c = Check()
        client = root / "client"
        for _ in range(2):  # restart twice: a torn line re-runs its question on every restart (AGF-30)
            try:
                make_driver(client, kind, mode).run()
            except Exception as exc:  # noqa: BLE001 - a restart that cannot start is an outcome
                c.start = "clear_error" if str(root) in str(exc) else "unclear_error"
                c.notes.append(f"restart failed: {exc!r}"[:200])
                return c
        result_name = "result_parametric.jsonl" if kind == "pm" else "result_round_0.jsonl"
        bank_name = "memory.jsonl" if kind == "pm" else "dummy_memo.jsonl"
        key = "case" if kind == "pm" else "question"
        results, bad_results = _lines(root / "result" / result_name)
        bank, bad_bank = _lines(root / "memory" / bank_name)
        res_q = [r.get("query") or r.get("question") for r in results]
        case_q = [b.get(key) for b in bank if b.get(key) in QUESTIONS]
        for q in QUESTIONS:
            if case_q.count(q) == 0:
                tag = "acknowledged" if q in acks else "in flight, suppressed by restart"
                c.lost.append(f"case of {q!r} ({tag})")
            if case_q.count(q) > 1:
                c.duplicates.append(f"case of {q!r} x{case_q.count(q)}")
            if res_q.count(q) > 1:
                c.duplicates.append(f"result of {q!r} x{res_q.count(q)}")
        for name, bad in ((result_name, bad_results), (bank_name, bad_bank)):
            if bad:
                c.disagree.append(f"{name}: {bad} unparseable line(s)")
        if kind == "pm":
            pairs, bad_pairs = _lines(root / "memory" / "training_data.jsonl")
            if bad_pairs:
                c.disagree.append(f"training_data.jsonl: {bad_pairs} unparseable line(s)")
            keys = [(p.get("query"), p.get("case")) for p in pairs]
            c.duplicates += [f"pair {k}" for k in sorted(set(keys), key=str) if keys.count(k) > 1]
            pair_q = {p.get("query") for p in pairs}
            for q in QUESTIONS:
                if q not in pair_q:  # the seeded bank makes every question retrieve cases, so each writes pairs
                    tag = "acknowledged" if q in acks else "in flight, suppressed by restart"
                    c.lost.append(f"training pairs of {q!r} ({tag})")
                if q in case_q and q not in pair_q:
                    c.disagree.append(f"case of {q!r} without training pairs")
                if q in pair_q and q not in case_q:
                    c.disagree.append(f"training pairs of {q!r} without a case")
        return c
    return check


def scenarios() -> list[Scenario]:
    opt = "DriverConfig(durability='journal')"
    return [*_driver_scenarios(opt), *train_scenarios()]


def _driver_scenarios(opt: str) -> list[Scenario]:
    return [
        Scenario("agentfly", "agentfly.np", "NP driver, 3 questions: result append, case append, reload; "
                 "restart suppression", _runner("np"), _checker("np"), hardened_option=opt),
        Scenario("agentfly", "agentfly.pm", "PM driver, 3 questions: result, pairs and case appends, pool reload; "
                 "restart suppression", _runner("pm"), _checker("pm"), hardened_option=opt),
    ]


# ------------------------------------------------------------------------------------------------ trainer
def _pairs_file(root: Path) -> Path:
    """24 pairs with coin-flip labels (seed 2): validation AUC improves twice, so best.pt is saved twice."""
    import random

    rng = random.Random(2)
    rows = [{"query": f"query about topic {i % 6}", "case": f"case text {i} on topic {(i * 5) % 7}",
             "case_label": "positive", "plan": "{}", "truth_label": rng.random() < 0.5} for i in range(24)]
    path = root / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run_train(root: Path, hook: Any, mode: str, acks: Acks) -> None:
    import torch

    from agentfly_sim.training import TrainConfig, train

    torch.set_num_threads(1)
    cfg = TrainConfig(train=str(_pairs_file(root)), output_dir=str(root / "ckpt"), epochs=2, batch_size=4,
                      val_ratio=0.25, freeze_backbone=True, save_best=True, eval_every=2, lr=1e-3,
                      atomic_checkpoints=mode == "hardened")

    def log(line: str) -> None:
        if "best updated" in line:
            acks.append("best")

    train(cfg, log=log, fault_hook=hook)
    acks.append("done")


def check_train(root: Path, acks: list[str], mode: str) -> Check:
    """Restart: load the checkpoints as the PM retriever does (``torch.load``) and read the metrics."""
    import torch

    c = Check()
    ckpt = root / "ckpt"
    loadable: dict[str, bool] = {}
    for name in ("best.pt", "last.pt"):
        path = ckpt / name
        if path.exists():
            try:
                torch.load(path, map_location="cpu", weights_only=True)
                loadable[name] = True
            except Exception as exc:  # noqa: BLE001 - an unreadable checkpoint is an outcome
                loadable[name] = False
                c.notes.append(f"{name}: {type(exc).__name__}: {str(exc)[:80]}")
    if "best" in acks and not loadable.get("best.pt"):
        c.lost.append("best.pt (a best checkpoint was acknowledged; none loads)")
    if "done" in acks:
        if not loadable.get("last.pt"):
            c.lost.append("last.pt")
        try:
            metrics = json.loads((ckpt / "metrics.json").read_text())
        except (OSError, json.JSONDecodeError) as exc:
            c.lost.append(f"metrics.json ({type(exc).__name__})")
        else:
            if metrics.get("best_path") and not loadable.get("best.pt"):
                c.disagree.append("metrics.json names a best.pt that does not load")
    for name, ok in loadable.items():
        if not ok and not any(name in x for x in c.lost):
            c.disagree.append(f"{name} exists but does not load (an earlier save was interrupted)")
    c.notes += [f"leftover temp file {p.name}" for p in ckpt.glob(".*.tmp-*")] if ckpt.exists() else []
    return c


def train_scenarios() -> list[Scenario]:
    return [Scenario("agentfly", "agentfly.train", "retriever trainer with save_best: best.pt at each improving "
                     "evaluation, then last.pt and metrics.json", run_train, check_train,
                     hardened_option="TrainConfig(atomic_checkpoints=True)")]
