"""The LoCoMo paper's retrieval protocol over loaded conversations, beside the published Table 3 and the designs.

``memsim bench locomo --protocol locomo-paper`` loads the conversations, runs every retriever (``--retrievers``)
over every unit kind and k of the paper's grid (``harness.workloads.paper_protocol``: units, recall rule, reader
context, tokens), then runs the design arms (``--arms``, default the designs; ``none`` for the retriever rows
alone) through the LoCoMo runner and scores each delivered row with the same recall function over its delivered
``dia_id``s and cl100k tokens of its own delivered text. It writes ``<out>/locomo-paper.{json,md,png}``:

- JSON ``rows``: one per (retriever, unit, k), ``{"retriever", "unit", "k", "recall": {"1".."5", "overall"},
  "tokens_cl100k"}`` (recall a fraction, tokens the mean per question), with the conversations used and the ones
  where the unit was unavailable (and why); ``design_rows`` the same shape per delivered design row (``unit``
  ``"delivered"``, ``k`` null: each design at its own K, outside the grid); ``published`` the paper's rows, read
  from the cited data file and kept apart; question counts per category, quirk counts, timings and whether the
  run met the issue-level budget (ten minutes for the four shipped conversations, every retriever but
  two-tower), judged both on the protocol phase and on the whole run's wall time (``budget_level``).
- Markdown and figure rendered from that JSON only (``markdown``, ``figure``); the documentation page
  ``docs/locomo-paper.md`` is rendered from the committed JSON by ``docs_page`` (``python -m
  benchmarks.locomo_paper --docs`` rewrites it).

Every file is written to a temporary name and renamed into place (fault-hook step ``locomo-paper.write`` before
each rename), so an interrupted run never leaves a half-written result.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
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
)
from benchmarks.progress import Tracker, as_tracker
from harness.workloads.arms import ArmSpec, require_runnable
from harness.workloads.base import Delivery
from harness.workloads.locomo import (
    CATEGORY_NAMES,
    Conversation,
    Probe,
    load_locomo,
    resolve_locomo_path,
    select_conversations,
)
from harness.workloads.paper_protocol import (
    CATEGORIES,
    K_GRID,
    RETRIEVERS,
    UNITS,
    UnitResult,
    aggregate_rows,
    category_recall,
    evaluate_unit,
    get_retrievers,
    parse_retrievers,
    published_rows,
    published_table,
    question_counts,
    question_recall,
    quirk_counts,
    tokens_cl100k,
)

NAME = "locomo-paper"
LEVEL_LIMIT_S = 600.0
LEVEL_CONVERSATIONS = 4
DOCS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "locomo-paper.md"
_COLS = [*map(str, CATEGORIES), "overall"]


def parse_arm_option(spec: str | None, arm_classes: list[str] | None = None) -> list[str | ArmSpec]:
    """``--arms`` and ``--arm-class`` for this protocol, by the one rule of every protocol
    (``harness.workloads.arms.select_arms``): default the design arms; ``none`` for the retriever rows alone (plus
    any ``--arm-class``)."""
    from harness.workloads.arms import select_arms

    return select_arms(spec, arm_classes, default="designs", allow_none=True)


def _write_atomic(path: Path, data: bytes, fault_hook: Callable[[str], None] | None) -> None:
    write_atomic(path, data, fault_hook, "locomo-paper.write")


def _design_rows(chosen: list[Conversation], loaded: list[Conversation], names: list[str | ArmSpec],
                 k_values: tuple[int, ...],
                 quick: bool, seed: int, track: Tracker, echo: Callable[[str], None] | None,
                 tmp_dir: Path | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the design arms through the LoCoMo runner; score every delivered row with the paper's recall rule."""
    from harness.workloads.runner import run_conversation

    collected: dict[tuple[str, str], list[tuple[Probe, frozenset[str], int]]] = {}
    status: dict[str, dict[str, Any]] = {}
    row_arm: dict[str, str] = {}
    work_root = Path(tempfile.mkdtemp(prefix="memsim-locomo-paper-", dir=tmp_dir))
    try:
        for conv in track(chosen, description="design arms: conversations", unit="conversations"):
            seen: dict[str, list[tuple[Probe, frozenset[str], int]]] = {}

            def on_delivery(row: str, probe: Probe, d: Delivery, _seen: dict[str, Any] = seen) -> None:
                _seen.setdefault(row, []).append((probe, frozenset(d.dia_ids), tokens_cl100k(d.text)))

            others = tuple(c for c in loaded if c.sample_id != conv.sample_id)
            res = run_conversation(conv, names, work_root, k_values=k_values, others=others, quick=quick, seed=seed,
                                   track=track, echo=echo, on_delivery=on_delivery)
            for arm, info in res["arms"].items():
                status.setdefault(arm, {})[conv.sample_id] = {k: v for k, v in info.items()
                                                              if k in ("status", "message")}
                for row in info.get("rows", []):
                    row_arm[row] = arm
                    if info["status"] == "ok":
                        collected.setdefault((arm, row), []).extend(seen.get(row, []))
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    for arm in status:  # an arm that gave no row anywhere is still listed, with its reasons
        if arm not in row_arm.values():
            row_arm[arm] = arm
    rows: list[dict[str, Any]] = []
    for row, arm in row_arm.items():
        recs = collected.get((arm, row), [])
        convs = [c for c, s in status[arm].items() if s["status"] == "ok"]
        missing = [{"conversation": c, "reason": f"{s['status']}: {s.get('message', '')}"}
                   for c, s in status[arm].items() if s["status"] != "ok"]
        scored = [(p.category, question_recall(p.raw_evidence, ids)) for p, ids, _ in recs]
        toks = [t for _, _, t in recs]
        rows.append({"retriever": row, "arm": arm, "unit": "delivered", "k": None,
                     "recall": category_recall(scored) if recs else dict.fromkeys(_COLS),
                     "tokens_cl100k": sum(toks) / len(toks) if toks else None, "n_questions": len(recs),
                     "conversations": convs, "unavailable": missing})
    return rows, status


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, data: Path | None = None,
        conversations: list[str] | None = None, retrievers: str | None = None, arms: str | None = None,
        k_values: tuple[int, ...] = (4, 8), track: Callable[..., Any] | None = None,
        echo: Callable[[str], None] | None = None, tmp_dir: Path | None = None,
        fault_hook: Callable[[str], None] | None = None, arm_classes: list[str] | None = None) -> list[Path]:
    """Run the paper protocol (and the design rows) and write ``locomo-paper.{json,md,png}`` to ``out_dir``.
    ``arm_classes`` are external arms (``package.module:Class``) run beside ``arms``, as under the designs
    protocol."""
    from benchmarks.locomo import quick_slice

    set_torch_threads(1)
    t0 = time.perf_counter()
    if not k_values or min(k_values) < 1:
        raise ValueError(f"--k values must be positive, got {list(k_values)}")
    names = parse_retrievers(retrievers)
    arm_names = parse_arm_option(arms, arm_classes)
    require_runnable(arm_names)
    src = resolve_locomo_path(data)
    loaded = load_locomo(src)
    chosen = select_conversations(loaded, conversations)
    if quick:
        chosen = [quick_slice(chosen[0])]
    track = as_tracker(track)
    # loading the retrievers (a MiniLM model, two-tower models) takes seconds: a phase of its own
    with track.phase(f"loading retrievers {', '.join(names)}"):
        built = get_retrievers(names)
    t_load = time.perf_counter() - t0
    per_retriever_s = dict.fromkeys(names, 0.0)
    results: list[UnitResult] = []
    pairs = [(c, n) for c in chosen for n in names]
    for conv, name in track(pairs, description="paper protocol: conversations x retrievers", total=len(pairs)):
        t = time.perf_counter()
        results += [evaluate_unit(conv, built[name], unit) for unit in UNITS]
        per_retriever_s[name] += time.perf_counter() - t
    protocol_s = time.perf_counter() - t0
    t_design = time.perf_counter()
    design_rows, design_status = (_design_rows(chosen, loaded, arm_names, tuple(k_values), quick, seed, track, echo,
                                               tmp_dir) if arm_names else ([], {}))
    design_s = time.perf_counter() - t_design
    counts = {c.sample_id: question_counts(c) for c in chosen}
    total_counts = {str(k): {f: sum(counts[c][str(k)][f] for c in counts) for f in ("questions", "with_evidence")}
                    for k in CATEGORIES}
    applies = (not quick and len(chosen) >= LEVEL_CONVERSATIONS and set(RETRIEVERS) <= set(names))
    table = published_table()
    payload: dict[str, Any] = {
        "name": NAME,
        "protocol": {
            "units": list(UNITS), "k_grid": {u: list(ks) for u, ks in K_GRID.items()},
            "retrievers": names,
            "recall": "share of a question's evidence strings, exactly as given, found among the ids of the top-k "
                      "units; summary units match the session number split(':')[0][1:] against retrieved S<n>; "
                      "per category the sum over questions with evidence divided by all questions of the category",
            "tokens": "cl100k_base tokens of '<session date-time>: <unit text>' per retrieved unit, joined by a "
                      "newline (dialog, observation) or a blank line (summary); mean per question",
        },
        "config": {"data": src.name, "sources": sorted({Path(c.source).name for c in chosen}),
                   "conversations": [c.sample_id for c in chosen], "retrievers": names,
                   "arms": [n if isinstance(n, str) else n.name for n in arm_names],
                   "arm_classes": list(arm_classes or []), "design_k": list(k_values), "quick": quick, "seed": seed},
        "conversations_used": [c.sample_id for c in chosen],
        "rows": aggregate_rows(results),
        "design_rows": design_rows,
        "design_status": design_status,
        "published": {k: table[k] for k in ("citation", "source_code", "retriever", "reader", "conversations",
                                            "questions_per_category")}
                     | {"rows": published_rows()},
        "question_counts": {"total": total_counts, "per_conversation": counts},
        "quirks": {c.sample_id: quirk_counts(c) for c in chosen},
        "timings": {
            "load_s": t_load, "protocol_s": protocol_s, "per_retriever_s": per_retriever_s, "designs_s": design_s,
            "wall_s": time.perf_counter() - t0,
        },
        "meta": {"machine": machine_description(), "seeds": {"seed": seed}, "quick": quick},
    }
    payload["timings"]["level"] = budget_level(protocol_s, payload["timings"]["wall_s"], applies)
    payload["meta"]["wall_s"] = payload["timings"]["wall_s"]
    return write(out_dir, stamp_run(payload), fault_hook)


