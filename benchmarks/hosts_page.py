"""The page of ``memsim bench hosts`` (:mod:`benchmarks.hosts`): :func:`render` builds the whole Markdown from the
results JSON (every number and verdict read or computed from it), :func:`figure` the latency and token-share plot.
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import md_table, meta_block
from benchmarks.hosts_cells import CELLS, FULL_RUNS, POSITIONS, QUICK_RUNS


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 1000:.0f}"


def _fmt_value(lv: dict[str, Any]) -> str:
    v = lv["value"]
    if v is None:
        return "not measured"
    return f"{v * 1000:.0f} ms" if lv["unit"] == "s" else f"{v} {lv['unit']}"


def _fmt_limit(lv: dict[str, Any]) -> str:
    return f"<= {lv['limit'] * 1000:.0f} ms" if lv["unit"] == "s" else f"{lv['limit']} {lv['unit']}"


def _shift(iv: dict[str, Any] | None) -> str:
    """An overhead's Hodges-Lehmann shift with its 95% interval, in ms: ``178 [120, 260]``."""
    if not iv or iv.get("estimate") is None:
        return "n/a"
    if iv.get("lo") is None or iv.get("hi") is None:
        return f"{_ms(iv['estimate'])} [no bounds at n = {iv['n']}]"
    return f"{_ms(iv['estimate'])} [{_ms(iv['lo'])}, {_ms(iv['hi'])}]"


def _level_interval(lv: dict[str, Any]) -> str:
    if lv.get("rule") == "upper bound":
        return _shift(lv.get("interval"))
    if lv.get("rule") == "every run":
        return "every run (the maximum)"
    return "count"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def run_time(p: dict[str, Any]) -> str:
    """How long this run took, by phase, and how long the full run takes: this run's own time when it is one
    (not quick, :data:`FULL_RUNS` runs per cell), else this run's mean time per run of the four cells times
    :data:`FULL_RUNS` plus its preparation and scenario time (a quick run's sessions have one prompt, not two)."""
    o = p["options"]
    lat = p["latency"]
    text = (f"This run took {_duration(p['seconds'])} ({o['runs']} runs per latency cell, "
            f"{len(o['scenarios'])} scenario(s), {len(o['hosts'])} host(s)).")
    if "scenario_seconds" not in p or not all("run_seconds" in lc and lc["run_seconds"] for lc in lat.values()):
        return text + (f" It did not record its phase times, so the time of the full run ({FULL_RUNS} runs per "
                       "cell) is not computed here.")
    per_run = {h: sum(lc["run_seconds"]) / len(lc["run_seconds"]) for h, lc in lat.items()}
    rest = {h: lc["seconds"] - sum(lc["run_seconds"]) for h, lc in lat.items()}
    text += (f" The scenarios took {_duration(p['scenario_seconds'])}; the latency cells " +
             ", ".join(f"{_duration(lc['seconds'])} on {h} ({per_run[h]:.0f} s per run of the four cells, "
                       f"{rest[h]:.0f} s preparing)" for h, lc in lat.items()) + ".")
    if not p["quick"] and o["runs"] == FULL_RUNS:
        return text + f" This is a full run ({FULL_RUNS} runs per cell): the full run takes {_duration(p['seconds'])}."
    full = p["scenario_seconds"] + sum(rest[h] + FULL_RUNS * per_run[h] for h in lat)
    return text + (f" At the full run's {FULL_RUNS} runs per cell these hosts and scenarios take about "
                   f"{_duration(full)}" + (" and more: a quick run's sessions have one prompt, a full run's two"
                                           if p["quick"] else "") + ".")


def _where(row: dict[str, Any]) -> str:
    at = "top-level system" if row["message_index"] is None else f"messages[{row['message_index']}]"
    how = "byte for byte" if row["exact"] and not row["trimmed"] else (
        "exact after trimming" if row["exact"] else str(row["encoding"]))
    if not row["whole"]:
        how += ", some lines only"
    frame = f"after `{row['prefix'].strip()}`" if row["prefix"].strip() else "no prefix"
    return f"{row['kind']} from {row['event']}: {at} ({row['role']}, block {row['block_index']}), {how}, {frame}"


