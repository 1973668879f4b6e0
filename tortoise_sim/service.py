"""The resident Tortoise service: one process holds the Kuzu store, the encoder and the read caches, and is the
single Kuzu writer; hooks and the CLI talk to it over a Unix socket (protocol: ``tortoise_sim.hook_client``).

    memsim tortoise serve --db PATH [--socket PATH] [--detach]     # start (foreground unless --detach)
    memsim tortoise serve --db PATH --status                       # JSON status, exit 1 when none answers
    memsim tortoise serve --db PATH --stop                         # ask it to shut down and wait
    python -m tortoise_sim.service --db PATH [--socket PATH]       # the same server without typer

Why: a hook process pays interpreter start, imports, model load and Kuzu open on every prompt, and holds Kuzu's
exclusive lock while it runs, so a second hook or a concurrent ``diary-write`` fails. The service pays all of that
once; requests are served one at a time on the store (one lock: Kuzu connections are not shared across threads),
so a hook never meets a lock error, and writes sent to it (capture, checkpoint, diary, session-end spool flush)
are applied in arrival order. After each write the service brings the search and why-block caches up to date
before it answers, so the next hook does not pay the rebuild.

Encoder: :class:`tortoise_sim.light_encoder.LightMiniLM` (numpy, no torch), the same MiniLM mean-pooled vectors
as sentence-transformers within 1e-6, also used by the hook's in-process fallback, so both paths give the same
output. ``embedder="hashing"`` (tests) uses the simulator's hashing encoder.

Bad clients: each connection has its own thread and reads its request under one deadline (``READ_DEADLINE_S``);
a frame that is oversized (``max_request``), incomplete, not JSON, of another protocol version or naming an unknown
op gets an error frame (or, when the client is gone, a closed connection); past ``MAX_CONNECTIONS`` a connection
gets a ``Busy`` frame at once. Only store operations share the store lock, and a prompt without retrieval intent
takes no lock at all, so no client blocks another beyond the store's own serial order.

Retrieval hooks without the store lock (``read_during_write``, default "snapshot"): a retrieval hook is answered
from the read caches as they stand (:class:`_CacheView`: the search and why-block caches at the store's
``write_seq``, the encoder, nothing of Kuzu), so hooks run side by side and do not queue behind each other or
behind a write. One that arrives while a write holds the store is answered from the caches as they were when
the write began, i.e. ordered before that write: its answer is the one the serial order "this read, then the
write" gives, bit for bit (tests/tortoise_sim/test_service.py). Such readers hold the caches'
:class:`tortoise_sim.search.CacheGuard`: a writer updates a cache (mid-write, or in the refresh after it) only
once the readers inside have left, and readers arriving after that take the store lock and are answered after
the write; the refresh after the write publishes the new caches before the write is answered. A read that would
need anything beyond the caches (an input the cache does not model) takes the lock. "wait" = every retrieval
hook takes the store lock (the previous behaviour).

Who may connect: the derived socket lives in ``hook_client.socket_dir()`` (mode 0700, created or tightened by
:func:`private_socket_dir`), and the socket itself is 0600.

Start-up and crashes: the socket path comes from ``hook_client.socket_path_for`` (derived from the store path) and
a pid file sits next to it. Before binding, a socket file that no process answers on is **stale** (a crashed
service) and is removed with its pid file; a socket that answers means a service is already running (error). Kuzu's
file lock dies with the process, so a crash leaves nothing that blocks the next start.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socketserver
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .hook_client import (
    MAX_MESSAGE,
    PROTOCOL_VERSION,
    ServiceError,
    call,
    default_db,
    pid_path_for,
    socket_dir,
    socket_path_for,
)

__all__ = ["TortoiseService", "OPS", "probe", "clear_stale", "start_detached", "stop", "session_end_apply",
           "ServiceStartError", "rss_bytes", "limit_malloc_arenas", "MALLOC_ARENAS"]

OPS = ("ping", "status", "shutdown", "hook_volunteer", "hook_session_start", "hook_session_end", "hook_session_file",
       "volunteer", "context", "capture", "checkpoint", "diary_write", "diary_read", "create_point", "update_point",
       "retract")
WRITE_OPS = frozenset({"hook_session_end", "hook_session_file", "capture", "checkpoint", "diary_write",
                       "create_point", "update_point", "retract"})
READ_DEADLINE_S = 10.0  # a client has this long to send its whole request line (one sendall on loopback)
MAX_CONNECTIONS = 32  # connections served at once; one more gets a "busy" error frame and is closed
READ_MODES = ("snapshot", "wait")
HOOK_SAMPLES = 4096  # server-side times of the last retrieval hooks, for ``status`` with ``samples=True``
HOOK_SAMPLE_FIELDS = ("total_ms", "lock_wait_ms", "encode_ms", "search_why_ms", "snapshot")


MALLOC_ARENAS = 2  # glibc malloc arenas of the service process (see limit_malloc_arenas)


def limit_malloc_arenas(n: int) -> bool:
    """Cap glibc's malloc arenas for this process at ``n`` (``mallopt(M_ARENA_MAX, n)``); False where the C library
    has no such setting (not glibc). Why: every connection is served on its own thread, and glibc gives threads
    their own arenas (up to eight per core) and keeps what a search freed there for reuse, so under concurrent
    hooks the freed numpy temporaries of each arena stayed resident. Measured on the 1e5-point decision store, 8
    hook clients for 40 s: RSS +175 MiB with the default arenas, +43 MiB with two, the same hooks served (the
    Kuzu buffer pool did not grow in either run)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(-8, int(n)))  # M_ARENA_MAX
    except (OSError, AttributeError):
        return False