def write(out_dir: Path, payload: dict[str, Any], fault_hook: Callable[[str], None] | None = None) -> list[Path]:
    """Write ``locomo-paper.{json,md,png}`` (each atomically) and return the paths."""
    import io

    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    payload = _jsonable(payload)
    paths = [out_dir / f"{NAME}.json", out_dir / f"{NAME}.md", out_dir / f"{NAME}.png"]
    fig = figure(payload)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    _write_atomic(paths[0], (json.dumps(payload, indent=2, ensure_ascii=False) + "\n").encode(), fault_hook)
    _write_atomic(paths[1], (markdown(payload).rstrip() + "\n").encode(), fault_hook)
    _write_atomic(paths[2], buf.getvalue(), fault_hook)
    return paths


# ------------------------------------------------------------------------------------------------ rendering
def _pct(v: Any) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}"


def _tok(v: Any) -> str:
    return "n/a" if v is None else f"{v:.0f}"


def _cat_headers(payload: dict[str, Any]) -> list[str]:
    counts = payload["question_counts"]["total"]
    return [f"{c} {CATEGORY_NAMES[c]} (n={counts[str(c)]['questions']})" for c in CATEGORIES]


def _recall_cells(row: dict[str, Any]) -> list[str]:
    return [_pct(row["recall"].get(c)) for c in _COLS]


