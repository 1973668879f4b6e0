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

from .hooks import transcript_turns

__all__ = ["session_end_apply", "open_sim"]


def session_end_apply(stdin: bytes | str, harness: str, db: str | os.PathLike[str], spool_dir: str | None,
                      sim: Any = None) -> dict[str, Any] | None:
    """The session-end hook's work (as ``memsim tortoise hook-session-end``): spool the transcript, then file that
    session into the store at ``db``. ``sim`` = the resident service's ``Tortoise``; None opens the store here
    (read-write)."""
    import socket as _socket

    from .spool import Spool, local_capture_post

    text = stdin.decode("utf-8", "replace") if isinstance(stdin, bytes | bytearray) else str(stdin)
    hook = json.loads(text)
    if not isinstance(hook, dict):
        return None
    sid = hook.get("session_id")
    turns = transcript_turns(hook)
    if not (isinstance(sid, str) and sid and turns):
        return None
    root = Path(spool_dir) if spool_dir else Path(os.fspath(db)).parent / "spool"
    sp = Spool(root)
    from .redaction import redact_turns, redactor_from_env

    sp.spool_write(sid, redact_turns(turns, redactor_from_env()), harness, "hook", _socket.gethostname())
    own = sim is None
    if own:
        sim = open_sim(Path(os.fspath(db)), "analysed", "minilm")
    try:
        return sp.flush_spool(local_capture_post(sim.capture_session), int(time.time() * 1000),
                              only_session_id=sid)
    finally:
        if own:
            sim.close()


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
