"""``memsim bench serve``: the Tortoise hook end to end, without and with the resident service.

What is timed is what a harness sees: **process spawn to JSON on stdout** of the real console entry
``memsim tortoise hook-volunteer --harness claude --db STORE`` fed a Claude Code ``UserPromptSubmit`` payload on
stdin (``subprocess.Popen`` + ``communicate``; the hook exits right after flushing its output).

Sections, per store size (1e3 / 1e4 / 1e5 points by default):

- **cold** (no service): the hook client finds no socket and runs the in-process path (read-only Kuzu, numpy
  MiniLM, the search/why caches built in the process);
- **warm** (service): ``python -m tortoise_sim.service`` holds the store, the hook is a socket round trip;
- **legacy** (1e3 only): today's typer command body (``harness.cli.main`` app in-process: typer, sentence-transformers,
  read-write Kuzu open, no fast exit), for the before/after ratio;
- **first volunteer after a capture**: a capture is sent to the service, then one hook is spawned at once
  (the service refreshes its caches after the write before it answers the capture);
- **load** (largest size): 8 concurrent hook clients (each a loop of spawned hook processes, alternating retrieval
  and courtesy prompts) for 60 s while ``memsim tortoise capture`` runs every 5 s through the service: p50 / p95 /
  p99, throughput, errors (non-zero exit, a traceback on stderr, output that is not the harness JSON, or a
  retrieval prompt that printed nothing while the same prompt fired before the load), and the latency of the first
  hook started after each capture returned;
- **service memory**: VmRSS of the service process after warm-up and after the load.

Prompts: retrieval = synthetic CBR-world questions (explicit asks, so the pipeline always searches); courtesy =
short thanks (no graph access, TOR-38). Stores: facts about the world's entities, MiniLM vectors from
sentence-transformers in batches, written with ``bulk_create_points`` (as ``benchmarks.cost_tortoise``), cached
under ``--cache-dir`` (default ``~/.cache/memsim/bench-serve``) and copied per run (the load test writes).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import machine_description, md_table, meta_block, percentile, write_results
from benchmarks.progress import as_tracker

COURTESY = ["thanks!", "great, thank you", "ok, got it", "perfect, thanks a lot", "awesome", "thank you!"]
HOOK_ENV_DROP = ("MEMSIM_TORTOISE_SOCKET", "MEMSIM_TORTOISE_DB")


def _memsim() -> str:
    exe = Path(sys.executable).parent / "memsim"
    return str(exe) if exe.exists() else "memsim"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in HOOK_ENV_DROP}
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _payload(prompt: str, i: int = 0) -> bytes:
    return json.dumps({"session_id": f"bench-{i}", "hook_event_name": "UserPromptSubmit", "prompt": prompt,
                       "cwd": os.getcwd()}).encode()


def spawn_hook(db: Path, prompt: str, i: int = 0, cmd: list[str] | None = None) -> dict[str, Any]:
    """One hook process, timed from spawn to stdout EOF."""
    argv = cmd or [_memsim(), "tortoise", "hook-volunteer", "--harness", "claude", "--db", str(db)]
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    out, err = p.communicate(_payload(prompt, i), timeout=600)
    dt = time.perf_counter() - t0
    return {"s": dt, "rc": p.returncode, "stdout": out.decode("utf-8", "replace"),
            "stderr": err.decode("utf-8", "replace")}


LEGACY_CMD = [sys.executable, "-c", "import sys; from harness.cli.main import app; sys.argv[0] = 'memsim'; app()"]


def _summary(xs: list[float]) -> dict[str, Any]:
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "p50_ms": 1000 * statistics.median(xs), "p95_ms": 1000 * percentile(xs, 95),
            "p99_ms": 1000 * percentile(xs, 99), "mean_ms": 1000 * statistics.fmean(xs), "max_ms": 1000 * max(xs)}


def _bad(r: dict[str, Any]) -> str | None:
    """Why a hook run counts as an error, else None. A hook whose service answered too late (past
    ``MEMSIM_HOOK_TIMEOUT``) or badly prints nothing and exits 0, with its one ``memsim hook:`` note on stderr: an
    error here, whatever the prompt (a courtesy prompt prints nothing either way)."""
    if r["rc"] != 0:
        return f"exit {r['rc']}"
    if "Traceback" in r["stderr"]:
        return "traceback on stderr"
    if "did not answer within" in r["stderr"]:
        return "service answer past the hook timeout"
    if "memsim hook:" in r["stderr"]:
        return "hook failure note on stderr"
    if r["stdout"]:
        try:
            obj = json.loads(r["stdout"])
            assert r["stdout"].count("\n") == 1 and "hookSpecificOutput" in obj
        except (ValueError, AssertionError):
            return "output is not one line of harness JSON"
    return None


# ----------------------------------------------------------------------------------------------------- stores
def _facts(world: Any, n: int, seed: int) -> list[str]:
    from benchmarks.cost_tortoise import _facts as facts

    return facts(world, n, seed)


# The near-duplicate store: short decisions written from ten templates with small vocabularies, so most stored
# texts repeat another one word for word or differ in one slot; at 1e5 points every distinct text is stored tens
# of times, so vector scores tie (equal cosines up to the last bits) and lexical shared-token counts tie by the
# thousand: the near-tie settlement and the tie-breaks carry the ranking.
DECISION_TEMPLATES = (
    "decision: the {team} team uses {tool} for {area}",
    "decision: {team} moves the {meeting} to {day}",
    "decision: we keep {tool} as the {area} default",
    "decision: {team} owns the {service} service",
    "decision: release the {service} service every {day}",
    "decision: the {service} service stores its data in {db}",
    "decision: {team} reviews {area} changes on {day}",
    "decision: freeze {service} deploys before {day}",
    "decision: {team} picks {db} for {area}",
    "decision: the {meeting} happens at {time}",
)
DECISION_SLOTS = {
    "team": ("platform", "billing", "search", "data", "mobile", "infra", "payments", "growth"),
    "tool": ("terraform", "grafana", "sentry", "airflow", "kafka", "bazel", "jenkins", "vault"),
    "area": ("alerting", "deploys", "testing", "logging", "builds", "secrets", "metrics", "backups"),
    "meeting": ("standup", "retro", "planning", "demo", "sync"),
    "day": ("monday", "tuesday", "wednesday", "thursday", "friday", "sprint end", "month end"),
    "service": ("checkout", "auth", "ledger", "catalog", "gateway", "invoice", "profile", "ranking", "export",
                "notify"),
    "db": ("postgres", "mysql", "redis", "sqlite", "cassandra", "dynamodb"),
    "time": ("09:00", "09:30", "10:00", "11:00", "14:00", "16:30"),
}
STORE_KINDS = ("facts", "decisions")


def decisions(n: int, seed: int) -> list[str]:
    """``n`` short decisions, each a random template with random slot values (seeded)."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        tpl = rng.choice(DECISION_TEMPLATES)
        out.append(tpl.format(**{k: rng.choice(v) for k, v in DECISION_SLOTS.items()}))
    return out


