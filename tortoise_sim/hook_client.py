"""Hook client for the resident Tortoise service: **standard library only** at import time.

A harness (Claude Code, Codex, Cline) spawns one hook process per prompt, so whatever this module imports is paid
on every prompt. It imports only the standard library; the in-process fallback imports ``tortoise_sim.hooks``
(Kuzu, numpy) and the light MiniLM encoder lazily, only when no service answers and the call needs them.

Entry points: ``memsim tortoise hook-volunteer | hook-session-start | hook-session-end [options]`` (``memsim``'s
console entry, :func:`harness.cli.entry.main`, dispatches these here before importing typer), ``memsim-hook ...`` and
``python -m tortoise_sim.hook_client ...``. Every hook exits 0 with empty stdout on any error, usage errors
(unknown options, missing values) included; a usage error prints one line on stderr. A stdin the host would never
send is named in that one line too (:mod:`tortoise_sim.hook_stdin`). ``memsim-hook --help`` prints
the usage (:data:`USAGE`) and exits 0.

A service that accepts but does not answer, answers slowly or answers garbage cannot stall a prompt: the prompt
hooks (``hook-volunteer``, ``hook-session-start``) wait at most ``$MEMSIM_HOOK_TIMEOUT`` seconds
(:data:`DEFAULT_TIMEOUT_S`) for connect, send and the whole answer together, then fail open: exit 0, nothing on
stdout, one note on stderr. (The in-process fallback cannot help then: a live service holds the store's lock.)
``hook-session-end`` runs after the session and no prompt waits on it, so it waits up to
``$MEMSIM_HOOK_END_TIMEOUT`` seconds (:data:`DEFAULT_END_TIMEOUT_S`): filing a long transcript takes longer.

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
import time

TYPE_CHECKING = False  # no runtime ``typing`` import (it pulls ``re`` and ``collections``: ~10 ms per hook)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, NoReturn

__all__ = ["PROTOCOL_VERSION", "HOOK_COMMANDS", "HARNESSES", "DEFAULT_HARNESS", "ServiceError", "default_db",
           "socket_path_for", "socket_dir", "pid_path_for", "call", "run_hook", "main", "HookUsageError",
           "HookServiceFailure", "HookFailure", "hook_timeout", "USAGE", "DEFAULT_TIMEOUT_S", "DEFAULT_END_TIMEOUT_S",
           "FILINGS", "spool_root", "pending_sessions", "spawn_filer", "session_end_turns", "hook_session_end",
           "inprocess_session_start", "drain_budget", "hook_outcome"]

PROTOCOL_VERSION = 1
HOOK_COMMANDS = ("hook-volunteer", "hook-session-start", "hook-session-end")
MAX_MESSAGE = 64 << 20
CONNECT_TIMEOUT_S = 0.5
DEFAULT_TIMEOUT_S = 1.0  # prompt hooks: a warm service answers in well under a second (``memsim bench serve``)
DEFAULT_END_TIMEOUT_S = 30.0  # session end: spool + capture of the whole transcript; no prompt waits on it
TIMEOUT_ENV = "MEMSIM_HOOK_TIMEOUT"
END_TIMEOUT_ENV = "MEMSIM_HOOK_END_TIMEOUT"

USAGE = """\
usage: memsim-hook COMMAND [options] < HOOK_JSON

Tortoise hooks for an agent harness (Claude Code, Codex, Cline). Each reads the harness's hook JSON on stdin and
always exits 0; on any error it prints nothing on stdout (a note on stderr). A stdin that is not the hook JSON
(not JSON, no string prompt) is named in that one stderr line too.