class _CacheMiss(Exception):
    """A read on a :class:`_CacheView` needed something beyond the read caches."""


class _CacheView:
    """The store as its read caches saw it when a write began: ``write_seq`` frozen there, the search and
    why-block cache objects of that moment, the config, the encoder and the cache / tie modes. Any other attribute
    (a Kuzu query above all) is a miss: recorded in ``missed`` and raised, and the service discards the answer
    and serves the request after the write instead."""

    _PASS = ("cfg", "embed", "search_cache_mode", "search_tie_mode")

    def __init__(self, store: Any) -> None:
        self._store = store
        self.write_seq = store.write_seq
        self._search_cache = store._search_cache
        self._why_cache = store._why_cache
        self.missed: str | None = None

    def __getattr__(self, name: str) -> Any:
        if name in _CacheView._PASS:
            return getattr(self._store, name)
        self.missed = name
        raise _CacheMiss(name)

    @staticmethod
    def current(store: Any) -> bool:
        """Whether both read caches are at the store's ``write_seq`` (a view of them is the store's state)."""
        seq = store.write_seq
        return all(getattr(getattr(store, a, None), "seq", None) == seq for a in ("_search_cache", "_why_cache"))


class ServiceStartError(RuntimeError):
    """The service cannot start (already running, store locked by another process, socket in use)."""


