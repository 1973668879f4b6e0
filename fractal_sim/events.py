"""``RuntimeEventTracker``: the hook-event reducer (spec section 4).

Turns the sandbox's hook events (``HookEvent`` / ``RawHookEvent`` / dicts validating as one) into three lists and
display events. Faithful rules (FRA-14): files are recorded only on ``after`` (a read that errors is not
recorded), commands on ``before`` (failed attempts count); appends are unique by exact string. Nested calls of the
same path or command are suppressed (spec 4.5). ``files_modified`` is never persisted by the runtime (FRA-05,
FRA-27, FRA-43): stored modifications come from the agent's ``changed_files`` only.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from .models import HookEvent, RawHookEvent, RuntimeEvent

FILE_TARGETS = frozenset({
    "builtins.open", "pathlib.Path.open", "pathlib.Path.read_text", "pathlib.Path.read_bytes",
    "pathlib.Path.write_text", "pathlib.Path.write_bytes", "os.open", "os.pread", "os.pwrite", "os.ftruncate",
    "os.replace", "os.unlink",
})
COMMAND_TARGETS = frozenset({
    "subprocess.run", "subprocess.Popen", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
})
OPEN_TARGETS = frozenset({"builtins.open", "pathlib.Path.open", "os.open"})
COMPOUND_PATH_TARGETS = frozenset({
    "pathlib.Path.read_text", "pathlib.Path.read_bytes", "pathlib.Path.write_text", "pathlib.Path.write_bytes",
})
PATH_METHOD_TARGETS = frozenset({"builtins.open", "pathlib.Path.open"}) | COMPOUND_PATH_TARGETS
COMPOUND_COMMAND_TARGETS = frozenset({
    "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
})
DISPLAY_LIMIT = 160
TRUNCATION_MARKER = "..."
# Linux flag values, as upstream's sandbox reports them.
O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND = 1, 2, 64, 512, 1024


def truncate_middle(text: str, limit: int = DISPLAY_LIMIT) -> str:
    """``first 79 + "..." + last 78`` for a 160 cap (FRA acceptance 12)."""
    if len(text) <= limit:
        return text
    keep = limit - len(TRUNCATION_MARKER)
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + TRUNCATION_MARKER + text[-tail:]


def coerce_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    if isinstance(value, dict):
        for key in ("value", "repr"):
            if key in value:
                coerced = coerce_int(value[key])
                if coerced is not None:
                    return coerced
    return None


def _first_arg(args: Any) -> tuple[bool, Any]:
    if isinstance(args, (list, tuple)) and args:
        return True, args[0]
    return False, None


def decode_path(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, dict):
        for key in ("path", "value", "repr"):
            if isinstance(value.get(key), str):
                return value[key]
        return None
    return str(value)


def decode_command(target: str, args: Any) -> str:
    present, value = _first_arg(args)
    command = ""
    if present:
        if isinstance(value, str):
            command = value
        elif isinstance(value, (list, tuple)):
            command = " ".join(shlex.quote(str(part)) for part in value)
        elif isinstance(value, dict):
            for key in ("value", "repr"):
                if isinstance(value.get(key), str):
                    command = value[key]
                    break
        else:
            command = str(value)  # None -> "None" (verified upstream)
    if not command:
        command = target.removeprefix("subprocess.")
    return command


def _open_mode(event: HookEvent | RawHookEvent) -> str:
    kwargs = event.kwargs if isinstance(event.kwargs, dict) else {}
    if "mode" in kwargs:
        mode = kwargs["mode"]
    elif isinstance(event.args, (list, tuple)) and len(event.args) > 1:
        mode = event.args[1]
    else:
        mode = "r"
    if not isinstance(mode, str):
        mode = "r"
    readable = mode.startswith("r") or "+" in mode
    writable = any(c in mode for c in "wax+")
    if readable and writable:
        return "read_write"
    return "write" if writable else "read"


def _os_open_mode(args: Any) -> str:
    flags = coerce_int(args[1]) if isinstance(args, (list, tuple)) and len(args) > 1 else None
    if flags is None:
        return "read"
    if flags & O_RDWR:
        return "read_write"
    if flags & O_WRONLY or flags & (O_CREAT | O_TRUNC | O_APPEND):
        return "write"
    return "read"


class RuntimeEventTracker:
    """Per-submit reducer. Public lists ``files_read``, ``files_modified``, ``commands_run``."""

    def __init__(self) -> None:
        self.files_read: list[str] = []
        self.files_modified: list[str] = []
        self.commands_run: list[str] = []
        self._fd_paths: dict[int, str] = {}
        self._active_paths: dict[str, int] = {}
        self._active_commands: dict[str, list[str]] = {}

    @staticmethod
    def adapt(raw: Any) -> HookEvent | RawHookEvent:
        """A ``HookEvent`` passes; anything else must validate as ``RawHookEvent`` (raises otherwise; the
        runtime drops such events, FRA-15)."""
        if isinstance(raw, (HookEvent, RawHookEvent)):
            return raw
        return RawHookEvent.model_validate(raw)

    def observe(self, raw: Any) -> RuntimeEvent | None:
        event = self.adapt(raw)
        if event.target in COMMAND_TARGETS:
            return self._observe_command(event)
        if event.target in FILE_TARGETS:
            return self._observe_file(event)
        return None

    # -- commands ------------------------------------------------------------------------------------------
    def _observe_command(self, event: HookEvent | RawHookEvent) -> RuntimeEvent | None:
        command = decode_command(event.target, event.args)
        stack = self._active_commands.get(command)
        if stack and stack[-1] != event.target:
            return None  # nested call of the same command (e.g. Popen under run)
        if event.phase == "before":
            if command not in self.commands_run:
                self.commands_run.append(command)
            if event.target in COMPOUND_COMMAND_TARGETS:
                self._active_commands.setdefault(command, []).append(event.target)
        elif event.phase in ("after", "error") and event.target in COMPOUND_COMMAND_TARGETS and stack:
            if stack[-1] == event.target:
                stack.pop()
            elif event.target in stack:
                stack.remove(event.target)
            if not stack:
                del self._active_commands[command]
        shown = truncate_middle(command)
        if event.phase == "before":
            return RuntimeEvent(kind="command", target=event.target, phase=event.phase,
                                message=f"running {shown}", command=command)
        if event.phase == "error":
            return RuntimeEvent(kind="command", target=event.target, phase=event.phase,
                                message=f"command failed: {shown}", command=command)
        return None

    # -- files ---------------------------------------------------------------------------------------------
    def _observe_file(self, event: HookEvent | RawHookEvent) -> RuntimeEvent | None:
        target, args = event.target, event.args
        if target in ("os.pread", "os.pwrite", "os.ftruncate"):
            _, fd = _first_arg(args)
            fd_int = coerce_int(fd)
            path = self._fd_paths.get(fd_int) if fd_int is not None else None
            mode = "read" if target == "os.pread" else "write"
        elif target == "os.replace":
            path = decode_path(args[1]) if isinstance(args, (list, tuple)) and len(args) > 1 else None
            mode = "write"
        elif target == "os.unlink":
            path = decode_path(_first_arg(args)[1])
            mode = "write"
        elif target == "os.open":
            path = decode_path(_first_arg(args)[1])
            mode = _os_open_mode(args)
        elif target in ("builtins.open", "pathlib.Path.open"):
            path = decode_path(_first_arg(args)[1])
            mode = _open_mode(event)
        else:  # compound Path read/write methods
            path = decode_path(_first_arg(args)[1])
            mode = "read" if "read" in target else "write"

        if target in COMPOUND_PATH_TARGETS and path:
            if event.phase == "before":
                self._active_paths[path] = self._active_paths.get(path, 0) + 1
            elif event.phase in ("after", "error") and path in self._active_paths:
                if self._active_paths[path] <= 1:
                    del self._active_paths[path]
                else:
                    self._active_paths[path] -= 1
        elif target in OPEN_TARGETS and path and self._active_paths.get(path, 0) > 0:
            return None  # nested open under Path.read_text & co: ignored entirely

        if event.phase == "after" and path:
            if target == "os.open":
                fd = coerce_int(event.result)
                if fd is not None:
                    self._fd_paths[fd] = path
            if mode in ("read", "read_write") and path not in self.files_read:
                self.files_read.append(path)
            if mode in ("write", "read_write") and path not in self.files_modified:
                self.files_modified.append(path)

        if event.phase != "before":
            return None
        shown = path if path else "file"
        if mode == "read":
            verb = "opening" if target in OPEN_TARGETS else "reading"
            return RuntimeEvent(kind="file_read", target=target, phase=event.phase,
                                message=f"{verb} {shown}", path=path)
        return RuntimeEvent(kind="file_write", target=target, phase=event.phase, message=f"editing {shown}",
                            path=path)