commands:
  hook-volunteer      per-prompt hook (UserPromptSubmit): prints one line with the pointer block in the
                      harness's shape when a pointer passed every gate, nothing otherwise
                      options: --harness claude|codex|devin|cline|cline-string|other (default codex), --db,
                      --socket; cline is the spec's {"contextModification": {"context": BLOCK}}, cline-string
                      prints {"contextModification": BLOCK}, the form Cline 3.0.65 delivers from a PreToolUse or
                      PostToolUse hook (its object form reached no request); Gemini CLI's BeforeAgent takes claude
  hook-session-start  session-start hook: first the drain (files every due spool entry but the live session's,
                      waiting up to $MEMSIM_HOOK_DRAIN_BUDGET s for a filer at work; nothing when nothing is
                      pending), then prints the memory digest, or one line saying there is no memory yet
                      options: --db, --socket, --spool-dir DIR, --no-drain (no drain, as the analysed hook)
  hook-session-end    session-end hook: reads the transcript (turns or transcript_path of the hook JSON) and
                      writes it to the spool first, then files that session: through the service, else as
                      --filing says; prints nothing
                      options: --harness NAME (default claude; picks the transcript reader), --db, --socket,
                      --spool-dir DIR, --transcript-reader auto|claude|claude-tools|codex|legacy (default auto),
                      --filing detached|inline|spool (default detached: a filer process outlives the hook),
                      --no-discard-ledger (a session end that spools nothing writes no discarded.jsonl row)

options:
  --db STORE          the Kuzu store (default $MEMSIM_TORTOISE_DB, else ./.memsim/tortoise.kuzu)
  --socket PATH       the resident service's socket (default $MEMSIM_TORTOISE_SOCKET, else derived from the
                      store path, as `memsim tortoise serve --db STORE` does)

environment:
  MEMSIM_HOOK_TIMEOUT      seconds a prompt hook waits for the resident service (default 1); past it the hook
                           prints nothing and notes the timeout on stderr
  MEMSIM_HOOK_END_TIMEOUT  the same for hook-session-end (default 30)
  MEMSIM_HOOK_START_DRAIN  0: no session-start drain (as --no-drain)
  MEMSIM_HOOK_DRAIN_BUDGET seconds a session-start drain may add when something is pending (default 3)
  MEMSIM_HOOK_END_FILING   detached|inline|spool (as --filing)
  MEMSIM_HOOK_END_LEDGER   0: as --no-discard-ledger

With no service answering, the hook runs in this process on the store (opened read-only for the prompt hooks).
"""

# hook-volunteer --harness: the output shape of spec §7.1 step 3 (claude/codex/devin: hookSpecificOutput JSON,
# cline: contextModification JSON, other: the raw block). The spec's default is codex. Any other value is a usage
# error (a stderr note, no output, exit 0) instead of silently behaving as "other". cline-string [SIM]: the named
# variant {"contextModification": BLOCK} that Cline CLI 3.0.65 delivers from PreToolUse/PostToolUse
# (tortoise_sim.hooks.format_hook_output).
HARNESSES = ("claude", "codex", "devin", "cline", "cline-string", "other")
DEFAULT_HARNESS = "codex"

_OPTIONS = {
    "hook-volunteer": ("--harness", "--db", "--socket"),
    "hook-session-start": ("--db", "--socket", "--spool-dir", "--no-drain"),
    "hook-session-end": ("--harness", "--db", "--socket", "--spool-dir", "--transcript-reader", "--filing",
                         "--no-discard-ledger"),
}
_FLAGS = frozenset({"--no-drain", "--no-discard-ledger"})  # options without a value

# hook-session-end --filing: how the spooled session is filed when no service answers.
#   detached (default, [SIM]): a filer process in its own session (tortoise_sim.filer) files it; the hook exits
#            right after the spool write, so a host's SessionEnd budget (Claude Code: 1.5 s, SIGTERM) cannot cut it;
#   inline:   this process files it, as before (a host that cancels the hook leaves it in the spool);
#   spool:    spool only; the next session-start drain or `memsim tortoise spool-flush` files it.
FILINGS = ("detached", "inline", "spool")
FILING_ENV = "MEMSIM_HOOK_END_FILING"
DRAIN_ENV = "MEMSIM_HOOK_START_DRAIN"  # "0": no session-start drain (the analysed snapshot's hook)
DRAIN_BUDGET_ENV = "MEMSIM_HOOK_DRAIN_BUDGET"
DEFAULT_DRAIN_BUDGET_S = 3.0  # what a session-start hook may add when something is pending (waiting + filing)
LEDGER_ENV = "MEMSIM_HOOK_END_LEDGER"  # "0": a session end that cannot be spooled writes no ledger row
TEST_SLEEP_ENV = "MEMSIM_TEST_HOOK_END_SLEEP"  # tests only: seconds to sleep right after the spool write


class ServiceError(RuntimeError):
    """The service answered with ``ok: false`` (``type``/``code`` as sent) or broke the protocol."""

    def __init__(self, message: str, type_: str = "ServiceError", code: str | None = None) -> None:
        super().__init__(message)
        self.type = type_
        self.code = code


class HookUsageError(ValueError):
    """Bad hook command line (unknown option, missing value)."""


class HookFailure(RuntimeError):
    """A hook could not do its work (a transcript it cannot read, a store it cannot open): ``main`` prints the
    message as the hook's one stderr line, stdout stays empty, exit 0."""


