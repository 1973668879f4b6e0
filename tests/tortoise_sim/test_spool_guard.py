"""Spec §10.1 items 15-17: each spool entry is filed under its own guard, a retry time that is not a number reads as
0, ``attempts`` is converted only after the post, sort keys are coerced to strings, and reading a turn log never
raises (an unreadable log reads as no turns; the hardened ``turns_unreadable="keep"`` keeps the entry)."""

from __future__ import annotations

import json

import pytest

from tortoise_sim import SimConfig, StepClock, Tortoise
from tortoise_sim.spool import Spool, backoff_delay, entry_key

TURNS = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def _meta_path(root, sid):
    return root / "entries" / f"{entry_key(sid)}.meta.json"


def _turns_path(root, sid):
    return root / "entries" / f"{entry_key(sid)}.turns.jsonl"


def _patch_meta(root, sid, **fields):
    path = _meta_path(root, sid)
    meta = {**json.loads(path.read_text(encoding="utf-8")), **fields}
    path.write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return path


def _two_entries(root, **bad_fields):
    """Entry ``a`` (older, its meta patched with ``bad_fields``) and ``b`` (newer, valid)."""
    sp = Spool(root, clock=StepClock())
    sp.spool_write("a", TURNS, "claude", "hook", "m")
    sp.spool_write("b", TURNS, "claude", "hook", "m")
    if bad_fields:
        _patch_meta(root, "a", **bad_fields)
    return sp


def test_item_15_example_attempts_not_convertible(tmp_path):
    """The example of item 15: A (older, attempts "x") and B (valid), 503 for both."""
    sp = _two_entries(tmp_path, attempts="x")
    before = _meta_path(tmp_path, "a").read_bytes()
    order = []
    c = sp.flush_spool(lambda b: order.append(b["session_id"]) or 503, 1000)
    assert order == ["a", "b"]
    assert (c["posted"], c["failed"], c["transient"]) == (2, 1, 1), c
    assert sum(c.values()) == 4, c
    assert _meta_path(tmp_path, "a").read_bytes() == before  # no backoff written: due again at the next flush
    assert sp.read_meta("b")["attempts"] == 1 and sp.read_meta("b")["next_attempt_at_ms"] == 1000 + 30_000
    (row,) = sp.ledger_rows()
    assert (row["session_id"], row["reason"]) == ("a", "entry_failed")
    assert row["detail"] == "unexpected failure while filing: ValueError(\"invalid literal for int() with base 10: 'x'\")"
    assert row["capture_key"] == sp.read_meta("a")["capture_key"]
    # posted again at the next flush (nothing written), and filed when the post succeeds: attempts reset to 0
    c2 = sp.flush_spool(lambda b: 200, 2000)
    assert c2["filed"] == 1 and c2["skipped_backoff"] == 1
    assert sp.read_meta("a")["attempts"] == 0 and sp.read_meta("a")["lane"] == "filed"


def test_unconvertible_attempts_is_still_filed_by_a_2xx(tmp_path):
    """Item 15: the 2xx path never reads ``attempts`` (and resets it); the permanent path does not read it either."""
    sp = _two_entries(tmp_path, attempts=[1])
    c = sp.flush_spool(lambda b: 200 if b["session_id"] == "a" else 400, 1)
    assert (c["filed"], c["permanent"], c["failed"]) == (1, 1, 0), c
    assert sp.read_meta("a")["attempts"] == 0 and sp.read_meta("a")["filed_key"] == sp.read_meta("a")["capture_key"]
    q = Spool(tmp_path / "q")
    q.spool_write("a", TURNS, "claude", "hook", "m")
    _patch_meta(tmp_path / "q", "a", attempts={"n": 1})
    assert q.flush_spool(lambda b: 400, 1)["permanent"] == 1 and q.read_meta("a")["lane"] == "quarantine"


@pytest.mark.parametrize(("value", "after"), [("3", 4), (2.9, 3), (True, 2), (None, 1), (0, 1), ("", 1), ([], 1),
                                               (1e300, int(1e300) + 1)],
                         ids=["str", "float", "bool", "null", "zero", "empty_str", "empty_list", "huge"])
def test_attempts_convert_as_int_does(tmp_path, value, after):
    """Item 15: ``int(<attempts> or 0) + 1`` after a transient answer; a huge value backs off the capped 6 h."""
    sp = Spool(tmp_path)
    sp.spool_write("a", TURNS, "claude", "hook", "m")
    _patch_meta(tmp_path, "a", attempts=value)
    c = sp.flush_spool(lambda b: None, 5000)
    assert c["transient"] == 1 and c["failed"] == 0
    meta = sp.read_meta("a")
    assert meta["attempts"] == after and meta["next_attempt_at_ms"] == 5000 + backoff_delay(after) * 1000


