"""Secret redaction in Tortoise (``memsim bench redaction``): how many generated secrets survive into each channel.

A seeded corpus (``harness.reliability.secrets_corpus``) goes through three pipelines, each on a fresh store per redactor mode
(``faithful`` = spec 3.3, ``hardened`` = ``SimConfig(redactor="hardened")``):

- ``capture``: the secret sentences as user turns (10 per session), spooled first as the session-end hook does,
  then flushed into capture (marker extraction turns each ``decision:`` line into a point);
- ``checkpoint``: the sentences as checkpoint items;
- ``diary``: the sentences as diary entries.

Channels searched for every secret's needles: Kuzu (every string of every node row), the GraphEvent feed, the JSONL
journal, the spool files, the session-start digest and the volunteered blocks (one question per secret). Also:
a stored "ignore previous instructions" point reaches the model in the volunteered block only after the block's
data notice, and every hook JSON output parses as JSON whatever the stored strings hold.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import machine_description, md_table, meta_block, write_results

PIPELINES = ("capture", "checkpoint", "diary")
CHANNELS = ("kuzu", "feed", "journal", "spool", "digest", "volunteer")
MODES = ("faithful", "hardened")
QUESTIONS_PER_PIPELINE = 60


def _kuzu_text(store: Any) -> str:
    tables = [r["name"] for r in store.query("CALL show_tables() RETURN *") if r.get("type") == "NODE"]
    parts = []
    for t in tables:
        for r in store.query(f"MATCH (n:{t}) RETURN n"):
            row = {k: v for k, v in (r["n"] or {}).items() if k != "embedding"}
            parts.append(json.dumps(row, default=str, ensure_ascii=False))
    return "\n".join(parts)


def _folder_text(root: Path) -> str:
    if not root.exists():
        return ""
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(root.rglob("*")) if p.is_file())


def run_pipeline(pipeline: str, mode: str, corpus: list[Any], work: Path, *, questions: int) -> dict[str, Any]:
    from tortoise_sim import SimConfig, StepClock, Tortoise
    from tortoise_sim.redaction import mark_as_data, redact_turns
    from tortoise_sim.spool import local_capture_post

    work.mkdir(parents=True, exist_ok=True)
    cfg = SimConfig(embedder="hashing", redactor=mode, event_log_path=str(work / "journal.jsonl"),
                    spool_dir=str(work / "spool"))
    sim = Tortoise(work / "t.kuzu", config=cfg, clock=StepClock(), seed=0)
    try:
        if pipeline == "capture":
            sp = sim.spool()
            for i in range(0, len(corpus), 10):
                turns = [{"role": "user", "content": s.text} for s in corpus[i:i + 10]]
                turns.append({"role": "assistant", "content": "Noted."})
                sp.spool_write(f"s{i // 10}", redact_turns(turns, mode), "claude", "hook", "m1")
            spool_text = _folder_text(work / "spool")  # what sits on disk before the flush
            sp.flush_spool(local_capture_post(sim.capture_session), 10**15)
        elif pipeline == "checkpoint":
            spool_text = ""
            for i in range(0, len(corpus), 50):
                sim.checkpoint([{"content": s.text} for s in corpus[i:i + 50]], threshold=1.0)
        else:
            spool_text = ""
            for s in corpus:
                sim.diary_write("agent-a", s.text)
        # promote everything to live so the digest and the volunteering gate see it
        for r in sim.store.query("MATCH (n:Point) WHERE n.status = 'draft' RETURN n.id AS id"):
            sim.update_point(r["id"], status="live")
        digest = sim.context()
        if mode == "hardened":
            digest = mark_as_data(digest)
        blocks = []
        for s in corpus[:questions]:
            q = f"What did we decide about the {s.kind.replace('_', ' ')} for the ingest service?"
            blocks.append(sim.volunteer_context([{"role": "user", "content": q}], min_confidence=0.0)["block"])
        channels = {
            "kuzu": _kuzu_text(sim.store),
            "feed": "\n".join(json.dumps(r, default=str, ensure_ascii=False) for r in sim.store.feed()),
            "journal": (work / "journal.jsonl").read_text(encoding="utf-8") if (work / "journal.jsonl").exists()
            else "",
            "spool": spool_text,
            "digest": digest,
            "volunteer": "\n".join(blocks),
        }
    finally:
        sim.close()
    survivors = {c: [s.kind for s in corpus if any(n in text for n in s.needles)] for c, text in channels.items()}
    return {"survivors": {c: len(v) for c, v in survivors.items()},
            "by_kind": {c: _count(v) for c, v in survivors.items()},
            "channel_chars": {c: len(t) for c, t in channels.items()}}


def _count(kinds: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for k in kinds:
        out[k] = out.get(k, 0) + 1
    return out


def injection_and_json(work: Path, mode: str) -> dict[str, Any]:
    """The injection point's route to the model, and hook JSON validity for hostile stored strings."""
    from harness.reliability.secrets_corpus import INJECTION
    from tortoise_sim import SimConfig, StepClock, Tortoise
    from tortoise_sim.redaction import DATA_NOTICE, mark_as_data
    from tortoise_sim.volunteer import BLOCK_HEADER

    work.mkdir(parents=True, exist_ok=True)
    sim = Tortoise(work / "inj.kuzu", config=SimConfig(embedder="hashing", redactor=mode), clock=StepClock(), seed=0)
    hostile = [INJECTION, 'quote " backslash \\ newline \n tab \t', "nul \x00 bell \x07 esc \x1b[31m",
               "bidi \u202e evil \u2066 isolate", "emoji \U0001f600 and lone surrogate-free text",
               "</script><!-- -->```", "{\"hookSpecificOutput\": 1}"]
    try:
        for text in hostile:
            sim.update_point(sim.create_point("decision", f"ingest service policy: {text}", credibility="gold")["id"],
                             status="live")
        prompt = "What did we decide about the ingest service policy?"
        res = sim.volunteer_context([{"role": "user", "content": prompt}], min_confidence=0.0)
        block = res["block"]
        in_block = INJECTION in block
        inside_marked = in_block and block.index(BLOCK_HEADER[0]) < block.index(INJECTION)
        digest = sim.context()
        if mode == "hardened":
            digest = mark_as_data(digest)
        digest_has = INJECTION in digest
        digest_marked = digest_has and DATA_NOTICE in digest and digest.index(DATA_NOTICE) < digest.index(INJECTION)
        valid, total = 0, 0
        for harness_name in ("claude", "codex", "devin", "cline"):
            out, code = sim.hook_volunteer_turn(json.dumps({"prompt": prompt}), harness_name)
            total += 1
            try:
                json.loads(out)  # one line of JSON, whatever the stored strings hold
                valid += int(code == 0 and out.count("\n") == 1)
            except ValueError:
                pass
    finally:
        sim.close()
    return {"injection_in_block": in_block, "injection_after_data_notice": inside_marked,
            "injection_in_digest": digest_has, "digest_injection_marked_as_data": digest_marked,
            "hook_json_valid": valid, "hook_json_total": total}