def _row_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    unit_rank = {u: i for i, u in enumerate(UNITS)}
    return sorted(rows, key=lambda r: (unit_rank.get(r["unit"], 9), r["k"] or 0, r["retriever"]))


def _published_note(row: dict[str, Any], counts: dict[str, int]) -> str:
    if not row.get("note"):
        return ""
    weighted = sum(row["recall"][str(c)] * counts[str(c)] for c in CATEGORIES) / sum(counts.values())
    return (f"{row['note']} (question-weighted mean of the category values: {_pct(weighted)}; printed overall: "
            f"{_pct(row['recall']['overall'])})")


def tables(payload: dict[str, Any]) -> list[str]:
    """The Markdown tables (memsim's rows, published rows, side by side, designs) shared by the results file and
    the documentation page."""
    pub = payload["published"]
    rows = _row_order(payload["rows"])
    ncv = len(payload["conversations_used"])
    out = [f"### memsim: the protocol over {ncv} conversation(s) ({', '.join(payload['conversations_used'])})", "",
           "Recall in % of all questions of the category (questions without evidence count as zero); tokens = "
           "cl100k_base tokens of the reader context, mean per question.", "",
           md_table(["retriever", "unit", "k", *_cat_headers(payload), "overall", "tokens (cl100k)"],
                    [[r["retriever"], r["unit"], r["k"], *_recall_cells(r), _tok(r["tokens_cl100k"])] for r in rows]),
           ""]
    gone = [(r["retriever"], r["unit"], u["conversation"], u["reason"]) for r in rows for u in r.get("unavailable", [])
            if r["k"] == min(K_GRID[r["unit"]])]
    if gone:
        out += ["Rows unavailable for some conversations (their questions are left out of that row):", "",
                md_table(["retriever", "unit", "conversation", "reason"], gone), ""]
    prow = _row_order(pub["rows"])
    out += [f"### Published, not measured here: {pub['citation']}", "",
            f"Retriever {pub['retriever']}, reader {pub['reader']}, {pub['conversations']}. Recall in %.", "",
            md_table(["unit", "k", *[f"{c} {CATEGORY_NAMES[c]}" for c in CATEGORIES], "overall", "note"],
                     [[r["unit"], r["k"], *_recall_cells(r), _published_note(r, pub["questions_per_category"])]
                      for r in prow]), ""]
    out += ["### Overall recall side by side (published beside memsim; different retriever and conversations)", "",
            side_by_side(payload), ""]
    design = payload.get("design_rows") or []
    if design:
        out += ["### Design rows (each design at its own K, outside the k grid)", "",
                "Recall of each design's delivered turn ids with the same recall function (dialog rule, evidence "
                "strings exactly as given); tokens = cl100k_base tokens of the design's own delivered text.", "",
                md_table(["row", "arm", *[f"{c} {CATEGORY_NAMES[c]}" for c in CATEGORIES], "overall",
                          "tokens (cl100k)", "conversations"],
                         [[r["retriever"], r["arm"], *_recall_cells(r), _tok(r["tokens_cl100k"]),
                           ", ".join(r["conversations"]) or "none"] for r in design]), ""]
        bad = [(r["retriever"], u["conversation"], u["reason"]) for r in design for u in r.get("unavailable", [])]
        if bad:
            out += ["Design rows not measured on some conversations:", "",
                    md_table(["row", "conversation", "reason"], bad), ""]
    return out


