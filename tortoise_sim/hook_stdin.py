"""What a prompt hook's stdin says about itself: the problem with it in a few words, or ``None`` (**standard library
only**: the hook client imports this on every prompt).

A host sends its hook JSON on stdin. The reference hook reads it leniently (spec §7.1 step 1): a JSON object's
``prompt`` (else ``userPrompt``), a JSON string itself, anything else as the raw prompt text; a prompt that is not
a string reads as blank. memsim keeps that reading (the hook's stdout is the spec's) and only *names* what a host
that sent its real hook JSON would never send, so a hook wired to the wrong event, or fed by hand, says why it
printed nothing instead of staying silent. The hook client (:func:`tortoise_sim.hook_client.hook_outcome`) prints
the problem as the hook's one stderr line when nothing worse went wrong in that run, on every path (the
standard-library fast path, the resident service, the typer commands).

- ``hook-volunteer``: an empty stdin; bytes that are not UTF-8 (replaced, as the spec decodes); stdin that is not
  JSON, or JSON that is neither an object nor a string (read as the raw prompt text); an object with neither a
  string ``prompt`` nor a string ``userPrompt`` (the prompt reads as blank).
- ``hook-session-start``: its stdin only names the live session, which the session-start drain leaves in the spool.
  Empty stdin (a hand run) is no problem; stdin that is not a JSON object, or an object whose ``session_id`` is
  there but not a non-empty string, is (the drain then excludes no session).
- ``hook-session-end`` checks its own stdin and fails with its own line (and a ledger row) when it cannot spool:
  :func:`tortoise_sim.hook_client.session_end_turns`.

The problem text never quotes the stdin itself (a prompt can hold anything); it names its kind and size.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["stdin_problem", "hook_json", "json_kind"]


def json_kind(value: Any) -> str:
    """The JSON name of a parsed value's type (``object``, ``array``, ``string``, ``number``, ``boolean``,
    ``null``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def _parse(data: bytes) -> tuple[Any, str | None]:
    """``(value, None)`` when ``data`` (decoded as the spec does: UTF-8, errors replaced) is JSON, else
    ``(None, why)``."""
    try:
        return json.loads(data.decode("utf-8", "replace")), None
    except RecursionError:  # nesting deeper than the interpreter's recursion limit
        return None, "nested too deeply to parse"
    except ValueError as exc:
        return None, str(exc).split(":", 1)[0].lower() if str(exc) else "not JSON"


def hook_json(data: bytes) -> Any:
    """The hook JSON on a hook's stdin (decoded as the spec does), or ``None`` when it is not JSON (nested too
    deeply included: that is not a host's hook JSON either)."""
    return _parse(data)[0]


def _not_utf8(data: bytes) -> str | None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"stdin is not valid UTF-8 (byte {exc.start}); the bytes that are not were replaced"
    return None


def _volunteer_problem(data: bytes) -> str | None:
    if not data.strip():
        return "stdin is empty: no hook JSON, so no prompt"
    value, why = _parse(data)
    if why is not None:
        return f"stdin is not JSON ({why}); read as a raw prompt of {len(data)} bytes, as the reference hook does"
    if isinstance(value, str):
        return _not_utf8(data)
    if not isinstance(value, dict):
        return (f"stdin is a JSON {json_kind(value)}, not the hook JSON object; read as a raw prompt of "
                f"{len(data)} bytes, as the reference hook does")
    if isinstance(value.get("prompt"), str) or isinstance(value.get("userPrompt"), str):
        return _not_utf8(data)
    for key in ("prompt", "userPrompt"):
        if key in value:
            return f"the hook JSON's {key} is a JSON {json_kind(value[key])}, not a string; no prompt"
    return "the hook JSON has no prompt (nor userPrompt); no prompt"


def _session_start_problem(data: bytes) -> str | None:
    if not data.strip():
        return None
    value, why = _parse(data)
    if why is not None or not isinstance(value, dict):
        what = f"not JSON ({why})" if why is not None else f"a JSON {json_kind(value)}"
        return f"stdin is {what}, not the hook JSON object; no session id, so the drain excludes no session"
    if "session_id" in value and not (isinstance(value["session_id"], str) and value["session_id"]):
        sid = value["session_id"]
        kind = "an empty string" if sid == "" else f"a JSON {json_kind(sid)}"
        return f"the hook JSON's session_id is {kind}; no session id, so the drain excludes no session"
    return None


def stdin_problem(command: str, data: bytes) -> str | None:
    """The problem with ``data`` as the stdin of hook ``command`` (see the module docstring), else ``None``."""
    if command == "hook-volunteer":
        return _volunteer_problem(data)
    if command == "hook-session-start":
        return _session_start_problem(data)
    return None
