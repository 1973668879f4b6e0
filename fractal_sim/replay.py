"""Replay scripts: a JSON/YAML description of a scripted conversation for ``ScriptedAgent`` (spec 1.2).

Used by ``memsim fractal replay``; each turn names a message, the actions the agent performs for real on the
workspace, its outcome (return / raise / cancel) and its trace. Errors name the offending entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .agent import (
    Cancel,
    Delete,
    Emit,
    Open,
    Raise,
    Read,
    Return,
    Run,
    SafeReplace,
    SetInterrupt,
    TraceSpec,
    TurnScript,
    Write,
)
from .models import TokenUsage


class ScriptError(ValueError):
    """A replay script that does not follow the format of :func:`parse_replay_script`."""


@dataclass
class ReplayTurn:
    message: str
    script: TurnScript


@dataclass
class ReplayScript:
    files: dict[str, str]
    turns: list[ReplayTurn]


def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise ScriptError(f"{where}: {what}")


def _only(value: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    """Refuse keys outside ``allowed`` (a misspelled key would otherwise be ignored: ``txt:`` writing an empty file)."""
    unknown = sorted(str(k) for k in value if k not in allowed)
    _need(not unknown, where, f"unknown keys {unknown} (allowed: {', '.join(allowed)})")


def _count(value: Any, where: str, what: str) -> None:
    _need(value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0), where,
          f"{what} must be a whole number >= 0")


def _parse_action(item: Any, where: str) -> Any:
    _need(isinstance(item, dict) and len(item) == 1, where, "an action is a mapping with exactly one key")
    (kind, arg), = item.items()

    def path_text() -> tuple[str, str]:
        if isinstance(arg, str):
            return arg, ""
        _need(isinstance(arg, dict) and isinstance(arg.get("path"), str), where, f"{kind} needs a path")
        _only(arg, {"write": ("path", "text"), "safe_replace": ("path", "text"), "open": ("path", "mode")}.get(
            kind, ("path",)), where)
        text = arg.get("text", "")
        _need(isinstance(text, str), where, "text must be a string")
        return arg["path"], text

    if kind == "read":
        return Read(path_text()[0])
    if kind == "write":
        return Write(*path_text())
    if kind == "safe_replace":
        return SafeReplace(*path_text())
    if kind == "delete":
        return Delete(path_text()[0])
    if kind == "open":
        path, _ = path_text()
        mode = arg.get("mode", "r") if isinstance(arg, dict) else "r"
        _need(isinstance(mode, str), where, "mode must be a string")
        return Open(path, mode)
    if kind == "run":
        if isinstance(arg, (str, list)):
            command, ok = arg, True
        else:
            _need(isinstance(arg, dict) and "command" in arg, where, "run needs a command")
            _only(arg, ("command", "ok"), where)
            command, ok = arg["command"], arg.get("ok", True)
        _need(isinstance(command, str) or (isinstance(command, list) and all(isinstance(c, str) for c in command)),
              where, "command must be a string or a list of strings")
        _need(isinstance(ok, bool), where, "ok must be true or false")
        return Run(command, ok)
    if kind == "emit":
        return Emit(arg)
    if kind == "set_interrupt":
        return SetInterrupt()
    raise ScriptError(f"{where}: unknown action {kind!r} (read, write, open, safe_replace, delete, run, emit, "
                      "set_interrupt)")


def _parse_trace(value: Any, where: str) -> Any:
    if value == "default":
        return "default"
    if value is None:
        return None
    _need(isinstance(value, dict), where, "trace must be 'default', null or a mapping")
    known = {"status", "model", "iterations", "duration_ms", "usage_main", "usage_sub", "step_input_tokens"}
    unknown = set(value) - known
    _need(not unknown, where, f"unknown trace keys {sorted(unknown)}")
    for usage in ("usage_main", "usage_sub"):
        if isinstance(value.get(usage), dict):
            _only(value[usage], tuple(TokenUsage.model_fields), f"{where}.{usage}")
            for key in ("input_tokens", "output_tokens", "cache_hits"):
                _count(value[usage].get(key), f"{where}.{usage}", key)
    _count(value.get("iterations"), where, "iterations")
    _count(value.get("duration_ms"), where, "duration_ms")
    steps = value.get("step_input_tokens")
    _need(steps is None or isinstance(steps, list), where, "step_input_tokens must be a list")
    for i, n in enumerate(steps or []):
        _count(n, where, f"step_input_tokens[{i}]")
    _need(value.get("status", "completed") in ("in_progress", "completed", "max_iterations", "error"), where,
          "status must be in_progress, completed, max_iterations or error")
    try:
        return TraceSpec(status=value.get("status", "completed"), model=value.get("model", "scripted"),
                         iterations=value.get("iterations"), duration_ms=value.get("duration_ms", 0),
                         usage_main=TokenUsage.model_validate(value.get("usage_main", {})),
                         usage_sub=TokenUsage.model_validate(value.get("usage_sub", {})),
                         step_input_tokens=value.get("step_input_tokens"))
    except ValueError as exc:
        raise ScriptError(f"{where}: {str(exc).splitlines()[0]}") from None


def _parse_outcome(value: Any, where: str) -> Any:
    if value is None:
        return Return("ok", [])
    _need(isinstance(value, dict) and len(value) == 1, where, "outcome is one of return / raise / cancel")
    (kind, arg), = value.items()
    if kind == "return":
        arg = arg or {}
        _need(isinstance(arg, dict), where, "return takes {response, changed_files}")
        _only(arg, ("response", "changed_files"), where)
        return Return(arg.get("response", "ok"), arg.get("changed_files", []))  # types checked by the adapter
    if kind == "raise":
        arg = {"message": arg} if isinstance(arg, str) else (arg or {})
        _need(isinstance(arg, dict), where, "raise takes a message or {message, trace, attach}")
        _only(arg, ("message", "trace", "attach"), where)
        attach = arg.get("attach", "self")
        _need(attach in ("self", "cause"), where, "attach must be 'self' or 'cause'")
        return Raise(str(arg.get("message", "agent failed")), trace=arg.get("trace"), attach=attach)
    if kind == "cancel":
        return Cancel()
    raise ScriptError(f"{where}: unknown outcome {kind!r} (return, raise, cancel)")


def parse_replay_script(data: Any) -> ReplayScript:
    """Validate a replay script (already parsed from JSON/YAML)::

        files: {a.py: "print('a')\\n"}          # optional, created before the first turn
        turns:
          - message: "Add a --verbose flag"
            actions: [{read: a.py}, {write: {path: a.py, text: "..."}}, {run: "pytest -q"},
                      {run: {command: [pytest, -q], ok: false}}, {set_interrupt: true}, {emit: {...}}]
            outcome: {return: {response: "Done.", changed_files: [a.py]}}   # or {raise: "boom"} / {cancel: true}
            trace: default            # or null, or {status: max_iterations, step_input_tokens: [1200, 2400]}

    A bare list is accepted as ``turns``. Errors name the offending entry (``turns[3].actions[1]: ...``)."""
    if isinstance(data, list):
        data = {"turns": data}
    _need(isinstance(data, dict), "script", "expected a mapping with 'turns' (or a list of turns)")
    _only(data, ("files", "turns"), "script")
    files = data.get("files") or {}
    _need(isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()),
          "files", "expected a mapping of relative path -> text")
    turns_raw = data.get("turns")
    _need(isinstance(turns_raw, list) and turns_raw, "turns", "expected a non-empty list")
    turns = []
    for i, raw in enumerate(turns_raw):
        where = f"turns[{i}]"
        if isinstance(raw, str):
            raw = {"message": raw}
        _need(isinstance(raw, dict), where, "a turn is a mapping (or just its message)")
        unknown = set(raw) - {"message", "actions", "outcome", "trace"}
        _need(not unknown, where, f"unknown keys {sorted(unknown)}")
        message = raw.get("message")
        _need(isinstance(message, str), where, "message must be a string")
        actions_raw = raw.get("actions") or []
        _need(isinstance(actions_raw, list), where, "actions must be a list")
        actions = [_parse_action(a, f"{where}.actions[{k}]") for k, a in enumerate(actions_raw)]
        script = TurnScript(actions, _parse_outcome(raw.get("outcome"), f"{where}.outcome"),
                            _parse_trace(raw.get("trace", "default"), f"{where}.trace"))
        turns.append(ReplayTurn(message, script))
    return ReplayScript(files=dict(files), turns=turns)
