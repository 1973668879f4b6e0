"""``memsim bench hosts``: memsim's Tortoise hooks inside the real pinned agent hosts (Claude Code, Codex), observed
at the wire of a loopback model server.

Sections (every host measured in the same run):

- **scenarios**: every shipped scenario (``harness/hosts/scenarios``) on every installed host it allows, once each,
  through :func:`harness.hosts.scenario.run_scenario`; per session what reached the model and where
  (:func:`harness.cli.hosts.session_summary`), the latency, the store against the host's transcript, lost sessions
  and the expectation checks.
- **latency cells** per host: ``none`` (no hooks), ``cold`` (memsim's documented hooks, no service: every hook runs
  in process), ``served`` (the resident service running, warmed by one prompt before the runs), ``hung`` (a
  service that accepts and never answers: SIGSTOP). Each run is one host session of ``prompts`` prompts (2; quick
  1) asking about a live high-credibility decision in the cell's own store, so the pointer block is volunteered;
  the cells are interleaved run by run (their order rotates each run), never cell after cell. Per prompt the time
  from the host's start (prompt 0) or the prompt's submission (later prompts) to its first model request
  (:func:`harness.hosts.wire.prompt_latencies`); p50/p95 per cell; the overhead is a cell's p50 minus ``none``'s.
  Where the cold time goes: the hook wall times (``hooktee.sh`` records) per event.
- **session end**: in the ``served`` and ``cold`` runs, the time from the session's last SessionEnd hook start to
  the moment its spool entry is marked filed (a watcher thread reads the spool's entry metadata every 10 ms), with
  the service (filed through it) and without (the detached filer).
- **faults**: the fault scenarios (:data:`FAULT_SCENARIOS`): sessions lost (in neither store nor spool) and prompts
  delayed past their hooks' budgets. A memsim prompt hook's budget is ``MEMSIM_HOOK_TIMEOUT`` (the most it waits on
  the service) + 250 ms + the p95 wall time of the same hook in the same host's ``cold`` cell (the in-process path
  it falls back to when no service answers); a prompt's budget is the sum over the hooks that ran before its
  request; its delay is its latency (without the runner's gate wait) minus the ``none`` cell's p50.
- **tokens**: memory's share of a real request's text tokens (cl100k; system and message blocks, tool definitions
  apart): the first memory-carrying conversation request of ``pointer-delivery`` per host, and the spread over
  every memory-carrying request of the run.
- **excerpts**: one per host of the messages that carry memory, from a recorded request of the run, cut to the
  memory-carrying spans and their framing prefix on the same line; every other byte of the host's text is elided
  as ``[... N bytes of host text ...]`` (the host's own prompt and tool text never enter the results).

Writes ``hosts.{json,md,png}``; the Markdown is rendered from the JSON by :func:`render_markdown`, the levels
(:func:`levels`) are computed from the data.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import machine_description, md_table, meta_block, percentile, start_run, write_results
from benchmarks.progress import as_tracker

NAME = "hosts"
CELLS = ("none", "cold", "served", "hung")
FAULT_SCENARIOS = ("hung-service", "service-killed", "store-locked")
QUICK_SCENARIOS = ("pointer-delivery", "hung-service")
SERVED_OVERHEAD_LEVEL_S = 0.300
FILED_LEVEL_S = 1.5
HOOK_SLACK_S = 0.250
LEVEL_HOST = "claude-code"
"""The served-overhead level is stated for Claude Code; the other hosts' overheads are reported beside it."""
PROMPTS = ("What database does the ledger service use?", "And which version of it does the ledger service run?")
POINT = {"ref": "ledger", "kind": "decision", "text": "The ledger service stores its records in Postgres 16",
         "credibility": "high", "live": True}
MAX_PREFIX = 80


def _memsim_exe() -> str:
    here = Path(sys.executable).with_name("memsim")
    return str(here) if here.exists() else (shutil.which("memsim") or "memsim")


def _stats(xs: Sequence[float | None]) -> dict[str, Any]:
    v = [float(x) for x in xs if x is not None]
    return {"n": len(v), "missing": len(xs) - len(v), "p50": percentile(v, 50) if v else None,
            "p95": percentile(v, 95) if v else None, "max": max(v) if v else None, "values": [round(x, 4) for x in v]}


