"""The HOST claims: skipped with one reason line without the pinned hosts; on a real host one holds, and one is
refuted by a mutation of the memory under test (the session-end hook given the previous transcript reader)."""

from __future__ import annotations

import pytest

from harness.claims import all_claims
from harness.ledger import run_claim
from tests.harness.hosts.conftest import require_host


def _claim(cid: str):  # noqa: ANN202
    (c,) = all_claims(ids=[cid])
    return c


def test_host_claims_are_skipped_with_the_reason_without_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.hosts.install as install

    monkeypatch.setattr(install, "find_host", lambda name: None)
    claims = [c for c in all_claims(design="tortoise") if c.id.startswith("HOST-")]
    assert len(claims) >= 8
    for c in claims:
        row = run_claim(c)
        assert row.verdict == "skipped", (c.id, row.evidence[-500:])
        assert row.note.endswith("is not installed (memsim hosts install " + row.note.split()[0] + ")"), row.note
        assert row.note.split()[0] in ("claude-code", "codex")


def test_pointer_delivery_claim_holds_on_claude_code() -> None:
    require_host("claude-code")
    row = run_claim(_claim("HOST-01"))
    assert row.verdict == "holds", (row.measured, row.evidence[-1500:])
    assert row.measured["block_at"][0][1] == "system"


def test_capture_claim_is_refuted_by_the_legacy_transcript_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """The previous reader (every transcript line with a ``message``) also stores Claude Code's request copy of the
    prompt, so the store no longer holds exactly the conversation."""
    from harness.hosts import scenario

    require_host("claude-code")
    monkeypatch.setitem(scenario.TORTOISE_HOOKS, "session_end",
                        scenario.TORTOISE_HOOKS["session_end"] + " --transcript-reader legacy")
    row = run_claim(_claim("HOST-03"))
    assert row.verdict == "refuted", (row.measured, row.evidence[-1500:])
    assert "store_holds_exactly_the_conversation" in row.measured["failed_checks"]
    assert row.measured["stored_turns"] > row.measured["expected_turns"]