def test_backoff_delay_values_and_a_huge_count():
    assert [backoff_delay(n) for n in range(1, 12)] == [30, 60, 120, 240, 480, 960, 1920, 3840, 7680, 15360, 21600]
    assert backoff_delay(0) == backoff_delay(-5) == 30
    assert backoff_delay(10**300) == 21600  # not 2**(10**300), which would never finish


@pytest.mark.parametrize(("value", "due"), [("soon", True), ([], True), ({"t": 1}, True), (None, True),
                                            ("123", False), (123, False), ("1e20", False), ("inf", False),
                                            ("nan", True), (True, True)])
def test_retry_time_not_a_number_reads_as_zero(tmp_path, value, due):
    """Item 16: ``float(value or 0)``, 0 when that raises TypeError/ValueError; flush at now_ms = 100."""
    sp = _two_entries(tmp_path, next_attempt_at_ms=value)
    posted = []
    c = sp.flush_spool(lambda b: posted.append(b["session_id"]) or 200, 100)
    assert posted == (["a", "b"] if due else ["b"])
    assert c["skipped_backoff"] == (0 if due else 1) and c["failed"] == 0


def test_a_retry_time_too_large_for_a_float_fails_that_entry_alone(tmp_path):
    """An integer that ``float()`` cannot hold raises OverflowError (not TypeError/ValueError): the entry's guard
    records it and writes the retry time as a number, and the next entry is filed."""
    sp = _two_entries(tmp_path, next_attempt_at_ms=10**400)
    c = sp.flush_spool(lambda b: 200, 100)
    assert (c["failed"], c["filed"], c["posted"]) == (1, 1, 1), c
    assert sp.ledger_rows()[0]["detail"].startswith("unexpected failure while filing: OverflowError(")
    assert sp.read_meta("a")["next_attempt_at_ms"] == 100 + 30_000 and sp.read_meta("a")["attempts"] == 1


def test_sort_keys_coerced_to_strings_in_flush_and_pruning(tmp_path):
    """Item 16: ``(str(updated_at or ""), str(created_at or ""), str(session_id or ""))``: an integer timestamp
    neither raises in the flush's order nor in pruning's."""
    sp = _two_entries(tmp_path, updated_at=5, created_at=["x"])
    _patch_meta(tmp_path, "b", updated_at=None, created_at={"y": 1})
    order = []
    sp.flush_spool(lambda b: order.append(b["session_id"]) or 200, 1)
    # b: ("", "{'y': 1}", "b") sorts before a: ("5", "['x']", "a")
    assert order == ["b", "a"]
    assert sp.spool_write("c", TURNS, "claude", "hook", "m")["action"] == "rewrite"  # pruning sorts all three


def test_turn_log_lines_that_do_not_parse_are_skipped(tmp_path):
    """Item 17: blank lines, lines that are not JSON, and objects without string role/content are skipped; read-back
    keeps only role and content (so the torn last line of a killed append is dropped)."""
    sp = _two_entries(tmp_path)
    lines = ['{"role": "user", "content": "hi", "extra": 1}', "", "   ", "not json", "[1, 2]",
             '{"role": 7, "content": "x"}', '{"role": "user"}', '{"role": "assistant", "content": "hello"}',
             "[" * 100_000, '{"role": "user", "content": "torn']
    _turns_path(tmp_path, "a").write_text("\n".join(lines), encoding="utf-8")
    assert sp.read_turns("a") == TURNS
    bodies = []
    c = sp.flush_spool(lambda b: bodies.append(b) or 200, 1)
    assert c["filed"] == 2 and bodies[0]["conversation"] == TURNS


@pytest.mark.parametrize("how", ["not_utf8", "directory"])
def test_unreadable_turn_log_reads_as_no_turns_and_the_flush_goes_on(tmp_path, how):
    """Item 17 (TOR-52): an unreadable log (bytes that are not UTF-8; an OSError) reads as no turns, so the entry
    is discarded as ``transcript_empty``; the next entry is filed."""
    sp = _two_entries(tmp_path)
    log = _turns_path(tmp_path, "a")
    if how == "not_utf8":
        log.write_bytes(log.read_bytes() + '{"role": "user", "content": "caf\u00e9'.encode()[:-1])
    else:
        log.unlink()
        log.mkdir()
    assert sp.read_turns("a") == []
    posted = []
    c = sp.flush_spool(lambda b: posted.append(b["session_id"]) or 200, 1)
    assert posted == ["b"] and c["filed"] == 1
    reasons = [(r["session_id"], r["reason"]) for r in sp.ledger_rows()]
    assert reasons[0] == ("a", "transcript_empty")
    if how == "not_utf8":
        assert c["discarded"] == 1 and not log.exists() and not _meta_path(tmp_path, "a").exists()
    else:  # deleting a directory raises: that is an entry failure (a later one is still filed)
        assert reasons[1] == ("a", "entry_failed") and c["failed"] == 1