# ------------------------------------------------------------------------------------------------ spool watcher
class _FiledWatcher:
    """Reads the spool's entry metadata every ``interval`` s in a thread and keeps, per entry file and capture key,
    the first time it was seen marked filed (``lane == "filed"`` with ``filed_key`` equal to its capture key)."""

    def __init__(self, spool: Path, interval: float = 0.01) -> None:
        self.entries = spool / "entries"
        self.interval = interval
        self.filed: dict[tuple[str, str], float] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> _FiledWatcher:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self.interval)

    def poll(self) -> None:
        now = time.time()
        try:
            names = [p for p in self.entries.iterdir() if p.name.endswith(".meta.json")]
        except OSError:
            return
        for p in names:
            try:
                meta = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            ck = meta.get("capture_key")
            if isinstance(meta, dict) and meta.get("lane") == "filed" and ck and meta.get("filed_key") == ck:
                self.filed.setdefault((p.name, str(ck)), now)

    def filed_after(self, session_id: str, t0: float) -> float | None:
        """The first time an entry of ``session_id`` was seen filed at or after ``t0`` (the latest capture key's)."""
        from tortoise_sim.spool import entry_key

        name = f"{entry_key(session_id)}.meta.json"
        ts = [t for (n, _), t in self.filed.items() if n == name and t >= t0]
        return max(ts) if ts else None


# ------------------------------------------------------------------------------------------------ latency cells
class _Cell:
    """One latency cell of one host: its store, socket, home and workspace, and the service it runs."""

    def __init__(self, name: str, host: str, root: Path, sockdir: Path, exe: str) -> None:
        from harness.hosts.scenario import HARNESS, TORTOISE_HOOKS, _Memory, expand

        self.name, self.host, self.root = name, host, root
        self.db = root / "store" / "tortoise.kuzu"
        self.db.parent.mkdir(parents=True, exist_ok=True)
        self.env = {"MEMSIM_TORTOISE_SOCKET": str(sockdir / f"{name}.sock"), "MEMSIM_TORTOISE_DB": str(self.db)}
        self.mem = _Memory(exe, self.db, self.env)
        values = {"memsim": shlex.quote(exe), "db": shlex.quote(str(self.db)), "harness": HARNESS[host]}
        self.lines = {} if name == "none" else {a: expand(line, values) for a, line in TORTOISE_HOOKS.items()}
        self.runs = 0

    def prepare(self) -> list[dict[str, Any]]:
        from harness.hosts.scenario import Op

        ops: list[dict[str, Any]] = []
        if self.name != "none":
            ops.append(self.mem.run(Op.model_validate({"create_point": POINT})))
        if self.name in ("served", "hung"):
            ops.append(self.mem.run(Op.model_validate({"service": "start"})))
        return ops

    def hang(self) -> dict[str, Any]:
        from harness.hosts.scenario import Op

        return self.mem.run(Op.model_validate({"service": "hang"}))

    def session(self, prompts: Sequence[str], isolation: str, *, label: str) -> dict[str, Any]:
        """One host session in this cell; the per-prompt latencies, hook wall times and the session-end filing."""
        from harness.hosts.drivers import HookSet, SessionSpec, run_session
        from harness.hosts.scenario import EVENTS, tee_command
        from harness.hosts.server import Reply
        from harness.hosts.wire import hook_records, prompt_latencies

        run_dir = self.root / label
        hooks_dir = run_dir / "hooks"
        hookset = (HookSet(**{a: tee_command(line, EVENTS[a], hooks_dir) for a, line in self.lines.items()})
                   if self.lines else None)
        spec = SessionSpec(prompts=list(prompts), replies=[[Reply(text="Postgres 16.")] for _ in prompts],
                           home=self.root / "home", cwd=self.root / "work", hooks=hookset, env=dict(self.env),
                           timeout_s=120.0)
        with _FiledWatcher(self.db.parent / "spool") as watch:
            run = run_session(self.host, spec, run_dir, isolation=isolation)
            records = hook_records(hooks_dir)
            ends = [r for r in records if r["event"] == "SessionEnd"]
            t_end = ends[-1]["start"] if ends else None
            filed = None
            if self.name in ("served", "cold") and run.session_id and t_end is not None:
                deadline = time.time() + 30.0  # the filing finishes before the next cell runs (no CPU bleed)
                while filed is None and time.time() < deadline:
                    watch.poll()
                    filed = watch.filed_after(run.session_id, t_end)
                    if filed is None:
                        time.sleep(0.02)
        lat = prompt_latencies(run)
        return {"cell": self.name, "label": label, "session_id": run.session_id, "exit_code": run.exit_code,
                "timed_out": run.timed_out, "isolation": run.isolation, "version": run.version,
                "latency_s": [x["latency_s"] for x in lat],
                "hooks": [{"event": r["event"], "wall_s": None if r["end"] is None else r["end"] - r["start"],
                           "rc": r["rc"], "signal": r["signal"]} for r in records],
                "session_end_to_filed_s": None if filed is None or t_end is None else filed - t_end,
                "filed_seen": filed is not None}

    def close(self) -> None:
        self.mem.close()


