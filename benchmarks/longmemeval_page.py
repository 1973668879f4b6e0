"""The LongMemEval design run's pages, rendered from its results JSON only: ``longmemeval.md``
(:func:`render_markdown`), the docs page (:func:`docs_page`) and the figure (:func:`figure`).

The "Every row" table is the headline: each number with its 95% interval (questions resampled as one set: each
question has its own haystack), and the Differences section the comparator pairs fixed in the bench's
configuration (:mod:`benchmarks.comparison_page`), both from the JSON's ``statistics`` block; a results JSON
written before that block existed renders with point estimates alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.common import md_table, meta_block
from benchmarks.comparison_page import cell, differences_section, method_sentence
from benchmarks.workload_run import EXAMPLE_CHARS, example_lines, fmt, order_rows
from harness.workloads.arms import SPECS

PROBE_SET = "every question of the run (recall-type metrics over those with evidence)"
HEADLINE = (("evidence_recall", "evidence_recall"), ("delivered_turn_user", "delivered_turn_user"),
            ("delivered_session", "delivered_session"), ("delivered_session_user", "delivered_session_user"),
            ("stored_recall", "stored_recall"), ("stored_turn_user", "stored_turn_user"),
            ("all_evidence", "all_evidence_rate"), ("tokens_cl100k", "tokens_cl100k_mean"))
"""(metric column, summary key) of each number of the headline table, in its column order."""
INTERVAL_METRICS = tuple(m for m, _ in HEADLINE)
LABELS = {"evidence_recall": "recall", "all_evidence": "all evidence", "delivered_turn_user": "user-only",
          "official_recall": "user-only recall"}


def _stats(payload: dict[str, Any]) -> dict[str, Any] | None:
    return (payload.get("statistics") or {}).get("overall")


def uncertainty_lines(payload: dict[str, Any]) -> list[str]:
    """The method sentence under the headline table and the Differences section, from ``statistics``."""
    stats = _stats(payload)
    pairs = (payload.get("comparisons") or {}).get("pairs")
    return [method_sentence(stats, PROBE_SET, clusters="question"), "",
            *differences_section(stats, labels=LABELS, clusters="question",
                                 configured=len(pairs) if pairs else None)]


def absent_arms(agg: dict[str, Any]) -> dict[str, str]:
    """Every arm of ``arm_status`` that produced no row at all, with one reason (the first its status gives);
    read from the JSON, so a results file written before ``absent_arms`` existed renders the same."""
    with_rows = {r["arm"] for r in agg["rows"].values()}
    return {a: (st["reasons"][0]["message"] if st["reasons"] else "no row")
            for a, st in agg["arm_status"].items() if a not in with_rows}



_order = order_rows
_f = fmt


def rows_table(rows: dict[str, Any], order: list[str], group: Callable[[dict[str, Any]], dict[str, Any] | None],
               absent: dict[str, str] | None = None, stats: dict[str, Any] | None = None) -> str:
    """One line per row of ``order`` (its ``group`` of records), then one per arm of ``absent`` (no row at all):
    ``absent`` and the reason in place of its numbers. With ``stats`` (the intervals of this group), each number
    shows its 95% interval."""
    head = ["row", "arm", "questions", "recall (turns, both roles)", "user-only (official view)",
            "sessions", "sessions user-only", "stored", "stored user-only", "all evidence", "tokens (cl100k)"]
    table = []
    for r in order:
        g = group(rows[r])
        if not g:
            continue
        table.append([r, rows[r]["arm"], g["n_probes"]]
                     + [cell(stats, m, r, g.get(k), digits=0 if m == "tokens_cl100k" else 3) for m, k in HEADLINE])
    for arm, reason in (absent or {}).items():
        table.append([arm, arm, 0, f"absent: {reason}"] + ["-"] * (len(head) - 4))
    return md_table(head, table)


def type_table(rows: dict[str, Any], order: list[str], key: str = "evidence_recall") -> str:
    types = sorted({t for r in rows.values() for t in r["by_type"]})
    table = [[r] + [rows[r]["by_type"].get(t, {}).get(key) for t in types] for r in order]
    n = {t: max(rows[r]["by_type"].get(t, {}).get("n_scored", 0) for r in order) for t in types}
    return md_table(["row"] + [f"{t} (n={n[t]})" for t in types], table)


def expansion_table(exp: dict[str, Any]) -> str:
    head = ["group", "recall with", "without", "delta", "user-only delta", "session delta", "tokens with",
            "without", "delta"]
    table = []
    for g, m in exp["groups"].items():
        r, u, s, t = (m[k] for k in ("evidence_recall", "delivered_turn_user", "delivered_session",
                                     "tokens_cl100k_mean"))
        table.append([g, r["with"], r["without"], r["delta"], u["delta"], s["delta"], _f(t["with"], ".0f"),
                      _f(t["without"], ".0f"), _f(t["delta"], "+.0f")])
    return md_table(head, table)


def _status_lines(status: dict[str, Any]) -> list[list[Any]]:
    return [[arm, ", ".join(f"{k} {v}" for k, v in st["counts"].items()), r["message"], r["questions"]]
            for arm, st in status.items() for r in st["reasons"]]


def render_markdown(payload: dict[str, Any]) -> str:
    """``longmemeval.md`` from the results JSON (every number read from it)."""
    agg = payload["aggregate"]
    rows = agg["rows"]
    order = _order(rows)
    cfg = payload["config"]
    out = [f"# LongMemEval: the designs on each question's own haystack ({payload['n_questions']} question(s))", "",
           payload["data"]["label"] + (" (quick run)" if cfg["quick"] else ""), "",
           "Every arm ingests one question's haystack in file order into a fresh store (duplicates kept, each "
           "session's date as a header line on its first turn) and is asked the question with its date. "
           "*Recall*: share of the question's evidence turns (`has_answer` true, user and assistant turns) whose "
           "ids the delivered text carries; *user-only*: the same over user evidence turns (the official "
           "retrieval corpus has user turns only); *sessions*: share of evidence sessions the text carries a turn "
           "of; *stored*: the same against what the arm keeps. Questions without evidence turns are left out of "
           "the recall averages. Tokens: tiktoken cl100k_base of the delivered text.", "",
           "## Every row", "", rows_table(rows, order, lambda r: r["overall"], absent_arms(agg), _stats(payload)),
           "", *uncertainty_lines(payload),
           "## Delivered recall per question type", "", type_table(rows, order), "",
           "## Abstention questions and the rest", ""]
    for k in ("answerable", "abstention"):
        if any(k in rows[r]["by_abstention"] for r in order):
            out += [f"### {k}", "", rows_table(rows, order, lambda r, k=k: r["by_abstention"].get(k)), ""]
    exp = agg.get("expansion")
    if exp:
        out += [f"## Tortoise's source-session expansion ({exp['with']} against {exp['without']})", "",
                expansion_table(exp), ""]
    out += ["![recall vs tokens](longmemeval.png)", ""]
    pm = payload["pm"]
    out += ["## AgentFly PM's training split", "", pm_line(pm), ""]
    qa = payload.get("qa")
    if qa:
        out += [f"## QA (reader `{cfg['lm']}`, {cfg['reader_prompt']} prompt; judge `{qa['judge']}`)", "",
                qa_table(qa), ""]
    bad = _status_lines(agg["arm_status"])
    if bad:
        out += ["## Rows not measured", "", md_table(["arm", "questions per status", "reason", "questions"], bad), ""]
    out += _example_lines(payload, order)
    c = agg.get("cost") or {}
    if c.get("per_arm"):
        out += ["## Cost per question", "",
                f"Wall {_f(c['question_wall_s_mean'], '.2f')} s per question (every arm, one process), "
                f"{_f(c['turns_per_question_mean'], '.0f')} turns per question.", "",
                md_table(["arm", "questions", "ingest ms per question", "ingest ms per turn"],
                         [[a, v["questions"], _f(v["ingest_ms_mean"], ".0f"), _f(v["ingest_ms_per_turn"], ".2f")]
                          for a, v in c["per_arm"].items()]), ""]
    cache = payload.get("encoder_cache") or {}
    if cache:
        out.append("Encoder cache (per text, per process): " + "; ".join(
            f"{n} {c['hits']} hits, {c['misses']} misses" for n, c in cache.items()) + ".")
    out += ["", f"Peak memory {payload['peak_rss_mb']:.0f} MiB, {cfg['workers']} worker(s), executor "
            f"{cfg['executor']}. {meta_block(payload['meta'], payload.get('run'))}"]
    return "\n".join(out) + "\n"


def pm_line(pm: dict[str, Any]) -> str:
    """What the page says of PM's one training: not selected, not trained (the reason; no row), or trained."""
    if not pm.get("selected"):
        return "PM was not selected."
    if pm.get("unavailable"):
        return (f"Not trained: {pm['unavailable']}. PM's rows are absent from every question "
                f"({pm['n_training']} question(s) of this file are in the split `{pm['split']}`).")
    return (f"Trained once on {pm['n_training']} question(s) of the split `{pm['split']}`"
            f"{' (quick: the first ' + str(pm['cap']) + ')' if pm.get('cap') else ''}; its rows are absent for "
            f"{pm['absent_questions']} evaluated question(s) of that split, so it is never scored on a question "
            f"it was trained on.")