_FAILURES: list[str] = []  # failures swallowed inside the in-process hook paths (``on_error``); main notes the first


def _record(what: str, exc: BaseException) -> None:
    _FAILURES.append(f"{what} failed: {type(exc).__name__}: {exc}")


class HookServiceFailure(RuntimeError):
    """A service accepted the hook's connection but did not answer in time, or answered badly: the hook fails open
    (nothing on stdout) and prints this message as its one stderr note."""


def hook_timeout(env: str = TIMEOUT_ENV, default: float = DEFAULT_TIMEOUT_S) -> float:
    """Seconds from ``$env`` (a positive number), else ``default``; a value that is not one is ignored."""
    try:
        value = float(os.environ.get(env) or default)
    except ValueError:
        return default
    return value if 0 < value < float("inf") else default


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


def socket_dir() -> str:
    """The folder of the derived socket paths: ``<$XDG_RUNTIME_DIR or /tmp>/memsim-<uid>``, which the service
    creates mode 0700 (only its user may reach the socket inside; the socket itself is 0600)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(_runtime_dir(), f"memsim-{uid}")


def socket_path_for(db: str | os.PathLike[str] | None = None, socket_path: str | None = None) -> str:
    """``socket_path`` if given, else ``$MEMSIM_TORTOISE_SOCKET``, else a short path derived from the store's
    real path: ``<socket_dir()>/tortoise-<sha256[:16]>.sock`` (AF_UNIX paths are limited to ~107 bytes, so the
    store path itself cannot be used)."""
    if socket_path:
        return os.fspath(socket_path)
    env = os.environ.get("MEMSIM_TORTOISE_SOCKET")
    if env:
        return env
    real = os.path.realpath(default_db(db))
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return os.path.join(socket_dir(), f"tortoise-{digest}.sock")


def pid_path_for(sock: str) -> str:
    """The service's pid file next to its socket (JSON: pid, db, socket, started)."""
    return sock + ".pid"


