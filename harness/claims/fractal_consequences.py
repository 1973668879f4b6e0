"""Fractal consequence claims FRA-41 .. FRA-45: measured growth and loss, numbers in ``measured``.

Spec: ``shared/spec/fractal.md`` section 10 (consequences a-d and the estimator). Each scenario drives
``FractalRuntime``/``FractalSession`` on a fresh workspace and state dir and reports what it measured.
"""

from __future__ import annotations

import json
import re

from fractal_sim import FractalSession, RunTrace, workspace_digest
from fractal_sim.agent import Raise, Read, Return, TurnScript, Write
from fractal_sim.context_meter import ContextMeter
from harness.claims import ClaimContext, Observation, claim
from harness.claims.fractal_common import (
    DESIGN,
    Scenario,
    excerpt,
    fra41_message,
    fra41_script,
    read_json,
    submit,
)

_NO_FRACTION_TS = re.compile(r'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00"')


def _digits(n: int) -> int:
    return sum(len(str(i)) for i in range(1, n + 1))


def summary_length_law(n: int, u: int = 100, r: int = 200) -> int:
    """Spec 5.1: ``18 + N·(160 + U + R) + Σ digits(i)`` for N finalized single-digit-count turns."""
    return 18 + n * (160 + u + r) + _digits(n)


@claim("FRA-41", design=DESIGN, record="MEM-OBJ-session-summary; MEM-RTE-session-context", kind="consequence",
       statement="(a) The always-visible summary grows without bound, linearly.")
def fra_41(ctx: ClaimContext) -> Observation:
    sizes = (10, 50) if ctx.quick else (10, 50, 200)  # --quick drops the 200-turn run
    summary_len, instr_len = {}, {}
    for n in sizes:
        sc = Scenario(ctx.tmp_path / f"n{n}")
        sc.write("a.py", "a\n")
        sc.write("b.py", "b\n")
        rt = sc.runtime(*(fra41_script() for _ in range(n)))
        for _ in range(n):
            submit(rt, fra41_message())
        summary_len[n] = len(rt.session.summary())
        instr_len[n] = len(rt.agent.calls[n - 1].instructions)
    per_turn = (summary_len[sizes[-1]] - summary_len[sizes[-2]]) / (sizes[-1] - sizes[-2])
    return Observation.compare(
        {"summary_chars": {k: v for k, v in {"10": 4629, "50": 23109, "200": 92510}.items() if int(k) in sizes},
         "law": {str(n): summary_length_law(n) for n in sizes}},
        {"summary_chars": {str(n): summary_len[n] for n in sizes},
         "law": {str(n): summary_len[n] for n in sizes}},
        measured={"instruction_chars_at_call_n": {str(n): instr_len[n] for n in sizes},
                  "chars_per_turn_last_interval": per_turn})


@claim("FRA-42", design=DESIGN, record="MEM-OBJ-session-history; MEM-RTE-session-context", kind="consequence",
       statement="(b) Facts from evicted turns vanish from everything the model receives; counts survive.")
def fra_42(ctx: ClaimContext) -> Observation:
    def run(control: bool) -> dict:
        sc = Scenario(ctx.tmp_path / ("control" if control else "main"))
        sc.write("alpha_secret.py", "SECRET = 42\n")
        for i in range(2, 31):
            sc.write(f"mod_{i:02d}.py", f"x = {i}\n")
        first_response = "I read alpha_secret.py." if control else "Read the requested module."
        scripts = [TurnScript([Read("alpha_secret.py")], Return(first_response, []))]
        scripts += [TurnScript([Read(f"mod_{i:02d}.py")], Return("Read the requested module.", []))
                    for i in range(2, 31)]
        rt = sc.runtime(*scripts)
        file_mentions_after_30 = -1
        for i in range(1, 32):
            submit(rt, "Look at the module for this step." if i != 31 else "What was the secret module?")
            if i == 30:
                file_mentions_after_30 = rt.session_file().read_text().count("alpha_secret.py")
        visible = [("alpha_secret.py" in c.model_visible_text()) for c in rt.agent.calls]
        detail = [("alpha_secret.py" in json.dumps(c.inputs_json["session_history"])) for c in rt.agent.calls]
        t1 = rt.session.state.summary.turns[0].agent
        return {"visible": visible, "in_history_input": detail, "rt": rt, "sc": sc,
                "file_mentions": file_mentions_after_30,
                "turn1_files_read_count": t1.files_read_count,
                "workspace_has_file": (sc.ws / "alpha_secret.py").is_file()}

    main, control = run(False), run(True)
    call2 = main["rt"].agent.calls[1].inputs_json["session_history"][0]
    table = {f"call_{k}": v for k, v in enumerate(main["visible"], start=1)}
    return Observation.compare(
        {"visible_calls": list(range(2, 21)), "file_mentions_after_30": 0, "turn1_files_read_count": 1,
         "workspace_has_file": True, "control_visible_calls": list(range(2, 32))},
        {"visible_calls": [k for k, v in enumerate(main["visible"], start=1) if v],
         "file_mentions_after_30": main["file_mentions"], "turn1_files_read_count": main["turn1_files_read_count"],
         "workspace_has_file": main["workspace_has_file"],
         "control_visible_calls": [k for k, v in enumerate(control["visible"], start=1) if v]},
        measured={"per_call_visible": table,
                  "call2_entry_files_read": call2["files_read"],
                  "call2_entry_trace_code": [s["code"] for s in call2["trace"]["steps"]]},
        evidence=json.dumps({"call": 2, "history[0].files_read": call2["files_read"],
                             "trace.steps[].code": [s["code"] for s in call2["trace"]["steps"]]}))


