"""Running a host scenario: :func:`run_scenario` drives a real host through the scenario's sessions with the hook
lines of the memory under test, and records what reached the model, the latency, the store against the host's
transcript and the expectation checks."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harness.hosts.scenario.memory import _Memory
from harness.hosts.scenario.model import (
    EVENTS,
    EXAMPLES_DIR,
    HARNESS,
    SCENARIO_DIR,
    Expect,
    Scenario,
    ScenarioError,
    expand,
    hook_lines,
    tee_command,
)

PER_PROMPT_SESSION_END = frozenset({"codex"})
"""Hosts that run SessionStart and SessionEnd once per prompt (Codex: every ``codex exec`` / ``exec resume`` is a
process of its own, seen firing both hooks each time), so the session's last SessionEnd is its ``n - 1``-th."""


def _gate_target(host: str, prompt_index: int, n_prompts: int, lines: dict[str, str], where: str
                 ) -> tuple[str, int]:
    """The hook run a prompt's ``after`` operations wait on: the next prompt's UserPromptSubmit, or for the last
    prompt the session's last SessionEnd."""
    last_end = prompt_index if host in PER_PROMPT_SESSION_END else 0
    attr, event, n = (("user_prompt_submit", "UserPromptSubmit", prompt_index + 1) if prompt_index + 1 < n_prompts
                      else ("session_end", "SessionEnd", last_end))
    if attr not in lines:
        raise ScenarioError(f"{where}.after: operations after a prompt need a {attr} hook to wait on")
    return event, n


def _pending(db: Path, sid: str) -> bool:
    """The spool still has an unfiled entry for ``sid`` (whatever its retry time)."""
    from tortoise_sim.spool import Spool

    return sid in Spool(db.parent / "spool").due_sessions(1 << 62)


def _settled_turns(db: Path, sid: str, settle_s: float) -> tuple[list[dict[str, str]] | None, str | None]:
    """The store's turns for ``sid`` once no filing of it is pending in the spool, waiting up to ``settle_s`` for
    a filing still in flight (a detached one, or one waiting on the store lock); None and the reason when the store
    cannot be opened read-only all that time."""
    from harness.hosts.wire import store_turns

    deadline, why = time.time() + settle_s, None
    while True:
        try:
            turns = store_turns(db, sid)
            why = None
        except Exception as exc:  # noqa: BLE001 - a store held by a writer: retry until the deadline
            turns, why = None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if (turns is not None and not _pending(db, sid)) or time.time() >= deadline:
            return turns, why
        time.sleep(0.25)


def _in_spool(db: Path, sid: str) -> bool:
    from tortoise_sim.spool import Spool

    sp = Spool(db.parent / "spool")
    return sp.read_meta(sid) is not None and bool(sp.read_turns(sid))


def _expectations(exp: Expect | None, mem: _Memory, obs: list[dict[str, Any]], deliv: list[Any],
                  compare: dict[str, Any] | None, lost: bool | None) -> dict[str, bool | None]:
    if exp is None:
        return {}
    conv = [d for d, o in deliv if o["conversation"]]
    pointer = [d for d in conv if d.item.kind == "pointer_block"]
    digest = [d for d in conv if d.item.kind == "digest"]
    ids = {p for d in pointer for p in d.point_ids}

    def volunteered(entry: str) -> bool:
        if entry.startswith("ref:"):
            return mem.refs.get(entry[4:], "\0") in ids
        return any(entry in d.item.text for d in pointer)

    def in_digest(entry: str) -> bool:
        text = mem.texts.get(entry[4:], "\0")[:160] if entry.startswith("ref:") else entry
        return any(text in d.item.text for d in digest)

    checks: dict[str, bool | None] = {}
    for e in exp.volunteered:
        checks[f"volunteered {e}"] = volunteered(e)
    for e in exp.not_volunteered:
        checks[f"not volunteered {e}"] = not volunteered(e)
    for e in exp.in_digest:
        checks[f"in digest {e}"] = in_digest(e)
    for e in exp.not_in_digest:
        checks[f"not in digest {e}"] = not in_digest(e)
    if exp.captured is not None:
        got = None if compare is None else (compare["equal"] and compare["memory_fed_back"] == 0)
        checks["captured"] = None if got is None else got == exp.captured
    if exp.memory_reaches_model is not None:
        checks["memory reaches model"] = bool(conv) == exp.memory_reaches_model
    if exp.lost is not None:
        checks["lost"] = None if lost is None else int(lost) == exp.lost
    return checks


