"""The HOST claims: skipped with one reason line without the pinned hosts; on a real host one holds, and each is
refuted by a mutation of the memory under test.

The hooks run as child processes of the host, so a monkeypatch of memsim's code would not reach them: each mutation
changes what the hook command line or its environment selects (a named option such as ``--transcript-reader
legacy`` or ``--filing spool``, an environment variable the hook reads, a shell line around the documented one) or
a field of the scenario the claim runs, and the claim must then be refuted on the check that mutation breaks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from harness.claims import all_claims
from harness.hosts import scenario
from harness.ledger import run_claim
from tests.harness.hosts.conftest import require_host

WRAP_JSON = ("{python} -c 'import json, sys; t = sys.stdin.read(); "
             "print(json.dumps(dict(hookSpecificOutput=dict(hookEventName=\"%s\", additionalContext=%s))) "
             "if t.strip() else \"\")'")
"""A shell filter turning a hook's plain stdout ``t`` into Claude Code's JSON ``additionalContext`` (event, text)."""


def _claim(cid: str):  # noqa: ANN202
    (c,) = all_claims(ids=[cid])
    return c


def _mutated(monkeypatch: pytest.MonkeyPatch, **lines: str) -> None:
    """Replace memsim's documented hook lines (by event attribute) for the claims run in this test."""
    for attr, line in lines.items():
        monkeypatch.setitem(scenario.TORTOISE_HOOKS, attr, line)


