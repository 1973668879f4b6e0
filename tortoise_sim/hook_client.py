"""Hook client for the resident Tortoise service: **standard library only** at import time.

A harness (Claude Code, Codex, Cline) spawns one hook process per prompt, so whatever this module imports is paid
on every prompt. It imports only the standard library; the in-process fallback imports ``tortoise_sim.hooks``
(Kuzu, numpy) and the light MiniLM encoder lazily, only when no service answers and the call needs them.

Entry points: ``memsim tortoise hook-volunteer | hook-session-start | hook-session-end [options]`` (``memsim``'s
console entry, :func:`harness.entry.main`, dispatches these here before importing typer), ``memsim-hook ...`` and
``python -m tortoise_sim.hook_client ...``. Every hook exits 0 with empty stdout on any error, usage errors
(unknown options, missing values) included; a usage error prints one line on stderr.

Protocol (version :data:`PROTOCOL_VERSION`): one request per connection over a Unix stream socket, each message a
single line of UTF-8 JSON. Request ``{"v": 1, "op": NAME, "args": {...}}``; response ``{"v": 1, "ok": true,
"result": ...}`` or ``{"v": 1, "ok": false, "error": {"type", "message", "code"?}}``. Operations are listed in
``tortoise_sim.service.OPS``.

Finding the service: ``--socket PATH``, else ``$MEMSIM_TORTOISE_SOCKET``, else :func:`socket_path_for` of the
store path (``--db``, else ``$MEMSIM_TORTOISE_DB``, else ``./.memsim/tortoise.kuzu``), so a hook line that names
only ``--db`` reaches the service started with the same ``--db``.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import tempfile

TYPE_CHECKING = False  # no runtime ``typing`` import (it pulls ``re`` and ``collections``: ~10 ms per hook)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, NoReturn

__all__ = ["PROTOCOL_VERSION", "HOOK_COMMANDS", "HARNESSES", "DEFAULT_HARNESS", "ServiceError", "default_db", "socket_path_for", "pid_path_for",
           "call", "run_hook", "main", "HookUsageError"]

PROTOCOL_VERSION = 1
HOOK_COMMANDS = ("hook-volunteer", "hook-session-start", "hook-session-end")
MAX_MESSAGE = 64 << 20
CONNECT_TIMEOUT_S = 0.5
DEFAULT_TIMEOUT_S = 20.0

# hook-volunteer --harness: the output shape of spec §7.1 step 3 (claude/codex/devin: hookSpecificOutput JSON,
# cline: contextModification JSON, other: the raw block). The spec's default is codex. Any other value is a usage
# error (a stderr note, no output, exit 0) instead of silently behaving as "other".
HARNESSES = ("claude", "codex", "devin", "cline", "other")
DEFAULT_HARNESS = "codex"

_OPTIONS = {
    "hook-volunteer": ("--harness", "--db", "--socket"),
    "hook-session-start": ("--db", "--socket"),
    "hook-session-end": ("--harness", "--db", "--socket", "--spool-dir"),
}


class ServiceError(RuntimeError):
    """The service answered with ``ok: false`` (``type``/``code`` as sent) or broke the protocol."""

    def __init__(self, message: str, type_: str = "ServiceError", code: str | None = None) -> None:
        super().__init__(message)
        self.type = type_
        self.code = code


class HookUsageError(ValueError):
    """Bad hook command line (unknown option, missing value)."""


def default_db(db: str | os.PathLike[str] | None = None) -> str:
    """The store path rule of ``memsim tortoise``: ``--db``, else ``$MEMSIM_TORTOISE_DB``, else
    ``.memsim/tortoise.kuzu``."""
    if db is not None:
        return os.fspath(db)
    return os.environ.get("MEMSIM_TORTOISE_DB") or os.path.join(".memsim", "tortoise.kuzu")


def _runtime_dir() -> str:
    d = os.environ.get("XDG_RUNTIME_DIR")
    if d and os.path.isdir(d) and os.access(d, os.W_OK):
        return d
    return tempfile.gettempdir()


def socket_path_for(db: str | os.PathLike[str] | None = None, socket_path: str | None = None) -> str:
    """``socket_path`` if given, else ``$MEMSIM_TORTOISE_SOCKET``, else a short path derived from the store's
    real path: ``<$XDG_RUNTIME_DIR or /tmp>/memsim-tortoise-<uid>-<sha256[:16]>.sock`` (AF_UNIX paths are limited
    to ~107 bytes, so the store path itself cannot be used)."""
    if socket_path:
        return os.fspath(socket_path)
    env = os.environ.get("MEMSIM_TORTOISE_SOCKET")
    if env:
        return env
    real = os.path.realpath(default_db(db))
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(_runtime_dir(), f"memsim-tortoise-{uid}-{digest}.sock")


def pid_path_for(sock: str) -> str:
    """The service's pid file next to its socket (JSON: pid, db, socket, started)."""
    return sock + ".pid"


