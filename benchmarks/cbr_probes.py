"""Per-probe results of ``memsim bench cbr-loop`` (and of cbr-loop sweeps): each arm's questions as probes.

Every arm of a world answers the same questions (round r's query set is drawn from the seed alone), so the arms
are compared on shared probes. A probe is one question (``r<round>.<index>``) with its 0/1 outcomes: judged
correct (``mean_accuracy``, and ``round_<r>`` / ``final_accuracy``, null outside that round), copied a delivered
positive example (``share_with_positive_example``) and copied a right plan (``share_copied_right_plan``). Their
means over an arm's questions are the arm's numbers on the page (each round answers ``per_round`` questions).
Two per-arm quantities are no means over questions and get no interval: the bank size at the end and the
negative share of the delivered examples (a ratio over all delivered examples of a round).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

PAIRS: tuple[tuple[str, str], ...] = (
    ("np@8", "none@8"),
    ("pm@8", "np@8"),
    ("pm@8", "none@8"),
    ("np-mean@8", "np@8"),
    ("np-mean@8", "none@8"),
    ("oracle@8", "np-mean@8"),
    ("np@4", "np@8"),
    ("oracle@2", "oracle@8"),
)
"""The comparator pairs of ``memsim bench cbr-loop``, fixed before any run (the same as the cbr-loop sweep's):
each memory arm against no memory, NP's faithful pooling against the mean-pooling variant, PM against NP, the
oracle against the best practical selector, and the K sweep's K = 4 (the AgentFly paper's best) and the oracle's
K = 2 against K = 8."""
PAIR_METRICS = ("mean_accuracy", "final_accuracy", "share_with_positive_example", "round_1")
"""The metrics of the Differences section."""

if TYPE_CHECKING:
    from harness.probes import ProbeRun


def row_id(arm: str, k: int) -> str:
    """The row id of an arm at K (``np@8``)."""
    return f"{arm}@{k}"


def metrics(rounds: int) -> list[str]:
    """The per-question metrics of a run of ``rounds`` rounds, in the page's order."""
    return [*(f"round_{r}" for r in range(1, rounds + 1)), "mean_accuracy", "final_accuracy",
            "share_with_positive_example", "share_copied_right_plan"]


def question_probes(arm: dict[str, Any], row: str, rounds: int, cluster: str | None = None) -> list[dict[str, Any]]:
    """An arm's questions as per-probe rows (ids and numbers; see :mod:`harness.probes`): probe ``r<round>.<index>``
    (the same questions for every arm of a world), cluster ``r<round>`` unless given, category the round; ``mean_accuracy`` (judged correct, 0/1),
    ``share_with_positive_example`` and ``share_copied_right_plan`` (the question copied a delivered positive
    example / a right plan), and ``final_accuracy`` and ``round_<r>`` (correct, null outside that round). Their
    means over an arm's questions are the arm's numbers when every round answers as many questions."""
    out = []
    for q in arm["questions"]:
        rec: dict[str, Any] = {"workload": "cbr-loop", "cluster": cluster if cluster is not None else f"r{q['round']}",
                               "probe": f"r{q['round']}.{q['index']}",
                               "category": str(q["round"]), "abstention": False, "has_evidence": True, "row": row,
                               "arm": arm["arm"], "mean_accuracy": q["correct"],
                               "final_accuracy": q["correct"] if q["round"] == rounds else None,
                               "share_with_positive_example": q["copied_positive"],
                               "share_copied_right_plan": q["copied_right_plan"]}
        for r in range(1, rounds + 1):
            rec[f"round_{r}"] = q["correct"] if q["round"] == r else None
        out.append(rec)
    return out


def write_table(out_dir: Path, arms: list[dict[str, Any]], rounds: int, *, data: str, config: dict[str, Any]
                ) -> Path:
    """``cbr-loop.probes.parquet`` in ``out_dir`` from the arms' ``questions``: every metric a 0/1 outcome
    (kind ``binary``: Wilson intervals, Clopper-Pearson for an arm whose questions all score the same)."""
    from harness.probes import probe_table, write_probes

    rows = [p for a in arms for p in question_probes(a, row_id(a["arm"], a["k"]), rounds)]
    table = probe_table(rows)
    kinds = {m: "binary" for m in metrics(rounds) if m in table.column_names}
    return write_probes(out_dir / "cbr-loop.probes.parquet", table, data=data, config=config, kinds=kinds,
                        headline_metrics=[m for m in PAIR_METRICS if m in kinds])


def apply_table(payload: dict[str, Any], probes: Path | ProbeRun) -> None:
    """``payload["stats"]``: the intervals of every arm on every per-question metric and the Differences of the
    pairs of :data:`PAIRS` that ran, all from the per-probe table."""
    from benchmarks.stats_tables import present_pairs, run_stats
    from harness.probes import ProbeRun, read_probes

    run = probes if isinstance(probes, ProbeRun) else read_probes(probes)
    ids = [row_id(a["arm"], a["k"]) for a in payload["arms"]]
    mets = [m for m in metrics(payload["meta"]["rounds"]) if m in run.metrics]
    pairs, missing = present_pairs(PAIRS, ids)
    st = run_stats(run, ids, mets, pairs, [m for m in PAIR_METRICS if m in mets], probe_set="all questions")
    payload["stats"] = {"probes": run.path.name, "aggregate": {r: {m: v["mean"] for m, v in a["metrics"].items()}
                                                             for r, a in st["aggregate"].items()},
                        "intervals": st["intervals"], "differences": st["differences"],
                        "not_compared": [list(p) for p in missing]}