def call(sock: str, op: str, args: dict[str, Any] | None = None, *, timeout: float | None = None) -> Any:
    """One request. Returns the ``result``; ``None`` means **no service answered** (no socket, connection refused:
    the caller may fall back in-process). Raises :class:`ServiceError` when the service answered with an error or
    broke the protocol, ``TimeoutError`` when it accepted but did not answer within ``timeout`` seconds (default
    :func:`hook_timeout`). The timeout bounds connect, send and the whole answer together (one deadline), so a
    service that trickles bytes cannot stretch it."""
    if timeout is None:
        timeout = hook_timeout()
    deadline = time.monotonic() + timeout
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(min(CONNECT_TIMEOUT_S, timeout))
        try:
            s.connect(sock)
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError, PermissionError, OSError):
            return None
        msg = json.dumps({"v": PROTOCOL_VERSION, "op": op, "args": args or {}}, ensure_ascii=False,
                         default=str).encode("utf-8") + b"\n"
        buf = bytearray()
        try:
            s.settimeout(max(deadline - time.monotonic(), 1e-3))
            try:
                s.sendall(msg)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the service refused the request early (busy, too large): its error frame is still readable
            while not buf.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                s.settimeout(left)
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
                if len(buf) > MAX_MESSAGE:
                    raise ServiceError("response too large")
        except TimeoutError:
            raise TimeoutError(f"no answer within {timeout:g} s") from None
        except (ConnectionResetError, BrokenPipeError) as exc:
            if not buf:
                raise ServiceError(f"service dropped the connection ({exc.strerror or exc})") from None
            raise ServiceError("service dropped the connection mid-answer") from None
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
        if name in _FLAGS:
            if eq:
                raise HookUsageError(f"option {name} takes no value")
            out[name[2:].replace("-", "_")] = "1"
            i += 1
            continue
        if not eq:
            if i + 1 >= len(argv):
                raise HookUsageError(f"option {name} needs a value")
            value = argv[i + 1]
            i += 1
        out[name[2:].replace("-", "_")] = value
        i += 1
    if command == "hook-volunteer" and out.get("harness", DEFAULT_HARNESS) not in HARNESSES:
        raise HookUsageError(f"unknown --harness {out['harness']!r}; choose one of {', '.join(HARNESSES)}")
    if out.get("filing", "detached") not in FILINGS:
        raise HookUsageError(f"unknown --filing {out['filing']!r}; choose one of {', '.join(FILINGS)}")
    if "transcript_reader" in out:
        from tortoise_sim.transcripts import READERS

        if out["transcript_reader"] not in READERS:
            raise HookUsageError(f"unknown --transcript-reader {out['transcript_reader']!r}; choose one of "
                                 f"{', '.join(READERS)}")
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

            try:
                self._store = TortoiseStore(self._path, encoder=_LazyLightEncoder(light_encoder), seed=None,
                                            read_only=True)
            except Exception as exc:
                _record(f"opening {self._path} read-only", exc)  # the pipeline swallows it: noted here
                raise
            # one statement for the search cache's read (the same table as id ranges): ranges save resident memory
            # in a long-lived service, and a hook process exits right after answering, where ranges only cost time
            self._store.scan_chunk = None
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
    """Today's hook pipeline in this process (no service): read-only store, light MiniLM, lazy everything.

    No store at ``db`` yet (a fresh install: nothing captured, nothing created) is not a failure: the pipeline's
    answer is as the spec gives it (degraded ``assembly_error``: its search cannot open a store), but the hook
    prints nothing and writes no stderr line, as ``hook-session-start`` prints its no-memory line. A degraded
    answer from a store that exists, or a store that cannot be opened, is still the hook's one stderr line."""
    from tortoise_sim.hooks import hook_volunteer_turn
    from tortoise_sim.volunteer import run_volunteer_pipeline

    store = _LazyReadStore(db)

    def pipeline(window: list[dict[str, str]]) -> dict[str, Any]:
        res = run_volunteer_pipeline(store, window)
        if res.get("degraded_reason") and not _FAILURES and os.path.exists(db):
            _FAILURES.append(f"the volunteer pipeline degraded ({res['degraded_reason']})")
        return res

    out, _ = hook_volunteer_turn(stdin, harness, volunteer=pipeline, on_error=_record)
    return out


def spool_root(db: str, spool_dir: str | None) -> str:
    """The spool folder of the session hooks: ``--spool-dir`` (absolute), else ``<db dir>/spool``."""
    if spool_dir:
        return os.path.abspath(spool_dir)
    return os.path.join(os.path.dirname(os.path.abspath(db)), "spool")


def pending_sessions(root: str, exclude_session_id: str | None = None) -> list[str]:
    """Due spool entries (``Spool.due_sessions``), found without any heavy import: a spool folder with no
    ``entries/*.meta.json`` costs one ``scandir`` (and imports nothing)."""
    try:
        with os.scandir(os.path.join(root, "entries")) as it:
            if not any(e.name.endswith(".meta.json") for e in it):
                return []
    except OSError:
        return []
    from tortoise_sim.spool import Spool

    return Spool(root, lock=False).due_sessions(int(time.time() * 1000), exclude_session_id)


