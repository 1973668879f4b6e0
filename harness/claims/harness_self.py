"""Claims about the harness itself, so the ledger pipeline is exercised end to end (HAR-nn, beyond report)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.claims import ClaimContext, Observation, claim


@claim("HAR-01", design="harness", record="beyond report", kind="mechanism",
       statement="The offline LM records exactly the messages dspy's ChatAdapter formats for a Predict call, "
                 "and dspy parses the scripted answer back into the output field.")
def har_01(ctx: ClaimContext) -> Observation:
    import dspy

    from harness.offline_lm import ScriptedLM

    class Summarize(dspy.Signature):
        """Summarize the notes for the user in one line."""

        notes: str = dspy.InputField(desc="session notes")
        user_message: str = dspy.InputField()
        summary: str = dspy.OutputField()

    inputs = {"notes": "Turn 1: read a.py\nTurn 2: ran pytest -q", "user_message": "what happened?"}
    lm = ScriptedLM(policy=lambda req: {"summary": f"{len(req.inputs['notes'])} chars of notes"}, seed=ctx.seed)
    with dspy.context(lm=lm):
        pred = dspy.Predict(Summarize)(**inputs)
    expected = dspy.ChatAdapter().format(Summarize, demos=[], inputs=inputs)
    recorded = lm.requests[0].messages
    return Observation.compare(
        {"messages_equal": True, "parsed_answer": f"{len(inputs['notes'])} chars of notes", "requests": 1,
         "instruction_in_system": True, "inputs_parsed_back": inputs},
        {"messages_equal": recorded == expected, "parsed_answer": pred.summary, "requests": len(lm.requests),
         "instruction_in_system": "Summarize the notes for the user in one line." in lm.requests[0].system,
         "inputs_parsed_back": lm.requests[0].inputs},
        evidence=json.dumps(recorded, indent=2)[:1500])


@claim("HAR-02", design="harness", record="beyond report", kind="mechanism",
       statement="A fault plan fails exactly the N-th call of a named write step: earlier writes survive on "
                 "disk, later ones never happen, and the recorded step order is the write order.")
def har_02(ctx: ClaimContext) -> Observation:
    from harness.faults import FaultInjected, FaultPlan

    def write_sequence(root: Path, hook) -> None:
        for i in range(3):
            hook("log.append")
            with open(root / "log.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"i": i}) + "\n")
            hook("state.save")
            (root / "state.json").write_text(json.dumps({"last": i}))

    plan = FaultPlan({"state.save": 2})
    raised = None
    try:
        write_sequence(ctx.tmp_path, plan)
    except FaultInjected as exc:
        raised = (exc.step, exc.call)
    log = (ctx.tmp_path / "log.jsonl").read_text().splitlines()
    state = json.loads((ctx.tmp_path / "state.json").read_text())
    return Observation.compare(
        {"raised": ["state.save", 2], "log_lines": 2, "state_last": 0,
         "calls": ["log.append", "state.save", "log.append", "state.save"]},
        {"raised": list(raised) if raised else None, "log_lines": len(log), "state_last": state["last"],
         "calls": plan.calls},
        evidence=f"log.jsonl={log!r} state.json={state!r}")


@claim("HAR-03", design="harness", record="beyond report", kind="consequence",
       statement="On the same MiniLM weights, the BERT pooler output (what AgentFly reads) separates related "
                 "from unrelated sentences less than mean pooling does.")
def har_03(ctx: ClaimContext) -> Observation:
    from harness.embedding import cosine, get_encoder

    texts = ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
             "How do I fix a failing pytest run?", "Why does my unit test fail under pytest?",
             "The stock market closed higher today."]
    pairs_related = [(0, 1), (3, 4)]
    pairs_unrelated = [(0, 2), (3, 5), (1, 5), (2, 4)]
    measured = {}
    for name in ("minilm-mean", "minilm-pooler"):
        v = get_encoder(name).encode(texts)
        rel = sum(cosine(v[a], v[b]) for a, b in pairs_related) / len(pairs_related)
        unrel = sum(cosine(v[a], v[b]) for a, b in pairs_unrelated) / len(pairs_unrelated)
        measured[name] = {"related": round(rel, 4), "unrelated": round(unrel, 4), "gap": round(rel - unrel, 4)}
    holds = measured["minilm-pooler"]["gap"] < measured["minilm-mean"]["gap"]
    ev = "; ".join(f"{k}: related {m['related']}, unrelated {m['unrelated']}" for k, m in measured.items())
    return (Observation.holds if holds else Observation.refuted)(measured, ev)
