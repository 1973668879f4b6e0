"""``memsim bench hosts``: memsim's Tortoise hooks inside the real pinned agent hosts (Claude Code, Codex), observed
at the wire of a loopback model server.

Sections (every host measured in the same run):

- **scenarios**: every shipped scenario (``harness/hosts/scenarios``) on every installed host it allows, once each,
  through :func:`harness.hosts.scenario.run_scenario`; per session what reached the model and where
  (:func:`harness.cli.hosts.session_summary`), the latency, the store against the host's transcript, lost sessions
  and the expectation checks.
- **latency cells** per host (:mod:`benchmarks.hosts_cells`): ``none`` (no hooks), ``cold`` (hooks, no service),
  ``served`` (the resident service, warmed) and ``hung`` (a service that never answers), :data:`FULL_RUNS` runs per
  cell (quick :data:`QUICK_RUNS`), interleaved run by run, every hooked cell with the documented 1 s
  ``MEMSIM_HOOK_TIMEOUT`` set in its environment; p50/p95 per cell and prompt position, each overhead against
  ``none`` with the 95% interval of its Hodges-Lehmann shift (exact Mann-Whitney; the cells are separate
  sessions), the hook wall times, and session end to filed with and without the service. The sessions are also
  written as ``hosts.probes.parquet`` (:mod:`harness.probes`: cluster = host, probe = run index, row = cell).
- **faults**: the fault scenarios (:data:`FAULT_SCENARIOS`): sessions lost (in neither store nor spool) and prompts
  delayed past their hooks' budgets. A memsim prompt hook's budget is the session's ``MEMSIM_HOOK_TIMEOUT`` (the
  most it waits on the service: what the scenario sets, ``hung-service`` 1 s, else the documented default; a host
  passes none of the caller's variables to its hooks) + 250 ms + the p95 wall time of the same hook in the same host's ``cold`` cell (the in-process path
  it falls back to when no service answers); a prompt's budget is the sum over the hooks that ran before its
  request; its delay is its latency (without the runner's gate wait) minus the ``none`` cell's p50.
- **tokens**: memory's share of a real request's text tokens (cl100k; system and message blocks, tool definitions
  apart): the first memory-carrying conversation request of ``pointer-delivery`` per host, and the spread over
  every memory-carrying request of the run.
- **excerpts**: one per host of the messages that carry memory, from a recorded request of the run, cut to the
  memory-carrying spans and their framing prefix on the same line; every other byte of the host's text is elided
  as ``[... N bytes of host text ...]`` (the host's own prompt and tool text never enter the results).

Writes ``hosts.{json,md,png}`` and ``hosts.probes.parquet``; the Markdown is rendered from the JSON by
:func:`render_markdown` (:mod:`benchmarks.hosts_page`), the levels (:func:`levels`) are computed from the data: a
latency level passes only when the upper bound of its interval is within it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import machine_description, start_run, write_results
from benchmarks.hosts_cells import (
    CELLS,
    FULL_RUNS,
    HOOK_TIMEOUT_S,
    POINT,
    PROMPTS,
    QUICK_RUNS,
    _stats,
    hook_budget_s,
    latency_cells,
    summarize_cells,
    write_probe_table,
)
from benchmarks.hosts_page import figure, render
from harness.stats import Interval, within_level

__all__ = ["CELLS", "FULL_RUNS", "NAME", "POINT", "PROMPTS", "QUICK_RUNS", "excerpt_blocks", "fault_delays",
           "figure", "host_excerpt", "levels", "render_markdown", "run", "summarize_cells", "token_share"]

NAME = "hosts"
FAULT_SCENARIOS = ("hung-service", "service-killed", "store-locked")
QUICK_SCENARIOS = ("pointer-delivery", "hung-service")
SERVED_OVERHEAD_LEVEL_S = 0.300
FILED_LEVEL_S = 1.5
HOOK_SLACK_S = 0.250
LEVEL_HOST = "claude-code"
"""The served-overhead level is stated for Claude Code; the other hosts' overheads are reported beside it."""
MAX_PREFIX = 80


