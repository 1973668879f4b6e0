"""The fuzz targets of the session-end transcript readers and the host scenario loader: they pass on the shipped
code and catch the defects they are there for (a reader that keeps memsim's own blocks, or lets bookkeeping lines
change the turns; a loader that lets an exception other than its one-line error escape)."""

from __future__ import annotations

import json

import pytest

from harness.reliability.fuzz import FuzzInput, run_one, targets


@pytest.mark.parametrize("name", ["tortoise-transcript-claude", "tortoise-transcript-codex"])
def test_transcript_seed_is_read_without_memsims_blocks(name):
    target = targets()[name]
    assert b"# Memory digest from earlier sessions" in target.seed_doc
    assert run_one(target, FuzzInput("seed", target.seed_doc)) == ("accepted", "")
    assert run_one(target, FuzzInput("directory", None))[0] == "rejected"  # TranscriptError naming the file
    assert run_one(target, FuzzInput("bytes", b"\xff\xfe"))[0] == "rejected"


@pytest.mark.parametrize("name", ["tortoise-transcript-claude", "tortoise-transcript-codex"])
def test_a_reader_that_keeps_memsims_blocks_is_a_crash(monkeypatch, name):
    import tortoise_sim.transcripts as tr

    monkeypatch.setattr(tr, "strip_injected", lambda text: text)
    outcome, detail = run_one(targets()[name], FuzzInput("seed", targets()[name].seed_doc))
    assert outcome == "crash" and "memsim's own block" in detail, detail


def test_a_reader_that_reads_bookkeeping_lines_is_a_crash(monkeypatch):
    import tortoise_sim.transcripts as tr

    monkeypatch.setattr(tr, "_claude", lambda objs, tools: tr._legacy(objs))  # the previous every-message reader
    outcome, detail = run_one(targets()["tortoise-transcript-claude"],
                              FuzzInput("seed", targets()["tortoise-transcript-claude"].seed_doc))
    assert outcome == "crash", detail


def test_a_line_separator_inside_a_json_string_keeps_the_turn(tmp_path):
    """A JSON writer that leaves U+2028 raw inside a string (JavaScript's does) must not cost the turn: JSONL lines
    end at newline only (str.splitlines split the line in two and both halves were dropped)."""
    from tortoise_sim.transcripts import read_transcript

    prompt = "first line\u2028second line\x0cand a form feed"
    rows = [{"type": "user", "isSidechain": False, "message": {"role": "user", "content": prompt}},
            {"type": "assistant", "isSidechain": False,
             "message": {"role": "assistant", "content": [{"type": "text", "text": "ok\u2029done"}]}}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert read_transcript(path, "claude") == [{"role": "user", "content": prompt},
                                               {"role": "assistant", "content": "ok\u2029done"}]
    codex = tmp_path / "r.jsonl"
    codex.write_text(json.dumps({"type": "response_item", "payload": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}},
        ensure_ascii=False) + "\n", encoding="utf-8")
    assert read_transcript(codex, "codex") == [{"role": "user", "content": prompt}]


@pytest.mark.parametrize("data,outcome", [
    (b"[" * 5000 + b"]" * 5000, "rejected"),            # PyYAML recursion: one line, not a RecursionError
    (b"name: x\nlost: " + b"9" * 5000 + b"\n", "rejected"),  # an integer Python refuses to convert
    (b"name: x\nsessions: [}\n", "rejected"),
])
def test_scenario_loader_answers_in_one_line(data, outcome):
    assert run_one(targets()["hosts-scenario"], FuzzInput("x", data)) == (outcome, "")


def test_the_shipped_scenario_seed_loads():
    target = targets()["hosts-scenario"]
    assert run_one(target, FuzzInput("seed", target.seed_doc)) == ("accepted", "")
