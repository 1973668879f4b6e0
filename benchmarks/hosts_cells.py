"""The latency cells of ``memsim bench hosts`` (:mod:`benchmarks.hosts`): the sessions, their summary, the
interval of each overhead and the per-run table.

Per host four cells: ``none`` (no hooks), ``cold`` (memsim's documented hooks, no service: every hook runs in
process), ``served`` (the resident service running, warmed by one prompt before the runs), ``hung`` (a service
that accepts and never answers: SIGSTOP). Every hooked cell's sessions get the documented prompt-hook budget,
``MEMSIM_HOOK_TIMEOUT`` = :data:`HOOK_TIMEOUT_S` (1 s), in their own environment: a host passes no variable of
the calling process to its hooks, so the budget is the bench's, never the caller's. Each run is one host session
per cell of ``prompts`` prompts (2; quick 1) asking about a live high-credibility decision in the cell's own store,
so the pointer block is volunteered; the cells are interleaved run by run (their order rotates each run), never
cell after cell.

Per prompt the time from the host's start (``first``: prompt 0) or the prompt's submission (``later``) to its first
model request (:func:`harness.hosts.wire.prompt_latencies`); p50/p95 per cell. A cell's **overhead** is its p50
minus ``none``'s; the cells are separate sessions (unpaired samples), so the overhead's 95% interval is the
Hodges-Lehmann shift's with the exact Mann-Whitney interval (:func:`harness.stats.hodges_lehmann`, valid for any
number of runs, continuous latencies differing by a shift; bounds exist from :data:`QUICK_RUNS` runs per cell on).
Where the cold time goes: the hook wall times (``hooktee.sh`` records) per event. In the ``served`` and ``cold``
runs, the time from the session's last SessionEnd hook start to the moment its spool entry is marked filed (a
watcher thread reads the spool's entry metadata every 10 ms), with the service (filed through it) and without (the
detached filer).

:func:`probe_rows` lays the sessions out in the per-probe run format (:mod:`harness.probes`): cluster = host,
probe = run index, row = cell, one latency column per prompt position.
"""

from __future__ import annotations

import json
import math
import shlex
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import percentile
from benchmarks.progress import as_tracker
from harness.stats import CONFIDENCE, hodges_lehmann
from tortoise_sim.hook_client import DEFAULT_TIMEOUT_S, TIMEOUT_ENV

CELLS = ("none", "cold", "served", "hung")
HOOKED = CELLS[1:]
POSITIONS = ("first", "later")
PROMPTS = ("What database does the ledger service use?", "And which version of it does the ledger service run?")
POINT = {"ref": "ledger", "kind": "decision", "text": "The ledger service stores its records in Postgres 16",
         "credibility": "high", "live": True}
HOOK_TIMEOUT_S = DEFAULT_TIMEOUT_S
"""The documented prompt-hook budget (``MEMSIM_HOOK_TIMEOUT``), set in every hooked cell's environment."""
FULL_RUNS = 30
"""Runs per latency cell of the full run."""


def _fewest_runs(confidence: float = CONFIDENCE) -> int:
    """The fewest runs per cell (both cells alike) at which the exact Mann-Whitney interval has bounds: the
    smallest n with P(U = 0) = 1 / C(2n, n) <= (1 - confidence) / 2."""
    n = 1
    while 1 / math.comb(2 * n, n) > (1 - confidence) / 2:
        n += 1
    return n


QUICK_RUNS = _fewest_runs()
"""Runs per latency cell of a quick run: the fewest that give every overhead a 95% interval (4)."""
PROBE_METRICS = {"first": "latency_first_s", "later": "latency_later_s"}
"""The per-run table's latency column of each prompt position."""


def hook_budget_s(env: Mapping[str, str]) -> float:
    """The prompt-hook budget the hooks of a session with environment ``env`` read: ``MEMSIM_HOOK_TIMEOUT`` there
    (a positive number), else the documented default (a host passes none of the caller's variables on)."""
    try:
        value = float(env.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if 0 < value < float("inf") else DEFAULT_TIMEOUT_S


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
        if name != "none":  # the documented budget, set rather than inherited (hung: the most a hook waits)
            self.env[TIMEOUT_ENV] = f"{HOOK_TIMEOUT_S:g}"
        self.mem = _Memory(exe, self.db, self.env)
        values = {"memsim": shlex.quote(exe), "db": shlex.quote(str(self.db)), "harness": HARNESS[host]}
        self.lines = {} if name == "none" else {a: expand(line, values) for a, line in TORTOISE_HOOKS.items()}

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
            t0 = time.perf_counter()
            run = run_session(self.host, spec, run_dir, isolation=isolation)
            wall = time.perf_counter() - t0
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
                "timed_out": run.timed_out, "isolation": run.isolation, "version": run.version, "wall_s": wall,
                "latency_s": [x["latency_s"] for x in lat],
                "hooks": [{"event": r["event"], "wall_s": None if r["end"] is None else r["end"] - r["start"],
                           "rc": r["rc"], "signal": r["signal"]} for r in records],
                "session_end_to_filed_s": None if filed is None or t_end is None else filed - t_end,
                "filed_seen": filed is not None}

    def close(self) -> None:
        self.mem.close()