def latency_cells(host: str, root: Path, *, runs: int, prompts: int, isolation: str,
                  track: Callable[..., Any], exe: str) -> dict[str, Any]:
    """The four latency cells of ``host``, interleaved run by run (the order rotates by one cell each run)."""
    sockdir = Path(tempfile.mkdtemp(prefix="mwb-"))
    cells = {c: _Cell(c, host, root / c, sockdir, exe) for c in CELLS}
    out: dict[str, Any] = {"runs": runs, "prompts": prompts, "sessions": [], "prepare": {}}
    tracker = as_tracker(track)
    try:
        with tracker.phase(f"{host}: preparing the latency cells"):
            for c in CELLS:
                out["prepare"][c] = cells[c].prepare()
            out["warmup"] = cells["served"].session(PROMPTS[:1], isolation, label="warmup")
            out["prepare"]["hung"].append(cells["hung"].hang())
        for r in tracker(range(runs), description=f"{host}: latency cells", total=runs):
            order = CELLS[r % len(CELLS):] + CELLS[:r % len(CELLS)]
            for c in order:
                res = cells[c].session(PROMPTS[:prompts], isolation, label=f"r{r}")
                res["run"] = r
                out["sessions"].append(res)
    finally:
        for c in cells.values():
            c.close()
        shutil.rmtree(sockdir, ignore_errors=True)
    return summarize_cells(out)


def summarize_cells(out: dict[str, Any]) -> dict[str, Any]:
    """Per cell and prompt position (``first``: from the host's start; ``later``: from the prompt's submission) the
    latency statistics, the overhead against ``none``, the hook wall times per event and the session-end filing."""
    sessions = out["sessions"]
    cells: dict[str, Any] = {}
    for c in CELLS:
        ss = [s for s in sessions if s["cell"] == c]
        first = [s["latency_s"][0] if s["latency_s"] else None for s in ss]
        later = [x for s in ss for x in s["latency_s"][1:]]
        hooks: dict[str, list[float]] = {}
        for s in ss:
            for h in s["hooks"]:
                if h["wall_s"] is not None:
                    hooks.setdefault(h["event"], []).append(h["wall_s"])
        cells[c] = {"first": _stats(first), "later": _stats(later),
                    "hook_wall_s": {e: _stats(v) for e, v in sorted(hooks.items())},
                    "session_end_to_filed_s": _stats([s["session_end_to_filed_s"] for s in ss])
                    if c in ("served", "cold") else None,
                    "exit_codes": sorted({str(s["exit_code"]) for s in ss}),
                    "timed_out": sum(1 for s in ss if s["timed_out"])}
    for c in CELLS:
        for pos in ("first", "later"):
            base, me = cells["none"][pos]["p50"], cells[c][pos]["p50"]
            cells[c][pos]["overhead_p50"] = None if base is None or me is None else me - base
    out["cells"] = cells
    return out


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
    """Per prompt of every fault scenario session: its hooks, their budgets and its delay against the budget."""
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
                for h in mine:
                    cold = (host_cells or {}).get("cold", {}).get("hook_wall_s", {}).get(h["event"], {}).get("p95")
                    budget += hook_timeout_s + HOOK_SLACK_S + (cold or 0.0)
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
def levels(p: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's levels, each with its measured value and pass/fail computed from the results JSON: served
    prompt overhead p50 (first and later prompts) <= 300 ms for Claude Code (other hosts reported, no level);
    session end with the service filed within 1.5 s (every run: the maximum); every fault scenario 0 sessions
    lost and 0 prompts delayed past their hooks' budgets. A value that could not be measured fails its level."""
    out: list[dict[str, Any]] = []
    for host, lc in sorted(p.get("latency", {}).items()):
        if host == LEVEL_HOST:
            for pos in ("first", "later"):
                v = lc["cells"]["served"][pos].get("overhead_p50")
                if lc["cells"]["served"][pos]["n"] == 0 and pos == "later":
                    continue
                out.append({"level": f"served prompt overhead p50 ({pos} prompt)", "host": host, "value": v,
                            "limit": SERVED_OVERHEAD_LEVEL_S, "unit": "s", "pass": v is not None
                            and v <= SERVED_OVERHEAD_LEVEL_S})
        f = lc["cells"]["served"]["session_end_to_filed_s"]
        v = f["max"] if f["missing"] == 0 else None
        out.append({"level": "session end to filed with the service (max over runs)", "host": host, "value": v,
                    "limit": FILED_LEVEL_S, "unit": "s", "pass": v is not None and v <= FILED_LEVEL_S})
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
                    "unit": "sessions", "pass": h["lost"] == 0 and h["unknown"] == 0,
                    "note": f"{h['unknown']} session(s) not determined" if h["unknown"] else ""})
        rows = [r for r in p.get("fault_delays", []) if r["host"] == host]
        over = sum(1 for r in rows if r["over_budget"])
        unknown = sum(1 for r in rows if r["over_budget"] is None)
        out.append({"level": "fault scenarios: prompts delayed past their hooks' budgets", "host": host,
                    "value": over, "limit": 0, "unit": "prompts", "pass": over == 0 and unknown == 0 and bool(rows),
                    "note": f"{unknown} prompt(s) not determined" if unknown else ""})
    return out


