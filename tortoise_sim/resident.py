"""Opening a store the way the resident service holds it, and the session-end hook's work (spool the transcript,
then file it), shared by the service (:mod:`tortoise_sim.service`) and the standard-library hook client's
in-process fallback (:mod:`tortoise_sim.hook_client`). It sits above :mod:`tortoise_sim.sdk` and
:mod:`tortoise_sim.hooks`, so neither the client and the service nor the hooks and the SDK import each other."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from .transcripts import transcript_turns

__all__ = ["session_end_apply", "open_sim", "file_spooled", "drain_spool", "spool_root", "HOOK_SEND_CAPTURE_KEY"]

HOOK_SEND_CAPTURE_KEY = True
"""The hook path's filing posts with the entry's capture key (``Spool(send_capture_key=True)``, hardened, made the
hook path's default): ``Tortoise.capture_session(capture_key=)`` drops a re-post of a capture already filed, so a
filing that was cancelled or killed after the capture and retried later (the next drain or ``spool-flush``) does not
store the session twice."""


def spool_root(db: str | os.PathLike[str], spool_dir: str | os.PathLike[str] | None) -> Path:
    """``spool_dir``, else ``<db dir>/spool`` (the session-end hook's default)."""
    return Path(spool_dir) if spool_dir else Path(os.fspath(db)).parent / "spool"


def session_end_apply(stdin: bytes | str, harness: str, db: str | os.PathLike[str], spool_dir: str | None,
                      sim: Any = None, reader: str | None = None,
                      send_capture_key: bool = HOOK_SEND_CAPTURE_KEY) -> dict[str, Any] | None:
    """The session-end hook's work (as ``memsim tortoise hook-session-end``): read the turns
    (:func:`tortoise_sim.transcripts.transcript_turns` with ``harness`` / ``reader``), spool them, then file that
    session into the store at ``db``. ``sim`` = the resident service's ``Tortoise``; None opens the store here
    (read-write). The standard-library hook client spools by itself first and then calls :func:`file_spooled`."""
    import socket as _socket

    from .spool import Spool

    text = stdin.decode("utf-8", "replace") if isinstance(stdin, bytes | bytearray) else str(stdin)
    hook = json.loads(text)
    if not isinstance(hook, dict):
        return None
    sid = hook.get("session_id")
    turns = transcript_turns(hook, harness, reader)
    if not (isinstance(sid, str) and sid and turns):
        return None
    root = spool_root(db, spool_dir)
    sp = Spool(root)
    from .redaction import redact_turns, redactor_from_env

    sp.spool_write(sid, redact_turns(turns, redactor_from_env()), harness, "hook", _socket.gethostname())
    return file_spooled(db, root, sid, sim=sim, send_capture_key=send_capture_key)


def file_spooled(db: str | os.PathLike[str], spool_dir: str | os.PathLike[str], session_id: str, sim: Any = None,
                 send_capture_key: bool = HOOK_SEND_CAPTURE_KEY) -> dict[str, Any]:
    """File the already-spooled session ``session_id`` (``flush_spool(only_session_id=)``) into the store at ``db``;
    ``sim`` None opens the store here read-write (and closes it)."""
    from .spool import Spool, local_capture_post

    sp = Spool(Path(spool_dir), send_capture_key=send_capture_key)
    own = sim is None
    if own:
        sim = open_sim(Path(os.fspath(db)), "analysed", "minilm")
    try:
        return sp.flush_spool(local_capture_post(sim.capture_session), int(time.time() * 1000),
                              only_session_id=session_id)
    finally:
        if own:
            sim.close()


def drain_spool(sim: Any, spool_dir: str | os.PathLike[str], exclude_session_id: str | None = None,
                deadline: float | None = None, send_capture_key: bool = HOOK_SEND_CAPTURE_KEY) -> dict[str, int]:
    """The session-start drain (spec §10.1 item 18): flush every due entry except ``exclude_session_id`` (the live
    session's) into ``sim``, oldest first, one entry at a time; no entry is started once ``time.monotonic()`` passed
    ``deadline`` (the hook's budget). Returns the summed flush counts (plus ``left``: due entries not started)."""
    from .spool import Spool, local_capture_post

    sp = Spool(Path(spool_dir), send_capture_key=send_capture_key)
    post = local_capture_post(sim.capture_session)
    total: dict[str, int] = {}
    due = sp.due_sessions(int(time.time() * 1000), exclude_session_id)
    left = 0
    for sid in due:
        if deadline is not None and time.monotonic() >= deadline:
            left += 1
            continue
        if sid.startswith("unreadable:"):  # a corrupt meta: a whole flush handles it (it never posts)
            counts = sp.flush_spool(post, int(time.time() * 1000), only_session_id="\0none",
                                    exclude_session_id=exclude_session_id)
        else:
            counts = sp.flush_spool(post, int(time.time() * 1000), only_session_id=sid)
        for k, v in counts.items():
            total[k] = total.get(k, 0) + v
    total["left"] = left
    return total


def open_sim(path: Path, preset: str, embedder: str, fault_hook: Any = None) -> Any:
    """A read-write ``Tortoise`` on ``path`` as the resident service opens it (redactor from the environment, the
    light MiniLM encoder unless ``embedder="hashing"``, optional durable-step ``fault_hook``)."""
    from .config import SimConfig
    from .redaction import redactor_from_env
    from .sdk import Tortoise

    cfg = SimConfig.preset(preset, redactor=redactor_from_env())
    if embedder == "hashing":
        from dataclasses import replace

        cfg = replace(cfg, embedder="hashing")
        enc = None
    else:
        from .light_encoder import light_encoder

        enc = light_encoder()
    if fault_hook is None:
        return Tortoise(path, config=cfg, encoder=enc, seed=None)
    from .config import FaultHooks

    return Tortoise(path, config=cfg, encoder=enc, seed=None, faults=FaultHooks(step=fault_hook))