# ------------------------------------------------------------------------------------------------ excerpts
def excerpt_blocks(req: dict[str, Any], items: Sequence[Any], *, max_prefix: int = MAX_PREFIX) -> list[dict[str, Any]]:
    """The messages of one recorded request that carry memory, cut to the memory-carrying spans with their framing
    prefix (the text before the span on its line, at most ``max_prefix`` characters); every other byte of the block
    becomes one ``[... N bytes of host text ...]`` marker. One entry per block that carries memory."""
    from harness.hosts.wire import deliveries, request_blocks

    blocks = {(b.index, b.block_index, b.part): b for b in request_blocks(req) if b.part != "tools"}
    spans: dict[tuple[Any, ...], list[tuple[int, int, Any]]] = {}
    for d in deliveries(req, items):
        key = (d.message_index, d.block_index, d.part)
        start = d.offset - len(d.prefix)
        if len(d.prefix) > max_prefix:
            start = d.offset - max_prefix
        spans.setdefault(key, []).append((start, d.offset + len(d.text), d))
    out = []
    for key, ss in sorted(spans.items(), key=lambda kv: (kv[0][0] is not None, kv[0][0] or 0, kv[0][1])):
        b = blocks[key]
        text, pos, parts = b.text, 0, []
        for start, end, _d in sorted(ss, key=lambda x: x[0]):
            start = max(start, pos)
            if start > pos:
                parts.append(_elided(text[pos:start]))
            parts.append(text[start:end])
            pos = max(pos, end)
        if pos < len(text):
            parts.append(_elided(text[pos:]))
        out.append({"message_index": key[0], "role": b.role, "block_index": key[1], "part": key[2],
                    "block_bytes": len(text.encode("utf-8")),
                    "kinds": sorted({d.item.kind for _, _, d in ss}), "text": "".join(parts)})
    return out


def _elided(host_text: str) -> str:
    """One marker for a run of host text; a newline that opens or closes it is kept (and not counted), so the
    memory-carrying lines stay on lines of their own."""
    if not host_text.strip():
        return host_text
    lead = "\n" if host_text.startswith("\n") else ""
    tail = "\n" if host_text.endswith("\n") and len(host_text) > len(lead) else ""
    n = len(host_text.encode("utf-8")) - len(lead) - len(tail)
    return f"{lead}[... {n} bytes of host text ...]{tail}"


def host_excerpt(scenario_root: Path, host: str) -> dict[str, Any] | None:
    """The excerpt of ``host``'s first recorded conversation request that carries memory in a scenario run folder
    (``<scenario_root>/<host>/s<i>/``)."""
    from harness.hosts.wire import hook_records, is_conversation, items_from_records

    for sdir in sorted((scenario_root / host).glob("s*")):
        req_path = sdir / "requests.jsonl"
        if not req_path.exists():
            continue
        items = items_from_records(hook_records(sdir / "hooks"))
        for line in req_path.read_text(encoding="utf-8").splitlines():
            req = json.loads(line)
            if not is_conversation(req):
                continue
            blocks = excerpt_blocks(req, items)
            if blocks:
                return {"scenario": scenario_root.name, "session": sdir.name, "seq": req.get("seq"),
                        "api": req.get("api"), "blocks": blocks}
    return None


# ------------------------------------------------------------------------------------------------ faults, tokens
def fault_delays(scen: list[dict[str, Any]], cells: dict[str, Any], hook_timeout_s: float) -> list[dict[str, Any]]:
    """Per prompt of every fault scenario session: its hooks, their budgets and its delay against the budget. A
    hook's timeout is its session's recorded ``hook_timeout_s`` (``hook_timeout_s`` for a session without one)."""
    rows = []
    for sc in scen:
        if sc["scenario"] not in FAULT_SCENARIOS:
            continue
        host_cells = cells.get(sc["host"])
        for s in sc["sessions"]:
            hooks = [h for h in s["hooks"] if h["event"] in ("SessionStart", "UserPromptSubmit")]
            ups = [h for h in hooks if h["event"] == "UserPromptSubmit"]
            starts = [h for h in hooks if h["event"] == "SessionStart"]
            for k, lat in enumerate(s["latency_s"]):
                mine = ([starts[0]] if k == 0 and starts else []) + ([ups[k]] if k < len(ups) else [])
                pos = "first" if k == 0 else "later"
                base = host_cells["none"][pos]["p50"] if host_cells else None
                budget = 0.0
                timeout = s.get("hook_timeout_s", hook_timeout_s)
                for h in mine:
                    cold = (host_cells or {}).get("cold", {}).get("hook_wall_s", {}).get(h["event"], {}).get("p95")
                    budget += timeout + HOOK_SLACK_S + (cold or 0.0)
                delay = None if lat is None or base is None else lat - base
                rows.append({"scenario": sc["scenario"], "host": sc["host"], "session": s["session"], "prompt": k,
                             "hooks": [[h["event"], h["wall_s"], h["signal"]] for h in mine],
                             "latency_s": lat, "delay_s": delay, "budget_s": budget if host_cells else None,
                             "over_budget": None if delay is None or not host_cells else delay > budget,
                             "reached_model": lat is not None})
    return rows