def decision_questions(k: int, seed: int) -> list[str]:
    """Retrieval prompts for the decision store (explicit asks naming slot values, so the pipeline searches)."""
    import random

    rng = random.Random(seed + 55)
    forms = ("what did we decide about the {service} service?", "which database does the {team} team use for "
             "{area}?", "when is the {meeting} now?", "who owns the {service} service?",
             "what does the {team} team use for {area}?", "when do we release {service}?")
    return [rng.choice(forms).format(**{k2: rng.choice(v) for k2, v in DECISION_SLOTS.items()}) for _ in range(k)]


def build_store(cache_dir: Path, n: int, seed: int, track: Callable, kind: str = "facts"
                ) -> tuple[Path, dict[str, Any]]:
    """The cached store for ``n`` points (built on first use); returns its path and build info. ``kind``:
    "facts" (the CBR world's facts) or "decisions" (the near-duplicate store of :func:`decisions`)."""
    from benchmarks.cost_tortoise import PrecomputedMiniLM, _fill
    from benchmarks.worlds import CBRWorld
    from tortoise_sim.config import SimConfig
    from tortoise_sim.sdk import Tortoise
    from tortoise_sim.store import StepClock

    if kind not in STORE_KINDS:
        raise ValueError(f"store kind must be one of {STORE_KINDS}, got {kind!r}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    stem = f"serve_{n}_{seed}" if kind == "facts" else f"serve_{kind}_{n}_{seed}"
    path = cache_dir / f"{stem}.kuzu"
    marker = cache_dir / f"{stem}.json"
    if marker.exists() and path.exists():
        info = json.loads(marker.read_text(encoding="utf-8"))
        info["cached"] = True
        return path, info
    for p in cache_dir.glob(f"{stem}.kuzu*"):
        p.unlink() if p.is_file() else shutil.rmtree(p)
    facts = _facts(CBRWorld(seed=seed), n, seed) if kind == "facts" else decisions(n, seed)
    enc = PrecomputedMiniLM()
    t0 = time.perf_counter()
    with as_tracker(track).phase(f"embedding {len(set(facts)):,} texts for the {n:,}-point store"):
        enc.precompute(facts)
    embed_s = time.perf_counter() - t0
    t = Tortoise(path, config=SimConfig(), encoder=enc, clock=StepClock(), seed=seed)
    try:
        load_s = _fill(t, facts, track)
    finally:
        t.close()
    info = {"points": n, "store": kind, "distinct_texts": len(set(facts)), "embed_s": embed_s, "load_s": load_s,
            "bytes": _size(path)}
    marker.write_text(json.dumps(info), encoding="utf-8")
    info["cached"] = False
    return path, info


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


def _copy_store(src: Path, dst_dir: Path) -> Path:
    dst = dst_dir / src.name
    for p in src.parent.glob(src.name + "*"):
        if p.is_file():
            shutil.copy2(p, dst_dir / p.name)
    return dst


# ----------------------------------------------------------------------------------------------------- service
class Service:
    def __init__(self, db: Path) -> None:
        from tortoise_sim.hook_client import socket_path_for

        self.db = db
        self.sock = socket_path_for(str(db))
        self.pid: int | None = None
        self.start_s: float | None = None

    def __enter__(self) -> Service:
        from tortoise_sim.service import start_detached

        t0 = time.perf_counter()
        res = start_detached(self.db, self.sock, timeout=900.0)
        self.start_s = time.perf_counter() - t0
        self.pid = res["pid"]
        return self

    def status(self, samples: bool = False) -> dict[str, Any]:
        from tortoise_sim.hook_client import call

        return call(self.sock, "status", {"samples": True} if samples else None, timeout=600.0) or {}

    def server_times(self, since: int) -> dict[str, Any]:
        """The service's own times of the retrieval hooks it answered after its ``hook_count`` was ``since``
        (status ``hook_samples``): per part, p50 / p95 / max in ms, and how many were answered during a write."""
        st = self.status(samples=True)
        fields, rows = st.get("hook_sample_fields") or [], st.get("hook_samples") or []
        rows = rows[len(rows) - min(len(rows), int(st.get("hook_count", 0)) - since):]
        out: dict[str, Any] = {"n": len(rows), "snapshot": sum(bool(r[-1]) for r in rows)}
        for j, f in enumerate(fields):
            if f != "snapshot" and rows:
                xs = [float(r[j]) for r in rows]
                out[f] = {"p50": statistics.median(xs), "p95": percentile(xs, 95), "max": max(xs)}
        return out

    def capture(self, i: int) -> float:
        from tortoise_sim.hook_client import call

        t0 = time.perf_counter()
        call(self.sock, "capture", {"conversation": [
            {"role": "user", "content": f"decision: bench capture {i} keeps the weekly release train"},
            {"role": "assistant", "content": f"Noted: capture {i}."}], "session_id": f"bench-cap-{i}"},
            timeout=600.0)
        return time.perf_counter() - t0

    def volunteer_call(self, prompt: str) -> float:
        """One ``hook_volunteer`` request on the socket (no process spawn), timed."""
        from tortoise_sim.hook_client import call

        t0 = time.perf_counter()
        call(self.sock, "hook_volunteer", {"stdin": _payload(prompt).decode(), "harness": "claude"}, timeout=600.0)
        return time.perf_counter() - t0

    def __exit__(self, *exc: object) -> None:
        from tortoise_sim.service import stop

        stop(self.sock, timeout=120.0)


def capture_cli(db: Path, i: int) -> dict[str, Any]:
    conv = json.dumps([{"role": "user", "content": f"decision: load capture {i} moves the standup to 10:00"},
                       {"role": "assistant", "content": f"Noted: load capture {i}."}])
    t0 = time.perf_counter()
    p = subprocess.run([_memsim(), "tortoise", "capture", "--db", str(db), "--session-id", f"load-{i}"],
                       input=conv.encode(), capture_output=True, env=_env(), timeout=900)
    return {"s": time.perf_counter() - t0, "rc": p.returncode, "stderr": p.stderr.decode("utf-8", "replace")[-300:]}


# ----------------------------------------------------------------------------------------------------- sections
def latency_block(db: Path, prompts: list[str], n: int, label: str, track: Callable,
                  cmd: list[str] | None = None) -> dict[str, Any]:
    times, errors, fired, outs = [], [], 0, []
    for i in track(range(n), description=label, total=n):
        r = spawn_hook(db, prompts[i % len(prompts)], i, cmd=[*cmd, "--db", str(db)] if cmd else None)
        times.append(r["s"])
        bad = _bad(r)
        if bad:
            errors.append(bad)
        fired += bool(r["stdout"])
        outs.append(r["stdout"])
    return {**_summary(times), "errors": len(errors), "error_kinds": sorted(set(errors)), "fired": fired,
            "outputs": outs}


def interleaved_blocks(db: Path, prompts: list[str], n: int, label: str, track: Callable,
                       cmds: dict[str, list[str] | None]) -> dict[str, dict[str, Any]]:
    """:func:`latency_block` for several hook commands at once, alternating between them prompt by prompt (so a
    busy moment of a shared machine falls on all of them alike) and swapping who goes first on every prompt (the
    second one meets the query already encoded); ``None`` = the default ``memsim``."""
    times: dict[str, list[float]] = {k: [] for k in cmds}
    errors: dict[str, list[str]] = {k: [] for k in cmds}
    fired = dict.fromkeys(cmds, 0)
    outs: dict[str, list[str]] = {k: [] for k in cmds}
    for i in track(range(n), description=label, total=n):
        order = list(cmds.items())
        for k, cmd in order[::-1] if i % 2 else order:  # who goes first alternates (the second meets warm caches)
            r = spawn_hook(db, prompts[i % len(prompts)], i, cmd=[*cmd, "--db", str(db)] if cmd else None)
            times[k].append(r["s"])
            bad = _bad(r)
            if bad:
                errors[k].append(bad)
            fired[k] += bool(r["stdout"])
            outs[k].append(r["stdout"])
    return {k: {**_summary(times[k]), "errors": len(errors[k]), "error_kinds": sorted(set(errors[k])),
                "fired": fired[k], "outputs": outs[k]} for k in cmds}


def hook_cmd(exe: str) -> list[str]:
    return [exe, "tortoise", "hook-volunteer", "--harness", "claude"]


def install_info(exe: str) -> dict[str, Any]:
    """How the ``memsim`` console script ``exe`` is installed (its interpreter from the shebang line; editable or
    not from the distribution's ``direct_url.json``) and that interpreter's bare start (``python -c pass``, p50
    of 10 spawns, ms)."""
    path = Path(exe) if os.sep in exe else Path(shutil.which(exe) or exe)
    try:
        first = path.read_text(encoding="utf-8", errors="replace").splitlines()[0]
        py = first[2:].strip().split()[0] if first.startswith("#!") else sys.executable
    except (OSError, IndexError):
        py = sys.executable
    probe = ("import importlib.metadata as m, json\nd = m.distribution('memsim').read_text('direct_url.json')\n"
             "print(json.dumps(bool(d) and json.loads(d).get('dir_info', {}).get('editable', False)))")
    r = subprocess.run([py, "-c", probe], capture_output=True, text=True, env=_env(), timeout=120, cwd="/")
    editable = json.loads(r.stdout.strip() or "null") if r.returncode == 0 else None
    starts = []
    for _ in range(10):
        t0 = time.perf_counter()
        subprocess.run([py, "-c", "pass"], capture_output=True, env=_env(), timeout=60, cwd="/")
        starts.append(time.perf_counter() - t0)
    return {"exe": str(path), "python": py, "editable": editable,
            "python_start_p50_ms": 1000 * statistics.median(starts)}


def load_test(db: Path, svc: Service, retrieval: list[str], expected: dict[str, str], *, clients: int,
              seconds: float, capture_every: float) -> dict[str, Any]:
    stop_at = time.perf_counter() + seconds
    lock = threading.Lock()
    samples: list[dict[str, Any]] = []
    captures: list[dict[str, Any]] = []

    def client(k: int) -> None:
        i = 0
        while time.perf_counter() < stop_at:
            retrieval_turn = i % 2 == 0
            prompt = retrieval[(k * 131 + i) % len(retrieval)] if retrieval_turn else COURTESY[i % len(COURTESY)]
            t_start = time.perf_counter()
            r = spawn_hook(db, prompt, k * 100000 + i)
            bad = _bad(r)
            if not bad and retrieval_turn and expected.get(prompt) and not r["stdout"]:
                bad = "retrieval prompt printed nothing"
            with lock:
                samples.append({"t0": t_start, "t1": t_start + r["s"], "s": r["s"], "kind":
                                "retrieval" if retrieval_turn else "courtesy", "error": bad})
            i += 1

    def writer() -> None:
        j = 0
        next_t = time.perf_counter() + capture_every
        while True:
            now = time.perf_counter()
            if next_t > stop_at:
                return
            if now < next_t:
                time.sleep(min(0.05, next_t - now))
                continue
            t0 = time.perf_counter()
            c = capture_cli(db, j)
            with lock:
                captures.append({"t0": t0, "t1": t0 + c["s"], **c})
            j += 1
            next_t += capture_every

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)] + [threading.Thread(
        target=writer)]
    t_begin = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t_begin
    ok = [s for s in samples if not s["error"]]
    after_capture = []
    for c in captures:
        nxt = [s for s in samples if s["t0"] >= c["t1"] and s["kind"] == "retrieval"]
        if nxt:
            after_capture.append(min(nxt, key=lambda s: s["t0"])["s"])
    errs: dict[str, int] = {}
    for s in samples:
        if s["error"]:
            errs[s["error"]] = errs.get(s["error"], 0) + 1
    return {"clients": clients, "seconds": wall, "hooks": len(samples), "errors": sum(errs.values()),
            "error_kinds": errs, "throughput_per_s": len(samples) / wall,
            "all": _summary([s["s"] for s in samples]),
            "retrieval": _summary([s["s"] for s in ok if s["kind"] == "retrieval"]),
            "courtesy": _summary([s["s"] for s in ok if s["kind"] == "courtesy"]),
            "captures": len(captures), "capture_errors": sum(c["rc"] != 0 for c in captures),
            "capture_s": [round(c["s"], 3) for c in captures],
            "first_retrieval_after_capture": _summary(after_capture),
            "timeline": [(round(s["t0"] - t_begin, 3), round(s["s"], 4), s["kind"], bool(s["error"]))
                         for s in samples],
            "capture_times": [(round(c["t0"] - t_begin, 3), round(c["s"], 3)) for c in captures]}


