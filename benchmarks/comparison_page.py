"""How a comparison bench's page shows its uncertainty: a headline number with its 95% interval, the sentence that
states the method and the probe set, and the "Differences" section of the comparator pairs.

Every function reads the ``statistics`` block of a results JSON (:func:`benchmarks.probe_tables.statistics`). A
results JSON written before the per-probe table existed has no such block: the cells then show the point estimate
alone and the sections say that the run predates its intervals, so every page still renders from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmarks.common import md_table
from harness.stats.intervals import format_interval

NO_STATS = ("This run's results predate the per-probe table, so its numbers are shown without intervals; a re-run "
            "adds them.")
NO_PAIRS = "No paired comparisons either, for the same reason: a re-run tests the comparator pairs."


def cell(stats: Mapping[str, Any] | None, metric: str, row: str, value: float | None, *, digits: int = 3,
         scale: float = 1.0) -> str:
    """``0.559 [0.521, 0.597]``: the aggregate ``value`` with the interval ``stats`` holds for (``metric``,
    ``row``), each times ``scale``; the value alone without an interval, ``n/a`` without a value."""
    from benchmarks.probe_tables import interval

    if value is None:
        return "n/a"
    iv = interval(stats, metric, row)
    if not iv or iv.get("lo") is None or iv.get("hi") is None:
        return f"{value * scale:.{digits}f}"
    return format_interval(value * scale, iv["lo"] * scale, iv["hi"] * scale, digits)


def method_sentence(stats: Mapping[str, Any] | None, probe_set: str, *, clusters: str = "conversation") -> str:
    """What the intervals are and over which probes (one paragraph), or :data:`NO_STATS`."""
    if not stats:
        return NO_STATS
    m = stats["method"]
    n, k = stats["n_probes"], stats["n_clusters"]
    strat = (f" The probes are resampled within each of the {k} {clusters}s (stratified): the inference is conditional "
             f"on these {clusters}s, not on {clusters}s in general." if stats.get("strata") and k > 1 else
             f" The probes all come from one {clusters}: the inference is conditional on it." if stats.get("strata")
             else "")
    return (f"Intervals: 95%, over {probe_set} ({n} probes). {_intervals_phrase(m)}; bootstrap: "
            f"{m['resampling']}.{strat} Each interval is unadjusted for the number of intervals on the page.")


def _intervals_phrase(method: Mapping[str, Any]) -> str:
    return ("Wilson score intervals for 0/1 outcomes (Clopper-Pearson when every probe scores the same), the BCa "
            "bootstrap (percentile where BCa is undefined) for other means")


def _p(p: float | None) -> str:
    if p is None or p != p:
        return "n/a"
    return f"{p:.4f}" if p >= 0.001 else f"{p:.1e}"


def _signed(v: float | None, scale: float, digits: int) -> str:
    return "n/a" if v is None else f"{v * scale:+.{digits}f}"


def differences_section(stats: Mapping[str, Any] | None, *, heading: str = "## Differences",
                        labels: Mapping[str, str] | None = None, clusters: str = "conversation",
                        scale: float = 1.0, digits: int = 3, configured: int | None = None) -> list[str]:
    """The page's "Differences" section: every comparator pair on every metric of the Holm family, its mean
    difference with the paired bootstrap interval (unadjusted), the randomization test's p-value, the Holm-adjusted
    p-value and verdict, wins/ties/losses, the smallest difference detectable at 80% power and, for a stratified run,
    each cluster's difference with how many agree in sign. ``labels`` names the metrics; ``configured`` is how many
    pairs the configuration fixed (a run without some rows compares fewer)."""
    labels = labels or {}
    out = [heading, ""]
    if not stats:
        return out + [NO_PAIRS, ""]
    pairs = stats.get("pairs") or []
    family = stats.get("family") or []
    if not pairs:
        return out + ["None of the comparator pairs fixed in the bench's configuration has both rows in this run.",
                      ""]
    n_pairs = len({(p["a"], p["b"]) for p in pairs})
    fixed = f" ({configured} configured; the others lack a row in this run)" if configured and configured > n_pairs \
        else ""
    perms = pairs[0]["permutations"]
    out += [f"The comparator pairs are fixed in the bench's configuration before any run (`pairs` in the results "
            f"JSON and the per-probe table's metadata): {n_pairs} pair(s){fixed} x {len(family)} metric(s) ("
            f"{', '.join(labels.get(m, m) for m in family)}) = one Holm family of {len(pairs)} comparisons. Each row "
            "gives the mean difference A - B over the probes both rows scored with its paired bootstrap 95% interval "
            "(the same resamples as the headline intervals; unadjusted for multiplicity), the two-sided paired "
            f"randomization test's p-value ({perms:,} random sign flips, p = (b + 1) / (m + 1)) and its "
            "Holm-adjusted value, the verdict (A > B or A < B when the Holm p < 0.05, else *inconclusive*: not "
            "significant, which is absence of evidence, not evidence that the rows are equal), the probes where A "
            "scores more / the same / less, and the smallest difference the test would detect with 80% power on "
            "these probes at the family's strictest Holm level."
            + (f" *Per {clusters}*: each {clusters}'s mean difference, and how many agree in sign with the overall "
               "one." if stats.get("strata") and stats.get("n_clusters", 0) > 1 else ""), ""]
    head = ["A", "B", "metric", "n", "A - B [95% CI]", "p", "Holm p", "verdict", "wins/ties/losses",
            "detectable (80% power)"]
    strat = bool(stats.get("strata")) and stats.get("n_clusters", 0) > 1
    if strat:
        head += [f"per {clusters}", "agree"]
    table = []
    for p in pairs:
        d = p["diff"]
        diff = ("n/a" if d["estimate"] is None else
                f"{d['estimate'] * scale:+.{digits}f} [{d['lo'] * scale:+.{digits}f}, {d['hi'] * scale:+.{digits}f}]")
        line = [p["a"], p["b"], labels.get(p["metric"], p["metric"]),
                p["n"], diff, _p(p["p"]), _p(p["p_holm"]), p["verdict"], f"{p['wins']}/{p['ties']}/{p['losses']}",
                "n/a" if p["detectable"] is None else f"{p['detectable'] * scale:.{digits}f}"]
        if strat:
            line += ["; ".join(f"{c['cluster']} {_signed(c['diff'], scale, digits)}" for c in p["clusters"]),
                     f"{p['clusters_agree']}/{len(p['clusters'])}"]
        table.append(line)
    return out + [md_table(head, table), ""]
