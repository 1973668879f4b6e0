"""Report of the crash-point explorer: ``crash.json`` (everything measured) and ``crash.md`` (tables)."""

from __future__ import annotations

import json
import platform
import time
from collections import Counter
from pathlib import Path
from typing import Any

from harness.reliability.crash import SequenceResult


def _windows(res: SequenceResult) -> list[dict[str, Any]]:
    """Distinct (outcome, step, kind) groups of failing crash points with one example each."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for p in res.points:
        if p.outcome == "ok":
            continue
        key = (p.outcome, p.point.step, p.point.kind)
        g = groups.setdefault(key, {"outcome": p.outcome, "step": p.point.step, "kind": p.point.kind,
                                    "points": 0, "example": {"point": p.point.label(), "lost": p.check.lost[:2],
                                                             "duplicates": p.check.duplicates[:2],
                                                             "disagree": p.check.disagree[:2]}})
        g["points"] += 1
    return sorted(groups.values(), key=lambda g: (g["step"], g["kind"], g["outcome"]))


def build_report(results: list[SequenceResult], kills: list[dict[str, Any]] | None = None,
                 concurrency: list[dict[str, Any]] | None = None, seconds: float = 0.0) -> dict[str, Any]:
    seqs = []
    for r in results:
        d = r.as_dict()
        d.pop("failures")
        d["windows"] = _windows(r)
        seqs.append(d)
    totals: Counter[str] = Counter()
    for r in results:
        totals[f"{r.mode}_points"] += len(r.points)
        totals[f"{r.mode}_lost_points"] += r.lost_points
        totals[f"{r.mode}_duplicate_points"] += r.duplicate_points
        totals[f"{r.mode}_not_ok_points"] += sum(1 for p in r.points if p.outcome != "ok")
        totals[f"{r.mode}_refused_restarts"] += sum(1 for p in r.points if p.check.start == "clear_error")
    return {"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": platform.python_version(),
            "seconds": round(seconds, 1), "totals": dict(totals), "sequences": seqs, "kills": kills or [],
            "concurrency": concurrency or []}


def _outcome_cols(o: dict[str, int]) -> tuple[int, int, int, int, int]:
    def n(part: str) -> int:
        return sum(v for k, v in o.items() if part in k.split("+"))
    return o.get("ok", 0), n("lost"), n("duplicate"), n("disagree"), n("start_error")


def code_lines(report: dict[str, Any]) -> list[str]:
    """What the page says about the code the report came from: the run's (``code not recorded`` for a report
    written before runs recorded it) and, for a report merged over earlier ones (``--merge``), theirs."""
    from harness.runs import code_text

    run = report.get("run")
    lines = [f"Code: {code_text(run)}" + (f"; command `{run['command']}`." if isinstance(run, dict) and
                                          run.get("command") else ".")]
    earlier = report.get("merged_over") or []
    if earlier:
        lines.append("Merged over earlier runs (the sequences this run did not repeat are theirs): "
                     + "; ".join(code_text(r) for r in earlier) + ".")
    return lines


def render_md(report: dict[str, Any]) -> str:
    lines = ["# Crash-point explorer results", "",
             f"Generated {report['generated']} by `memsim crash` in {report['seconds']} s. Each sequence was run once "
             "per crash point (before every durable step, after every write, and torn variants of every write that "
             "keep 0, 1, half or all but one of its new bytes); after each crash the design restarted from disk "
             "through its own loaders and its invariants were checked. A crash point counts under every failure "
             "it shows (lost acknowledged items, duplicates, files that disagree, a restart that fails without "
             "naming the file). A restart refused with an error naming the file is counted ok for the design but shown "
             "under *refused*: a hardened option is held to a clean restart.", "", *code_lines(report), "",
             "| design | sequence | mode | steps | step events | crash points | ok | lost | duplicate | disagree | "
             "start error | refused | s |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in report["sequences"]:
        ok, lost, dup, dis, se = _outcome_cols(s["outcomes"])
        lines.append(f"| {s['design']} | {s['sequence']} | {s['mode']} | {s['step_count']} | {s['step_events']} | "
                     f"{s['crash_points']} | {ok} | {lost} | {dup} | {dis} | {se} | {s.get('refused_restarts', '-')} | "
                     f"{s['seconds']} |")
    t = report["totals"]
    lines += ["", "Totals: " + ", ".join(f"{k} {v}" for k, v in sorted(t.items())), ""]
    lines += ["## Durable steps per sequence", ""]
    for s in report["sequences"]:
        lines.append(f"- **{s['sequence']}** ({s['mode']}; {s['description']}): " + ", ".join(
            f"`{x}`" for x in s["steps"]) + (f"; hardened option `{s['hardened_option']}`"
                                            if s["mode"] == "hardened" else ""))
    lines += ["", "## Loss windows (failing crash points grouped by step)", "",
              "| sequence | mode | step | crash kind | outcome | points | example |", "|---|---|---|---|---|---:|---|"]
    for s in report["sequences"]:
        for w in s["windows"]:
            ex = w["example"]
            detail = "; ".join(str(x) for x in (ex["lost"] + ex["duplicates"] + ex["disagree"])[:2])
            detail = detail.replace("|", "/")
            lines.append(f"| {s['sequence']} | {s['mode']} | `{w['step']}` | {w['kind']} | {w['outcome']} | "
                         f"{w['points']} | {detail[:160]} |")
    if report["kills"]:
        lines += ["", "## Real kills (SIGKILL in a child process, restart in a fresh one)", "",
                  "| sequence | mode | killed at | killed | outcome | lost | duplicates | disagree | leftover temp "
                  "files | why |", "|---|---|---|---|---|---|---|---|---:|---|"]
        for k in report["kills"]:
            lines.append(f"| {k['sequence']} | {k['mode']} | `{k['kill_at']}` | {k['killed']} | {k['outcome']} | "
                         f"{'; '.join(k.get('lost', []))[:80]} | {'; '.join(k.get('duplicates', []))[:60]} | "
                         f"{'; '.join(k.get('disagree', []))[:80]} | {len(k.get('leftover_temp_files', []))} | "
                         f"{k['why']} |")
    if report["concurrency"]:
        lines += ["", "## Concurrent writers", ""]
        for c in report["concurrency"]:
            body = ", ".join(f"{k} {v}" for k, v in c.items() if k not in ("design", "case", "mode",
                                                                              "hardened_option"))
            lines.append(f"- **{c['case']}** ({c['mode']}"
                         + (f", `{c['hardened_option']}`" if c["mode"] == "hardened" else "") + f"): {body}")
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], out: Path) -> list[Path]:
    """``crash.md`` then ``crash.json`` in ``out``, each atomically; returns ``[json, md]``."""
    from harness.atomic import write_atomic

    out.mkdir(parents=True, exist_ok=True)
    j, m = out / "crash.json", out / "crash.md"
    write_atomic(m, render_md(report).encode("utf-8"), None, "crash.md.write")
    write_atomic(j, (json.dumps(report, indent=2, default=str) + "\n").encode("utf-8"), None, "crash.json.write")
    return [j, m]


def summary_table(report: dict[str, Any]) -> str:
    """The per-sequence table of the README (crash points and outcomes per mode, side by side)."""
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for s in report["sequences"]:
        rows.setdefault(s["sequence"], {})[s["mode"]] = s
    out = ["| sequence | durable steps, faithful (hook events) | crash points faithful / hardened | faithful: lost / duplicate / "
           "disagree | hardened: lost / duplicate / disagree |", "|---|---:|---:|---|---|"]
    for seq, modes in rows.items():
        f, h = modes.get("faithful"), modes.get("hardened")

        def cell(s: dict[str, Any] | None) -> str:
            if s is None:
                return "-"
            _, lost, dup, dis, _ = _outcome_cols(s["outcomes"])
            return f"{lost} / {dup} / {dis}"
        out.append(f"| {seq} | {f['step_count'] if f else '-'} ({f['step_events'] if f else '-'}) | "
                   f"{f['crash_points'] if f else '-'} / {h['crash_points'] if h else '-'} | {cell(f)} | {cell(h)} |")
    return "\n".join(out)


def merge_reports(existing: Path, new: dict[str, Any]) -> dict[str, Any]:
    """``new`` laid over the report in ``existing`` (if any): sequences keyed by (sequence, mode), kills by
    (sequence, mode), concurrency cases by (design, mode); totals recomputed; ``seconds`` summed per part; the
    earlier report's ``run`` block (and those it was merged over) kept under ``merged_over``."""
    if not existing.exists():
        return new
    old = json.loads(existing.read_text(encoding="utf-8"))

    def lay(key: str, ident: tuple[str, ...]) -> list[dict[str, Any]]:
        merged = {tuple(x[k] for k in ident): x for x in old.get(key, [])}
        merged.update({tuple(x[k] for k in ident): x for x in new.get(key, [])})
        return list(merged.values())

    out = dict(new)
    out["merged_over"] = [*old.get("merged_over", []), old.get("run")]  # each earlier run's code (None: unrecorded)
    out["sequences"] = lay("sequences", ("sequence", "mode"))
    out["kills"] = lay("kills", ("sequence", "mode"))
    out["concurrency"] = lay("concurrency", ("design", "mode"))
    totals: Counter[str] = Counter()
    for s in out["sequences"]:
        totals[f"{s['mode']}_points"] += s["crash_points"]
        totals[f"{s['mode']}_lost_points"] += s["lost_points"]
        totals[f"{s['mode']}_duplicate_points"] += s["duplicate_points"]
        totals[f"{s['mode']}_not_ok_points"] += s["crash_points"] - s["outcomes"].get("ok", 0)
        totals[f"{s['mode']}_refused_restarts"] += s.get("refused_restarts", 0)
    out["totals"] = dict(totals)
    out["seconds"] = round(sum(s["seconds"] for s in out["sequences"])
                           + sum(k.get("child_seconds", 0) + k.get("check_seconds", 0) for k in out["kills"])
                           + sum(c.get("seconds", 0) for c in out["concurrency"]), 1)
    return out


