"""Spec tortoise §14 acceptance examples that do not need EP (14.2-14.6, 14.8, 14.10)."""

from __future__ import annotations

import json

from harness.claims.tortoise_volunteer import billing_points
from tests.tortoise_sim.simkit import ask, make_sim, t0
from tortoise_sim.capture import redact, session_event_id
from tortoise_sim.digest import CLOSING_HINT, DIGEST_TITLE, HEADINGS, render_digest
from tortoise_sim.hooks import format_hook_output
from tortoise_sim.spool import backoff_delay, capture_key, content_digest, entry_key
from tortoise_sim.text import label_of, object_id, pt_id, synopsis
from tortoise_sim.volunteer import BLOCK_HEADER, CONTESTED_FLAG, REMINDER, SUPERSEDED_FLAG, build_block


def test_14_2_synopsis_and_label():
    assert synopsis("  Alpha\tbeta\n\ngamma\x07 ") == "Alpha beta gamma"
    s = synopsis("a" * 200)
    assert s == "a" * 159 + "\u2026" and len(s) == 160
    assert label_of("Decision: use Kuzu, not FalkorDB, for the simulator store.") == (
        "Decision: use Kuzu, not FalkorDB, for")


def test_14_2_label_quirks_c9():
    # cut after the right-strip, so a trailing comma can survive; raw content with \x07 kept
    assert label_of("  ") == "  "
    assert label_of("a\x07b c") == "a\x07b c"
    long = "word," * 3 + " " + "x" * 60
    assert len(label_of(long)) == 48


SECRET = (
    "use AKIAIOSFODNN7EXAMPLE; Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U and curl -H 'Authorization: bearer abcdefghijklmnop1234'\n"
    "-----BEGIN RSA PRIVATE KEY-----\nMIIB\nxyz\n-----END RSA PRIVATE KEY-----"
)


def test_14_3_redaction():
    out, counts = redact(SECRET)
    assert "[user] " + out == (
        "[user] use [REDACTED:aws_access_key_id]; Authorization: Bearer [REDACTED:jwt] and curl -H "
        "'Authorization: bearer [REDACTED:bearer_token]'\n[REDACTED:private_key]")
    assert counts == {"private_key": 1, "jwt": 1, "bearer_token": 1, "aws_access_key_id": 1}
    assert redact(out) == (out, {})


def test_14_3_redaction_through_capture():
    sim = make_sim(extractor="none")
    res = sim.capture_session([{"role": "user", "content": SECRET}], "s1")
    assert sim.get_point("s1_t0")["content"].startswith("[user] use [REDACTED:aws_access_key_id];")
    assert sum(res["redactions"].values()) == 4


def test_14_4_block_one_live_pointer():
    sim = make_sim()
    pid = t0(sim, "decision", "Use Kuzu for the simulator store.")
    block = sim.volunteer_context(ask("What did we decide about the simulator store?"))["block"]
    assert block == "\n".join([*BLOCK_HEADER, "",
                               f"- **Use Kuzu for the simulator store** \u2192 point/{pid} \u2014 "
                               f"Use Kuzu for the simulator store. ({REMINDER})", ""])
    assert block.endswith(")\n") and not block.endswith("\n\n")
    assert BLOCK_HEADER[0].startswith("<!--") and BLOCK_HEADER[0].endswith("-->")
    assert BLOCK_HEADER[1].startswith("## ")


def test_14_4_flags_order():
    sim = make_sim()
    o = t0(sim, "decision", "Nightly exports land in the analytics bucket")
    n = t0(sim, "decision", "Hourly exports land in the analytics bucket")
    sim.set_point_baseline(o, 1.3, 0.7)  # contested and superseded (mean 0.65)
    sim.supersede_point(o, n)
    res = sim.volunteer_context(ask("Where do analytics bucket exports land?"))
    line = [ln for ln in res["block"].splitlines() if f"point/{o}" in ln]
    assert line and f"point/{o} [{SUPERSEDED_FLAG}; {CONTESTED_FLAG}] \u2014 " in line[0]


def test_14_5_hook_json_shapes():
    block = build_block(["- **x** \u2192 point/abc \u2014 y (z)"])
    for h in ("claude", "codex", "devin"):
        out = format_hook_output(block, h)
        assert out.count("\n") == 1
        assert json.loads(out) == {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                                          "additionalContext": block}}
        assert out.startswith('{"hookSpecificOutput": {"hookEventName": ')  # default separators
    assert json.loads(format_hook_output(block, "cline")) == {"contextModification": {"context": block}}
    assert format_hook_output(block, "pi") == block
    assert format_hook_output("", "claude") == "" and format_hook_output("  \n", "other") == ""