def token_share(scen: list[dict[str, Any]]) -> dict[str, Any]:
    """Per host: the first memory-carrying conversation request of ``pointer-delivery`` (memory tokens against the
    request's text tokens, tools apart) and the spread of the share over every memory-carrying request."""
    out: dict[str, Any] = {}
    for sc in scen:
        h = out.setdefault(sc["host"], {"named": None, "shares": []})
        for s in sc["sessions"]:
            for r in s.get("requests_full", []):
                if not r["conversation"] or not r["memory_tokens"]:
                    continue
                row = {"scenario": sc["scenario"], "session": s["session"], "seq": r["seq"],
                       "memory_tokens": r["memory_tokens"], "memory_bytes": r["memory_bytes"],
                       "tokens": r["size"]["tokens"], "bytes": r["size"]["bytes"],
                       "tool_tokens": r["size"]["tool_tokens"], "share": r["memory_token_share"]}
                h["shares"].append(row["share"])
                if sc["scenario"] == "pointer-delivery" and h["named"] is None:
                    h["named"] = row
    for h in out.values():
        h["share_stats"] = _stats(h.pop("shares"))
    return out


# ------------------------------------------------------------------------------------------------ levels
def overhead_level(host: str, pos: str, st: dict[str, Any], limit: float = SERVED_OVERHEAD_LEVEL_S
                   ) -> dict[str, Any]:
    """The level "served prompt overhead p50 <= ``limit``" of one prompt position: the measured value is the
    overhead p50 (the p50s' difference), the verdict the upper bound of the overhead's 95% interval (the
    Hodges-Lehmann shift's): pass only when the bound, and the value, are within the limit. No interval (too few
    runs) fails."""
    v = st.get("overhead_p50")
    iv = st.get("overhead_interval")
    bound = None if iv is None else within_level(Interval(**iv), limit)
    ok = bool(bound) and v is not None and v <= limit
    if iv is None or iv.get("hi") is None:
        note = f"no 95% interval from {st['n']} run(s): at least {QUICK_RUNS} per cell"
    elif not ok and v is not None and v <= limit:
        note = "the point estimate is within the level, the interval's upper bound is not"
    else:
        note = ""
    return {"level": f"served prompt overhead p50 ({pos} prompt)", "host": host, "value": v, "interval": iv,
            "rule": "upper bound", "limit": limit, "unit": "s", "pass": ok, "note": note}


def levels(p: dict[str, Any]) -> list[dict[str, Any]]:
    """The levels, each with its measured value and pass/fail computed from the results JSON: served prompt
    overhead p50 (first and later prompts) <= 300 ms for Claude Code, judged by the upper bound of its 95%
    interval (:func:`overhead_level`; other hosts reported, no level); session end with the service filed within
    1.5 s (every run: the maximum); every fault scenario 0 sessions lost and 0 prompts delayed past their hooks'
    budgets. A value that could not be measured fails its level."""
    out: list[dict[str, Any]] = []
    for host, lc in sorted(p.get("latency", {}).items()):
        if host == LEVEL_HOST:
            for pos in ("first", "later"):
                if lc["cells"]["served"][pos]["n"] == 0 and pos == "later":
                    continue
                out.append(overhead_level(host, pos, lc["cells"]["served"][pos]))
        f = lc["cells"]["served"]["session_end_to_filed_s"]
        v = f["max"] if f["missing"] == 0 else None
        out.append({"level": "session end to filed with the service (max over runs)", "host": host, "value": v,
                    "rule": "every run", "limit": FILED_LEVEL_S, "unit": "s",
                    "pass": v is not None and v <= FILED_LEVEL_S})
    by_host: dict[str, dict[str, Any]] = {}
    for sc in p.get("scenarios", []):
        if sc["scenario"] not in FAULT_SCENARIOS:
            continue
        h = by_host.setdefault(sc["host"], {"lost": 0, "unknown": 0})
        for s in sc["sessions"]:
            if s["lost"] is None:
                h["unknown"] += 1
            elif s["lost"]:
                h["lost"] += 1
    for host, h in sorted(by_host.items()):
        out.append({"level": "fault scenarios: sessions lost", "host": host, "value": h["lost"], "limit": 0,
                    "rule": "count", "unit": "sessions", "pass": h["lost"] == 0 and h["unknown"] == 0,
                    "note": f"{h['unknown']} session(s) not determined" if h["unknown"] else ""})
        rows = [r for r in p.get("fault_delays", []) if r["host"] == host]
        over = sum(1 for r in rows if r["over_budget"])
        unknown = sum(1 for r in rows if r["over_budget"] is None)
        out.append({"level": "fault scenarios: prompts delayed past their hooks' budgets", "host": host,
                    "value": over, "limit": 0, "rule": "count", "unit": "prompts",
                    "pass": over == 0 and unknown == 0 and bool(rows),
                    "note": f"{unknown} prompt(s) not determined" if unknown else ""})
    return out