def _shipped_copy(monkeypatch: pytest.MonkeyPatch, folder: Path, name: str, change: Callable[[dict], None]) -> None:
    """The claims read the shipped scenario ``name`` with ``change`` applied to its fields (a copy in
    ``folder``)."""
    data = yaml.safe_load((scenario.SCENARIO_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    change(data)
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    monkeypatch.setattr(scenario, "SCENARIO_DIR", folder)


def _refuted(cid: str, *failed: str) -> dict:
    row = run_claim(_claim(cid))
    assert row.verdict == "refuted", (row.verdict, row.measured, row.evidence[-1500:])
    assert set(failed) <= set(row.measured["failed_checks"]), row.measured["failed_checks"]
    return row.measured


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


def test_host_01_refuted_by_a_plain_text_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--harness other`` prints the raw block instead of the JSON ``additionalContext``: Claude Code frames it
    otherwise, so it is not the block after the documented framing."""
    require_host("claude-code")
    _mutated(monkeypatch, user_prompt_submit=scenario.TORTOISE_HOOKS["user_prompt_submit"].replace(
        "--harness {harness}", "--harness other"))
    _refuted("HOST-01", "block_framed_byte_for_byte_once")


def test_host_02_refuted_by_a_json_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The digest handed over as JSON ``additionalContext`` instead of plain stdout: another framing."""
    require_host("claude-code")
    _mutated(monkeypatch, session_start=scenario.TORTOISE_HOOKS["session_start"] + " | "
             + WRAP_JSON % ("SessionStart", "t"))
    _refuted("HOST-02", "first_request_carries_it_framed_byte_for_byte")


def test_capture_claim_is_refuted_by_the_legacy_transcript_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """The previous reader (every transcript line with a ``message``) also stores Claude Code's request copy of the
    prompt, so the store no longer holds exactly the conversation."""
    require_host("claude-code")
    _mutated(monkeypatch, session_end=scenario.TORTOISE_HOOKS["session_end"] + " --transcript-reader legacy")
    measured = _refuted("HOST-03", "store_holds_exactly_the_conversation")
    assert measured["stored_turns"] > measured["expected_turns"]
    assert measured["memory_given"] == {"digest": 1, "pointer_block": 1}


def test_host_04_refuted_when_the_session_is_never_filed_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--filing spool`` at session end and ``--no-drain`` at the next start: the decision stays in the spool, so
    the next digest cannot show it."""
    require_host("claude-code")
    _mutated(monkeypatch, session_end=scenario.TORTOISE_HOOKS["session_end"] + " --filing spool",
             session_start=scenario.TORTOISE_HOOKS["session_start"] + " --no-drain")
    _refuted("HOST-04", "next_digest_holds_the_decision")


def test_host_04_a_late_second_session_is_an_error_not_a_refutation(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """When session 2 starts more than a second after session 1 (here the scenario's gap is 1.5 s), the design was
    not put to the test: the verdict is ``error``, never ``refuted``. The sessions run on the stand-in host of
    test_example_hook (the precondition is judged before any request is read)."""
    import harness.hosts.drivers as drivers
    from tests.harness.hosts.test_example_hook import _fake_run_session

    require_host("claude-code")  # the claim's own skip rule
    monkeypatch.setattr(drivers, "run_session", _fake_run_session)
    def late(data: dict) -> None:
        data["sessions"][1]["gap_s"] = 1.5
        data["hooks"] = {"preset": "none"}  # no hook is needed to judge the gap (a shorter run)

    _shipped_copy(monkeypatch, tmp_path, "confidence-gate", late)
    row = run_claim(_claim("HOST-04"))
    assert row.verdict == "error", (row.verdict, row.measured, row.evidence[-800:])
    assert row.note.startswith("precondition failed: session 2 started 1.") and row.measured["gap_s"] >= 1.5


def test_host_05_refuted_without_the_retraction(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The scenario with its ``retract`` operation removed (a retraction that never reaches the store)."""
    require_host("claude-code")

    def drop_retract(data: dict) -> None:
        assert data["sessions"][1]["before"] == [{"retract": {"ref": "queue"}}]
        data["sessions"][1]["before"] = []

    _shipped_copy(monkeypatch, tmp_path, "retraction-vs-digest", drop_retract)
    _refuted("HOST-05", "point_is_retracted", "no_pointer_after_retraction")


def test_host_06_refuted_by_a_hook_that_volunteers_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A prompt hook that remembers it volunteered (re-mention suppression) prints the block on the first prompt
    only."""
    require_host("claude-code")
    _mutated(monkeypatch, user_prompt_submit="if [ -e {run_dir}/volunteered-once ]; then cat > /dev/null; else "
             "touch {run_dir}/volunteered-once; " + scenario.TORTOISE_HOOKS["user_prompt_submit"] + "; fi")
    _refuted("HOST-06", "a_pointer_block_per_prompt", "each_prompt_adds_one_occurrence")


def test_host_07_refuted_by_a_hook_that_waits_past_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The prompt hooks wait 3 s on the hung service instead of the documented 1 s the scenario sets, as they would
    with the code's default raised to 3 s (which this process's copy of the constant also says): the claim's bound
    is the documented budget, not the constant under test, so it is refuted."""
    import tortoise_sim.hook_client as hook_client

    require_host("claude-code")
    monkeypatch.setattr(hook_client, "DEFAULT_TIMEOUT_S", 3.0)
    _mutated(monkeypatch, **{a: "MEMSIM_HOOK_TIMEOUT=3 " + scenario.TORTOISE_HOOKS[a]
                             for a in ("session_start", "user_prompt_submit")})
    measured = _refuted("HOST-07", "each_within_budget")
    assert measured["budget_s"] == 1.25 and min(measured["hook_seconds"].values()) >= 3.0


def test_host_08_refuted_by_a_session_end_too_slow_to_spool(monkeypatch: pytest.MonkeyPatch) -> None:
    """A session end that starts its work 2 s late: Claude Code cancels it at its 1.5 s budget before anything is
    spooled, so both sessions are lost."""
    require_host("claude-code")
    _mutated(monkeypatch, session_end="sleep 2; " + scenario.TORTOISE_HOOKS["session_end"])
    _refuted("HOST-08", "hung-service_not_lost", "service-killed_not_lost")


def test_host_09_refuted_by_the_claude_reader_on_a_codex_rollout(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--transcript-reader claude`` on Codex's rollout finds no turn, so nothing is stored."""
    require_host("codex")
    _mutated(monkeypatch, session_end=scenario.TORTOISE_HOOKS["session_end"] + " --transcript-reader claude")
    _refuted("HOST-09", "store_holds_exactly_the_conversation")


def test_host_10_refuted_by_a_block_printed_four_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """A prompt hook that prints its pointer block four times (in the JSON shape Claude Code reads): four pointer
    bullets where the design allows at most three; the request still grows by memory and framing only."""
    require_host("claude-code")
    _mutated(monkeypatch, user_prompt_submit=scenario.TORTOISE_HOOKS["user_prompt_submit"].replace(
        "--harness {harness}", "--harness other") + " | " + WRAP_JSON % ("UserPromptSubmit", "t * 4"))
    measured = _refuted("HOST-10", "pointer_bullets_within_the_caps")
    assert measured["pointer_bullets"] == 4 and "request_grows_by_memory_and_framing_only" not in \
        measured["failed_checks"]