def qa_table(qa: dict[str, Any]) -> str:
    rows = qa["rows"]
    types = sorted({t for a in rows.values() for t in (a.get("per_type") or {})})
    table = [[r, a["label"], a["n"], a["n_errors"], a["overall"], a["task_averaged"], a["abstention"]["accuracy"]]
             + [a["per_type"].get(t, {}).get("accuracy") for t in types] for r, a in rows.items()]
    return md_table(["row", "label", "judged", "errors", "overall", "task-averaged", "abstention"] + types, table)


def _example_lines(payload: dict[str, Any], order: list[str]) -> list[str]:
    ex = payload.get("examples") or {}
    return example_lines(ex, [r for r in order if r in ex],
                         f"## What each row delivers (question {payload.get('examples_question')}; head and tail of "
                         f"the text, {EXAMPLE_CHARS} characters)", with_probe=False)


def docs_page(payload: dict[str, Any]) -> str:
    """The docs results page, rendered from ``longmemeval.json``: the data label, every row, per type, the
    expansion pair and the PM split."""
    rows = payload["aggregate"]["rows"]
    order = _order(rows)
    out = ["# LongMemEval through the designs", "", payload["data"]["label"], "",
           "Delivered texts are in the run folder's `longmemeval/delivered.jsonl`. Recall counts evidence in user "
           "and assistant turns; the user-only column is the official corpus's view.", "",
           "## Every row", "", rows_table(rows, order, lambda r: r["overall"], absent_arms(payload["aggregate"]),
                                          _stats(payload)),
           "", *uncertainty_lines(payload), "## Delivered recall per question type", "", type_table(rows, order), ""]
    exp = payload["aggregate"].get("expansion")
    if exp:
        out += ["## Tortoise's source-session expansion", "", expansion_table(exp), ""]
    from harness.runs import code_text

    out += ["## AgentFly PM's training split", "", pm_line(payload["pm"]), "",
            f"Code: {code_text(payload.get('run'))}.", ""]
    return "\n".join(out)