# ------------------------------------------------------------------------------------------------ run
def _scenario_entry(res: dict[str, Any]) -> dict[str, Any]:
    from harness.cli.hosts import session_summary

    sessions = []
    for s in res["sessions"]:
        acc = session_summary(s)
        acc["requests_full"] = [{k: r[k] for k in ("seq", "conversation", "size", "memory_bytes", "memory_tokens",
                                                   "memory_token_share")} for r in s["requests"]]
        sessions.append(acc)
    first = res["sessions"][0] if res["sessions"] else {}
    return {"scenario": res["scenario"], "records": res["records"], "host": res["host"],
            "version": first.get("version"), "isolation": first.get("isolation"), "sessions": sessions}


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, track: Callable[..., Any] | None = None,
        hosts: Sequence[str] | None = None, scenarios: Sequence[str] | None = None, runs: int | None = None,
        isolation: str = "auto", work_dir: Path | None = None) -> list[Path]:
    """Run the benchmark (see the module docstring) and write ``hosts.{json,md,png}`` to ``out_dir``. ``hosts``:
    default every installed host with a driver; ``scenarios``: names of shipped scenarios (default all; quick
    :data:`QUICK_SCENARIOS`); ``runs``: runs per latency cell (default 10; quick 2); ``work_dir``: where the host
    runs go (default a temporary folder, removed after the run)."""
    import os

    from harness.hosts.install import HOSTS, find_host
    from harness.hosts.scenario import RUN_HOSTS, load_scenario, run_scenario, scenario_files
    from tortoise_sim.hook_client import DEFAULT_TIMEOUT_S, TIMEOUT_ENV

    track, t0 = start_run(track)
    runs = runs if runs is not None else (2 if quick else 10)
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
    exe = _memsim_exe()
    hook_timeout = float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="memsim-bench-hosts-"))
    scen: list[dict[str, Any]] = []
    excerpts: dict[str, Any] = {}
    latency: dict[str, Any] = {}
    try:
        jobs = [(n, h) for n in names for h in have if h in load_scenario(known[n]).run_hosts]
        with track.phase("scenarios", total=len(jobs)) as ph:
            for n, h in jobs:
                ph.update(status=f"{n} on {h}")
                scn = load_scenario(known[n])
                res = run_scenario(scn, h, work / "scenarios" / n, memsim_exe=exe, isolation=isolation)
                scen.append(_scenario_entry(res))
                ph.update(advance=1)
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
    payload: dict[str, Any] = {
        "quick": quick, "seed": seed, "options": {"hosts": have, "scenarios": names, "runs": runs,
                                                  "prompts_per_latency_session": prompts, "isolation": isolation,
                                                  "hook_timeout_s": hook_timeout, "hook_slack_s": HOOK_SLACK_S},
        "skipped_hosts": skipped,
        "host_versions": {h: HOSTS[h].version for h in have},
        "scenarios": scen, "latency": latency, "excerpts": excerpts,
        "fault_delays": fault_delays(scen, cells, hook_timeout), "tokens": token_share(scen),
        "seconds": round(time.perf_counter() - t0, 1), "machine": machine_description(),
    }
    payload["levels"] = levels(payload)
    return write_results(out_dir, NAME, payload, render_markdown, figure(payload))