def drain_budget() -> float:
    """``$MEMSIM_HOOK_DRAIN_BUDGET`` seconds (default 3): what a session-start drain may add."""
    return hook_timeout(DRAIN_BUDGET_ENV, DEFAULT_DRAIN_BUDGET_S)


def _hook_session_id(data: bytes) -> str | None:
    from tortoise_sim.hook_stdin import hook_json

    hook = hook_json(data)
    sid = hook.get("session_id") if isinstance(hook, dict) else None
    return sid if isinstance(sid, str) and sid else None


def _open_rw(db: str, deadline: float) -> Any:
    """The store opened read-write as the service opens it, retrying while another process holds Kuzu's lock,
    until ``deadline`` (``time.monotonic()``)."""
    from pathlib import Path

    from tortoise_sim.resident import open_sim

    while True:
        try:
            return open_sim(Path(db), "analysed", "minilm")
        except RuntimeError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def inprocess_session_start(db: str, root: str | None = None, pending: Sequence[str] = (),
                            exclude: str | None = None, budget: float = DEFAULT_DRAIN_BUDGET_S) -> str:
    """The digest of the store at ``db``, opened read-only; with no store there, the digest's one line saying
    there is no memory yet (nothing is created).

    With ``pending`` spool entries (spec §10.1 item 18, TOR-42): first the drain. Wait up to ``budget`` seconds for
    the filing lock (a detached filer of the last session end may hold it), then, if entries are still due, open
    the store read-write, file them oldest first (no new entry once the budget is spent; ``exclude``, the live
    session, never) and render the digest from that store, so a session the drain filed is in it."""
    if pending and root is not None:
        from tortoise_sim.spool import Spool, filer_lock

        deadline = time.monotonic() + budget
        fd = filer_lock(root, budget)
        if fd is None:
            _record("the session-start drain", TimeoutError(f"a filer held {root}/.filer.lock for {budget:g} s"))
        else:
            try:
                if Spool(root, lock=False).due_sessions(int(time.time() * 1000), exclude) \
                        and time.monotonic() < deadline:
                    out = _drain_then_digest(db, root, exclude, deadline)
                    if out is not None:
                        return _mark_digest(out)
            finally:
                os.close(fd)
    if os.path.exists(db):
        from tortoise_sim.hooks import hook_session_start

        store = _LazyReadStore(db)
        out, _ = hook_session_start(lambda: store._open(), on_error=_record)
    else:  # the copy in transcripts (equal to tortoise_sim.digest's, tested): digest imports the store and Kuzu
        from tortoise_sim.transcripts import NO_MEMORY_LINE

        out = NO_MEMORY_LINE + "\n"
    return _mark_digest(out)


def _mark_digest(out: str) -> str:
    if out and os.environ.get("MEMSIM_TORTOISE_REDACTOR") == "hardened":  # tortoise_sim.redaction.mark_as_data
        from tortoise_sim.redaction import mark_as_data

        out = mark_as_data(out)
    return out


def _drain_then_digest(db: str, root: str, exclude: str | None, deadline: float) -> str | None:
    """The in-process drain and the digest of the drained store; None when the store cannot be opened (noted)."""
    try:
        sim = _open_rw(db, deadline)
    except Exception as exc:  # noqa: BLE001 - noted; the read-only digest follows
        _record("the session-start drain (opening the store read-write)", exc)
        return None
    try:
        from tortoise_sim.hooks import hook_session_start
        from tortoise_sim.resident import drain_spool

        try:
            drain_spool(sim, root, exclude, deadline)
        except Exception as exc:  # noqa: BLE001 - the digest still follows
            _record("the session-start drain", exc)
        out, _ = hook_session_start(sim.store, on_error=_record)
        return out
    finally:
        sim.close()