def figure(payload: dict[str, Any]) -> Any:
    """Delivered recall vs cl100k tokens per row (log x; labels placed apart; 95% interval bars when the JSON has
    them), and delivered recall per question type (a measured zero is a stroke on the axis; a row without a
    question of a type has no mark)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.workload_run import recall_figure

    rows = payload["aggregate"]["rows"]
    order = [r for r in _order(rows) if rows[r]["overall"]["evidence_recall"] is not None]
    cmap = plt.get_cmap("tab20")
    colors = {r: cmap(j % 20) for j, r in enumerate(order)}
    kinds = {r: SPECS[rows[r]["arm"]].kind if rows[r]["arm"] in SPECS else "design" for r in order}
    points = {r: (max(1.0, rows[r]["overall"]["tokens_cl100k_mean"] or 1.0), rows[r]["overall"]["evidence_recall"])
              for r in order}
    types = sorted({t for r in order for t in rows[r]["by_type"]})
    groups = [(t, [rows[r]["by_type"].get(t, {}).get("evidence_recall") for r in order]) for t in types]
    return recall_figure(order, points, kinds, colors, groups, stats=_stats(payload), x_metric="tokens_cl100k",
                         y_metric="evidence_recall", xlabel="delivered tokens per question (cl100k_base, log)",
                         ylabel="delivered evidence recall (turns, both roles)",
                         title=f"recall vs tokens (squares: designs, circles: baselines)\n{payload['data']['label']}",
                         bars_title="per question type", bars_ylabel="delivered evidence recall", legend_size=7)
