"""Codex runs SessionStart and SessionEnd once per prompt (every ``codex exec`` / ``exec resume`` process), so a
three-prompt session is filed three times under one session id, each time with the whole rollout so far. The store
then holds the session once: the faithful re-post (spec tortoise.md section 3.4: turns MERGE by ``<sid>_t<i>``,
extracted points by their deterministic ids, a repeated decision is an admission NOOP) duplicates no turn and no
derived point; only the journal records each filing (one ``SessionRecorded`` per post, one ``PointAdded`` per turn of
each window), as upstream's does. Hand-written rollouts in Codex's line shapes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.tortoise_sim.sessionkit import hook, is_filed, short_tmp

PROMPTS = [("decision: the ledger service uses Postgres", "Noted."),
           ("decision: backups run nightly", "OK, nightly."),
           ("What did we decide?", "Postgres, and nightly backups.")]


def _rollout(path: Path, n: int) -> None:
    rows = [{"type": "session_meta", "payload": {"id": "cx1"}},
            {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"}]}}]
    for prompt, reply in PROMPTS[:n]:
        rows += [{"type": "turn_context", "payload": {"cwd": "/w"}},
                 {"type": "response_item", "payload": {"type": "message", "role": "user",
                                                       "content": [{"type": "input_text", "text": prompt}]}},
                 {"type": "response_item", "payload": {"type": "message", "role": "assistant",
                                                       "content": [{"type": "output_text", "text": reply}]}},
                 {"type": "event_msg", "payload": {"type": "task_complete"}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_three_per_prompt_session_ends_store_the_session_once():
    from tortoise_sim.resident import open_sim

    with short_tmp() as d:
        db, transcript = d / "db" / "t.kuzu", d / "rollout-cx1.jsonl"
        for n in (1, 2, 3):
            _rollout(transcript, n)
            r = hook(["hook-session-end", "--harness", "codex", "--db", str(db), "--filing", "inline"],
                     json.dumps({"session_id": "cx1", "transcript_path": str(transcript),
                                 "hook_event_name": "SessionEnd", "reason": "other"}))
            assert r.returncode == 0 and r.stderr == b"", r
            assert is_filed(db.parent / "spool", "cx1")
        sim = open_sim(db, "analysed", "minilm")
        try:
            q = sim.store.query
            turns = q("MATCH (s:Session {id: 'cx1'})-[:CONTAINS]->(p:Point) WHERE p.pointKind = 'event' "
                      "RETURN p.id AS id, p.content AS c ORDER BY id")
            decisions = q("MATCH (p:Point) WHERE p.pointKind = 'decision' RETURN p.content AS c ORDER BY c")
            sessions = q("MATCH (s:Session) RETURN s.id AS id, s.turn_count AS n")
            events = {r["t"]: r["n"] for r in q("MATCH (e:GraphEvent) RETURN e.type AS t, count(*) AS n")}
        finally:
            sim.close()
    want = [f"[{role}] {text}" for p, a in PROMPTS for role, text in (("user", p), ("assistant", a))]
    assert [t["c"] for t in turns] == want  # each turn once, in order, the injected context left out
    assert [t["id"] for t in turns] == [f"cx1_t{i}" for i in range(6)]
    assert sessions == [{"id": "cx1", "n": 6}]
    assert [r["c"] for r in decisions] == ["backups run nightly", "the ledger service uses Postgres"]
    assert events["SessionRecorded"] == 3 and events["PointAdded"] == 2 + 4 + 6  # the journal sees every filing
