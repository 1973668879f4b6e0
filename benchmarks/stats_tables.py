"""Markdown pieces every comparison page renders from a :func:`harness.comparisons.comparison_report`: headline
cells with their 95% interval, the sentence stating the method and the probe set, the "Differences" table, and
the error bars of a figure.

Everything here reads the report's JSON (as stored in a results file), so a page re-renders from its JSON alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.stats import format_interval

METHOD_WORDS = {
    "bca": "BCa bootstrap", "percentile": "percentile bootstrap (BCa undefined)",
    "clopper-pearson": "Clopper-Pearson (every probe scored the same)", "wilson": "Wilson score",
    "constant": "one point (every probe scored the same value)", "expanded-percentile": "expanded percentile",
}


def interval_cell(iv: Mapping[str, Any] | None, digits: int = 3) -> str:
    """``0.559 [0.521, 0.597]`` from an interval dict (``n/a`` without one)."""
    if not iv:
        return "n/a"
    return format_interval(iv.get("estimate"), iv.get("lo"), iv.get("hi"), digits)


def error_bar(iv: Mapping[str, Any] | None) -> tuple[float, float]:
    """(below, above) the estimate, for ``yerr``/``xerr`` of a matplotlib plot (0, 0 without an interval)."""
    if not iv or iv.get("estimate") is None or iv.get("lo") is None or iv.get("hi") is None:
        return 0.0, 0.0
    return max(0.0, iv["estimate"] - iv["lo"]), max(0.0, iv["hi"] - iv["estimate"])


def methods_used(report: Mapping[str, Any]) -> list[str]:
    """The interval methods the report's rows actually got, in a fixed order."""
    seen = {iv.get("method") for rows in report.get("rows", {}).values() for iv in rows.values() if iv}
    return [m for m in METHOD_WORDS if m in seen]


def method_sentence(report: Mapping[str, Any], probe_set: str) -> str:
    """What each interval of the headline table is and over which probes (one paragraph)."""
    used = methods_used(report)
    meth = report["method"]
    words = "; ".join(METHOD_WORDS[m] for m in used) or "none"
    return (f"Each number is the mean over the probe set with its 95% interval, `mean [low, high]`. Probe set: "
            f"{probe_set} ({report['n_probes']:,} probes). Intervals: {meth['resampling']}; methods used in this "
            f"table: {words}. Intervals are unadjusted for the number of numbers on the page.")


def _p(p: float | None) -> str:
    if p is None:
        return "n/a"
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def _diff(pair: Mapping[str, Any]) -> str:
    """The difference and its interval; ``+0.000 (all tied)`` when every probe scored the same on both rows (no
    bootstrap interval says more than that)."""
    d = pair["diff"]
    if d.get("estimate") is None:
        return "n/a"
    if pair["n"] and pair["ties"] == pair["n"]:
        return "+0.000 (all tied)"
    return f"{d['estimate']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"


def verdict(pair: Mapping[str, Any], label: Callable[[str], str], alpha: float) -> str:
    """``A > B`` / ``A < B`` (display names) when the Holm-adjusted p < alpha, else ``inconclusive``."""
    est = pair["diff"].get("estimate")
    if pair["p_holm"] < alpha and est:
        return f"{label(pair['a'])} {'>' if est > 0 else '<'} {label(pair['b'])}"
    return "inconclusive"


def differences_section(report: Mapping[str, Any], label: Callable[[str], str] = str, *, unit: str = "probes",
                        strata_name: str | None = None, heading: str = "### Differences") -> list[str]:
    """The "Differences" section: the method in words, then one table row per (pair, metric) of the report.

    ``strata_name`` (e.g. ``seeds``) adds the column of strata whose own mean difference has the overall sign."""
    pairs = report.get("pairs") or []
    if not pairs:
        return []
    meth = report["method"]
    alpha = meth["alpha"]
    fam = pairs[0]["family"]
    n_pairs = len({(p["a"], p["b"]) for p in pairs})
    metrics = list(dict.fromkeys(p["metric"] for p in pairs))
    lines = [heading, "",
             f"Comparator pairs fixed in the benchmark's configuration before the run, each on the {unit} both rows "
             f"scored ({report['n_probes']:,} in the probe set). Difference = A - B with its paired bootstrap 95% "
             f"interval ({meth['resampling']}; expanded percentile), **unadjusted** for multiplicity. p: the "
             f"two-sided paired randomization test ({pairs[0]['permutations']:,} random sign flips of the per-probe "
             f"differences, p = (b + 1) / (m + 1)); Holm p: Holm's correction over the family of {fam} tests "
             f"({n_pairs} pairs x {len(metrics)} metrics: {', '.join(metrics)}). A verdict names the larger row "
             f"only when the Holm-adjusted p < {alpha}; otherwise it is `inconclusive` (absence of evidence, not "
             f"evidence of equal rows). Detectable: the smallest true difference the test finds with 80% power on "
             f"these {unit} at the family's strictest level.", ""]
    head = ["A", "B", "metric", "n", "A - B [95% CI]", "p", "Holm p", "wins/ties/losses"]
    if strata_name:
        head.append(f"{strata_name} agreeing")
    head += ["detectable", "verdict"]
    lines += ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for p in pairs:
        cells = [label(p["a"]), label(p["b"]), p["metric"], str(p["n"]), _diff(p), _p(p["p"]),
                 _p(p["p_holm"]), f"{p['wins']}/{p['ties']}/{p['losses']}"]
        if strata_name:
            cells.append(f"{p['clusters_agree']}/{len(p['clusters'])}" if p.get("clusters") else "n/a")
        cells += ["n/a" if p["detectable"] is None else f"{p['detectable']:.3f}", verdict(p, label, alpha)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return [*lines, ""]


def present_pairs(pairs: Sequence[tuple[str, str]], rows: Sequence[str]) -> tuple[list[tuple[str, str]],
                                                                                  list[tuple[str, str]]]:
    """The fixed pairs whose rows both ran, and those that could not be compared (a row missing)."""
    have = set(rows)
    ok = [(a, b) for a, b in pairs if a in have and b in have]
    return ok, [p for p in pairs if p not in ok]


def run_stats(run: Any, rows: Sequence[str], metrics: Sequence[str], pairs: Sequence[tuple[str, str]],
              pair_metrics: Sequence[str], where: Mapping[str, Any] | None = None, *, probe_set: str = "all"
              ) -> dict[str, Any]:
    """Everything a page shows from one per-probe table (:class:`harness.probes.ProbeRun`): ``aggregate`` (the
    means, :func:`harness.probes.aggregate`), ``intervals`` (every row on every metric) and ``differences`` (the
    fixed pairs on ``pair_metrics``; None without pairs), over the probe set ``where``."""
    from harness.comparisons import comparison_report
    from harness.probes import aggregate

    entries = [(r, run, r) for r in rows]
    out: dict[str, Any] = {"aggregate": aggregate(run.table, where, metrics),
                           "intervals": comparison_report(entries, [], metrics, where, probe_set=probe_set),
                           "differences": None}
    if pairs:
        out["differences"] = comparison_report(entries, pairs, pair_metrics, where, probe_set=probe_set)
    return out