# ------------------------------------------------------------------------------------------------ run
def _scenario_entry(res: dict[str, Any], scn: Any) -> dict[str, Any]:
    """One scenario run for the JSON; each session with the prompt-hook budget its hooks read (its scenario's
    and its own environment)."""
    from harness.cli.hosts import session_summary

    sessions = []
    for i, s in enumerate(res["sessions"]):
        acc = session_summary(s)
        env = {**scn.hooks.env, **(scn.sessions[i].env if i < len(scn.sessions) else {})}
        acc["hook_timeout_s"] = hook_budget_s(env)
        acc["requests_full"] = [{k: r[k] for k in ("seq", "conversation", "size", "memory_bytes", "memory_tokens",
                                                   "memory_token_share")} for r in s["requests"]]
        sessions.append(acc)
    first = res["sessions"][0] if res["sessions"] else {}
    return {"scenario": res["scenario"], "records": res["records"], "host": res["host"],
            "version": first.get("version"), "isolation": first.get("isolation"), "sessions": sessions}


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, track: Callable[..., Any] | None = None,
        hosts: Sequence[str] | None = None, scenarios: Sequence[str] | None = None, runs: int | None = None,
        isolation: str = "auto", work_dir: Path | None = None) -> list[Path]:
    """Run the benchmark (see the module docstring) and write ``hosts.{json,md,png}`` and ``hosts.probes.parquet``
    to ``out_dir``. ``hosts``: default every installed host with a driver; ``scenarios``: names of shipped
    scenarios (default all; quick :data:`QUICK_SCENARIOS`); ``runs``: runs per latency cell (default
    :data:`FULL_RUNS`; quick :data:`QUICK_RUNS`); ``work_dir``: where the host runs go (default a temporary folder,
    removed after the run)."""
    from harness.hosts.install import HOSTS, find_host
    from harness.hosts.scenario import (
        RUN_HOSTS,
        load_scenario,
        memsim_executable,
        run_scenario,
        scenario_files,
    )

    track, t0 = start_run(track)
    runs = runs if runs is not None else (QUICK_RUNS if quick else FULL_RUNS)
    if runs < 1:
        raise ValueError(f"--runs must be at least 1, not {runs}")
    prompts = 1 if quick else 2
    known = {f.stem: f for f in scenario_files()}
    names = list(scenarios) if scenarios else (list(QUICK_SCENARIOS) if quick else sorted(known))
    bad = [n for n in names if n not in known]
    if bad:
        raise ValueError(f"unknown scenario {', '.join(bad)} (shipped: {', '.join(sorted(known))})")
    wanted = list(hosts) if hosts else [h for h in RUN_HOSTS if h in HOSTS]
    for h in wanted:
        if h not in HOSTS:
            raise ValueError(f"unknown host {h!r} (known: {', '.join(HOSTS)})")
    have = [h for h in wanted if find_host(h) is not None]
    skipped = {h: f"{h} {HOSTS[h].version} not installed (memsim hosts install {h})" for h in wanted
               if h not in have}
    if not have:
        raise ValueError("no pinned host is installed: " + "; ".join(skipped.values()))
    exe = memsim_executable()
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="memsim-bench-hosts-"))
    scen: list[dict[str, Any]] = []
    excerpts: dict[str, Any] = {}
    latency: dict[str, Any] = {}
    try:
        t_scen = time.perf_counter()
        jobs = [(n, h) for n in names for h in have if h in load_scenario(known[n]).run_hosts]
        with track.phase("scenarios", total=len(jobs)) as ph:
            for n, h in jobs:
                ph.update(status=f"{n} on {h}")
                scn = load_scenario(known[n])
                res = run_scenario(scn, h, work / "scenarios" / n, memsim_exe=exe, isolation=isolation)
                scen.append(_scenario_entry(res, scn))
                ph.update(advance=1)
        scenario_seconds = round(time.perf_counter() - t_scen, 1)
        for h in have:
            pick = ["pointer-delivery", *[n for n in names if n != "pointer-delivery"]]
            for n in pick:
                if (work / "scenarios" / n / h).exists():
                    ex = host_excerpt(work / "scenarios" / n, h)
                    if ex is not None:
                        excerpts[h] = ex
                        break
        for h in have:
            latency[h] = latency_cells(h, work / "latency" / h, runs=runs, prompts=prompts, isolation=isolation,
                                       track=track, exe=exe)
    finally:
        if work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    cells = {h: lc["cells"] for h, lc in latency.items()}
    versions = {h: HOSTS[h].version for h in have}
    options = {"hosts": have, "scenarios": names, "runs": runs, "prompts_per_latency_session": prompts,
               "isolation": isolation, "hook_timeout_s": HOOK_TIMEOUT_S, "hook_timeout_in_cell_env": True,
               "hook_slack_s": HOOK_SLACK_S}
    table = write_probe_table(Path(out_dir) / f"{NAME}.probes.parquet", latency,
                              data="hosts: " + ", ".join(f"{h} {v}" for h, v in versions.items()),
                              config={**options, "cells": list(CELLS), "seed": seed, "quick": quick})
    payload: dict[str, Any] = {
        "quick": quick, "seed": seed, "options": options, "skipped_hosts": skipped, "host_versions": versions,
        "scenarios": scen, "latency": latency, "excerpts": excerpts,
        "fault_delays": fault_delays(scen, cells, HOOK_TIMEOUT_S), "tokens": token_share(scen),
        "probes": {"file": table.name, "rows": sum(len(lc["sessions"]) for lc in latency.values())},
        "scenario_seconds": scenario_seconds, "seconds": round(time.perf_counter() - t0, 1),
        "machine": machine_description(),
    }
    payload["levels"] = levels(payload)
    return [*write_results(out_dir, NAME, payload, render_markdown, figure(payload)), table]


