"""The LoCoMo paper protocol's pages, rendered from its results JSON only: ``locomo-paper.md`` (:func:`markdown`), the
docs page ``docs/locomo-paper.md`` (:func:`docs_page`), the README subsection (:func:`readme_section`) and the figure
(:func:`figure`).

memsim's protocol table (the headline) and the design rows show each recall and token count with its 95% interval
(probes resampled within each conversation; a question without evidence counts as zero, as the paper counts it),
and the Differences section tests the comparator pairs fixed in the bench's configuration
(:mod:`benchmarks.comparison_page`), all from the JSON's ``statistics`` block. A results JSON written before that
block existed renders with point estimates alone. Published rows never get an interval: they are not measured here.
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import md_table, meta_block
from benchmarks.comparison_page import cell, differences_section, method_sentence
from harness.workloads.locomo import CATEGORY_NAMES
from harness.workloads.paper_protocol import CATEGORIES, K_GRID, UNITS

NAME = "locomo-paper"
LEVEL_LIMIT_S = 600.0
_COLS = [*map(str, CATEGORIES), "overall"]
PROBE_SET = ("every question of the conversations (a category's column: its questions; a question without evidence "
             "scores 0, as the paper counts it)")


def row_name(row: dict[str, Any]) -> str:
    """A result row's name in the per-probe table: ``<unit>:<retriever>@<k>`` for the protocol's grid, the design
    row's own name (``np-pooler@8``) for a design row."""
    return row["retriever"] if row["unit"] == "delivered" else f"{row['unit']}:{row['retriever']}@{row['k']}"


def _stats(payload: dict[str, Any], group: str = "overall") -> dict[str, Any] | None:
    return (payload.get("statistics") or {}).get(group)


def _interval(payload: dict[str, Any], row: str) -> dict[str, Any] | None:
    from benchmarks.probe_tables import interval

    iv = interval(_stats(payload), "recall", row)
    return iv if iv and iv.get("lo") is not None else None


def uncertainty_lines(payload: dict[str, Any], heading: str = "### Differences") -> list[str]:
    """The method sentence under memsim's tables and the Differences section, from ``statistics``."""
    pairs = (payload.get("comparisons") or {}).get("pairs")
    return [method_sentence(_stats(payload), PROBE_SET), "",
            *differences_section(_stats(payload), heading=heading, labels={"recall": "recall (%)"}, scale=100,
                                 digits=1, configured=len(pairs) if pairs else None)]


# ------------------------------------------------------------------------------------------------ rendering
def _pct(v: Any) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}"


def _tok(v: Any) -> str:
    return "n/a" if v is None else f"{v:.0f}"


def _cat_headers(payload: dict[str, Any]) -> list[str]:
    counts = payload["question_counts"]["total"]
    return [f"{c} {CATEGORY_NAMES[c]} (n={counts[str(c)]['questions']})" for c in CATEGORIES]


def _recall_cells(row: dict[str, Any], payload: dict[str, Any] | None = None) -> list[str]:
    """The row's recall per category and overall in %, each with its interval when ``payload`` (a measured row's
    results) holds one."""
    if payload is None:
        return [_pct(row["recall"].get(c)) for c in _COLS]
    return [cell(_stats(payload, c), "recall", row_name(row), row["recall"].get(c), digits=1, scale=100)
            for c in _COLS]


def _tokens_cell(row: dict[str, Any], payload: dict[str, Any]) -> str:
    return cell(_stats(payload), "tokens_cl100k", row_name(row), row["tokens_cl100k"], digits=0)


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
                    [[r["retriever"], r["unit"], r["k"], *_recall_cells(r, payload), _tokens_cell(r, payload)]
                     for r in rows]),
           "", *uncertainty_lines(payload)]
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
                         [[r["retriever"], r["arm"], *_recall_cells(r, payload), _tokens_cell(r, payload),
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
                bars = [(k, y, _interval(payload, f"{unit}:{n}@{k}")) for k, y in pts]
                bars = [(k, y, iv) for k, y, iv in bars if iv]
                if bars:  # the 95% interval of each point (only a JSON with statistics has them)
                    ax.errorbar([b[0] for b in bars], [b[1] for b in bars], fmt="none", capsize=0,
                                ecolor=colors[n], elinewidth=0.8, alpha=0.7,
                                yerr=[[max(0.0, y - iv["lo"]) for _, y, iv in bars],
                                      [max(0.0, iv["hi"] - y) for _, y, iv in bars]])
        ppts = sorted((r["k"], r["recall"]["overall"]) for r in pub["rows"] if r["unit"] == unit)
        if ppts:
            ax.plot(*zip(*ppts, strict=True), linestyle="--", marker="x", color="black",
                    label=f"published {pub['retriever'].split(' ')[0]}")
        ax.set_title(f"{unit} units" + (" (bars: 95% intervals)" if _stats(payload) else ""))
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


