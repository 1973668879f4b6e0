"""The LoCoMo design run's pages, rendered from its results JSON only: ``locomo.md`` (:func:`markdown`), the docs
page ``docs/locomo.md`` (:func:`docs_page`), the README section (:func:`readme_section`), the figure
(:func:`figure`) and ``locomo-workers.md`` (:func:`workers_markdown`).

Every number and every comparison word is computed from the payload. The headline table shows each number with its
95% interval and the Differences section the comparator pairs (:mod:`benchmarks.comparison_page`), both from the
JSON's ``statistics`` block, which the run computes from its per-probe table; a results JSON written before that
block existed renders with point estimates alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.common import md_table, meta_block
from benchmarks.comparison_page import cell, differences_section, method_sentence
from benchmarks.workload_run import EXAMPLE_CHARS, example_lines, fmt, order_rows
from harness.workloads.arms import SPECS
from harness.workloads.locomo import CATEGORY_NAMES
from harness.workloads.metrics import HEADLINE_CATEGORIES, RANKED_LEVELS, RANKED_METRICS

SKIP_META = ("k", "cached_texts_per_probe", "epochs", "negatives_per_positive", "min_confidence")
DOCS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "locomo.md"
PROBE_SET = "the questions of categories 1-4 (recall-type metrics over those with evidence)"
INTERVAL_METRICS = ("evidence_recall", "all_evidence", "stored_recall", "tokens_cl100k", "answer_present")
"""The headline numbers that get an interval (the headline table's columns)."""
LABELS = {"evidence_recall": "recall", "all_evidence": "all-evidence", "stored_recall": "stored recall",
          "tokens_cl100k": "tokens (cl100k)", "answer_present": "answer tokens present"}


def _stats(payload: dict[str, Any]) -> dict[str, Any] | None:
    return (payload.get("statistics") or {}).get("headline")


def _configured(payload: dict[str, Any]) -> int | None:
    pairs = (payload.get("comparisons") or {}).get("pairs")
    return len(pairs) if pairs else None


_order = order_rows
_f = fmt


def uncertainty_lines(payload: dict[str, Any], heading: str = "## Differences") -> list[str]:
    """The method sentence under the headline table and the Differences section, from ``statistics``."""
    stats = _stats(payload)
    return [method_sentence(stats, PROBE_SET), "",
            *differences_section(stats, heading=heading, labels=LABELS, configured=_configured(payload))]


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
    out += ["## Headline (categories 1-4)", "", headline_table(rows, order, stats=_stats(payload)), "",
            *uncertainty_lines(payload, "## Differences (categories 1-4)"),
            "## Cost and time (categories 1-4)", "", cost_table(rows, order, lm=bool(lm)), ""]
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
    first = payload["conversations"][0]["conversation"] if payload["conversations"] else ""
    out += example_lines(ex, shown, f"## What each row delivers (first scored probe of {first}; head and tail "
                                    f"of the text, {EXAMPLE_CHARS} characters; a longer excerpt is in locomo.json)")
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
    out.append(f"Peak memory {payload['peak_rss_mb']:.0f} MiB{_workers_note(payload)}. "
               f"{meta_block(payload['meta'], payload.get('run'))}")
    lv = payload.get("levels")
    if lv and not payload["config"].get("quick"):
        out += ["", expected_levels_line(payload)]
    return "\n".join(out)


def _workers_note(payload: dict[str, Any]) -> str:
    n = payload["config"].get("workers", 1)
    peaks = payload.get("worker_peak_rss_mb") or []
    if not (n > 1 and peaks):
        return ""
    parts = payload.get("peak_parts_mb")
    at_peak = (f"; at that moment this process {parts['parent']:.0f} MiB and the workers "
               f"{', '.join(f'{x:.0f}' for x in parts['workers'])} MiB" if parts else "")
    pss = (f"; the same processes' proportional set sizes (each shared page counted once) peaked at "
           f"{payload['peak_pss_mb']:.0f} MiB" if payload.get("peak_pss_mb") else "")
    return (f" (this process and its {len(peaks)} worker processes together, sampled every quarter second{at_peak}; "
            f"the workers' own peaks {', '.join(f'{x:.0f}' for x in peaks)} MiB{pss})")


def expected_levels_line(payload: dict[str, Any]) -> str:
    """The md's "Expected levels" line, from the JSON's ``levels``, wall time and worker count."""
    lv = payload["levels"]
    w, m = lv["wall_s"], lv["peak_rss_gb"]
    n = payload["config"].get("workers", 1)
    return (f"Expected levels ({lv.get('arm_set', 'full design run')}, {len(payload['conversations'])} "
            f"conversation(s), {n} worker process{'es' if n != 1 else ''}): wall {w['measured'] / 60:.1f} min "
            f"(at most {w['max'] / 60:.0f}: {'met' if w['met'] else 'missed'}), peak memory {m['measured']:.2f} GB "
            f"(at most {m['max']:.0f}: {'met' if m['met'] else 'missed'}).")


def headline_table(rows: dict[str, Any], order: list[str], *, stats: dict[str, Any] | None = None) -> str:
    """The headline (categories 1-4) table of the given rows: recall, all-evidence, stored recall, cl100k tokens
    and answer tokens present, each with its 95% interval when ``stats`` holds one."""
    keys = {"evidence_recall": "evidence_recall", "all_evidence": "all_evidence_rate",
            "stored_recall": "stored_recall", "tokens_cl100k": "tokens_cl100k_mean", "answer_present": "answer_present"}
    table = []
    for r in order:
        h = rows[r]["headline"]
        table.append([r, rows[r]["arm"]] + [cell(stats, m, r, h.get(k), digits=0 if m == "tokens_cl100k" else 3)
                                            for m, k in keys.items()])
    return md_table(["row", "arm", "recall", "all-evidence", "stored recall", "tokens/probe (cl100k)",
                     "answer tokens present"], table)


def cost_table(rows: dict[str, Any], order: list[str], *, lm: bool = False) -> str:
    """What each row costs (categories 1-4): its text in other token units, turns, ingest and probe times (measured
    on the machine named under the page, not compared), and answer F1 with ``--lm``."""
    head = ["row", "WordPiece", "chars/4", "turns/probe", "ingest ms/turn", "probe ms p50", "probe ms p95",
            "design ms p50", "harness ms p50"]
    if lm:
        head.append("answer F1")
    table = []
    for r in order:
        h = rows[r]["headline"]
        line = [r, _f(h["tokens_mean"], ".0f"), _f(h["chars4_mean"], ".0f"), _f(h["delivered_turns"], ".1f"),
                _f(rows[r]["ingest_ms_per_turn"], ".2f"), _f(h["latency_ms_median"], ".2f"),
                _f(h["latency_ms_p95"], ".2f"), _f(h.get("design_ms_median"), ".2f"),
                _f(h.get("harness_ms_median"), ".2f")]
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
    """Evidence recall vs cl100k tokens per row (log x; labels placed apart; 95% interval bars when the JSON has
    them), and evidence recall per LoCoMo category (a measured zero is a stroke on the axis; a category without
    scored probes has no mark)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.workload_run import recall_figure

    rows = payload["aggregate"]["rows"]
    order = [r for r in _order(rows) if rows[r]["headline"]["evidence_recall"] is not None]
    cmap = plt.get_cmap("tab20")
    arms = list(dict.fromkeys(rows[r]["arm"] for r in order))
    colors = {r: cmap(arms.index(rows[r]["arm"]) % 20) for r in order}
    kinds = {r: SPECS[rows[r]["arm"]].kind if rows[r]["arm"] in SPECS else "design" for r in order}
    points = {r: (max(1.0, rows[r]["headline"].get("tokens_cl100k_mean") or rows[r]["headline"]["tokens_mean"]
                      or 1.0), rows[r]["headline"]["evidence_recall"]) for r in order}
    cats = [c for c in (1, 2, 3, 4, 5) if any(str(c) in rows[r]["by_category"] for r in order)]
    groups = [(f"{c} {CATEGORY_NAMES.get(c, '')}",
               [rows[r]["by_category"].get(str(c), {}).get("evidence_recall") for r in order]) for c in cats]
    return recall_figure(order, points, kinds, colors, groups, stats=_stats(payload), x_metric="tokens_cl100k",
                         y_metric="evidence_recall", xlabel="delivered tokens per probe (cl100k_base, log)",
                         ylabel="evidence recall of delivered text (categories 1-4)",
                         title="recall vs tokens (squares: designs, circles: baselines)",
                         bars_title="evidence recall per LoCoMo category", bars_ylabel="evidence recall")


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
           "`benchmarks/results/locomo.png` and the delivered texts are in `benchmarks/results/locomo.md`."
           + (" Every question's numbers are in `benchmarks/results/locomo.probes.parquet`, the per-probe table every "
              "number below is computed from ([Reading comparisons](comparisons.md) loads it)."
              if payload.get("probes") else ""), "",
           DOCS_BEGIN, "",
           readme_section(payload, figure_path=None, heading="## What the run shows").rstrip(), "",
           "## Every row (categories 1-4)", "", headline_table(rows, order, stats=_stats(payload)), "",
           *uncertainty_lines(payload), "## Cost and time (categories 1-4)", "",
           cost_table(rows, order, lm=bool(payload["config"].get("lm"))), ""]
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