def fault_budgets(p: dict[str, Any]) -> str:
    """Each fault scenario's ``MEMSIM_HOOK_TIMEOUT`` (those with a row in ``fault_delays``), from its sessions'
    recorded budgets (results written before they were recorded: the run's one budget)."""
    default = p["options"]["hook_timeout_s"]
    faults = {r["scenario"] for r in p["fault_delays"]}
    seen: dict[str, set[float]] = {}
    for sc in p["scenarios"]:
        if sc["scenario"] in faults:
            seen.setdefault(sc["scenario"], set()).update(s.get("hook_timeout_s", default) for s in sc["sessions"])
    if not seen:
        return f"{default:g} s"
    return ", ".join(f"{n} {' / '.join(f'{v:g}' for v in sorted(vs))} s" for n, vs in sorted(seen.items()))


def render(p: dict[str, Any]) -> str:
    """The whole Markdown page, from the results JSON only (with its intervals and levels: :func:`benchmarks.hosts.render_markdown` completes a JSON written before them)."""
    o = p["options"]
    hosts = o["hosts"]
    parts = ["# Real agent hosts: memsim's hooks observed at the wire (`memsim bench hosts`)",
             meta_block({"machine": p["machine"], "seeds": {"bench": p["seed"]}, "quick": p["quick"],
                         "wall_s": p["seconds"]}, p.get("run")),
             "Hosts: " + ", ".join(f"{h} {p['host_versions'][h]}" for h in hosts) +
             (". Not installed, skipped: " + "; ".join(p["skipped_hosts"].values()) if p["skipped_hosts"] else "") +
             ". Isolation: " + ", ".join(sorted({f"{sc['host']} {sc['isolation']}" for sc in p["scenarios"]})) +
             ". Every model request went to a loopback server started by the run."]
    rows = [[lv["level"], lv["host"], _fmt_value(lv), _level_interval(lv), _fmt_limit(lv),
             "pass" if lv["pass"] else "FAIL", lv.get("note", "")] for lv in p["levels"]]
    parts += ["## Levels",
              "A latency level passes only when the upper bound of its 95% interval is within it (the point "
              "estimate alone would pass on luck); the session-end level holds for every run (its maximum); the "
              "fault levels are counts. " + run_time(p),
              md_table(["level", "host", "measured", "95% interval (ms)", "level", "verdict", "note"], rows)]
    if p.get("derived_at_render"):
        parts.append("This run's JSON predates the overhead intervals: they and the levels above were computed "
                     "from the sessions it recorded when this page was rendered.")
    parts += ["## Latency: prompt submission to the model request",
              f"{o['runs']} runs per cell, {o['prompts_per_latency_session']} prompt(s) per session, the cells "
              "interleaved run by run. `first`: from the host process start to the first prompt's model request; "
              "`later`: from a later prompt's submission to its request. Every hooked cell runs with "
              f"`MEMSIM_HOOK_TIMEOUT` = {o['hook_timeout_s']:g} s, the documented prompt-hook budget ("
              + ("set in each hooked cell's own environment" if o.get("hook_timeout_in_cell_env") else
                 "the default its hooks read: a host passes none of the caller's variables to its hooks")
              + "): in the hung cell each memsim hook gives up after it. Overhead p50: the "
              "cell's p50 minus the no-hooks p50 of the same host and prompt position (ms). The cells are separate "
              "sessions (unpaired samples), so each overhead's 95% interval is that of the Hodges-Lehmann shift "
              "(the median of all differences between a cell's latency and a no-hooks latency) from the exact "
              "Mann-Whitney distribution: order statistics of those differences, distribution-free and valid at "
              f"any number of runs (bounds from {QUICK_RUNS} runs per cell on) for latencies that differ by a "
              "shift."]
    lat_rows = []
    for h in hosts:
        lc = p["latency"].get(h)
        if lc is None:
            continue
        for c in CELLS:
            for pos in POSITIONS:
                st = lc["cells"][c][pos]
                if st["n"] == 0 and st["missing"] == 0:
                    continue
                lat_rows.append([h, c, pos, st["n"], _ms(st["p50"]), _ms(st["p95"]), _ms(st.get("overhead_p50")),
                                 "-" if c == "none" else _shift(st.get("overhead_interval")), st["missing"]])
    parts.append(md_table(["host", "cell", "prompt", "n", "p50", "p95", "overhead p50",
                           "overhead shift [95% interval]", "no request"], lat_rows))
    if p.get("probes"):
        pr = p["probes"]
        parts.append(f"Every session of these cells is a row of `{pr['file']}` ({pr['rows']} rows), the per-probe "
                     "run format of the comparison benches: `cluster` the host, `probe` the run index, `row` the "
                     "cell, one latency column per prompt position (`latency_first_s`, `latency_later_s`). Tools "
                     "that pair rows by probe pair the cells of one run, which ran back to back; the intervals here "
                     "treat the cells as unpaired.")
    hook_rows = []
    for h in hosts:
        lc = p["latency"].get(h)
        for c in ("cold", "served", "hung"):
            for ev, st in (lc["cells"][c]["hook_wall_s"].items() if lc else []):
                hook_rows.append([h, c, ev, st["n"], _ms(st["p50"]), _ms(st["p95"])])
    parts += ["Where the time goes: each hook's wall time (ms, from the `hooktee.sh` records: the hook's start to "
              "its exit). SessionStart and UserPromptSubmit run before a prompt's request; SessionEnd after the "
              "session.", md_table(["host", "cell", "hook", "n", "p50", "p95"], hook_rows)]
    end_rows = []
    for h in hosts:
        lc = p["latency"].get(h)
        for c, what in (("served", "through the service"), ("cold", "detached filer, no service")):
            st = lc["cells"][c]["session_end_to_filed_s"] if lc else None
            if st:
                end_rows.append([h, what, st["n"], _ms(st["p50"]), _ms(st["p95"]), _ms(st["max"]), st["missing"]])
    parts += ["## Session end to filed",
              "From the session's last SessionEnd hook start to the moment its spool entry was marked filed (ms).",
              md_table(["host", "filing", "n", "p50", "p95", "max", "not filed in 30 s"], end_rows)]
    fd = p["fault_delays"]
    parts += ["## Fault scenarios",
              f"Per prompt: its latency, its delay (latency minus the host's no-hooks p50) and its budget: per "
              f"memsim prompt hook the session's `MEMSIM_HOOK_TIMEOUT` ({fault_budgets(p)}) + "
              f"{o['hook_slack_s'] * 1000:.0f} ms + that hook's p95 in the cold cell (ms).",
              md_table(["scenario", "host", "session", "prompt", "hooks (wall ms)", "latency", "delay", "budget",
                        "past budget"],
                       [[r["scenario"], r["host"], r["session"], r["prompt"],
                         ", ".join(f"{e} {_ms(w)}" + (f" ({sig})" if sig else "") for e, w, sig in r["hooks"]),
                         _ms(r["latency_s"]), _ms(r["delay_s"]), _ms(r["budget_s"]),
                         {None: "n/a", True: "yes", False: "no"}[r["over_budget"]]] for r in fd])]
    tok_rows = []
    for h in hosts:
        t = p["tokens"].get(h)
        if not t:
            continue
        n = t["named"]
        st = t["share_stats"]
        tok_rows.append([h, "n/a" if n is None else f"{n['scenario']} s{n['session']} #{n['seq']}",
                         "n/a" if n is None else n["memory_tokens"], "n/a" if n is None else n["tokens"],
                         "n/a" if n is None else n["tool_tokens"],
                         "n/a" if n is None else f"{100 * n['share']:.2f}%", st["n"],
                         "n/a" if st["p50"] is None else f"{100 * st['p50']:.2f}%",
                         "n/a" if st["max"] is None else f"{100 * st['max']:.2f}%"])
    parts += ["## Memory's share of a real request",
              "cl100k tokens of the memory spans against the request's system and message text (tool definitions "
              "counted apart); the spread is over every conversation request of the run that carried memory.",
              md_table(["host", "request", "memory tokens", "request tokens", "tool tokens", "share",
                        "requests with memory", "share p50", "share max"], tok_rows)]
    parts.append("## Scenarios: what reached the model, and where")
    for sc in sorted(p["scenarios"], key=lambda s: (s["scenario"], s["host"])):
        rows = []
        for s in sc["sessions"]:
            where = "<br>".join(_where(r) + f" (first in request #{r['first_seq']}, in {r['requests']})"
                                for r in s["delivered"]) or "no memory reached the model"
            cmp = s["store_vs_transcript"]
            store = ("n/a" if cmp is None else
                     f"{'equal' if cmp['equal'] else 'differs'} ({cmp['stored']}/{cmp['conversation']})")
            lost = {None: "n/a", True: "LOST", False: "no"}[s["lost"]]
            checks = s["checks"]
            chk = (f"{sum(1 for v in checks.values() if v)}/{len(checks)}" +
                   (" (failed: " + ", ".join(s["checks_failed"]) + ")" if s["checks_failed"] else "")
                   if checks else "-")
            rows.append([f"s{s['session']}", where, ", ".join(_ms(x) for x in s["latency_s"]), store, lost, chk])
        parts += [f"### {sc['scenario']} on {sc['host']}",
                  f"Records: {', '.join(sc['records'])}.",
                  md_table(["session", "memory delivered (where, how, framing)", "latency ms", "store vs transcript",
                            "lost", "checks"], rows)]
    parts.append("## The messages that carry memory, one request per host")
    for h in hosts:
        ex = p["excerpts"].get(h)
        if ex is None:
            parts.append(f"{h}: no recorded request carried memory.")
            continue
        parts.append(f"{h}, scenario `{ex['scenario']}` session {ex['session']}, request #{ex['seq']} "
                     f"({ex['api']}); only the blocks that carry memory, the host's own text elided:")
        for b in ex["blocks"]:
            at = "top-level system" if b["message_index"] is None else f"messages[{b['message_index']}]"
            body = b["text"].replace("````", "'```'")
            parts.append(f"{at}, role `{b['role']}`, block {b['block_index']} ({b['block_bytes']} bytes; "
                         f"{', '.join(b['kinds'])}):\n\n````text\n{body.rstrip()}\n````")
    return "\n\n".join(parts)