def call(sock: str, op: str, args: dict[str, Any] | None = None, *, timeout: float | None = None) -> Any:
    """One request. Returns the ``result``; ``None`` means **no service answered** (no socket, connection refused:
    the caller may fall back in-process). Raises :class:`ServiceError` when the service answered with an error or
    broke the protocol, ``TimeoutError`` when it accepted but did not answer in ``timeout`` seconds."""
    if timeout is None:
        try:
            timeout = float(os.environ.get("MEMSIM_HOOK_TIMEOUT", DEFAULT_TIMEOUT_S))
        except ValueError:
            timeout = DEFAULT_TIMEOUT_S
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(CONNECT_TIMEOUT_S)
        try:
            s.connect(sock)
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError, PermissionError, OSError):
            return None
        s.settimeout(timeout)
        msg = json.dumps({"v": PROTOCOL_VERSION, "op": op, "args": args or {}}, ensure_ascii=False,
                         default=str).encode("utf-8") + b"\n"
        s.sendall(msg)
        buf = bytearray()
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
            if len(buf) > MAX_MESSAGE:
                raise ServiceError("response too large")
    except TimeoutError:
        raise
    finally:
        s.close()
    if not buf:
        raise ServiceError("service closed the connection without answering")
    try:
        resp = json.loads(buf.decode("utf-8"))
    except ValueError as exc:
        raise ServiceError(f"malformed response: {exc}") from None
    if not isinstance(resp, dict) or resp.get("v") != PROTOCOL_VERSION:
        raise ServiceError(f"protocol version mismatch (want {PROTOCOL_VERSION}, got {resp.get('v')!r})"
                           if isinstance(resp, dict) else "malformed response")
    if not resp.get("ok"):
        err = resp.get("error") or {}
        raise ServiceError(str(err.get("message", "service error")), str(err.get("type", "ServiceError")),
                           err.get("code"))
    return resp.get("result")


# ----------------------------------------------------------------------------------------------- hook commands
def parse_hook_args(command: str, argv: Sequence[str]) -> dict[str, str]:
    """``--name VALUE`` / ``--name=VALUE`` for the options of ``command``; anything else is a usage error."""
    allowed = _OPTIONS.get(command)
    if allowed is None:
        raise HookUsageError(f"unknown hook command {command!r}")
    out: dict[str, str] = {}
    i = 0
    argv = list(argv)
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name not in allowed:
            raise HookUsageError(f"unknown option {arg!r} for {command}")
        if not eq:
            if i + 1 >= len(argv):
                raise HookUsageError(f"option {name} needs a value")
            value = argv[i + 1]
            i += 1
        out[name[2:].replace("-", "_")] = value
        i += 1
    if command == "hook-volunteer" and out.get("harness", DEFAULT_HARNESS) not in HARNESSES:
        raise HookUsageError(f"unknown --harness {out['harness']!r}; choose one of {', '.join(HARNESSES)}")
    return out


def _read_stdin() -> bytes:
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return b""
        return sys.stdin.buffer.read()
    except Exception:  # noqa: BLE001 - a hook never fails the host
        return b""