def recompute(run: Any, payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``hosts.json`` holds that ``hosts.probes.parquet`` determines, and the same recomputed from ``run``
    (the table read back): per host and hooked cell, the first prompt's p50 and its overhead interval over
    ``none`` (the table keeps one later prompt per session, so later prompts are checked only where every session
    had at most two)."""
    from benchmarks.hosts_cells import PROBE_METRICS, overhead_interval
    from harness.probes import select

    lat = complete(payload)["latency"]
    held: dict[str, Any] = {}
    got: dict[str, Any] = {}
    for host, lc in lat.items():
        positions = ["first"] + (["later"] if all(len(s["latency_s"]) <= 2 for s in lc["sessions"]) else [])
        table = select(run.table, {"cluster": host})
        col = {pos: table.column(PROBE_METRICS[pos]).to_pylist() for pos in positions}
        cell_of = table.column("row").to_pylist()

        def values(cell: str, pos: str) -> list[float | None]:
            return [v for v, c in zip(col[pos], cell_of, strict=True) if c == cell]  # noqa: B023

        for cell in CELLS[1:]:
            for pos in positions:
                key = f"{host}/{cell}/{pos}"
                held[key] = {"p50": lc["cells"][cell][pos]["p50"],
                             "overhead_interval": lc["cells"][cell][pos]["overhead_interval"]}
                got[key] = {"p50": _stats(values(cell, pos))["p50"],
                            "overhead_interval": overhead_interval(values(cell, pos), values("none", pos))}
    return held, got


# ------------------------------------------------------------------------------------------------ rendering
def complete(p: dict[str, Any]) -> dict[str, Any]:
    """``p`` with every overhead interval and the levels that judge by them: results written before the
    intervals existed get them computed from their recorded sessions (:func:`summarize_cells` reads only those)
    and their levels recomputed, marked ``derived_at_render``; newer results are returned as they are."""
    lat = p.get("latency", {})
    if all("overhead_interval" in lc["cells"]["served"]["first"] for lc in lat.values()):
        return p
    q = dict(p)
    q["latency"] = {h: summarize_cells(dict(lc)) for h, lc in lat.items()}
    q["levels"] = levels(q)
    q["derived_at_render"] = True
    return q


def render_markdown(p: dict[str, Any]) -> str:
    """The whole Markdown page, from the results JSON only (:func:`benchmarks.hosts_page.render` of
    :func:`complete`)."""
    return render(complete(p))


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.hosts --render DIR``: rewrite ``DIR/hosts.md`` from its JSON."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m benchmarks.hosts")
    ap.add_argument("--render", type=Path, required=True, help="folder holding hosts.json")
    a = ap.parse_args(argv)
    payload = json.loads((a.render / f"{NAME}.json").read_text(encoding="utf-8"))
    md = a.render / f"{NAME}.md"
    md.write_text(render_markdown(payload).rstrip() + "\n", encoding="utf-8")
    print(f"wrote {md}")


if __name__ == "__main__":
    main()