def _latency(run: Any, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`harness.hosts.wire.prompt_latencies`, with ``gate_wait_s``: the part of a prompt's latency its
    UserPromptSubmit hook spent waiting on the runner's gate (the previous prompt's ``after`` operations), and
    ``latency_s_without_gate``."""
    from harness.hosts.wire import prompt_latencies

    ups = [r for r in records if r["event"] == "UserPromptSubmit"]
    out = prompt_latencies(run)
    for entry in out:
        k = entry["prompt"]
        gate = ups[k]["gate"] if k < len(ups) and ups[k]["gate"] else None
        entry["gate_wait_s"] = gate[1] - gate[0] if gate else 0.0
        lat = entry["latency_s"]
        entry["latency_s_without_gate"] = None if lat is None else lat - entry["gate_wait_s"]
    return out


def run_scenario(scenario: Scenario, host: str, run_dir: Path, *, memsim_exe: str | Path,
                 scenario_dir: Path | None = None, isolation: str = "auto", settle_s: float = 10.0,
                 report_dir: Path | None = None) -> dict[str, Any]:
    """Run ``scenario`` on ``host`` under ``run_dir/<host>/`` and return the results (also written per session to
    ``s<i>/result.json``, and whole to ``result.json``).

    Per session: the ``before`` operations (through ``memsim tortoise ...`` with ``memsim_exe``), the wait until
    ``gap_s`` after the previous session's end, the host session (:func:`harness.hosts.drivers.run_session`) with
    every hook line wrapped by ``hooktee.sh`` (a prompt's ``after`` operations run while the next prompt's
    UserPromptSubmit hook, or for the last prompt the SessionEnd hook, waits on its gate; that wait is recorded and
    is part of that prompt's latency), the ``after`` operations, then the observations: the hook runs, the memory
    items they printed, per request the wire observation (:func:`harness.hosts.wire.observe_request`), per prompt
    the latency to its first conversation request, the store's turns against the host's transcript (read once
    every session has run and the service is stopped, so reading never delays the next session's start; waiting
    up to ``settle_s`` for a filing in flight), whether the session is lost
    (in neither store nor spool) and the session's ``expect`` checks. The store is ``<host>/store/tortoise.kuzu``,
    shared by the sessions, as are the host's HOME and workspace.

    Outside ``run_dir`` the run uses one private folder in the system temporary directory, created fresh and
    removed when the run ends however it ends (an error, Ctrl-C, SIGTERM): it holds the service socket (a short
    path, ``MEMSIM_TORTOISE_SOCKET``, given to the hooks and the CLI alike) and ``tmp/``, the ``TMPDIR`` of the
    host, its hooks and the memory operations. Hosts put their own temporary files there (Claude Code its
    ``claude-<uid>/<work dir>/<session id>/`` folders and ``cc-socks`` socket folder, Codex its sandbox lock
    folder): they honour ``TMPDIR``, and the short path keeps Claude Code's socket under the 108-byte limit of a
    unix socket path (a longer ``TMPDIR`` makes it fall back to ``/tmp/cc-socks-<n>``).

    ``report_dir``: where ``run_dir`` is read from once the run is over, recorded as ``run_dir`` in the results
    (default ``run_dir``): a run written into a staging folder and moved into place when it finishes
    (:func:`harness.runs.owned_run`) records the place it ends up."""

    from harness.hosts.drivers import HookSet, SessionSpec, run_session
    from harness.hosts.wire import (
        compare_turns,
        deliveries,
        hook_records,
        items_from_records,
        observe_request,
    )

    if host not in scenario.run_hosts:
        raise ScenarioError(f"scenario {scenario.name!r} does not run on {host!r} ({', '.join(scenario.run_hosts)})")
    root = Path(run_dir).resolve() / host
    home, cwd, db = root / "home", root / "work", root / "store" / "tortoise.kuzu"
    db.parent.mkdir(parents=True, exist_ok=True)
    values = {"memsim": shlex.quote(str(memsim_exe)), "db": shlex.quote(str(db)), "harness": HARNESS[host],
              "python": shlex.quote(sys.executable), "examples": shlex.quote(str(EXAMPLES_DIR)),
              "scenario_dir": shlex.quote(str(scenario_dir or SCENARIO_DIR)), "run_dir": shlex.quote(str(root))}
    lines = {attr: expand(line, values) for attr, line in hook_lines(scenario.hooks).items()}
    results: list[dict[str, Any]] = []
    later: list[tuple[Any, ...]] = []
    prev_end: float | None = None
    private = Path(tempfile.mkdtemp(prefix="mw-"))
    env = {"MEMSIM_TORTOISE_SOCKET": str(private / "s.sock"), "MEMSIM_TORTOISE_DB": str(db),
           "TMPDIR": str(private / "tmp"), **scenario.hooks.env}
    mem = _Memory(str(memsim_exe), db, env)
    try:
        (private / "tmp").mkdir()
        for i, s in enumerate(scenario.sessions):
            sdir = root / f"s{i}"
            hooks_dir, gates = sdir / "hooks", sdir / "gates"
            gates.mkdir(parents=True, exist_ok=True)
            ops_log = [dict(mem.run(op), at=f"sessions[{i}].before[{j}]") for j, op in enumerate(s.before)]
            if prev_end is not None:
                time.sleep(max(0.0, prev_end + s.gap_s - time.time()))
            gated = []
            for k, p in enumerate(s.prompts):
                if p.after:
                    event, n = _gate_target(host, k, len(s.prompts), lines, f"sessions[{i}].prompts[{k}]")
                    (gates / f"{event}-{n}.hold").touch()
                    gated.append((event, n, k, p.after))
            hookset = HookSet(**{a: tee_command(line, EVENTS[a], hooks_dir, gates) for a, line in lines.items()},
                              timeouts=dict(scenario.hooks.timeouts))
            spec = SessionSpec(prompts=[p.text for p in s.prompts],
                               replies=[[r.for_host(host) for r in p.replies] for p in s.prompts],
                               home=home, cwd=cwd, hooks=hookset, env={**env, **s.env}, timeout_s=s.timeout_s,
                               allowed_tools=list(s.allowed_tools))
            done = threading.Event()

            def watch(gated: list = gated, done: threading.Event = done, gates: Path = gates,
                      ops_log: list = ops_log, i: int = i) -> None:
                for event, n, k, ops in gated:
                    while not (gates / f"{event}-{n}.waiting").exists():
                        if done.wait(0.02):
                            ops_log.extend({"op": op.name, "at": f"sessions[{i}].prompts[{k}].after[{j}]",
                                            "ok": False, "detail": "the host never reached the gate"}
                                           for j, op in enumerate(ops))
                            return
                    for j, op in enumerate(ops):
                        ops_log.append(dict(mem.run(op), at=f"sessions[{i}].prompts[{k}].after[{j}]"))
                    (gates / f"{event}-{n}.go").touch()

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            try:
                run = run_session(host, spec, sdir, isolation=isolation)
            finally:
                done.set()
                watcher.join(timeout=300)
            prev_end = run.t_end
            ops_log += [dict(mem.run(op), at=f"sessions[{i}].after[{j}]") for j, op in enumerate(s.after)]
            records = hook_records(hooks_dir)
            items = items_from_records(records)
            obs = [observe_request(r, items) for r in run.requests]
            deliv = [(d, o) for r, o in zip(run.requests, obs, strict=True) for d in deliveries(r, items)]
            res = {"session": i, "name": s.name, "host": host, "version": run.version, "isolation": run.isolation,
                   "session_id": run.session_id, "exit_code": run.exit_code, "timed_out": run.timed_out,
                   "t_start": run.t_start, "t_end": run.t_end,
                   "gap_s": None if not results else run.t_start - results[-1]["t_end"],
                   "ops": ops_log, "hooks": [{k: v for k, v in r.items() if k not in ("stdin",)} for r in records],
                   "items": [{"kind": it.kind, "event": it.event, "point_ids": it.point_ids,
                              "bytes": len(it.text.encode("utf-8"))} for it in items],
                   "requests": obs, "latency": _latency(run, records), "refs": dict(mem.refs)}
            results.append(res)
            later.append((res, run, s, obs, deliv, sdir))
        # The store is read once every session has run: reading it between sessions would wait for the previous
        # session's filing and so stretch the next session's start gap (gap_s), hiding whether a session starting
        # right after the previous one's end sees it. The service (when one runs) is stopped first: it holds the
        # store. A session's turns do not change once a later session runs, unless the host reuses its id.
        mem.close()
        for res, run, s, obs, deliv, sdir in later:
            compare, stored, why, lost = None, None, None, None
            if run.session_id and "session_end" in lines:
                stored, why = _settled_turns(db, run.session_id, settle_s)
                conv = None
                if run.transcript_path is not None:
                    from tortoise_sim.transcripts import read_transcript

                    conv = read_transcript(run.transcript_path, HARNESS[host])
                if stored is not None and conv is not None:
                    compare = compare_turns(stored, conv)
                if stored is not None:
                    lost = not stored and not _in_spool(db, run.session_id)
            res.update({"store_vs_transcript": compare, "store_unread": why, "lost": lost,
                        "checks": _expectations(s.expect, mem, obs, deliv, compare, lost)})
            (sdir / "result.json").write_text(json.dumps(res, indent=1, default=str), encoding="utf-8")
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C or SIGTERM: what the sessions left running goes too
        from harness.hosts.isolate import end_by_home

        end_by_home(home)
        raise
    finally:
        mem.close()
        shutil.rmtree(private, ignore_errors=True)
    shown = Path(report_dir) / host if report_dir is not None else root
    out = {"scenario": scenario.name, "records": list(scenario.records), "host": host, "run_dir": str(shown),
           "sessions": results}
    (root / "result.json").write_text(json.dumps(out, indent=1, default=str), encoding="utf-8")
    return out
