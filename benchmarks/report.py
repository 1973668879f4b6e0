"""Assemble ``benchmarks/RESULTS.md`` (one file with the selectors, CBR-loop and cost results) from
``benchmarks/results/*.{json,md}``.

``python -m benchmarks.report`` reads the committed full-run outputs, writes a summary of the headline numbers
(pulled from the JSON files, so the prose cannot drift from the tables) followed by each benchmark's Markdown,
with image links rewritten relative to ``benchmarks/`` (where RESULTS.md lives). The docs site shows the same
results page by page (:mod:`benchmarks.docs_pages`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS_DIR

NAMES = ("selectors", "cbr-loop", "cost")


def _load(name: str) -> tuple[dict[str, Any] | None, str | None]:
    j, m = RESULTS_DIR / f"{name}.json", RESULTS_DIR / f"{name}.md"
    if not j.exists() or not m.exists():
        return None, None
    return json.loads(j.read_text(encoding="utf-8")), m.read_text(encoding="utf-8")


def _demote(md: str) -> str:
    """One heading level down (the file's top section is ``## Results``) and image paths from ``benchmarks/``."""
    md = re.sub(r"^(#+) ", lambda m: "#" + m.group(1) + " ", md, flags=re.M)
    return re.sub(r"!\[([^\]]*)\]\(([^)/]+\.png)\)", r"![\1](results/\2)", md)


def headline(sel: dict[str, Any] | None, loop: dict[str, Any] | None, cost: dict[str, Any] | None) -> list[str]:
    out = []
    if sel:
        rows = {r["selector"]: r for r in sel["rows"]}

        def g(name: str, key: str) -> str:
            r = rows.get(name)
            return "n/a" if r is None or r.get(key) is None else f"{r[key]:.3f}"

        out.append(f"- **Selectors** ({sel['meta']['world']['n_cases']} synthetic cases, "
                   f"{sel['meta']['world']['n_queries']} queries): nDCG@10 NP faithful (pooler) "
                   f"{g('NP faithful (pooler)', 'nDCG@10')}, NP mean-pooling {g('NP mean-pooling', 'nDCG@10')}, "
                   f"BM25 {g('BM25 (bm25s)', 'nDCG@10')}, hybrid RRF {g('hybrid RRF (BM25 + mean)', 'nDCG@10')}, "
                   f"PM classifier trained on burn-in pairs {g('PM classifier (burn-in pairs)', 'nDCG@10')} "
                   f"(random {g('random', 'nDCG@10')}). Negative share of the delivered top 8: NP "
                   f"{g('NP faithful (pooler)', 'neg_share@8')}, PM burn-in {g('PM classifier (burn-in pairs)', 'neg_share@8')}.")
        c = sel.get("corpus") or {}
        if c and "skipped" not in c:
            t = c["truth_label"]
            runs = {(r["model"].split(",")[1].strip() if "," in r["model"] else r["model"], r["split"]): r
                    for r in (c.get("trainer") or {}).get("runs", [])}
            frozen = [r for k, r in runs.items() if "freeze" in k[0]]
            txt = ", ".join(f"{r['split']} {r['val_auc']:.3f}" for r in frozen)
            out.append(f"- **Real AgentFly corpus**: `truth_label` is constant within all {t['queries']} queries "
                       f"({t['queries_with_mixed_truth_label']} mixed). Trainer validation AUC with "
                       f"`--freeze_backbone`: {txt}; the query-memorisation baseline scores "
                       f"{c['memorisation_baseline']['row_split']['auc']:.3f} on the row split and "
                       f"{c['memorisation_baseline']['grouped_split']['auc']:.3f} on the grouped split. NP's top 8 "
                       f"for {c['np_top8']['questions']} real questions is {c['np_top8']['negative_share_top8']:.1%} "
                       "negative cases.")
    if loop:
        arms = {a["arm"]: a for a in loop["arms"] if a["k"] == 8}

        def mean(a: str) -> str:
            r = arms.get(a)
            return "n/a" if r is None else f"{sum(x['accuracy'] for x in r['rounds']) / len(r['rounds']):.3f}"

        out.append(f"- **CBR loop** (scripted planner, {loop['meta']['rounds']} rounds x {loop['meta']['per_round']} "
                   f"questions): mean accuracy no memory {mean('none')}, NP (pooler) {mean('np')}, NP (mean "
                   f"pooling) {mean('np-mean')}, PM {mean('pm')}, oracle {mean('oracle')}.")
    if cost:
        for lv in cost.get("levels", []):
            why = f": {lv['why'].rstrip('.')}" if not lv["met"] and lv.get("why") else ""
            out.append(f"- **Expected level** \"{lv['level']}\": measured {lv['measured']} "
                       f"({'met' if lv['met'] else 'not met'}{why}).")
    return out


def build() -> str:
    loaded = {n: _load(n) for n in NAMES}
    lines = ["## Results", "",
             "Measured side by side in one run per benchmark on this machine (`memsim bench selectors`, "
             "`memsim bench cbr-loop`, `memsim bench cost`; machine, date, versions and seeds under each table). "
             "Raw numbers: `benchmarks/results/*.json`.", ""]
    lines += headline(loaded["selectors"][0], loaded["cbr-loop"][0], loaded["cost"][0])
    for n in NAMES:
        md = loaded[n][1]
        if md:
            lines += ["", _demote(md).rstrip()]
    return "\n".join(lines) + "\n"


OUT = Path(__file__).resolve().parent / "RESULTS.md"


def main() -> None:
    OUT.write_text(build(), encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