def side_by_side(payload: dict[str, Any]) -> str:
    """Overall recall per unit and k: the published row beside each memsim retriever's (rendered from the JSON)."""
    rows = _row_order(payload["rows"])
    names = payload["config"]["retrievers"]
    ncv = len(payload["conversations_used"])
    by = {(r["retriever"], r["unit"], r["k"]): r for r in rows}
    side = []
    for p in _row_order(payload["published"]["rows"]):
        side.append([p["unit"], p["k"], _pct(p["recall"]["overall"]),
                     *[_pct((by.get((n, p["unit"], p["k"])) or {}).get("recall", {}).get("overall")) for n in names]])
    return md_table(["unit", "k", "published (DRAGON+, 10 conversations)",
                     *[f"memsim {n} ({ncv} conv.)" for n in names]], side)


def readme_section(payload: dict[str, Any]) -> str:
    """The README's short paper-protocol subsection: what it is, the side-by-side table, where the rest is."""
    pub = payload["published"]
    ncv = len(payload["conversations_used"])
    return "\n".join([
        "#### The LoCoMo paper's retrieval protocol", "",
        f"`memsim bench locomo --protocol locomo-paper` reproduces the retrieval-recall protocol of the LoCoMo paper "
        f"(dialog turns, recorded observations and session summaries as units; evidence strings matched exactly as "
        f"LoCoMo's code does) with memsim's retrievers ({', '.join(payload['config']['retrievers'])}) over {ncv} "
        f"conversation(s), beside the published rows (retriever {pub['retriever']}, {pub['conversations']}; not "
        f"measured here). Overall recall in %:", "",
        side_by_side(payload), "",
        "Per-category tables, every design at its own K on the same recall function, and the evidence quirks: "
        "[docs/locomo-paper.md](docs/locomo-paper.md).", ""])


