"""Hook seams (spec §7.1-§7.2): the per-prompt volunteer hook and the session-start digest hook.

Both always exit 0 and never raise: any failure becomes empty stdout, as upstream's shell hooks do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .digest import render_digest, session_context
from .store import TortoiseStore
from .volunteer import run_volunteer_pipeline

__all__ = ["hook_volunteer_turn", "hook_session_start", "hook_session_end", "extract_prompt", "format_hook_output",
           "transcript_turns", "PROMPT_CAP", "HOOK_HARNESSES"]

PROMPT_CAP = 15000
HOOK_HARNESSES = ("claude", "codex", "devin", "cline", "cline-string")


def extract_prompt(stdin: bytes | str) -> str:
    """Step 1: decode (replace errors); JSON object -> ``prompt`` else ``userPrompt``; JSON string -> itself;
    otherwise the raw text. Remove ``\\r``; keep the first 15000 UTF-8 bytes (no partial character)."""
    text = stdin.decode("utf-8", "replace") if isinstance(stdin, bytes | bytearray) else str(stdin)
    prompt: Any = text
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        prompt = data.get("prompt")
        if not isinstance(prompt, str):
            prompt = data.get("userPrompt")
        if not isinstance(prompt, str):
            prompt = ""
    elif isinstance(data, str):
        prompt = data
    prompt = prompt.replace("\r", "")
    raw = prompt.encode("utf-8", "replace")
    if len(raw) > PROMPT_CAP:
        prompt = raw[:PROMPT_CAP].decode("utf-8", "ignore")
    return prompt


def format_hook_output(block: str, harness: str) -> str:
    """Step 3: one JSON line per known harness (default ``json.dumps`` separators), raw block otherwise.

    ``cline`` is spec §7.1's shape, ``{"contextModification": {"context": BLOCK}}``, kept as the faithful default
    although Cline CLI 3.0.65 was seen dropping it (the object reached no model request, spec/hosts.md).
    ``cline-string`` [SIM, a named departure] prints ``{"contextModification": BLOCK}``: the string form that Cline
    3.0.65 delivers from a PreToolUse or PostToolUse hook, byte for byte, inside a user message after the tool
    result, framed ``<hook_context source="PostToolUse" tool_name=... tool_call_id=...>`` (observed with the pinned
    host; docs/hosts-cline-gemini.md). Gemini CLI 0.61.0's BeforeAgent hook accepts the ``claude`` shape (its block
    reaches the model with ``<`` and ``>`` HTML-escaped inside ``<hook_context>``), so Gemini needs no shape of
    its own."""
    if not block.strip():
        return ""
    if harness in ("claude", "codex", "devin"):
        return json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                                  "additionalContext": block}}) + "\n"
    if harness == "cline":
        return json.dumps({"contextModification": {"context": block}}) + "\n"
    if harness == "cline-string":
        return json.dumps({"contextModification": block}) + "\n"
    return block


def hook_volunteer_turn(stdin: bytes | str, harness: str = "codex", *,
                        store: TortoiseStore | Callable[[], TortoiseStore] | None = None,
                        volunteer: Callable[[list[dict[str, str]]], dict[str, Any]] | None = None,
                        on_error: Callable[[str, BaseException], None] | None = None) -> tuple[str, int]:
    """Spec §7.1 (TOR-33): ``(stdout, 0)``. ``store`` may be a factory so that opening it can fail inside
    the fail-open boundary; ``volunteer`` overrides the pipeline call (tests). ``on_error(what, exc)`` [SIM] is told
    of a swallowed failure (the hook client's one stderr line); stdout stays empty as the spec says."""
    try:
        prompt = extract_prompt(stdin)
    except Exception as exc:
        _tell(on_error, "reading the prompt", exc)
        return "", 0
    if not prompt.strip():
        return "", 0
    try:
        window = [{"role": "user", "content": prompt}]
        if volunteer is not None:
            res = volunteer(window)
        else:
            st = store() if callable(store) else store
            if st is None:
                return "", 0
            res = run_volunteer_pipeline(st, window)
        block = res.get("block") or ""
    except Exception as exc:
        _tell(on_error, "the volunteer pipeline", exc)
        return "", 0
    return format_hook_output(block, harness), 0


def _tell(on_error: Callable[[str, BaseException], None] | None, what: str, exc: BaseException) -> None:
    if on_error is not None:
        try:
            on_error(what, exc)
        except Exception:  # noqa: BLE001 - reporting never fails the hook
            pass


def hook_session_start(store: TortoiseStore | Callable[[], TortoiseStore] | None,
                       on_error: Callable[[str, BaseException], None] | None = None) -> tuple[str, int]:
    """Spec §7.2 (TOR-32): the rendered digest verbatim; any failure => ``("", 0)`` (``on_error`` as in
    :func:`hook_volunteer_turn`)."""
    try:
        st = store() if callable(store) else store
        if st is None:
            return "", 0
        return render_digest(session_context(st)), 0
    except Exception as exc:
        _tell(on_error, "the session-start digest", exc)
        return "", 0


def hook_session_end(capture: Callable[..., dict[str, Any]], turns: list[dict[str, Any]],
                     session_id: str) -> tuple[str, int]:
    """Feeds the host transcript to capture; failures are swallowed (exit 0)."""
    try:
        res = capture(turns, session_id=session_id)
        return json.dumps({"session_id": res.get("session_id"), "turns": res.get("turns"),
                           "extracted": res.get("extracted"), "ok": res.get("ok")}) + "\n", 0
    except Exception:
        return "", 0


def transcript_turns(hook: dict[str, Any], harness: str = "claude", reader: str | None = None) -> list[dict[str, str]]:
    """Turns from a session-end hook payload: :func:`tortoise_sim.transcripts.transcript_turns` (``turns`` as given,
    else the transcript at ``transcript_path`` read by the reader of ``harness``; the previous reader, which took
    every line with a ``message`` key, is ``reader="legacy"``)."""
    from .transcripts import transcript_turns as read

    return read(hook, harness, reader)