def kills_table(report: dict[str, Any]) -> str:
    out = ["| sequence | mode | SIGKILL at | restart | lost | duplicates | disagree | temp files left |",
           "|---|---|---|---|---|---|---|---:|"]
    for k in report["kills"]:
        out.append(f"| {k['sequence']} | {k['mode']} | `{k['kill_at']}` | {k.get('start', k.get('outcome'))} | "
                   f"{len(k.get('lost', []))} | {len(k.get('duplicates', []))} | {len(k.get('disagree', []))} | "
                   f"{len(k.get('leftover_temp_files', []))} |")
    return "\n".join(out)


def concurrency_table(report: dict[str, Any]) -> str:
    out = ["| case | mode | acknowledged / stored | lost updates | duplicates | open failures | tracebacks | s |",
           "|---|---|---|---:|---:|---:|---:|---:|"]
    for c in report["concurrency"]:
        if c["design"] == "fractal":
            ack = f"{c['acknowledged']} turns / {c['stored']}"
        elif c["design"] == "agentfly":
            ack = f"{c['questions']} questions / {c['processed']} processed"
        else:
            ack = f"{c['captures_attempted']} captures / {c['captures_stored']}; hook opened {c['hook_store_opened']}" \
                  f" of {c['hook_calls']}" + (f", volunteered {c['hook_volunteered']}" if "hook_volunteered" in c else "")
        out.append(f"| {c['case']} | {c['mode']} | {ack} | {c['lost_updates']} | {c.get('duplicates', 0)} | "
                   f"{c.get('open_failures', 0)} | {c['tracebacks']} | {c['seconds']} |")
    return "\n".join(out)