def _data_section(payload: dict[str, Any]) -> list[str]:
    qc = payload["question_counts"]["per_conversation"]
    q = payload["quirks"]
    conv_rows = [[c, *[f"{qc[c][str(k)]['questions']} ({qc[c][str(k)]['with_evidence']})" for k in CATEGORIES],
                  q[c]["questions_with_separator_evidence"], q[c]["evidence_strings_not_turn_ids"],
                  q[c]["questions_never_fully_recallable"], q[c]["evidence_ids_naming_no_turn"],
                  q[c]["observation_ids_naming_no_turn"],
                  "; ".join(q[c]["separator_evidence_examples"]) or "none"] for c in payload["conversations_used"]]
    return ["### Questions and evidence quirks", "",
            "Questions per category (with evidence in brackets). Upstream matches evidence strings exactly as "
            "given, so a string holding `;` or a space, or one that is not exactly a turn id, never matches a "
            "dialog or observation id: such questions cannot reach full recall at any k.", "",
            md_table(["conversation", *[f"cat {c}" for c in CATEGORIES], "questions with ; or space",
                      "evidence strings not a turn id", "questions never fully recallable",
                      "evidence ids naming no turn", "observation ids naming no turn", "examples"], conv_rows), ""]


BUDGET_STATEMENT = ("the paper-protocol run over the four shipped conversations, every retriever except two-tower, "
                    "finishes within 10 minutes on a 2-core machine")
"""The run-time level. It is judged twice (``budget_level``): on the protocol phase (loading, then every retriever
over every unit and k) and on the whole run's wall time (the design rows included), and both verdicts are shown."""


def budget_level(protocol_s: float, wall_s: float, applies: bool, limit_s: float = LEVEL_LIMIT_S) -> dict[str, Any]:
    """The run-time level judged on both times: ``protocol_met`` (the protocol phase), ``wall_met`` (the whole
    run, design rows included) and ``met`` (both); every verdict None where the level does not apply (not the
    full four-conversation run of every retriever but two-tower)."""
    def judged(seconds: float) -> bool | None:
        return (seconds <= limit_s) if applies else None

    protocol_met, wall_met = judged(protocol_s), judged(wall_s)
    return {"statement": BUDGET_STATEMENT, "limit_s": limit_s, "applies": applies,
            "protocol_s": protocol_s, "protocol_met": protocol_met, "wall_s": wall_s, "wall_met": wall_met,
            "met": (bool(protocol_met and wall_met)) if applies else None}