def figure(p: dict[str, Any]) -> Any:
    """Latency p50 (bars) and p95 (ticks) per cell and host for the first prompt, and memory's token share."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.plotting import grouped_bars, zero_legend_handle

    hosts = [h for h in p["options"]["hosts"] if h in p["latency"]]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), gridspec_kw={"width_ratios": [2, 2, 1.2]})
    width = 0.8 / max(1, len(CELLS))
    for ax, pos in zip(axes[:2], ("first", "later"), strict=True):
        for j, c in enumerate(CELLS):
            xs, p50, p95 = [], [], []
            for i, h in enumerate(hosts):
                st = p["latency"][h]["cells"][c][pos]
                if st["p50"] is None:
                    continue
                xs.append(i + (j - (len(CELLS) - 1) / 2) * width)
                p50.append(st["p50"] * 1000)
                p95.append(st["p95"] * 1000)
            ax.bar(xs, p50, width * 0.9, label=f"{c} p50")
            ax.scatter(xs, p95, marker="_", s=200, color="black", zorder=3, label="p95" if j == 0 else None)
        if not any(p["latency"][h]["cells"][c][pos]["n"] for h in hosts for c in CELLS):
            ax.text(0.5, 0.5, f"no {pos} prompts in this run", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks(range(len(hosts)), hosts)
        ax.set_ylabel("ms to the model request")
        ax.set_title(f"{pos} prompt ({'from host start' if pos == 'first' else 'from submission'})")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    shares = [(p["tokens"].get(h) or {}).get("named") for h in hosts]
    vals = [100 * s["share"] if s else None for s in shares]
    # a host without a measured share says n/a (not a zero bar); a measured zero is a stroke on the axis
    if grouped_bars(axes[2], hosts, [("memory share", vals, "tab:purple")]):
        axes[2].legend(handles=[zero_legend_handle()], fontsize=7)
    for i, v in enumerate(vals):
        if v is None:
            axes[2].text(i, 0, "n/a", ha="center", va="bottom", fontsize=8)
    axes[2].set_ylabel("% of the request's text tokens")
    axes[2].set_title("memory's share (pointer-delivery)")
    axes[2].grid(axis="y", alpha=0.3)
    fig.suptitle(f"memsim hooks in real hosts ({p['options']['runs']} runs per cell)")
    fig.tight_layout()
    return fig
