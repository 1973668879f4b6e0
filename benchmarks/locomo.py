"""LoCoMo cross-design benchmark: the same real conversations through every arm, delivered vs stored, tokens, time.

``memsim bench locomo`` loads the conversations (``harness.workloads.locomo``), runs each selected arm over each
conversation (``harness.workloads.runner``), and writes:

- ``<out>/locomo/<sample_id>.json`` as soon as that conversation finishes (atomic replace; fault-hook step
  ``locomo.conversation.write``), so an interrupted run keeps every finished conversation;
- ``<out>/locomo.{json,md,png}``: per delivered row the headline (categories 1-4) and per-category metrics, arm
  status (an unavailable or failing arm is listed with its reason), data quirks counted, peak memory, wall time;
  the figure is recall versus delivered tokens (one point per row, log x) and per-category recall bars.

``--quick`` runs one conversation (the first loaded, or each one named with ``--conversation``) cut to its first
sessions and a few probes (about a minute per conversation). ``--arm-class package.module:Class`` adds an external
arm behind the same protocol. Encoders (``embed``): by default every arm that embeds reads the embedding store
(``harness.store_encoders``: each distinct text encoded once, alone, kept on disk across runs; the deliveries equal
the earlier path's, tested against the pre-store snapshot); ``embed="per-call"`` is the earlier behaviour: one
encoder cache serves the whole run (``runner.SharedEncoder``: an encoder call
another arm already made is answered with its vectors, so results are identical and the mean, hybrid and NP
mean-pooling arms do not pay twice for the same call; their times then exclude what another arm paid;
``share_encoders=False`` turns it off; hits and misses are in the JSON's ``encoder_cache``). ``--workers N``
(default ``DEFAULT_WORKERS``, the fastest measured on two cores) runs N conversations at once, each in a spawned
process with one torch thread; every metric, ranking and delivered text equals the serial run's (``--workers 1``,
one process), and the workers' progress drives the same bars. The JSON records the wall time, the worker count
and the peak memory against the expected levels (``levels``; the md's "Expected levels" line). ``python -m benchmarks.locomo --docs`` renders ``docs/locomo.md`` from the committed JSON. The arms
and the metrics are documented in their modules; nothing here depends on which conversations are loaded.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import (
    RESULTS_DIR,
    _jsonable,
    machine_description,
    md_table,
    meta_block,
    set_torch_threads,
    stamp_run,
    write_atomic,
    write_results,
)
from benchmarks.progress import Relay, Tracker, as_tracker, worker_tracker
from harness.workloads.arms import SPECS, parse_arms, require_runnable, select_arms
from harness.workloads.locomo import (
    CATEGORY_NAMES,
    Conversation,
    load_locomo,
    resolve_locomo_path,
    select_conversations,
)
from harness.workloads.metrics import HEADLINE_CATEGORIES, RANKED_LEVELS, RANKED_METRICS, summarize
from harness.workloads.runner import run_conversation, shared_encoders

NAME = "locomo"
EXAMPLE_CHARS = 700
FENCE = "`" * 3
SKIP_META = ("k", "cached_texts_per_probe", "epochs", "negatives_per_positive", "min_confidence")
QUICK_SESSIONS = 3
QUICK_PROBES = 6
DOCS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "locomo.md"


def excerpt_body(text: str, chars: int = EXAMPLE_CHARS) -> str:
    """A delivered text as a page shows it: whole when short, else its head and tail (``chars`` in all) around
    ``[...]``, with code fences defused so the text cannot close the block it sits in."""
    half = chars // 2
    return (text if len(text) <= chars else text[:half] + "\n[...]\n" + text[-half:]).replace(FENCE, "'" * 3)


def _peak_rss_mb() -> float:
    """Peak resident memory of this process and its waited-for children, in MiB (Linux reports KiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


LEVEL_WALL_S = 15 * 60
LEVEL_PRE_PAPER_WALL_S = 5 * 60
LEVEL_PEAK_BYTES = 4e9
PRE_PAPER_ARMS = ("full", "last20", "bm25", "mean", "hybrid", "oracle", "oracle-nodate", "fractal", "np-pooler",
                  "np-mean", "pm", "tortoise")
DEFAULT_WORKERS = 2


def levels(wall_s: float, peak_rss_mb: float, arms: list[str] | tuple[str, ...] | None = None) -> dict[str, Any]:
    """The expected levels of a full run over the shipped conversations against what this run measured: wall time
    at most 5 minutes with the arms that existed before the LoCoMo-paper rows (``PRE_PAPER_ARMS``, every arm but
    ``tortoise-recorded``), at most 15 minutes with any other arm set (the full design run); peak resident memory
    at most 4 GB = 4e9 bytes. ``arm_set`` names which wall level applies."""
    gb = peak_rss_mb * 2**20 / 1e9
    pre = arms is not None and tuple(arms) == PRE_PAPER_ARMS
    wall_max = LEVEL_PRE_PAPER_WALL_S if pre else LEVEL_WALL_S
    every = tuple(arms or ()) == tuple(SPECS)
    return {"arm_set": "pre-paper arms" if pre else "full design run" if every or arms is None else "selected arms",
            "wall_s": {"measured": wall_s, "max": wall_max, "met": wall_s <= wall_max},
            "peak_rss_gb": {"measured": gb, "max": LEVEL_PEAK_BYTES / 1e9, "met": gb <= LEVEL_PEAK_BYTES / 1e9}}


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


TIMING_KEY = re.compile(r"(^|_)(ms|s)(_|$)|latency|wall|peak|rss|machine|date|encoder_cache|workers|^run$")


def without_timings(obj: Any) -> Any:
    """``obj`` (a results JSON or part of it) without what depends on time, machine or worker count: keys naming
    milliseconds or seconds (``*_ms``, ``*_s``, ``ms`` inside a name), latency, wall time, peak memory, the
    machine, dates, the encoder cache's hit counts, the worker count and the ``run`` block (the code, command and
    wall time of the run that wrote it). What is left (metrics, rankings,
    delivered ids and texts, statuses) must be equal for a serial and a parallel run."""
    if isinstance(obj, dict):
        return {k: without_timings(v) for k, v in obj.items() if not TIMING_KEY.search(str(k))}
    if isinstance(obj, list):
        return [without_timings(v) for v in obj]
    return obj


WALL_CLOCK = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+[+\dZ:]*|[0-9a-f]{32}|[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}")
FRACTAL_TEXT_SIZE = re.compile(r"^(tokens|chars|text_sha1)")


def comparable(obj: Any, fractal: bool = False) -> Any:
    """``without_timings(obj)`` less what Fractal's prompt takes from the wall clock: its history JSON carries the
    run's timestamps and random turn ids (FRA-02), so the size and digest of its delivered text differ between
    any two runs, serial or not. Fractal's token and character counts and text digest are left out, its excerpt
    is kept with timestamps and ids masked; its recall, stored recall and delivered ids stay."""
    def walk(x: Any, fr: bool) -> Any:
        if isinstance(x, dict):
            fr = fr or x.get("row") == "fractal"
            out = {}
            for k, v in x.items():
                if fr and FRACTAL_TEXT_SIZE.match(str(k)):
                    continue
                out[k] = WALL_CLOCK.sub("#", v) if fr and k == "text_excerpt" else walk(v, fr or k == "fractal")
            return out
        if isinstance(x, list):
            return [walk(v, fr) for v in x]
        return x

    return walk(without_timings(obj), fractal)


def _write_atomic(path: Path, payload: dict[str, Any], fault_hook: Callable[[str], None] | None) -> None:
    data = (json.dumps(_jsonable(payload), ensure_ascii=False) + "\n").encode("utf-8")
    write_atomic(path, data, fault_hook, "locomo.conversation.write")


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
               "Tokens: tiktoken cl100k_base of the delivered text (the unit of published tokens-per-query "
               "figures), MiniLM WordPiece and chars/4 beside it. *Answer tokens present*: share "
               "of the gold answer's normalised tokens found in the delivered text (a lexical ceiling, not an "
               "accuracy). *Probe ms*: one deliver call of the arm (all its rows), including the harness's own "
               "provenance matching; *design ms*: the row's time in the design's public API; *harness ms*: the "
               "rest of the deliver call (n/a where the arm does not separate them)."
               + ("" if lm else " No `--lm` was given: there are no answer scores."))
    out.append("")
    out += ["## Headline (categories 1-4)", "", headline_table(rows, order, lm=bool(lm)), ""]
    ranked = [r for r in order if rows[r]["headline"].get("ranked")]
    if ranked:
        out += ["## Ranked metrics (categories 1-4)", "",
                "Rows whose delivery is a ranking (" + ", ".join(ranked) + "); the other rows deliver a whole "
                "transcript, a fixed window, the annotation (oracles), a whole prompt (Fractal) or a gated block "
                "(Tortoise's volunteered block), none of which is ranked. recall_any@k: at least one evidence "
                "turn (session) in the top k; recall_all@k: all of them; ndcg_any@k: nDCG@k with binary "
                "relevance and trec_eval's discount 1/log2(rank + 1) (pytrec_eval; not LongMemEval's official "
                "DCG, which weighs ranks 1 and 2 alike: see docs/longmemeval.md). The ranking is the row's "
                "delivered one, so a row that ranks fewer than "
                "k units is scored on those.", ""]
        for level in RANKED_LEVELS:
            out += [f"### {level.capitalize()} level", "", ranked_table(rows, ranked, level), ""]
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
            body = excerpt_body(e["text_excerpt"])
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
    out.append(f"Peak memory {payload['peak_rss_mb']:.0f} MiB{_workers_note(payload)}. {meta_block(payload['meta'], payload.get('run'))}")
    lv = payload.get("levels")
    if lv and not payload["config"].get("quick"):
        out += ["", expected_levels_line(payload)]
    return "\n".join(out)


