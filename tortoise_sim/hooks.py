"""Hook seams (spec §7.1-§7.2): the per-prompt volunteer hook and the session-start digest hook.

Both always exit 0 and never raise: any failure becomes empty stdout, as upstream's shell hooks do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .digest import render_digest, session_context
from .store import TortoiseStore
from .volunteer import run_volunteer_pipeline

__all__ = ["hook_volunteer_turn", "hook_session_start", "hook_session_end", "extract_prompt", "format_hook_output",
           "transcript_turns", "PROMPT_CAP", "HOOK_HARNESSES"]

PROMPT_CAP = 15000
HOOK_HARNESSES = ("claude", "codex", "devin", "cline")


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
    """Step 3: one JSON line per known harness (default ``json.dumps`` separators), raw block otherwise."""
    if not block.strip():
        return ""
    if harness in ("claude", "codex", "devin"):
        return json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                                  "additionalContext": block}}) + "\n"
    if harness == "cline":
        return json.dumps({"contextModification": {"context": block}}) + "\n"
    return block


def hook_volunteer_turn(stdin: bytes | str, harness: str = "codex", *,
                        store: TortoiseStore | Callable[[], TortoiseStore] | None = None,
                        volunteer: Callable[[list[dict[str, str]]], dict[str, Any]] | None = None) -> tuple[str, int]:
    """Spec §7.1 (TOR-33): ``(stdout, 0)``. ``store`` may be a factory so that opening it can fail inside
    the fail-open boundary; ``volunteer`` overrides the pipeline call (tests)."""
    try:
        prompt = extract_prompt(stdin)
    except Exception:
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
    except Exception:
        return "", 0
    return format_hook_output(block, harness), 0


def hook_session_start(store: TortoiseStore | Callable[[], TortoiseStore] | None) -> tuple[str, int]:
    """Spec §7.2 (TOR-32): the rendered digest verbatim; any failure => ``("", 0)``."""
    try:
        st = store() if callable(store) else store
        if st is None:
            return "", 0
        return render_digest(session_context(st)), 0
    except Exception:
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


def transcript_turns(hook: dict[str, Any]) -> list[dict[str, str]]:
    """Turns from a session-end hook payload: ``turns`` as given, else the text parts of a Claude Code style
    JSONL transcript at ``transcript_path`` (lines ``{"message": {"role", "content": str | [parts]}}``)."""
    if isinstance(hook.get("turns"), list):
        return [{"role": str(t.get("role")), "content": str(t.get("content") or "")} for t in hook["turns"]
                if isinstance(t, dict)]
    path = hook.get("transcript_path")
    if not isinstance(path, str):
        return []
    turns = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            msg = json.loads(line).get("message") or {}
        except (ValueError, AttributeError):
            continue
        role, content = msg.get("role"), msg.get("content")
        if isinstance(content, list):
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        if role in ("user", "assistant") and isinstance(content, str) and content.strip():
            turns.append({"role": role, "content": content})
    return turns