def test_hardened_keep_keeps_the_entry_and_files_it_after_a_rewrite(tmp_path):
    sp = Spool(tmp_path, clock=StepClock(), turns_unreadable="keep")
    sp.spool_write("a", TURNS, "claude", "hook", "m")
    sp.spool_write("b", TURNS, "claude", "hook", "m")
    log = _turns_path(tmp_path, "a")
    log.write_bytes(log.read_bytes() + b'{"role": "user", "content": "caf\xc3')
    c = sp.flush_spool(lambda b: 200, 1000)
    assert (c["failed"], c["filed"], c["discarded"], c["posted"]) == (1, 1, 0, 1), c
    (row,) = sp.ledger_rows()
    assert (row["session_id"], row["reason"]) == ("a", "transcript_unreadable")
    assert row["detail"] == f"{log}: not valid UTF-8 (byte {len(log.read_bytes()) - 1})"
    assert log.exists() and sp.read_meta("a")["next_attempt_at_ms"] == 1000 + 30_000
    more = [*TURNS, {"role": "user", "content": "café"}]
    assert sp.spool_write("a", more, "claude", "hook", "m")["action"] == "rewrite"
    bodies = []
    assert sp.flush_spool(lambda b: bodies.append(b) or 200, 2000)["filed"] == 1
    assert bodies[0]["conversation"] == more
    with pytest.raises(ValueError, match="turns_unreadable"):
        Spool(tmp_path, turns_unreadable="salvage")


def test_sdk_passes_the_named_option(tmp_path):
    sim = Tortoise(None, config=SimConfig(embedder="hashing", spool_dir=str(tmp_path / "s"),
                                          spool_turns_unreadable="keep"), clock=StepClock())
    try:
        assert sim.spool().turns_unreadable == "keep"
    finally:
        sim.close()
    assert SimConfig().spool_turns_unreadable == "discard"


def test_raising_post_detail_and_item_13_counting(tmp_path):
    """A raising post (item 13): one deferral counted in ``failed`` and ``posted``, attempts + 1 and the backoff;
    its ledger detail follows item 15. A later entry is still filed."""
    sp = _two_entries(tmp_path)

    def post(body):
        if body["session_id"] == "a":
            raise ConnectionError("offline")
        return 200

    c = sp.flush_spool(post, 1000)
    assert (c["posted"], c["failed"], c["transient"], c["filed"]) == (2, 1, 0, 1), c
    (row,) = sp.ledger_rows()
    assert row["reason"] == "entry_failed"
    assert row["detail"] == "unexpected failure while filing: ConnectionError('offline')"
    assert sp.read_meta("a")["attempts"] == 1 and sp.read_meta("a")["next_attempt_at_ms"] == 1000 + 30_000


def test_failure_in_the_bookkeeping_after_a_2xx(tmp_path):
    """Item 15: an exception after the post (here the compare-and-swap re-reads a meta that is now a JSON list)
    is that entry's failure: counted in ``failed`` and ``posted`` only (not ``filed``); the retry write uses the
    meta in hand."""
    sp = _two_entries(tmp_path)

    def post(body):
        if body["session_id"] == "a":
            _meta_path(tmp_path, "a").write_text("[]")
        return 200

    c = sp.flush_spool(post, 1000)
    assert (c["posted"], c["failed"], c["filed"]) == (2, 1, 1), c
    assert sp.ledger_rows()[0]["detail"].startswith("unexpected failure while filing: AttributeError(")
    meta = sp.read_meta("a")
    assert meta["session_id"] == "a" and meta["attempts"] == 1 and meta["lane"] == "pending"


def test_a_meta_that_cannot_be_discarded_does_not_stop_the_flush(tmp_path):
    """Item 9 under item 15's guard: a directory where a meta file should be cannot be parsed nor deleted; that
    entry is recorded as failed and the valid entry is still filed."""
    sp = _two_entries(tmp_path)
    bad = tmp_path / "entries" / "0000.meta.json"
    bad.mkdir()
    c = sp.flush_spool(lambda b: 200, 1)
    assert (c["filed"], c["failed"], c["discarded"]) == (2, 1, 0), c
    rows = [(r["session_id"], r["reason"]) for r in sp.ledger_rows()]
    assert rows == [("unreadable:0000", "corrupt_entry"), ("unreadable:0000", "entry_failed")]
    assert bad.is_dir()