def rss_bytes() -> int | None:
    """Resident set size of this process (Linux ``/proc/self/status``), else None."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_pid(sock: str) -> dict[str, Any] | None:
    try:
        return json.loads(Path(pid_path_for(sock)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def probe(sock: str, timeout: float = 2.0) -> dict[str, Any]:
    """``{"state": "running", "status": {...}}`` when a service answers ``status``; ``{"state": "unresponsive",
    "note": ...}`` when a process accepts connections on the socket but does not answer within ``timeout`` seconds
    (or answers garbage); ``{"state": "stale", ...}`` when a socket or pid file is left but nothing accepts;
    ``{"state": "absent"}`` otherwise."""
    try:
        res = call(sock, "status", timeout=timeout)
    except (ServiceError, TimeoutError, OSError) as exc:
        pid = (_read_pid(sock) or {}).get("pid")
        what = (f"does not answer within {timeout:g} s" if isinstance(exc, TimeoutError)
                else f"does not answer as a Tortoise service ({exc})")
        return {"state": "unresponsive", "error": str(exc), "pid": pid,
                "note": f"a process accepts connections on {sock} but {what}"
                        + (f"; the pid file names pid {pid}" if pid else "")}
    if res is not None:
        return {"state": "running", "status": res}
    info = _read_pid(sock)
    if os.path.exists(sock) or info is not None:
        pid = (info or {}).get("pid")
        return {"state": "stale", "pid": pid, "pid_alive": bool(pid) and _pid_alive(int(pid))}
    return {"state": "absent"}


def clear_stale(sock: str) -> bool:
    """Remove a stale socket and pid file (nothing answers on the socket). Returns whether anything was removed.
    A live process named in the pid file that does not answer is left alone (``ServiceStartError``)."""
    p = probe(sock)
    if p["state"] == "running":
        raise ServiceStartError(f"a Tortoise service (pid {p['status'].get('pid')}) already serves {sock}")
    if p["state"] == "unresponsive":
        raise ServiceStartError(f"{sock}: a process accepts connections but does not answer ({p['error']})")
    if p["state"] != "stale":
        return False
    pid = p.get("pid")
    if pid and p.get("pid_alive") and pid != os.getpid() and _looks_like_service(int(pid)):
        raise ServiceStartError(f"{sock}: service pid {pid} is alive but does not accept connections; "
                                f"kill it or remove {sock}")
    for path in (sock, pid_path_for(sock)):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    return True


def _looks_like_service(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return True  # cannot tell: be careful
    return b"tortoise" in cmd and b"serv" in cmd


def session_end_apply(stdin: bytes | str, harness: str, db: str | os.PathLike[str], spool_dir: str | None,
                      sim: Any = None, reader: str | None = None) -> dict[str, Any] | None:
    """The session-end hook's work: :func:`tortoise_sim.resident.session_end_apply` (imported when called, so
    this module stays light to import for ``serve --status`` / ``--stop``)."""
    from .resident import session_end_apply as apply

    return apply(stdin, harness, db, spool_dir, sim=sim, reader=reader)


def private_socket_dir(folder: Path) -> None:
    """Make ``folder`` (the socket's) exist with mode 0700. The derived folder (:func:`socket_dir`) is tightened to
    0700 when this user owns it and refused when another user does; a folder named by ``--socket`` that already
    exists is left as it is (the socket itself is 0600)."""
    derived = os.path.abspath(folder) == os.path.abspath(socket_dir())
    if not folder.exists():
        folder.mkdir(parents=True, mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)  # mkdir's mode is masked by the umask
        return
    if not derived:
        return
    st = folder.stat()
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise ServiceStartError(f"{folder}: the socket folder belongs to another user (uid {st.st_uid})")
    if st.st_mode & 0o777 != 0o700:
        os.chmod(folder, 0o700)


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, ensure_ascii=False, default=str))


class _Handler(socketserver.BaseRequestHandler):
    """One request per connection, read under one deadline (``READ_DEADLINE_S`` for the whole line, so a client
    that sends half a frame and stalls, or trickles bytes, costs one thread for at most that long); an oversized,
    incomplete or unparsable frame gets an error frame and the connection is closed. Each connection has its own
    thread, and only store operations share the store lock, so a bad client never blocks the others."""

    server: _Server

    def handle(self) -> None:
        svc = self.server.service
        conn: Any = self.request
        if not svc.slots.acquire(blocking=False):
            svc.note_error()
            self._send(svc._err("Busy", f"the service already serves {svc.max_connections} connections; retry"))
            return
        try:
            line, problem = self._read_line(conn, svc.read_deadline_s, svc.max_request)
            if problem is not None:
                svc.note_error()
                if problem:
                    self._send(svc._err("ProtocolError", problem))
                return
            self._send(svc.handle_raw(line))
        except Exception as exc:  # noqa: BLE001 - one connection's failure never ends the service
            svc.note_error()
            self._send(svc._err("ServiceError", f"request failed: {exc or '(no message)'} ({type(exc).__name__})"))
        finally:
            svc.slots.release()

    @staticmethod
    def _read_line(conn: Any, deadline_s: float, limit: int) -> tuple[bytes, str | None]:
        """``(line, None)`` for a complete request line; ``(b"", "")`` for a connection closed before any byte
        (nothing to answer); ``(partial, reason)`` for a frame that is too large, incomplete or too slow."""
        buf = bytearray()
        deadline = time.monotonic() + deadline_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(buf), f"incomplete request: no full line within {deadline_s:g} s"
            conn.settimeout(left)
            try:
                chunk = conn.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError:
                return bytes(buf), ""
            if not chunk:
                if not buf:
                    return b"", ""
                return bytes(buf), "incomplete request: the connection closed before the end of the line"
            nl = chunk.find(b"\n")
            if nl >= 0:
                buf += chunk[:nl + 1]
                if len(buf) > limit + 1:
                    return b"", f"request larger than {limit} bytes"
                return bytes(buf), None
            buf += chunk
            if len(buf) > limit:
                return b"", f"request larger than {limit} bytes"

    def _send(self, resp: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            self.request.settimeout(self.server.service.read_deadline_s)
            self.request.sendall(json.dumps(resp, ensure_ascii=False, default=str).encode("utf-8") + b"\n")


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = False
    request_queue_size = 64
    service: TortoiseService


class TortoiseService:
    """One store, one lock, one socket. ``handle(request_dict)`` is the protocol without the socket (tests)."""

    def __init__(self, db: str | os.PathLike[str] | None = None, socket_path: str | None = None, *,
                 preset: str = "analysed", embedder: str = "minilm", read_deadline_s: float = READ_DEADLINE_S,
                 max_connections: int = MAX_CONNECTIONS, max_request: int = MAX_MESSAGE,
                 fault_hook: Any = None, read_during_write: str = "snapshot", freeze_gc: bool = True,
                 encoder_layout: str = "contiguous", malloc_arenas: int | None = MALLOC_ARENAS) -> None:
        if read_during_write not in READ_MODES:
            raise ValueError(f"read_during_write must be one of {READ_MODES}, got {read_during_write!r}")
        if malloc_arenas is not None and (not isinstance(malloc_arenas, int) or malloc_arenas < 1):
            raise ValueError(f"malloc_arenas must be a positive int or None, got {malloc_arenas!r}")
        self.malloc_arenas = malloc_arenas  # None: the C library's default arena count (the previous behaviour)
        self.read_during_write = read_during_write
        self.freeze_gc = freeze_gc  # False: the interpreter's default collector (the previous behaviour)
        if encoder_layout not in ("contiguous", "views"):
            raise ValueError(f"encoder_layout must be 'contiguous' or 'views', got {encoder_layout!r}")
        self.encoder_layout = encoder_layout  # light MiniLM projections (light_encoder.LightMiniLM.use_contiguous)
        self.db = Path(default_db(os.fspath(db) if db is not None else None))
        self.sock = socket_path_for(self.db, socket_path)
        self.preset = preset
        self.embedder = embedder
        self.read_deadline_s = read_deadline_s
        self.max_connections = max_connections
        self.max_request = max_request
        self.fault_hook = fault_hook  # passed to the store (tortoise_sim.durable steps; the kill runner's case)
        self.slots = threading.BoundedSemaphore(max_connections)
        self._count_lock = threading.Lock()
        self.lock = threading.Lock()
        self.sim: Any = None
        self.server: _Server | None = None
        self.started = time.time()
        self.requests = 0
        self.errors = 0
        self.writes = 0
        self.last_refresh_s: float | None = None
        self.snapshot_reads = 0  # retrieval hooks answered from the caches while a write was in flight
        self.view_reads = 0  # retrieval hooks answered from the cache view (no store lock)
        self._writing = False  # a write op holds the store lock
        self._refreshed_seq: int | None = None  # store.write_seq at the last cache refresh
        self.hook_samples: list[list[Any]] = []  # HOOK_SAMPLE_FIELDS of the last HOOK_SAMPLES retrieval hooks
        self.hook_count = 0
        self._tls = threading.local()  # per-request encode time
        self._view: _CacheView | None = None  # the current read caches, for lock-free retrieval hooks
        self._stopping = threading.Event()

    # ------------------------------------------------------------------ lifecycle
    def open(self) -> None:
        """Open the store (read-write: this process becomes the Kuzu writer); BLAS / OpenMP pinned to one thread
        (a spinning BLAS pool on a loaded machine turned 80 ms calls into seconds, measured)."""
        if self.db.is_file() and self.db.stat().st_size == 0:
            raise ServiceStartError(f"{self.db}: empty file (0 bytes), not a Kuzu store; remove it or pass "
                                    "another --db")
        try:
            from .resident import open_sim

            self.sim = open_sim(self.db, self.preset, self.embedder, self.fault_hook)
        except RuntimeError as exc:  # Kuzu: lock held by another process, unreadable file...
            msg = " ".join(str(exc).split())
            raise ServiceStartError(f"{self.db}: cannot open the store ({msg})") from None
        with contextlib.suppress(Exception):
            import scipy.special  # noqa: F401  (vectorised erf for the light encoder's GELU)
        with contextlib.suppress(Exception):
            from threadpoolctl import threadpool_limits

            threadpool_limits(1)  # after numpy is loaded, so its OpenBLAS is found
        store = self.sim.store
        embed = store.embed

        def timed_embed(texts: Any) -> Any:  # the query encode's share of a hook, for status
            t0 = time.perf_counter()
            try:
                return embed(texts)
            finally:
                self._tls.encode_s = getattr(self._tls, "encode_s", 0.0) + time.perf_counter() - t0

        store.embed = timed_embed

    def warm(self) -> None:
        """Load the encoder and build the caches before the first hook arrives."""
        with self.lock:
            enc = self.sim.store.encoder
            if enc is not None and hasattr(enc, "encode"):
                if self.encoder_layout == "contiguous" and hasattr(enc, "use_contiguous"):
                    enc.use_contiguous()  # same vectors (probed per length), about twice as fast per projection
                with contextlib.suppress(Exception):
                    enc.encode(["warm up"])
            with contextlib.suppress(Exception):
                from .search import _rows_exact_ok

                _rows_exact_ok()  # the near-tie engine's one-time BLAS probe, here rather than in the first hook
            self._refresh_caches(collect=True)

    def _refresh_caches(self, collect: bool = False) -> None:
        """Bring the read caches up to the store's ``write_seq``; then (``freeze_gc``) move every object alive now,
        the caches' hundreds of thousands of containers above all, out of the cyclic garbage collector's reach
        (``gc.freeze``), so no later request pays a full collection that walks them. The caches hold no reference
        cycles (a replaced cache is freed by reference counting); the young generations are collected first so
        that fresh cyclic garbage is not frozen, and ``collect`` (the warm-up) runs one full collection before."""
        t0 = time.perf_counter()
        store = self.sim.store
        if store.cfg.search_cache:
            from . import search, why

            for fn in (getattr(search, "search_cache_for", None), getattr(why, "_why_cache_for", None)):
                if fn is not None:
                    with contextlib.suppress(Exception):
                        fn(store)
            with contextlib.suppress(Exception):  # a long-lived reader: find the distinct rows now, not in a hook
                store._search_cache.prepare_dedup(store)
        from .priors import prior_index_for, prior_mode

        if prior_mode(store) == "index":  # built here, or the next capture pays the index build
            with contextlib.suppress(Exception):
                prior_index_for(store)
        pa = sys.modules.get("pyarrow")
        if pa is not None:  # the cache build's Arrow scan leaves freed pages in mimalloc: -150 MiB RSS at 1e5
            with contextlib.suppress(Exception):
                pa.default_memory_pool().release_unused()
        if self.freeze_gc:
            import gc

            gc.collect() if collect else gc.collect(1)
            gc.freeze()
        self._refreshed_seq = store.write_seq
        self._open_view()
        self.last_refresh_s = time.perf_counter() - t0

    def bind(self) -> None:
        clear_stale(self.sock)
        private_socket_dir(Path(self.sock).parent)
        old = os.umask(0o077)
        try:
            self.server = _Server(self.sock, _Handler, bind_and_activate=True)
        except OSError as exc:
            raise ServiceStartError(f"{self.sock}: cannot bind ({exc})") from None
        finally:
            os.umask(old)
        os.chmod(self.sock, 0o600)  # the umask leaves 0700; a socket needs no execute bit
        self.server.service = self
        tmp = pid_path_for(self.sock) + f".{os.getpid()}.tmp"
        Path(tmp).write_text(json.dumps({"pid": os.getpid(), "db": str(self.db.resolve()), "socket": self.sock,
                                         "started": self.started}), encoding="utf-8")
        os.replace(tmp, pid_path_for(self.sock))

    def start(self, *, warm: bool = True) -> None:
        """Limit the malloc arenas (:func:`limit_malloc_arenas`), open, bind, warm (no serving loop yet)."""
        if self.malloc_arenas is not None:
            limit_malloc_arenas(self.malloc_arenas)
        self.open()
        try:
            self.bind()
        except BaseException:
            self.sim.close()
            raise
        if warm:
            self.warm()

    def serve_forever(self) -> None:
        assert self.server is not None
        try:
            self.server.serve_forever(poll_interval=0.2)
        finally:
            self.close()

    def request_shutdown(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        if self.server is not None:
            threading.Thread(target=self.server.shutdown, daemon=True).start()

    def close(self) -> None:
        if self.server is not None:
            with contextlib.suppress(Exception):
                self.server.server_close()
        for path in (self.sock, pid_path_for(self.sock)):
            info = _read_pid(self.sock) if path == pid_path_for(self.sock) else None
            if path.endswith(".pid") and info is not None and info.get("pid") != os.getpid():
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        with self.lock:
            if self.sim is not None:
                with contextlib.suppress(Exception):
                    self.sim.close()
                self.sim = None

    # ------------------------------------------------------------------ protocol
    def note_error(self) -> None:
        with self._count_lock:
            self.errors += 1

    def handle_raw(self, line: bytes) -> dict[str, Any]:
        try:
            req = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            self.note_error()
            return self._err("ProtocolError", f"request is not one line of JSON ({exc})")
        return self.handle(req)

    def handle(self, req: Any) -> dict[str, Any]:
        self.requests += 1
        if not isinstance(req, dict):
            self.note_error()
            return self._err("ProtocolError", "request must be a JSON object")
        if req.get("v") != PROTOCOL_VERSION:
            self.note_error()
            return self._err("ProtocolError", f"unsupported protocol version {req.get('v')!r} "
                                              f"(this service speaks {PROTOCOL_VERSION})")
        op, args = req.get("op"), req.get("args") or {}
        if op not in OPS or not isinstance(args, dict):
            self.note_error()
            return self._err("ProtocolError", f"unknown op {op!r}" if op not in OPS else "args must be an object")
        try:
            result = getattr(self, f"op_{op}")(**args)
        except TypeError as exc:
            self.note_error()
            return self._err("ProtocolError", f"bad arguments for {op}: {exc}")
        except Exception as exc:  # noqa: BLE001 - reported to the caller, the service keeps running
            self.note_error()
            return self._err(type(exc).__name__, str(exc), getattr(exc, "code", None))
        return {"v": PROTOCOL_VERSION, "ok": True, "result": _jsonable(result)}

    @staticmethod
    def _err(type_: str, message: str, code: Any = None) -> dict[str, Any]:
        err: dict[str, Any] = {"type": type_, "message": message}
        if code is not None:
            err["code"] = str(code)
        return {"v": PROTOCOL_VERSION, "ok": False, "error": err}

    def _store_op(self, fn: Any, write: bool) -> Any:
        with self.lock:
            if self.sim is None:
                raise RuntimeError("service is shutting down")
            self._writing = write
            try:
                return fn(self.sim)
            finally:
                if write or self.sim.store.write_seq != self._refreshed_seq:
                    self._close_view()  # no reader of the caches as they were is left once this returns
                    if write:
                        self.writes += 1
                    self._refresh_caches()  # and reopens the view on the current caches
                self._writing = False

    def _close_view(self) -> None:
        guard = getattr(self.sim.store, "_cache_guard", None) if self.sim is not None else None
        if guard is not None:
            guard.close()
        self._view = None

    def _open_view(self) -> None:
        """With the store lock held and the read caches current: publish a view of them for the retrieval hooks
        (they answer from it without the lock until a write updates a cache) and open the store's cache guard."""
        if self.read_during_write != "snapshot" or self.sim is None:
            return
        store = self.sim.store
        if not _CacheView.current(store):
            return
        from .search import CacheGuard

        guard = getattr(store, "_cache_guard", None)
        if guard is None:
            guard = store._cache_guard = CacheGuard()
        self._view = _CacheView(store)
        guard.open()

    def _read_from_view(self, fn: Any) -> tuple[bool, Any]:
        """``(True, fn(view))`` when the cache view is open and enough for ``fn``; ``(False, None)`` otherwise
        (the caller takes the store lock)."""
        view, sim = self._view, self.sim
        if view is None or sim is None:
            return False, None
        guard = getattr(sim.store, "_cache_guard", None)
        if guard is None or not guard.enter():
            return False, None
        try:
            if self._view is not view:
                return False, None  # the caches moved on between the two reads above
            during_write = self._writing
            out = fn(view)
        finally:
            guard.leave()
        if view.missed is not None:
            return False, None
        with self._count_lock:
            self.view_reads += 1
            self.snapshot_reads += during_write
        return True, out

    # ------------------------------------------------------------------ operations
    def op_ping(self) -> dict[str, Any]:
        return {"pong": True, "pid": os.getpid(), "v": PROTOCOL_VERSION}

    def op_status(self, samples: bool = False) -> dict[str, Any]:
        store = self.sim.store if self.sim is not None else None
        cache = getattr(store, "_search_cache", None)
        return {"pid": os.getpid(), "db": str(self.db.resolve()), "socket": self.sock, "protocol": PROTOCOL_VERSION,
                "uptime_s": round(time.time() - self.started, 3), "requests": self.requests, "errors": self.errors,
                "writes": self.writes, "rss_bytes": rss_bytes(), "embedder": self.embedder, "preset": self.preset,
                "cached_points": getattr(cache, "n", None), "write_seq": getattr(store, "write_seq", None),
                "last_cache_refresh_s": self.last_refresh_s, "read_during_write": self.read_during_write,
                "snapshot_reads": self.snapshot_reads, "view_reads": self.view_reads, "hook_count": self.hook_count,
                "encoder_layout": getattr(getattr(store, "encoder", None), "layout", None),
                "malloc_arenas": self.malloc_arenas,
                **({"hook_sample_fields": list(HOOK_SAMPLE_FIELDS), "hook_samples": list(self.hook_samples)}
                   if samples is True else {})}

    def op_shutdown(self) -> dict[str, Any]:
        self.request_shutdown()
        return {"stopping": True, "pid": os.getpid()}

    def op_hook_volunteer(self, stdin: str = "", harness: str = "codex") -> dict[str, Any]:
        """The per-prompt hook. A prompt without retrieval intent (a courtesy prompt, TOR-38) never reads the
        graph, so it is answered without waiting for the store lock (a long write in progress cannot delay it)."""
        from .hooks import hook_volunteer_turn
        from .volunteer import has_intent, run_volunteer_pipeline

        def pipeline(window: list[dict[str, str]]) -> dict[str, Any]:
            if not has_intent(window[-1]["content"]):
                return run_volunteer_pipeline(None, window)  # returns before any store access (TOR-38)
            t0 = time.perf_counter()
            span = {"start": t0, "snapshot": False}
            self._tls.encode_s = 0.0

            def run(store: Any) -> dict[str, Any]:
                span["start"] = time.perf_counter()
                return run_volunteer_pipeline(store, window)

            try:
                if self.read_during_write == "snapshot":  # the current caches answer, even while a write runs
                    span["snapshot"] = self._writing
                    done, out = self._read_from_view(run)
                    if done:
                        return out
                    span["snapshot"] = False
                return self._store_op(lambda sim: run(sim.store), False)
            finally:
                self._note_hook(t0, span, getattr(self._tls, "encode_s", 0.0))

        errors: list[str] = []

        def piped(window: list[dict[str, str]]) -> dict[str, Any]:
            res = pipeline(window)
            if res.get("degraded_reason"):
                errors.append(f"the volunteer pipeline degraded ({res['degraded_reason']})")
            return res

        out, _ = hook_volunteer_turn(stdin, harness, volunteer=piped,
                                     on_error=lambda what, exc: errors.append(
                                         f"{what} failed: {type(exc).__name__}: {exc}"))
        return {"stdout": out, **({"error": errors[0]} if errors else {})}

    def _note_hook(self, t0: float, span: dict[str, Any], encode_s: float) -> None:
        """One retrieval hook's server-side times (ms): total, waiting for the store, query encode, the rest of
        the pipeline (search, why-blocks, block); the last ``HOOK_SAMPLES`` are in ``status``."""
        end = time.perf_counter()
        row = [round(1000 * (end - t0), 3), round(1000 * (span["start"] - t0), 3), round(1000 * encode_s, 3),
               round(1000 * (end - span["start"] - encode_s), 3), bool(span["snapshot"])]
        with self._count_lock:
            self.hook_samples.append(row)
            self.hook_count += 1
            del self.hook_samples[:-HOOK_SAMPLES]

    def op_hook_session_start(self, drain: bool = False, session_id: str | None = None, spool_dir: str | None = None,
                              budget_s: float = 3.0) -> dict[str, Any]:
        """The session-start hook. ``drain`` (the hook client sends it when the spool has due entries; spec §10.1
        item 18): first file every due entry but ``session_id``'s (no new entry after ``budget_s`` seconds), then
        the digest, so a session the drain filed is in it. A swallowed failure comes back as ``error`` (the hook
        client's one stderr line); stdout stays as the spec says."""
        from .hooks import hook_session_start
        from .redaction import mark_as_data, redactor_from_env
        from .resident import drain_spool, spool_root

        errors: list[str] = []

        def note(what: str, exc: BaseException) -> None:
            errors.append(f"{what} failed: {type(exc).__name__}: {exc}")

        out = ""
        if drain:
            deadline = time.monotonic() + float(budget_s)

            def run(sim: Any) -> dict[str, int]:
                try:
                    return drain_spool(sim, spool_root(self.db, spool_dir), session_id, deadline)
                except Exception as exc:  # noqa: BLE001 - the digest still follows
                    note("the session-start drain", exc)
                    return {}

            self._store_op(run, True)
        out, _ = self._store_op(lambda sim: hook_session_start(sim.store, on_error=note), False)
        res: dict[str, Any] = {"stdout": mark_as_data(out) if redactor_from_env() == "hardened" else out}
        if errors:
            res["error"] = errors[0]
        return res

    def op_hook_session_end(self, stdin: str = "", harness: str = "claude",
                            spool_dir: str | None = None, transcript_reader: str | None = None) -> dict[str, Any]:
        """Spool and file in one op (clients before the spool-first hook; the hook client now spools itself and
        sends ``hook_session_file``)."""
        counts = self._store_op(lambda sim: session_end_apply(stdin, harness, self.db, spool_dir, sim=sim,
                                                              reader=transcript_reader), True)
        return {"stdout": "", "flush": counts}

    def op_hook_session_file(self, session_id: str, spool_dir: str | None = None) -> dict[str, Any]:
        """File the session the hook client already spooled (``flush_spool(only_session_id=)`` with the capture
        key, :data:`tortoise_sim.resident.HOOK_SEND_CAPTURE_KEY`)."""
        from .resident import file_spooled, spool_root

        counts = self._store_op(lambda sim: file_spooled(self.db, spool_root(self.db, spool_dir), session_id,
                                                         sim=sim), True)
        return {"stdout": "", "flush": counts}

    def op_volunteer(self, window: Any, max_pointers: Any = 3, min_confidence: Any = 0.7,
                     prior_context: Any = None) -> dict[str, Any]:
        return self._store_op(lambda sim: sim.volunteer_context(window, max_pointers=max_pointers,
                                                                 min_confidence=min_confidence,
                                                                 prior_context=prior_context), False)

    def op_context(self) -> str:
        return self._store_op(lambda sim: sim.context(), False)

    def op_capture(self, conversation: Any, session_id: str | None = None, no_extractor: bool = False,
                   capture_key: str | None = None) -> Any:
        def run(sim: Any) -> Any:
            saved = sim.extractor
            if no_extractor:
                sim.extractor = None
            try:
                if capture_key is not None:  # the spool's key (Spool(send_capture_key=True)): idempotent capture
                    return sim.capture_session(conversation, session_id=session_id, capture_key=capture_key)
                return sim.capture_session(conversation, session_id=session_id)
            finally:
                sim.extractor = saved

        return self._store_op(run, True)

    def op_create_point(self, kind: str, content: str, credibility: str | None = None) -> Any:
        """``memsim tortoise create-point`` while the service holds the store (a user creating a point between two
        sessions need not stop the service)."""
        row = self._store_op(lambda sim: sim.create_point(kind, content, credibility=credibility), True)
        return {k: v for k, v in row.items() if k != "embedding"}

    def op_update_point(self, point_id: str, status: str) -> Any:
        """The ``--live`` promotion of ``create-point`` (only ``status`` is served)."""
        row = self._store_op(lambda sim: sim.update_point(point_id, status=status), True)
        return {k: v for k, v in row.items() if k != "embedding"}

    def op_retract(self, point_id: str, valid_to: str | None = None, dry_run: bool = False) -> Any:
        """``memsim tortoise retract`` while the service holds the store; a guard failure comes back as the
        ``LifecycleError`` with its code."""
        row = self._store_op(lambda sim: sim.retract_point(point_id, valid_to=valid_to, dry_run=bool(dry_run)),
                             not dry_run)
        return {k: v for k, v in row.items() if k != "embedding"}

    def op_checkpoint(self, items: Any, agent: str = "checkpoint", threshold: float = 0.95) -> Any:
        return self._store_op(lambda sim: sim.checkpoint(items, agent_name=agent, threshold=threshold), True)

    def op_diary_write(self, agent: str, entry: str, topic: str | None = None, wing: str | None = None) -> Any:
        row = self._store_op(lambda sim: sim.diary_write(agent, entry, topic=topic, wing=wing), True)
        return {k: v for k, v in row.items() if k != "embedding"}

    def op_diary_read(self, agent: str, last_n: int = 10, wing: str | None = None) -> Any:
        rows = self._store_op(lambda sim: sim.diary_read(agent, last_n=last_n, wing=wing), False)
        return [{k: v for k, v in r.items() if k != "embedding"} for r in rows]


# ---------------------------------------------------------------------------------------------- process control
def start_detached(db: str | os.PathLike[str] | None, socket_path: str | None = None, *, preset: str = "analysed",
                   embedder: str = "minilm", timeout: float = 180.0, log: str | None = None,
                   read_during_write: str = "snapshot") -> dict[str, Any]:
    """Start ``python -m tortoise_sim.service`` in its own session and wait until it answers (or dies)."""
    import subprocess

    dbp = default_db(os.fspath(db) if db is not None else None)
    sock = socket_path_for(dbp, socket_path)
    clear_stale(sock)
    if log is None:
        private_socket_dir(Path(sock).parent)  # the log sits next to the socket, before the service makes the folder
        log = sock + ".log"
    cmd = [sys.executable, "-m", "tortoise_sim.service", "--db", str(dbp), "--socket", sock, "--preset", preset,
           "--embedder", embedder, "--read-during-write", read_during_write]
    with open(log, "ab") as fh:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fh, stderr=fh, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = Path(log).read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:]
                reason = " ".join(tail).removeprefix("error: ") or f"see {log}"
                raise ServiceStartError(f"the service could not start: {reason}")
            with contextlib.suppress(ServiceError, TimeoutError, OSError):
                res = call(sock, "status", timeout=5.0)
                if res is not None and res.get("pid") == proc.pid and not _warming(res):
                    return {"pid": proc.pid, "socket": sock, "log": log, "status": res}
            time.sleep(0.05)
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C or SIGTERM while waiting: the caller never gets the pid,
        _end_child(proc)                     # so the service it started ends here instead of living on orphaned
        raise
    raise ServiceStartError(f"service did not answer within {timeout:.0f} s (log: {log})")


