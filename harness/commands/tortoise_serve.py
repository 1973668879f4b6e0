"""``memsim tortoise serve``: the resident Tortoise service (``tortoise_sim.service``), and the CLI's route to it.

While a service holds a store, it is the store's only Kuzu writer: ``open_sim`` in ``harness.commands.tortoise``
returns a :class:`ServiceSim` for that store, which sends ``capture``, ``checkpoint``, ``diary-write``,
``diary-read``, ``volunteer``, ``context`` and ``spool-flush`` to the service; any other command stops with a
one-line error naming the service (stop it first with ``memsim tortoise serve --stop``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.commands import fail
from harness.commands.tortoise import DbOpt, app, check_store_path, db_path

__all__ = ["serve", "ServiceSim", "service_sim", "CLI_TIMEOUT_S"]

CLI_TIMEOUT_S = 300.0  # a CLI command sent to the service (a capture of a long transcript) waits this long
STATUS_TIMEOUT_S = 3.0  # the CLI's first question to a service (``status`` never waits for the store lock)

SocketOpt = Annotated[str | None, typer.Option(
    "--socket", help="Unix socket path (default $MEMSIM_TORTOISE_SOCKET, else a short path derived from --db "
                     "under $XDG_RUNTIME_DIR or /tmp, which hooks find with no extra flag).")]


def _rebuild_error(exc: Any) -> BaseException:
    """The service's error as the exception type the in-process call would have raised (same CLI message)."""
    import builtins

    from tortoise_sim import errors

    cls = getattr(errors, exc.type, None) or getattr(builtins, exc.type, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        if exc.code is not None:
            try:
                return cls(exc.code)
            except Exception:  # noqa: BLE001
                pass
        try:
            return cls(str(exc))
        except Exception:  # noqa: BLE001
            pass
    return RuntimeError(f"service: {exc.type}: {exc}")


class ServiceSim:
    """The subset of ``Tortoise`` the CLI uses, answered by the service on ``sock``."""

    def __init__(self, path: Path, sock: str, status: dict[str, Any], preset: str = "analysed") -> None:
        from tortoise_sim import SimConfig

        self.path, self.sock, self.status = path, sock, status
        self.cfg = SimConfig.preset(preset)
        self.extractor: Any = "service"

    def _call(self, op: str, **args: Any) -> Any:
        from tortoise_sim.hook_client import ServiceError, call

        try:
            res = call(self.sock, op, args, timeout=CLI_TIMEOUT_S)
        except ServiceError as exc:
            raise _rebuild_error(exc) from None
        except TimeoutError:
            raise fail(f"{self.path}: the Tortoise service on {self.sock} did not answer within "
                       f"{CLI_TIMEOUT_S:g} s; see `memsim tortoise serve --status --db {self.path}`") from None
        if res is None:
            raise fail(f"{self.path}: the Tortoise service on {self.sock} stopped answering; run the command again")
        return res

    def capture_session(self, conversation: Any, session_id: str | None = None) -> Any:
        return self._call("capture", conversation=conversation, session_id=session_id,
                          no_extractor=self.extractor is None)

    def checkpoint(self, items: Any, agent_name: str = "checkpoint", threshold: float = 0.95) -> Any:
        return self._call("checkpoint", items=items, agent=agent_name, threshold=threshold)

    def diary_write(self, agent: str, entry: str, topic: str | None = None, wing: str | None = None) -> Any:
        return self._call("diary_write", agent=agent, entry=entry, topic=topic, wing=wing)

    def diary_read(self, agent: str, last_n: int = 10, wing: str | None = None) -> Any:
        return self._call("diary_read", agent=agent, last_n=last_n, wing=wing)

    def volunteer_context(self, window: Any, **kw: Any) -> Any:
        return self._call("volunteer", window=window, **kw)

    def context(self) -> str:
        return self._call("context")

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        raise fail(f"{self.path}: held by the Tortoise service (pid {self.status.get('pid')}, socket {self.sock}), "
                   f"which applies only capture, checkpoint, diary-write/read, volunteer, context and spool-flush; "
                   f"stop it first: memsim tortoise serve --stop --db {self.path}")


def service_sim(path: Path, preset: str = "analysed") -> ServiceSim | None:
    """A :class:`ServiceSim` when a service answers for ``path``, else None (the caller opens Kuzu itself)."""
    from tortoise_sim.hook_client import ServiceError, call, socket_path_for

    sock = socket_path_for(path)
    try:
        status = call(sock, "status", timeout=STATUS_TIMEOUT_S)  # answered without the store lock
    except TimeoutError:
        raise fail(f"{path}: a process accepts connections on {sock} but does not answer within "
                   f"{STATUS_TIMEOUT_S:g} s; see `memsim tortoise serve --status --db {path}`") from None
    except (ServiceError, OSError):
        return None
    return ServiceSim(path, sock, status, preset) if status is not None else None


@app.command()
def serve(
    db: DbOpt = None,
    socket: SocketOpt = None,
    detach: Annotated[bool, typer.Option(help="Start in the background, wait until it answers, print its pid, "
                                              "socket and log file.")] = False,
    stop: Annotated[bool, typer.Option("--stop", help="Stop the service of this store and wait for it.")] = False,
    status: Annotated[bool, typer.Option("--status", help="Print the service status as JSON (exit 1 when none "
                                                          "answers; says so when a stale socket is left, or when "
                                                          "a process accepts connections but does not answer).")]
    = False,
    preset: Annotated[str, typer.Option(help="Version profile: analysed, snapshot or later.")] = "analysed",
    embedder: Annotated[str, typer.Option(help="minilm (numpy MiniLM, the default) or hashing (tests).")] = "minilm",
) -> None:
    """Resident Tortoise service: one process holds the store, the MiniLM encoder and the search caches and is
    the store's only Kuzu writer; hooks (`memsim tortoise hook-*`) and the CLI find it from the same --db and
    talk to it over a Unix socket. Runs in the foreground until Ctrl-C / SIGTERM / `serve --stop`."""
    from tortoise_sim.hook_client import socket_path_for
    from tortoise_sim.service import ServiceStartError, probe, run_foreground, start_detached
    from tortoise_sim.service import stop as stop_service

    if preset not in ("analysed", "snapshot", "later"):
        raise fail(f"--preset must be analysed, snapshot or later, not {preset!r}")
    if embedder not in ("minilm", "hashing"):
        raise fail(f"--embedder must be minilm or hashing, not {embedder!r}")
    if stop and status:
        raise fail("--stop and --status are exclusive")
    path = db_path(db)
    sock = socket_path_for(path, socket)
    if status:
        p = probe(sock)
        sys.stdout.write(json.dumps({"socket": sock, **p}, indent=2) + "\n")
        if p.get("note"):
            sys.stderr.write(p["note"] + "\n")
        raise typer.Exit(0 if p["state"] == "running" else 1)
    if stop:
        res = stop_service(sock)
        sys.stdout.write(json.dumps({"socket": sock, **res}) + "\n")
        return
    check_store_path(path, must_exist=False)  # a directory or a 0-byte file is refused as `capture` does
    try:
        if detach:
            res = start_detached(path, sock, preset=preset, embedder=embedder)
            sys.stdout.write(json.dumps({k: res[k] for k in ("pid", "socket", "log")}) + "\n")
            sys.stderr.write(f"store: {path}\nsocket: {res['socket']}\nlog: {res['log']}\n")
            return
        run_foreground(path, sock, preset=preset, embedder=embedder,
                       echo=lambda m: sys.stderr.write(m + "\n"))
    except ServiceStartError as exc:
        raise fail(str(exc)) from None
