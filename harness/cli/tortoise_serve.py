"""``memsim tortoise serve``: start, stop or ask the resident Tortoise service (``tortoise_sim.service``).

The CLI's route to a running service (``ServiceSim``, used by ``open_sim``) is in ``harness.cli.tortoise_store``;
``harness.cli.tortoise`` mounts :func:`serve` on the ``memsim tortoise`` app.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from harness.cli.boundary import bad_option, describe_error, fail
from harness.cli.tortoise_store import DbOpt, check_store_path, db_path

__all__ = ["serve"]

SocketOpt = Annotated[str | None, typer.Option(
    "--socket", help="Unix socket path (default $MEMSIM_TORTOISE_SOCKET, else a short path derived from --db "
                     "under $XDG_RUNTIME_DIR or /tmp, which hooks find with no extra flag).")]


def serve(
    db: DbOpt = None,
    socket: SocketOpt = None,
    detach: Annotated[bool, typer.Option(help="Start in the background, wait until it answers, print its pid, "
                                              "socket and log file.")] = False,
    stop: Annotated[bool, typer.Option("--stop", help="Stop the service of this store and wait for it.")] = False,
    status: Annotated[bool, typer.Option("--status", help="Print the service status as JSON (exit 1 when none "
                                                          "answers; says so when a stale socket is left, or when "
                                                          "a process accepts connections but does not answer), "
                                                          "with the spool's due entries and discard ledger.")]
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
        raise bad_option("--preset", preset, ("analysed", "snapshot", "later"))
    if embedder not in ("minilm", "hashing"):
        raise bad_option("--embedder", embedder, ("minilm", "hashing"))
    if stop and status:
        raise bad_option("--stop/--status", None, "give one of them, not both")
    path = db_path(db)
    sock = socket_path_for(path, socket)
    if status:
        from tortoise_sim.hook_client import pending_sessions, spool_root
        from tortoise_sim.spool import ledger_summary

        p = probe(sock)
        root = spool_root(str(path), None)  # the session hooks' default spool (<db dir>/spool)
        spool = {"root": root, "due": len(pending_sessions(root)), **ledger_summary(root)}
        sys.stdout.write(json.dumps({"socket": sock, **p, "spool": spool}, indent=2) + "\n")
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
    except OSError as exc:  # the store path in full, as given (the OSError names only the folder that failed)
        raise fail(f"{path}: cannot serve the store: {describe_error(exc)}") from None
