"""Fractal claims FRA-21 .. FRA-40: reload, listing, integration issues and beyond-report quirks.

Spec: ``shared/spec/fractal.md`` sections 3, 6, 7 and 10. Each demonstration uses a fresh workspace and state dir
under ``ctx.tmp_path`` and inspects files, warnings, listings and the instructions the agent received.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from types import SimpleNamespace

from fractal_sim import (
    FractalSession,
    list_sessions,
    run_headless,
    session_path,
    workspace_key,
)
from fractal_sim.agent import Cancel, Raise, Read, Return, Run, ScriptedAgent, TraceSpec, TurnScript, Write
from fractal_sim.context_meter import ContextMeter
from fractal_sim.models import LMUsage, SessionHistoryTurn, SessionState, SummaryTurn, UserTurn
from fractal_sim.signature import (
    AGENTS_HEADING,
    SUMMARY_HEADING,
    build_edit_workspace_signature,
    load_workspace_instructions,
)
from fractal_sim.store import serialize_state
from harness.claims import ClaimContext, Observation, claim
from harness.claims.fractal_common import (
    DESIGN,
    Scenario,
    blocks,
    capture_warnings,
    excerpt,
    read_json,
    strip_turn_ids,
    submit,
)


@claim("FRA-21", design=DESIGN, record="MEM-RTE-session-reload", kind="mechanism",
       statement="Resume needs an existing file and restores context for later submits.")
def fra_21(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    rt = sc.submitted("remember the blue button", "and the red one")
    sid = rt.session.session_id
    try:
        rt.resume("nope")
        missing = "no error"
    except FileNotFoundError as exc:
        missing = str(exc)
    rt2 = sc.runtime()
    rt2.resume(sid)
    submit(rt2, "what did I ask?")
    instr = rt2.agent.calls[0].instructions
    return Observation.compare(
        {"missing": "No Fractal session found for id 'nope'.", "id_unchanged": True, "same_turns": True,
         "same_history_ids": True, "next_instructions_show_them": True},
        {"missing": missing, "id_unchanged": rt.session.session_id == sid,
         "same_turns": [t.user.message for t in rt2.session.state.summary.turns][:2]
         == ["remember the blue button", "and the red one"],
         "same_history_ids": [h.turn_id for h in rt2.session.state.history][:2]
         == [h.turn_id for h in rt.session.state.history],
         "next_instructions_show_them": "User: remember the blue button" in instr and "User: and the red one" in instr},
        evidence=strip_turn_ids(instr[instr.index(SUMMARY_HEADING):].split("\n\nThe summary above")[0]))


@claim("FRA-22", design=DESIGN, record="MEM-RTE-session-reload", kind="mechanism",
       statement="Rejected files load as empty sessions with the same id; only unreadable JSON is backed up; the "
                 "next save overwrites.")
def fra_22(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    good = FractalSession(session_id="other")
    good.add_user_message("x")
    valid_other = serialize_state(good.state)
    files = {
        "unreadable": "{not json",
        "notobject": "[1, 2]",
        "malformed": json.dumps({"schema_version": 1, "session_id": "malformed", "summary": "oops"}),
        "mismatch": valid_other,
        "unsupported": json.dumps({"schema_version": 2, "session_id": "unsupported"}),
    }
    warned, empty, backups = {}, {}, {}
    for sid, text in files.items():
        path = session_path(sc.ws, sid, sc.state)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        session, msgs = capture_warnings(lambda sid=sid: FractalSession.load(sc.ws, session_id=sid,
                                                                             state_dir=sc.state))
        warned[sid] = msgs[0] if msgs else ""
        empty[sid] = (session.session_id, len(session.state.summary.turns))
        backups[sid] = sorted(p.name for p in path.parent.glob(f"{sid}.json.bad-*"))
    # same-second repeat of the unreadable branch
    _, _ = capture_warnings(lambda: FractalSession.load(sc.ws, session_id="unreadable", state_dir=sc.state))
    repeat = sorted(p.name for p in session_path(sc.ws, "unreadable", sc.state).parent.glob("unreadable.json.bad-*"))
    rt = sc.runtime()
    capture_warnings(lambda: rt.resume("malformed"))
    submit(rt, "fresh start")
    after = read_json(session_path(sc.ws, "malformed", sc.state))
    backup_text = (session_path(sc.ws, "unreadable", sc.state).parent / repeat[0]).read_text()
    p = str(session_path(sc.ws, "x", sc.state).parent)
    checks = {
        "3: unreadable warning + backup": warned["unreadable"].startswith(
            f"Ignoring unreadable Fractal session at {p}/unreadable.json: ") and "Preserved a backup at" in
        warned["unreadable"] and len(backups["unreadable"]) == 1,
        "4: not an object": warned["notobject"] == f"Ignoring malformed Fractal session at {p}/notobject.json: "
                                                   "expected a JSON object.",
        "5a: validation failure": warned["malformed"].startswith(f"Ignoring malformed Fractal session at "
                                                                 f"{p}/malformed.json: "),
        "5b: id mismatch": warned["mismatch"] == f"Ignoring Fractal session at {p}/mismatch.json: embedded "
                                                 "session_id 'other' does not match requested session_id 'mismatch'.",
        "6: unsupported": warned["unsupported"] == f"Ignoring unsupported Fractal session format at "
                                                   f"{p}/unsupported.json: expected schema_version=1.",
        "empty sessions keep requested id": all(v == (k, 0) for k, v in empty.items()),
        "backup only for 3": all(not backups[k] for k in files if k != "unreadable"),
        "repeat gets a second backup (-1 within the same second)": len(repeat) == 2 and (
            repeat[1] == repeat[0] + "-1" or repeat[0][-14:] != repeat[1][-14:]),
        "next save overwrites with a 1-turn session": len(after["summary"]["turns"]) == 1
        and after["session_id"] == "malformed",
        "backup untouched": backup_text == "{not json",
    }
    return Observation.from_checks(checks, measured={"backups": repeat, "warnings": warned},
                                   evidence="\n".join(warned.values()))


@claim("FRA-23", design=DESIGN, record="MEM-RTE-session-reload", kind="mechanism",
       statement="Sessions are keyed by resolved workspace path; moving a workspace loses them.")
def fra_23(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    rt = sc.runtime()
    submit(rt, "hello")
    sid = rt.session.session_id
    link = ctx.tmp_path / "link"
    link.symlink_to(sc.ws, target_is_directory=True)
    same_key = workspace_key(link) == workspace_key(sc.ws)
    from fractal_sim import FractalRuntime

    linked = FractalRuntime(link, agent=ScriptedAgent(), state_dir=sc.state)
    linked.resume(sid)
    moved = ctx.tmp_path / "ws2"
    sc.ws.rename(moved)
    rt2 = FractalRuntime(moved, agent=ScriptedAgent(), state_dir=sc.state)
    try:
        rt2.resume(sid)
        lost = "resumed"
    except FileNotFoundError:
        lost = "FileNotFoundError"
    keys = {p: workspace_key(p) for p in ("/", "/projects/a b/ré po", "/projects/.hidden/", "/projects/my_app")}
    return Observation.compare(
        {"after_move": "FileNotFoundError", "symlink_same_key": True, "symlink_resumes_turns": 1,
         "acceptance_6": {"/": "workspace--8a5edab282632443",
                          "/projects/a b/ré po": "projects-a-b-r-po--1c95e32646e79a0e",
                          "/projects/.hidden/": "projects-.hidden--5a6e25bf71e0fa3c",
                          "/projects/my_app": "projects-my_app--962fefcac0708adb"}},
        {"after_move": lost, "symlink_same_key": same_key,
         "symlink_resumes_turns": len(linked.session.state.summary.turns), "acceptance_6": keys},
        measured={"key_ws": workspace_key(moved.parent / "ws"), "key_ws2": workspace_key(moved)})


@claim("FRA-24", design=DESIGN, record="MEM-RTE-session-reload", kind="mechanism",
       statement="Listing is mtime navigation; `/new` withdraws without deleting.")
def fra_24(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    rt = sc.submitted("older session first message", "older second")
    old_id = rt.session.session_id
    rt.new_session()
    submit(rt, "newer session")
    newer_id = rt.session.session_id
    os.utime(session_path(sc.ws, old_id, sc.state), (1e6, 1e6))
    os.utime(session_path(sc.ws, newer_id, sc.state), (2e6, 2e6))
    rows = list_sessions(sc.ws, sc.state)
    fresh = rt.new_session().session_id
    listed_before = [r.session_id for r in list_sessions(sc.ws, sc.state)]
    submit(rt, "third session")
    listed_after = [r.session_id for r in list_sessions(sc.ws, sc.state)]
    first_call_summary = rt.agent.calls[-1].instructions.split(SUMMARY_HEADING, 1)[1]
    return Observation.compare(
        {"order": [newer_id, old_id], "counts": [1, 2], "first_messages": ["newer session",
                                                                          "older session first message"],
         "updated_at_old": "1970-01-12T13:46:40+00:00", "new_absent_until_submit": True, "old_still_listed": True,
         "new_summary_only_turn1_pending": True},
        {"order": [r.session_id for r in rows], "counts": [r.turn_count for r in rows],
         "first_messages": [r.first_message for r in rows], "updated_at_old": rows[1].updated_at,
         "new_absent_until_submit": fresh not in listed_before and fresh in listed_after,
         "old_still_listed": old_id in listed_after,
         "new_summary_only_turn1_pending": first_call_summary.count("\nTurn ") == 1
         and "Turn 1 (" in first_call_summary and "Agent status: pending" in first_call_summary},
        evidence="\n".join(f"{r.session_id} {r.updated_at} {r.turn_count} {r.first_message}" for r in rows))


@claim("FRA-25", design=DESIGN, record="Integration issues, item 5", kind="mechanism",
       statement="Listing does not compare filename and embedded id.")
def fra_25(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    good = FractalSession(session_id="good")
    good.add_user_message("the original")
    path = good.save(sc.ws, state_dir=sc.state)
    shutil.copy(path, path.with_name("copyofgood.json"))
    rows = list_sessions(sc.ws, sc.state)
    rt = sc.runtime()
    loaded = rt.resume("good")
    copy, msgs = capture_warnings(lambda: rt.resume("copyofgood"))
    return Observation.compare(
        {"listed_ids": ["good", "good"], "resume_good_turns": 1, "copy_turns": 0,
         "copy_warning_mentions_mismatch": True},
        {"listed_ids": [r.session_id for r in rows], "resume_good_turns": len(loaded.state.summary.turns),
         "copy_turns": len(copy.state.summary.turns),
         "copy_warning_mentions_mismatch": bool(msgs) and "embedded session_id 'good' does not match requested "
                                                          "session_id 'copyofgood'" in msgs[0]},
        evidence=msgs[0] if msgs else "")


@claim("FRA-26", design=DESIGN, record="beyond report (extends Integration issues, item 5)", kind="mechanism",
       statement="Listing also skips the loader's schema pre-check.")
def fra_26(ctx: ClaimContext) -> Observation:
    sc_a = Scenario(ctx.tmp_path / "a")
    p = session_path(sc_a.ws, "bare", sc_a.state)
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps({"schema_version": 1}))
    ids1 = [r.session_id for r in list_sessions(sc_a.ws, sc_a.state)]
    ids2 = [r.session_id for r in list_sessions(sc_a.ws, sc_a.state)]
    rt = sc_a.runtime()
    try:
        rt.resume(ids1[0])
        resume_listed = "resumed"
    except FileNotFoundError:
        resume_listed = "FileNotFoundError"

    sc_b = Scenario(ctx.tmp_path / "b")
    s = FractalSession(session_id="noversion")
    s.add_user_message("hi")
    data = s.state.model_dump(mode="json")
    del data["schema_version"]
    pb = session_path(sc_b.ws, "noversion", sc_b.state)
    pb.parent.mkdir(parents=True)
    pb.write_text(json.dumps(data))
    listed_b = [r.session_id for r in list_sessions(sc_b.ws, sc_b.state)]
    loaded_b, msgs_b = capture_warnings(lambda: FractalSession.load(sc_b.ws, session_id="noversion",
                                                                    state_dir=sc_b.state))
    data["schema_version"] = True
    data["session_id"] = "truthy"
    pt = session_path(sc_b.ws, "truthy", sc_b.state)
    pt.write_text(json.dumps(data))
    listed_t = [r.session_id for r in list_sessions(sc_b.ws, sc_b.state)]
    loaded_t, msgs_t = capture_warnings(lambda: FractalSession.load(sc_b.ws, session_id="truthy",
                                                                    state_dir=sc_b.state))
    return Observation.compare(
        {"bare_listed_random": True, "bare_resume": "FileNotFoundError", "noversion_listed": True,
         "noversion_loads_unsupported": True, "true_listed_and_loaded": [True, 1, 0]},
        {"bare_listed_random": len(ids1) == 1 and ids1 != ids2 and ids1[0] != "bare",
         "bare_resume": resume_listed, "noversion_listed": "noversion" in listed_b,
         "noversion_loads_unsupported": bool(msgs_b) and "unsupported Fractal session format" in msgs_b[0]
         and not loaded_b.state.summary.turns,
         "true_listed_and_loaded": ["truthy" in listed_t, len(loaded_t.state.summary.turns), len(msgs_t)]},
        measured={"listing_ids_call1": ids1, "listing_ids_call2": ids2})


@claim("FRA-27", design=DESIGN, record="Integration issues, item 4", kind="mechanism",
       statement="Failures keep workspace edits with an empty stored modification list; commands include failed "
                 "attempts.")
def fra_27(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    rt = sc.runtime(TurnScript([Write("b.py", "b = 1\n"), Run(["pytest", "-q"], ok=False), Run("ls")],
                               Raise("model failed")))
    submit(rt, "make tests pass")
    data = read_json(rt.session_file())
    h, a = data["history"][0], data["summary"]["turns"][0]["agent"]
    return Observation.compare(
        {"status": "failed", "files_modified": [], "files_changed_count": 0, "commands_run": ["pytest -q", "ls"],
         "commands_run_count": 2, "b_on_disk": True},
        {"status": h["status"], "files_modified": h["files_modified"], "files_changed_count": a["files_changed_count"],
         "commands_run": h["commands_run"], "commands_run_count": a["commands_run_count"],
         "b_on_disk": (sc.ws / "b.py").is_file()},
        evidence=json.dumps({k: h[k] for k in ("status", "files_read", "files_modified", "commands_run", "error")}))


@claim("FRA-28", design=DESIGN, record="Integration issues, item 1", kind="mechanism",
       statement="Summary, history and usage form one container; AGENTS.md is a separate path.")
def fra_28(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    sc.write("AGENTS.md", "Use tabs.\n")
    rt = sc.runtime()
    submit(rt, "hello")
    data = read_json(rt.session_file())
    usage_paths: list[str] = []

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "trace":
                    continue  # the trace is opaque upstream data, not Fractal's usage record
                if k == "usage":
                    usage_paths.append(f"{path}.usage")
                walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for v in node:
                walk(v, f"{path}[]")

    walk(data, "")
    file_text = rt.session_file().read_text()
    rt.new_session()
    sig = build_edit_workspace_signature(rt.session.summary(), load_workspace_instructions(sc.ws))
    return Observation.compare(
        {"top_keys": ["schema_version", "session_id", "summary", "history"], "usage_paths": [".summary.turns[].agent.usage"],
         "agents_in_file": False, "new_session_keeps_agents": True, "new_session_empty_summary": True},
        {"top_keys": list(data), "usage_paths": sorted(set(usage_paths)),
         "agents_in_file": "Use tabs." in file_text,
         "new_session_keeps_agents": AGENTS_HEADING in sig.instructions and "Use tabs." in sig.instructions,
         "new_session_empty_summary": f"{SUMMARY_HEADING}\n\nNo prior Fractal session context." in sig.instructions},
        evidence=excerpt(sig.instructions[sig.instructions.index(AGENTS_HEADING):], 900))


@claim("FRA-29", design=DESIGN, record="Integration issues, item 3", kind="mechanism",
       statement="Fractal summarizes nothing itself; traces are opaque and lossless; a non-RunTrace trace makes the "
                 "file unloadable.")
def fra_29(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    sc.write("a.py", "a\n")
    rt = sc.runtime(TurnScript([Read("a.py"), Run("pytest -q")], Return("ok", []),
                               trace=TraceSpec(step_input_tokens=[500, 900])),
                    TurnScript([], Return("ok", [])))
    submit(rt, "one")
    submit(rt, "two")
    saved = [h.trace for h in rt.session.state.history]
    loaded = FractalSession.load(sc.ws, session_id=rt.session.session_id, state_dir=sc.state)
    lossless = [h.trace for h in loaded.state.history] == saved

    sc2 = Scenario(ctx.tmp_path / "ns")
    s = FractalSession()
    s.add_user_message("x")
    s.add_agent_turn(status="succeeded", trace=SimpleNamespace(status="completed", steps=[], usage=LMUsage(),
                                                              duration_ms=7, iterations=2))
    usage = s.state.summary.turns[0].agent.usage
    import warnings as _w

    with _w.catch_warnings():
        _w.simplefilter("ignore")  # pydantic's serializer warning about the foreign trace object
        s.save(sc2.ws, state_dir=sc2.state)
    reloaded, msgs = capture_warnings(lambda: FractalSession.load(sc2.ws, session_id=s.session_id,
                                                                  state_dir=sc2.state))
    return Observation.compare(
        {"agent_calls": 2, "trace_roundtrip_lossless": True, "namespace_usage": [7, 2], "reload_turns": 0,
         "reload_warning_malformed": True},
        {"agent_calls": len(rt.agent.calls), "trace_roundtrip_lossless": lossless,
         "namespace_usage": [usage.duration_ms, usage.iterations], "reload_turns": len(reloaded.state.summary.turns),
         "reload_warning_malformed": bool(msgs) and msgs[0].startswith("Ignoring malformed Fractal session")},
        evidence=msgs[0][:600] if msgs else "")


@claim("FRA-30", design=DESIGN, record="annotation on RT-BAP-workspace-guidance", kind="mechanism",
       statement="Root AGENTS.md is reloaded per call, stripped and capped.")
def fra_30(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    sc.write("AGENTS.md", "\n\n" + "g" * 25_000 + "\n\n")
    rt = sc.runtime(TurnScript([], Return("ok", [])),
                    TurnScript([Write("AGENTS.md", "Edited guidance.\n")], Return("ok", [])))
    submit(rt, "one")
    submit(rt, "two")
    submit(rt, "three")
    c1, c2, c3 = (c.instructions for c in rt.agent.calls)
    block = c1.split(AGENTS_HEADING, 1)[1].split("\n\n## Always-visible", 1)[0]
    agents_part = block.split("\n\n", 2)[2].rstrip("\n")
    sub = Scenario(ctx.tmp_path / "sub")
    sub.write("sub/AGENTS.md", "nested")
    bad = Scenario(ctx.tmp_path / "bad")
    (bad.ws / "AGENTS.md").write_bytes(b"\xff\xfe bad utf8")
    return Observation.compare(
        {"agents_chars": 20_064, "ends_with_marker": True, "edit_visible_next_call": [False, True],
         "nested_only": "", "invalid_utf8": ""},
        {"agents_chars": len(agents_part), "ends_with_marker": agents_part.endswith(
            "[AGENTS.md truncated — read the full file from the workspace.]"),
         "edit_visible_next_call": ["Edited guidance." in c2, "Edited guidance." in c3],
         "nested_only": load_workspace_instructions(sub.ws), "invalid_utf8": load_workspace_instructions(bad.ws)},
        evidence=excerpt(c3[c3.index(AGENTS_HEADING):], 700))


@claim("FRA-31", design=DESIGN, record="annotation on RT-RTE-direct-agent", kind="mechanism",
       statement="The adapter neither caps history nor persists.")
def fra_31(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    history = [SessionHistoryTurn(turn_id=f"turn-{i:032x}", user_message=f"m{i}", status="succeeded",
                                  created_at="2026-01-01T00:00:00+00:00", updated_at="2026-01-01T00:00:00+00:00")
               for i in range(30)]
    agent = ScriptedAgent()
    asyncio.run(agent.aforward(workspace_path=sc.ws, user_message="direct", session_history=history))
    call = agent.calls[0]
    return Observation.compare(
        {"captured": 30, "same_list_object": True, "state_dir_exists": False},
        {"captured": len(call.inputs_json["session_history"]), "same_list_object": call.history_ref is history,
         "state_dir_exists": sc.state.exists()})


@claim("FRA-32", design=DESIGN, record="annotation on RT-RTE-config-change", kind="mechanism",
       statement="Configuration is not session content.")
def fra_32(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    agent = ScriptedAgent([TurnScript([], Return("ok", []), trace=TraceSpec(model="model-alpha")),
                           TurnScript([], Return("ok", []), trace=TraceSpec(model="model-beta"))],
                          max_iterations=30, model_label="model-alpha")
    rt = sc.runtime(agent=agent)
    meter = ContextMeter()
    submit(rt, "one")
    k1 = meter.estimate_runtime(rt).key
    first = read_json(rt.session_file())
    agent.model_label, agent.max_iterations = "model-beta", 7
    k2 = meter.estimate_runtime(rt).key
    submit(rt, "two")
    second = read_json(rt.session_file())
    text = rt.session_file().read_text()

    def keys(node: object, acc: set[str]) -> set[str]:
        if isinstance(node, dict):
            for k, v in node.items():
                acc.add(k)
                keys(v, acc)
        elif isinstance(node, list):
            for v in node:
                keys(v, acc)
        return acc

    b1, b2 = blocks(strip_turn_ids(rt.session.summary()))
    return Observation.compare(
        {"same_keys": True, "config_fields": [], "model_names_only_in_trace": True, "same_block_format": True,
         "meter_key_changed": True},
        {"same_keys": keys(first, set()) == keys(second, set()),
         "config_fields": sorted(keys(second, set()) & {"model_label", "max_iterations_config", "config", "provider"}),
         "model_names_only_in_trace": text.count("model-alpha") == 1 and text.count("model-beta") == 1
         and all(h["trace"]["model"].startswith("model-") for h in second["history"]),
         "same_block_format": b1.replace("one", "X").splitlines()[1:] == b2.replace("two", "X").splitlines()[1:],
         "meter_key_changed": k1 != k2 and (k1.model_label, k1.max_iterations) != (k2.model_label, k2.max_iterations)},
        measured={"key1": [k1.model_label, k1.max_iterations], "key2": [k2.model_label, k2.max_iterations]})


def _thirty_entry_state(session_id: str) -> SessionState:
    state = SessionState(session_id=session_id)
    for i in range(30):
        tid = f"turn-{i:032x}"
        state.summary.turns.append(SummaryTurn(turn_id=tid, user=UserTurn(message=f"m{i}")))
        state.history.append(SessionHistoryTurn(turn_id=tid, user_message=f"m{i}", status="pending",
                                                created_at="2026-01-01T00:00:00+00:00",
                                                updated_at="2026-01-01T00:00:00+00:00"))
    return state


@claim("FRA-33", design=DESIGN, record="MEM-OBJ-turn-usage (estimator)", kind="mechanism",
       statement="The meter only estimates, but trims history as a side effect.")
def fra_33(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    path = session_path(sc.ws, "thirty", sc.state)
    path.parent.mkdir(parents=True)
    path.write_text(serialize_state(_thirty_entry_state("thirty")))
    rt = sc.runtime()
    rt.resume("thirty")
    loaded_len = len(rt.session.state.history)
    summary_before = rt.session.summary()
    meter = ContextMeter()
    e1 = meter.estimate_runtime(rt)
    after_len = len(rt.session.state.history)
    summary_after = rt.session.summary()
    e2 = meter.estimate_runtime(rt)
    rt.session.add_user_message("new")
    e3 = meter.estimate_runtime(rt)
    return Observation.compare(
        {"loaded": 30, "after_estimate": 20, "summary_turns_after_estimate": 30, "summary_unchanged": True,
         "stable_on_repeat": True, "computations_after_repeat": 1, "key_changes_after_append": True,
         "file_untouched": 30},
        {"loaded": loaded_len, "after_estimate": after_len,
         "summary_turns_after_estimate": summary_after.count("\nTurn "),
         "summary_unchanged": summary_after == summary_before,
         "stable_on_repeat": e1.key == e2.key, "computations_after_repeat": meter.computations - 1,
         "key_changes_after_append": e3.key != e2.key,
         "file_untouched": len(read_json(path)["history"])},
        measured={"tokens": [e1.tokens, e3.tokens], "computations": meter.computations})


@claim("FRA-34", design=DESIGN, record="beyond report", kind="mechanism",
       statement="The current message reaches the model twice.")
def fra_34(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    rt = sc.runtime()
    submit(rt, "first")
    submit(rt, "rename foo to bar")
    call = rt.agent.calls[1]
    summary = call.instructions.split(SUMMARY_HEADING, 1)[1].split("\n\nThe summary above", 1)[0]
    last = blocks(summary.strip())[-1].splitlines()
    return Observation.compare(
        {"user_message": "rename foo to bar", "last_block_tail": ["User: rename foo to bar", "Agent status: pending"]},
        {"user_message": call.inputs_json["user_message"], "last_block_tail": last[1:]},
        evidence=strip_turn_ids("\n".join(last)))


@claim("FRA-35", design=DESIGN, record="beyond report", kind="mechanism",
       statement="Finalizing an evicted turn half-applies; no id targets the last turn.")
def fra_35(ctx: ClaimContext) -> Observation:
    s = FractalSession()
    ids = [s.add_user_message(f"m{i}") for i in range(1, 22)]
    try:
        s.add_agent_turn(status="succeeded", turn_id=ids[0])
        err = "no error"
    except ValueError as exc:
        err = str(exc)
    half = s.state.summary.turns[0].agent
    s.add_agent_turn(status="succeeded", response="last")
    return Observation.compare(
        {"error": f"No session history turn found for id '{ids[0]}'.", "turn1_agent_set": "succeeded",
         "turn21_finalized": ["succeeded", "succeeded"]},
        {"error": err, "turn1_agent_set": half.status if half else None,
         "turn21_finalized": [s.state.summary.turns[-1].agent.status, s.state.history[-1].status]},
        evidence=strip_turn_ids(blocks(s.summary())[0]))


@claim("FRA-36", design=DESIGN, record="beyond report", kind="mechanism",
       statement="The payload is a shallow copy of live entries.")
def fra_36(ctx: ClaimContext) -> Observation:
    s = FractalSession()
    s.add_user_message("hi")
    p = s.session_history_payload()
    before = p[-1].status
    s.add_agent_turn(status="failed", error="x")
    return Observation.compare({"before": "pending", "after": "failed", "list_is_copy": True, "entries_shared": True},
                               {"before": before, "after": p[-1].status, "list_is_copy": p is not s.state.history,
                                "entries_shared": p[-1] is s.state.history[-1]})


@claim("FRA-37", design=DESIGN, record="beyond report", kind="mechanism",
       statement="Load neither trims nor cross-checks, and ignores extra keys.")
def fra_37(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    state = _thirty_entry_state("loose")
    data = state.model_dump(mode="json")
    data["unknown_key"] = {"anything": 1}
    data["history"].append({**data["history"][0], "turn_id": "turn-orphan", "user_message": "no summary turn"})
    path = session_path(sc.ws, "loose", sc.state)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    loaded, msgs = capture_warnings(lambda: FractalSession.load(sc.ws, session_id="loose", state_dir=sc.state))
    return Observation.compare({"history": 31, "summary": 30, "warnings": [], "orphan_kept": True},
                               {"history": len(loaded.state.history), "summary": len(loaded.state.summary.turns),
                                "warnings": msgs, "orphan_kept": loaded.state.history[-1].turn_id == "turn-orphan"})


@claim("FRA-38", design=DESIGN, record="beyond report", kind="mechanism",
       statement="Exceptions before finalization leave the turn pending.")
def fra_38(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    rt = sc.runtime(TurnScript([], Return("ok", []), trace=TraceSpec(duration_ms=-5)))

    def boom() -> None:
        raise RuntimeError("on_pending failed")

    e1 = submit(rt, "one", on_pending=boom)
    d1 = read_json(rt.session_file())
    e2 = submit(rt, "two")
    d2 = read_json(rt.session_file())
    return Observation.compare(
        {"on_pending": ["RuntimeError", None, "pending"], "negative_duration": ["ValidationError", None, "pending"],
         "agent_calls": 1},
        {"on_pending": [type(e1).__name__, d1["summary"]["turns"][0]["agent"], d1["history"][0]["status"]],
         "negative_duration": [type(e2).__name__, d2["summary"]["turns"][1]["agent"], d2["history"][1]["status"]],
         "agent_calls": len(rt.agent.calls)}, evidence=str(e2)[:400])


@claim("FRA-39", design=DESIGN, record="beyond report", kind="mechanism",
       statement="Headless Ctrl-C reports \"interrupted\" while storing pending.")
def fra_39(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    rt = sc.runtime(TurnScript([], Cancel()))
    envelope, code = asyncio.run(run_headless(rt, "long job"))
    data = read_json(rt.session_file())
    return Observation.compare(
        {"exit": 130, "status": "interrupted", "error": "interrupted by user", "stored": "pending",
         "stored_agent": None},
        {"exit": code, "status": envelope.status, "error": envelope.error, "stored": data["history"][0]["status"],
         "stored_agent": data["summary"]["turns"][0]["agent"]}, evidence=envelope.to_json())


@claim("FRA-40", design=DESIGN, record="beyond report", kind="mechanism", statement="Format quirks.")
def fra_40(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    s = FractalSession()
    s.add_user_message("ré ✓")
    raw = s.save(sc.ws, state_dir=sc.state).read_text(encoding="utf-8")
    rejected = {}
    for bad in ("a/b", "", "x.json"):
        try:
            session_path(sc.ws, bad, sc.state)
            rejected[bad] = "accepted"
        except ValueError as exc:
            rejected[bad] = str(exc)
    return Observation.compare(
        {"escaped": True, "dotdot_path_suffix": "/...json",
         "rejected": {"a/b": "Invalid Fractal session id: 'a/b'", "": "Invalid Fractal session id: ''",
                      "x.json": "Invalid Fractal session id: 'x.json'"}, "ascii_only": True,
         "trailing_newline": True},
        {"escaped": '"r\\u00e9 \\u2713"' in raw, "dotdot_path_suffix": str(session_path(sc.ws, "..", sc.state))[-8:],
         "rejected": rejected, "ascii_only": raw.isascii(), "trailing_newline": raw.endswith("}\n")},
        evidence=raw[raw.index('"user"'):raw.index('"user"') + 60])