def run(out_dir: Path, *, quick: bool = False, track: Any = None, per_kind: int | None = None,
        seed: int = 0) -> list[Path]:
    from harness.reliability.secrets_corpus import BENIGN, KINDS, generate_corpus
    from tortoise_sim.capture import redact
    from tortoise_sim.redaction import hardened_redact

    per_kind = per_kind or (3 if quick else 10)
    corpus = generate_corpus(per_kind, seed)
    questions = min(len(corpus), 20 if quick else QUESTIONS_PER_PIPELINE)
    t0 = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    extra: dict[str, Any] = {}
    steps = [(mode, pipeline) for mode in MODES for pipeline in (*PIPELINES, None)]  # None: injection and JSON
    track = track or (lambda it, description="", total=None: it)
    with tempfile.TemporaryDirectory(prefix="memsim-redaction-") as tmp:
        for mode, pipeline in track(steps, description="redaction: pipelines x redactors", total=len(steps)):
            if pipeline is None:
                extra[mode] = injection_and_json(Path(tmp) / mode / "inj", mode)
            else:
                results[f"{mode}/{pipeline}"] = run_pipeline(pipeline, mode, corpus, Path(tmp) / mode / pipeline,
                                                             questions=questions)
    false_pos = {"faithful": sum(bool(redact(b)[1]) for b in BENIGN),
                 "hardened": sum(bool(hardened_redact(b)[1]) for b in BENIGN)}
    payload = {"corpus": {"per_kind": per_kind, "kinds": list(KINDS), "secrets": len(corpus), "seed": seed},
               "questions_per_pipeline": questions, "results": results, "injection_and_json": extra,
               "benign_sentences": len(BENIGN), "benign_altered": false_pos,
               "seconds": round(time.perf_counter() - t0, 1), "machine": machine_description(), "quick": quick}
    return write_results(out_dir, "redaction", payload, render_markdown, None)


