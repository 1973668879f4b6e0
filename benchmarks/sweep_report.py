"""The page and the figure of a sweep, rendered from its results JSON alone (``payload["aggregate"]``, computed
from the per-probe table by :func:`benchmarks.sweep_stats.apply_table`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.common import md_table
from benchmarks.stats_tables import differences_section, interval_cell, method_sentence
from harness.runs import code_text


def _cell(st: dict[str, Any] | None) -> str:
    if not st:
        return "n/a"
    return interval_cell({"estimate": st.get("mean"), "lo": st.get("lo"), "hi": st.get("hi")})


def render_markdown(payload: dict[str, Any]) -> str:
    cfg = payload["config"]
    agg = payload["aggregate"]
    metrics = agg["metrics"]
    n = len(cfg["seeds"])
    lines = [f"## Sweep `{cfg['name']}` ({cfg['benchmark']}): mean and 95% interval over {n} seeds and their "
             "probes", ""]
    if cfg.get("description"):
        lines += [cfg["description"].strip(), ""]
    lines += [f"Seeds {cfg['seeds']}; {len(payload['cells'])} cells; executor {payload['meta']['executor']}. "
              "A probe is one query (selectors), one question of an arm's rounds (cbr-loop) or one headline "
              "question of the conversation (locomo); every row of a seed is measured on the same probes. In "
              "selectors and cbr-loop every seed draws its own world; in locomo the seed reaches only the seeded "
              f"parts of the arms. Per-probe table: `{agg['probes']}`.", ""]
    for size in agg["sizes"]:
        lines += [f"### {size['size']}", ""]
        rows = [(r["name"], *[_cell(r["stats"].get(m)) for m in metrics]) for r in size["rows"]]
        lines += [md_table(("row", *metrics), rows), ""]
        lines += [method_sentence(size["intervals"], "every probe of every seed at this size (seeds x probes)")
                  + " The clusters of the two-level bootstrap are the seeds. Every metric, 0/1 outcomes "
                  "included, gets it: the probes of one seed share its world, so they are not independent trials "
                  "across seeds.", ""]
        if size.get("differences"):
            lines += differences_section(size["differences"], _namer(size), unit="(seed, probe) pairs",
                                         strata_name="seeds")
        for nc in size.get("not_compared", []):
            lines += [f"Not compared: {nc['a']} vs {nc['b']}: no cell gave {', '.join(nc['missing'])}.", ""]
    m = payload["meta"]
    mach = m["machine"]
    lines += [f"![sweep-{cfg['name']}](sweep-{cfg['name']}.png)", "",
              f"_Run {mach['date_utc']} on {mach['cpu']} ({mach['affinity_cpus']} usable cores), Python "
              f"{mach['python']}, torch threads per cell 1; {m['workers']} worker(s); wall {m['wall_s']:.0f} s, "
              f"sum of cell times {m['cell_seconds']:.0f} s. Reproduce: `memsim bench sweep {m['config_path']}`. "
              f"Code: {code_text(payload.get('run'))}._"]
    return "\n".join(lines)


def _namer(size: dict[str, Any]) -> Any:
    names = {r["row"]: r["name"] for r in size["rows"]}
    return lambda row: names.get(row, row)


def figure(payload: dict[str, Any]) -> Any:
    """One panel per table metric (up to 4): each row's mean with its 95% interval as an error bar, one colour per
    size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = payload["config"]
    agg = payload["aggregate"]
    metrics = agg["metrics"][:4]
    names = list(dict.fromkeys(r["name"] for s in agg["sizes"] for r in s["rows"]))
    sizes = agg["sizes"]
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics) + 2.5, 0.38 * len(names) + 1.8),
                             squeeze=False, sharey=True)
    cmap = plt.get_cmap("tab10")
    y = np.arange(len(names))
    step = 0.8 / max(1, len(sizes))
    for j, met in enumerate(metrics):
        ax = axes[0][j]
        for si, size in enumerate(sizes):
            means, lo, hi, ys = [], [], [], []
            for i, nm in enumerate(names):
                r = next((r for r in size["rows"] if r["name"] == nm), None)
                st = None if r is None else r["stats"].get(met)
                if not st or st.get("mean") is None:
                    continue
                means.append(st["mean"])
                lo.append(max(0.0, st["mean"] - st["lo"]) if st.get("lo") is not None else 0.0)
                hi.append(max(0.0, st["hi"] - st["mean"]) if st.get("hi") is not None else 0.0)
                ys.append(y[i] - 0.4 + step * (si + 0.5))
            ax.errorbar(means, ys, xerr=[lo, hi], fmt="o", color=cmap(si % 10), capsize=3, ms=4,
                        label=size["size"] if len(sizes) > 1 else None)
        ax.set_title(met)
        ax.grid(axis="x", alpha=0.3)
        if j == 0:
            ax.set_yticks(y, names)
            ax.invert_yaxis()
    if len(sizes) > 1:
        axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"sweep {cfg['name']} ({cfg['benchmark']}): mean and 95% interval (two-level bootstrap over "
                 f"{len(cfg['seeds'])} seeds and their probes)", fontsize=10)
    fig.tight_layout()
    return fig