def latency_cells(host: str, root: Path, *, runs: int, prompts: int, isolation: str,
                  track: Callable[..., Any], exe: str) -> dict[str, Any]:
    """The four latency cells of ``host``, interleaved run by run (the order rotates by one cell each run), with
    the phase's wall time (``seconds``: preparing, the warm-up and every run) and each run's (``run_seconds``)."""
    t0 = time.perf_counter()
    sockdir = Path(tempfile.mkdtemp(prefix="mwb-"))
    cells = {c: _Cell(c, host, root / c, sockdir, exe) for c in CELLS}
    out: dict[str, Any] = {"runs": runs, "prompts": prompts, "sessions": [], "prepare": {}, "run_seconds": []}
    tracker = as_tracker(track)
    try:
        with tracker.phase(f"{host}: preparing the latency cells"):
            for c in CELLS:
                out["prepare"][c] = cells[c].prepare()
            out["warmup"] = cells["served"].session(PROMPTS[:1], isolation, label="warmup")
            out["prepare"]["hung"].append(cells["hung"].hang())
        for r in tracker(range(runs), description=f"{host}: latency cells", total=runs):
            t_run = time.perf_counter()
            order = CELLS[r % len(CELLS):] + CELLS[:r % len(CELLS)]
            for c in order:
                res = cells[c].session(PROMPTS[:prompts], isolation, label=f"r{r}")
                res["run"] = r
                out["sessions"].append(res)
            out["run_seconds"].append(round(time.perf_counter() - t_run, 2))
    finally:
        for c in cells.values():
            c.close()
        shutil.rmtree(sockdir, ignore_errors=True)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return summarize_cells(out)


def _position_values(sessions: Sequence[dict[str, Any]], pos: str) -> list[float | None]:
    """Every latency of the prompt position ``pos`` (``first``: prompt 0; ``later``: every later prompt)."""
    if pos == "first":
        return [s["latency_s"][0] if s["latency_s"] else None for s in sessions]
    return [x for s in sessions for x in s["latency_s"][1:]]


def overhead_interval(cell: Sequence[float | None], none: Sequence[float | None]) -> dict[str, Any]:
    """The shift of ``cell``'s latencies over ``none``'s: the Hodges-Lehmann estimate and its 95% interval from
    the exact Mann-Whitney distribution (``lo``/``hi`` None when there are too few runs for one)."""
    x = [v for v in cell if v is not None]
    y = [v for v in none if v is not None]
    return hodges_lehmann(x, y, CONFIDENCE).to_dict()


def summarize_cells(out: dict[str, Any]) -> dict[str, Any]:
    """Per cell and prompt position the latency statistics, the overhead against ``none`` (``overhead_p50``: the
    difference of the p50s; ``overhead_interval``: the Hodges-Lehmann shift with its 95% interval), the hook wall
    times per event and the session-end filing. Reads only ``out["sessions"]``, so results written before the
    intervals existed are summarised the same way from their sessions."""
    sessions = out["sessions"]
    by_cell = {c: [s for s in sessions if s["cell"] == c] for c in CELLS}
    cells: dict[str, Any] = {}
    for c, ss in by_cell.items():
        hooks: dict[str, list[float]] = {}
        for s in ss:
            for h in s["hooks"]:
                if h["wall_s"] is not None:
                    hooks.setdefault(h["event"], []).append(h["wall_s"])
        cells[c] = {**{pos: _stats(_position_values(ss, pos)) for pos in POSITIONS},
                    "hook_wall_s": {e: _stats(v) for e, v in sorted(hooks.items())},
                    "session_end_to_filed_s": _stats([s["session_end_to_filed_s"] for s in ss])
                    if c in ("served", "cold") else None,
                    "exit_codes": sorted({str(s["exit_code"]) for s in ss}),
                    "timed_out": sum(1 for s in ss if s["timed_out"])}
    for c in CELLS:
        for pos in POSITIONS:
            base, me = cells["none"][pos]["p50"], cells[c][pos]["p50"]
            cells[c][pos]["overhead_p50"] = None if base is None or me is None else me - base
            cells[c][pos]["overhead_interval"] = (
                overhead_interval(_position_values(by_cell[c], pos), _position_values(by_cell["none"], pos))
                if c != "none" else None)
    out["cells"] = cells
    return out


# ------------------------------------------------------------------------------------------------ per-run table
def probe_rows(latency: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The latency sessions as rows of the per-probe run format (:mod:`harness.probes`): workload ``hosts``,
    cluster = host, probe = run index, row = cell (arm ``none`` or ``tortoise``), category ``latency``; metrics
    the first and later prompt's latency, the session's wall time, whether it timed out and (served, cold) the
    session end to filed time. The warm-up session is not a run and is left out."""
    rows = []
    for host, lc in latency.items():
        for s in lc["sessions"]:
            lat = list(s["latency_s"])
            rows.append({"workload": "hosts", "cluster": host, "probe": str(s["run"]), "category": "latency",
                         "abstention": False, "has_evidence": False, "row": s["cell"],
                         "arm": "none" if s["cell"] == "none" else "tortoise",
                         PROBE_METRICS["first"]: lat[0] if lat else None,
                         PROBE_METRICS["later"]: lat[1] if len(lat) > 1 else None,
                         "session_s": s.get("wall_s"), "timed_out": bool(s["timed_out"]),
                         "session_end_to_filed_s": s["session_end_to_filed_s"]})
    return rows


def write_probe_table(path: Path, latency: Mapping[str, Mapping[str, Any]], *, data: str,
                      config: Mapping[str, Any]) -> Path:
    """``hosts.probes.parquet``: :func:`probe_rows` through :func:`harness.probes.write_probes`, one probe set per
    host (its runs) and the two latency columns as headline metrics."""
    from harness.probes import probe_table, write_probes

    table = probe_table(probe_rows(latency))
    kinds = {m: "mean" for m in (*PROBE_METRICS.values(), "session_s", "session_end_to_filed_s")}
    return write_probes(path, table, data=data, config=config, kinds=kinds,
                        probe_sets={h: {"cluster": [h]} for h in latency}, stratify=False,
                        headline_metrics=list(PROBE_METRICS.values()))