def warm_blocks(row: dict[str, Any], db: Path, svc: Service, retrieval: list[str], n_warm: int, n: int,
                track: Callable, alt_exe: str | None) -> None:
    """The warm courtesy and retrieval hooks through ``svc`` (``warm_courtesy``, ``warm_retrieval``, the service's
    own times ``warm_retrieval_server``); with ``alt_exe`` (another install's ``memsim``) the same prompts through
    it too, alternating with the default (``warm_courtesy_alt``, ``warm_retrieval_alt``)."""
    cmds: dict[str, list[str] | None] = {"": None}
    if alt_exe:
        cmds["_alt"] = hook_cmd(alt_exe)
    for k, b in interleaved_blocks(db, COURTESY, n_warm, f"warm courtesy {n:,}", track, cmds).items():
        row[f"warm_courtesy{k}"] = b
    since = svc.status().get("hook_count", 0)
    for k, b in interleaved_blocks(db, retrieval, n_warm, f"warm retrieval {n:,}", track, cmds).items():
        row[f"warm_retrieval{k}"] = b
    row["warm_retrieval_server"] = svc.server_times(since)
    if alt_exe:
        row["warm_alt_equals_warm"] = sum(a == b for a, b in zip(row["warm_retrieval"]["outputs"],
                                                                row["warm_retrieval_alt"]["outputs"], strict=True))