# ------------------------------------------------------------------------------------------------ rendering
def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 1000:.0f}"


def _fmt_value(lv: dict[str, Any]) -> str:
    v = lv["value"]
    if v is None:
        return "not measured"
    return f"{v * 1000:.0f} ms" if lv["unit"] == "s" else f"{v} {lv['unit']}"


def _fmt_limit(lv: dict[str, Any]) -> str:
    return f"<= {lv['limit'] * 1000:.0f} ms" if lv["unit"] == "s" else f"{lv['limit']} {lv['unit']}"


def _where(row: dict[str, Any]) -> str:
    at = "top-level system" if row["message_index"] is None else f"messages[{row['message_index']}]"
    how = "byte for byte" if row["exact"] and not row["trimmed"] else (
        "exact after trimming" if row["exact"] else str(row["encoding"]))
    if not row["whole"]:
        how += ", some lines only"
    frame = f"after `{row['prefix'].strip()}`" if row["prefix"].strip() else "no prefix"
    return f"{row['kind']} from {row['event']}: {at} ({row['role']}, block {row['block_index']}), {how}, {frame}"


def render_markdown(p: dict[str, Any]) -> str:
    """The whole Markdown page, from the results JSON only."""
    o = p["options"]
    hosts = o["hosts"]
    parts = ["# Real agent hosts: memsim's hooks observed at the wire (`memsim bench hosts`)",
             meta_block({"machine": p["machine"], "seeds": {"bench": p["seed"]}, "quick": p["quick"],
                         "wall_s": p["seconds"]}, p.get("run")),
             "Hosts: " + ", ".join(f"{h} {p['host_versions'][h]}" for h in hosts) +
             (". Not installed, skipped: " + "; ".join(p["skipped_hosts"].values()) if p["skipped_hosts"] else "") +
             ". Isolation: " + ", ".join(sorted({f"{sc['host']} {sc['isolation']}" for sc in p["scenarios"]})) +
             ". Every model request went to a loopback server started by the run."]
    rows = [[lv["level"], lv["host"], _fmt_value(lv), _fmt_limit(lv), "pass" if lv["pass"] else "FAIL",
             lv.get("note", "")] for lv in p["levels"]]
    parts += ["## Levels", md_table(["level", "host", "measured", "level", "verdict", "note"], rows)]
    parts += ["## Latency: prompt submission to the model request",
              f"{o['runs']} runs per cell, {o['prompts_per_latency_session']} prompt(s) per session, the cells "
              "interleaved run by run. `first`: from the host process start to the first prompt's model request; "
              "`later`: from a later prompt's submission to its request. Overhead: the cell's p50 minus the "
              "no-hooks p50 of the same host and prompt position (ms)."]
    lat_rows = []
    for h in hosts:
        lc = p["latency"].get(h)
        if lc is None:
            continue
        for c in CELLS:
            for pos in ("first", "later"):
                st = lc["cells"][c][pos]
                if st["n"] == 0 and st["missing"] == 0:
                    continue
                lat_rows.append([h, c, pos, st["n"], _ms(st["p50"]), _ms(st["p95"]), _ms(st.get("overhead_p50")),
                                 st["missing"]])
    parts.append(md_table(["host", "cell", "prompt", "n", "p50", "p95", "overhead p50", "no request"], lat_rows))
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
              f"memsim prompt hook `MEMSIM_HOOK_TIMEOUT` ({o['hook_timeout_s']:g} s) + {o['hook_slack_s'] * 1000:.0f}"
              " ms + that hook's p95 in the cold cell (ms).",
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
