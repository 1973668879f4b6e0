"""Reliability claims (REL-nn, design ``harness``): the loss windows the crash-point explorer measures, each
beside a companion claim showing the named hardened option closing it. Every claim drives a design through its
public API with the explorer's crash hook (``harness.reliability.crash``), restarts it from disk through its own loaders,
and reads what a user could inspect (files, rows, feed and journal). The full tables: ``memsim crash``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.claims import ClaimContext, Observation, claim
from harness.reliability.crash import (
    Check,
    Scenario,
    acked_before,
    clean_crash_points,
    crash_at,
    explore,
    find_scenario,
)


def _crash_at(sc: Scenario, mode: str, root: Path, picks: list[tuple[str, str, int]]) -> dict[str, Check]:
    """Crash ``sc`` at the n-th (0-based) crash point of each (kind, step) pick; the restart check of each."""
    root.mkdir(parents=True, exist_ok=True)
    _, points = clean_crash_points(sc, mode, root)
    out: dict[str, Check] = {}
    for kind, step, nth in picks:
        matching = [p for p in points if p.kind == kind and p.step == step]
        if len(matching) <= nth:
            raise RuntimeError(f"{sc.sequence} ({mode}) has no crash point {kind} {step} #{nth}")
        point = matching[nth]
        run_root = root / f"{mode}-{len(out)}"
        run_root.mkdir()
        out[point.label()] = crash_at(sc, mode, run_root, point)
    return out


def _summary(checks: dict[str, Check]) -> dict[str, Any]:
    return {label: {"outcome": c.outcome, "start": c.start, "acked": c.acked, "lost": c.lost[:2],
                    "duplicates": c.duplicates[:2], "disagree": c.disagree[:2]} for label, c in checks.items()}


def _explore_all(sequences: list[tuple[str, str]], mode: str, root: Path) -> Observation:
    """Explore every crash point of ``sequences`` in ``mode``: holds when none loses, duplicates or is not ok,
    and every restart is clean (a restart refused with an error naming the file is ``ok`` for the explorer's
    outcome, but a hardened option promises a restart that simply works)."""
    rows, lost, bad, refused = {}, 0, 0, 0
    for module, seq in sequences:
        res = explore(find_scenario(module, seq), mode, base=root)
        not_clean = [p.point.label() for p in res.points if p.check.start != "ok"]
        rows[seq] = {"crash_points": len(res.points), "outcomes": res.counts(),
                     "acked_before_crash": sum(1 for p in res.points if p.acked), "restarts_not_clean": not_clean[:3]}
        lost += res.lost_points + res.duplicate_points
        bad += sum(1 for p in res.points if p.outcome != "ok")
        refused += len(not_clean)
    return Observation.compare({"lost_or_duplicate_points": 0, "not_ok_points": 0, "restarts_not_clean": 0},
                               {"lost_or_duplicate_points": lost, "not_ok_points": bad, "restarts_not_clean": refused},
                               measured={"sequences": rows}, evidence=json.dumps(rows, indent=1))


def _crash_tortoise(picks: dict[str, list[tuple[str, str, int]]], mode: str, root: Path) -> dict[str, Check]:
    """:func:`_crash_at` over several Tortoise sequences, each in its own folder; keys ``"<sequence>: <point>"``."""
    found: dict[str, Check] = {}
    for seq, p in picks.items():
        found.update({f"{seq}: {k}": c for k, c in
                      _crash_at(find_scenario("tortoise", seq), mode, root / seq.split(".")[1], p).items()})
    return found


def _all_ok(checks: dict[str, Check], evidence: str) -> Observation:
    """Holds when every check's outcome is ``ok`` and every restart was clean (``start == "ok"``: a restart
    refused with an error naming the file does not count as a hardened option working)."""
    bad = {k: c.outcome for k, c in checks.items() if c.outcome != "ok"}
    refused = {k: c.start for k, c in checks.items() if c.start != "ok"}
    return Observation.compare({"not_ok": {}, "restarts_not_clean": {}}, {"not_ok": bad, "restarts_not_clean": refused},
                               measured=_summary(checks), evidence=evidence)


# ------------------------------------------------------------------------------------------------ Fractal
@claim("REL-01", design="harness", record="MEM-RTE-checkpoint-update (FRA-17)", kind="consequence",
       statement="Fractal overwrites the session file in place: a save torn by a crash leaves unreadable JSON, "
                 "so the restart loads an empty session (every acknowledged turn lost) and the listing no longer "
                 "shows the session.")
def rel_01(ctx: ClaimContext) -> Observation:
    res = explore(find_scenario("fractal", "fractal.submit"), "faithful", base=ctx.tmp_path)
    lost = [p for p in res.points if p.check.lost]
    hidden = [p for p in res.points if any("listing does not show" in d for d in p.check.disagree)]
    first = lost[0] if lost else None
    return Observation.from_checks(
        {"some crash point loses acknowledged turns": bool(lost),
         "every losing point is a torn write": all(p.point.kind == "torn" for p in lost),
         "torn sessions vanish from the listing": bool(hidden),
         "before/after points lose nothing": all(not p.check.lost for p in res.points if p.point.kind != "torn")},
        measured={"crash_points": len(res.points), "lost_points": len(lost), "outcomes": res.counts()},
        evidence=json.dumps({"point": first.point.label(), "lost": first.check.lost[:2],
                             "notes": first.check.notes[:1]} if first else {}, indent=1)[:1200])


@claim("REL-02", design="harness", record="beyond report", kind="mechanism",
       statement="With FractalRuntime(durability='atomic') (temp file, fsync, os.replace, fsync of the folder) no "
                 "crash point of the submit and listing sequences loses or duplicates a turn, and the listing "
                 "always agrees with the session files.")
def rel_02(ctx: ClaimContext) -> Observation:
    return _explore_all([("fractal", "fractal.submit"), ("fractal", "fractal.listing")], "hardened", ctx.tmp_path)


# ------------------------------------------------------------------------------------------------ AgentFly
@claim("REL-03", design="harness", record="AGF-38", kind="consequence",
       statement="AgentFly PM: a crash right after a question's result append loses its training pairs and case "
                 "for good: restart suppression trusts the result line, so no later restart writes them.")
def rel_03(ctx: ClaimContext) -> Observation:
    checks = _crash_at(find_scenario("agentfly", "agentfly.pm"), "faithful", ctx.tmp_path,
                       [("after", "agentfly.result_write", 1)])
    (label, c), = checks.items()
    case = [x for x in c.lost if x.startswith("case of") and "suppressed by restart" in x]
    pairs = [x for x in c.lost if x.startswith("training pairs of") and "suppressed by restart" in x]
    same = bool(case and pairs) and case[0].split("'")[1] == pairs[0].split("'")[1]
    return Observation.from_checks(
        {"the in-flight question's case is lost": bool(case),
         "the in-flight question's training pairs are lost": bool(pairs),
         "both belong to the same question": same,
         "the restart started cleanly (twice)": c.start == "ok",
         "nothing is duplicated": not c.duplicates},
        measured={**_summary(checks), "lost_case": case, "lost_pairs": pairs}, evidence=f"{label}: {c.lost}")


@claim("REL-04", design="harness", record="AGF-30", kind="consequence",
       statement="AgentFly NP: a result line torn by a crash makes the question re-run on the next restart; the "
                 "re-run's record lands on the torn line, so a later restart runs it again and the bank holds "
                 "its case twice.")
def rel_04(ctx: ClaimContext) -> Observation:
    checks = _crash_at(find_scenario("agentfly", "agentfly.np"), "faithful", ctx.tmp_path,
                       [("torn", "agentfly.result_write", 1), ("torn", "agentfly.result_write", 2)])
    dup = [label for label, c in checks.items() if any("case of" in d for d in c.duplicates)]
    unparseable = [label for label, c in checks.items() if any("unparseable" in d for d in c.disagree)]
    return Observation.from_checks({"a torn result line duplicates a case": bool(dup),
                                    "the torn line stays unparseable": bool(unparseable)},
                                   measured=_summary(checks), evidence=json.dumps(_summary(checks), indent=1)[:1500])


@claim("REL-05", design="harness", record="beyond report", kind="mechanism",
       statement="With DriverConfig(durability='journal') (one redo-logged record per question, replayed "
                 "idempotently at start) no crash point of the NP or PM per-question writes loses a case or pair "
                 "or duplicates one, and no unparseable line remains.")
def rel_05(ctx: ClaimContext) -> Observation:
    return _explore_all([("agentfly", "agentfly.np"), ("agentfly", "agentfly.pm")], "hardened", ctx.tmp_path)


# ------------------------------------------------------------------------------------------------ Tortoise
_TOR_FAITHFUL = {"tortoise.capture": [("after", "kuzu.commit", 0)],
                 "tortoise.checkpoint": [("before", "checkpoint.provenance", 0)],
                 "tortoise.lifecycle": [("before", "retract.cas", 0)],
                 "tortoise.diary": [("torn", "event.journal", 1)]}


@claim("REL-06", design="harness", record="AN:emission (TOR-24, TOR-41)", kind="consequence",
       statement="Tortoise's feed and journal are best-effort sinks beside the Kuzu transaction: a crash between "
                 "them leaves graph, feed and journal disagreeing (turns without PointAdded, a PointRetracted "
                 "for a point that is not retracted, a torn journal line), and a checkpoint retried after a crash "
                 "leaves the earlier-filed item without provenance.")
def rel_06(ctx: ClaimContext) -> Observation:
    found = _crash_tortoise(_TOR_FAITHFUL, "faithful", ctx.tmp_path)
    text = json.dumps(_summary(found))
    return Observation.from_checks(
        {"every picked crash point disagrees": all(c.disagree for c in found.values()),
         "turns without PointAdded": "without a PointAdded event" in text,
         "event without the retraction": "PointRetracted" in text and "status 'draft'" in text,
         "checkpoint item without provenance": "without provenance" in text,
         "torn journal line": "unparseable" in text},
        measured=_summary(found), evidence=json.dumps(_summary(found), indent=1)[:1800])


@claim("REL-07", design="harness", record="beyond report", kind="mechanism",
       statement="With SimConfig(event_durability='transactional') (each SDK operation and its feed rows in one "
                 "Kuzu transaction; journal lines carrying the feed seq and re-derived on open) the crash points "
                 "that break the faithful mode, and every crash point after the first acknowledged operation of "
                 "the capture, checkpoint, lifecycle and diary sequences, restart cleanly with graph, feed and "
                 "journal in agreement and nothing acknowledged lost or duplicated.")
def rel_07(ctx: ClaimContext) -> Observation:
    before = {"tortoise.capture": [("after", "kuzu.commit", 0), ("torn", "event.journal", 0)],
              "tortoise.checkpoint": [("before", "checkpoint.provenance", 0), ("after", "kuzu.commit", 0)],
              "tortoise.lifecycle": [("before", "retract.cas", 0), ("after", "kuzu.commit", 0)],
              "tortoise.diary": [("torn", "event.journal", 1), ("before", "event.journal", 0)]}
    found = _crash_tortoise(before, "hardened", ctx.tmp_path / "picked")
    after_ack: dict[str, int] = {}
    for seq in before:
        sc = find_scenario("tortoise", seq)
        points = [p for p, acked in acked_before(sc, "hardened", ctx.tmp_path) if acked >= 1]
        if ctx.quick:
            points = points[::3]
        after_ack[seq] = len(points)
        root = ctx.tmp_path / "after-ack" / seq.split(".")[1]
        for i, point in enumerate(points):
            (root / str(i)).mkdir(parents=True)
            found[f"{seq}: {point.label()} (after an ack)"] = crash_at(sc, "hardened", root / str(i), point)
    post = {k: c for k, c in found.items() if k.endswith("(after an ack)")}
    obs = _all_ok(found, json.dumps({k: [c.outcome, c.start, c.acked] for k, c in found.items()}, indent=0)[:2500])
    checks = {"every picked and after-ack crash point is ok with a clean restart": obs.verdict == "holds",
              "each sequence has crash points after an acknowledgement": all(after_ack.values()),
              "each after-ack crash run had acknowledged something": all(c.acked >= 1 for c in post.values())}
    return Observation.from_checks(
        checks, measured={"after_ack_points": after_ack, "acknowledged_items_checked": sum(c.acked for c in
                          post.values()), "not_ok": {k: c.outcome for k, c in found.items() if c.outcome != "ok"},
                          "restarts_not_clean": {k: c.start for k, c in found.items() if c.start != "ok"},
                          "picked": _summary({k: c for k, c in found.items() if k not in post})},
        evidence=obs.evidence)


# ------------------------------------------------------------------------------------------------ trainer
@claim("REL-08", design="harness", record="AGF-10", kind="consequence",
       statement="The retriever trainer overwrites best.pt in place: a crash while saving a new best destroys "
                 "the best checkpoint it had already reported, and the PM retriever can no longer load one.")
def rel_08(ctx: ClaimContext) -> Observation:
    checks = _crash_at(find_scenario("agentfly", "agentfly.train"), "faithful", ctx.tmp_path,
                       [("torn", "agentfly.train.best", 6)])  # 2nd best save, half its bytes
    (label, c), = checks.items()
    return Observation.from_checks({"the acknowledged best checkpoint is lost": bool(c.lost)},
                                   measured=_summary(checks), evidence=f"{label}: {c.lost} {c.notes[:1]}")


@claim("REL-09", design="harness", record="beyond report", kind="mechanism",
       statement="With TrainConfig(atomic_checkpoints=True) a crash while saving best.pt or last.pt leaves the "
                 "previous checkpoint loadable (only a temp file remains).")
def rel_09(ctx: ClaimContext) -> Observation:
    checks = _crash_at(find_scenario("agentfly", "agentfly.train"), "hardened", ctx.tmp_path,
                       [("torn", "agentfly.train.best.tmp", 6), ("torn", "agentfly.train.last.tmp", 2)])
    return _all_ok(checks, json.dumps({k: [c.outcome, c.notes[:1]] for k, c in checks.items()}))


# ------------------------------------------------------------------------------------------------ concurrency
@claim("REL-10", design="harness", record="MEM-RTE-checkpoint-update (FRA-17)", kind="consequence",
       statement="Two processes submitting to one Fractal session lose updates: each saves its whole in-memory "
                 "copy, so the last save wins; FractalRuntime(session_lock=True) keeps every turn.")
def rel_10(ctx: ClaimContext) -> Observation:
    from harness.reliability.concurrent import fractal_case

    f, h = fractal_case("faithful", n=6, timeout=60), fractal_case("hardened", n=6, timeout=60)
    return Observation.from_checks({"faithful loses turns": f["lost_updates"] > 0,
                                    "session_lock loses none": h["lost_updates"] == 0 and h["stored"] == 12,
                                    "no errors": f["errors"] == h["errors"] == 0},
                                   measured={"faithful": f, "hardened": h}, evidence=json.dumps([f, h]))


@claim("REL-11", design="harness", record="AGF-29", kind="consequence",
       statement="Two AgentFly drivers on one bank both run every question (suppression is read once at start), "
                 "so cases and results are duplicated; the journal mode's lock and re-check admit each once.")
def rel_11(ctx: ClaimContext) -> Observation:
    from harness.reliability.concurrent import agentfly_case

    f, h = agentfly_case("faithful", n=6, timeout=60), agentfly_case("hardened", n=6, timeout=60)
    return Observation.from_checks({"faithful duplicates cases": f["duplicates"] > 0,
                                    "journal duplicates none": h["duplicates"] == 0 and h["lost_updates"] == 0},
                                   measured={"faithful": f, "hardened": h}, evidence=json.dumps([f, h]))


@claim("REL-12", design="harness", record="MEM-RTE-per-prompt-hook (TOR-33)", kind="consequence",
       statement="A capture writer and the per-prompt hook cannot hold one Kuzu store at once: a hook prompt that "
                 "opens while a capture holds the store gets Kuzu's lock error and, failing open, exits 0 and "
                 "prints nothing (the prompt gets no memory, though the store holds a point the hook volunteers "
                 "otherwise); a capture that opens while the hook holds the store gets the same error and is "
                 "lost. Opening with store.open_with_retry (backoff, then a StoreLocked error naming the file) "
                 "waits for the holder instead: every hook call volunteers the point and every capture is stored.")
def rel_12(ctx: ClaimContext) -> Observation:
    from harness.reliability.concurrent import tortoise_case

    n = 2 if ctx.quick else 3
    f, h = tortoise_case("faithful", n=n, timeout=120), tortoise_case("hardened", n=n, timeout=120)
    return Observation.from_checks(
        {"faithful: every hook open while the writer held failed with the lock error":
            f["hook_lock_errors_while_writer_held"] == f["hook_calls_while_writer_held"] == n
            and f["hook_served_while_writer_held"] == 0 and f["failure_types"] == ["RuntimeError"],
         "faithful: those prompts got no memory; the hook exited 0 and printed nothing":
            f["hook_volunteered_while_writer_held"] == 0 and f["hook_failed_calls_printing"] == 0
            and f["hook_nonzero_exits"] == 0 and f["tracebacks"] == 0 and f["errors"] == 0,
         "faithful: the hook's uncontested calls volunteered the point":
            f["hook_volunteered"] == f["hook_calls"] - n > 0,
         "faithful: every capture opened while the hook held is lost":
            f["writer_lock_errors_while_hook_held"] == f["lost_while_hook_held"] == f["lost_updates"] == n,
         "hardened: both contests happened (each side's first open failed)":
            h["hook_lock_errors_while_writer_held"] == h["writer_lock_errors_while_hook_held"] == n,
         "hardened: every hook call volunteered the point": h["hook_volunteered"] == h["hook_calls"] == 2 * n,
         "hardened: no capture lost, no open gave up":
            h["lost_updates"] == 0 and h["open_failures"] == 0 and h["errors"] == h["tracebacks"] == 0},
        measured={"faithful": f, "hardened": h,
                  "cost": {"faithful prompts without memory": f["hook_calls_while_writer_held"]
                           - f["hook_volunteered_while_writer_held"],
                           "faithful captures lost": f["lost_updates"],
                           "hardened hook ms waiting for the writer (median)": h["hook_ms_while_writer_held_median"],
                           "hardened capture ms waiting for the hook (median)": h["writer_ms_while_hook_held_median"]}},
        evidence=json.dumps([f, h]))


@claim("REL-13", design="harness", record="AGF-38", kind="mechanism",
       statement="Under a real SIGKILL (not a simulated exception) the AgentFly window reproduces and the journal "
                 "closes it, and a Tortoise process killed inside a Kuzu transaction reopens cleanly without it.")
def rel_13(ctx: ClaimContext) -> Observation:
    from harness.reliability.kill import KILL_PLANS, kill_run

    runs = [kill_run(p, timeout=90) for p in KILL_PLANS
            if (p.sequence, p.mode) in {("agentfly.pm", "faithful"), ("agentfly.pm", "hardened"),
                                        ("tortoise.capture", "faithful")}]
    by = {(r["sequence"], r["mode"]): r for r in runs}
    return Observation.from_checks(
        {"all children died of SIGKILL": all(r["killed"] for r in runs),
         "AgentFly faithful loses the case": bool(by[("agentfly.pm", "faithful")].get("lost")),
         "AgentFly journal loses nothing and restarts cleanly": by[("agentfly.pm", "hardened")]["outcome"] == "ok"
            and by[("agentfly.pm", "hardened")]["start"] == "ok",
         "Tortoise reopens after a kill mid-transaction": by[("tortoise.capture", "faithful")]["start"] == "ok"},
        measured={f"{s} {m}": {k: r.get(k) for k in ("outcome", "lost", "disagree", "start")}
                  for (s, m), r in by.items()}, evidence=json.dumps(runs)[:1800])