def decision_section(src: Path, n: int, tmp: Path, prompts: list[str], *, quick: bool, track: Callable,
                     alt_exe: str | None) -> dict[str, Any]:
    """The near-duplicate decision store at ``n`` points: cold retrieval, then warm courtesy / retrieval through
    the service (and ``alt_exe``), the service's own times, cold == warm output, the service's memory."""
    work = tmp / f"d{n}"
    work.mkdir()
    db = _copy_store(src, work)
    n_warm, n_cold = (10, 2) if quick else (30, 5)
    row: dict[str, Any] = {"points": n, "store": "decisions"}
    row["cold_retrieval"] = latency_block(db, prompts, n_cold, f"cold retrieval {n:,} (decisions)", track)
    with Service(db) as svc:
        row["service_start_s"] = svc.start_s
        row["service_rss_after_warm_bytes"] = svc.status().get("rss_bytes")
        warm_blocks(row, db, svc, prompts, n_warm, n, track, alt_exe)
        row["cold_equals_warm"] = sum(a == b for a, b in zip(row["cold_retrieval"]["outputs"],
                                                            row["warm_retrieval"]["outputs"], strict=False))
        row["cold_equals_warm_of"] = min(len(row["cold_retrieval"]["outputs"]), len(row["warm_retrieval"]["outputs"]))
        row["service_rss_end_bytes"] = svc.status().get("rss_bytes")
    for key in list(row):
        if isinstance(row[key], dict):
            row[key].pop("outputs", None)
    shutil.rmtree(work, ignore_errors=True)
    return row


def size_section(src: Path, n: int, tmp: Path, retrieval: list[str], *, quick: bool, track: Callable,
                 load: bool, legacy: bool, load_seconds: float, echo: Callable,
                 alt_exe: str | None = None) -> dict[str, Any]:
    work = tmp / f"n{n}"
    work.mkdir()
    db = _copy_store(src, work)
    n_warm, n_cold = (10, 3) if quick else (30, 10)
    row: dict[str, Any] = {"points": n}
    # cold: no service
    row["cold_courtesy"] = latency_block(db, COURTESY, n_cold, f"cold courtesy {n:,}", track)
    row["cold_retrieval"] = latency_block(db, retrieval, n_cold, f"cold retrieval {n:,}", track)
    if legacy:
        row["legacy_courtesy"] = latency_block(db, COURTESY, 2 if quick else 3, f"legacy courtesy {n:,}", track,
                                               cmd=[*LEGACY_CMD, "tortoise", "hook-volunteer", "--harness",
                                                    "claude"])
        row["legacy_retrieval"] = latency_block(db, retrieval, 2 if quick else 3, f"legacy retrieval {n:,}",
                                                track, cmd=[*LEGACY_CMD, "tortoise", "hook-volunteer",
                                                            "--harness", "claude"])
    with Service(db) as svc:
        st = svc.status()
        row["service_start_s"] = svc.start_s
        row["service_rss_after_warm_bytes"] = st.get("rss_bytes")
        warm_blocks(row, db, svc, retrieval, n_warm, n, track, alt_exe)
        # same output cold and warm (before any write)
        row["cold_equals_warm"] = sum(a == b for a, b in zip(row["cold_retrieval"]["outputs"],
                                                            row["warm_retrieval"]["outputs"], strict=False))
        row["cold_equals_warm_of"] = min(len(row["cold_retrieval"]["outputs"]),
                                         len(row["warm_retrieval"]["outputs"]))
        expected = {retrieval[i % len(retrieval)]: o for i, o in enumerate(row["warm_retrieval"]["outputs"])}
        # first volunteer after a capture
        cap_s, first_s, first_call_s, first_call_server = [], [], [], []
        for i in track(range(3 if quick else 5), description=f"first volunteer after a capture {n:,}"):
            cap_s.append(svc.capture(i))
            r = spawn_hook(db, retrieval[i % len(retrieval)], i)
            first_s.append(r["s"])
            svc.capture(100 + i)  # and the service side alone: one socket call right after a capture
            since = svc.status().get("hook_count", 0)
            first_call_s.append(svc.volunteer_call(retrieval[(i + 7) % len(retrieval)]))
            first_call_server.append(svc.server_times(since).get("total_ms", {}).get("p50"))
        row["capture_s"] = _summary(cap_s)
        row["first_after_capture"] = _summary(first_s)
        row["first_call_after_capture"] = _summary(first_call_s)
        row["first_call_after_capture_server_ms"] = first_call_server
        row["cache_refresh_s"] = svc.status().get("last_cache_refresh_s")
        if load:
            echo(f"load test at {n:,} points: 8 clients x {load_seconds:.0f} s, capture every 5 s")
            since = svc.status().get("hook_count", 0)
            with as_tracker(track).phase(f"load test at {n:,} points ({load_seconds:.0f} s)"):
                row["load"] = load_test(db, svc, retrieval, expected, clients=8, seconds=load_seconds,
                                        capture_every=5.0)
            row["load"]["server"] = svc.server_times(since)
        st = svc.status()
        row["service_rss_end_bytes"] = st.get("rss_bytes")
        row["service_requests"] = st.get("requests")
        row["service_errors"] = st.get("errors")
    for key in list(row):
        if isinstance(row[key], dict):
            row[key].pop("outputs", None)
    shutil.rmtree(work, ignore_errors=True)
    return row