@claim("FRA-43", design=DESIGN, record="Integration issues, item 4; MEM-RTE-checkpoint-update", kind="consequence",
       statement="(c) A failed turn that wrote a file reports 0 changed files while the workspace differs.")
def fra_43(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    sc.write("a.py", "a = 1\n")
    before_files = sorted(p.name for p in sc.ws.iterdir())
    before = workspace_digest(sc.ws)
    rt = sc.runtime(TurnScript([Write("b.py", "b = 2\n")], Raise("model failed")))
    submit(rt, "add b.py")
    after = workspace_digest(sc.ws)
    added = sorted(set(p.name for p in sc.ws.iterdir()) - set(before_files))
    data = read_json(rt.session_file())
    return Observation.compare(
        {"files_changed_count": 0, "files_modified": [], "digest_changed": True, "added": ["b.py"],
         "status": "failed"},
        {"files_changed_count": data["summary"]["turns"][0]["agent"]["files_changed_count"],
         "files_modified": data["history"][0]["files_modified"], "digest_changed": before != after,
         "added": added, "status": data["history"][0]["status"]},
        measured={"digest_before": before, "digest_after": after})


@claim("FRA-44", design=DESIGN, record="MEM-RTE-checkpoint-update; annotation on RT-OBJ-session-state",
       kind="consequence", statement="(d) Bytes written per save grow with session length.")
def fra_44(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path)
    session = FractalSession()
    pending, final, adjusted = [], [], []
    for _ in range(40):
        turn_id = session.add_user_message("m" * 100)
        pending.append(session.save(sc.ws, state_dir=sc.state).stat().st_size)
        session.add_agent_turn(status="succeeded", response="r" * 200, files_read=["a.py", "b.py"],
                               changed_files=["a.py"], commands_run=["pytest -q"], turn_id=turn_id,
                               trace=RunTrace(status="completed", model="m", iterations=1, max_iterations=30,
                                              duration_ms=1000))
        path = session.save(sc.ws, state_dir=sc.state)
        size = path.stat().st_size
        final.append(size)
        # a timestamp with microsecond 0 prints without its 7-char fraction (spec 11.14)
        adjusted.append(size + 7 * len(_NO_FRACTION_TS.findall(path.read_text())))
    steps = [b - a for a, b in zip(adjusted, adjusted[1:], strict=False)]
    return Observation.compare(
        {"session_id_chars": 32, "turn_1": 2089, "turn_2": 4041, "turn_20": 39177, "turn_21": 40039, "turn_40": 56417,
         "growth_to_20": [1952] * 19, "growth_after_20": [862] * 20, "never_decreasing": True},
        {"session_id_chars": len(session.session_id), "turn_1": adjusted[0], "turn_2": adjusted[1],
         "turn_20": adjusted[19], "turn_21": adjusted[20], "turn_40": adjusted[39], "growth_to_20": steps[:19],
         "growth_after_20": steps[19:], "never_decreasing": all(b >= a for a, b in zip(final, final[1:], strict=False))},
        measured={"pending_save_bytes": pending, "final_save_bytes": final,
                  "bytes_written_total": sum(pending) + sum(final)},
        evidence=excerpt(path.read_text(), 900))


@claim("FRA-45", design=DESIGN, record="MEM-RTE-session-context", kind="consequence",
       statement="The next-turn estimate keeps growing after the tail saturates.")
def fra_45(ctx: ClaimContext) -> Observation:
    sc = Scenario(ctx.tmp_path, files={"a.py": "a\n", "b.py": "b\n"})
    rt = sc.runtime(*(fra41_script() for _ in range(60)))
    meters = {"chars4": ContextMeter("chars4"), "minilm": ContextMeter("minilm")}
    points = (10, 20, 30, 60)
    rows: dict[str, dict[str, list[int]]] = {name: {"tokens": [], "system_chars": [], "history_json_chars": []}
                                             for name in meters}
    done = 0
    for n in points:
        while done < n:
            submit(rt, fra41_message())
            done += 1
        for name, meter in meters.items():
            est = meter.estimate_runtime(rt)
            for field in rows[name]:
                rows[name][field].append(getattr(est, field))
    c4 = rows["chars4"]

    def increasing(xs: list[int]) -> bool:
        return all(b > a for a, b in zip(xs, xs[1:], strict=False))

    return Observation.from_checks({
        "chars4 tokens strictly increase": increasing(c4["tokens"]),
        "system_chars strictly increase": increasing(c4["system_chars"]),
        "history_json_chars constant from 20 on": len(set(c4["history_json_chars"][1:])) == 1,
        "history_json_chars grew up to 20": c4["history_json_chars"][0] < c4["history_json_chars"][1],
        "minilm tokens strictly increase": increasing(rows["minilm"]["tokens"]),
    }, measured={"turns": list(points), **{f"{name}_{k}": v for name, r in rows.items() for k, v in r.items()}})