def _pin_threads() -> None:
    """One BLAS / OpenMP / torch thread in a hook process (set before numpy is first imported)."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


class _LazyReadStore:
    """Opens the store read-only on first attribute access, so a call that never reads the graph (a courtesy
    prompt, TOR-38) never opens Kuzu."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._store: Any = None

    def _open(self) -> Any:
        if self._store is None:
            if not os.path.exists(self._path):
                raise FileNotFoundError(self._path)
            from tortoise_sim.light_encoder import light_encoder
            from tortoise_sim.store import TortoiseStore

            self._store = TortoiseStore(self._path, encoder=_LazyLightEncoder(light_encoder), seed=None,
                                        read_only=True)
        return self._store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._open(), name)


class _LazyLightEncoder:
    dim = 384

    def __init__(self, factory: Any) -> None:
        self._factory = factory

    def encode(self, texts: Any) -> Any:
        return self._factory().encode(texts)


def inprocess_volunteer(stdin: bytes, harness: str, db: str) -> str:
    """Today's hook pipeline in this process (no service): read-only store, light MiniLM, lazy everything."""
    from tortoise_sim.hooks import hook_volunteer_turn
    from tortoise_sim.volunteer import run_volunteer_pipeline

    store = _LazyReadStore(db)
    out, _ = hook_volunteer_turn(stdin, harness, volunteer=lambda window: run_volunteer_pipeline(store, window))
    return out


def inprocess_session_start(db: str) -> str:
    from tortoise_sim.hooks import hook_session_start

    if not os.path.exists(db):
        return ""
    store = _LazyReadStore(db)
    out, _ = hook_session_start(lambda: store._open())
    if out and os.environ.get("MEMSIM_TORTOISE_REDACTOR") == "hardened":  # tortoise_sim.redaction.mark_as_data
        from tortoise_sim.redaction import mark_as_data

        out = mark_as_data(out)
    return out


def inprocess_session_end(stdin: bytes, harness: str, db: str, spool_dir: str | None) -> str:
    """Spool the transcript, then file that session into the store (a write: opens the store read-write)."""
    from tortoise_sim.service import session_end_apply

    session_end_apply(stdin, harness, db, spool_dir, sim=None)
    return ""


def run_hook(command: str, argv: Sequence[str], stdin: bytes | None = None) -> str:
    """The hook's stdout for ``command`` (``HOOK_COMMANDS``); raises on usage errors (``main`` swallows)."""
    opts = parse_hook_args(command, argv)
    data = _read_stdin() if stdin is None else stdin
    db = default_db(opts.get("db"))
    sock = socket_path_for(db, opts.get("socket"))
    harness = opts.get("harness", DEFAULT_HARNESS if command == "hook-volunteer" else "claude")
    text = data.decode("utf-8", "replace")
    if command == "hook-volunteer":
        res = call(sock, "hook_volunteer", {"stdin": text, "harness": harness})
        if res is None:
            return inprocess_volunteer(data, harness, db)
        return str(res.get("stdout") or "")
    if command == "hook-session-start":
        res = call(sock, "hook_session_start", {})
        if res is None:
            return inprocess_session_start(db)
        return str(res.get("stdout") or "")
    spool = opts.get("spool_dir")
    res = call(sock, "hook_session_end", {"stdin": text, "harness": harness,
                                          "spool_dir": os.path.abspath(spool) if spool else None})
    if res is None:
        return inprocess_session_end(data, harness, db, spool)
    return ""


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """``memsim-hook COMMAND [options]`` / ``memsim tortoise COMMAND [options]``: print the hook output, exit 0
    whatever happens (``os._exit`` after flushing stdout: no interpreter teardown)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["tortoise"]:
        args = args[1:]
    out = ""
    try:
        _pin_threads()
        if not args:
            raise HookUsageError(f"usage: memsim-hook {{{'|'.join(HOOK_COMMANDS)}}} [options]")
        out = run_hook(args[0], args[1:])
    except HookUsageError as exc:
        _note(f"memsim hook: {exc} (ignored; printing nothing)")
    except BaseException:  # noqa: BLE001 - a hook never fails the host
        out = ""
    try:
        if out:
            sys.stdout.write(out)
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001
        pass
    os._exit(0)


def _note(msg: str) -> None:
    try:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass


if __name__ == "__main__":
    main()
