"""AgentFly claims AGF-01..AGF-19 (spec shared/spec/agentfly.md §9). AGF-20..38 are in ``agentfly_more.py``."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

from agentfly_sim.agents import ScriptedExecutor, ScriptedJudge, ScriptedPlanner, tool_call
from agentfly_sim.bank import extract_pairs, load_jsonl, load_pool
from agentfly_sim.driver import DriverConfig, NPDriver, PMDriver
from agentfly_sim.errors import DriverStartupError
from agentfly_sim.testing import ScoreFunctionRetriever, rank_by_index
from agentfly_sim.workspace import WorkspaceTools
from harness.claims import ClaimContext, Observation, claim
from harness.claims.agentfly_common import (
    np_layout,
    np_rows,
    offline_agents,
    plain_agents,
    plan_text,
    pm_rows,
    questions,
    quiet,
    read_rows,
    set_threads,
    untrained_checkpoint,
    upstream_layout,
    write_rows,
)

D = "agentfly"


def _no_retriever(path: str):
    raise FileNotFoundError(f"no checkpoint at {path}")


@claim("AGF-01", design=D, record="Core idea 1", kind="mechanism",
       statement="Both outcome signs are admitted, and the stored plan is the latest parsed plan, or \"\"")
def agf_01(ctx: ClaimContext) -> Observation:
    set_threads()
    plan_a, plan_b = plan_text("plan A step"), plan_text("plan B step one", "plan B step two")
    rows = [{"question": "Q-fail?", "ground_truth": "zzz"}, {"question": "Q-direct?", "ground_truth": "y"}]
    scripts = {"Q-fail?": [plan_a, plan_b, "FINAL ANSWER: x"], "Q-direct?": ["FINAL ANSWER: y"]}
    out: dict[str, object] = {}
    for kind in ("np", "pm"):
        root = ctx.tmp_path / kind
        client = upstream_layout(root, dataset_rows=rows)
        bank = root / "memory" / ("dummy_memo.jsonl" if kind == "np" else "memory.jsonl")
        write_rows(bank, np_rows([1]) if kind == "np" else pm_rows(["positive"]))
        a = offline_agents(planner=ScriptedPlanner(scripts=scripts, seed=ctx.seed), judge=ScriptedJudge("match"))
        if kind == "np":
            NPDriver(client, a.planner, a.executor, a.judge, out=quiet()).run()
            res = read_rows(root / "result/result_round_0.jsonl")
        else:
            PMDriver(client, a.planner, a.executor, a.judge, out=quiet(), retriever_factory=_no_retriever).run()
            res = read_rows(root / "result/result_parametric.jsonl")
        new = read_rows(bank)[1:]
        out[kind] = {"rows": new,
                     "plan_a_in_meta_trace": any(m["output"] == plan_a for m in res[0]["meta_trace"]),
                     "plan_a_in_bank": any(r.get("plan") == plan_a for r in read_rows(bank))}
    np_new, pm_new = out["np"]["rows"], out["pm"]["rows"]
    checks = {
        "np failed row stores plan B, reward 0": np_new[0] == {"question": "Q-fail?", "plan": plan_b, "reward": 0},
        "np direct answer stores plan '' reward 1": np_new[1] == {"question": "Q-direct?", "plan": "", "reward": 1},
        "pm failed row negative with plan B": pm_new[0] == {"case": "Q-fail?", "plan": plan_b, "case_label": "negative"},
        "pm direct row positive with ''": pm_new[1] == {"case": "Q-direct?", "plan": "", "case_label": "positive"},
        "plan A only in meta_trace": all(out[k]["plan_a_in_meta_trace"] and not out[k]["plan_a_in_bank"]
                                         for k in ("np", "pm")),
    }
    return Observation.from_checks(checks, measured={"np_rows": np_new, "pm_rows": pm_new},
                                   evidence=json.dumps(np_new, ensure_ascii=False))


def _pm_run(ctx: ClaimContext, name: str, bank_rows, dataset_rows, *, planner=None, executor=None, judge=None,
            retriever=None, config=None, tools=None, **kw):
    root = ctx.tmp_path / name
    client = upstream_layout(root, dataset_rows=dataset_rows)
    if bank_rows is not None:
        write_rows(root / "memory/memory.jsonl", bank_rows)
    a = plain_agents(planner=planner, executor=executor, judge=judge, seed=ctx.seed)
    drv = PMDriver(client, a.planner, a.executor, a.judge, out=quiet(),
                   retriever=retriever or ScoreFunctionRetriever(rank_by_index), config=config, tools=tools, **kw)
    summary = drv.run()
    return root, drv, summary, a


@claim("AGF-02", design=D, record="Core idea 2", kind="mechanism",
       statement="Selectors rank first and split by label afterwards; neither keeps only successes; PM drops "
                 "unknown labels from the prompt")
def agf_02(ctx: ClaimContext) -> Observation:
    bank = pm_rows(["unknown"] + ["negative"] * 7)
    root, drv, _, _ = _pm_run(ctx, "pm", bank, questions(1), judge=ScriptedJudge("incorrect"))
    rec = read_rows(root / "result/result_parametric.jsonl")[0]
    prompt = rec["meta_trace"][0]["input_messages"][2]
    pairs = read_rows(root / "memory/training_data.jsonl")
    return Observation.compare(
        {"neg_header": True, "has_positive_section": False, "unknown_in_prompt": False, "retrieved_cases": 8,
         "pairs": 8, "top_case_label": "unknown"},
        {"neg_header": prompt.startswith("Negative Examples - Showing 7 of 7:"),
         "has_positive_section": "Positive Examples" in prompt, "unknown_in_prompt": "Case question 0?" in prompt,
         "retrieved_cases": len(rec["retrieved_cases"]), "pairs": len(pairs),
         "top_case_label": rec["retrieved_cases"][0]["case_label"]},
        evidence=prompt[:400])


@claim("AGF-03", design=D, record="Core idea 3", kind="mechanism",
       statement="Case text refreshes every question; the weights load once per process")
def agf_03(ctx: ClaimContext) -> Observation:
    set_threads()
    from agentfly_sim.classifier import CaseRetriever

    ck_a, ck_b = untrained_checkpoint(0), untrained_checkpoint(1)
    root = ctx.tmp_path / "pm"
    client = upstream_layout(root, dataset_rows=questions(3))
    write_rows(root / "memory/memory.jsonl", pm_rows(["positive", "negative"] * 3))
    ckpt = root / "memory/ckpts/retriever/best.pt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(ck_a.read_bytes())

    def swap(i: int, total: int, q: str) -> None:
        if i == 1:  # after q1: overwrite the checkpoint with B
            ckpt.write_bytes(ck_b.read_bytes())

    cfg = DriverConfig(limit=2)
    a = plain_agents(seed=ctx.seed)
    PMDriver(client, a.planner, a.executor, a.judge, out=quiet(), config=cfg, on_question=swap).run()
    recs = read_rows(root / "result/result_parametric.jsonl")
    q2 = recs[1]
    pool_q2, meta_q2 = texts_meta(root, upto=7)
    ref_a = {r["index"]: r["score"] for r in CaseRetriever(ck_a, device="cpu").retrieve(q2["query"], pool_q2, meta_q2)}
    got = {r["index"]: r["score"] for r in q2["retrieved_cases"]}
    diff_a = max(abs(got[i] - ref_a[i]) for i in got)
    # restart: the new process loads B
    a = plain_agents(seed=ctx.seed)
    PMDriver(client, a.planner, a.executor, a.judge, out=quiet(), config=DriverConfig(limit=3)).run()
    q3 = read_rows(root / "result/result_parametric.jsonl")[2]
    pool_q3, meta_q3 = texts_meta(root, upto=8)
    ref_b = {r["index"]: r["score"] for r in CaseRetriever(ck_b, device="cpu").retrieve(q3["query"], pool_q3, meta_q3)}
    got3 = {r["index"]: r["score"] for r in q3["retrieved_cases"]}
    diff_b = max(abs(got3[i] - ref_b[i]) for i in got3)
    ref_a3 = {r["index"]: r["score"] for r in CaseRetriever(ck_a, device="cpu").retrieve(q3["query"], pool_q3, meta_q3)}
    diff_a3 = max(abs(got3[i] - ref_a3[i]) for i in got3)
    return Observation.from_checks(
        {"q2 scored with A although the file holds B": diff_a < 1e-5,
         "q2 pool includes q1's case (text refreshed)": len(pool_q2) == 7 and meta_q2[6]["case"] == recs[0]["query"],
         "after restart q3 scored with B": diff_b < 1e-5 and diff_a3 > 1e-5},
        measured={"max_diff_q2_vs_A": diff_a, "max_diff_q3_vs_B": diff_b, "max_diff_q3_vs_A": diff_a3},
        evidence=json.dumps(q2["retrieved_cases"][:2], ensure_ascii=False)[:400])


def texts_meta(root: Path, upto: int):
    """The pool as the driver saw it: the first ``upto`` bank lines."""
    lines = (root / "memory/memory.jsonl").read_text(encoding="utf-8").splitlines()[:upto]
    p = root / f"pool_{upto}.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_pool(p)


@claim("AGF-04", design=D, record="Core idea 4", kind="mechanism",
       statement="The planner receives less than storage keeps")
def agf_04(ctx: ClaimContext) -> Observation:
    cache = str(ctx.tmp_path / "cache" / "q0")
    q0 = "What is the answer to synthetic question 0?"
    ex = ScriptedExecutor(scripts={(q0, 1): [
        tool_call("write_workspace_file", {"filename": "notes.md", "content": "n" * 10000, "task_cache_dir": cache}),
        tool_call("read_workspace_file", {"filename": "notes.md", "task_cache_dir": cache}),
        {"content": "notes read", "tool_calls": None}]})
    planner = ScriptedPlanner(scripts={q0: [plan_text("read the notes"), "FINAL ANSWER: answer 0"]})
    root, _, _, _ = _pm_run(ctx, "pm", pm_rows(["positive"]), questions(2), planner=planner, executor=ex)
    recs = read_rows(root / "result/result_parametric.jsonl")
    read_result = recs[0]["tool_history"][1]["result"]
    shown = WorkspaceTools().read_workspace_file("notes.md", cache).split("=" * 50 + "\n", 1)[1]
    examples_q1 = recs[1]["meta_trace"][0]["input_messages"][2]
    return Observation.from_checks(
        {"result line keeps rationale and tool_history": "rationale" in recs[0] and len(recs[0]["tool_history"]) == 2,
         "next examples hold only question and plan": q0 in examples_q1 and "rationale" not in examples_q1
         and "notes.md" not in examples_q1 and "scripted" not in examples_q1,
         "display 4040 chars": len(shown) == 4040, "marker": "Truncated 6,000 characters" in read_result,
         "size reports 10000": "Size: 10000 characters" in read_result},
        measured={"display_chars": len(shown), "examples_prompt_chars": len(examples_q1)},
        evidence=examples_q1[:300])


@claim("AGF-05", design=D, record="MEM-OBJ-dummy-memo", kind="mechanism",
       statement="The NP loader skips malformed lines, which shifts later indices, and has a two-key fallback")
def agf_05(ctx: ClaimContext) -> Observation:
    root, client = np_layout(ctx.tmp_path, questions(1))
    bank = root / "memory/dummy_memo.jsonl"
    lines = [json.dumps(np_rows([0])[0]), "{bad", json.dumps({"question": "Q3", "reward": 1}),
             json.dumps(np_rows([1], prefix="Later row")[0])]
    bank.write_text("\n".join(lines) + "\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        items = load_jsonl(bank)
        a = plain_agents(seed=ctx.seed)
        NPDriver(client, a.planner, a.executor, a.judge, out=quiet()).run()
    pairs = extract_pairs(items)
    rec = read_rows(root / "result/result_round_0.jsonl")[0]
    prompt = rec["meta_trace"][0]["input"][2]
    pos = prompt.split("Negative Examples")[0]
    return Observation.from_checks(
        {"two-key fallback pair": ("Q3", 1, 1) in pairs,
         "shown under positives with Plan: 1": "Question: Q3\nPlan: 1\n" in pos,
         "warn line": err.getvalue().startswith("[WARN] Failed to parse line 2, skipped:"),
         "later line_index shifted by one (file line 4 -> index 2)": pairs[-1][2] == 2},
        measured={"pairs": [list(p) for p in pairs]}, evidence=err.getvalue().splitlines()[0] + "\n" + pos[:300])


@claim("AGF-06", design=D, record="MEM-OBJ-dummy-memo", kind="mechanism",
       statement="The case write needs a creatable parent directory, and it happens after the result write")
def agf_06(ctx: ClaimContext) -> Observation:
    root, client = np_layout(ctx.tmp_path, questions(3))
    bank = write_rows(client / "memo.jsonl", np_rows([1, 0]))
    before = bank.read_text()
    cfg = DriverConfig(memory_jsonl_path="memo.jsonl")
    a = plain_agents(seed=ctx.seed)
    d1 = NPDriver(client, a.planner, a.executor, a.judge, out=quiet(), config=cfg)
    s1 = d1.run()
    warnings = [x for x in d1.log if x.startswith("WARNING Failed to write memory file")]
    a = plain_agents(seed=ctx.seed)
    s2 = NPDriver(client, a.planner, a.executor, a.judge, out=quiet(), config=cfg).run()
    return Observation.compare(
        {"results": 3, "case_write_failures": 3, "bank_unchanged": True, "rerun_skipped": 3, "rerun_processed": 0},
        {"results": len(read_rows(root / "result/result_round_0.jsonl")), "case_write_failures": len(warnings),
         "bank_unchanged": bank.read_text() == before, "rerun_skipped": s2.skipped, "rerun_processed": s2.processed},
        evidence=warnings[0] if warnings else "", measured={"first_run_processed": s1.processed})


@claim("AGF-07", design=D, record="MEM-OBJ-memory", kind="mechanism",
       statement="One malformed PM bank line disables retrieval for good; the driver itself never writes a "
                 "malformed plan")
def agf_07(ctx: ClaimContext) -> Observation:
    root = ctx.tmp_path / "pm"
    bank = root / "memory/memory.jsonl"

    def corrupt(i: int, total: int, q: str) -> None:
        if i == 1:
            with open(bank, "a", encoding="utf-8") as f:
                f.write("{bad\n")

    qs = questions(5)
    planner = ScriptedPlanner(scripts={qs[3]["question"]: ["this is not json at all"]}, seed=ctx.seed)
    root, drv, _, _ = _pm_run(ctx, "pm", pm_rows(["positive", "negative", "positive"]), qs[:4], planner=planner,
                              on_question=corrupt)
    recs = read_rows(root / "result/result_parametric.jsonl")
    pairs = read_rows(root / "memory/training_data.jsonl")
    n_cases = sum(1 for line in bank.read_text().splitlines() if line.strip()) - 4  # 3 seeds + the bad line
    # restart with one more question
    write_rows(root / "data/deepresearcher.jsonl", qs)
    a = plain_agents(seed=ctx.seed)
    d2 = PMDriver(root / "client", a.planner, a.executor, a.judge, out=quiet(),
                  retriever=ScoreFunctionRetriever(rank_by_index))
    d2.run()
    rec5 = read_rows(root / "result/result_parametric.jsonl")[-1]
    plans = [json.loads(line)["plan"] for line in bank.read_text().splitlines() if line.startswith("{\"case")]
    plans_ok = all(p == "" or isinstance(json.loads(p).get("plan"), list) for p in plans)
    return Observation.compare(
        {"q2_retrieved": 4, "q3_retrieved": 0, "q4_retrieved": 0, "pairs_only_q1_q2": True, "cases_appended": 4,
         "restart_q5_retrieved": 0, "bank_plans_well_formed": True, "q4_plan_stored": ""},
        {"q2_retrieved": len(recs[1]["retrieved_cases"]), "q3_retrieved": len(recs[2]["retrieved_cases"]),
         "q4_retrieved": len(recs[3]["retrieved_cases"]),
         "pairs_only_q1_q2": {p["query"] for p in pairs} == {qs[0]["question"], qs[1]["question"]},
         "cases_appended": n_cases, "restart_q5_retrieved": len(rec5["retrieved_cases"]),
         "bank_plans_well_formed": plans_ok, "q4_plan_stored": json.loads(bank.read_text().splitlines()[-2])["plan"]},
        evidence="\n".join(x for x in drv.log if "Failed to load memory" in x)[:300])


@claim("AGF-08", design=D, record="MEM-OBJ-query-record", kind="mechanism",
       statement="The rich result is written before pairs and case; a restart reads only query/question")
def agf_08(ctx: ClaimContext) -> Observation:
    set_threads()
    from harness.faults import FaultPlan

    root = ctx.tmp_path / "np"
    client = upstream_layout(root, dataset_rows=questions(2))
    write_rows(root / "memory/dummy_memo.jsonl", np_rows([1, 0]))
    a = plain_agents(seed=ctx.seed)
    NPDriver(client, a.planner, a.executor, a.judge, out=quiet()).run()
    np_rec = read_rows(root / "result/result_round_0.jsonl")[0]
    plan = FaultPlan()
    proot, _, _, _ = _pm_run(ctx, "pm", pm_rows(["positive", "negative"]), questions(2), fault_hook=plan)
    pm_rec = read_rows(proot / "result/result_parametric.jsonl")[0]
    writes = {"agentfly.result_write", "agentfly.pairs_write", "agentfly.case_write"}
    order = [s.removeprefix("agentfly.") for s in plan.calls if s in writes][:3]
    # edit the rationale of every result line, then rerun: nothing downstream changes
    res = proot / "result/result_parametric.jsonl"
    bank_before = (proot / "memory/memory.jsonl").read_text()
    pairs_before = (proot / "memory/training_data.jsonl").read_text()
    res.write_text("".join(json.dumps({**r, "rationale": "EDITED"}) + "\n" for r in read_rows(res)))
    a = plain_agents(seed=ctx.seed)
    s = PMDriver(proot / "client", a.planner, a.executor, a.judge, out=quiet(),
                 retriever=ScoreFunctionRetriever(rank_by_index)).run()
    return Observation.compare(
        {"np_task_id_type": "int", "np_has_reward": True, "pm_task_id_type": "str", "pm_has_reward": False,
         "pm_scores_float": True, "write_order": ["result_write", "pairs_write", "case_write"],
         "rerun_skipped": 2, "bank_unchanged": True, "pairs_unchanged": True},
        {"np_task_id_type": type(np_rec["task_id"]).__name__, "np_has_reward": "reward" in np_rec,
         "pm_task_id_type": type(pm_rec["task_id"]).__name__, "pm_has_reward": "reward" in pm_rec,
         "pm_scores_float": all(isinstance(c["score"], float) for c in pm_rec["retrieved_cases"]),
         "write_order": order, "rerun_skipped": s.skipped,
         "bank_unchanged": (proot / "memory/memory.jsonl").read_text() == bank_before,
         "pairs_unchanged": (proot / "memory/training_data.jsonl").read_text() == pairs_before},
        evidence=json.dumps(list(pm_rec.keys())))


@claim("AGF-09", design=D, record="MEM-OBJ-training-data", kind="mechanism",
       statement="Each retrieved case yields a pair labelled with the query's outcome; the trainer ignores "
                 "case_label")
def agf_09(ctx: ClaimContext) -> Observation:
    from agentfly_sim.training import PairJsonlDataset

    bank = pm_rows(["positive"] * 4 + ["unknown"] + ["negative"] * 3)
    root, _, _, _ = _pm_run(ctx, "pm", bank, questions(1), judge=ScriptedJudge("incorrect"))
    pairs = read_rows(root / "memory/training_data.jsonl")
    p = root / "flipped.jsonl"
    write_rows(p, [{**r, "case_label": "negative" if r["case_label"] == "positive" else "positive"} for r in pairs])
    same = PairJsonlDataset(root / "memory/training_data.jsonl").samples == PairJsonlDataset(p).samples
    bad = write_rows(root / "bad.jsonl", [{**pairs[0], "truth_label": "true"}])
    try:
        PairJsonlDataset(bad)
        raised = ""
    except ValueError as e:
        raised = str(e)
    return Observation.compare(
        {"pairs": 8, "all_false": True, "labels": ["positive"] * 4 + ["unknown"] + ["negative"] * 3,
         "case_label_ignored": True, "true_string_raises": True},
        {"pairs": len(pairs), "all_false": all(r["truth_label"] is False for r in pairs),
         "labels": [r["case_label"] for r in pairs], "case_label_ignored": same, "true_string_raises": bool(raised)},
        evidence=json.dumps(pairs[4], ensure_ascii=False) + "\n" + raised)


@claim("AGF-10", design=D, record="MEM-OBJ-checkpoint", kind="mechanism",
       statement="best.pt needs --save_best and a strict improvement; last.pt is always written")
def agf_10(ctx: ClaimContext) -> Observation:
    set_threads()
    from agentfly_sim.training import TrainConfig, selection_score, train

    rows = [{"query": f"query {i % 4}", "case": f"case {i}", "case_label": "positive",
             "plan": plan_text("look it up"), "truth_label": i % 4 == 0} for i in range(12)]
    data = write_rows(ctx.tmp_path / "pairs.jsonl", rows)
    out1 = ctx.tmp_path / "memory" / "ckpts" / "retriever"
    train(TrainConfig(train=str(data), output_dir=str(out1), epochs=1, batch_size=8, val_ratio=0.25, max_len=32),
          log=lambda s: None)
    files1 = sorted(p.name for p in out1.iterdir())
    # PM on the default checkpoint path (best.pt): no retriever, no examples, no pairs, cases still appended
    client = upstream_layout(ctx.tmp_path, dataset_rows=questions(2))
    write_rows(ctx.tmp_path / "memory/memory.jsonl", pm_rows(["positive", "negative"]))
    a = plain_agents(seed=ctx.seed)
    drv = PMDriver(client, a.planner, a.executor, a.judge, out=quiet())
    drv.run()
    recs = read_rows(ctx.tmp_path / "result/result_parametric.jsonl")
    lines: list[str] = []
    out2 = ctx.tmp_path / "ck2"
    r = train(TrainConfig(train=str(data), output_dir=str(out2), epochs=2, batch_size=4, val_ratio=0.25,
                          save_best=True, eval_every=1, use_plan=True, freeze_backbone=True, max_len=32),
              log=lines.append)
    best, strict = -1.0, 0
    for e in r.evaluations:
        if selection_score(e) > best:
            best, strict = selection_score(e), strict + 1
    updates = sum(1 for x in lines if x.startswith("  -> best updated"))
    return Observation.compare(
        {"files_without_flag": ["last.pt", "metrics.json"], "retriever": False, "retrieved": [0, 0],
         "pairs_file": False, "cases_appended": 2, "best_updates_equal_strict_improvements": True,
         "best_written_with_flag": True},
        {"files_without_flag": files1, "retriever": drv.retriever is not None,
         "retrieved": [len(x["retrieved_cases"]) for x in recs],
         "pairs_file": (ctx.tmp_path / "memory/training_data.jsonl").exists(),
         "cases_appended": len(read_rows(ctx.tmp_path / "memory/memory.jsonl")) - 2,
         "best_updates_equal_strict_improvements": updates == strict, "best_written_with_flag": (out2 / "best.pt").exists()},
        measured={"evaluations": len(r.evaluations), "best_updates": updates},
        evidence=next(x for x in drv.log if "retriever not available" in x)[:200])


@claim("AGF-11", design=D, record="MEM-OBJ-workspace-files", kind="mechanism",
       statement="Overwrites keep no versions; the log keeps metadata only")
def agf_11(ctx: ClaimContext) -> Observation:
    t = WorkspaceTools()
    d = str(ctx.tmp_path / "task")
    t.write_workspace_file("a.txt", "first content", d)
    t.write_workspace_file("a.txt", "second content", d)
    t.execute_terminal_command("ls", d)
    log = [json.loads(x) for x in (ctx.tmp_path / "task/execution.log").read_text().splitlines()]
    return Observation.compare(
        {"lines": 3, "details": [{"filename": "a.txt", "file_existed": False, "content_length": 13},
                                 {"filename": "a.txt", "file_existed": True, "content_length": 14},
                                 {"command": "ls"}],
         "file": "second content", "workspace_files": ["a.txt"]},
        {"lines": len(log), "details": [e["details"] for e in log],
         "file": (ctx.tmp_path / "task/workspace/a.txt").read_text(),
         "workspace_files": sorted(p.name for p in (ctx.tmp_path / "task/workspace").iterdir())},
        evidence=(ctx.tmp_path / "task/execution.log").read_text())


@claim("AGF-12", design=D, record="MEM-OBJ-tool-files", kind="mechanism",
       statement="Tool side files never enter a case bank")
def agf_12(ctx: ClaimContext) -> Observation:
    qs = questions(2)
    scripts = {}
    for i, q in enumerate(qs):
        cache = str(ctx.tmp_path / "cache" / f"q{i}")
        scripts[(q["question"], 1)] = [
            tool_call("write_workspace_file", {"filename": "side.txt", "content": f"SIDE-FILE-{i}", "task_cache_dir": cache}),
            tool_call("read_workspace_file", {"filename": "side.txt", "task_cache_dir": cache}),
            tool_call("execute_terminal_command", {"command": "ls > listing.txt", "task_cache_dir": cache}),
            {"content": "done", "tool_calls": None}]
    planner = ScriptedPlanner(scripts={q["question"]: [plan_text("use tools"), "FINAL ANSWER: x"] for q in qs})
    root, _, _, _ = _pm_run(ctx, "pm", pm_rows(["positive", "negative"]), qs, planner=planner,
                            executor=ScriptedExecutor(scripts=scripts), judge=ScriptedJudge("incorrect"))
    bank = read_rows(root / "memory/memory.jsonl")
    pairs = read_rows(root / "memory/training_data.jsonl")
    expected_bank = pm_rows(["positive", "negative"]) + [
        {"case": q["question"], "plan": plan_text("use tools"), "case_label": "negative"} for q in qs]
    text = (root / "memory/memory.jsonl").read_text() + (root / "memory/training_data.jsonl").read_text()
    return Observation.compare(
        {"bank": expected_bank, "pairs": 2 + 3, "side_text_in_bank_or_pairs": False,
         "memory_dir": ["memory.jsonl", "training_data.jsonl"], "side_files_written": 2},
        {"bank": bank, "pairs": len(pairs), "side_text_in_bank_or_pairs": "SIDE-FILE" in text or "listing" in text,
         "memory_dir": sorted(p.name for p in (root / "memory").iterdir()),
         "side_files_written": len(list((ctx.tmp_path / "cache").glob("*/workspace/side.txt")))},
        evidence=json.dumps(bank[-1], ensure_ascii=False))


@claim("AGF-13", design=D, record="MEM-RTE-embedding-examples", kind="mechanism",
       statement="NP ranks bank questions by pooler-output cosine, recomputed for every query; a missing reward "
                 "counts as negative")
def agf_13(ctx: ClaimContext) -> Observation:
    from agentfly_sim.embedding import NpSelector

    root, client = np_layout(ctx.tmp_path, questions(2, prefix="Which city hosts landmark"))
    rows = np_rows([1, 0, 1, 0, 1, 0, 1, 0, None])
    bank = write_rows(root / "memory/dummy_memo.jsonl", rows)
    sel = NpSelector()
    counts: list[int] = []
    a = plain_agents(seed=ctx.seed)
    drv = NPDriver(client, a.planner, a.executor, a.judge, out=quiet(), selector=sel,
                   on_question=lambda i, n, q: counts.append(sel.texts_embedded))
    drv.run()
    counts.append(sel.texts_embedded)
    per_query = [counts[1] - counts[0], counts[2] - counts[1]]
    rec = read_rows(root / "result/result_round_0.jsonl")[0]
    prompt = rec["meta_trace"][0]["input"][2]
    items = load_jsonl(bank)
    pairs = extract_pairs(items)
    q = "Which city hosts landmark 8?"
    s1 = [r["score"] for r in sel.retrieve(q, pairs, "auto", 8)]
    edited = [(k, plan_text("a completely different plan"), i) for k, _, i in pairs]
    s2 = [r["score"] for r in sel.retrieve(q, edited, "auto", 8)]
    neg = prompt.split("Negative Examples (reward=0)")[1] if "Negative Examples" in prompt else ""
    n_examples = len(re.findall(r"^Example \d+:$", prompt, re.M))
    return Observation.compare(
        {"examples": 8, "positives_first": True, "texts_per_query": [10, 11], "scores_unchanged_by_plan_edit": True,
         "missing_reward_row_under_negative": True},
        {"examples": n_examples, "positives_first": prompt.index("Positive") < prompt.index("Negative"),
         "texts_per_query": per_query, "scores_unchanged_by_plan_edit": s1 == s2,
         "missing_reward_row_under_negative": "Question: Which city hosts landmark 8?" in neg},
        evidence=prompt[:500])


@claim("AGF-14", design=D, record="MEM-RTE-embedding-examples", kind="mechanism",
       statement="The CUDA binding comes before the fallback; a device mismatch drops examples silently")
def agf_14(ctx: ClaimContext) -> Observation:
    root, client = np_layout(ctx.tmp_path, questions(1))
    write_rows(root / "memory/dummy_memo.jsonl", np_rows([1, 0, 1]))
    a = plain_agents(seed=ctx.seed)
    try:
        NPDriver(client, a.planner, a.executor, a.judge, out=quiet(), config=DriverConfig(np_model_device="cuda",
                                                                                          cuda_available=False))
        startup = "started"
    except DriverStartupError as e:
        startup = f"DriverStartupError: {e}"
    cfg = DriverConfig(np_model_device="cuda", cuda_available=True, memory_device="cpu")
    drv = NPDriver(client, a.planner, a.executor, a.judge, out=quiet(), config=cfg)
    drv.run()
    rec = read_rows(root / "result/result_round_0.jsonl")[0]
    planner_in = rec["meta_trace"][0]["input"]
    failed = [x for x in drv.log if "Memory retrieve failed" in x]
    return Observation.compare(
        {"startup_error": True, "retrieve_failed_logged": 1, "planner_input_len": 2, "question_only": True},
        {"startup_error": startup.startswith("DriverStartupError"), "retrieve_failed_logged": len(failed),
         "planner_input_len": len(planner_in), "question_only": planner_in[1] == rec["query"]},
        evidence=startup[:160] + "\n" + (failed[0][:200] if failed else ""),
        note="CUDA is simulated on a CPU host by injecting cuda_available=True (the model is labelled cuda).")


@claim("AGF-15", design=D, record="MEM-RTE-classifier-examples", kind="mechanism",
       statement="PM scores every case (softmax class 1, one batch), sorts stably and slices; a scoring error "
                 "gives no prompt and no pairs")
def agf_15(ctx: ClaimContext) -> Observation:
    set_threads()
    from agentfly_sim.classifier import CaseRetriever

    src = ctx.data_dir / "memory.jsonl" if ctx.data_dir and (ctx.data_dir / "memory.jsonl").is_file() else None
    if src is not None:
        bank = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines()[:64]]
    else:
        bank = pm_rows(["positive", "negative"] * 32)
    retr = CaseRetriever(untrained_checkpoint(0), device="cpu")

    class Counting:
        def __init__(self) -> None:
            self.seen: list[list[dict]] = []

        def retrieve(self, q, pool, meta):
            res = retr.retrieve(q, pool, meta)
            self.seen.append(res)
            return res

    counting = Counting()
    root, _, _, _ = _pm_run(ctx, "pm", bank, questions(1), retriever=counting, config=DriverConfig(memory_top_k=-2))
    rec = read_rows(root / "result/result_parametric.jsonl")[0]
    raw = counting.seen[0]
    expected_order = [r["index"] for r in sorted(raw, key=lambda r: r["score"], reverse=True)][:-2]

    class Broken:
        def retrieve(self, q, pool, meta):
            raise RuntimeError("injected scoring error")

    root2, drv2, _, _ = _pm_run(ctx, "pm_err", bank, questions(1), retriever=Broken())
    rec2 = read_rows(root2 / "result/result_parametric.jsonl")[0]
    scores = [r["score"] for r in raw]
    got = [r["score"] for r in rec["retrieved_cases"]]
    return Observation.compare(
        {"scored": 64, "in_unit_interval": True, "kept": 62, "descending": True, "stable_order": True,
         "error_retrieved": 0, "error_prompt_messages": 2, "error_pairs_file": False},
        {"scored": len(raw), "in_unit_interval": all(0.0 <= s <= 1.0 for s in scores), "kept": len(got),
         "descending": got == sorted(got, reverse=True),
         "stable_order": [r["index"] for r in rec["retrieved_cases"]] == expected_order,
         "error_retrieved": len(rec2["retrieved_cases"]), "error_prompt_messages": len(rec2["meta_trace"][0]["input_messages"]),
         "error_pairs_file": (root2 / "memory/training_data.jsonl").exists()},
        measured={"top3": got[:3], "corpus": src is not None},
        evidence=next((x for x in drv2.log if "Failed to retrieve cases" in x), ""))


@claim("AGF-16", design=D, record="Integration: external withdrawal (+ MEM-RTE-classifier-examples)",
       kind="mechanism", statement="Deleting the bank file does not withdraw the view already loaded")
def agf_16(ctx: ClaimContext) -> Observation:
    set_threads()
    qs = questions(3)
    root = ctx.tmp_path / "pm"
    bank = root / "memory/memory.jsonl"
    pool_sizes: list[int] = []

    def delete_after_q1(i: int, total: int, q: str) -> None:
        if i == 1:
            bank.unlink()

    retr = ScoreFunctionRetriever(rank_by_index)
    root, _, _, _ = _pm_run(ctx, "pm", pm_rows(["positive", "negative", "positive"]), qs, retriever=retr,
                            on_question=delete_after_q1)
    pool_sizes = [n for _, n in retr.calls]
    recs = read_rows(root / "result/result_parametric.jsonl")
    pm_lines = read_rows(bank)
    # NP behaves the same way
    nroot = ctx.tmp_path / "np"
    client = upstream_layout(nroot, dataset_rows=qs)
    nbank = write_rows(nroot / "memory/dummy_memo.jsonl", np_rows([1, 0, 1]))
    a = plain_agents(seed=ctx.seed)
    counts: list[int] = []
    drv = NPDriver(client, a.planner, a.executor, a.judge, out=quiet(),
                   on_question=lambda i, n, q: (nbank.unlink() if i == 1 else None))
    orig = drv.selector.retrieve

    def spy(task, pairs, *args):
        counts.append(len(pairs))
        return orig(task, pairs, *args)

    drv.selector.retrieve = spy
    drv.run()
    return Observation.compare(
        {"pm_pool_sizes": [3, 4, 1], "pm_q2_examples": True, "pm_file_lines_after_q2": 2, "np_pair_counts": [3, 4, 1]},
        {"pm_pool_sizes": pool_sizes, "pm_q2_examples": len(recs[1]["retrieved_cases"]) == 4,
         "pm_file_lines_after_q2": len(pm_lines), "np_pair_counts": counts},
        note="after q2's append the file holds q2's line; q3's append adds one more (2 lines at the end)",
        evidence=json.dumps(pm_lines, ensure_ascii=False)[:300])


@claim("AGF-17", design=D, record="MEM-RTE-retrieval-display", kind="mechanism",
       statement="The CLI prints every item unless 0 < topk < N")
def agf_17(ctx: ClaimContext) -> Observation:
    set_threads()
    from typer.testing import CliRunner

    from harness.cli.agentfly import app

    pool = write_rows(ctx.tmp_path / "pool.jsonl", pm_rows(["positive", "negative"] * 3))
    ck = untrained_checkpoint(0)
    runner = CliRunner()
    counts = {}
    first = ""
    for k in (2, 0, -1, 6, 100):
        r = runner.invoke(app, ["retrieve", "--model_path", str(ck), "--pool_jsonl", str(pool), "--query",
                                "Who wrote it?", "--topk", str(k), "--device", "cpu"])
        counts[str(k)] = r.output.count("\n" + "-" * 60) + (1 if r.output.startswith("-" * 60) else 0)
        if k == 2:
            first = r.output
    head_ok = first.splitlines()[0].startswith("[1] score=") and " idx=" in first and " label=" in first
    return Observation.compare({"2": 2, "0": 6, "-1": 6, "6": 6, "100": 6, "format": True},
                               {**counts, "format": head_ok}, evidence=first[:400])


@claim("AGF-18", design=D, record="MEM-RTE-workspace-read", kind="mechanism",
       statement="Reads truncate non-code text, show code in full, stub undecodable files, do not normalize "
                 "names, and are not logged")
def agf_18(ctx: ClaimContext) -> Observation:
    t = WorkspaceTools()
    d = str(ctx.tmp_path / "task")
    t.write_workspace_file("data.json", "j" * 5000, d)
    t.write_workspace_file("x.sh", "s" * 50000, d)
    t.write_workspace_file("d/x.txt", "nested", d)
    (ctx.tmp_path / "task/workspace/latin.txt").write_bytes("naïve café".encode("latin-1"))
    log_before = (ctx.tmp_path / "task/execution.log").read_text()

    def body(r: str) -> str:
        return r.split("=" * 50 + "\n", 1)[1] if "=" * 50 in r else r

    rj, rs = t.read_workspace_file("data.json", d), t.read_workspace_file("x.sh", d)
    rl, rn = t.read_workspace_file("latin.txt", d), t.read_workspace_file("d/x.txt", d)
    return Observation.compare(
        {"json_display": 4040, "sh_display": 50000, "latin_binary_stub": True,
         "nested_not_found": "❌ File not found: d/x.txt\nAvailable files: ['data.json', 'latin.txt', 'x.sh', 'x.txt']",
         "log_unchanged": True},
        {"json_display": len(body(rj)), "sh_display": len(body(rs)), "latin_binary_stub": rl.startswith("📄 Binary file"),
         "nested_not_found": rn, "log_unchanged": (ctx.tmp_path / "task/execution.log").read_text() == log_before},
        evidence=rl + "\n" + rn)


@claim("AGF-19", design=D, record="Annotation RT-OBJ-shared-history", kind="mechanism",
       statement="NP resets history per query and caps it at 50 FIFO entries, evicting the question, then the "
                 "examples")
def agf_19(ctx: ClaimContext) -> Observation:
    qs = questions(2)
    root, client = np_layout(ctx.tmp_path, qs)
    write_rows(root / "memory/dummy_memo.jsonl", np_rows([1, 0]))
    big = json.dumps({"plan": [{"id": j, "description": f"sub-task {j}"} for j in range(1, 25)]})
    planner = ScriptedPlanner(scripts={qs[0]["question"]: [big, big, "FINAL ANSWER: x"]}, seed=ctx.seed)
    a = plain_agents(planner=planner, seed=ctx.seed)
    NPDriver(client, a.planner, a.executor, a.judge, out=quiet()).run()
    recs = read_rows(root / "result/result_round_0.jsonl")
    inputs = [m["input"] for m in recs[0]["meta_trace"]]
    q = qs[0]["question"]
    ex_in = [any(x.startswith("Positive Examples") or x.startswith("Negative Examples") for x in inp) for inp in inputs]
    q1_first = recs[1]["meta_trace"][0]["input"]
    return Observation.compare(
        {"cycle0_has_question": True, "cycle1_has_question": True, "cycle2_has_question": False,
         "cycle2_has_examples": False, "cycle1_has_examples": True, "cycle2_history_len": 50,
         "next_query_starts_fresh": True},
        {"cycle0_has_question": q in inputs[0], "cycle1_has_question": q in inputs[1],
         "cycle2_has_question": q in inputs[2], "cycle1_has_examples": ex_in[1], "cycle2_has_examples": ex_in[2],
         "cycle2_history_len": len(inputs[2]) - 1, "next_query_starts_fresh": q1_first[1] == qs[1]["question"]
         and q not in q1_first},
        evidence=json.dumps(inputs[2][:3], ensure_ascii=False)[:300])
