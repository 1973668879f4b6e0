"""``memsim bench cbr-loop``: learning curves of agentfly_sim's NP and PM drivers on the synthetic CBR world.

**The planner is a scripted policy** (:class:`benchmarks.worlds.cbr_agents.WorldPlanner`): it copies the first
delivered positive example about the same kind of entity as the query, else plans alone (right with probability ``p_base``); a right plan succeeds with
probability ``p_exec``, a wrong one with ``p_lucky``. The curves therefore show what the *memory mechanisms*
deliver (which cases are retrieved, how they are labelled and admitted), not what a language model would do with
them. The judge is agentfly_sim's ``ScriptedJudge("match")``; the executor is its default ``ScriptedExecutor``.

Arms (each starts from an empty bank and runs R rounds of fresh questions through the real driver loop, so every
case it retrieves was admitted by the driver itself in an earlier question):

- ``no memory``: NP driver with a selector that delivers nothing (the prompt is the trailer alone);
- ``NP (pooler)``: NP driver, agentfly_sim ``NpSelector`` in cached-index mode (same rankings as faithful mode,
  spec 3.5), K = ``MEMORY_TOP_K`` = 8;
- ``PM (classifier)``: PM driver with ``CaseRetriever(cache_case_vectors=True)``, round 1 on an untrained-head
  checkpoint (the driver retrieves nothing without one); after each round the classifier is retrained
  (``--use_plan --freeze_backbone``, head only, lr 1e-3, 3 epochs) on all pairs the driver has written so far,
  i.e. the upstream recipe with the query's judgement as the target (AGF-09/AGF-22);
- ``NP (mean pooling)``: the NP driver with sentence-transformers mean pooling instead of the pooler output (the
  practitioner's choice; same driver loop, only the selector differs);
- ``oracle``: NP driver with a selector that reads the hidden truth (right plans of the query's family first).

K sweep: the NP and oracle arms with ``MEMORY_TOP_K`` in {1, 2, 4, 8, 16}.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import cbr_probes
from benchmarks.common import machine_description, md_table, meta_block, start_run, write_results
from benchmarks.stats_tables import differences_section, error_bar, interval_cell, method_sentence
from benchmarks.worlds import CBRWorld, QuerySet
from benchmarks.worlds.cbr_agents import EncoderSelector, NoMemorySelector, OracleSelector, WorldPlanner

K_SWEEP = (1, 2, 4, 8, 16)
POLICY = {"p_base": 0.3, "p_exec": 0.9, "p_lucky": 0.05}


def _round_sets(world: CBRWorld, rounds: int, per_round: int, seed: int) -> list[QuerySet]:
    sets: list[QuerySet] = []
    seen: list[str] = []
    for r in range(rounds):
        qs = world.queries(per_round, seed=seed + 500 + r, exclude=seen)
        seen += qs.questions()
        sets.append(qs)
    return sets


def _lookup(sets: list[QuerySet]) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for qs in sets:
        for q, f, e in zip(qs.questions(), qs.family, qs.entity, strict=True):
            out[q] = (int(f), int(e))
    return out


def _accuracy(result_path: Path) -> tuple[float, int]:
    if not result_path.exists():
        return float("nan"), 0
    recs = [json.loads(line) for line in result_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not recs:
        return float("nan"), 0
    return sum(1 for r in recs if r.get("judgement") == "correct") / len(recs), len(recs)


class _CountingPlanner(WorldPlanner):
    """The world planner, unchanged, that also keeps what its counters moved for each question (``per_question``):
    the per-question outcomes behind the per-round shares."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.per_question: dict[str, dict[str, int]] = {}

    def complete(self, messages: list[dict[str, Any]]) -> str:
        before = dict(self.stats)
        out = super().complete(messages)
        acc = self.per_question.setdefault(self.question or "", dict.fromkeys(self.stats, 0))
        for key, v in self.stats.items():
            acc[key] += v - before[key]
        return out


def _question_outcomes(result_path: Path, qs: QuerySet, planner: _CountingPlanner, rnd: int) -> list[dict[str, Any]]:
    """One entry per answered question of a round (the records of its result file): its index in the round's
    query set, whether it was judged correct, and the planner counters it moved."""
    if not result_path.exists():
        return []
    index = {q: i for i, q in reversed(list(enumerate(qs.questions())))}
    out = []
    for line in result_path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        q = rec.get("question")
        moved = planner.per_question.get(q, {})
        out.append({"round": rnd, "index": index.get(q, -1), "correct": rec.get("judgement") == "correct",
                    "copied_positive": int(moved.get("copied_positive", 0)),
                    "copied_right_plan": int(moved.get("copied_right_plan", 0))})
    return out


