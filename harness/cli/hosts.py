"""``memsim hosts ...``: install the pinned agent hosts (Claude Code, Codex) with npm into memsim's cache folder,
list what is installed, and run host scenarios on them (``memsim hosts run``). The hosts are test and benchmark
dependencies: never installed globally, never committed.

``hosts run`` follows the run-ownership rule of :mod:`harness.runs`: each scenario on each host is one run that
owns ``<out>/<scenario>/<host>/`` and its summary ``<out>/<scenario>/<host>.json``, writes into a staging folder
and replaces its earlier results only once finished (a re-run never reads an earlier run's store, HOME or hook
records); a run that is skipped writes nothing, and Ctrl-C or SIGTERM removes the unfinished run after ending its
host and model server (exit 130 or 143). A hosts run is short, so replacing one never needs ``--overwrite``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.boundary import bad_option, fail, make_console

app = typer.Typer(help="Agent hosts memsim drives offline (Claude Code, Codex): install them pinned with npm into "
                       "memsim's cache folder ($MEMSIM_HOSTS_DIR), list them, and run host scenarios on them "
                       "against a loopback model server (memsim hosts run).", no_args_is_help=True)
console = make_console()  # markup and emoji off: paths print as given


@app.command("install")
def install_cmd(
    names: Annotated[list[str] | None, typer.Argument(
        help="Hosts to install (default: claude-code and codex).", show_default=False)] = None,
    if_reachable: Annotated[bool, typer.Option(
        "--if-reachable", help="Exit 0 with one line when node/npm are missing or the registry cannot be reached "
                               "(for test commands on machines without them).")] = False,
) -> None:
    """Install hosts at their pinned versions with npm (npm install --prefix <cache>/<name>-<version>)."""
    from harness.hosts import install as inst

    chosen = list(names or inst.DEFAULT_HOSTS)
    for n in chosen:
        if n not in inst.HOSTS:
            raise bad_option("NAME", n, list(inst.HOSTS))
    missing = inst.missing_tools()
    if missing:
        msg = f"cannot install hosts: {' and '.join(missing)} not found on PATH"
        if if_reachable:
            console.print(f"skipped: {msg}", soft_wrap=True)
            raise typer.Exit(0)
        raise fail(msg)
    if if_reachable and any(inst.find_host(n) is None for n in chosen):
        ok, why = inst.registry_reachable()
        if not ok:
            console.print(f"skipped: the npm registry is not reachable ({why})", soft_wrap=True)
            raise typer.Exit(0)
    for n in chosen:
        try:
            h = inst.install(n)
        except inst.InstallError as exc:
            if if_reachable and getattr(exc, "unreachable", False):
                console.print(f"skipped: the npm registry is not reachable ({exc})", soft_wrap=True)
                raise typer.Exit(0) from None
            raise fail(str(exc)) from None
        console.print(f"{h.name} {h.version}: {h.bin}", soft_wrap=True)


@app.command("list")
def list_cmd() -> None:
    """One row per known host: its pinned version, the version installed (from its package.json) and the path.

    Plain aligned rows, one line each (a path is never wrapped, so it can be copied from a pipe or a narrow
    terminal); ``-`` where a host is not installed."""
    from harness.hosts import install as inst

    have = inst.installed()
    rows = [("host", "pinned", "installed", "path")]
    for name, spec in inst.HOSTS.items():
        h = have.get(name)
        rows.append((name, spec.version, h.version if h else "-", str(h.root) if h else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    console.print(f"hosts folder: {inst.hosts_dir()}", soft_wrap=True)
    for r in rows:
        console.print("  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3],
                      soft_wrap=True)


# ------------------------------------------------------------------------------------------------ hosts run
def session_summary(res: dict[str, Any]) -> dict[str, Any]:
    """The short account of one session of a ``run_scenario`` result (``res`` is one of its ``sessions``): where
    each memory item reached the model (one row per distinct place: kind, hook event, message index, role, block,
    the host's framing prefix, exact or how it was changed, the first request that carried it and how many did),
    per prompt the latency (without the runner's gate wait), the store against the host's transcript, whether the
    session is lost and the expectation checks. JSON-serialisable, without any request text."""
    places: dict[tuple[Any, ...], dict[str, Any]] = {}
    for req in res.get("requests", []):
        if not req.get("conversation"):
            continue
        for d in req.get("deliveries", []):
            it = d["item"]
            key = (it["kind"], it["event"], d["message_index"], d["role"], d["block_index"], d["part"], d["prefix"],
                   d["exact"], d["encoding"], d["whole"])
            row = places.get(key)
            if row is None:
                places[key] = {"kind": it["kind"], "event": it["event"], "point_ids": it["point_ids"],
                               "message_index": d["message_index"], "role": d["role"], "block_index": d["block_index"],
                               "part": d["part"], "prefix": d["prefix"], "exact": d["exact"], "trimmed": d["trimmed"],
                               "encoding": d["encoding"], "whole": d["whole"], "bytes": d["bytes"],
                               "tokens": d["tokens"], "first_seq": req["seq"], "requests": 1}
            else:
                row["requests"] += 1
    conv = [r for r in res.get("requests", []) if r.get("conversation")]
    cmp = res.get("store_vs_transcript")
    checks = res.get("checks") or {}
    return {
        "session": res["session"], "name": res.get("name"), "session_id": res.get("session_id"),
        "exit_code": res.get("exit_code"), "timed_out": res.get("timed_out"), "requests": len(conv),
        "items": [{"kind": i["kind"], "event": i["event"], "point_ids": i["point_ids"], "bytes": i["bytes"]}
                  for i in res.get("items", [])],
        "delivered": list(places.values()),
        "latency_s": [None if x.get("latency_s_without_gate") is None else round(x["latency_s_without_gate"], 4)
                      for x in res.get("latency", [])],
        "hooks": [{"event": h["event"], "wall_s": None if h.get("end") is None else round(h["end"] - h["start"], 4),
                   "rc": h.get("rc"), "signal": h.get("signal")} for h in res.get("hooks", [])],
        "store_vs_transcript": None if cmp is None else {k: cmp[k] for k in ("equal", "stored", "conversation",
                                                                             "memory_fed_back")},
        "store_unread": res.get("store_unread"), "lost": res.get("lost"), "checks": checks,
        "checks_failed": [k for k, v in checks.items() if v is False],
        "memory_token_share": max((r["memory_token_share"] or 0.0 for r in conv), default=None),
    }


def _where(row: dict[str, Any]) -> str:
    at = "top-level system" if row["message_index"] is None else f"messages[{row['message_index']}]"
    how = "exact" if row["exact"] else str(row["encoding"] or "partly")
    if not row["whole"]:
        how += ", some lines"
    frame = f' after "{row["prefix"]}"' if row["prefix"] else ""
    return f"{row['kind']} ({row['event']}) -> {at} {row['role']} block {row['block_index']}, {how}{frame}"


def summary_line(scenario: str, host: str, s: dict[str, Any]) -> str:
    """One printed line for :func:`session_summary`'s account of a session."""
    lat = ", ".join("-" if x is None else f"{x:.2f} s" for x in s["latency_s"]) or "-"
    mem = "; ".join(_where(r) for r in s["delivered"]) or "no memory reached the model"
    cmp = s["store_vs_transcript"]
    if cmp is not None:
        store = (f"store = transcript ({cmp['stored']} turns)" if cmp["equal"] else
                 f"store != transcript ({cmp['stored']} stored, {cmp['conversation']} in the transcript)")
        if cmp["memory_fed_back"]:
            store += f", {cmp['memory_fed_back']} stored turns carry memory"
    else:
        store = "store not compared" + (f" ({s['store_unread']})" if s["store_unread"] else "")
    lost = {None: "lost: n/a", True: "LOST", False: "lost: no"}[s["lost"]]
    checks = s["checks"]
    chk = (f"checks {sum(1 for v in checks.values() if v)}/{len(checks)} pass" if checks else "no checks")
    if s["checks_failed"]:
        chk += " (failed: " + ", ".join(s["checks_failed"]) + ")"
    label = f"s{s['session']}" + (f" {s['name']}" if s["name"] else "")
    return (f"{scenario} {host} {label}: {s['requests']} request(s); {mem}; latency {lat}; {store}; {lost}; "
            f"{chk}")


def _plan(loaded: list[tuple[Path, Any]], host: list[str] | None) -> list[tuple[Path, Any, str]]:
    """The (file, scenario, host) runs to make, printing one ``skipped`` line for each pair that cannot run."""
    from harness.hosts import install as inst

    runs = []
    for path, scn in loaded:
        for h in (host or list(scn.run_hosts)):
            if h not in scn.run_hosts:
                console.print(f"{scn.name} {h}: skipped: the scenario runs on {', '.join(scn.run_hosts)}",
                              soft_wrap=True)
            elif h not in inst.HOSTS:
                console.print(f"{scn.name} {h}: skipped: memsim has no driver for {h}", soft_wrap=True)
            elif inst.find_host(h) is None:
                console.print(f"{scn.name} {h}: skipped: {h} {inst.HOSTS[h].version} is not installed (memsim "
                              f"hosts install {h})", soft_wrap=True)
            else:
                runs.append((path, scn, h))
    return runs


@app.command("run")
def run_cmd(
    scenarios: Annotated[list[Path], typer.Argument(help="Scenario files (YAML; harness/hosts/scenarios/ has the "
                                                         "shipped ones).", show_default=False)],
    host: Annotated[list[str] | None, typer.Option(
        "--host", help="Host to run on (repeatable; default: every host the scenario allows that is "
                       "installed).", show_default=False)] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Results folder (default ./memsim-results/hosts, or "
                                                           "$MEMSIM_RESULTS_DIR/hosts).")] = None,
    isolation: Annotated[str, typer.Option(
        "--isolation", help="auto (own network namespace when the machine allows, else base URL only), netns "
                            "or base-url.")] = "auto",
) -> None:
    """Run scenarios on the installed pinned hosts against the loopback model server and print, per session, where
    each memory item reached the model, the prompt latency, the store against the host's transcript, lost
    sessions and the expectation checks.

    Each scenario on each host is a run of its own: it writes <out>/<scenario>/<host>/ (result.json, per session
    s<i>/ with the recorded requests and hook runs) and <out>/<scenario>/<host>.json (the summary), starting from a
    fresh store, HOME and hook records, and replaces that run's earlier results only when it has finished; nothing
    else in <out> is touched, and a run that is skipped writes nothing. Ctrl-C or SIGTERM ends the host and the
    model server and removes the unfinished run (exit 130 or 143). Exit status 1 when a check fails."""
    import time

    from harness.cli.boundary import check_output_dir
    from harness.cli.run_output import removed_if_empty_on_failure
    from harness.hosts.scenario import (
        KNOWN_HOSTS,
        ScenarioError,
        load_scenario,
        memsim_executable,
        run_scenario,
    )
    from harness.results_dir import default_out
    from harness.runs import (
        Terminated,
        exit_code_for,
        final_path,
        owned_run,
        run_record,
        terminated_as_interrupt,
    )

    if isolation not in ("auto", "netns", "base-url"):
        raise bad_option("--isolation", isolation, ("auto", "netns", "base-url"))
    for h in host or []:
        if h not in KNOWN_HOSTS:
            raise bad_option("--host", h, list(KNOWN_HOSTS))
    host = list(dict.fromkeys(host)) if host else None  # a host named twice runs once
    loaded = []
    for path in scenarios:
        try:
            loaded.append((path, load_scenario(path)))
        except ScenarioError as exc:
            raise fail(str(exc)) from None
    names: dict[str, Path] = {}
    for path, scn in loaded:
        if scn.name in names:
            raise fail(f"{path}: the scenario name {scn.name!r} is also the name of {names[scn.name]} (each "
                       "scenario writes <out>/<name>/: give each file its own name)")
        names[scn.name] = path
    allowed = sorted({h for _, scn in loaded for h in scn.run_hosts})
    for h in host or []:
        if h not in allowed:
            raise bad_option("--host", h, f"the scenario(s) run on {', '.join(allowed)}")
    runs = _plan(loaded, host)
    if not runs:
        return  # every pair skipped (one line each above): nothing ran, nothing is written
    out_dir = out or default_out("hosts")
    err = make_console(stderr=True)
    try:
        exe = memsim_executable()
    except ScenarioError as exc:
        raise fail(str(exc)) from None
    failed = 0
    with removed_if_empty_on_failure(out_dir):
        check_output_dir(out_dir)
        for path, scn, h in runs:
            name = f"{scn.name}/{h}"
            err.print(f"running {scn.name} on {h} ({len(scn.sessions)} session(s)) ...", soft_wrap=True)
            t0 = time.perf_counter()
            try:
                with terminated_as_interrupt(), owned_run(out_dir, [name]) as stage:
                    res = run_scenario(scn, h, stage / scn.name, memsim_exe=exe, scenario_dir=path.resolve().parent,
                                       isolation=isolation, report_dir=out_dir.resolve() / scn.name)
                    rows = []
                    for s in res["sessions"]:
                        acc = session_summary(s)
                        failed += len(acc["checks_failed"])
                        console.print(summary_line(scn.name, h, acc), soft_wrap=True)
                        rows.append(acc)
                    first = res["sessions"][0] if res["sessions"] else {}
                    summary = {"scenario": scn.name, "file": str(path), "host": h, "version": first.get("version"),
                               "isolation": first.get("isolation"), "run_dir": res["run_dir"],
                               "checks_failed": sum(len(r["checks_failed"]) for r in rows), "sessions": rows,
                               "run": run_record(time.perf_counter() - t0)}
                    written = stage / scn.name / f"{h}.json"
                    written.write_text(json.dumps(summary, indent=1, default=str) + "\n", encoding="utf-8")
            except KeyboardInterrupt as exc:
                why = "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C"
                err.print(f"stopped by {why}: {scn.name} on {h} is not written (its host, model server and "
                          "temporary files are gone)", soft_wrap=True)
                raise typer.Exit(exit_code_for(exc)) from None
            except (ScenarioError, OSError, RuntimeError) as exc:
                raise fail(f"{path}: {h}: {' '.join(str(exc).split()) or type(exc).__name__}") from None
            console.print(f"wrote {final_path(stage, out_dir, written)} and {out_dir / scn.name / h}/",
                          soft_wrap=True)
    if failed:
        raise fail(f"{failed} expectation check(s) failed (see the lines above)")
