"""One test per point of the spec corrections to §6.3, §7.5 and §10.1 items 4, 12, 13 and 14."""

from __future__ import annotations

import json

from tests.tortoise_sim.simkit import ask, make_sim, t0
from tortoise_sim.digest import CLOSING_HINT, DIGEST_TITLE, NO_MEMORY_LINE, render_digest
from tortoise_sim.search import search_points
from tortoise_sim.spool import Spool, entry_key

TURNS = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def test_raising_supersession_arm_does_not_degrade():
    """§6.3: the supersession arm is best effort; if it raises, the current arm's hits are still volunteered."""
    sim = make_sim()
    pid = t0(sim, "decision", "Use Kuzu for the store")
    calls: list[list[str]] = []

    def second_arm_raises(q, limit, ex, exo):
        calls.append(list(ex))
        if ex == ["retracted"]:
            raise RuntimeError("supersession search down")
        return search_points(sim.store, q, limit, ex, exo)

    res = sim.volunteer_context(ask("What about the Kuzu store?"), search_fn=second_arm_raises)
    assert len(calls) == 2 and calls[1] == ["retracted"]  # one hit < max_pointers=3, so the second arm ran
    assert res["degraded_reason"] is None
    assert [p["id"] for p in res["pointers"]] == [pid] and f"point/{pid}" in res["block"]


def test_digest_emptiness_ignores_confidence_rows():
    """§7.5 (a): only confidence rows => the one-line notice even when no_prior_sessions is false."""
    ctx = {"diary": [], "points": [], "events": [], "no_prior_sessions": False,
           "confidence": [{"confidence": 0.9, "content": "Use Kuzu"}]}
    assert render_digest(ctx) == NO_MEMORY_LINE + "\n"
    # An Event alone makes the context non-empty (events count for emptiness but are never printed).
    ctx["events"] = [{"id": "e1"}]
    out = render_digest(ctx)
    assert out.startswith(DIGEST_TITLE) and "- [0.90] Use Kuzu" in out and out.endswith(CLOSING_HINT + "\n")


def test_digest_null_created_at_prints_empty_date():
    """§7.5 (b): a null createdAt prints ``- [] <content>``, exactly like a missing one."""
    base = {"points": [], "events": [], "confidence": [], "no_prior_sessions": False}
    null = render_digest({**base, "diary": [{"createdAt": None, "content": "wrote the plan"}]})
    missing = render_digest({**base, "diary": [{"content": "wrote the plan"}]})
    assert "- [] wrote the plan" in null.splitlines() and null == missing


def test_probe_id_with_trailing_newline_is_posted(tmp_path):
    """§10.1 item 4: the probe pattern is anchored with \\Z, so ``<probe>\\n`` is an ordinary session."""
    sp = Spool(tmp_path)
    probe = "verify-hook-20260301T090000Z-abc123"
    sp.spool_write(probe, TURNS, "claude", "hook", "m")
    sp.spool_write(probe + "\n", TURNS, "claude", "hook", "m")
    posted: list[str] = []
    c = sp.flush_spool(lambda b: posted.append(b["session_id"]) or 200, 1)
    assert posted == [probe + "\n"]
    assert c["skipped_probe"] == 1 and c["filed"] == 1


def test_filed_counts_every_2xx(tmp_path):
    """§10.1 item 12: a 2xx whose compare-and-swap fails (turns appended during the post) still counts in
    ``filed``; the entry stays unfiled and is posted again on the next flush."""
    sp = Spool(tmp_path)
    sp.spool_write("s1", TURNS, "claude", "hook", "m")
    more = [*TURNS, {"role": "user", "content": "one more"}]

    def post_while_appending(body):
        sp.spool_write("s1", more, "claude", "hook", "m")
        return 201

    c = sp.flush_spool(post_while_appending, 1)
    assert c["filed"] == 1 and c["posted"] == 1
    meta = sp.read_meta("s1")
    assert "filed_key" not in meta and meta["lane"] == "pending"
    c2 = sp.flush_spool(lambda b: 200, 2)
    assert c2["filed"] == 1 and sp.read_meta("s1")["lane"] == "filed"


def test_raising_post_counts_once_in_failed(tmp_path):
    """§10.1 item 13 (TOR-43): one deferral counted in ``failed`` (not ``transient``), and still counted as
    ``posted`` (attempted); ledger ``entry_failed``, attempts + 1, backoff."""
    sp = Spool(tmp_path)
    sp.spool_write("s1", TURNS, "claude", "hook", "m")

    def boom(body):
        raise ConnectionError("offline")

    c = sp.flush_spool(boom, 1000)
    assert c["failed"] == 1 and c["posted"] == 1 and c["transient"] == 0, c
    assert sum(c.values()) == 2, c
    meta = sp.read_meta("s1")
    assert meta["attempts"] == 1 and meta["next_attempt_at_ms"] == 1000 + 30_000
    assert [r["reason"] for r in sp.ledger_rows()] == ["entry_failed"]


def test_corrupt_meta_ledger_row_names_entry_key(tmp_path):
    """§10.1 items 9 and 14: ``unreadable:<entry_key>``; a meta without a non-empty string session_id is corrupt."""
    sp = Spool(tmp_path)
    entries = tmp_path / "entries"
    entries.mkdir(parents=True)
    (entries / "broken.meta.json").write_text("{not json")
    (entries / "nosid.meta.json").write_text(json.dumps({"version": 1, "session_id": ""}))
    (entries / "nosid.turns.jsonl").write_text(json.dumps(TURNS[0]) + "\n")
    c = sp.flush_spool(lambda b: 200, 1)
    assert c["discarded"] == 2 and c["posted"] == 0
    rows = sp.ledger_rows()
    assert sorted((r["session_id"], r["reason"]) for r in rows) == [
        ("unreadable:broken", "corrupt_entry"), ("unreadable:nosid", "corrupt_entry")]
    assert list(entries.iterdir()) == []
    # The write path names the entry the same way when it meets a corrupt meta of its own session.
    key = entry_key("s2")
    (entries / f"{key}.meta.json").write_text("[]")
    assert sp.spool_write("s2", TURNS, "claude", "hook", "m")["action"] == "rewrite"
    assert sp.ledger_rows()[-1]["session_id"] == f"unreadable:{key}"