def test_14_6_keys_and_ids():
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert content_digest(turns) == "9ea9fda7321dd22ec18e8642ca14b1ca9fc8e55869893510b2f1b8383cced073"
    assert capture_key("s1", turns) == "a9fecaf2314b86d2a28499634688906def6481110efc6fa7f84ff90ceb7c3e17"
    assert entry_key("s1") == "e8bc163c82eee18733288c7d4ac636db"
    assert pt_id("Use Kuzu for the simulator store.") == (
        "pt_c22d92f176867bcd706902d8f9cbc94e779e9cd275719c46d6e14a9dfb741c")
    assert object_id("Kuzu") == "obj-e7d427a478828b9d0818b5b5a5"
    assert session_event_id("s1") == "ev_d7867495d8baac61976b7fbf14874be4ef50208ad0b7cb98755772ba4c80d2"
    assert [backoff_delay(n) for n in range(1, 12)] == [30, 60, 120, 240, 480, 960, 1920, 3840, 7680, 15360, 21600]


def test_14_6_ids_through_capture():
    sim = make_sim()
    sim.capture_session([{"role": "user", "content": "entity: Kuzu\ndecision: Use Kuzu for the simulator store."}],
                        "s1")
    assert sim.get_point(pt_id("Use Kuzu for the simulator store.")) is not None
    assert sim.store.query("MATCH (o:Object {name:'Kuzu'}) RETURN o.id AS id")[0]["id"] == object_id("Kuzu")
    assert sim.store.query("MATCH (e:Event {eventKind:'sessionCaptured'}) RETURN e.id AS id")[0]["id"] == (
        session_event_id("s1"))




def test_14_8_re_mention_suppression():
    sim = make_sim()
    ids = billing_points(sim)
    q1 = "What did we decide about the billing migration?"
    r1 = sim.volunteer_context(ask(q1))
    assert [p["id"] for p in r1["pointers"]] == ids[:3]
    r2 = sim.volunteer_context(ask("Continue with the billing migration work from yesterday please"),
                               prior_context=r1["block"])
    assert [p["id"] for p in r2["pointers"]] == ids[3:]
    r3 = sim.volunteer_context(ask(q1), prior_context=r1["block"] + r2["block"])
    assert [p["id"] for p in r3["pointers"]] == ids[:3]
    fixed = " ".join(BLOCK_HEADER) + REMINDER + SUPERSEDED_FLAG + CONTESTED_FLAG
    for tok in ("archives", "dunning", "emails", "older", "ninety", "days", "keeps", "exports", "quarterly",
                "parquet", "snapshots"):
        assert tok not in fixed.lower()


def test_14_10_digest_rendering():
    ctx = {
        "diary": [{"createdAt": "2026-03-01T10:00:00.000000+00:00", "content": "Reviewed the schema with the team."}],
        "points": [{"pointKind": "decision", "content": "Use Kuzu for the simulator store."},
                   {"pointKind": "checkpoint-item", "content": "Pin kuzu==0.11.3 in the lock file."}],
        "events": [], "confidence": [{"confidence": 0.9, "content": "Use Kuzu for the simulator store."}],
        "no_prior_sessions": False,
    }
    assert render_digest(ctx) == "\n".join([
        DIGEST_TITLE, "", HEADINGS["diary"], "- [2026-03-01] Reviewed the schema with the team.", "",
        HEADINGS["points"], "- (decision) Use Kuzu for the simulator store.",
        "- (checkpoint-item) Pin kuzu==0.11.3 in the lock file.", "", HEADINGS["confidence"],
        "- [0.90] Use Kuzu for the simulator store.", "", CLOSING_HINT]) + "\n"
    assert DIGEST_TITLE.startswith("# ") and all(h.startswith("## ") for h in HEADINGS.values())


def test_14_10_digest_field_defaults():
    base = {"diary": [], "events": [], "no_prior_sessions": False}
    assert "- (point) x" in render_digest({**base, "points": [{"content": "x"}], "confidence": []})
    assert "- (None) x" in render_digest({**base, "points": [{"pointKind": None, "content": "x"}], "confidence": []})
    # A point row keeps the context non-empty: confidence rows alone print the notice (§7.5 (a)).
    one = [{"pointKind": "decision", "content": "x"}]
    assert "- [0.00] y" in render_digest({**base, "points": one, "confidence": [{"content": "y"}]})
    import pytest

    with pytest.raises(TypeError):
        render_digest({**base, "points": one, "confidence": [{"content": "y", "confidence": None}]})