def _judged_level(t: dict[str, Any]) -> dict[str, Any]:
    """The budget judged again from the timings of a results JSON (never its stored verdicts)."""
    lv = t["level"]
    return budget_level(t["protocol_s"], t["wall_s"], bool(lv["applies"]), float(lv["limit_s"]))


def _timing_line(payload: dict[str, Any]) -> str:
    t = payload["timings"]
    lv = _judged_level(t)
    per = ", ".join(f"{n} {s:.0f} s" for n, s in t["per_retriever_s"].items())
    if not lv["applies"]:
        verdict = ("not applicable to this run (it is not the full four-conversation run of every retriever but "
                   "two-tower)")
    else:
        word = {True: "met", False: "missed"}
        verdict = (f"judged on the protocol phase ({t['protocol_s']:.0f} s): {word[lv['protocol_met']]}; judged on "
                   f"the whole run's wall time, design rows included ({t['wall_s']:.0f} s): "
                   f"{word[lv['wall_met']]}")
    return (f"Protocol phase {t['protocol_s']:.0f} s (loading {t['load_s']:.0f} s; {per}); design rows "
            f"{t['designs_s']:.0f} s; wall {t['wall_s']:.0f} s. Budget ({lv['statement']}, "
            f"{lv['limit_s']:.0f} s): {verdict}.")


def rerender(results_json: Path) -> list[Path]:
    """Judge the budget of a results JSON again from its timings and rewrite that JSON and the Markdown beside
    it (nothing is re-measured; the figure, which shows no timing, is kept)."""
    payload = json.loads(results_json.read_text(encoding="utf-8"))
    payload["timings"]["level"] = _judged_level(payload["timings"])
    md = results_json.with_suffix(".md")
    _write_atomic(results_json, (json.dumps(payload, indent=2, ensure_ascii=False) + "\n").encode(), None)
    _write_atomic(md, (markdown(payload).rstrip() + "\n").encode(), None)
    return [results_json, md]


def markdown(payload: dict[str, Any]) -> str:
    """The results file, rendered from the results JSON only."""
    out = [f"# LoCoMo paper protocol ({len(payload['conversations_used'])} conversation(s), retrievers "
           f"{', '.join(payload['config']['retrievers'])})", "",
           "Dialog turns, recorded observations and session summaries as retrieval units; the question as query; "
           "recall of the evidence strings among the retrieved units' ids, as the LoCoMo paper's code computes it. "
           "memsim's rows come first; the paper's published rows follow in their own table.", ""]
    out += tables(payload)
    out += [f"![recall vs k]({NAME}.png)", ""]
    out += _data_section(payload)
    out += [_timing_line(payload), "", meta_block(payload["meta"], payload.get("run"))]
    return "\n".join(out)


def docs_page(payload: dict[str, Any]) -> str:
    """``docs/locomo-paper.md``, rendered from a results JSON (the committed full run)."""
    out = ["# LoCoMo paper protocol", "",
           "<!-- generated from benchmarks/results/locomo-paper.json by `python -m benchmarks.locomo_paper --docs`; "
           "do not edit by hand -->", "",
           "The LoCoMo paper (Maharana et al., ACL 2024) measures how much of a question's annotated evidence a "
           "retriever puts in front of the reader, over three retrieval units: dialog turns, the recorded "
           "observation facts and the session summaries. `memsim bench locomo --protocol locomo-paper` reproduces "
           "that protocol as LoCoMo's own code computes it, quirks included (evidence strings are matched exactly "
           "as given, so `\"D8:6; D9:17\"` never matches a turn id), with bm25, MiniLM, their hybrid and any local "
           "two-tower pair (`two-tower:QUERY_MODEL,CONTEXT_MODEL`, the way the paper ran DRAGON+). The design arms "
           "run through the same recall function at their own K.", "",
           "Run it:", "", "```bash",
           "memsim bench locomo --protocol locomo-paper --retrievers bm25,minilm,hybrid --arms none",
           "memsim bench locomo --protocol locomo-paper            # plus the design rows",
           "```", "",
           "## Results", ""]
    out += tables(payload)
    out += _data_section(payload)
    out += ["## Run", "", _timing_line(payload), "", meta_block(payload["meta"], payload.get("run")), ""]
    return "\n".join(out)