# ----------------------------------------------------------------------------------------------------- run
def run(out_dir: Path, *, quick: bool = False, seed: int = 0, track: Callable | None = None,
        echo: Callable[[str], Any] = print, sizes: list[int] | None = None, cache_dir: Path | None = None,
        load_seconds: float | None = None, decision_sizes: list[int] | None = None,
        hook_exe: str | None = None) -> list[Path]:
    """``sizes``: the CBR-fact stores; ``decision_sizes``: the near-duplicate decision stores (default 2,000 /
    20,000 / 100,000; quick 1,000; ``[]`` = none); ``hook_exe``: a second ``memsim`` (another install, e.g. a
    non-editable one) whose warm hooks are timed beside the default's through the same service."""
    import tempfile

    from benchmarks.worlds import CBRWorld

    track = as_tracker(track)
    t_start = time.perf_counter()
    sizes = sizes or ([300, 1000] if quick else [1000, 10_000, 100_000])
    if any(n < 10 for n in sizes):
        raise ValueError("sizes must be at least 10 points")
    load_seconds = load_seconds if load_seconds is not None else (15.0 if quick else 60.0)
    cache_dir = cache_dir or Path(os.environ.get("MEMSIM_BENCH_CACHE", Path.home() / ".cache" / "memsim"
                                                  / "bench-serve"))
    if decision_sizes is None:
        decision_sizes = [1000] if quick else [2000, 20_000, 100_000]
    if any(n < 10 for n in decision_sizes):
        raise ValueError("decision sizes must be at least 10 points")
    world = CBRWorld(seed=seed)
    retrieval = world.queries(40, seed=seed + 55).questions()
    installs = {"default": install_info(_memsim())}
    if hook_exe:
        installs["alt"] = install_info(hook_exe)
    builds, rows, decision_rows = [], [], []
    with tempfile.TemporaryDirectory(prefix="mbs", dir="/tmp") as td:
        for n in sizes:
            src, info = build_store(cache_dir, n, seed, track)
            builds.append(info)
            echo(f"store {n:,} points: {'cached' if info['cached'] else 'built'} "
                 f"(embed {info['embed_s']:.0f} s, load {info['load_s']:.0f} s)")
            rows.append(size_section(src, n, Path(td), retrieval, quick=quick, track=track,
                                     load=n == max(sizes), legacy=n == min(sizes), load_seconds=load_seconds,
                                     echo=echo, alt_exe=hook_exe))
        prompts = decision_questions(40, seed)
        for n in decision_sizes:
            src, info = build_store(cache_dir, n, seed, track, kind="decisions")
            builds.append(info)
            echo(f"decision store {n:,} points ({info['distinct_texts']:,} distinct texts): "
                 f"{'cached' if info['cached'] else 'built'}")
            decision_rows.append(decision_section(src, n, Path(td), prompts, quick=quick, track=track,
                                                  alt_exe=hook_exe))
    payload = {"name": "serve", "meta": {"machine": machine_description(), "quick": quick, "seeds": {"world": seed},
                                         "sizes": sizes, "decision_sizes": decision_sizes,
                                         "cache_dir": str(cache_dir), "installs": installs,
                                         "wall_s": time.perf_counter() - t_start},
               "builds": builds, "rows": rows, "decision_rows": decision_rows}
    payload["ratios"] = ratios(rows)
    payload["levels"] = levels(rows, decision_rows, installs)
    for r in payload["ratios"]:
        echo(r["text"])
    for lv in payload["levels"]:
        echo(f"{'met' if lv['met'] else 'NOT met'}: {lv['level']} -- {lv['measured']}")
    return write_results(out_dir, "serve", payload, render_markdown, figure(payload))


def _p50(row: dict[str, Any], key: str) -> float | None:
    return (row.get(key) or {}).get("p50_ms")


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        n = r["points"]
        for kind in ("retrieval", "courtesy"):
            c, w, leg = _p50(r, f"cold_{kind}"), _p50(r, f"warm_{kind}"), _p50(r, f"legacy_{kind}")
            if c and w:
                out.append({"key": f"cold_vs_warm_{kind}@{n}", "value": c / w,
                            "text": f"{kind} hook at {n:,} points: cold (no service) p50 {c:.0f} ms is {c / w:.1f}x "
                                    f"warm (service) p50 {w:.0f} ms"})
            if leg and w and c:
                out.append({"key": f"legacy_vs_warm_{kind}@{n}", "value": leg / w,
                            "text": f"{kind} hook at {n:,} points: legacy typer path p50 {leg:.0f} ms is "
                                    f"{leg / c:.1f}x the new cold path and {leg / w:.1f}x the warm path"})
    return out


FIRST_VOLUNTEER_TARGET_MS = 100


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0f} ms"