def _workers_note(payload: dict[str, Any]) -> str:
    n = payload["config"].get("workers", 1)
    peaks = payload.get("worker_peak_rss_mb") or []
    return (f" (this process and its {len(peaks)} worker processes together, sampled every quarter second; the "
            f"workers' own peaks {', '.join(f'{x:.0f}' for x in peaks)} MiB)" if n > 1 and peaks else "")


def expected_levels_line(payload: dict[str, Any]) -> str:
    """The md's "Expected levels" line, from the JSON's ``levels``, wall time and worker count."""
    lv = payload["levels"]
    w, m = lv["wall_s"], lv["peak_rss_gb"]
    n = payload["config"].get("workers", 1)
    return (f"Expected levels ({lv.get('arm_set', 'full design run')}, {len(payload['conversations'])} "
            f"conversation(s), {n} worker process{'es' if n != 1 else ''}): wall {w['measured'] / 60:.1f} min "
            f"(at most {w['max'] / 60:.0f}: {'met' if w['met'] else 'missed'}), peak memory {m['measured']:.2f} GB "
            f"(at most {m['max']:.0f}: {'met' if m['met'] else 'missed'}).")


def headline_table(rows: dict[str, Any], order: list[str], *, lm: bool = False) -> str:
    """The headline (categories 1-4) table of the given rows: recall, stored, cl100k tokens first."""
    head = ["row", "arm", "recall", "all-evidence", "stored recall", "tokens/probe (cl100k)", "WordPiece",
            "chars/4", "turns/probe", "answer tokens present", "ingest ms/turn", "probe ms p50", "probe ms p95",
            "design ms p50", "harness ms p50"]
    if lm:
        head.append("answer F1")
    table = []
    for r in order:
        h = rows[r]["headline"]
        line = [r, rows[r]["arm"], h["evidence_recall"], h["all_evidence_rate"], h["stored_recall"],
                _f(h.get("tokens_cl100k_mean"), ".0f"), _f(h["tokens_mean"], ".0f"), _f(h["chars4_mean"], ".0f"),
                _f(h["delivered_turns"], ".1f"), h["answer_present"], _f(rows[r]["ingest_ms_per_turn"], ".2f"),
                _f(h["latency_ms_median"], ".2f"), _f(h["latency_ms_p95"], ".2f"),
                _f(h.get("design_ms_median"), ".2f"), _f(h.get("harness_ms_median"), ".2f")]
        if lm:
            line.append(h.get("f1"))
        table.append(line)
    return md_table(head, table)