def figure(payload: dict[str, Any]) -> Any:
    """Overall recall vs k per unit (memsim solid, published dashed), and recall vs tokens for every row (the
    design rows labelled, labels placed apart)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.plotting import place_labels

    fig, axes = plt.subplots(1, 4, figsize=(22, 5.6), gridspec_kw={"width_ratios": [1, 1, 1, 1.8]})
    names = payload["config"]["retrievers"]
    cmap = plt.get_cmap("tab10")
    colors = {n: cmap(i % 10) for i, n in enumerate(names)}
    pub = payload["published"]
    for ax, unit in zip(axes[:3], UNITS, strict=True):
        for n in names:
            pts = sorted((r["k"], r["recall"]["overall"]) for r in payload["rows"]
                         if r["retriever"] == n and r["unit"] == unit and r["recall"]["overall"] is not None)
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", color=colors[n], label=f"memsim {n}")
        ppts = sorted((r["k"], r["recall"]["overall"]) for r in pub["rows"] if r["unit"] == unit)
        if ppts:
            ax.plot(*zip(*ppts, strict=True), linestyle="--", marker="x", color="black",
                    label=f"published {pub['retriever'].split(' ')[0]}")
        ax.set_title(f"{unit} units")
        ax.set_xlabel("k (units retrieved)")
        ax.set_xscale("log")
        ks = list(K_GRID[unit])
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("overall recall (all five categories)")
    axes[0].legend(fontsize=8, loc="lower right")
    ax = axes[3]
    markers = {"dialog": "o", "observation": "^", "summary": "s"}
    unlabelled = []
    for r in payload["rows"]:
        if r["recall"]["overall"] is None or r["tokens_cl100k"] is None:
            continue
        ax.scatter([r["tokens_cl100k"]], [r["recall"]["overall"]], color=colors[r["retriever"]],
                   marker=markers[r["unit"]], s=30)
        unlabelled.append((r["tokens_cl100k"], r["recall"]["overall"]))
    shown = sorted((r for r in payload.get("design_rows") or []
                    if r["recall"]["overall"] is not None and r["tokens_cl100k"]), key=lambda r: r["tokens_cl100k"])
    for r in shown:
        ax.scatter([r["tokens_cl100k"]], [r["recall"]["overall"]], color="black", marker="D", s=36, zorder=3)
    ax.set_xscale("log")
    ax.set_xlabel("reader context, cl100k tokens per question (log)")
    ax.set_title("recall vs tokens\n(o dialog, ^ observation, s summary; black D: design rows)")
    ax.set_ylim(-0.06, 1.08)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    place_labels(ax, [r["tokens_cl100k"] for r in shown], [r["recall"]["overall"] for r in shown],
                 [r["retriever"] for r in shown], avoid=unlabelled)
    return fig


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.locomo_paper --docs [--check]``: (re)render the docs page from the committed JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", action="store_true", help="render docs/locomo-paper.md from the results JSON")
    ap.add_argument("--check", action="store_true", help="exit 1 when the page differs from a fresh rendering")
    ap.add_argument("--results", type=Path, default=RESULTS_DIR / f"{NAME}.json")
    ap.add_argument("--render", action="store_true",
                    help="judge the levels of the --results JSON again from its timings and rewrite it and its .md")
    args = ap.parse_args(argv)
    if args.render:
        for path in rerender(args.results):
            print(f"wrote {path}")
        return 0
    if not args.docs:
        ap.print_help()
        return 2
    page = docs_page(json.loads(args.results.read_text(encoding="utf-8")))
    if args.check:
        return 0 if DOCS_PAGE.exists() and DOCS_PAGE.read_text(encoding="utf-8") == page else 1
    _write_atomic(DOCS_PAGE, page.encode(), None)
    print(f"wrote {DOCS_PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