def run_arm(arm: str, world: CBRWorld, sets: list[QuerySet], lookup: dict[str, tuple[int, int]], root: Path, *,
            k: int, seed: int, np_selector: Any = None, track: Callable | None = None) -> dict[str, Any]:
    """One arm over all rounds in its own client layout under ``root``; returns per-round accuracy and stats and,
    in ``questions``, each answered question's outcome."""
    from agentfly_sim.agents import ScriptedExecutor, ScriptedJudge
    from agentfly_sim.driver import DriverConfig, NPDriver, PMDriver

    for d in ("client", "memory", "data", "result"):
        (root / d).mkdir(parents=True, exist_ok=True)
    planner = _CountingPlanner(world, lookup, seed=seed, **POLICY)
    questions: list[dict[str, Any]] = []
    per_round: list[dict[str, Any]] = []
    ckpt: str | None = None
    train_log: list[dict[str, Any]] = []
    if arm == "pm":
        from agentfly_sim.classifier import make_untrained_checkpoint

        ckpt = make_untrained_checkpoint(root / "memory" / "untrained.pt", seed=seed)
    t_arm = time.perf_counter()
    for r, qs in enumerate(sets):
        data = qs.write_dataset(root / "data" / f"round_{r}.jsonl")
        result = root / "result" / f"round_{r}.jsonl"
        cfg = DriverConfig(memory_jsonl_path=str(root / "memory" / ("memory.jsonl" if arm == "pm" else "bank.jsonl")),
                           dataset_path=str(data), result_path=str(result), memory_top_k=k,
                           training_data_path=str(root / "memory" / "training_data.jsonl"),
                           np_cached_index=True, pm_cache_case_vectors=True)
        before = dict(planner.stats)
        common = {"config": cfg, "out": io.StringIO()}
        if arm == "pm":
            from agentfly_sim.classifier import CaseRetriever

            driver = PMDriver(root / "client", planner, ScriptedExecutor(), ScriptedJudge("match"),
                              retriever=CaseRetriever(ckpt, device="cpu", cache_case_vectors=True), **common)
        else:
            if arm == "np-mean":
                from harness.embedding import get_encoder

                selector = EncoderSelector(get_encoder("minilm-mean"))
            else:
                selector = {"none": NoMemorySelector(), "oracle": OracleSelector(world, lookup)}.get(arm, np_selector)
            driver = NPDriver(root / "client", planner, ScriptedExecutor(), ScriptedJudge("match"),
                              selector=selector, **common)
        summary = driver.run()
        acc, n = _accuracy(result)
        questions += _question_outcomes(result, qs, planner, r + 1)
        d = {key: planner.stats[key] - before[key] for key in planner.stats}
        delivered = d["delivered_pos"] + d["delivered_neg"]
        per_round.append({"round": r + 1, "accuracy": acc, "questions": n, "errors": summary.errors,
                          "share_with_positive_example": d["copied_positive"] / max(1, n),
                          "share_copied_right_plan": d["copied_right_plan"] / max(1, n),
                          "neg_share_delivered": d["delivered_neg"] / delivered if delivered else float("nan")})
        if arm == "pm" and r < len(sets) - 1:
            ckpt, info = _retrain(root, r, seed)
            train_log.append(info)
    bank = root / "memory" / ("memory.jsonl" if arm == "pm" else "bank.jsonl")
    n_cases = sum(1 for line in bank.read_text(encoding="utf-8").splitlines() if line.strip()) if bank.exists() else 0
    return {"arm": arm, "k": k, "rounds": per_round, "bank_cases": n_cases, "seconds": time.perf_counter() - t_arm,
            "train": train_log, "questions": questions}