def first_volunteer_after_capture(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The one "first volunteer after a capture" number of the largest store: the hook a harness spawns, through
    the service, right after a capture returned (``first_after_capture``, spawn to JSON on stdout). The service's
    socket call alone (``first_call_after_capture``) and the capture's own time are returned beside it, as
    qualifiers; the in-process figure of ``benchmarks.engines`` (no service, no hook process) is another."""
    big = max(rows, key=lambda r: r["points"])
    f, fc = big.get("first_after_capture") or {}, big.get("first_call_after_capture") or {}
    refresh = big.get("cache_refresh_s")
    hook = f.get("p50_ms")
    return {"points": big["points"], "hook_p50_ms": hook, "hook_max_ms": f.get("max_ms"),
            "service_call_p50_ms": fc.get("p50_ms"), "service_call_max_ms": fc.get("max_ms"),
            "capture_p50_ms": (big.get("capture_s") or {}).get("p50_ms"),
            "cache_refresh_ms": None if refresh is None else 1000 * refresh,
            "target_ms": FIRST_VOLUNTEER_TARGET_MS, "met": hook is not None and hook <= FIRST_VOLUNTEER_TARGET_MS}


WARM_P50_TARGET_MS = 60  # warm retrieval hook at the largest store
WARM_P95_TARGET_MS = 100
WARM_P50_BEFORE_MS = {1000: 36, 10_000: 47}  # the previous run's warm p50 at the smaller stores: no slower
LOAD_RETRIEVAL_P95_TARGET_MS = 500
FIRST_CALL_TARGET_MS = 100  # the service's socket call right after a capture


def _part(server: dict[str, Any], field: str, stat: str) -> str:
    v = (server.get(field) or {}).get(stat)
    return "n/a" if v is None else f"{v:.0f} ms"


def _server_text(server: dict[str, Any] | None, stat: str) -> str:
    """The service-side parts of a hook (from its status samples), e.g. "service p50 40 ms = lock wait 0 ms +
    query encode 25 ms + search and why-blocks 15 ms"."""
    if not server or not server.get("n"):
        return "no service-side samples"
    return (f"service {stat} {_part(server, 'total_ms', stat)} (n={server['n']}): lock wait "
            f"{_part(server, 'lock_wait_ms', stat)}, query encode {_part(server, 'encode_ms', stat)}, search and "
            f"why-blocks {_part(server, 'search_why_ms', stat)}")


def _install_text(info: dict[str, Any] | None) -> str:
    if not info:
        return "install n/a"
    kind = {True: "editable install", False: "non-editable install"}.get(info.get("editable"), "install unknown")
    return f"{kind}, bare interpreter start p50 {_ms(info.get('python_start_p50_ms'))}"


def install_levels(rows: list[dict[str, Any]], decision_rows: list[dict[str, Any]],
                   installs: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The warm-hook p50 level at the largest store of each kind judged for the second install too (measured
    alternately with the default through the same service), with both installs' kinds and interpreter starts."""
    out = []
    if not installs or "alt" not in installs:
        return out
    for label, rs in (("", rows), (" (near-duplicate decision store)", decision_rows)):
        if not rs:
            continue
        big = max(rs, key=lambda r: r["points"])
        alt, dflt = big.get("warm_retrieval_alt") or {}, big.get("warm_retrieval") or {}
        if not alt.get("n"):
            continue
        out.append({"level": f"warm retrieval hook p50 <= {WARM_P50_TARGET_MS} ms at {big['points']:,} points"
                             f"{label}, hook from the second install",
                    "measured": f"p50 {_ms(alt.get('p50_ms'))} ({_install_text(installs.get('alt'))}) against "
                                f"{_ms(dflt.get('p50_ms'))} from the default ({_install_text(installs.get('default'))}"
                                f"), the two measured alternately; same output {big.get('warm_alt_equals_warm')}/"
                                f"{alt.get('n')}",
                    "met": (alt.get("p50_ms") or 1e9) <= WARM_P50_TARGET_MS})
    return out


def decision_levels(decision_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The warm-hook levels judged on the near-duplicate decision store (largest size; p50 at every size)."""
    out: list[dict[str, Any]] = []
    if not decision_rows:
        return out
    big = max(decision_rows, key=lambda r: r["points"])
    w, wc = big.get("warm_retrieval") or {}, big.get("warm_courtesy") or {}
    per_size = ", ".join(f"{r['points']:,}: {_ms((r.get('warm_retrieval') or {}).get('p50_ms'))}"
                         for r in decision_rows)
    out.append({"level": f"warm retrieval hook p50 <= {WARM_P50_TARGET_MS} ms at {big['points']:,} points "
                         "(near-duplicate decision store)",
                "measured": f"p50 {_ms(w.get('p50_ms'))} (by size {per_size}); courtesy hook p50 "
                            f"{_ms(wc.get('p50_ms'))}; {_server_text(big.get('warm_retrieval_server'), 'p50')}",
                "met": (w.get("p50_ms") or 1e9) <= WARM_P50_TARGET_MS})
    out.append({"level": f"warm retrieval hook p95 <= {WARM_P95_TARGET_MS} ms at {big['points']:,} points "
                         "(near-duplicate decision store)",
                "measured": f"p95 {_ms(w.get('p95_ms'))}; {_server_text(big.get('warm_retrieval_server'), 'p95')}",
                "met": (w.get("p95_ms") or 1e9) <= WARM_P95_TARGET_MS})
    same = sum(r.get("cold_equals_warm") or 0 for r in decision_rows)
    of = sum(r.get("cold_equals_warm_of") or 0 for r in decision_rows)
    out.append({"level": "cold (in-process) and warm (service) hooks print the same on the decision store",
                "measured": f"{same}/{of} identical outputs", "met": of > 0 and same == of})
    return out


def levels(rows: list[dict[str, Any]], decision_rows: list[dict[str, Any]] | None = None,
           installs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The expected levels, each judged on the measured rows, with the measured breakdown beside it (hook
    spawn-to-JSON; the no-store courtesy hook through the same service = spawn, client and socket; the service's
    own per-part times from its status samples); then those of the decision store and of a second install."""
    out = []
    big = max(rows, key=lambda r: r["points"])
    small = min(rows, key=lambda r: r["points"])
    w = big.get("warm_retrieval") or {}
    wc = big.get("warm_courtesy") or {}
    srv = big.get("warm_retrieval_server")
    out.append({"level": f"warm retrieval hook p50 <= {WARM_P50_TARGET_MS} ms at {big['points']:,} points",
                "measured": f"p50 {_ms(w.get('p50_ms'))}; courtesy hook through the service (spawn, client, "
                            f"socket, no store) p50 {_ms(wc.get('p50_ms'))}; {_server_text(srv, 'p50')}",
                "met": (w.get("p50_ms") or 1e9) <= WARM_P50_TARGET_MS})
    out.append({"level": f"warm retrieval hook p95 <= {WARM_P95_TARGET_MS} ms at {big['points']:,} points",
                "measured": f"p95 {_ms(w.get('p95_ms'))}; courtesy hook p95 {_ms(wc.get('p95_ms'))}; "
                            f"{_server_text(srv, 'p95')}",
                "met": (w.get("p95_ms") or 1e9) <= WARM_P95_TARGET_MS})
    for r in rows:
        before = WARM_P50_BEFORE_MS.get(r["points"])
        if before is None or r is big:
            continue
        wr = r.get("warm_retrieval") or {}
        out.append({"level": f"warm retrieval hook p50 <= {before} ms at {r['points']:,} points (no slower than "
                             "before)",
                    "measured": f"p50 {_ms(wr.get('p50_ms'))}; courtesy hook p50 "
                                f"{_ms((r.get('warm_courtesy') or {}).get('p50_ms'))}; "
                                f"{_server_text(r.get('warm_retrieval_server'), 'p50')}",
                    "met": (wr.get("p50_ms") or 1e9) <= before})
    c = small.get("cold_retrieval") or {}
    out.append({"level": f"cold retrieval hook (no service) <= 2 s at {small['points']:,} points",
                "measured": f"p50 {c.get('p50_ms', float('nan')):.0f} ms, max {c.get('max_ms', float('nan')):.0f} ms",
                "met": (c.get("p50_ms") or 1e9) <= 2000})
    fv = first_volunteer_after_capture(rows)
    fcs = [x for x in big.get("first_call_after_capture_server_ms") or [] if x is not None]
    out.append({"level": f"first service call after a capture <= {FIRST_CALL_TARGET_MS} ms at {fv['points']:,} "
                         "points (one hook_volunteer socket call right after the capture returned)",
                "measured": f"p50 {_ms(fv['service_call_p50_ms'])} / max {_ms(fv['service_call_max_ms'])}; of which "
                            f"in the service p50 {_ms(statistics.median(fcs) if fcs else None)}; the capture "
                            f"itself p50 {_ms(fv['capture_p50_ms'])} incl. the cache refresh (last refresh "
                            f"{_ms(fv['cache_refresh_ms'])})",
                "met": (fv["service_call_p50_ms"] or 1e9) <= FIRST_CALL_TARGET_MS})
    out.append({"level": f"first volunteer after a capture <= {fv['target_ms']} ms at {fv['points']:,} points, "
                         "through the service as a harness runs it (hook spawn to JSON)",
                "measured": f"hook p50 {_ms(fv['hook_p50_ms'])} / max {_ms(fv['hook_max_ms'])}; qualified: the "
                            f"service's socket call alone p50 {_ms(fv['service_call_p50_ms'])} / max "
                            f"{_ms(fv['service_call_max_ms'])}; the capture itself p50 {_ms(fv['capture_p50_ms'])} "
                            f"incl. the cache refresh (last refresh {_ms(fv['cache_refresh_ms'])})",
                "met": fv["met"]})
    load = big.get("load")
    if load:
        lr, ls = load.get("retrieval") or {}, load.get("server") or {}
        caps = sorted(load.get("capture_s") or [])
        cap_p50 = 1000 * statistics.median(caps) if caps else None
        out.append({"level": f"retrieval hook p95 <= {LOAD_RETRIEVAL_P95_TARGET_MS} ms under "
                             f"{load['clients']} concurrent hook clients with a capture every 5 s",
                    "measured": f"p95 {_ms(lr.get('p95_ms'))} (p50 {_ms(lr.get('p50_ms'))}, courtesy p95 "
                                f"{_ms((load.get('courtesy') or {}).get('p95_ms'))}); {_server_text(ls, 'p95')}; "
                                f"{ls.get('snapshot', 0)} answered during a write from the pre-write caches; the "
                                f"capture CLI p50 {_ms(cap_p50)}",
                    "met": (lr.get("p95_ms") or 1e9) <= LOAD_RETRIEVAL_P95_TARGET_MS})
        out.append({"level": "zero errors under 8 concurrent hook clients with a capture every 5 s",
                    "measured": f"{load['errors']} errors in {load['hooks']} hooks (a hook answered past "
                                f"MEMSIM_HOOK_TIMEOUT counts as one), {load['capture_errors']} failed captures of "
                                f"{load['captures']}",
                    "met": load["errors"] == 0 and load["capture_errors"] == 0})
    rss = big.get("service_rss_end_bytes")
    out.append({"level": f"service memory <= 1 GB at {big['points']:,} points",
                "measured": f"{rss / 2**20:.0f} MiB RSS" if rss else "n/a", "met": bool(rss) and rss <= 1e9})
    return out + decision_levels(decision_rows or []) + install_levels(rows, decision_rows or [], installs)


def render_markdown(p: dict[str, Any]) -> str:
    rows = p["rows"]
    lines = ["# Tortoise hook end to end: cold (no service) vs warm (resident service)", "",
             meta_block(p["meta"], p.get("run")), "",
             "Latency = spawn of `memsim tortoise hook-volunteer --harness claude --db STORE` to its stdout EOF "
             "(the JSON line), in milliseconds. Cold = no service (in-process fallback); warm = the resident "
             "service answers over its Unix socket; legacy = today's typer command body (sentence-transformers, "
             "read-write open).", ""]
    hdr = ["points", "prompt", "mode", "n", "p50", "p95", "p99", "max", "fired", "errors"]
    body = []
    modes = (("legacy", "legacy"), ("cold", "cold"), ("warm", "warm"), ("warm", "warm, second install"))
    for r in rows:
        for kind in ("courtesy", "retrieval"):
            for (mode, label), suffix in zip(modes, ("", "", "", "_alt"), strict=True):
                s = r.get(f"{mode}_{kind}{suffix}")
                if s:
                    body.append([f"{r['points']:,}", kind, label, s["n"], s["p50_ms"], s["p95_ms"], s["p99_ms"],
                                 s["max_ms"], s["fired"], s["errors"]])
    lines += [md_table(hdr, body, ".0f"), ""]
    installs = p["meta"].get("installs") or {}
    if installs:
        lines += ["Installs: " + "; ".join(f"{'second' if k == 'alt' else 'default'} `{v['exe']}` "
                                          f"({_install_text(v)})" for k, v in installs.items()), ""]
    drows = p.get("decision_rows") or []
    if drows:
        lines += ["## Near-duplicate store: short decisions from ten templates", "",
                  "Each point is one of ten short decision templates with its slots filled at random from small "
                  "vocabularies, so texts repeat word for word (vector scores tie) and share most tokens (lexical "
                  "counts tie). Same hooks and service as above; ms.", ""]
        dist = {b["points"]: b.get("distinct_texts") for b in p["builds"] if b.get("store") == "decisions"}
        body = []
        for r in drows:
            for kind, mode, label in (("courtesy", "warm", "warm"), ("courtesy", "warm_alt", "warm, second install"),
                                      ("retrieval", "cold", "cold"), ("retrieval", "warm", "warm"),
                                      ("retrieval", "warm_alt", "warm, second install")):
                key = f"{mode.split('_')[0]}_{kind}" + ("_alt" if mode.endswith("_alt") else "")
                s = r.get(key)
                if s:
                    body.append([f"{r['points']:,}", dist.get(r["points"]), kind, label, s["n"], s["p50_ms"],
                                 s["p95_ms"], s["max_ms"], s["fired"], s["errors"]])
        lines += [md_table(["points", "distinct texts", "prompt", "mode", "n", "p50", "p95", "max", "fired",
                            "errors"], body, ".0f"), ""]
        body = [[f"{r['points']:,}", (r.get("service_rss_end_bytes") or 0) / 2**20, srv["n"]]
                + [(srv.get(f) or {}).get("p50") for f in ("total_ms", "encode_ms", "search_why_ms")]
                + [f"{r.get('cold_equals_warm')}/{r.get('cold_equals_warm_of')}"]
                for r in drows for srv in [r.get("warm_retrieval_server") or {}] if srv.get("n")]
        lines += [md_table(["points", "service RSS MiB", "n", "service total p50", "query encode p50",
                            "search + why-blocks p50", "cold == warm output"], body, ".1f"), ""]
    hdr = ["points", "service start s", "RSS after warm MiB", "RSS end MiB", "capture p50 ms",
           "first hook after capture p50 ms", "first service call after capture p50 ms", "cache refresh ms",
           "cold == warm output"]
    body = [[f"{r['points']:,}", r.get("service_start_s"), (r.get("service_rss_after_warm_bytes") or 0) / 2**20,
             (r.get("service_rss_end_bytes") or 0) / 2**20, (r.get("capture_s") or {}).get("p50_ms"),
             (r.get("first_after_capture") or {}).get("p50_ms"),
             (r.get("first_call_after_capture") or {}).get("p50_ms"), 1000 * (r.get("cache_refresh_s") or 0),
             f"{r.get('cold_equals_warm')}/{r.get('cold_equals_warm_of')}"] for r in rows]
    lines += ["## Service", "", md_table(hdr, body, ".1f"), ""]
    parts = [("total_ms", "total"), ("lock_wait_ms", "lock wait"), ("encode_ms", "query encode"),
             ("search_why_ms", "search + why-blocks")]
    body = []
    for r in rows:
        for label, srv in (("warm", r.get("warm_retrieval_server")), ("load", (r.get("load") or {}).get("server"))):
            if srv and srv.get("n"):
                body.append([f"{r['points']:,}", label, srv["n"], srv.get("snapshot", 0)]
                            + [(srv.get(f) or {}).get(st) for f, _ in parts for st in ("p50", "p95")])
    if body:
        lines += ["## Inside the service: a retrieval hook's parts", "",
                  "The service's own time per retrieval hook (from its status samples), ms; \"during write\" = "
                  "answered from the pre-write caches while a write held the store.", "",
                  md_table(["points", "phase", "n", "during write"]
                           + [f"{lab} {st}" for _, lab in parts for st in ("p50", "p95")], body, ".1f"), ""]
    for r in rows:
        ld = r.get("load")
        if not ld:
            continue
        lines += [f"## Load at {r['points']:,} points: {ld['clients']} concurrent hook clients for "
                  f"{ld['seconds']:.0f} s, a `memsim tortoise capture` every 5 s", "",
                  md_table(["hooks", "throughput /s", "errors", "p50 ms", "p95 ms", "p99 ms", "retrieval p50",
                            "retrieval p95", "courtesy p50", "captures", "failed captures",
                            "first retrieval after capture p50 ms"],
                           [[ld["hooks"], ld["throughput_per_s"], ld["errors"], ld["all"].get("p50_ms"),
                             ld["all"].get("p95_ms"), ld["all"].get("p99_ms"), ld["retrieval"].get("p50_ms"),
                             ld["retrieval"].get("p95_ms"), ld["courtesy"].get("p50_ms"), ld["captures"],
                             ld["capture_errors"], ld["first_retrieval_after_capture"].get("p50_ms")]], ".1f"), ""]
        if ld["error_kinds"]:
            lines += [f"Errors by kind: {json.dumps(ld['error_kinds'])}", ""]
    kinds = any("store" in b for b in p["builds"])  # runs before the decision store list one kind
    lines += ["## Builds", "", md_table(["store"] * kinds + ["points", "embed s", "load s", "store MiB", "from cache"],
                                         [[b.get("store", "facts")] * kinds + [b["points"], b["embed_s"], b["load_s"],
                                           b["bytes"] / 2**20, b["cached"]] for b in p["builds"]], ".1f"), ""]
    lines += ["## Ratios", ""] + [f"- {r['text']}" for r in p["ratios"]] + [""]
    lines += ["## Expected levels", "",
              md_table(["level", "measured", "met"], [[lv["level"], lv["measured"], "yes" if lv["met"] else "NO"]
                                                      for lv in p["levels"]]), ""]
    return "\n".join(lines)


def figure(p: dict[str, Any]) -> Any:
    """Hook latency per store size (bars p50, whiskers p95; the legacy CLI's cold retrieval a cross over the cold
    retrieval bar; the warm level a line in the legend), and the load test's latencies over time (legends below
    the panels, never over the data)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    rows = p["rows"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.6))
    ax = axes[0]
    labels = [f"{r['points']:,}" for r in rows]
    x = np.arange(len(rows))
    series = [("cold_courtesy", "cold courtesy", "#9ecae1"), ("cold_retrieval", "cold retrieval", "#3182bd"),
              ("warm_courtesy", "warm courtesy", "#a1d99b"), ("warm_retrieval", "warm retrieval", "#31a354")]
    width = 0.2
    for j, (key, lab, col) in enumerate(series):
        vals = [(r.get(key) or {}).get("p50_ms") or np.nan for r in rows]
        p95 = [(r.get(key) or {}).get("p95_ms") or np.nan for r in rows]
        ax.bar(x + (j - 1.5) * width, vals, width, label=lab, color=col,
               yerr=[np.zeros(len(vals)), np.maximum(np.array(p95) - np.array(vals), 0)], capsize=3)
    for r_i, r in enumerate(rows):
        leg = (r.get("legacy_retrieval") or {}).get("p50_ms")
        if leg:
            ax.scatter([r_i - 0.5 * width], [leg], marker="x", color="crimson", zorder=5,
                       label="legacy cold retrieval (typer + sentence-transformers)")
    ax.axhline(WARM_P50_TARGET_MS, color="grey", ls="--", lw=1, label=f"warm p50 level {WARM_P50_TARGET_MS} ms")
    ax.set_yscale("log")
    top = max([(r.get(k) or {}).get("p95_ms") or 0 for r in rows for k in (*[s[0] for s in series],
                                                                               "legacy_retrieval")] + [1000])
    ax.set_ylim(top=top * 12)  # room for the legend above the bars
    ax.set_xticks(x, labels)
    ax.set_xlabel("points in the store")
    ax.set_ylabel("hook spawn -> JSON on stdout, ms (bar p50, whisker p95)")
    ax.set_title("Hook latency: cold (no service) vs warm (service)")
    ax.legend(fontsize=8, loc="upper left", ncol=2)
    ax = axes[1]
    big = max(rows, key=lambda r: r["points"])
    ld = big.get("load")
    if ld:
        tl = ld["timeline"]
        for kind, col in (("retrieval", "#31a354"), ("courtesy", "#9ecae1")):
            pts = [(t, 1000 * s) for t, s, k, e in tl if k == kind and not e]
            if pts:
                ax.scatter(*zip(*pts, strict=True), s=6, color=col, label=f"{kind} hook")
        errs = [(t, 1000 * s) for t, s, k, e in tl if e]
        if errs:
            ax.scatter(*zip(*errs, strict=True), s=14, color="red", marker="x", label="error")
        for j, (t, s) in enumerate(ld["capture_times"]):
            ax.axvspan(t, t + s, color="orange", alpha=0.25, label="capture (CLI via service)" if j == 0 else None)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("seconds into the load test")
        ax.set_ylabel("hook latency, ms")
        ax.set_title(f"{ld['clients']} concurrent hook clients at {big['points']:,} points "
                     f"({ld['throughput_per_s']:.1f} hooks/s, {ld['errors']} errors)")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncols=3)
    else:
        ax.axis("off")
    fig.tight_layout()
    return fig


def rerender(out_dir: Path) -> list[Path]:
    """Recompute the ratios and levels of ``out_dir/serve.json`` from its measured rows and rewrite
    ``serve.json`` and ``serve.md`` (the figure is kept as it is: it shows measured rows only). Nothing is
    re-measured."""
    payload = json.loads((out_dir / "serve.json").read_text(encoding="utf-8"))
    payload["ratios"] = ratios(payload["rows"])
    payload["levels"] = levels(payload["rows"], payload.get("decision_rows"), payload["meta"].get("installs"))
    return write_results(out_dir, "serve", payload, render_markdown(payload), None)


if __name__ == "__main__":  # pragma: no cover
    from benchmarks.common import default_out_dir

    if sys.argv[1:2] == ["--render"]:  # python -m benchmarks.serve --render DIR: re-render DIR/serve.json
        for written in rerender(Path(sys.argv[2]) if len(sys.argv) > 2 else default_out_dir()):
            print(f"wrote {written}")
    else:
        for written in run(Path(sys.argv[1]) if len(sys.argv) > 1 else default_out_dir()):
            print(f"wrote {written}")
