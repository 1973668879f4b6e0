"""Real kills: run a scenario in a child process that SIGKILLs itself at a chosen step, restart in a fresh one.

In-process crashes (``harness.reliability.crash``) raise an exception, so Python still runs ``finally`` blocks, closes
files and lets Kuzu roll back. A SIGKILL does none of that: the child dies with whatever is in its buffers and
whatever Kuzu had in its write-ahead log. The parent then starts a *fresh* interpreter that restarts the design
from disk and runs the scenario's check. This exercises what a simulation cannot: buffered writes, Kuzu's WAL
recovery after a kill mid-transaction, temp files left behind by an interrupted atomic write.

``python -m harness.reliability.kill child|check ...`` are the two child entry points (used by :func:`kill_run`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.reliability.child import child_main
from harness.reliability.crash import (
    Acks,
    Check,
    CrashHook,
    Event,
    KillPlan,
    Scenario,
    all_scenarios,
    leftover_temp_files,
)
from harness.reliability.kill_service import kill_run_service

KILL_PLANS: list[KillPlan] = [
    KillPlan("fractal.submit", "faithful", "after", "fractal.session.save", 3,
             "killed right after save #1 of the 2nd submit: the pending turn is on disk, the 1st turn must survive"),
    KillPlan("fractal.submit", "hardened", "after", "fractal.session.save.tmp", 4,
             "killed between the temp file and os.replace of save #2 of the 2nd submit: a temp file is left"),
    KillPlan("agentfly.pm", "faithful", "after", "agentfly.result_write", 2,
             "killed after the 2nd question's result append: its pairs and case are never written (AGF-38)"),
    KillPlan("agentfly.pm", "hardened", "after", "agentfly.result_write", 2,
             "killed after the journalled result append: the restart redoes the question's pairs and case"),
    KillPlan("tortoise.capture", "faithful", "before", "kuzu.commit", 3,
             "killed inside the feed-row transaction of the 2nd turn's PointAdded (statements run, no COMMIT): "
             "Kuzu's WAL recovery must drop it on reopen; the committed turns stay, one without its event"),
    KillPlan("tortoise.capture", "hardened", "after", "kuzu.commit", 1,
             "killed right after the capture's single COMMIT: the journal lines are re-derived from the feed"),
]


def _scenario(sequence: str) -> Scenario:
    for sc in all_scenarios(sequence.split(".")[0]):
        if sc.sequence == sequence:
            return sc
    raise KeyError(sequence)


class _AckFile(Acks):
    """Acks that also land in a file at once (the parent reads them after the kill)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def append(self, item: str) -> None:
        super().append(item)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(item) + "\n")


def _child(sequence: str, root: str, mode: str, kind: str, step: str, occurrence: int) -> None:
    seen = {"n": 0}

    def on_event(ev: Event) -> None:
        if ev.kind == kind and ev.step == step:
            seen["n"] += 1
            if seen["n"] == occurrence:
                os.kill(os.getpid(), signal.SIGKILL)

    sc = _scenario(sequence)
    sc.run(Path(root) / "design", CrashHook(on_event=on_event), mode, _AckFile(Path(root) / "acks.jsonl"))


def _check(sequence: str, root: str, mode: str) -> None:
    acks_path = Path(root) / "acks.jsonl"
    acks = [json.loads(x) for x in acks_path.read_text().splitlines()] if acks_path.exists() else []
    design = Path(root) / "design"
    c: Check = _scenario(sequence).check(design, acks, mode)
    print(json.dumps({"outcome": c.outcome, "start": c.start, "lost": c.lost, "duplicates": c.duplicates,
                      "disagree": c.disagree, "notes": c.notes[:5], "acked": len(acks),
                      "leftover_temp_files": leftover_temp_files(design)}))


def kill_run(plan: KillPlan, *, timeout: float = 120.0) -> dict[str, Any]:
    """Run ``plan`` in a child, then check in a fresh process. Returns the check as a dict plus
    ``killed`` (the child died of SIGKILL) and timings. Plans of the resident service (``tortoise.service``,
    ``harness.reliability.kill_service.SERVICE_KILL_PLANS``) kill a service process while a client captures."""
    if plan.sequence == "tortoise.service":
        return kill_run_service(plan, timeout=timeout)
    root = Path(tempfile.mkdtemp(prefix=f"kill-{plan.sequence}-"))
    (root / "design").mkdir()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    child = subprocess.run([sys.executable, "-m", "harness.reliability.kill", "child", plan.sequence, str(root), plan.mode,
                            plan.kind, plan.step, str(plan.occurrence)], capture_output=True, text=True,
                           timeout=timeout, env=env)
    t1 = time.perf_counter()
    check = subprocess.run([sys.executable, "-m", "harness.reliability.kill", "check", plan.sequence, str(root), plan.mode],
                           capture_output=True, text=True, timeout=timeout, env=env)
    t2 = time.perf_counter()
    out: dict[str, Any] = {"sequence": plan.sequence, "mode": plan.mode, "kill_at": plan.label(), "why": plan.why,
                           "killed": child.returncode == -signal.SIGKILL, "child_returncode": child.returncode,
                           "child_seconds": round(t1 - t0, 2), "check_seconds": round(t2 - t1, 2)}
    if check.returncode != 0:
        out.update(outcome="check_failed", error=(check.stderr or check.stdout).strip().splitlines()[-1:])
    else:
        out.update(json.loads(check.stdout.strip().splitlines()[-1]))
    if child.returncode not in (0, -signal.SIGKILL):
        out["child_error"] = (child.stderr or "").strip().splitlines()[-1:]
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv: list[str]) -> None:
    child_main(argv, {"child": lambda seq, root, mode, kind, step, occ: _child(seq, root, mode, kind, step, int(occ)),
                      "check": _check})


if __name__ == "__main__":
    main(sys.argv[1:])