def _retrain(root: Path, r: int, seed: int) -> tuple[str, dict[str, Any]]:
    from agentfly_sim.training import TrainConfig, train

    pairs = root / "memory" / "training_data.jsonl"
    out = root / "memory" / "ckpts" / f"after_round_{r + 1}"
    cfg = TrainConfig(train=str(pairs), output_dir=str(out), use_plan=True, freeze_backbone=True, lr=1e-3,
                      epochs=3, seed=seed, eval_every=10**9)  # epoch-end evaluations only
    res = train(cfg, log=lambda s: None)
    final = res.evaluations[-1] if res.evaluations else {}
    return res.last_path, {"after_round": r + 1, "pairs": res.n_train + res.n_val, "val_auc": final.get("auc"),
                           "val_rows_query_in_train": res.leakage[0]}


def from_json(payload: dict[str, Any]) -> dict[str, Any]:
    """A payload read back from ``cbr-loop.json``, ready for :func:`render_markdown`: NaN restored where the JSON
    stores ``null``, and the K sweep recomputed from the arms."""
    for a in payload["arms"]:
        for r in a["rounds"]:
            for key, v in r.items():
                if v is None:
                    r[key] = float("nan")
    payload["k_sweep"] = _k_sweep(payload["arms"])
    return payload


def recompute(run: Any, payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``payload`` (``cbr-loop.json``) holds that its per-probe table determines (every arm's means,
    intervals and Differences: ``stats``) and the same recomputed from ``run`` (the table read back)."""
    again = {"arms": payload["arms"], "meta": payload["meta"]}
    cbr_probes.apply_table(again, run)
    return {"stats": payload["stats"]}, {"stats": again["stats"]}


def rerender(out_dir: Path) -> list[Path]:
    """Rewrite ``cbr-loop.{json,md,png}`` from ``cbr-loop.json`` and its per-probe table (no re-run)."""
    payload = from_json(json.loads((out_dir / "cbr-loop.json").read_text(encoding="utf-8")))
    cbr_probes.apply_table(payload, out_dir / "cbr-loop.probes.parquet")
    return write_results(out_dir, "cbr-loop", payload, render_markdown(payload), _figure(payload))


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, rounds: int | None = None,
        per_round: int | None = None, track: Callable | None = None, tmp_dir: Path | None = None) -> list[Path]:
    import tempfile

    from agentfly_sim.embedding import NpSelector

    track, t_start = start_run(track)
    rounds = rounds or (2 if quick else 5)
    per_round = per_round or (6 if quick else 80)
    world = CBRWorld(seed=seed)
    sets = _round_sets(world, rounds, per_round, seed)
    lookup = _lookup(sets)
    np_selector = NpSelector("cpu", cached=True)
    jobs = [("none", 8), ("np", 8), ("np-mean", 8), ("pm", 8), ("oracle", 8)]
    jobs += [(a, k) for a in ("np", "oracle") for k in K_SWEEP if k != 8]
    arms: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=tmp_dir) as td:
        for i, (arm, k) in enumerate(track(jobs, description="cbr-loop arms", total=len(jobs))):
            arms.append(run_arm(arm, world, sets, lookup, Path(td) / f"{i}_{arm}_k{k}", k=k, seed=seed,
                                np_selector=np_selector))
    meta = {"machine": machine_description(), "quick": quick,
            "seeds": {"world": seed, "rounds": [seed + 500 + r for r in range(rounds)], "planner": seed},
            "rounds": rounds, "per_round": per_round, "policy": POLICY, "wall_s": time.perf_counter() - t_start}
    out_dir.mkdir(parents=True, exist_ok=True)
    probes = cbr_probes.write_table(out_dir, arms, rounds, data=f"cbr-world seed={seed} rounds={rounds} "
                                    f"per_round={per_round}", config={k: meta[k] for k in ("seeds", "rounds",
                                                                                         "per_round", "policy")})
    for a in arms:
        del a["questions"]  # in the per-probe table
    payload = {"name": "cbr-loop", "meta": meta, "arms": arms, "k_sweep": _k_sweep(arms)}
    cbr_probes.apply_table(payload, probes)
    return [*write_results(out_dir, "cbr-loop", payload, render_markdown, _figure(payload)), probes]


def _mean_acc(arm: dict[str, Any]) -> float:
    return float(np.nanmean([r["accuracy"] for r in arm["rounds"]]))


def _k_sweep(arms: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for a in arms:
        if a["arm"] in ("np", "oracle"):
            out.append({"arm": a["arm"], "k": a["k"], "mean_accuracy": _mean_acc(a),
                        "final_accuracy": a["rounds"][-1]["accuracy"],
                        "share_with_positive_example": float(np.mean([r["share_with_positive_example"]
                                                                      for r in a["rounds"]])),
                        "share_copied_right_plan": float(np.mean([r["share_copied_right_plan"] for r in a["rounds"]]))})
    return sorted(out, key=lambda x: (x["arm"], x["k"]))


LABELS = {"none": "no memory", "np": "NP (pooler)", "np-mean": "NP (mean pooling)", "pm": "PM (classifier, retrained per round)",
          "oracle": "oracle selector"}


def render_markdown(p: dict[str, Any]) -> str:
    m = p["meta"]
    main = [a for a in p["arms"] if a["k"] == 8]
    lines = ["## CBR loop: learning curves (scripted planner)", "",
             f"**The planner is a scripted policy, so these curves show mechanism effects, not model ability.** "
             f"It copies the first delivered positive example about the same kind of entity, else plans alone (right with p={m['policy']['p_base']}); "
             f"a right plan succeeds with p={m['policy']['p_exec']}, a wrong one with p={m['policy']['p_lucky']}. "
             f"Each arm starts from an empty bank; {m['rounds']} rounds x {m['per_round']} fresh questions; the "
             "judge is the scripted `match` judge, so stored labels are judged outcomes. K = 8 unless stated.", ""]
    stats = p.get("stats") or {}
    ivs = (stats.get("intervals") or {}).get("rows") or {}

    def cell(a: dict[str, Any], metric: str, fallback: float) -> Any:
        iv = ivs.get(metric, {}).get(cbr_probes.row_id(a["arm"], a["k"]))
        return interval_cell(iv) if iv else fallback

    headers = ("arm", *[f"round {r['round']}" for r in main[0]["rounds"]], "mean", "got a positive example",
               "copied a right plan")
    rows = []
    for a in main:
        rs = a["rounds"]
        rows.append((LABELS[a["arm"]], *[cell(a, f"round_{r['round']}", r["accuracy"]) for r in rs],
                     cell(a, "mean_accuracy", _mean_acc(a)),
                     cell(a, "share_with_positive_example",
                          float(np.mean([r["share_with_positive_example"] for r in rs]))),
                     cell(a, "share_copied_right_plan", float(np.mean([r["share_copied_right_plan"] for r in rs])))))
    lines.append(md_table(headers, rows))
    if stats.get("intervals"):
        lines += ["", method_sentence(stats["intervals"], "every question of the arm's rounds, each question one "
                                      "probe (every arm answers the same questions)") +
                  f" Per-probe table: `{stats['probes']}`."]
    lines += ["", "Per-arm quantities that are not means over questions (no interval): the bank at the end, and "
              "the negative share of the delivered examples (over all examples a round delivered, averaged over "
              "rounds).", ""]
    lines.append(md_table(("arm", "cases at end", "neg share delivered"),
                          [(LABELS[a["arm"]], a["bank_cases"],
                            float(np.nanmean([r["neg_share_delivered"] for r in a["rounds"]]))
                            if any(not np.isnan(r["neg_share_delivered"]) for r in a["rounds"]) else float("nan"))
                           for a in main]))
    pm = next((a for a in main if a["arm"] == "pm"), None)
    if pm and pm["train"]:
        lines += ["", "PM retraining between rounds (validation AUC of the trainer's default row-level split; "
                      "every validation row's query also has rows in train): "
                  + "; ".join(f"after round {t['after_round']}: {t['pairs']} pairs, AUC "
                              f"{t['val_auc'] if t['val_auc'] is None else round(t['val_auc'], 3)}"
                              for t in pm["train"])]
    lines += ["", "### K sweep (mean accuracy over rounds)", ""]
    ks = sorted({r["k"] for r in p["k_sweep"]})
    by = {(r["arm"], r["k"]): r for r in p["k_sweep"]}
    lines.append(md_table(("arm", *[f"K={k}" for k in ks]),
                          [(LABELS[a], *[cell(by[(a, k)], "mean_accuracy", by[(a, k)]["mean_accuracy"])
                                         if (a, k) in by else float("nan") for k in ks])
                           for a in ("np", "oracle")]))
    lines += ["", _k_explanation(p)]
    if stats.get("differences"):
        lines += ["", *differences_section(stats["differences"], _label, unit="questions")]
    for a, b in stats.get("not_compared") or []:
        lines += [f"Not compared: {_label(a)} vs {_label(b)} (an arm did not run).", ""]
    lines += ["", "![cbr-loop](cbr-loop.png)", "", meta_block(m, p.get("run"))]
    return "\n".join(lines)


def _label(row: str) -> str:
    """``np@8`` -> ``NP (pooler) K=8``."""
    arm, _, k = row.rpartition("@")
    return f"{LABELS.get(arm, arm)} K={k}"


def _k_explanation(p: dict[str, Any]) -> str:
    rows = {a: sorted([r for r in p["k_sweep"] if r["arm"] == a], key=lambda r: r["k"]) for a in ("np", "oracle")}
    if not rows["np"]:
        return ""
    best = {a: max(r, key=lambda x: x["mean_accuracy"]) for a, r in rows.items() if r}
    shares = ", ".join(f"K={r['k']}: {r['share_with_positive_example']:.2f}" for r in rows["np"])
    n = p["meta"]["rounds"] * p["meta"]["per_round"]
    se = 0.5 / n ** 0.5
    text = (f"What the simulation shows: NP's best K is {best['np']['k']} (mean accuracy "
            f"{best['np']['mean_accuracy']:.3f})")
    if "oracle" in best:
        text += f", the oracle's best K is {best['oracle']['k']} ({best['oracle']['mean_accuracy']:.3f})"
    text += (f"; with {n} questions per arm a mean accuracy has a standard error of about {se:.3f}, so NP's "
             "differences across K are mostly noise. The AgentFly paper reports K=4 as best. Here the mechanism is "
             "explicit: the scripted planner copies the first delivered positive example about the same kind of "
             "entity, so a larger K raises the chance that one is delivered "
             f"(NP, share of questions with a positive example: {shares}) but the extra cases are lower-ranked, "
             "and a positive case of a *sibling* family (same entity type, wrong plan for this question) is copied "
             "as readily as a right one. That is why the oracle, whose first cases are right plans of the query's "
             "family and whose next ones are wrong-plan cases labelled negative, loses accuracy as K grows: more "
             "slots admit sibling positives when no right case exists. A K optimum in a real system would also "
             "come from model behaviour (long-context distraction, weighing several examples) that this policy "
             "does not model.")
    return text


def _accuracy_axes(ax: Any, xlabel: str, ylabel: str, title: str) -> None:
    """Labels, the 0..1 accuracy range, grid and legend of one panel of the figure."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _figure(p: dict[str, Any]) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ivs = ((p.get("stats") or {}).get("intervals") or {}).get("rows") or {}

    def bars(metric: str, rows: list[str]) -> np.ndarray:
        return np.array([error_bar(ivs.get(metric, {}).get(r)) for r in rows]).T

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    ax = axes[0]
    for a in p["arms"]:
        if a["k"] != 8:
            continue
        xs = [r["round"] for r in a["rounds"]]
        rid = cbr_probes.row_id(a["arm"], a["k"])
        ax.errorbar(xs, [r["accuracy"] for r in a["rounds"]],
                    yerr=np.array([error_bar(ivs.get(f"round_{x}", {}).get(rid)) for x in xs]).T, fmt="o-",
                    capsize=3, label=LABELS[a["arm"]])
    ax.set_xticks([r["round"] for r in p["arms"][0]["rounds"]])
    _accuracy_axes(ax, "round", "accuracy (judged correct)", "Learning curves, K=8 (scripted planner)")
    ax = axes[1]
    for arm in ("np", "oracle"):
        rows = sorted([r for r in p["k_sweep"] if r["arm"] == arm], key=lambda r: r["k"])
        ax.errorbar([r["k"] for r in rows], [r["mean_accuracy"] for r in rows],
                    yerr=bars("mean_accuracy", [cbr_probes.row_id(arm, r["k"]) for r in rows]), fmt="o-", capsize=3,
                    label=LABELS[arm])
    nm = next((a for a in p["arms"] if a["arm"] == "none"), None)
    if nm:
        ax.axhline(_mean_acc(nm), color="grey", ls=":", label="no memory")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(K_SWEEP), [str(k) for k in K_SWEEP])
    _accuracy_axes(ax, "K (MEMORY_TOP_K)", "mean accuracy over rounds", "K sweep")
    fig.tight_layout()
    return fig
