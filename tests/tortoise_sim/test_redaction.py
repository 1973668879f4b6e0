"""Secret redaction (issue 11 item 6): the faithful redactor's survivors are real, the hardened option leaves none on
the generated corpus, the injection point stays inside the data-marked block and hook JSON stays valid."""

from __future__ import annotations

import json

import pytest

from benchmarks.redaction import injection_and_json, run_pipeline
from harness.reliability.secrets_corpus import BENIGN, KINDS, generate_corpus
from tortoise_sim.capture import redact
from tortoise_sim.redaction import hardened_redact, redact_turns, redactor_for


@pytest.fixture(scope="module")
def corpus():
    return generate_corpus(per_kind=4, seed=7)


def survives(text: str, secret) -> bool:
    return any(n in text for n in secret.needles)


def test_corpus_covers_every_kind_with_unique_values(corpus):
    assert {s.kind for s in corpus} == set(KINDS)
    assert len({s.value for s in corpus}) == len(corpus)


def test_hardened_redactor_leaves_no_survivor_and_is_idempotent(corpus):
    for s in corpus:
        once, counts = hardened_redact(s.text)
        assert not survives(once, s), (s.kind, once)
        assert counts
        assert hardened_redact(once)[0] == once


def test_faithful_redactor_misses_shapes_outside_its_four_patterns(corpus):
    survivors = {s.kind for s in corpus if survives(redact(s.text)[0], s)}
    # spec 3.3 covers complete PEM blocks, JWTs, bearer tokens and AWS key ids only
    assert {"pem_private_key", "jwt", "bearer_token", "aws_access_key_id"}.isdisjoint(survivors)
    assert {"github_token", "slack_token", "stripe_key", "url_password", "env_line", "pem_truncated"} <= survivors


def test_benign_text_is_untouched():
    for b in BENIGN:
        assert hardened_redact(b) == (b, {})


def test_redactor_for_rejects_unknown_names():
    assert redactor_for("faithful") is redact
    with pytest.raises(ValueError):
        redactor_for("paranoid")


@pytest.mark.parametrize("pipeline", ["capture", "checkpoint", "diary"])
def test_hardened_store_has_zero_survivors_in_every_channel(tmp_path, corpus, pipeline):
    small = corpus[:: 2]
    res = run_pipeline(pipeline, "hardened", small, tmp_path, questions=5)
    assert res["survivors"] == dict.fromkeys(res["survivors"], 0), res["by_kind"]
    assert res["channel_chars"]["kuzu"] > 0


def test_faithful_capture_spools_and_stores_raw_secrets(tmp_path, corpus):
    small = corpus[:: 2]
    res = run_pipeline("capture", "faithful", small, tmp_path, questions=5)
    assert res["survivors"]["spool"] == len(small)  # upstream spools the raw transcript
    assert 0 < res["survivors"]["kuzu"] < len(small)  # the four spec shapes are scrubbed, the rest survive


@pytest.mark.parametrize("mode", ["faithful", "hardened"])
def test_injection_reaches_the_model_only_inside_the_data_block_and_hook_json_is_valid(tmp_path, mode):
    res = injection_and_json(tmp_path, mode)
    assert res["injection_in_block"] and res["injection_after_data_notice"]
    assert res["hook_json_valid"] == res["hook_json_total"] == 4
    # the session-start digest carries stored text unmarked in faithful mode; hardened puts it behind a notice
    assert res["digest_injection_marked_as_data"] is (mode == "hardened")


def test_redact_turns_for_the_spool(corpus):
    turns = [{"role": "user", "content": s.text} for s in corpus[:5]]
    assert redact_turns(turns, "faithful") is turns
    out = redact_turns(turns, "hardened")
    assert all(not survives(t["content"], s) for t, s in zip(out, corpus[:5], strict=True))


def test_cli_session_end_hook_spools_redacted_turns_when_hardened(tmp_path, monkeypatch, corpus):
    from typer.testing import CliRunner

    from harness.cli.main import app

    monkeypatch.setenv("MEMSIM_TORTOISE_REDACTOR", "hardened")
    spool = tmp_path / "spool"
    payload = {"session_id": "s1", "turns": [{"role": "user", "content": s.text} for s in corpus[:6]]}
    monkeypatch.setattr("harness.cli.tortoise.open_sim", lambda *a, **k: (_ for _ in ()).throw(OSError("x")))
    monkeypatch.setenv("MEMSIM_HOOK_END_FILING", "spool")  # the spooled text is what is checked: no filer process
    r = CliRunner().invoke(app, ["tortoise", "hook-session-end", "--db", str(tmp_path / "t.kuzu"), "--spool-dir",
                                 str(spool)], input=json.dumps(payload))
    assert r.exit_code == 0 and r.stdout == ""
    text = "\n".join(p.read_text() for p in spool.rglob("*") if p.is_file())
    assert "[REDACTED:" in text
    assert not any(survives(text, s) for s in corpus[:6])


def test_hook_entry_path_spools_redacted_turns_and_marks_the_digest(tmp_path, monkeypatch, corpus):
    """The ``memsim tortoise hook-*`` entry (hook_client -> service) reads the same $MEMSIM_TORTOISE_REDACTOR."""
    from tortoise_sim import SimConfig, StepClock, Tortoise
    from tortoise_sim.hook_client import inprocess_session_start
    from tortoise_sim.redaction import DATA_NOTICE
    from tortoise_sim.service import session_end_apply

    monkeypatch.setenv("MEMSIM_TORTOISE_REDACTOR", "hardened")
    sim = Tortoise(None, config=SimConfig(embedder="hashing", redactor="hardened"), clock=StepClock())
    payload = {"session_id": "s1", "turns": [{"role": "user", "content": s.text} for s in corpus[:6]]}
    session_end_apply(json.dumps(payload), "claude", tmp_path / "t.kuzu", str(tmp_path / "spool"), sim=sim)
    sim.close()
    text = "\n".join(p.read_text() for p in (tmp_path / "spool").rglob("*") if p.is_file())
    assert "[REDACTED:" in text and not any(survives(text, s) for s in corpus[:6])
    db = tmp_path / "d.kuzu"
    disk = Tortoise(db, config=SimConfig(embedder="hashing"), clock=StepClock())
    disk.update_point(disk.create_point("decision", "use kuzu", credibility="gold")["id"], status="live")
    disk.close()
    assert inprocess_session_start(str(db)).startswith(DATA_NOTICE)
    monkeypatch.delenv("MEMSIM_TORTOISE_REDACTOR")
    assert not inprocess_session_start(str(db)).startswith(DATA_NOTICE)


def test_redaction_module_does_not_import_capture():
    """Both redactors live in redaction.py; capture imports the faithful one, never the other way round."""
    import ast
    import inspect

    import tortoise_sim.capture as capture_mod
    import tortoise_sim.redaction as redaction_mod

    tree = ast.parse(inspect.getsource(redaction_mod))
    imported = {(n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    capture_imports = [m for m in imported if m.split(".")[-1] == "capture"]
    assert capture_imports == [], imported
    assert capture_mod.redact is redaction_mod.redact
    assert redaction_mod.redactor_for("faithful") is redaction_mod.redact