def ranked_table(rows: dict[str, Any], ranked: list[str], level: str) -> str:
    """The ranked metrics (recall_any/recall_all as LongMemEval defines them, nDCG with trec_eval's discount) of
    the ranked rows at one level (``turn`` or ``session``)."""
    table = [[r, rows[r]["headline"]["ranked"]["n"]] + [rows[r]["headline"]["ranked"][level][m]
                                                        for m in RANKED_METRICS] for r in ranked]
    return md_table(["row", "probes"] + list(RANKED_METRICS), table)


def _num(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _n(rows: dict[str, Any], c: int) -> int:
    return max((r["by_category"].get(str(c), {}).get("n_scored", 0) for r in rows.values()), default=0)


def figure(payload: dict[str, Any]) -> Any:
    """Evidence recall vs cl100k tokens per row (log x; labels placed apart), and evidence recall per LoCoMo
    category (a measured zero is a stroke on the axis; a category without scored probes has no mark)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.plotting import grouped_bars, place_labels, zero_legend_handle

    rows = payload["aggregate"]["rows"]
    order = [r for r in _order(rows) if rows[r]["headline"]["evidence_recall"] is not None]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 6.5), gridspec_kw={"width_ratios": [1, 1.3]})
    arms = list(dict.fromkeys(rows[r]["arm"] for r in order))
    cmap = plt.get_cmap("tab20")
    colors = {a: cmap(i % 20) for i, a in enumerate(arms)}
    xs, ys = [], []
    for r in order:
        h = rows[r]["headline"]
        kind = SPECS[rows[r]["arm"]].kind if rows[r]["arm"] in SPECS else "design"
        xs.append(max(1.0, h.get("tokens_cl100k_mean") or h["tokens_mean"] or 1.0))
        ys.append(h["evidence_recall"])
        ax1.scatter([xs[-1]], [ys[-1]], color=colors[rows[r]["arm"]], marker="s" if kind == "design" else "o",
                    s=55, edgecolors="black", linewidths=0.5, zorder=3)
    ax1.set_xscale("log")
    ax1.set_xlabel("delivered tokens per probe (cl100k_base, log)")
    ax1.set_ylabel("evidence recall of delivered text (categories 1-4)")
    ax1.set_ylim(-0.05, 1.1)
    ax1.set_title("recall vs tokens (squares: designs, circles: baselines)")
    ax1.grid(alpha=0.3)
    cats = [c for c in (1, 2, 3, 4, 5) if any(str(c) in rows[r]["by_category"] for r in order)]
    colours = plt.get_cmap("tab10")
    zeros = grouped_bars(ax2, order, [(f"{c} {CATEGORY_NAMES.get(c, '')}",
                                       [rows[r]["by_category"].get(str(c), {}).get("evidence_recall") for r in order],
                                       colours(i % 10)) for i, c in enumerate(cats)])
    ax2.set_xticks(ax2.get_xticks(), order, rotation=60, ha="right", fontsize=8)
    ax2.set_ylabel("evidence recall")
    ax2.set_ylim(0, 1.25)
    ax2.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax2.set_title("evidence recall per LoCoMo category")
    handles, labels = ax2.get_legend_handles_labels()
    if zeros:
        handles.append(zero_legend_handle())
        labels.append(handles[-1].get_label())
    ax2.legend(handles, labels, fontsize=8, ncols=3, loc="upper center")
    ax2.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    place_labels(ax1, xs, ys, order)
    return fig


def _check_out_dir(out_dir: Path) -> None:
    """Refuse an output path that is (or lies under) an existing file before any work starts."""
    for p in (out_dir, *out_dir.parents):
        if p.exists():
            if not p.is_dir():
                raise ValueError(f"{p}: the output folder {'is' if p == out_dir else 'lies under'} a file, not a "
                                 f"folder")
            return


def quick_conversations(chosen: list[Conversation], named: bool) -> list[Conversation]:
    """``--quick``: every conversation named with ``--conversation``, each cut by ``quick_slice``; without a
    name, the first loaded conversation only (the quick run is a smoke test, not a sample)."""
    return [quick_slice(c) for c in (chosen if named else chosen[:1])]


# ---------------------------------------------------------------------------------- conversations in parallel
_EVENTS: Any = None  # a worker's queue to the parent (progress and echo), set by _worker_init


def _worker_init(events: Any) -> None:
    """Start of a spawned worker: one torch thread (as the serial run), the parent's event queue."""
    global _EVENTS
    set_torch_threads(1)
    _EVENTS = events


def _own_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _one_conversation(job: dict[str, Any], track: Callable[..., Any] | None = None,
                      echo: Callable[[str], None] | None = None, answerer: Any = None) -> dict[str, Any]:
    """One conversation through every arm, with its own encoder cache when ``job["share"]``: the result (with its
    ``summary``) and the cache's hits and misses. In a worker, progress and echo go to the parent's queue and the
    answerer is built here (the parent checked it)."""
    if job["in_worker"]:
        tracker = worker_tracker(_EVENTS)
        track, echo = tracker, tracker.echo
        if job["lm"]:
            from harness.workloads.answer import Answerer

            answerer = Answerer(job["lm"], **({"api_base": job["lm_base"]} if job["lm_base"] else {}))
    with _encoders(job) as shared:
        res = run_conversation(job["conv"], job["names"], Path(job["work_root"]), k_values=job["k_values"],
                               others=job["others"], lm=job["lm"], quick=job["quick"], seed=job["seed"],
                               track=track, answerer=answerer, echo=echo)
        stats = _encoder_stats(shared)
    res["summary"] = summarize(res["records"], {row: info["ingest_ms_per_turn"] for info in res["arms"].values()
                                                if info["status"] == "ok" for row in info["rows"]})
    return {"result": res, "encoder_cache": stats, "pid": os.getpid(), "peak_rss_mb": _own_peak_rss_mb()}


def _encoders(job: dict[str, Any]) -> Any:
    """The encoders of a conversation (or, in the parent of a serial run, of the whole run): the embedding store
    (``job["embed"] == "store"``, the default; ``job["store"]`` is its ``StoreSession.config()``) or the earlier
    per-call cache (``shared_encoders``, when ``job["share"]``)."""
    if job.get("embed", "per-call") == "store":
        from harness.store_encoders import StoreSession, store_encoders

        cfg = job["store"]
        return store_encoders(StoreSession(Path(cfg["root"]), device=cfg["device"]))
    return shared_encoders() if job["share"] else contextlib.nullcontext({})


def _encoder_stats(shared: Any) -> dict[str, Any]:
    if hasattr(shared, "stats") and callable(shared.stats):  # a store session
        return shared.stats()
    return {n: e.stats() for n, e in shared.items()}


def _run_parallel(jobs: list[dict[str, Any]], workers: int, track: Tracker,
                  echo: Callable[[str], None] | None,
                  done: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    """Each conversation in a pool of ``workers`` spawned processes, longest first (turns x probes); ``done`` sees
    each outcome as it arrives (the per-conversation file is written then); outcomes in the order of ``jobs``."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = mp.get_context("spawn")
    events = ctx.Queue()
    relay = Relay(events, track, echo)  # each worker's arm phases shown in this process's display
    out: list[dict[str, Any] | None] = [None] * len(jobs)
    order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i]["conv"].turns()) * max(1, len(jobs[i]["conv"].probes)))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init, initargs=(events,))
    sampler = _RssSampler(lambda: list(getattr(pool, "_processes", None) or {}))
    try:
        futures = {pool.submit(_one_conversation, {**jobs[i], "in_worker": True}): i for i in order}
        for fut in track(as_completed(futures), description="LoCoMo conversations", total=len(futures),
                         unit="conversations"):
            got = fut.result()
            done(got)
            out[futures[fut]] = got
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
        sampler.stop()
        relay.close()
    got = [o for o in out if o is not None]
    for o in got:
        o["sampled_peak_rss_mb"] = sampler.peak_mb
    return got


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


class _RssSampler:
    """The resident memory of this process plus its worker processes, summed every quarter second (Linux
    ``/proc``); ``peak_mb`` is the largest sum seen: the run's memory at one moment, measured."""

    def __init__(self, pids: Callable[[], list[int]], every_s: float = 0.25) -> None:
        self.pids, self.every_s = pids, every_s
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            total = _rss_mb(os.getpid()) + sum(_rss_mb(p) for p in self.pids())
            self.peak_mb = max(self.peak_mb, total)
            if self._stop.wait(self.every_s):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, data: Path | None = None,
        conversations: list[str] | None = None, arms: str | None = None, k_values: tuple[int, ...] = (4, 8),
        lm: str | None = None, lm_base: str | None = None, track: Callable[..., Any] | None = None,
        echo: Callable[[str], None] | None = None, tmp_dir: Path | None = None,
        fault_hook: Callable[[str], None] | None = None, arm_classes: list[str] | None = None,
        share_encoders: bool = True, workers: int = DEFAULT_WORKERS, embed: str = "store",
        embed_store: Path | None = None) -> list[Path]:
    """Run the LoCoMo benchmark and write ``locomo.{json,md,png}`` (plus per-conversation files) to ``out_dir``.

    ``arm_classes`` are external arms (``package.module:Class``, see ``harness.workloads.arms.load_arm_class``)
    run beside ``arms``. With ``quick``, each conversation named in ``conversations`` runs cut short (without
    names, the first loaded one). ``share_encoders`` gives the run one encoder cache shared by every arm
    (``harness.workloads.runner.SharedEncoder``: identical vectors, each encoder call paid once; with workers,
    one cache per conversation). ``workers``: conversations run in that many spawned processes at once (one
    torch thread each; never more processes than conversations); 1 runs them one after the other in this
    process. Every metric, ranking and delivered text is the same for any ``workers``; only times differ.
    ``embed``: ``"store"`` (the default) gives every arm that embeds the embedding store (``embed_store``, else the
    default folder; ``harness.store_encoders``: each distinct text encoded once, alone, kept across runs, on the GPU
    when torch sees one); ``"per-call"`` is the earlier per-call cache above (``share_encoders``)."""
    from harness.store_encoders import StoreSession

    if embed not in ("store", "per-call"):
        raise ValueError(f"--embed {embed!r}: choose store or per-call")
    store = StoreSession(embed_store).config() if embed == "store" else None
    if not (store and store["device"] == "cuda"):
        set_torch_threads(1)
    t_start = time.perf_counter()
    track = as_tracker(track)
    _check_out_dir(out_dir)
    if not k_values or min(k_values) < 1:
        raise ValueError(f"--k values must be positive, got {list(k_values)}")
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    names = select_arms(arms, arm_classes, quick=quick)
    require_runnable(names)  # no importable arm: one line now, never a results file without rows
    src = resolve_locomo_path(data)
    loaded = load_locomo(src)
    chosen = select_conversations(loaded, conversations)
    if quick:
        chosen = quick_conversations(chosen, bool(conversations))
        if echo:
            echo(f"--quick: {len(chosen)} conversation(s), each cut to its first {QUICK_SESSIONS} sessions and at "
                 f"most {QUICK_PROBES} probes: {', '.join(c.sample_id for c in chosen)}")
    answerer = None
    if lm:
        from harness.workloads.answer import Answerer

        answerer = Answerer(lm, **({"api_base": lm_base} if lm_base else {}))
        answerer.check()
    conv_dir = out_dir / NAME
    paths: list[Path] = []
    work_root = Path(tempfile.mkdtemp(prefix="memsim-locomo-", dir=tmp_dir))
    used = min(workers, len(chosen)) or 1
    jobs = [{"conv": conv, "names": names, "work_root": str(work_root), "k_values": tuple(k_values),
             "others": tuple(c for c in loaded if c.sample_id != conv.sample_id), "lm": lm, "lm_base": lm_base,
             "quick": quick, "seed": seed, "share": share_encoders, "in_worker": False, "embed": embed,
             "store": store} for conv in chosen]

    def done(got: dict[str, Any]) -> None:
        res = got["result"]
        p = conv_dir / f"{res['conversation']}.json"
        _write_atomic(p, res, fault_hook)
        paths.append(p)

    try:
        if used == 1:  # one encoder cache for the whole serial run
            with _encoders(jobs[0] if jobs else {"share": share_encoders}) as shared:
                outcomes = []
                for job in track(jobs, description="LoCoMo conversations", unit="conversations"):
                    got = _one_conversation({**job, "share": False, "embed": "per-call"}, track, echo, answerer)
                    done(got)
                    outcomes.append(got)
                cache_stats = _encoder_stats(shared)
        else:
            outcomes = _run_parallel(jobs, used, track, echo, done)
            cache_stats = {}
            for got in outcomes:
                for n, st in got["encoder_cache"].items():
                    acc = cache_stats.setdefault(n, {"hits": 0, "misses": 0})
                    acc["hits"] += st["hits"]
                    acc["misses"] += st["misses"]
        if store is not None:  # the segments this run's processes sealed, merged
            StoreSession(Path(store["root"]), device=store["device"]).compact()
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    results = [got["result"] for got in outcomes]
    paths.sort(key=lambda p: [c.sample_id for c in chosen].index(p.stem))
    worker_peaks = {got["pid"]: got["peak_rss_mb"] for got in outcomes} if used > 1 else {}
    agg = aggregate(results)
    if not agg["rows"]:  # every arm unavailable or failed everywhere: an error, not results without rows
        reasons = sorted({f"{arm}: {info.get('message', info['status'])}" for res in results
                          for arm, info in res["arms"].items()})
        raise ValueError("no arm produced a row: " + "; ".join(reasons))
    payload = {
        "name": NAME,
        "config": {"data": src.name, "conversations": [c.sample_id for c in chosen],
                   "arms": [n if isinstance(n, str) else n.name for n in names],
                   "arm_classes": list(arm_classes or []),
                   "k": list(k_values), "quick": quick, "lm": lm, "seed": seed, "share_encoders": share_encoders,
                   "embed": embed,
                   "workers": used, "headline_categories": list(HEADLINE_CATEGORIES)},
        "conversations": [{k: res[k] for k in ("conversation", "n_turns", "n_sessions", "n_probes", "categories",
                                               "quirks", "arms", "summary")} for res in results],
        "aggregate": agg,
        "examples": results[0]["examples"] if results else {},
        "encoder_cache": cache_stats,
        "peak_rss_mb": max(outcomes[0]["sampled_peak_rss_mb"], max(worker_peaks.values())) if worker_peaks
        else _peak_rss_mb(),
        "worker_peak_rss_mb": sorted(worker_peaks.values()),
        "meta": {"machine": machine_description(), "seeds": {"seed": seed}, "quick": quick, "workers": used,
                 "wall_s": time.perf_counter() - t_start},
    }
    payload["wall_s"] = payload["meta"]["wall_s"]
    payload["levels"] = levels(payload["wall_s"], payload["peak_rss_mb"], payload["config"]["arms"])
    fig = figure(payload) if agg["rows"] else None
    paths = write_results(out_dir, NAME, payload, markdown, fig) + paths
    return paths


def _ranked_rows(rows: dict[str, Any], order: list[str]) -> list[str]:
    return [r for r in order if rows[r]["headline"].get("ranked")]


def _span(vals: list[float | None]) -> str:
    """``lo-hi`` of the values as shown (one value when they round alike); ``n/a`` when there is none."""
    vs = [v for v in vals if v is not None]
    if not vs:
        return "n/a"
    lo, hi = _f(min(vs)), _f(max(vs))
    return lo if lo == hi else f"{lo}-{hi}"


def _more(a: float | None, b: float | None, *, more: str = "more", less: str = "less") -> str:
    """Compare two values as shown (three decimals): ``more``/``less``/``as much``."""
    if a is None or b is None:
        return "n/a"
    x, y = round(a, 3), round(b, 3)
    return more if x > y else less if x < y else "as much"


def readme_section(payload: dict[str, Any], figure_path: str | None = "benchmarks/results/locomo.png",
                   heading: str = "### LoCoMo: the same real conversations through every design") -> str:
    """The LoCoMo results section (README and docs page), built from a full run's ``locomo.json``: every number
    and every comparison word is computed from the payload, nothing is typed by hand."""
    rows = payload["aggregate"]["rows"]
    order = _order(rows)
    convs = payload["conversations"]
    cfg = payload["config"]
    big = max(cfg.get("k") or [8])
    ranked = _ranked_rows(rows, order)

    def h(row: str, key: str = "evidence_recall") -> Any:
        return rows.get(row, {}).get("headline", {}).get(key)

    def c(row: str, cat: int, key: str = "evidence_recall") -> Any:
        return rows.get(row, {}).get("by_category", {}).get(str(cat), {}).get(key)

    def mm(row: str, key: str) -> Any:
        return rows.get(row, {}).get("meta_means", {}).get(key)

    arms = cfg.get("arms") or []
    designs = [a for a in arms if SPECS.get(a) and SPECS[a].kind == "design"]
    baselines = [a for a in arms if SPECS.get(a) and SPECS[a].kind == "baseline"]
    external = [a for a in arms if a not in SPECS]
    through = "; ".join(SPECS[a].describe for a in designs)
    table = [[r, h(r), h(r, "all_evidence_rate"), h(r, "stored_recall"), _f(h(r, "tokens_cl100k_mean"), ".0f"),
              _f(h(r, "tokens_mean"), ".0f"), _f(rows[r]["ingest_ms_per_turn"], ".1f"),
              _f(h(r, "design_ms_median"), ".1f"), _f(h(r, "latency_ms_median"), ".1f"),
              _f(h(r, "latency_ms_p95"), ".1f")] for r in order]
    lines = [
        heading, "",
        f"`memsim bench locomo` puts {len(convs)} public LoCoMo conversation(s) "
        f"({sum(x['n_turns'] for x in convs)} turns, {sum(x['n_probes'] for x in convs)} questions with annotated "
        "evidence turns; the data is fetched by the tool, never committed) through "
        f"{len(designs)} design arm(s) ({through})"
        + (f", {len(external)} external arm(s) ({', '.join(external)})" if external else "")
        + f" and {len(baselines)} baseline(s) ({', '.join(baselines)}). For each question it records the exact "
        "text each arm would put in front of the model and which turns that text carries (*recall*), which turns "
        "the arm keeps anywhere (*stored*), the tokens of the text (tiktoken cl100k_base, WordPiece beside it), "
        "and the time to ingest and to answer a probe (the design's own time separated from the harness's "
        "matching where the arm reports it). Headline = categories 1-4. No LM is called: `--lm MODEL` adds "
        "LoCoMo token F1 per category. Mapping choices: module docstrings of `harness/workloads/*.py`.",
        "",
        md_table(["row", "recall", "all evidence", "stored", "tokens/probe (cl100k)", "WordPiece", "ingest ms/turn",
                  "design ms p50", "probe ms p50", "p95"], table),
        "",
    ]
    if figure_path:
        lines += [f"![LoCoMo recall vs tokens]({figure_path})", ""]
    lines += ["What the run shows (full tables, per-category numbers and the delivered texts: `locomo.md` beside "
              "`locomo.json`):", ""]
    bullets: list[str] = []
    if "fractal" in rows and "full" in rows:
        r, st = h("fractal"), h("fractal", "stored_recall")
        head = ("Fractal delivers everything it stores" if _more(r, st) == "as much"
                else f"Fractal delivers {_f(r)} of the evidence and stores {_f(st)}")
        price = _more(h("fractal", "tokens_cl100k_mean"), h("full", "tokens_cl100k_mean"))
        bullets.append(
            f"- **{head}{', at a price' if price == 'more' else ''}.** Recall {_f(r)} (all-evidence rate "
            f"{_f(h('fractal', 'all_evidence_rate'))}) at {_f(h('fractal', 'tokens_cl100k_mean'), '.0f')} tokens "
            f"per question against {_f(h('full', 'tokens_cl100k_mean'), '.0f')} for the plain transcript of the "
            "same turns (its prompt wraps instructions, summary and history JSON around every turn).")
    npp, npm, bm = f"np-pooler@{big}", f"np-mean@{big}", f"bm25@{big}"
    if npp in rows and npm in rows:
        cmp = _more(h(npp), h(npm))
        what = "as much evidence as" if cmp == "as much" else f"{cmp} evidence than"
        extra = ""
        if bm in rows:
            pos = ("above both" if h(bm) > max(h(npp), h(npm)) else "below both" if h(bm) < min(h(npp), h(npm))
                   else "between them")
            extra = f"; plain BM25@{big} reaches {_f(h(bm))}, {pos}"
        est = mm(npp, "faithful_recompute_ms")
        bullets.append(
            f"- **AgentFly NP's faithful pooler ranking delivers {what} mean pooling**: recall@{big} "
            f"{_f(h(npp))} vs {_f(h(npm))}{extra}."
            + (f" The faithful mode would re-embed the whole bank on every question: about {_f(est, '.0f')} ms "
               "per question, an estimate from a timed per-text cost, against a design time of "
               f"{_f(h(npp, 'arm_design_ms_median'), '.1f')} ms (p50, all K rows of the cached index)."
               if est is not None else ""))
    pm = f"pm@{big}"
    if pm in rows:
        others = [x for x in (npm, bm) if x in rows]
        bullets.append(
            f"- **AgentFly PM with real relevance labels**: recall@{big} {_f(h(pm))}"
            + (" against " + " and ".join(f"{_f(h(x))} for {x}" for x in others) if others else "")
            + f", with a classifier that reaches validation AUC {_f(mm(pm, 'val_auc'))} on held-out questions of "
            "the other conversations.")
    if "tortoise-volunteer" in rows:
        tv = "tortoise-volunteer"
        r = h(tv)
        head = ("carries no evidence turn for LoCoMo questions under the faithful gates" if _f(r) == _f(0.0)
                else f"carries {_f(r)} of the evidence under the faithful gates")
        block = mm(tv, "block_chars")
        what = ("the block is empty and the text is the session-start digest "
                f"({_f(mm(tv, 'digest_chars'), '.0f')} characters) and the question" if block == 0 else
                f"the block averages {_f(block, '.0f')} characters beside the session-start digest "
                f"({_f(mm(tv, 'digest_chars'), '.0f')} characters)")
        st = h(tv, "stored_recall")
        holds = (f"the store holds every evidence turn (stored recall {_f(st)})" if _f(st) == _f(1.0)
                 else f"its stored recall is {_f(st)}")
        text = f"- **Tortoise's volunteered block {head}**: recall {_f(r)}; {what}, while {holds}."
        if "tortoise-eval" in rows:
            te = "tortoise-eval"
            text += (f" Upstream's evaluation path (search pool plus source-session expansion) reaches {_f(h(te))} "
                     f"at {_f(h(te, 'tokens_cl100k_mean'), '.0f')} tokens")
            if ranked:
                best = max(ranked, key=lambda x: h(x) or 0.0)
                text += (", the best recall of any ranked row." if _f(h(best)) == _f(h(te)) else
                         f"; the best ranked row is {best} ({_f(h(best))}).")
            else:
                text += "."
        bullets.append(text)
    if "tortoise-recorded-eval" in rows:
        re_, rv = "tortoise-recorded-eval", "tortoise-recorded-volunteer"
        text = ("- **Recorded LM extraction through Tortoise** (LoCoMo's recorded observation facts replayed as the "
                f"extractor's output): the evaluation path delivers {_f(h(re_))} at "
                f"{_f(h(re_, 'tokens_cl100k_mean'), '.0f')} tokens")
        if "tortoise-eval" in rows:
            text += (f", against {_f(h('tortoise-eval'))} at {_f(h('tortoise-eval', 'tokens_cl100k_mean'), '.0f')} "
                     "with one verbatim point per turn")
        if rv in rows:
            text += f"; its volunteered block delivers {_f(h(rv))}"
        bullets.append(text + ".")
    if ranked:
        stored = [h(x, "stored_recall") for x in ranked]
        all_kept = all(v is not None and _f(v) == _f(1.0) for v in stored)
        keep = (f"every ranked row stores every evidence turn (stored {_f(1.0)})" if all_kept
                else f"ranked rows store {_span(stored)} of the evidence")
        cats = []
        for x in (f"hybrid@{big}", "tortoise-eval"):
            if x in rows:
                per = sorted((c(x, k), k) for k in HEADLINE_CATEGORIES if c(x, k) is not None)
                if len(per) >= 2:
                    cats.append(f"{x} delivers least for {CATEGORY_NAMES.get(per[0][1], per[0][1])} "
                                f"({_f(per[0][0])}) and {CATEGORY_NAMES.get(per[1][1], per[1][1])} "
                                f"({_f(per[1][0])}), most for {CATEGORY_NAMES.get(per[-1][1], per[-1][1])} "
                                f"({_f(per[-1][0])})")
        bullets.append(f"- **Stored is not delivered**: {keep} and delivers {_span([h(x) for x in ranked])} of the "
                       "evidence" + (" (" + "; ".join(cats) + ")" if cats else "") + ".")
        t10 = [rows[x]["headline"]["ranked"]["turn"] for x in ranked]
        s10 = [rows[x]["headline"]["ranked"]["session"] for x in ranked]
        best_all = max(ranked, key=lambda x: rows[x]["headline"]["ranked"]["turn"]["recall_all@10"] or 0.0)
        bullets.append(
            f"- **Ranked metrics** (trec_eval nDCG) over the {len(ranked)} ranked rows, turn level at k = 10: "
            f"recall_any {_span([t['recall_any@10'] for t in t10])}, recall_all "
            f"{_span([t['recall_all@10'] for t in t10])}, ndcg_any {_span([t['ndcg_any@10'] for t in t10])} "
            f"(highest recall_all@10: {best_all}, "
            f"{_f(rows[best_all]['headline']['ranked']['turn']['recall_all@10'])}); session level recall_all@10 "
            f"{_span([t['recall_all@10'] for t in s10])}.")
    if "oracle" in rows and "oracle-nodate" in rows:
        def verb(a: Any, b: Any) -> str:
            w = _more(b, a, more="rises", less="falls")
            return f"stays at {_f(a)}" if w == "as much" else f"{w} from {_f(a)} to {_f(b)}"

        bullets.append(
            "- **Dates and temporal questions**: with exactly the evidence turns, the share of gold-answer tokens "
            f"present in the text {verb(c('oracle', 2, 'answer_present'), c('oracle-nodate', 2, 'answer_present'))} "
            "for category 2 when session dates are dropped, and "
            f"{verb(c('oracle', 4, 'answer_present'), c('oracle-nodate', 4, 'answer_present'))} for category 4.")
    split = {}
    for x in order:  # one entry per arm: its rows' design time summed per probe, and the harness's rest
        if h(x, "arm_design_ms_median") is not None and h(x, "harness_ms_median") is not None:
            split.setdefault(rows[x]["arm"], x)
    if split:
        bullets.append("- **Where a probe's time goes** (per arm, p50 of the design's own calls + the harness's "
                       "provenance matching, ms): "
                       + ", ".join(f"{a} {_f(h(x, 'arm_design_ms_median'), '.1f')} + "
                                   f"{_f(h(x, 'harness_ms_median'), '.1f')}" for a, x in split.items()) + ".")
    lines += bullets
    lv = payload.get("levels")
    m = payload["meta"]
    mach = m.get("machine", {})
    run_line = (f"Run on {mach.get('cpu', 'an unnamed CPU')} ({mach.get('affinity_cpus', '?')} usable cores): wall "
                f"{m['wall_s'] / 60:.1f} min, peak memory {payload['peak_rss_mb'] * 2**20 / 1e9:.2f} GB")
    if lv:
        def said(x: dict[str, Any]) -> str:
            return "met" if x["met"] else "missed"

        run_line += (f" (levels for the full design run: at most {lv['wall_s']['max'] / 60:.0f} min, "
                     f"{said(lv['wall_s'])}; at most {lv['peak_rss_gb']['max']:.0f} GB, {said(lv['peak_rss_gb'])})")
    lines += ["", run_line + ". The cross-design claims (`memsim claims --design cross`) check consequences like "
              "these on one named conversation."]
    return "\n".join(lines) + "\n"


DOCS_BEGIN = "<!-- BEGIN LOCOMO RESULTS (generated by `python -m benchmarks.locomo --docs`; do not edit by hand) -->"
DOCS_END = "<!-- END LOCOMO RESULTS -->"


def docs_page(payload: dict[str, Any]) -> str:
    """``docs/locomo.md``, rendered from a full run's ``locomo.json``: the results section, the ranked metrics
    and the per-category recall of every row."""
    from harness.runs import code_text

    rows = payload["aggregate"]["rows"]
    order = _order(rows)
    ranked = _ranked_rows(rows, order)
    out = ["# LoCoMo results", "",
           "The cross-design LoCoMo benchmark (`memsim bench locomo`, described under "
           "[Benchmarks](benchmarks.md)) as last committed. Everything between the markers below is rendered "
           "from `benchmarks/results/locomo.json` by `python -m benchmarks.locomo --docs`; the figure is "
           "`benchmarks/results/locomo.png` and the delivered texts are in `benchmarks/results/locomo.md`.", "",
           DOCS_BEGIN, "",
           readme_section(payload, figure_path=None, heading="## What the run shows").rstrip(), "",
           "## Every row (categories 1-4)", "", headline_table(rows, order), ""]
    if ranked:
        out += ["## Ranked metrics", "",
                "recall_any@k: at least one evidence turn (session) in the row's top k; recall_all@k: all of them; "
                "ndcg_any@k: nDCG@k with binary relevance and trec_eval's discount 1/log2(rank + 1) (pytrec_eval; "
                "not LongMemEval's official DCG, which weighs ranks 1 and 2 alike). Only rows whose delivery is "
                "a ranking have them.", ""]
        for level in RANKED_LEVELS:
            out += [f"### {level.capitalize()} level", "", ranked_table(rows, ranked, level), ""]
    cats = sorted({int(k) for r in rows.values() for k in r["by_category"]})
    ctable = [[r] + [rows[r]["by_category"].get(str(k), {}).get("evidence_recall") for k in cats] for r in order]
    out += ["## Evidence recall per category", "",
            md_table(["row"] + [f"{k} {CATEGORY_NAMES.get(k, '')}" for k in cats], ctable), "",
            f"Code: {code_text(payload.get('run'))}.", "", DOCS_END]
    return "\n".join(out) + "\n"


WORKERS_NAME = "locomo-workers"


def compare_workers(out_dir: Path, *, workers: tuple[int, ...] = (1, 2, 3), quick: bool = True,
                    data: Path | None = None, conversations: list[str] | None = None, arms: str | None = None,
                    echo: Callable[[str], None] | None = None,
                    fault_hook: Callable[[str], None] | None = None) -> list[Path]:
    """The same LoCoMo workload once per worker count, one run after the other in this process, and
    ``locomo-workers.{json,md}``: each run's wall time, its speed-up over the first (the ratio of the two walls,
    measured side by side here) and whether its results equal the first run's (``comparable``: everything but
    timings and Fractal's wall-clock text). With ``quick`` each named conversation (default: every loaded one) is
    cut as ``--quick`` cuts it. The fastest count is the one ``DEFAULT_WORKERS`` should name."""
    if quick and Path(out_dir).resolve() == RESULTS_DIR.resolve():
        raise ValueError(f"{out_dir}: the committed results are full runs; write a quick comparison elsewhere "
                         "(or pass --full)")
    t_start = time.perf_counter()
    src = resolve_locomo_path(data)
    names = conversations or [c.sample_id for c in load_locomo(src)]
    runs: list[dict[str, Any]] = []
    first: dict[str, Any] | None = None
    for n in workers:
        sub = out_dir / f"{WORKERS_NAME}-runs" / f"workers-{n}"
        run(sub, quick=quick, data=data, conversations=names, arms=arms, workers=n, echo=echo)
        payload = json.loads((sub / f"{NAME}.json").read_text(encoding="utf-8"))
        convs = [json.loads((sub / NAME / f"{c}.json").read_text(encoding="utf-8")) for c in names]
        mine = {"payload": comparable(payload), "conversations": [comparable(c) for c in convs]}
        first = first or mine
        runs.append({"workers": n, "used": payload["config"]["workers"], "wall_s": payload["wall_s"],
                     "peak_rss_mb": payload["peak_rss_mb"], "identical_to_first": mine == first})
        if echo:
            echo(f"workers {n}: wall {payload['wall_s']:.1f} s")
    base = runs[0]["wall_s"]
    for r in runs:
        r["speedup_vs_first"] = base / r["wall_s"] if r["wall_s"] else None
    fastest = min(runs, key=lambda r: r["wall_s"])["workers"]
    result = {"name": WORKERS_NAME, "config": {"data": src.name, "conversations": names, "quick": quick,
                                               "arms": parse_arms(arms, quick), "workers": list(workers)},
              "runs": runs, "fastest_workers": fastest, "default_workers": DEFAULT_WORKERS,
              "meta": {"machine": machine_description(), "quick": quick,
                       "wall_s": time.perf_counter() - t_start}}
    md = workers_markdown(stamp_run(result))
    jp, mp = out_dir / f"{WORKERS_NAME}.json", out_dir / f"{WORKERS_NAME}.md"
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(jp, (json.dumps(_jsonable(result), indent=2) + "\n").encode("utf-8"), fault_hook,
                 "locomo.workers.write")
    write_atomic(mp, (md + "\n").encode("utf-8"), fault_hook, "locomo.workers.write")
    return [jp, mp]


def workers_markdown(result: dict[str, Any]) -> str:
    """``locomo-workers.md`` from its JSON."""
    cfg = result["config"]
    table = [[r["workers"], r["used"], _f(r["wall_s"], ".1f"), _f(r["speedup_vs_first"], ".2f"),
              _f(r["peak_rss_mb"], ".0f"), "yes" if r["identical_to_first"] else "NO"] for r in result["runs"]]
    return "\n".join([
        f"# LoCoMo: wall time by worker count ({len(cfg['conversations'])} conversation(s)"
        + (", each cut as --quick cuts it" if cfg["quick"] else "") + ")", "",
        "The same workload run once per worker count, one run after the other in one process; the speed-up is "
        "the first run's wall over each run's. *Identical* compares every metric, ranking, delivered id and "
        "delivered-text digest with the first run's (Fractal's text size aside: its prompt carries the run's "
        "timestamps).", "",
        md_table(["workers", "processes used", "wall s", "speed-up", "peak MiB", "identical"], table), "",
        f"Fastest: {result['fastest_workers']} worker(s); the default is {result['default_workers']}. "
        + meta_block(result["meta"], result.get("run"))])


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.locomo --docs [--json FILE] [--page FILE]``: rewrite the docs page from the JSON."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m benchmarks.locomo")
    ap.add_argument("--docs", action="store_true", help="render the docs page from the results JSON")
    ap.add_argument("--json", type=Path, default=RESULTS_DIR / f"{NAME}.json")
    ap.add_argument("--page", type=Path, default=DOCS_PAGE)
    ap.add_argument("--compare-workers", help="comma-separated worker counts (e.g. 1,2,3): run the workload once "
                                              "per count and write locomo-workers.{json,md} to --out")
    ap.add_argument("--out", type=Path, default=None, help="with --compare-workers: output folder (default the "
                                                          "bench run folder; benchmarks/results takes --full runs "
                                                          "only)")
    ap.add_argument("--full", action="store_true", help="with --compare-workers: whole conversations, not quick "
                                                        "slices")
    ap.add_argument("--arms", default=None)
    args = ap.parse_args(argv)
    if args.compare_workers:
        set_torch_threads(1)
        try:
            counts = tuple(int(x) for x in args.compare_workers.split(","))
            from harness.results_dir import default_out

            for path in compare_workers(args.out or default_out("bench"), workers=counts, quick=not args.full, arms=args.arms, echo=print):
                print(f"wrote {path}")
        except (OSError, ValueError) as exc:
            print(f"error: {' '.join(str(exc).split())}")
            return 1
        return 0
    if not args.docs:
        ap.print_help()
        return 2
    try:
        payload = json.loads(args.json.read_text(encoding="utf-8"))
        args.page.write_text(docs_page(payload), encoding="utf-8")
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {args.json}: cannot render the docs page: {exc}")
        return 1
    print(f"wrote {args.page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
