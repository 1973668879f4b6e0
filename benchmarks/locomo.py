"""LoCoMo cross-design benchmark: the same real conversations through every arm, delivered vs stored, tokens, time.

``memsim bench locomo`` loads the conversations (``harness.workloads.locomo``), runs each selected arm over each
conversation (``harness.workloads.runner``), and writes:

- ``<out>/locomo/<sample_id>.json`` as soon as that conversation finishes (atomic replace; fault-hook step
  ``locomo.conversation.write``), so an interrupted run keeps every finished conversation;
- ``<out>/locomo.{json,md,png}``: per delivered row the headline (categories 1-4) and per-category metrics, arm
  status (an unavailable or failing arm is listed with its reason), data quirks counted, peak memory, wall time;
  the figure is recall versus delivered tokens (one point per row, log x) and per-category recall bars.

``--quick`` runs one conversation cut to its first sessions and a few probes (about a minute). The arms and the
metrics are documented in their modules; nothing here depends on which conversations are loaded.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import (
    _jsonable,
    machine_description,
    md_table,
    meta_block,
    set_torch_threads,
    write_results,
)
from harness.workloads.arms import SPECS, parse_arms
from harness.workloads.locomo import (
    CATEGORY_NAMES,
    Conversation,
    load_locomo,
    resolve_locomo_path,
    select_conversations,
)
from harness.workloads.metrics import HEADLINE_CATEGORIES, summarize
from harness.workloads.runner import run_conversation

NAME = "locomo"
EXAMPLE_CHARS = 700
FENCE = "`" * 3
SKIP_META = ("k", "cached_texts_per_probe", "epochs", "negatives_per_positive", "min_confidence")
QUICK_SESSIONS = 3
QUICK_PROBES = 6


def _peak_rss_mb() -> float:
    """Peak resident memory of this process and its waited-for children, in MiB (Linux reports KiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def quick_slice(conv: Conversation) -> Conversation:
    """The first ``QUICK_SESSIONS`` sessions and up to ``QUICK_PROBES`` probes answerable from them, one per
    category first (so the quick run still shows every category it can)."""
    small = conv.sliced(max_sessions=QUICK_SESSIONS)
    picked, seen = [], set()
    for p in small.probes:
        if p.category not in seen:
            picked.append(p)
            seen.add(p.category)
    for p in small.probes:
        if len(picked) >= QUICK_PROBES:
            break
        if p not in picked:
            picked.append(p)
    picked = sorted(picked[:QUICK_PROBES], key=lambda p: p.index)
    return small.model_copy(update={"probes": picked})


def _write_atomic(path: Path, payload: dict[str, Any], fault_hook: Callable[[str], None] | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(_jsonable(payload), fh, ensure_ascii=False)
            fh.write("\n")
        os.chmod(tmp, 0o644)
        if fault_hook:
            fault_hook("locomo.conversation.write")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def meta_means(records: list[dict[str, Any]]) -> dict[str, float]:
    """Mean of every numeric (non-boolean) meta value of a row's records: the design-specific measurements
    (NP's faithful recompute ms, PM's validation AUC and training seconds, Tortoise's pool and digest sizes)."""
    acc: dict[str, list[float]] = {}
    for r in records:
        for k, v in (r.get("meta") or {}).items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                acc.setdefault(k, []).append(float(v))
    return {k: sum(v) / len(v) for k, v in acc.items()}


def _row_arm(results: list[dict[str, Any]]) -> dict[str, str]:
    return {row: arm for res in results for arm, info in res["arms"].items() for row in info.get("rows", [])}


def aggregate(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Pool the per-conversation results: per-row summaries, ingest ms per turn, arm status, quirks."""
    records = [r for res in results for r in res["records"]]
    row_arm = _row_arm(results)
    ingest: dict[str, float] = {}
    for arm in {a for res in results for a in res["arms"]}:
        ok = [res for res in results if res["arms"][arm]["status"] == "ok"]
        ms = sum(res["arms"][arm]["ingest_ms"] for res in ok)
        turns = sum(res["n_turns"] for res in ok)
        for row, a in row_arm.items():
            if a == arm and turns:
                ingest[row] = ms / turns
    rows = summarize(records, ingest)
    for row, s in rows.items():
        s["arm"] = row_arm.get(row)
        s["meta_means"] = meta_means([r for r in records if r["row"] == row])
    status = {arm: {res["conversation"]: {k: v for k, v in res["arms"][arm].items() if k in ("status", "message")}
                    for res in results if arm in res["arms"]}
              for arm in dict.fromkeys(a for res in results for a in res["arms"])}
    quirks = {res["conversation"]: res["quirks"] for res in results}
    return {"rows": rows, "arm_status": status, "quirks": quirks}


def _order(rows: dict[str, Any]) -> list[str]:
    arm_rank = {a: i for i, a in enumerate(SPECS)}
    return sorted(rows, key=lambda r: (arm_rank.get(rows[r].get("arm") or "", 99), r))


def _f(v: Any, fmt: str = ".3f") -> str:
    return "n/a" if v is None else format(v, fmt)


def markdown(payload: dict[str, Any]) -> str:
    agg = payload["aggregate"]
    rows = agg["rows"]
    order = _order(rows)
    lm = payload["config"]["lm"]
    convs = payload["conversations"]
    n_turns = sum(c["n_turns"] for c in convs)
    n_probes = sum(c["n_probes"] for c in convs)
    out = [f"# LoCoMo: delivered vs stored across designs ({len(convs)} conversation(s), {n_turns} turns, "
           f"{n_probes} probes)", ""]
    out.append("Every arm ingests the same conversation in order and is then asked every probe. *Recall* is the "
               "share of a probe's evidence turns whose content is in the delivered text; *stored* the share "
               "the arm keeps anywhere in its memory. Headline = categories 1-4 (category 5 is adversarial). "
               "Tokens: MiniLM WordPiece of the delivered text (chars/4 beside it). *Answer tokens present*: share "
               "of the gold answer's normalised tokens found in the delivered text (a lexical ceiling, not an "
               "accuracy)." + ("" if lm else " No `--lm` was given: there are no answer scores."))
    out.append("")
    head = ["row", "arm", "recall", "all-evidence", "stored recall", "tokens/probe", "chars/4", "turns/probe",
            "answer tokens present", "ingest ms/turn", "probe ms p50", "probe ms p95"]
    if lm:
        head.append("answer F1")
    table = []
    for r in order:
        h = rows[r]["headline"]
        line = [r, rows[r]["arm"], h["evidence_recall"], h["all_evidence_rate"], h["stored_recall"],
                _f(h["tokens_mean"], ".0f"), _f(h["chars4_mean"], ".0f"), _f(h["delivered_turns"], ".1f"),
                h["answer_present"], _f(rows[r]["ingest_ms_per_turn"], ".2f"), _f(h["latency_ms_median"], ".2f"),
                _f(h["latency_ms_p95"], ".2f")]
        if lm:
            line.append(h.get("f1"))
        table.append(line)
    out += ["## Headline (categories 1-4)", "", md_table(head, table), ""]
    cats = sorted({int(c) for r in rows.values() for c in r["by_category"]})
    ctable = [[r] + [rows[r]["by_category"].get(str(c), {}).get("evidence_recall") for c in cats] for r in order]
    out += ["## Evidence recall per category", "",
            md_table(["row"] + [f"{c} {CATEGORY_NAMES.get(c, '')} (n={_n(rows, c)})" for c in cats], ctable), ""]
    atable = [[r] + [rows[r]["by_category"].get(str(c), {}).get("answer_present") for c in cats] for r in order]
    out += ["## Answer tokens present per category", "",
            md_table(["row"] + [f"{c} {CATEGORY_NAMES.get(c, '')}" for c in cats], atable), ""]
    if lm:
        ftable = [[r] + [rows[r]["by_category"].get(str(c), {}).get("f1") for c in cats] for r in order]
        out += [f"## Answer F1 per category (`--lm {lm}`)", "",
                md_table(["row"] + [f"{c} {CATEGORY_NAMES.get(c, '')}" for c in cats], ftable), ""]
    out += ["![recall vs tokens](locomo.png)", ""]
    design_rows = [r for r in order if SPECS.get(rows[r]["arm"] or "") and SPECS[rows[r]["arm"]].kind == "design"]
    if design_rows:
        mt = [[r, ", ".join(f"{k} {_num(v)}" for k, v in rows[r].get("meta_means", {}).items() if k not in SKIP_META)]
              for r in design_rows]
        out += ["## Design-specific measurements (mean per probe)", "", md_table(["row", "measured"], mt), ""]
    ex = payload.get("examples", {})
    firsts = list(dict.fromkeys(rows[r]["arm"] for r in order))
    first_row = {a: next(r for r in order if rows[r]["arm"] == a) for a in firsts}
    shown = [first_row[a] for a in firsts if first_row[a] in ex
             and (first_row[a] in design_rows or a in ("bm25", "oracle"))]
    if shown:
        first = payload["conversations"][0]["conversation"]
        out += [f"## What each row delivers (first scored probe of {first}; head and tail "
                f"of the text, {EXAMPLE_CHARS} characters; a longer excerpt is in locomo.json)", ""]
        for r in shown:
            e = ex[r]
            t = e["text_excerpt"]
            half = EXAMPLE_CHARS // 2
            body = (t if len(t) <= EXAMPLE_CHARS else t[:half] + "\n[...]\n" + t[-half:]).replace(FENCE, "'" * 3)
            out += [f"**{r}**: Q{e['probe']} \"{e['question']}\" evidence {', '.join(e['evidence'])}; delivered "
                    f"{len(e['delivered_ids'])} turn(s), {e['chars']} characters.", "", FENCE + "text", body, FENCE,
                    ""]
    bad = [(a, c, s["status"], s.get("message", "")) for a, per in agg["arm_status"].items()
           for c, s in per.items() if s["status"] != "ok"]
    if bad:
        out += ["## Arms not measured", "", md_table(["arm", "conversation", "status", "reason"], bad), ""]
    q = agg["quirks"]
    out += ["## Data", "", md_table(["conversation", "turns", "sessions", "probes", "cat 1/2/3/4/5",
                                     "invalid evidence ids", "normalised ids", "probes without evidence"],
                                    [[c["conversation"], c["n_turns"], c["n_sessions"], c["n_probes"],
                                      "/".join(str(c["categories"][str(k)]) for k in range(1, 6)),
                                      q[c["conversation"]]["invalid_evidence"],
                                      q[c["conversation"]]["normalised_evidence"],
                                      q[c["conversation"]]["probes_without_evidence"]] for c in convs]), ""]
    out.append(f"Peak memory {payload['peak_rss_mb']:.0f} MiB. {meta_block(payload['meta'])}")
    return "\n".join(out)


def _num(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _n(rows: dict[str, Any], c: int) -> int:
    return max((r["by_category"].get(str(c), {}).get("n_scored", 0) for r in rows.values()), default=0)


def figure(payload: dict[str, Any]) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = payload["aggregate"]["rows"]
    order = [r for r in _order(rows) if rows[r]["headline"]["evidence_recall"] is not None]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 6), gridspec_kw={"width_ratios": [1, 1.3]})
    arms = list(dict.fromkeys(rows[r]["arm"] for r in order))
    cmap = plt.get_cmap("tab20")
    colors = {a: cmap(i % 20) for i, a in enumerate(arms)}
    for j, r in enumerate(order):
        h = rows[r]["headline"]
        kind = SPECS[rows[r]["arm"]].kind if rows[r]["arm"] in SPECS else "design"
        x = max(1.0, h["tokens_mean"] or 1.0)
        ax1.scatter([x], [h["evidence_recall"]], color=colors[rows[r]["arm"]], marker="s" if kind == "design" else "o",
                    s=55, edgecolors="black", linewidths=0.5)
        ax1.annotate(r, (x, h["evidence_recall"]), fontsize=7, xytext=(5, 4 if j % 2 else -9),
                     textcoords="offset points")
    ax1.set_xscale("log")
    ax1.set_xlabel("delivered tokens per probe (MiniLM WordPiece, log)")
    ax1.set_ylabel("evidence recall of delivered text (categories 1-4)")
    ax1.set_ylim(-0.03, 1.05)
    ax1.set_title("recall vs tokens (squares: designs, circles: baselines)")
    ax1.grid(alpha=0.3)
    cats = [c for c in (1, 2, 3, 4, 5) if any(str(c) in rows[r]["by_category"] for r in order)]
    width = 0.8 / max(1, len(cats))
    import numpy as np

    xs = np.arange(len(order))
    for i, c in enumerate(cats):
        vals = [rows[r]["by_category"].get(str(c), {}).get("evidence_recall") or 0.0 for r in order]
        ax2.bar(xs + (i - (len(cats) - 1) / 2) * width, vals, width, label=f"{c} {CATEGORY_NAMES.get(c, '')}")
    ax2.set_xticks(xs, order, rotation=60, ha="right", fontsize=8)
    ax2.set_ylabel("evidence recall")
    ax2.set_ylim(0, 1.2)
    ax2.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax2.set_title("evidence recall per LoCoMo category")
    ax2.legend(fontsize=8, ncols=len(cats), loc="upper center")
    ax2.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, data: Path | None = None,
        conversations: list[str] | None = None, arms: str | None = None, k_values: tuple[int, ...] = (4, 8),
        lm: str | None = None, lm_base: str | None = None, track: Callable[..., Any] | None = None,
        echo: Callable[[str], None] | None = None, tmp_dir: Path | None = None,
        fault_hook: Callable[[str], None] | None = None) -> list[Path]:
    """Run the LoCoMo benchmark and write ``locomo.{json,md,png}`` (plus per-conversation files) to ``out_dir``."""
    set_torch_threads(1)
    t_start = time.perf_counter()
    if not k_values or min(k_values) < 1:
        raise ValueError(f"--k values must be positive, got {list(k_values)}")
    names = parse_arms(arms, quick)
    src = resolve_locomo_path(data)
    loaded = load_locomo(src)
    chosen = select_conversations(loaded, conversations)
    if quick:
        chosen = [quick_slice(chosen[0])]
    answerer = None
    if lm:
        from harness.workloads.answer import Answerer

        answerer = Answerer(lm, **({"api_base": lm_base} if lm_base else {}))
        answerer.check()
    conv_dir = out_dir / NAME
    paths: list[Path] = []
    results: list[dict[str, Any]] = []
    work_root = Path(tempfile.mkdtemp(prefix="memsim-locomo-", dir=tmp_dir))
    try:
        for conv in chosen:
            others = tuple(c for c in loaded if c.sample_id != conv.sample_id)
            res = run_conversation(conv, names, work_root, k_values=tuple(k_values), others=others, lm=lm,
                                   quick=quick, seed=seed, track=track, answerer=answerer, echo=echo)
            res["summary"] = summarize(res["records"], {row: info["ingest_ms_per_turn"]
                                                        for info in res["arms"].values()
                                                        if info["status"] == "ok" for row in info["rows"]})
            p = conv_dir / f"{conv.sample_id}.json"
            _write_atomic(p, res, fault_hook)
            paths.append(p)
            results.append(res)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    agg = aggregate(results)
    payload = {
        "name": NAME,
        "config": {"data": str(src), "conversations": [c.sample_id for c in chosen], "arms": names,
                   "k": list(k_values), "quick": quick, "lm": lm, "seed": seed,
                   "headline_categories": list(HEADLINE_CATEGORIES)},
        "conversations": [{k: res[k] for k in ("conversation", "n_turns", "n_sessions", "n_probes", "categories",
                                               "quirks", "arms", "summary")} for res in results],
        "aggregate": agg,
        "examples": results[0]["examples"] if results else {},
        "peak_rss_mb": _peak_rss_mb(),
        "meta": {"machine": machine_description(), "seeds": {"seed": seed}, "quick": quick,
                 "wall_s": time.perf_counter() - t_start},
    }
    payload["wall_s"] = payload["meta"]["wall_s"]
    fig = figure(payload) if agg["rows"] else None
    paths = write_results(out_dir, NAME, payload, markdown(payload), fig) + paths
    return paths


def readme_section(payload: dict[str, Any]) -> str:
    """The README "Results" subsection, built from a full run's ``locomo.json`` (numbers never typed by hand)."""
    rows = payload["aggregate"]["rows"]
    order = _order(rows)
    convs = payload["conversations"]

    def h(row: str, key: str = "evidence_recall") -> Any:
        return rows.get(row, {}).get("headline", {}).get(key)

    def c(row: str, cat: int, key: str = "evidence_recall") -> Any:
        return rows.get(row, {}).get("by_category", {}).get(str(cat), {}).get(key)

    table = [[r, h(r), h(r, "all_evidence_rate"), h(r, "stored_recall"), _f(h(r, "tokens_mean"), ".0f"),
              _f(rows[r]["ingest_ms_per_turn"], ".1f"), _f(h(r, "latency_ms_median"), ".1f"),
              _f(h(r, "latency_ms_p95"), ".1f")] for r in order]
    m = payload["meta"]
    mm = {r: rows[r].get("meta_means", {}) for r in order}
    lines = [
        "### LoCoMo: the same real conversations through every design",
        "",
        f"`memsim bench locomo` puts {len(convs)} public LoCoMo conversations "
        f"({sum(x['n_turns'] for x in convs)} turns, {sum(x['n_probes'] for x in convs)} questions with annotated "
        "evidence turns; the data is fetched by `memsim data fetch locomo`, never committed) through Fractal, AgentFly NP (faithful "
        "pooler and mean pooling), AgentFly PM (a classifier trained leave-one-conversation-out on LoCoMo evidence: a "
        "non-faithful labelling, AGF-35), Tortoise (volunteered block and upstream's evaluation path) and six "
        "baselines. For each question it records the exact text each arm would put in front of the model and which "
        "turns that text carries (*recall*), which turns the arm keeps anywhere (*stored*), the WordPiece tokens of "
        "the text, and the time to ingest and to answer a probe. Headline = categories 1-4. No LM is called: "
        "`--lm MODEL` adds LoCoMo token F1 per category. Mapping choices: module docstrings of "
        "`harness/workloads/*.py`.",
        "",
        md_table(["row", "recall", "all evidence", "stored", "tokens/probe", "ingest ms/turn", "probe ms p50",
                  "p95"], table),
        "",
        "![LoCoMo recall vs tokens](benchmarks/results/locomo.png)",
        "",
        "What the run shows (full tables, per-category numbers and the delivered texts: "
        "`benchmarks/results/locomo.md`):",
        "",
        f"- **Fractal delivers everything it stores, at a price.** Recall {_f(h('fractal'))} on every question, at "
        f"{_f(h('fractal', 'tokens_mean'), '.0f')} tokens per question against {_f(h('full', 'tokens_mean'), '.0f')} "
        "for the plain transcript of the same turns (instructions, summary and history JSON around every turn).",
        f"- **AgentFly NP's faithful pooler ranking delivers less evidence than mean pooling**: recall@8 "
        f"{_f(h('np-pooler@8'))} vs {_f(h('np-mean@8'))}, both below plain BM25@8 ({_f(h('bm25@8'))}). The faithful "
        f"mode would re-embed the whole bank on every question: {_f(mm.get('np-pooler@8', {}).get('faithful_recompute_ms'), '.0f')} ms "
        f"per question measured from the per-text cost, against a cached probe of "
        f"{_f(h('np-pooler@8', 'latency_ms_median'), '.1f')} ms.",
        f"- **PM with real relevance labels does not help here**: recall@8 {_f(h('pm@8'))} although its classifier "
        f"reaches validation AUC {_f(mm.get('pm@8', {}).get('val_auc'))} on held-out questions of the other "
        "conversations.",
        f"- **Tortoise's volunteered block is empty for LoCoMo questions under the faithful gates**: recall "
        f"{_f(h('tortoise-volunteer'))}, the text is the session-start digest "
        f"({_f(mm.get('tortoise-volunteer', {}).get('digest_chars'), '.0f')} characters) and the question, while "
        f"the store holds every turn (stored {_f(h('tortoise-volunteer', 'stored_recall'))}). Upstream's evaluation "
        f"path (search pool plus source-session expansion) reaches {_f(h('tortoise-eval'))} at "
        f"{_f(h('tortoise-eval', 'tokens_mean'), '.0f')} tokens, the best recall of any ranked arm.",
        f"- **Stored is not delivered**: every ranked arm stores every turn (stored 1.000) and delivers "
        f"{_f(min(h(r) for r in order if '@' in r))}-{_f(max(h(r) for r in order if '@' in r))} of the evidence; "
        f"multi-hop (category 1) and open-domain (category 3) questions get the least of theirs (hybrid@8: "
        f"{_f(c('hybrid@8', 1))} and {_f(c('hybrid@8', 3))}, tortoise-eval: {_f(c('tortoise-eval', 1))} and "
        f"{_f(c('tortoise-eval', 3))}, against {_f(c('hybrid@8', 2))} and {_f(c('tortoise-eval', 2))} for temporal "
        "questions).",
        f"- **Dates matter for temporal questions**: with exactly the evidence turns, the share of gold-answer "
        f"tokens present in the text falls from {_f(c('oracle', 2, 'answer_present'))} to "
        f"{_f(c('oracle-nodate', 2, 'answer_present'))} for category 2 when session dates are dropped, and from "
        f"{_f(c('oracle', 4, 'answer_present'))} to {_f(c('oracle-nodate', 4, 'answer_present'))} for category 4.",
        "",
        f"Run on the 2-core machine under the heavy-run lock: wall {m['wall_s'] / 60:.1f} min, peak memory "
        f"{payload['peak_rss_mb'] / 1024:.2f} GiB (levels: at most 20 min and 4 GB). Claims XD-01..XD-10 "
        "(`memsim claims --design cross`) check these consequences on the smallest conversation (its first 8 sessions, or all of it for XD-07 and XD-08).",
    ]
    return "\n".join(lines) + "\n"