def _end_discard(root: str, record: bool, sid: str, reason: str, detail: str) -> None:
    """[SIM] A session end that spools nothing writes one ledger row (``discarded.jsonl``, reason ``reason``) unless
    ``--no-discard-ledger`` / ``$MEMSIM_HOOK_END_LEDGER=0``."""
    if not record:
        return
    from tortoise_sim.spool import Spool

    try:
        Spool(root).discard(sid, None, reason, detail)
    except Exception:  # noqa: BLE001 - the stderr line still names the failure
        pass


def session_end_turns(data: bytes, harness: str, reader: str | None, root: str,
                      record: bool) -> tuple[str, list[dict[str, str]]]:
    """``(session_id, turns)`` of a session-end hook JSON (standard library: :mod:`tortoise_sim.transcripts`).
    Anything that leaves nothing to spool (stdin not a JSON object, no ``session_id``, a transcript that cannot be
    read, no turns) writes a ledger row (:func:`_end_discard`: reasons ``session_end_bad_hook_json``,
    ``session_end_no_session_id``, ``session_end_transcript_missing``, ``session_end_transcript_unreadable``,
    ``session_end_no_turns``) and raises :class:`HookFailure`."""
    from tortoise_sim.hook_stdin import hook_json
    from tortoise_sim.transcripts import TranscriptError, reader_for, transcript_turns

    hook = hook_json(data)
    if not isinstance(hook, dict):
        _end_discard(root, record, "", "session_end_bad_hook_json", "stdin is not a JSON object")
        raise HookFailure("hook-session-end: stdin is not a JSON object; nothing spooled")
    sid = hook.get("session_id")
    if not isinstance(sid, str) or not sid:
        _end_discard(root, record, "", "session_end_no_session_id", "the hook JSON has no session_id")
        raise HookFailure("hook-session-end: the hook JSON has no session_id; nothing spooled")
    try:
        turns = transcript_turns(hook, harness, reader)
    except TranscriptError as exc:
        _end_discard(root, record, sid, "session_end_" + exc.reason, str(exc))
        raise HookFailure(f"hook-session-end: {exc}; session {sid!r} not spooled") from None
    if not turns:
        where = hook.get("transcript_path") if "turns" not in hook else "turns"
        detail = f"{where}: no conversation turns (reader {reader_for(harness, reader)})"
        _end_discard(root, record, sid, "session_end_no_turns", detail)
        raise HookFailure(f"hook-session-end: {detail}; session {sid!r} not spooled")
    return sid, turns


def spawn_filer(db: str, root: str, session_id: str) -> int:
    """Start :mod:`tortoise_sim.filer` for ``session_id`` in a new session (the host's SIGTERM to this hook does
    not reach it), handing it the filing lock when it is free; its stderr goes to ``<root>/filer.log``. Returns
    its pid."""
    import subprocess

    from tortoise_sim.spool import filer_lock

    fd = filer_lock(root, 0.0)
    cmd = [sys.executable, "-m", "tortoise_sim.filer", f"--db={os.path.abspath(db)}", f"--spool-dir={root}",
           f"--session-id={session_id}"]
    fds: tuple[int, ...] = ()
    if fd is not None:
        cmd.append(f"--lock-fd={fd}")
        fds = (fd,)
    try:
        with open(os.path.join(root, "filer.log"), "ab") as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                    pass_fds=fds)
    finally:
        if fd is not None:
            os.close(fd)  # the child's copy keeps the lock
    return proc.pid


def _redact(turns: list[dict[str, str]]) -> list[dict[str, str]]:
    """Spooled turns as today (``tortoise_sim.redaction.redact_turns``): unchanged unless
    ``$MEMSIM_TORTOISE_REDACTOR=hardened`` (only then is the redactor, and detect-secrets, imported)."""
    if os.environ.get("MEMSIM_TORTOISE_REDACTOR") != "hardened":
        return turns
    from tortoise_sim.redaction import redact_turns

    return redact_turns(turns, "hardened")