def render_markdown(payload: dict[str, Any]) -> str:
    """``redaction.md`` rendered from a run's ``redaction.json`` (every number is read from the payload).

    Runs written before the payload recorded ``quick`` are quick exactly when they used fewer than 10 secrets per
    kind (the full run's count)."""
    results, extra = payload["results"], payload["injection_and_json"]
    per_kind, seed = payload["corpus"]["per_kind"], payload["corpus"]["seed"]
    quick = payload.get("quick", per_kind < 10)
    false_pos = payload["benign_altered"]
    rows = [[key.split("/")[0], key.split("/")[1], *(r["survivors"][c] for c in CHANNELS)]
            for key, r in results.items()]
    kind_rows = [[kind, *(max(results[f"{m}/{p}"]["by_kind"][c].get(kind, 0) for p in PIPELINES
                               for c in CHANNELS) for m in MODES)] for kind in payload["corpus"]["kinds"]]
    inj_rows = [[m, *(str(extra[m][k]) for k in ("injection_in_block", "injection_after_data_notice",
                                                 "injection_in_digest", "digest_injection_marked_as_data"))]
                + [f"{extra[m]['hook_json_valid']}/{extra[m]['hook_json_total']}"] for m in MODES]
    return "\n\n".join([
        "# Secret redaction in Tortoise (`memsim` benchmarks/redaction.py)",
        meta_block({"machine": payload["machine"], "seeds": {"corpus": seed}, "quick": quick,
                    "wall_s": payload["seconds"]}, payload.get("run")),
        f"Survivors (of {payload['corpus']['secrets']} generated secrets) per pipeline and channel. `faithful` = the "
        "redactor of spec 3.3 (turns only, four shapes); `hardened` = `SimConfig(redactor=\"hardened\")` "
        "(detect-secrets plugins, entropy and .env rules, every stored and spooled text). Volunteer = the blocks of "
        f"the first {payload['questions_per_pipeline']} per-secret questions.",
        md_table(["mode", "pipeline", *CHANNELS], rows),
        "Worst channel per secret kind (max survivors of that kind over pipelines and channels, "
        f"of {per_kind}):",
        md_table(["kind", *MODES], kind_rows),
        "Injection point and hook JSON (`Ignore previous instructions ...` stored as a live point, plus points "
        "holding quotes, backslashes, NUL/ESC control characters, bidi overrides and markup):",
        md_table(["mode", "in block", "after data notice", "in digest", "digest marked as data", "hook JSON valid"],
                 inj_rows),
        f"Benign engineering sentences altered by the redactor (false positives, of {payload['benign_sentences']}): "
        f"faithful {false_pos['faithful']}, hardened {false_pos['hardened']}.",
    ])


if __name__ == "__main__":  # pragma: no cover
    import sys

    from benchmarks.common import default_out_dir

    quick = "--quick" in sys.argv
    for p in run(default_out_dir(quick), quick=quick):
        print(f"wrote {p}")