def _end_child(proc: Any) -> None:
    """End a service process this process started (by its own handle): SIGTERM, then SIGKILL after 5 s."""
    import subprocess

    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _warming(status: dict[str, Any]) -> bool:
    return status.get("last_cache_refresh_s") is None


def stop(sock: str, timeout: float = 60.0) -> dict[str, Any]:
    """Ask the service on ``sock`` to shut down; wait for its pid to exit. ``{"stopped": bool, "pid": ...}``."""
    res = call(sock, "shutdown", timeout=10.0)
    if res is None:
        removed = clear_stale(sock)
        return {"stopped": False, "stale_removed": removed}
    pid = int(res["pid"])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _pid_alive(pid) and os.path.exists(pid_path_for(sock)):
        time.sleep(0.05)
    while time.monotonic() < deadline and _pid_alive(pid):
        time.sleep(0.05)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    return {"stopped": not _pid_alive(pid), "pid": pid}


def run_foreground(db: str | os.PathLike[str] | None, socket_path: str | None = None, *, preset: str = "analysed",
                   embedder: str = "minilm", echo: Any = None, read_during_write: str = "snapshot") -> None:
    """Start and serve until ``shutdown`` or SIGTERM/SIGINT."""
    svc = TortoiseService(db, socket_path, preset=preset, embedder=embedder, read_during_write=read_during_write)
    svc.start(warm=False)

    def on_signal(signum: int, frame: Any) -> None:
        svc.request_shutdown()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, on_signal)
    threading.Thread(target=svc.warm, daemon=True).start()
    if echo is not None:
        echo(f"serving {svc.db} on {svc.sock} (pid {os.getpid()})")
    svc.serve_forever()


def pin_threads_env() -> None:
    """One BLAS / OpenMP thread (takes effect when set before numpy is imported)."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv: list[str] | None = None) -> int:
    import argparse

    pin_threads_env()

    ap = argparse.ArgumentParser(prog="python -m tortoise_sim.service", description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=None)
    ap.add_argument("--socket", default=None)
    ap.add_argument("--preset", default="analysed", choices=("analysed", "snapshot", "later"))
    ap.add_argument("--embedder", default="minilm", choices=("minilm", "hashing"))
    ap.add_argument("--read-during-write", default="snapshot", choices=READ_MODES,
                    help="a retrieval hook during a write: answered from the pre-write caches (snapshot) or after "
                         "the write (wait)")
    a = ap.parse_args(argv)
    try:
        run_foreground(a.db, a.socket, preset=a.preset, embedder=a.embedder, read_during_write=a.read_during_write,
                       echo=lambda m: print(m, file=sys.stderr, flush=True))
    except ServiceStartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