def hook_session_end(data: bytes, opts: dict[str, str], db: str, sock: str) -> str:
    """Spool first, then file (see :data:`FILINGS`): the transcript is read and written to the spool here, with the
    standard library only, before anything else; a service that answers then files the spooled session
    (``hook_session_file``); with none, the ``--filing`` choice does. A hung or killed service leaves the
    session in the spool (the note says so)."""
    harness = opts.get("harness", "claude")
    root = spool_root(db, opts.get("spool_dir"))
    record = "no_discard_ledger" not in opts and os.environ.get(LEDGER_ENV, "1") != "0"
    sid, turns = session_end_turns(data, harness, opts.get("transcript_reader"), root, record)
    from tortoise_sim.spool import Spool

    Spool(root).spool_write(sid, _redact(turns), harness, "hook", socket.gethostname())
    pause = os.environ.get(TEST_SLEEP_ENV)
    if pause:
        time.sleep(float(pause))
    filing = opts.get("filing") or os.environ.get(FILING_ENV) or "detached"
    if filing not in FILINGS:
        filing = "detached"
    try:
        res = _ask(sock, "hook_session_file", {"session_id": sid, "spool_dir": root},
                   hook_timeout(END_TIMEOUT_ENV, DEFAULT_END_TIMEOUT_S), END_TIMEOUT_ENV)
    except HookServiceFailure as exc:
        raise HookServiceFailure(f"{str(exc).removesuffix('; printing nothing')}; session {sid!r} stays in the "
                                 f"spool at {root}") from None
    if res is not None:
        return ""
    if filing == "detached":
        spawn_filer(db, root, sid)
    elif filing == "inline":
        from tortoise_sim.resident import file_spooled

        file_spooled(db, root, sid)
    return ""


def resolve_transcript_path(data: bytes) -> bytes:
    """A session-end hook JSON whose ``transcript_path`` is relative, with that path made absolute against this
    process's working directory (the harness's), so a service running elsewhere reads the same file. Anything
    else is returned unchanged."""
    from tortoise_sim.hook_stdin import hook_json

    hook = hook_json(data)
    path = hook.get("transcript_path") if isinstance(hook, dict) else None
    if not isinstance(path, str) or not path or os.path.isabs(path):
        return data
    hook["transcript_path"] = os.path.abspath(path)
    return json.dumps(hook, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _ask(sock: str, op: str, args: dict[str, Any], timeout: float, env: str) -> Any:
    """:func:`call`, with a service that times out or answers badly turned into :class:`HookServiceFailure`."""
    try:
        return call(sock, op, args, timeout=timeout)
    except TimeoutError:
        raise HookServiceFailure(f"the Tortoise service on {sock} accepted the connection but did not answer "
                                 f"within {timeout:g} s (${env}); printing nothing") from None
    except ServiceError as exc:
        raise HookServiceFailure(f"the Tortoise service on {sock} failed: {exc}; printing nothing") from None


def run_hook(command: str, argv: Sequence[str], stdin: bytes | None = None) -> str:
    """The hook's stdout for ``command`` (``HOOK_COMMANDS``); raises on usage errors and
    :class:`HookServiceFailure` (``main`` turns both into one stderr note and empty stdout)."""
    opts = parse_hook_args(command, argv)
    data = _read_stdin() if stdin is None else stdin
    db = default_db(opts.get("db"))
    sock = socket_path_for(db, opts.get("socket"))
    harness = opts.get("harness", DEFAULT_HARNESS if command == "hook-volunteer" else "claude")
    timeout = hook_timeout()
    if command == "hook-volunteer":
        res = _ask(sock, "hook_volunteer", {"stdin": data.decode("utf-8", "replace"), "harness": harness}, timeout,
                   TIMEOUT_ENV)
        if res is None:
            return inprocess_volunteer(data, harness, db)
        if res.get("error"):
            _FAILURES.append(str(res["error"]))
        return str(res.get("stdout") or "")
    if command == "hook-session-start":
        root = spool_root(db, opts.get("spool_dir"))
        drain = "no_drain" not in opts and os.environ.get(DRAIN_ENV, "1") != "0"
        pending = pending_sessions(root) if drain else []
        sid = None
        if pending:
            sid = _hook_session_id(data)
            pending = [p for p in pending if p != sid]
        budget = drain_budget()
        if pending and _ask(sock, "ping", {}, timeout, TIMEOUT_ENV) is None:
            # something to drain: a ping first (answered without the store lock), so a service that does not
            # answer costs the prompt MEMSIM_HOOK_TIMEOUT, as with nothing pending, not that plus the drain budget
            return inprocess_session_start(db, root, pending, sid, budget)
        # nothing pending: the request of before (an older service answers it too)
        args = {"drain": True, "session_id": sid, "spool_dir": root, "budget_s": budget} if pending else {}
        res = _ask(sock, "hook_session_start", args, timeout + (budget if pending else 0.0), TIMEOUT_ENV)
        if res is None:
            return inprocess_session_start(db, root, pending, sid, budget)
        if res.get("error"):
            _FAILURES.append(str(res["error"]))
        return str(res.get("stdout") or "")
    return hook_session_end(resolve_transcript_path(data), opts, db, sock)


def hook_outcome(args: Sequence[str], stdin: bytes | None = None) -> tuple[str, str | None]:
    """``(stdout, stderr line or None)`` of one hook run, ``args`` = ``[COMMAND, options...]``, as :func:`main`
    prints them (and the typer commands of ``harness.cli.tortoise``, which delegate here): never raises; a usage
    error, a :class:`HookFailure`, a service failure or any exception is empty stdout and one line; a failure the
    in-process path swallowed is the run's stdout and its line. Swallowed failures of an earlier run in this
    process are forgotten first. With nothing else to say, the line names what is wrong with the stdin, if anything
    (:func:`tortoise_sim.hook_stdin.stdin_problem`: a stdin that is not the host's hook JSON or has no prompt)."""
    _FAILURES.clear()
    what = args[0] if args else "hook"
    try:
        if not args:
            raise HookUsageError(f"usage: memsim-hook {{{'|'.join(HOOK_COMMANDS)}}} [options] (see --help)")
        stdin = _read_stdin() if stdin is None else stdin
        out = run_hook(args[0], args[1:], stdin)
    except HookUsageError as exc:
        return "", f"memsim hook: {exc} (ignored; printing nothing)"
    except (HookServiceFailure, HookFailure) as exc:
        return "", f"memsim hook: {exc}"
    except BaseException as exc:  # noqa: BLE001 - a hook never fails the host: one stderr line, nothing on stdout
        return "", f"memsim hook: {what} failed: {type(exc).__name__}: {exc}"
    if _FAILURES:  # a failure the in-process path swallowed (stdout as the spec says: usually empty)
        return out, f"memsim hook: {what}: {_FAILURES[0]}"
    from tortoise_sim.hook_stdin import stdin_problem

    problem = stdin_problem(what, stdin)  # a stdin the host would never send: named, stdout as the spec says
    return out, None if problem is None else f"memsim hook: {what}: {problem}"


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """``memsim-hook COMMAND [options]`` / ``memsim tortoise COMMAND [options]``: print the hook output, exit 0
    whatever happens (``os._exit`` after flushing stdout: no interpreter teardown)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["tortoise"]:
        args = args[1:]
    out = ""
    try:
        _pin_threads()
        if args and (args[0] in ("-h", "--help", "help")
                     or (args[0] in HOOK_COMMANDS and ("--help" in args or "-h" in args))):
            out = USAGE
        else:
            out, note = hook_outcome(args)
            if note:
                _note(note)
    except BaseException as exc:  # noqa: BLE001 - a hook never fails the host
        _note(f"memsim hook: failed: {type(exc).__name__}: {exc}")
    try:
        if out:
            sys.stdout.write(out)
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001
        pass
    os._exit(0)


def _note(msg: str) -> None:
    """One stderr line (newlines inside ``msg`` become spaces)."""
    try:
        sys.stderr.write(" ".join(msg.splitlines()) + "\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass


if __name__ == "__main__":
    main()
